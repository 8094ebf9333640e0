//! The OpenAPI rows and schemas of usage and analytics (docs/decisions.md "Usage and analytics";
//! `api::usage`, `api::analytics`).

use super::operations::{op, Op};

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
