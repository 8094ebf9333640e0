//! Replica operations (spec §2.3, §4.2; DECISIONS.md "Replicas").

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::set_some;
use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::integrations;
use crate::service::knowledge::Distilled;
use crate::service::{replicas, rfc3339};
use crate::store::records::Replica;

/// The `llm` object of a create/update body.
#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct LlmBody {
    pub model: Option<String>,
    /// Deprecated: `prompt-caching` | `rag-search`.
    pub memory_mode: Option<String>,
    pub system_message: Option<String>,
    pub embedding_model: Option<String>,
}

/// Create and update body (unknown fields are ignored; legacy names are aliases).
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaBody {
    pub name: String,
    #[serde(alias = "short_description")]
    pub short_description: String,
    #[serde(alias = "introduction")]
    pub greeting: String,
    #[serde(rename = "ownerID", alias = "owner_uuid")]
    pub owner_id: String,
    pub slug: String,
    pub llm: LlmBody,
    pub purpose: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub private: Option<bool>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub suggested_questions: Vec<String>,
    #[serde(default)]
    pub whitelist_emails: Vec<String>,
    #[serde(alias = "profile_image")]
    pub profile_image: Option<String>,
    pub voice_preview_text: Option<String>,
    #[serde(rename = "voice_enabled")]
    pub voice_enabled: Option<bool>,
    #[serde(rename = "video_enabled")]
    pub video_enabled: Option<bool>,
    #[serde(alias = "isAccessibleByCustomerSupport")]
    pub is_every_conversation_accessible_by_support: Option<bool>,
    pub is_private_conversations_enabled: Option<bool>,
    #[serde(rename = "voiceVendorID")]
    pub voice_vendor_id: Option<String>,
    /// Legacy place of `llm.systemMessage`.
    #[serde(rename = "system_message")]
    pub system_message: Option<String>,
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

/// A replica on the wire (DECISIONS.md "Replicas"), read and list alike: current names, the
/// older snake_case block, `distilledKnowledge` (a string) and, of our own, `knowledgeBase
/// {entries, titles}`. Absent optional values are omitted; the channel integrations are `null`
/// (none can be connected yet).
/// `owner_id` is the owner's id as users see it (`User::public_id`).
pub fn view(r: &Replica, kb: &Distilled, chat_history_count: u64, owner_id: &str) -> Value {
    let mut llm = json!({ "model": r.llm.model, "memoryMode": r.llm.memory_mode });
    set_some(&mut llm, "systemMessage", r.llm.system_message.as_ref());
    set_some(&mut llm, "embeddingModel", r.llm.embedding_model.as_ref());
    let mut v = json!({
        "uuid": r.id,
        "name": r.name,
        "slug": r.slug,
        "tags": r.tags,
        "shortDescription": r.short_description,
        "greeting": r.greeting,
        "type": r.kind,
        "ownerID": owner_id,
        "private": r.private,
        "whitelistEmails": r.whitelist_emails,
        "suggestedQuestions": r.suggested_questions,
        "voice_enabled": r.voice_enabled,
        "video_enabled": r.video_enabled,
        "llm": llm,
        "messengerA_integration": null,
        "messengerB_integration": null,
        "isAccessibleByCustomerSupport": r.every_conversation_accessible_by_support,
        "isEveryConversationAccessibleBySupport": r.every_conversation_accessible_by_support,
        "isPrivateConversationsEnabled": r.private_conversations_enabled,
        "distilledKnowledge": kb.text(),
        "knowledgeBase": { "entries": kb.entries, "titles": kb.titles },
        "createdAt": rfc3339(r.created_at),
        "updatedAt": rfc3339(r.updated_at),
        "created_at": rfc3339(r.created_at),
        "short_description": r.short_description,
        "introduction": r.greeting,
        "owner_uuid": owner_id,
        "chat_history_count": chat_history_count,
    });
    set_some(&mut v, "purpose", r.purpose.as_ref());
    set_some(&mut v, "profileImage", r.profile_image.as_ref());
    set_some(&mut v, "profile_image", r.profile_image.as_ref());
    set_some(&mut v, "voicePreviewText", r.voice_preview_text.as_ref());
    set_some(&mut v, "voiceVendorID", r.voice_vendor_id.as_ref());
    set_some(&mut v, "system_message", r.llm.system_message.as_ref());
    v
}

/// The wire views of `replicas` (their [`replicas::ViewParts`] read in one transaction).
async fn views(app: &App, replicas: &[Replica]) -> Result<Vec<Value>> {
    let keys = replicas.iter().map(|r| (r.id, r.owner)).collect();
    let parts = replicas::view_parts(&app.store, keys).await?;
    let views = replicas.iter().zip(parts).map(|(r, p)| {
        let mut v = view(r, &p.distilled, p.messages, &p.owner_id);
        v["messengerA_integration"] = integrations::integration_view(p.messenger_a.as_ref());
        v["messengerB_integration"] = integrations::integration_view(p.messenger_b.as_ref());
        v
    });
    Ok(views.collect())
}

#[derive(Serialize)]
struct Created {
    uuid: uuid::Uuid,
}

/// # `POST /v1/replicas`
/// 201 `{success, uuid}`. Errors: 400, 409 `SLUG_TAKEN`, 429 `REPLICA_QUOTA_EXCEEDED`.
pub async fn create(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: replicas::ReplicaInput = req.json::<ReplicaBody>()?.into();
    let org = req.caller()?.org.id;
    let uuid = replicas::create(&app.store, org, &body, &app.models, app.config.max_replicas_per_org).await?;
    Ok(Reply::success(201, &Created { uuid }))
}

/// # `GET /v1/replicas/{replicaUUID}`
/// The replica's fields plus `success`; 404 when missing.
pub async fn read(app: Arc<App>, req: Req) -> Result<Reply> {
    let id = req.uuid_param("replicaUUID")?;
    let caller = req.caller()?;
    let r = replicas::get(&app.store, caller.org.id, id, None).await?;
    let mut v = views(&app, std::slice::from_ref(&r)).await?;
    Ok(Reply::ok(&v.swap_remove(0)))
}

/// # `PUT /v1/replicas/{replicaUUID}`
/// Replaces the fields (create's body); 200 `{success}`. Errors: 400, 404, 409 `SLUG_TAKEN`.
pub async fn update(app: Arc<App>, req: Req) -> Result<Reply> {
    let id = req.uuid_param("replicaUUID")?;
    let body: replicas::ReplicaInput = req.json::<ReplicaBody>()?.into();
    replicas::update(&app.store, req.caller()?.org.id, id, &body, &app.models).await?;
    Ok(Reply::done())
}

/// # `DELETE /v1/replicas/{replicaUUID}`
/// Deletes the replica, its knowledge base and chat history; 200 `{success}`; 404 when missing.
pub async fn delete(app: Arc<App>, req: Req) -> Result<Reply> {
    let id = req.uuid_param("replicaUUID")?;
    replicas::delete(&app.store, req.caller()?.org.id, id).await?;
    app.channels.stop_all(id);
    Ok(Reply::done())
}

/// # `GET /v1/replicas`
/// `{success, items, total}`; paging `page`/`page_size` (aliases `page_index`, `pageIndex`,
/// `pageSize`), filters `ownerID`, `slug`, `tags`, `integration`, `search`, `sort`.
pub async fn list(app: Arc<App>, req: Req) -> Result<Reply> {
    let (page, page_size) = super::paging(&req, &["page", "page_index", "pageIndex"], &["page_size", "pageSize"])?;
    let integration = req.query("integration").map(str::to_string);
    if let Some(i) = &integration {
        if i != "messengerA" && i != "messengerB" {
            return Err(Error::new(Code::InvalidQuery, "integration must be messengerA or messengerB"));
        }
    }
    let sort = req.query("sort").map(str::to_string);
    if sort.as_deref().is_some_and(|s| s != "name" && s != "popularity") {
        return Err(Error::new(Code::InvalidQuery, "sort must be name or popularity"));
    }
    let q = replicas::ListQuery {
        owner: req.query("ownerID").map(str::to_string),
        slug: req.query("slug").map(str::to_string),
        tags: req.query_all("tags"),
        integration,
        search: req.query("search").map(str::to_string).filter(|s| !s.is_empty()),
        sort,
        page,
        page_size,
    };
    let caller = req.caller()?;
    let (items, total) = replicas::list(&app.store, caller.org.id, caller.user.clone(), q).await?;
    let items = views(&app, &items).await?;
    Ok(Reply::ok(&json!({ "items": items, "total": total })))
}
