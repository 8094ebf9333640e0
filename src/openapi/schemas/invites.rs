//! Invitation schemas (`/v1/api-keys/invites/...`).

use serde_json::{json, Value};

use super::{date_time, nullable, object, success, uuid};

pub(super) fn add_all(add: &mut impl FnMut(&str, Value)) {
    let text = json!({ "type": "string", "minLength": 1, "maxLength": 100 });
    add(
        "RedeemRequest",
        object(
            &["organizationName", "name", "email"],
            json!({
                "organizationName": text,
                "name": { "type": "string", "minLength": 1, "maxLength": 100, "description": "Contact name." },
                "email": {
                    "type": "string",
                    "format": "email",
                    "description": "Contact address; becomes the organization's owner user.",
                },
            }),
            false,
        ),
    );
    add(
        "Redeemed",
        object(
            &["success", "apiKey", "organizationID", "validUntil"],
            json!({
                "success": success(),
                "apiKey": {
                    "type": "string",
                    "description": "The organization's API key; shown only here (stored hashed).",
                },
                "organizationID": uuid(),
                "validUntil": nullable(date_time()),
            }),
            false,
        ),
    );
}
