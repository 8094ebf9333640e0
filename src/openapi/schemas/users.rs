//! User schemas (`/v1/users*`; DECISIONS.md "Users").

use serde_json::{json, Value};

use super::{date_time, object, string, success, uuid};

pub(super) fn add_all(add: &mut impl FnMut(&str, Value)) {
    add("UserWrite", user_write());
    add("LinkedAccount", linked_account());
    add("UserResponse", user_response());
}

fn user_write() -> Value {
    object(
        &["name"],
        json!({
            "name": { "type": "string", "minLength": 1 },
            "email": {
                "type": "string",
                "format": "email",
                "description": "Unique per organization (409 EMAIL_TAKEN).",
            },
            "profileImage": string(),
        }),
        false,
    )
}

fn linked_account() -> Value {
    object(
        &["accountID", "accountType"],
        json!({
            "accountID": { "type": "string", "description": "The id on that channel (the X-USER-ID it sent)." },
            "accountType": { "type": "string", "enum": ["messengerA", "messengerB", "embed"] },
        }),
        false,
    )
}

/// The user, flat (DECISIONS.md "Users"): `{success, id, name, email?, linkedAccounts}` plus
/// fields of our own.
fn user_response() -> Value {
    object(
        &["success", "id", "name", "linkedAccounts", "createdAt", "updatedAt"],
        json!({
            "success": success(),
            "id": uuid(),
            "name": string(),
            "email": {
                "type": "string",
                "description": "Omitted when the user has none (e.g. a user made on first contact from a channel).",
            },
            "linkedAccounts": {
                "type": "array",
                "items": super::reference("LinkedAccount"),
                "description": "The channel accounts this user was made for; empty for users made by POST /v1/users.",
            },
            "profileImage": { "type": "string", "description": "Ours: the picture URL; omitted when none." },
            "createdAt": date_time(),
            "updatedAt": date_time(),
        }),
        false,
    )
}
