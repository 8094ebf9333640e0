//! `components.schemas` of the OpenAPI document: every request and response body, written from
//! the wire DTOs of `src/api` (the integration tests validate every JSON response they receive
//! against these, so a field added to a view without its schema fails a test; the `views` test
//! does the same for one value of each typed view with every optional field present).
//!
//! Response objects are closed (`additionalProperties: false`): the document lists every field
//! the server sends. Request objects are closed where the server rejects unknown fields (spec
//! "no extra fields"), open where it ignores them (docs/decisions.md "Common").

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

/// `schema` or `null`.
pub fn nullable(schema: Value) -> Value {
    json!({ "oneOf": [schema, { "type": "null" }] })
}

/// A reference to `components.schemas.name`.
pub fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// What every schema of a knowledge-base entry id or chat-history item id says about its values.
pub const SPARSE_ID_NOTE: &str = "Ids are increasing and time-ordered (a later one is greater), \
    and sparse: they are not counts and their differences say nothing about how many were issued in \
    between (a millisecond timestamp shifted left 10 bits plus a random part; ids from earlier \
    versions are small numbers, below every newer one). They fit 53 bits, so JavaScript numbers \
    hold them exactly.";

/// The schema of a knowledge-base entry id (`knowledgeBaseID`) or a chat-history item id:
/// a positive 64-bit integer described by [`SPARSE_ID_NOTE`], preceded by `what` when given.
pub fn sparse_id(what: &str) -> Value {
    let note = if what.is_empty() { SPARSE_ID_NOTE.to_string() } else { format!("{what} {SPARSE_ID_NOTE}") };
    json!({ "type": "integer", "format": "int64", "minimum": 1, "description": note })
}

fn string() -> Value {
    json!({ "type": "string" })
}

fn success() -> Value {
    json!({ "type": "boolean", "const": true })
}

/// The schemas of this folder, by name: the shared ones, then those of each resource (the
/// other files' schemas follow them: [`super::all_schemas`]).
pub fn listed(models: &Models) -> Map<String, Value> {
    let mut s = Map::new();
    let mut add = |name: &str, schema: Value| {
        s.insert(name.to_string(), schema);
    };
    add("Done", object(&["success"], json!({ "success": success() }), false));
    add("OpenApiDocument", json!({ "type": "object", "description": "This document." }));
    models::add_all(&mut add, models);
    add("UploadBody", json!({ "type": "string", "format": "binary", "description": "The file's bytes." }));
    s
}
