//! Replica operations (spec §2.3, §4.2; docs/decisions.md "Replicas").

use std::sync::Arc;

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::query::{self, Int, Named, OneOf};
use super::Timestamp;
use super::{Operation, Serve};
use crate::app::App;
use crate::error::Result;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::derived::legacy_names;
use crate::openapi::operations::op;
use crate::service::channel::Bot;
use crate::service::integrations::IntegrationView;
use crate::service::replicas;
use crate::service::replicas::{
    GREETING_MAX, KINDS, MEMORY_MODES, NAME_MAX, PURPOSE_MAX, SUGGESTED_QUESTIONS_MAX, SYSTEM_MESSAGE_MAX, TAGS_MAX,
    VOICE_PREVIEW_MAX,
};
use crate::store::records::Replica;

/// `llm.model`'s description in the document.
const MODEL_DOC: &str = "A key of the model catalog (GET /v1/replicas/models).";
/// `llm.memoryMode`'s description in the document.
const MEMORY_MODE_DOC: &str = "Deprecated (spec §9); stored and returned, no effect.";
/// `llm.embeddingModel`'s description in the document.
const EMBEDDING_MODEL_DOC: &str = "The embedding model the replica's knowledge base is searched with (hybrid \
    retrieval: BM25 and vectors). Ours: an id of the operator's embedding-model catalog (`replicad serve \
    --embedding-models`); absent on create → the catalog's default, stored; an id not in the catalog → 400 naming \
    its ids. A catalog entry may declare aliases (a hosted catalog's ids, such as `multilingual-e5-large`) that it \
    serves: a replica created with an alias is embedded by that entry and reads back the alias it was given. As \
    the hosted service, it cannot be changed once set: a replacement naming another → 409 EMBEDDING_MODEL_FIXED \
    (absent → kept). With no catalog configured, retrieval is BM25 alone and the value is stored as given.";

/// The ids the hosted document's `llm.embeddingModel` enum allows: the only values a read or list
/// puts in that field, since a client generated from that document rejects any other value and
/// then cannot read or list the replica at all; other ids are in `embeddingModelId`.
pub const HOSTED_EMBEDDING_IDS: [&str; 2] = ["multilingual-e5-large", "qwen3-embedding-8b"];

/// `llm.embeddingModel`'s description in reads and lists.
const EMBEDDING_MODEL_READ_DOC: &str = "The replica's embedding model when it is one of the hosted service's ids     (an alias the operator's catalog declares); left out otherwise, so that clients generated from the hosted     document, whose enum holds only those ids, read every replica. `embeddingModelId` always gives it.";

/// `llm.embeddingModelId`'s description.
const EMBEDDING_MODEL_ID_DOC: &str = "Ours: the replica's embedding model, as stored (an id or alias of the     operator's embedding-model catalog, e.g. `all-minilm-l6-v2` or `multilingual-e5-small`; the catalog's default     when the replica was created without one); absent when none is stored.";

/// The `llm` object of a create/update body.
#[derive(Deserialize, Default, Debug, Clone, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct LlmBody {
    #[schemars(description = MODEL_DOC)]
    pub model: Option<String>,
    #[schemars(description = MEMORY_MODE_DOC)]
    #[schemars(extend("enum" = MEMORY_MODES, "default" = "rag-search", "deprecated" = true))]
    pub memory_mode: Option<String>,
    #[schemars(length(max = SYSTEM_MESSAGE_MAX))]
    pub system_message: Option<String>,
    #[schemars(description = EMBEDDING_MODEL_DOC)]
    pub embedding_model: Option<String>,
}

/// Create and update body (unknown fields are ignored; legacy names are aliases).
#[derive(Deserialize, Debug, Clone, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ReplicaWrite", transform = legacy_body_names)]
pub struct ReplicaBody {
    #[schemars(length(min = 1, max = NAME_MAX))]
    pub name: String,
    #[serde(alias = "short_description")]
    #[schemars(length(max = NAME_MAX))]
    pub short_description: String,
    #[serde(alias = "introduction")]
    #[schemars(length(max = GREETING_MAX))]
    pub greeting: String,
    /// The owner: a user id or the e-mail address of a user of the organization.
    #[serde(rename = "ownerID", alias = "owner_uuid")]
    pub owner_id: String,
    /// Unique per organization (409 SLUG_TAKEN).
    #[schemars(length(min = 1, max = NAME_MAX))]
    pub slug: String,
    pub llm: LlmBody,
    #[schemars(length(max = PURPOSE_MAX))]
    pub purpose: Option<String>,
    #[serde(rename = "type")]
    #[schemars(extend("enum" = KINDS, "default" = "character"))]
    pub kind: Option<String>,
    /// A private replica is visible only to its owner and to users whose e-mail is in
    /// whitelistEmails; to others it does not exist (404).
    #[schemars(extend("default" = false))]
    pub private: Option<bool>,
    #[serde(default)]
    #[schemars(length(max = TAGS_MAX.0), inner(length(min = 1, max = TAGS_MAX.1)))]
    pub tags: Vec<String>,
    #[serde(default)]
    #[schemars(length(max = SUGGESTED_QUESTIONS_MAX.0), inner(length(min = 1, max = SUGGESTED_QUESTIONS_MAX.1)))]
    pub suggested_questions: Vec<String>,
    #[serde(default)]
    #[schemars(inner(email), extend("default" = []))]
    pub whitelist_emails: Vec<String>,
    #[serde(alias = "profile_image")]
    #[schemars(url)]
    pub profile_image: Option<String>,
    #[schemars(length(max = VOICE_PREVIEW_MAX))]
    pub voice_preview_text: Option<String>,
    /// Beta.
    #[serde(rename = "voice_enabled")]
    pub voice_enabled: Option<bool>,
    /// Beta.
    #[serde(rename = "video_enabled")]
    pub video_enabled: Option<bool>,
    #[serde(alias = "isAccessibleByCustomerSupport")]
    pub is_every_conversation_accessible_by_support: Option<bool>,
    #[schemars(extend("default" = true))]
    pub is_private_conversations_enabled: Option<bool>,
    #[serde(rename = "voiceVendorID")]
    pub voice_vendor_id: Option<String>,
    /// Legacy name of `llm.systemMessage`.
    #[serde(rename = "system_message")]
    #[schemars(length(max = SYSTEM_MESSAGE_MAX), extend("deprecated" = true))]
    pub system_message: Option<String>,
}

/// The legacy names [`ReplicaBody`] reads (its `serde(alias)`es), in the document.
fn legacy_body_names(schema: &mut Schema) {
    legacy_names(
        schema,
        &[
            ("isAccessibleByCustomerSupport", "isEveryConversationAccessibleBySupport"),
            ("short_description", "shortDescription"),
            ("introduction", "greeting"),
            ("owner_uuid", "ownerID"),
            ("profile_image", "profileImage"),
        ],
    );
}

impl From<ReplicaBody> for replicas::ReplicaInput {
    fn from(b: ReplicaBody) -> replicas::ReplicaInput {
        let l = b.llm;
        replicas::ReplicaInput {
            name: b.name,
            short_description: b.short_description,
            greeting: b.greeting,
            owner_id: b.owner_id,
            slug: b.slug,
            llm: replicas::LlmInput {
                model: l.model,
                memory_mode: l.memory_mode,
                system_message: l.system_message,
                embedding_model: l.embedding_model,
            },
            purpose: b.purpose,
            kind: b.kind,
            private: b.private,
            tags: b.tags,
            suggested_questions: b.suggested_questions,
            whitelist_emails: b.whitelist_emails,
            profile_image: b.profile_image,
            voice_preview_text: b.voice_preview_text,
            voice_enabled: b.voice_enabled,
            video_enabled: b.video_enabled,
            is_every_conversation_accessible_by_support: b.is_every_conversation_accessible_by_support,
            is_private_conversations_enabled: b.is_private_conversations_enabled,
            voice_vendor_id: b.voice_vendor_id,
            system_message: b.system_message,
        }
    }
}

/// The `llm` object of a replica on the wire.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
struct LlmView<'a> {
    #[schemars(description = MODEL_DOC)]
    model: &'a str,
    #[schemars(description = MEMORY_MODE_DOC)]
    #[schemars(extend("enum" = MEMORY_MODES, "default" = "rag-search", "deprecated" = true))]
    memory_mode: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(description = EMBEDDING_MODEL_READ_DOC)]
    #[schemars(extend("enum" = HOSTED_EMBEDDING_IDS))]
    embedding_model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(description = EMBEDDING_MODEL_ID_DOC)]
    embedding_model_id: Option<&'a str>,
}

/// `knowledgeBase` (our own field): the counts behind `distilledKnowledge`.
#[derive(Serialize, JsonSchema)]
#[schemars(inline, description = "")]
struct KbCounts<'a> {
    entries: u64,
    titles: &'a [String],
}

/// A replica on the wire (docs/decisions.md "Replicas"), read and list alike: current names, the
/// older snake_case block, `distilledKnowledge` (a string) and, of our own, `knowledgeBase
/// {entries, titles}`. Absent optional values are omitted, except the fields the hosted
/// document requires in list items: `profile_image` (nullable: `null`) and `system_message`
/// (a string: `""`). `messengerA_integration` /
/// `messengerB_integration` (one per bot, [`Integrations`]) are `null` or the bot's view;
/// `ownerID` / `owner_uuid` are the owner's id as users see it (`User::public_id`).
///
/// Serialized straight from the record's fields (no intermediate JSON tree): a replica list is
/// 24 of these per request, and lists are among the most frequent reads.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Replica")]
pub struct ReplicaView<'a> {
    uuid: uuid::Uuid,
    name: &'a str,
    slug: &'a str,
    tags: &'a [String],
    #[serde(rename = "shortDescription")]
    short_description: &'a str,
    greeting: &'a str,
    #[serde(rename = "type")]
    #[schemars(extend("enum" = KINDS))]
    kind: &'a str,
    /// The owner's user id (see `User.id`).
    #[serde(rename = "ownerID")]
    owner_id: &'a str,
    private: bool,
    #[serde(rename = "whitelistEmails")]
    whitelist_emails: &'a [String],
    #[serde(rename = "suggestedQuestions")]
    suggested_questions: &'a [String],
    voice_enabled: bool,
    video_enabled: bool,
    llm: LlmView<'a>,
    #[serde(flatten)]
    integrations: Integrations<'a>,
    /// Legacy copy of `isEveryConversationAccessibleBySupport`.
    #[serde(rename = "isAccessibleByCustomerSupport")]
    #[schemars(extend("deprecated" = true))]
    accessible_by_support: bool,
    #[serde(rename = "isEveryConversationAccessibleBySupport")]
    every_conversation_accessible_by_support: bool,
    #[serde(rename = "isPrivateConversationsEnabled")]
    private_conversations_enabled: bool,
    /// What the knowledge base covers: its entry count and first titles, e.g. `3
    /// knowledge-base entries: Pricing; Opening hours; Returns.`; empty when it has none.
    #[serde(rename = "distilledKnowledge")]
    distilled_knowledge: String,
    /// Ours: the counts behind distilledKnowledge (entries of every status; the titles of the
    /// first 100 that have one, in creation order).
    #[serde(rename = "knowledgeBase")]
    knowledge_base: KbCounts<'a>,
    #[serde(rename = "createdAt")]
    created_at: Timestamp,
    #[serde(rename = "updatedAt")]
    updated_at: Timestamp,
    /// Legacy copy of `createdAt`.
    #[serde(rename = "created_at")]
    #[schemars(extend("deprecated" = true))]
    created_at_legacy: Timestamp,
    /// Legacy copy of `shortDescription`.
    #[serde(rename = "short_description")]
    #[schemars(extend("deprecated" = true))]
    short_description_legacy: &'a str,
    /// Legacy copy of `greeting`.
    #[schemars(extend("deprecated" = true))]
    introduction: &'a str,
    /// Legacy copy of `ownerID`.
    #[schemars(extend("deprecated" = true))]
    owner_uuid: &'a str,
    /// Chat history items.
    chat_history_count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    purpose: Option<&'a str>,
    #[serde(rename = "profileImage", skip_serializing_if = "Option::is_none")]
    profile_image: Option<&'a str>,
    /// Legacy copy of `profileImage`. `null` when the replica has no profile image (required
    /// and nullable in the hosted document's list items).
    #[serde(rename = "profile_image")]
    #[schemars(extend("deprecated" = true))]
    profile_image_legacy: Option<&'a str>,
    #[serde(rename = "voicePreviewText", skip_serializing_if = "Option::is_none")]
    voice_preview_text: Option<&'a str>,
    #[serde(rename = "voiceVendorID", skip_serializing_if = "Option::is_none")]
    voice_vendor_id: Option<&'a str>,
    /// Legacy copy of `llm.systemMessage`. `""` when the replica has no system message
    /// (required, a string, in the hosted document's list items).
    #[serde(rename = "system_message")]
    #[schemars(extend("deprecated" = true))]
    system_message_legacy: &'a str,
}

/// The `<bot>_integration` fields of a replica (`Bot::integration_field`), one per bot, each
/// `null` or its [`IntegrationView`](crate::service::integrations::IntegrationView).
pub struct Integrations<'a>(&'a [(Bot, Option<IntegrationView>)]);

impl Serialize for Integrations<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(bot, view)| (bot.integration_field(), view)))
    }
}

impl JsonSchema for Integrations<'_> {
    fn schema_name() -> Cow<'static, str> {
        "Integrations".into()
    }

    fn inline_schema() -> bool {
        true
    }

    /// `{<bot>_integration: Integration | null}`, every bot's field present.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut view = generator.subschema_for::<Option<IntegrationView>>();
        view.insert("description".into(), "null when the channel is not connected.".into());
        let fields = Bot::ALL.map(Bot::integration_field);
        let properties: serde_json::Map<String, serde_json::Value> =
            fields.iter().map(|f| (f.to_string(), view.clone().into())).collect();
        json_schema!({ "type": "object", "properties": properties, "required": fields })
    }
}

/// The wire view of replica `r` with its [`replicas::ViewParts`].
pub fn view<'a>(r: &'a Replica, p: &'a replicas::ViewParts) -> ReplicaView<'a> {
    let created_at = Timestamp::of(r.created_at);
    ReplicaView {
        uuid: r.id,
        name: &r.name,
        slug: &r.slug,
        tags: &r.tags,
        short_description: &r.short_description,
        greeting: &r.greeting,
        kind: &r.kind,
        owner_id: &p.owner_id,
        private: r.private,
        whitelist_emails: &r.whitelist_emails,
        suggested_questions: &r.suggested_questions,
        voice_enabled: r.voice_enabled,
        video_enabled: r.video_enabled,
        llm: LlmView {
            model: &r.llm.model,
            memory_mode: &r.llm.memory_mode,
            system_message: r.llm.system_message.as_deref(),
            embedding_model: r.llm.embedding_model.as_deref().filter(|id| HOSTED_EMBEDDING_IDS.contains(id)),
            embedding_model_id: r.llm.embedding_model.as_deref(),
        },
        integrations: Integrations(&p.integrations),
        accessible_by_support: r.every_conversation_accessible_by_support,
        every_conversation_accessible_by_support: r.every_conversation_accessible_by_support,
        private_conversations_enabled: r.private_conversations_enabled,
        distilled_knowledge: p.distilled.text(),
        knowledge_base: KbCounts { entries: p.distilled.entries, titles: &p.distilled.titles },
        created_at_legacy: created_at.clone(),
        created_at,
        updated_at: Timestamp::of(r.updated_at),
        short_description_legacy: &r.short_description,
        introduction: &r.greeting,
        owner_uuid: &p.owner_id,
        chat_history_count: p.messages,
        purpose: r.purpose.as_deref(),
        profile_image: r.profile_image.as_deref(),
        profile_image_legacy: r.profile_image.as_deref(),
        voice_preview_text: r.voice_preview_text.as_deref(),
        voice_vendor_id: r.voice_vendor_id.as_deref(),
        system_message_legacy: r.llm.system_message.as_deref().unwrap_or_default(),
    }
}

/// The [`replicas::ViewParts`] of `replicas`, read in one transaction.
async fn parts(app: &App, replicas: &[std::sync::Arc<Replica>]) -> Result<Vec<replicas::ViewParts>> {
    replicas::view_parts(&app.store, replicas.iter().map(|r| (r.id, r.owner)).collect()).await
}

/// `{type, items, total}` of the replica list: `type` is always `"replicas"` (the hosted
/// document requires a string there, as in the chat-history lists, without naming its values).
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "ReplicaList")]
struct Page<T: Serialize> {
    /// What the items are (always `replicas`).
    #[serde(rename = "type")]
    #[schemars(extend("const" = "replicas"))]
    kind: &'static str,
    items: Vec<T>,
    #[schemars(range(min = 0))]
    total: u64,
}

#[derive(Serialize, JsonSchema)]
#[schemars(rename = "ReplicaCreated")]
struct Created {
    uuid: uuid::Uuid,
}

/// # `POST /v1/replicas`
/// 201 `{success, uuid}`. Errors: 400, 409 `SLUG_TAKEN`, 429 `REPLICA_QUOTA_EXCEEDED`.
pub async fn create(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: replicas::ReplicaInput = req.json::<ReplicaBody>()?.into();
    let org = req.caller()?.org.id;
    let uuid = replicas::create(
        &app.store,
        org,
        &body,
        &app.models,
        app.search.embedders.as_deref(),
        app.config.max_replicas_per_org,
    )
    .await?;
    Ok(Reply::success(201, &Created { uuid }))
}

/// # `GET /v1/replicas/{replicaUUID}`
/// The replica's fields plus `success`; 404 when missing.
pub async fn read(app: Arc<App>, req: Req) -> Result<Reply> {
    let id = req.uuid_param("replicaUUID")?;
    let caller = req.caller()?;
    let (r, p) = replicas::get_with_parts(&app.store, caller.org.id, id, None).await?;
    Ok(Reply::ok(&view(&r, &p)))
}

/// # `PUT /v1/replicas/{replicaUUID}`
/// Replaces the fields (create's body); 200 `{success}`. Errors: 400, 404, 409 `SLUG_TAKEN`.
pub async fn update(app: Arc<App>, req: Req) -> Result<Reply> {
    let id = req.uuid_param("replicaUUID")?;
    let body: replicas::ReplicaInput = req.json::<ReplicaBody>()?.into();
    let embedders = app.search.embedders.as_deref();
    replicas::update(&app.store, req.caller()?.org.id, id, &body, &app.models, embedders).await?;
    Ok(Reply::done())
}

/// # `DELETE /v1/replicas/{replicaUUID}`
/// Deletes the replica, its knowledge base and chat history; 200 `{success}`; 404 when missing.
pub async fn delete(app: Arc<App>, req: Req) -> Result<Reply> {
    let id = req.uuid_param("replicaUUID")?;
    replicas::delete(&app.store, req.caller()?.org.id, id).await?;
    app.bots.stop_all(id);
    Ok(Reply::done())
}

/// # `GET /v1/replicas`
/// `{success, type: "replicas", items, total}`; paging `page`/`page_size` (aliases `page_index`, `pageIndex`,
/// `pageSize`), filters `ownerID`, `slug`, `tags`, `integration`, `search`, `sort`.
pub async fn list(app: Arc<App>, req: Req) -> Result<Reply> {
    let q: ListParams = query::read(&req)?;
    let q = replicas::ListQuery {
        owner: q.owner,
        slug: q.slug,
        tags: q.tags,
        integration: q.integration.map(|b| b.0.name().to_string()),
        search: q.search,
        sort: q.sort.map(|s| Named::name(&s.0)),
        page: q.page.or(q.page_index).or(q.page_index_camel).unwrap_or_default().0,
        page_size: q.page_size.or(q.page_size_camel).unwrap_or_default().0,
    };
    let caller = req.caller()?;
    let (items, total) = replicas::list(&app.store, caller.org.id, caller.user.clone(), q).await?;
    let p = parts(&app, &items).await?;
    let items: Vec<ReplicaView> = items.iter().zip(&p).map(|(r, p)| view(r, p)).collect();
    Ok(Reply::ok(&Page { kind: "replicas", items, total }))
}

/// Replicas (spec §2.3).
pub fn operations() -> Vec<Operation> {
    vec![
        op("GET", "/v1/replicas", "listReplicas", "Replicas", "List replicas")
            .query_of::<ListParams>()
            .ok_of::<Page<ReplicaView>>(200)
            .describe("`{success, items, total}`. Private replicas appear only to their owner and whitelisted users.")
            .serve(Access::Either, handler!(list))
            .cached(),
        op("POST", "/v1/replicas", "createReplica", "Replicas", "Create a replica")
            .body_of::<ReplicaBody>()
            .ok_of::<Created>(201)
            .creates("replicaUUID", "/uuid")
            .extra(&[409, 429])
            .describe(
                "201 `{success, uuid}`. 409 `SLUG_TAKEN` when the slug is used in the organization; 429 \
                `REPLICA_QUOTA_EXCEEDED` beyond the organization's replica quota. Unknown fields are ignored.",
            )
            .serve(Access::Org, handler!(create)),
        op("GET", "/v1/replicas/{replicaUUID}", "getReplica", "Replicas", "Read a replica")
            .ok_as::<ReplicaView>(200, "ReplicaRead")
            .describe("The replica's fields, current and deprecated names, plus `success`.")
            .serve(Access::Org, handler!(read))
            .cached(),
        op("PUT", "/v1/replicas/{replicaUUID}", "updateReplica", "Replicas", "Update a replica")
            .body_of::<ReplicaBody>()
            .extra(&[409])
            .describe(
                "Replaces the fields (the create body); 200 `{success}`. 409 `SLUG_TAKEN` when the slug is used in \
                the organization; 409 `EMBEDDING_MODEL_FIXED` when `llm.embeddingModel` names another model than \
                the replica's (it cannot be changed once set; absent, it is kept).",
            )
            .serve(Access::Org, handler!(update)),
        op("DELETE", "/v1/replicas/{replicaUUID}", "deleteReplica", "Replicas", "Delete a replica")
            .describe("Deletes the replica, its knowledge base and its chat history; 200 `{success}`.")
            .serve(Access::Org, handler!(delete)),
    ]
}

/// The query of the replica list. (No struct-wide `#[serde(default)]`: it would write
/// `default: null` over the defaults of the optional integers' schemas.)
#[derive(Deserialize, JsonSchema)]
struct ListParams {
    /// Page number (current name).
    page: Option<Int<1, 1_000_000, 1>>,
    /// Items per page (current name).
    page_size: Option<Int<1, 100, 24>>,
    /// Older name of `page` (spec §9); accepted as an alias.
    #[schemars(extend("deprecated" = true))]
    page_index: Option<Int<1, 1_000_000, 1>>,
    /// Older name of `page` (spec §9); accepted as an alias.
    #[serde(rename = "pageIndex")]
    #[schemars(extend("deprecated" = true))]
    page_index_camel: Option<Int<1, 1_000_000, 1>>,
    /// Older name of `page_size` (spec §9); accepted as an alias.
    #[serde(rename = "pageSize")]
    #[schemars(extend("deprecated" = true))]
    page_size_camel: Option<Int<1, 100, 24>>,
    /// Only replicas of this owner (user id).
    #[serde(rename = "ownerID")]
    owner: Option<String>,
    /// Only the replica with this slug.
    slug: Option<String>,
    /// Only replicas carrying every one of these tags (repeat the parameter or separate by commas).
    #[serde(default)]
    tags: Vec<String>,
    /// Only replicas with this channel connected.
    integration: Option<OneOf<Bot>>,
    /// Text searched in name and descriptions.
    search: Option<String>,
    /// Order of the list.
    sort: Option<OneOf<ListOrder>>,
}

/// The orders of the replica list besides creation (`sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListOrder {
    Name,
    Popularity,
}

impl Named for ListOrder {
    fn table() -> Vec<(String, Self)> {
        vec![("name".into(), ListOrder::Name), ("popularity".into(), ListOrder::Popularity)]
    }
}

impl Named for Bot {
    fn table() -> Vec<(String, Self)> {
        Bot::ALL.map(|b| (b.name().to_string(), b)).to_vec()
    }
}
