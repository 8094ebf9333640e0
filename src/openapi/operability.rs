//! The operability operations (`/healthz`, `/readyz`, `/v1/healthcheck`): their rows of the
//! document (their schemas are derived from `api::health`'s views).

use super::operations::{op, Op};

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
