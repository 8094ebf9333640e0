//! The operability operations (`/healthz`, `/readyz`, `/v1/healthcheck`): their rows of the
//! document and their schemas.

use serde_json::{json, Map, Value};

use super::operations::{op, Op};
use super::schemas::object;

/// The rows of [`super::all_operations`] for the operability operations.
pub fn operations() -> Vec<Op> {
    vec![
        op("GET", "/healthz", "getLiveness", "Operations", "Liveness")
            .ok(200, "Liveness")
            .describe("Public. The process is alive and answering; touches nothing else. Poll it as a liveness probe."),
        Op { also: &[(503, "Readiness")], ..op("GET", "/readyz", "getReadiness", "Operations", "Readiness") }
            .ok(200, "Readiness")
            .describe(
                "Public. 200 when the store is open and writable, the search index is caught up with the store \
                within `--max-index-lag`, and the background tasks run; 503 with the same body naming what is not \
                ready. Cheap enough to poll every second (a probe write only when nothing was written for 5 s).",
            ),
        Op {
            also: &[(503, "HealthCheck")],
            ..op("GET", "/v1/healthcheck", "getHealthCheck", "Operations", "Service health")
        }
        .ok(200, "HealthCheck")
        .describe(
            "Public. The hosted service's health operation: the store, the search index and the ingestion \
                worker as `services`, each `healthy` or `unhealthy` with a message (the checks of `/readyz`); 503 \
                with the same body (`success: false`) when one is unhealthy.",
        ),
    ]
}

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
        &["status", "node", "checks"],
        json!({
            "status": { "type": "string", "enum": ["ready", "not ready"] },
            "node": { "type": "string", "description": "This node's name (`--node-name`, else the host name): \
                which of several nodes over one database answered." },
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
