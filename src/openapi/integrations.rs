//! Schemas of the channel integrations (spec §4.2, docs/decisions.md "Integrations" and
//! "Replicas"): the connect bodies and answers, and the integration object of replica reads.

use serde_json::{json, Value};

use super::schemas::{nullable, object, reference, sparse_id};

/// The `messengerA_integration` / `messengerB_integration` object of a replica read: `null`
/// when the channel is not connected.
pub fn integration_object() -> Value {
    let mut v = nullable(object(
        &["token", "service_name", "is_active"],
        json!({
            "token": { "type": "null", "description": "Never returned (the field stays, as null)." },
            "service_name": { "type": "string", "description": "The bot's username on the channel." },
            "is_active": {
                "type": "boolean",
                "description": "The bot's connection works (messengerA: its last poll succeeded; messengerB: its \
                    gateway session is ready).",
            },
            "mention": {
                "type": "string",
                "description": "Our own, messengerA only: the handle the bot answers to in groups (with its @).",
            },
            "last_error": {
                "type": "string",
                "description": "Our own: what went wrong last (revoked token, unreachable channel, …); absent after a \
                    successful poll (messengerA) or a ready gateway session (messengerB). The bot retries with back-off (1 s doubling up to 5 min, or the channel's \
                    retry_after).",
            },
            "last_error_at": {
                "type": "string",
                "format": "date-time",
                "description": "Our own: when `last_error` happened.",
            },
        }),
        false,
    ));
    v["description"] = json!("null when the channel is not connected.");
    v
}

/// The schemas of this module, by name.
pub fn schemas(add: &mut impl FnMut(&str, Value)) {
    embed_schemas(add);
    add(
        "MessengerAConnect",
        object(
            &["messengerA_token"],
            json!({
                "messengerA_token": {
                    "type": "string",
                    "pattern": "^[0-9]+:[A-Za-z0-9_-]+$",
                    "maxLength": 200,
                    "description": "The bot token given by the channel. Stored encrypted (--secrets-key-file); never \
                        returned by any read.",
                },
                "mention": {
                    "type": "string",
                    "pattern": "^@?[A-Za-z0-9_]{1,64}$",
                    "description": "The handle the bot answers to in groups; default: the bot's username.",
                },
            }),
            true,
        ),
    );
    add(
        "MessengerBConnect",
        object(
            &["messengerBToken"],
            json!({
                "messengerBToken": {
                    "type": "string",
                    "pattern": "^[A-Za-z0-9._-]{50,80}$",
                    "description": "The bot token given by the channel (50 to 80 characters). Stored encrypted \
                        (--secrets-key-file); never returned by any read.",
                },
            }),
            false,
        ),
    );
    add(
        "IntegrationConnected",
        object(
            &["success", "id"],
            json!({
                "success": { "type": "boolean", "const": true },
                "id": { "type": "string", "description": "The bot's user id on the channel." },
            }),
            false,
        ),
    );
}

/// The embed-key, identity-secret and widget operations.
fn embed_schemas(add: &mut impl FnMut(&str, Value)) {
    let origins = json!({
        "type": "array",
        "minItems": 1,
        "maxItems": 50,
        "items": { "type": "string", "description": "An origin: scheme://host[:port]." },
    });
    add("EmbedKeyCreate", object(&["allowedOrigins"], json!({ "allowedOrigins": origins }), false));
    add(
        "EmbedKeyCreated",
        object(
            &["success", "key", "replicaUUID", "allowedOrigins"],
            json!({
                "success": { "type": "boolean", "const": true },
                "key": { "type": "string", "description": "The public embed key (`data-key` of the widget)." },
                "replicaUUID": { "type": "string", "format": "uuid" },
                "allowedOrigins": { "type": "array", "items": { "type": "string" } },
            }),
            false,
        ),
    );
    add("EmbedIdentitySecretCreate", object(&[], json!({}), false));
    add(
        "EmbedIdentitySecretCreated",
        object(
            &["success", "replicaUUID", "identitySecret"],
            json!({
                "success": { "type": "boolean", "const": true },
                "replicaUUID": { "type": "string", "format": "uuid" },
                "identitySecret": {
                    "type": "string",
                    "pattern": "^rpl_idsec_[0-9a-f]{64}$",
                    "description": "The secret the site's backend signs `X-Embed-Identity` with (shown only here).",
                },
            }),
            false,
        ),
    );
    add(
        "EmbedChatRequest",
        object(&["content"], json!({ "content": { "type": "string", "minLength": 1, "maxLength": 10000 } }), true),
    );
    add(
        "EmbedChatReply",
        object(
            &["success", "content", "sources", "id"],
            json!({
                "success": { "type": "boolean", "const": true },
                "content": { "type": "string" },
                "sources": { "type": "array", "items": reference("Source") },
                "id": nullable(sparse_id("The chat-history id of the reply.")),
            }),
            false,
        ),
    );
    add(
        "EmbedHistory",
        object(
            &["success", "items"],
            json!({
                "success": { "type": "boolean", "const": true },
                "items": { "type": "array", "items": reference("ChatHistoryItem") },
            }),
            false,
        ),
    );
}
