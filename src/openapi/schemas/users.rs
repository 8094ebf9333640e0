//! User schemas (`/v1/users*`; docs/decisions.md "Users").

use serde_json::{json, Value};

use crate::service::channel::linked_account_types;

use super::{date_time, object, string, success};

pub(super) fn add_all(add: &mut impl FnMut(&str, Value)) {
    add("UserWrite", user_write());
    add("LinkedAccount", linked_account());
    add("UserResponse", user_response());
}

fn user_write() -> Value {
    object(
        &[],
        json!({
            "id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 100,
                "pattern": "^[^\\s\\x00-\\x1f\\x7f-\\x9f]+$",
                "description": "Create: the new user's id, chosen by the client (a migrating team keeps its ids); \
                    unique in the organization (409 USER_ID_TAKEN). Absent: the server makes a UUID. Update: the \
                    caller's own id (400 otherwise).",
            },
            "name": { "type": "string", "minLength": 1, "maxLength": 100, "description": "Create: default empty." },
            "email": {
                "type": "string",
                "format": "email",
                "description": "Unique per organization (409 EMAIL_TAKEN).",
            },
            "linkedAccounts": {
                "type": "array",
                "items": super::reference("LinkedAccount"),
                "description": "Channel accounts that name this user (409 LINKED_ACCOUNT_TAKEN when another user \
                    has one); on update, replaces the list.",
            },
            "profileImage": string(),
        }),
        true,
    )
}

fn linked_account() -> Value {
    object(
        &["accountID", "accountType"],
        json!({
            "accountID": { "type": "string", "description": "The id on that channel (the X-USER-ID it sent)." },
            "accountType": { "type": "string", "enum": linked_account_types() },
        }),
        false,
    )
}

/// The user, flat (docs/decisions.md "Users"): `{success, id, name, email?, linkedAccounts}` plus
/// fields of our own.
fn user_response() -> Value {
    object(
        &["success", "id", "name", "linkedAccounts", "createdAt", "updatedAt"],
        json!({
            "success": success(),
            "id": {
                "type": "string",
                "description": "The id the client chose at creation, else a UUID made by the server.",
            },
            "name": string(),
            "email": {
                "type": "string",
                "description": "Omitted when the user has none (e.g. a user made on first contact from a channel).",
            },
            "linkedAccounts": {
                "type": "array",
                "items": super::reference("LinkedAccount"),
                "description": "The channel accounts that name this user (given at creation or update, or the one a \
                    channel made it for).",
            },
            "profileImage": { "type": "string", "description": "Ours: the picture URL; omitted when none." },
            "createdAt": date_time(),
            "updatedAt": date_time(),
        }),
        false,
    )
}
