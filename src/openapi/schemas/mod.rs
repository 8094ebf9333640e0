//! The schemas of `components.schemas` that no Rust type describes, written out: the model
//! catalog (its entries come from the catalog), `Done`, the document itself, an upload's raw
//! bytes and a completion's `usageLimits` (read as a JSON value). Every other body and answer
//! schema is derived from its type (`super::derived`, named on its operation's row), and the error
//! bodies come from `error::Code` (`super::error_schemas`).
//!
//! The `views` test validates one value of each typed view, every optional field present,
//! against the document; the integration tests validate every JSON answer they receive.

mod models;
#[cfg(test)]
mod views;

use serde_json::{json, Map, Value};

use crate::models::Models;

/// An object schema with `required` fields, closed unless `open`.
pub fn object(required: &[&str], properties: Value, open: bool) -> Value {
    json!({
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": open,
    })
}

/// A reference to `components.schemas.name`.
pub fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn string() -> Value {
    json!({ "type": "string" })
}

fn success() -> Value {
    json!({ "type": "boolean", "const": true })
}

/// The written schemas, by name.
pub fn listed(models: &Models) -> Map<String, Value> {
    let mut s = Map::new();
    let mut add = |name: &str, schema: Value| {
        s.insert(name.to_string(), schema);
    };
    add("Done", object(&["success"], json!({ "success": success() }), false));
    add("OpenApiDocument", json!({ "type": "object", "description": "This document." }));
    models::add_all(&mut add, models);
    add("UploadBody", json!({ "type": "string", "format": "binary", "description": "The file's bytes." }));
    add(
        "ReplicaBundle",
        json!({ "type": "string", "format": "binary", "description": "A replica bundle: a gzip'd tar (docs/bundles.md)." }),
    );
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
    s
}
