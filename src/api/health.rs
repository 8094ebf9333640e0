//! Liveness and readiness (operability; docs/decisions.md "Operations"): public, no credentials,
//! cheap enough to poll every second. The checks are in `ops::health`.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

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

/// # `GET /readyz`
/// 200 `{status: "ready", checks: {store, search, ingestion: {status: "ok", message}}}` when
/// every check of `ops::health` passes; 503 with `status: "not ready"` and the failing checks'
/// `status: "failing"` otherwise.
pub async fn readyz(app: Arc<App>, _req: Req) -> Result<Reply> {
    let report = health::check(&app).await;
    let checks = services(&report, "ok", "failing");
    let status = if report.ready() { "ready" } else { "not ready" };
    Ok(answer(&report, json!({ "status": status, "checks": checks })))
}

/// # `GET /v1/healthcheck`
/// The hosted service's liveness operation (docs/decisions.md "Operations"): `{success, time,
/// services: {store, search, ingestion: {status: "healthy"|"unhealthy", message}}}`; 503 with
/// the same body (`success: false`) when a service is unhealthy.
pub async fn healthcheck(app: Arc<App>, _req: Req) -> Result<Reply> {
    let report = health::check(&app).await;
    let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let services = services(&report, "healthy", "unhealthy");
    Ok(answer(&report, json!({ "success": report.ready(), "time": time, "services": services })))
}

fn services(report: &Report, ok: &str, failing: &str) -> Value {
    let mut map = Map::new();
    for (name, check) in &report.checks {
        let status = if check.ok { ok } else { failing };
        map.insert(name.to_string(), json!({ "status": status, "message": check.message }));
    }
    Value::Object(map)
}

fn answer(report: &Report, body: Value) -> Reply {
    let status = if report.ready() { 200 } else { 503 };
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    Reply::raw(status, bytes.into(), "application/json").with_header("cache-control", "no-store")
}
