//! The OpenAPI rows and schemas of usage and analytics (docs/decisions.md "Usage and analytics";
//! `api::usage`, `api::analytics`).

use serde_json::{json, Value};

use super::operations::{op, Op};
use super::schemas::{object, reference};
use crate::service::channel::sources;

const TAG: &str = "Usage and analytics";

/// The operation rows (see `super::all_operations`).
pub fn operations() -> Vec<Op> {
    vec![
        op("GET", "/v1/users/me/usage", "getMyUsage", TAG, "Usage of the current user").ok(200, "UserUsage").describe(
            "Conversations started this UTC month and knowledge-base entries, of the replicas the user owns \
            (`currentMonthByReplica` / `byReplica` list each of them, zeros included); `tokens` (ours): the prompt \
            and completion tokens of the user's own completions this month, per replica. Answered from counters \
            kept with every write.",
        ),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/analytics/conversations/historical",
            "getConversationHistory",
            TAG,
            "Conversations over the last 30 days",
        )
        .ok(200, "ConversationHistory")
        .describe(
            "The last 30 UTC days, oldest first, today included, each with the conversations started up to its end. \
            The replica's owner or the key alone; 404 for other users.",
        ),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/analytics/conversations/sources",
            "getConversationSources",
            TAG,
            "Conversations per source",
        )
        .ok(200, "ConversationSources")
        .describe("Every source value with the conversations started on it. The replica's owner or the key alone."),
    ]
}

/// An object keyed by replicaUUID whose values are `values`.
fn by_replica(values: Value) -> Value {
    json!({
        "type": "object",
        "propertyNames": { "type": "string", "format": "uuid" },
        "additionalProperties": values,
        "description": "Keyed by replicaUUID.",
    })
}

fn counts_by_replica() -> Value {
    by_replica(json!({ "type": "integer", "minimum": 0 }))
}

fn tokens(extra: Value) -> Value {
    let mut p = json!({
        "promptTokens": { "type": "integer", "minimum": 0 },
        "completionTokens": { "type": "integer", "minimum": 0 },
    });
    let mut required = vec!["promptTokens", "completionTokens"];
    if let Value::Object(more) = extra {
        for (k, v) in more {
            p[&k] = v;
        }
        required.extend(["month", "byReplica"]);
    }
    object(&required, p, false)
}

/// The schemas (see `super::all_schemas`).
pub fn schemas(add: &mut impl FnMut(&str, Value)) {
    let success = json!({ "type": "boolean", "const": true });
    add(
        "CompletionUsageLimits",
        json!({
            "type": "object",
            "description": "The caller's own caps (spec §8); other fields are ignored.",
            "properties": { "conversationsPerMonth": {
                "type": "integer", "minimum": 0,
                "description": "429 CONVERSATION_QUOTA_EXCEEDED, before anything is generated, once the organization \
                    started this many conversations in the UTC month.",
            } },
            "additionalProperties": true,
        }),
    );
    add("Tokens", tokens(Value::Null));
    add(
        "UserUsage",
        object(
            &["success", "conversations", "knowledgeBaseEntries", "tokens"],
            json!({
                "success": success,
                "conversations": object(&["currentMonthTotal", "currentMonthByReplica"], json!({
                    "currentMonthTotal": { "type": "integer", "minimum": 0 },
                    "currentMonthByReplica": counts_by_replica(),
                }), false),
                "knowledgeBaseEntries": object(&["total", "byReplica"], json!({
                    "total": { "type": "integer", "minimum": 0 },
                    "byReplica": counts_by_replica(),
                }), false),
                "tokens": tokens(json!({
                    "month": { "type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$", "description": "The UTC month counted." },
                    "byReplica": by_replica(reference("Tokens")),
                })),
            }),
            false,
        ),
    );
    let day = object(
        &["date", "cumulativeConversations"],
        json!({ "date": { "type": "string", "format": "date" }, "cumulativeConversations": { "type": "integer", "minimum": 0 } }),
        false,
    );
    let source = object(
        &["source", "conversations"],
        json!({ "source": { "type": "string", "enum": sources() }, "conversations": { "type": "integer", "minimum": 0 } }),
        false,
    );
    for (name, item) in [("ConversationHistory", day), ("ConversationSources", source)] {
        add(
            name,
            object(
                &["success", "items"],
                json!({ "success": success, "items": { "type": "array", "items": item } }),
                false,
            ),
        );
    }
}
