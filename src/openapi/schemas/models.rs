//! The model catalog schemas (`GET /v1/replicas/models`, spec §2.4).

use serde_json::{json, Map, Value};

use super::{object, string, success};
use crate::models::Models;

fn model_catalog(models: &Models) -> Value {
    let model = object(
        &["name", "description", "deprecated"],
        json!({ "name": string(), "description": string(), "deprecated": { "type": "boolean", "default": false } }),
        false,
    );
    let ids: Vec<&String> = models.entries.keys().collect();
    let properties: Map<String, Value> = ids.iter().map(|id| (id.to_string(), model.clone())).collect();
    let catalog = json!({
        "type": "object",
        "description": "Exactly 19 entries (spec §2.4), keyed by model id; loaded from data/models.json.",
        "required": ids,
        "properties": properties,
        "additionalProperties": false,
    });
    object(&["success", "models"], json!({ "success": success(), "models": catalog }), false)
}

fn model_catalog_array() -> Value {
    let model = object(
        &["id", "name", "description", "deprecated"],
        json!({ "id": string(), "name": string(), "description": string(), "deprecated": { "type": "boolean" } }),
        false,
    );
    let list = json!({ "type": "array", "minItems": 19, "maxItems": 19, "items": model });
    object(&["success", "models"], json!({ "success": success(), "models": list }), false)
}

pub(super) fn add_all(add: &mut impl FnMut(&str, Value), models: &Models) {
    add("ModelCatalog", model_catalog(models));
    add("ModelCatalogArray", model_catalog_array());
    add(
        "ModelCatalogResponse",
        json!({
            "description": "ModelCatalog; ModelCatalogArray with X-API-Version 2024-03-01 (dates before 2024-09-01).",
            "oneOf": [super::reference("ModelCatalog"), super::reference("ModelCatalogArray")],
        }),
    );
}
