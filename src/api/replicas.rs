//! Replica operations (spec §2.3, §4.2; DECISIONS.md "Replicas").

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
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

/// A replica on the wire, current and deprecated names both present.
pub fn view(r: &Replica, distilled: serde_json::Value) -> serde_json::Value {
    json!({
        "uuid": r.id,
        "name": r.name,
        "slug": r.slug,
        "tags": r.tags,
        "purpose": r.purpose,
        "shortDescription": r.short_description,
        "greeting": r.greeting,
        "type": r.kind,
        "ownerID": r.owner,
        "private": r.private,
        "whitelistEmails": r.whitelist_emails,
        "profileImage": r.profile_image,
        "suggestedQuestions": r.suggested_questions,
        "voicePreviewText": r.voice_preview_text,
        "voice_enabled": r.voice_enabled,
        "video_enabled": r.video_enabled,
        "llm": {
            "model": r.llm.model,
            "memoryMode": r.llm.memory_mode,
            "systemMessage": r.llm.system_message,
            "embeddingModel": r.llm.embedding_model,
        },
        "messengerA_integration": null,
        "messengerB_integration": null,
        "voiceVendorID": r.voice_vendor_id,
        "isAccessibleByCustomerSupport": r.every_conversation_accessible_by_support,
        "isEveryConversationAccessibleBySupport": r.every_conversation_accessible_by_support,
        "isPrivateConversationsEnabled": r.private_conversations_enabled,
        "distilledKnowledge": distilled,
        "createdAt": rfc3339(r.created_at),
        "updatedAt": rfc3339(r.updated_at),
        "profile_image": r.profile_image,
        "short_description": r.short_description,
        "introduction": r.greeting,
        "owner_uuid": r.owner,
        "system_message": r.llm.system_message,
    })
}

#[derive(Serialize)]
struct Created {
    uuid: uuid::Uuid,
}

/// # `POST /v1/replicas`
/// 201 `{success, uuid}`. Errors: 400, 409 `SLUG_TAKEN`, 429 `REPLICA_QUOTA_EXCEEDED`.
pub async fn create(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: ReplicaBody = req.json()?;
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
    let (entries, _) = crate::service::knowledge::list(
        &app.store,
        id,
        crate::service::knowledge::ListQuery { page: 1, page_size: 100, ..Default::default() },
    )
    .await?;
    let titles: Vec<String> = entries.iter().filter_map(|e| e.display_title().cloned()).collect();
    let distilled = json!({ "entries": entries.len(), "titles": titles });
    let mut v = view(&r, distilled);
    let bot = crate::service::integrations::messenger_a(&app.store, id).await?;
    v["messengerA_integration"] = crate::service::integrations::integration_view(bot.as_ref());
    Ok(Reply::ok(&v))
}

/// # `PUT /v1/replicas/{replicaUUID}`
/// Replaces the fields (create's body); 200 `{success}`. Errors: 400, 404, 409 `SLUG_TAKEN`.
pub async fn update(app: Arc<App>, req: Req) -> Result<Reply> {
    let id = req.uuid_param("replicaUUID")?;
    let body: ReplicaBody = req.json()?;
    replicas::update(&app.store, req.caller()?.org.id, id, &body, &app.models).await?;
    Ok(Reply::done())
}

/// # `DELETE /v1/replicas/{replicaUUID}`
/// Deletes the replica, its knowledge base and chat history; 200 `{success}`; 404 when missing.
pub async fn delete(app: Arc<App>, req: Req) -> Result<Reply> {
    let id = req.uuid_param("replicaUUID")?;
    replicas::delete(&app.store, req.caller()?.org.id, id).await?;
    app.channels.stop(id, crate::channels::messenger_a::CHANNEL);
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
    let bots = crate::service::integrations::messenger_a_of(&app.store, items.iter().map(|r| r.id).collect()).await?;
    let items: Vec<_> = items
        .iter()
        .map(|r| {
            let mut v = view(r, serde_json::Value::Null);
            v["messengerA_integration"] = crate::service::integrations::integration_view(bots.get(&r.id));
            v
        })
        .collect();
    Ok(Reply::ok(&json!({ "items": items, "total": total })))
}
