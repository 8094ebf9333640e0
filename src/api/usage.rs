//! `GET /v1/users/me/usage` (spec §4.2, docs/decisions.md "Usage and analytics").

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use uuid::Uuid;

use super::{Operation, Serve};
use crate::app::App;
use crate::error::Result;
use crate::generate::Usage;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::op;
use crate::service::usage::{self, MyUsage};
use crate::store::now_ms;

/// The `propertyNames` of a map keyed by replica: UUIDs.
fn uuid_keys() -> serde_json::Value {
    serde_json::json!({ "type": "string", "format": "uuid" })
}

/// Prompt and completion tokens on the wire (the `Tokens` schema).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Tokens", description = "")]
pub struct TokensView {
    prompt_tokens: u64,
    completion_tokens: u64,
}

impl From<&Usage> for TokensView {
    fn from(u: &Usage) -> Self {
        TokensView { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens }
    }
}

/// `tokens` of [`UsageView`]: the month's totals, the month (`YYYY-MM`) and the totals per
/// replica.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct MonthTokensView<'a> {
    #[serde(flatten)]
    total: TokensView,
    /// The UTC month counted.
    #[schemars(regex(pattern = r"^[0-9]{4}-[0-9]{2}$"))]
    month: String,
    /// Keyed by replicaUUID.
    #[schemars(extend("propertyNames" = uuid_keys()))]
    by_replica: BTreeMap<&'a Uuid, TokensView>,
}

/// `conversations` of [`UsageView`]: started this UTC month, in all and per replica.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct ConversationsView<'a> {
    current_month_total: u64,
    /// Keyed by replicaUUID.
    #[schemars(extend("propertyNames" = uuid_keys()))]
    current_month_by_replica: &'a BTreeMap<Uuid, u64>,
}

/// `knowledgeBaseEntries` of [`UsageView`]: in all and per replica.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct EntriesView<'a> {
    total: u64,
    /// Keyed by replicaUUID.
    #[schemars(extend("propertyNames" = uuid_keys()))]
    by_replica: &'a BTreeMap<Uuid, u64>,
}

/// The usage of a user on the wire (the `UserUsage` schema).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "UserUsage")]
pub struct UsageView<'a> {
    conversations: ConversationsView<'a>,
    knowledge_base_entries: EntriesView<'a>,
    tokens: MonthTokensView<'a>,
}

/// The wire view of usage `u`.
pub fn view(u: &MyUsage) -> UsageView<'_> {
    let total = |m: &BTreeMap<Uuid, u64>| m.values().sum::<u64>();
    let all_tokens = u.tokens_by_replica.values().fold(Usage::default(), |a, t| Usage {
        prompt_tokens: a.prompt_tokens + t.prompt_tokens,
        completion_tokens: a.completion_tokens + t.completion_tokens,
    });
    let conversations = &u.conversations_by_replica;
    UsageView {
        conversations: ConversationsView {
            current_month_total: total(conversations),
            current_month_by_replica: conversations,
        },
        knowledge_base_entries: EntriesView {
            total: total(&u.kb_entries_by_replica),
            by_replica: &u.kb_entries_by_replica,
        },
        tokens: MonthTokensView {
            total: (&all_tokens).into(),
            month: format!("{}-{:02}", u.month / 100, u.month % 100),
            by_replica: u.tokens_by_replica.iter().map(|(id, t)| (id, t.into())).collect(),
        },
    }
}

/// # `GET /v1/users/me/usage`
/// `{success, conversations: {currentMonthTotal, currentMonthByReplica}, knowledgeBaseEntries:
/// {total, byReplica}, tokens: {month, promptTokens, completionTokens, byReplica}}`: the
/// conversations (started this UTC month) and entries of the replicas the user owns, and the
/// tokens of the user's own completions this month (`tokens` is a field of our own).
pub async fn me(app: Arc<App>, req: Req) -> Result<Reply> {
    let caller = req.caller()?;
    let u = usage::of_user(&app.store, caller.org.id, caller.acting_user(), now_ms()).await?;
    Ok(Reply::ok(&view(&u)))
}

/// The document's rows of this file's operations (see `super::operations`).
pub fn operations() -> Vec<Operation> {
    vec![op("GET", "/v1/users/me/usage", "getMyUsage", TAG, "Usage of the current user")
        .ok_of::<UsageView>(200)
        .describe(
            "Conversations started this UTC month and knowledge-base entries, of the replicas the user owns \
            (`currentMonthByReplica` / `byReplica` list each of them, zeros included); `tokens` (ours): the prompt \
            and completion tokens of the user's own completions this month, per replica. Answered from counters \
            kept with every write.",
        )
        .serve(Access::User, handler!(me))]
}

/// The tag of the usage and analytics operations.
pub(super) const TAG: &str = "Usage and analytics";
