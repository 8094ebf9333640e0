//! `GET /v1/users/me/usage` (spec §4.2, docs/decisions.md "Usage and analytics").

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::app::App;
use crate::error::Result;
use crate::generate::Usage;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::usage;
use crate::store::now_ms;

fn tokens(u: &Usage) -> Value {
    json!({ "promptTokens": u.prompt_tokens, "completionTokens": u.completion_tokens })
}

fn by_replica<T>(m: &BTreeMap<uuid::Uuid, T>, f: impl Fn(&T) -> Value) -> Value {
    Value::Object(m.iter().map(|(id, v)| (id.to_string(), f(v))).collect())
}

/// # `GET /v1/users/me/usage`
/// `{success, conversations: {currentMonthTotal, currentMonthByReplica}, knowledgeBaseEntries:
/// {total, byReplica}, tokens: {month, promptTokens, completionTokens, byReplica}}`: the
/// conversations (started this UTC month) and entries of the replicas the user owns, and the
/// tokens of the user's own completions this month (`tokens` is a field of our own).
pub async fn me(app: Arc<App>, req: Req) -> Result<Reply> {
    let caller = req.caller()?;
    let u = usage::of_user(&app.store, caller.org.id, caller.acting_user(), now_ms()).await?;
    let total = |m: &BTreeMap<uuid::Uuid, u64>| m.values().sum::<u64>();
    let all_tokens = u.tokens_by_replica.values().fold(Usage::default(), |a, t| Usage {
        prompt_tokens: a.prompt_tokens + t.prompt_tokens,
        completion_tokens: a.completion_tokens + t.completion_tokens,
    });
    let mut tokens_v = tokens(&all_tokens);
    tokens_v["month"] = json!(format!("{}-{:02}", u.month / 100, u.month % 100));
    tokens_v["byReplica"] = by_replica(&u.tokens_by_replica, tokens);
    Ok(Reply::ok(&json!({
        "conversations": {
            "currentMonthTotal": total(&u.conversations_by_replica),
            "currentMonthByReplica": by_replica(&u.conversations_by_replica, |n| json!(n)),
        },
        "knowledgeBaseEntries": {
            "total": total(&u.kb_entries_by_replica),
            "byReplica": by_replica(&u.kb_entries_by_replica, |n| json!(n)),
        },
        "tokens": tokens_v,
    })))
}
