//! Liveness and readiness (operability; docs/decisions.md "Operations"): public, no credentials,
//! cheap enough to poll every second. The checks are in `ops::health`.

use std::sync::Arc;

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Serialize, Serializer};

use super::Timestamp;
use super::{Operation, Serve};
use crate::app::App;
use crate::error::Result;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::op;
use crate::ops::health::{self, Report, CHECKS};

/// # `GET /healthz`
/// The process is alive and answering: 200 `{"status": "ok"}`. Touches nothing else.
pub async fn healthz(_app: Arc<App>, _req: Req) -> Result<Reply> {
    let body = serde_json::to_vec(&LivenessView { status: "ok" }).unwrap_or_default();
    Ok(Reply::raw(200, body.into(), "application/json"))
}

/// The checks of a [`Report`] on the wire (the `checks` / `services` of the `Readiness` and
/// `HealthCheck` schemas): `{<name>: {status, message}}` in the report's order, `status` the
/// word `W` gives a passing check (`ok` or `healthy`) or a failing one (`failing` or
/// `unhealthy`).
pub struct ChecksView<'a, W> {
    report: &'a Report,
    words: PhantomData<W>,
}

/// The words of a [`ChecksView`]: a passing check's status and a failing one's.
pub trait CheckWords {
    const WORDS: [&'static str; 2];
}

/// `/readyz`'s words: `ok`, `failing`.
pub struct Readyz;

impl CheckWords for Readyz {
    const WORDS: [&'static str; 2] = ["ok", "failing"];
}

/// `/v1/healthcheck`'s words: `healthy`, `unhealthy`.
pub struct Healthcheck;

impl CheckWords for Healthcheck {
    const WORDS: [&'static str; 2] = ["healthy", "unhealthy"];
}

/// A check of [`ChecksView`]: `{status, message}`.
#[derive(Serialize)]
pub struct CheckView<'a> {
    status: &'static str,
    message: &'a str,
}

impl<W: CheckWords> Serialize for ChecksView<'_, W> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.report.checks.iter().map(|(name, check)| {
            let status = W::WORDS[usize::from(!check.ok)];
            (name, CheckView { status, message: &check.message })
        }))
    }
}

impl<W: CheckWords> JsonSchema for ChecksView<'_, W> {
    fn schema_name() -> Cow<'static, str> {
        format!("Checks_{}", W::WORDS[0]).into()
    }

    fn inline_schema() -> bool {
        true
    }

    /// Every check of [`CHECKS`], each `{status, message}`.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let check = serde_json::json!({
            "type": "object",
            "required": ["status", "message"],
            "properties": {
                "status": { "type": "string", "enum": W::WORDS },
                "message": { "type": "string", "description": "What was found, for the operator." },
            },
        });
        let properties: serde_json::Map<String, serde_json::Value> =
            CHECKS.iter().map(|name| (name.to_string(), check.clone())).collect();
        json_schema!({
            "type": "object",
            "required": CHECKS,
            "properties": properties,
            "description": CHECKS_DOC,
        })
    }
}

/// What each check of [`CHECKS`] asks, in the document.
const CHECKS_DOC: &str = "`store`: open and writable (the last commit succeeded, or a probe write commits within 2 \
    s). `search`: the indexer runs and no change has waited longer than `--max-index-lag` (default 30 s). \
    `ingestion`: the ingestion worker runs.";

/// `/healthz`'s answer (the `Liveness` schema): `{status: "ok"}`.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Liveness")]
struct LivenessView {
    #[schemars(extend("const" = "ok"))]
    status: &'static str,
}

/// `/readyz`'s answer (the `Readiness` schema): `{status: "ready"|"not ready", node, checks}`.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Readiness")]
pub struct ReadinessView<'a> {
    #[schemars(extend("enum" = ["ready", "not ready"]))]
    status: &'static str,
    /// This node's name (`--node-name`, else the host name): which of several nodes over one
    /// database answered.
    node: String,
    checks: ChecksView<'a, Readyz>,
}

/// `/v1/healthcheck`'s answer (the `HealthCheck` schema): `{success, time, services}`.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "HealthCheck")]
pub struct HealthCheckView<'a> {
    /// Every service is healthy.
    success: bool,
    /// The server's clock (UTC).
    time: Timestamp,
    services: ChecksView<'a, Healthcheck>,
}

/// The readiness answer of `report` on node `node`.
pub fn readiness(report: &Report, node: String) -> ReadinessView<'_> {
    let status = if report.ready() { "ready" } else { "not ready" };
    ReadinessView { status, node, checks: ChecksView { report, words: PhantomData } }
}

/// The health-check answer of `report` at `time`.
pub fn health_check(report: &Report, time: Timestamp) -> HealthCheckView<'_> {
    let services = ChecksView { report, words: PhantomData };
    HealthCheckView { success: report.ready(), time, services }
}

/// # `GET /readyz`
/// 200 `{status: "ready", node, checks: {store, search, ingestion: {status: "ok", message}}}` when
/// every check of `ops::health` passes; 503 with `status: "not ready"` and the failing checks'
/// `status: "failing"` otherwise.
pub async fn readyz(app: Arc<App>, _req: Req) -> Result<Reply> {
    let report = health::check(&app).await;
    Ok(answer(&report, &readiness(&report, app.config.node())))
}

/// # `GET /v1/healthcheck`
/// The hosted service's liveness operation (docs/decisions.md "Operations"): `{success, time,
/// services: {store, search, ingestion: {status: "healthy"|"unhealthy", message}}}`; 503 with
/// the same body (`success: false`) when a service is unhealthy.
pub async fn healthcheck(app: Arc<App>, _req: Req) -> Result<Reply> {
    let report = health::check(&app).await;
    let time = Timestamp::of(crate::store::now_ms());
    Ok(answer(&report, &health_check(&report, time)))
}

fn answer(report: &Report, body: &impl Serialize) -> Reply {
    let status = if report.ready() { 200 } else { 503 };
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    Reply::raw(status, bytes.into(), "application/json").with_header("cache-control", "no-store")
}

/// The document's rows of this file's operations (see `super::operations`).
pub fn operations() -> Vec<Operation> {
    vec![
        op("GET", "/healthz", "getLiveness", "Operations", "Liveness")
            .ok_raw::<LivenessView>(200)
            .describe("Public. The process is alive and answering; touches nothing else. Poll it as a liveness probe.")
            .serve(Access::Public, handler!(healthz)),
        op("GET", "/readyz", "getReadiness", "Operations", "Readiness")
            .ok_raw::<ReadinessView>(200)
            .also(&[(503, "Readiness")])
            .describe(
                "Public. 200 when the store is open and writable, the search index is caught up with the store \
                within `--max-index-lag`, and the background tasks run; 503 with the same body naming what is not \
                ready. Cheap enough to poll every second (a probe write only when nothing was written for 5 s).",
            )
            .serve(Access::Public, handler!(readyz)),
        op("GET", "/v1/healthcheck", "getHealthCheck", "Operations", "Service health")
            .ok_raw::<HealthCheckView>(200)
            .also(&[(503, "HealthCheck")])
            .describe(
                "Public. The hosted service's health operation: the store, the search index and the ingestion \
                worker as `services`, each `healthy` or `unhealthy` with a message (the checks of `/readyz`); 503 \
                with the same body (`success: false`) when one is unhealthy.",
            )
            .serve(Access::Public, handler!(healthcheck)),
    ]
}
