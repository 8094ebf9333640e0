//! Schemas of the operability operations (`/healthz`, `/readyz`, `/v1/healthcheck`).

use serde_json::{json, Map, Value};

use super::schemas::object;

/// The names and schemas of this file, for `components.schemas`.
pub fn all() -> Map<String, Value> {
    let mut s = Map::new();
    s.insert("Liveness".into(), object(&["status"], json!({ "status": { "const": "ok" } }), false));
    s.insert("Readiness".into(), readiness());
    s.insert("HealthCheck".into(), health_check());
    s
}

/// The checks of readiness, by name (`store`, `search`, `ingestion`).
fn checks(statuses: &[&str]) -> Value {
    let check = object(
        &["status", "message"],
        json!({
            "status": { "type": "string", "enum": statuses },
            "message": { "type": "string", "description": "What was found, for the operator." },
        }),
        false,
    );
    let props = json!({
        "store": check.clone(),
        "search": check.clone(),
        "ingestion": check,
    });
    let mut o = object(&["store", "search", "ingestion"], props, false);
    o["description"] = json!(
        "`store`: open and writable (the last commit succeeded, or a probe write commits within 2 s). `search`: the \
        indexer runs and no change has waited longer than `--max-index-lag` (default 30 s). `ingestion`: the \
        ingestion worker runs."
    );
    o
}

fn readiness() -> Value {
    object(
        &["status", "checks"],
        json!({
            "status": { "type": "string", "enum": ["ready", "not ready"] },
            "checks": checks(&["ok", "failing"]),
        }),
        false,
    )
}

fn health_check() -> Value {
    object(
        &["success", "time", "services"],
        json!({
            "success": { "type": "boolean", "description": "Every service is healthy." },
            "time": { "type": "string", "format": "date-time", "description": "The server's clock (UTC)." },
            "services": checks(&["healthy", "unhealthy"]),
        }),
        false,
    )
}
