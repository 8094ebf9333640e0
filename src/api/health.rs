//! Liveness and readiness (operability; docs/decisions.md "Operations"): public, no credentials,
//! cheap enough to poll every second. The checks are in `ops::health`.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Serialize, Serializer};

use crate::app::App;
use crate::error::Result;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::ops::health::{self, Report};

/// # `GET /healthz`
/// The process is alive and answering: 200 `{"status": "ok"}`. Touches nothing else.
pub async fn healthz(_app: Arc<App>, _req: Req) -> Result<Reply> {
    Ok(Reply::raw(200, Bytes::from_static(br#"{"status":"ok"}"#), "application/json"))
}

/// The checks of a [`Report`] on the wire (the `checks` / `services` of the `Readiness` and
/// `HealthCheck` schemas): `{<name>: {status, message}}` in the report's order, `status` the
/// word `ok` for a passing check (`ok` or `healthy`), `failing` for the others (`failing` or
/// `unhealthy`).
pub struct ChecksView<'a> {
    report: &'a Report,
    ok: &'static str,
    failing: &'static str,
}

/// A check of [`ChecksView`]: `{status, message}`.
#[derive(Serialize)]
pub struct CheckView<'a> {
    status: &'static str,
    message: &'a str,
}

impl Serialize for ChecksView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.report.checks.iter().map(|(name, check)| {
            let status = if check.ok { self.ok } else { self.failing };
            (name, CheckView { status, message: &check.message })
        }))
    }
}

/// `/readyz`'s answer (the `Readiness` schema): `{status: "ready"|"not ready", node, checks}`.
#[derive(Serialize)]
pub struct ReadinessView<'a> {
    status: &'static str,
    node: String,
    checks: ChecksView<'a>,
}

/// `/v1/healthcheck`'s answer (the `HealthCheck` schema): `{success, time, services}`.
#[derive(Serialize)]
pub struct HealthCheckView<'a> {
    success: bool,
    time: String,
    services: ChecksView<'a>,
}

/// The readiness answer of `report` on node `node`.
pub fn readiness(report: &Report, node: String) -> ReadinessView<'_> {
    let status = if report.ready() { "ready" } else { "not ready" };
    ReadinessView { status, node, checks: ChecksView { report, ok: "ok", failing: "failing" } }
}

/// The health-check answer of `report` at `time` (RFC 3339).
pub fn health_check(report: &Report, time: String) -> HealthCheckView<'_> {
    let services = ChecksView { report, ok: "healthy", failing: "unhealthy" };
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
    let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    Ok(answer(&report, &health_check(&report, time)))
}

fn answer(report: &Report, body: &impl Serialize) -> Reply {
    let status = if report.ready() { 200 } else { 503 };
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    Reply::raw(status, bytes.into(), "application/json").with_header("cache-control", "no-store")
}
