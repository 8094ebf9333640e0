//! Prometheus metrics (text format 0.0.4) through the `metrics` facade and
//! `metrics-exporter-prometheus`. Served at `GET /metrics` on the main listener behind
//! `--metrics-token` ([`route`]), or on `--metrics-listen ADDR` ([`spawn_listener`]); off by default.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `replicad_http_requests_total` | counter | `method`, `route` (the route template, `unmatched` for none), `status` (`2xx`…`5xx`) |
//! | `replicad_http_request_duration_seconds` | histogram | `method`, `route`: until the answer's head (a stream's body is not counted) |
//! | `replicad_http_requests_in_flight` | gauge | |
//! | `replicad_read_cache_total` | counter | `outcome`: `hit` (a kept answer), `miss` (`http::read_cache`) |
//! | `replicad_store_write_batch_size` | histogram | writes per group commit |
//! | `replicad_store_commit_duration_seconds` | histogram | commit + fsync |
//! | `replicad_ingest_queue_depth` | gauge | ingestion jobs not finished |
//! | `replicad_ingest_jobs_total` | counter | `outcome`: `processed`, `unprocessable`, `retried` |
//! | `replicad_index_lag_seconds` | gauge | how long outbox rows have waited (0: caught up) |
//! | `replicad_index_outbox_rows` | gauge | outbox rows not yet in the index |
//! | `replicad_upstream_request_duration_seconds` | histogram | `upstream`: until the answer's head (retries included) |
//! | `replicad_upstream_errors_total` | counter | `upstream`: failures (timeouts, refusals, broken streams) |
//! | `process_resident_memory_bytes`, `process_open_fds` | gauge | (Linux: from `/proc/self`) |

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use metrics::gauge;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::http::route::{BodyKind, Route};

/// Buckets of latency histograms, in seconds.
const SECONDS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
/// Buckets of the write batch size.
const BATCH: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Installs the process-wide recorder (first call), every metric labelled `node="<node>"`
/// (`--node-name`), and returns its handle. Until it is called, recording is a no-op.
pub fn install(node: &str) -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .add_global_label("node", node)
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full("replicad_store_write_batch_size".into()), BATCH))
            .expect("static, non-empty buckets");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed; /metrics will be empty");
        }
        describe();
        handle
    })
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!("replicad_http_requests_total", "HTTP requests answered, by route template and status class");
    describe_histogram!("replicad_http_request_duration_seconds", Unit::Seconds, "Time to the answer's head");
    describe_gauge!("replicad_http_requests_in_flight", "HTTP requests being served");
    describe_counter!("replicad_read_cache_total", "Cacheable reads, answered from the read cache or not");
    describe_histogram!("replicad_store_write_batch_size", "Writes applied per group commit");
    describe_histogram!("replicad_store_commit_duration_seconds", Unit::Seconds, "Commit and fsync of one batch");
    describe_gauge!("replicad_ingest_queue_depth", "Ingestion jobs not finished");
    describe_counter!("replicad_ingest_jobs_total", "Ingestion job steps that ended, by outcome");
    describe_gauge!("replicad_index_lag_seconds", Unit::Seconds, "How long outbox rows have waited for the index");
    describe_gauge!("replicad_index_outbox_rows", "Outbox rows not yet applied to the search index");
    describe_histogram!("replicad_upstream_request_duration_seconds", Unit::Seconds, "Model server answer head time");
    describe_counter!("replicad_upstream_errors_total", "Model server failures, by upstream");
    describe_gauge!("process_resident_memory_bytes", Unit::Bytes, "Resident set size");
    describe_gauge!("process_open_fds", "Open file descriptors");
}

/// The text of `GET /metrics`: the gauges read at scrape time (queue depth, index lag,
/// process), then everything recorded.
pub async fn render(app: &App) -> String {
    let handle = install(&app.config.node());
    let depths = app
        .store
        .read(|txn| {
            let head = crate::store::outbox_seq(txn)?;
            Ok((crate::ingest::pipeline::job_count(txn)?, head))
        })
        .await;
    match depths {
        Ok((jobs, head)) => {
            gauge!("replicad_ingest_queue_depth").set(jobs as f64);
            // Outbox seqs count 1, 2, 3, …: the rows past the index's position are the rest.
            gauge!("replicad_index_outbox_rows").set(head.saturating_sub(app.search.applied_seq()) as f64);
        }
        Err(e) => tracing::warn!(error = %e, "metrics: cannot read the queue depths"),
    }
    let lag = app.search.progress.lag_ms().unwrap_or(0);
    gauge!("replicad_index_lag_seconds").set(lag as f64 / 1000.0);
    if let Some((rss, fds)) = process() {
        gauge!("process_resident_memory_bytes").set(rss as f64);
        gauge!("process_open_fds").set(fds as f64);
    }
    handle.run_upkeep();
    handle.render()
}

/// Resident set size in bytes (`VmRSS`) and open file descriptors, from `/proc/self` (Linux).
fn process() -> Option<(u64, usize)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().strip_suffix("kB")?.trim().parse().ok()?;
    let fds = std::fs::read_dir("/proc/self/fd").ok()?.count();
    Some((kib * 1024, fds))
}

/// Content type of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics` on the main listener. Not an API operation (not in the OpenAPI document): 404
/// `ROUTE_NOT_FOUND` unless `--metrics-token` is set, then 401 `UNAUTHORIZED` without
/// `Authorization: Bearer <token>`.
pub fn route() -> Route {
    Route {
        method: hyper::Method::GET,
        path: "/metrics",
        access: Access::Public,
        body: BodyKind::Json,
        cached: false,
        handler: |app, req| Box::pin(scrape(app, req)),
    }
}

async fn scrape(app: Arc<App>, req: Req) -> Result<Reply> {
    let Some(token) = &app.config.metrics_token else {
        return Err(Error::new(Code::RouteNotFound, "no operation at /metrics (see --metrics-token)"));
    };
    let given = req.headers.get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let given = given.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or_default();
    // Compared as digests, so the time taken says nothing about the token.
    if Sha256::digest(given.as_bytes()) != Sha256::digest(token.as_bytes()) {
        return Err(Error::new(Code::Unauthorized, "GET /metrics needs Authorization: Bearer <--metrics-token>"));
    }
    Ok(Reply::raw(200, render(&app).await.into(), CONTENT_TYPE).with_header("cache-control", "no-store"))
}

/// Serves `GET /metrics` (no token) on `listener` (`--metrics-listen`) for the life of the
/// process; any other request answers 404.
pub fn spawn_listener(app: Arc<App>, listener: TcpListener) {
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let app = app.clone();
            tokio::spawn(async move {
                let idle = Duration::from_secs(app.config.header_timeout);
                let builder = crate::server::conn::builder(idle);
                let answer = move |req: hyper::Request<hyper::body::Incoming>| {
                    let app = app.clone();
                    async move { answer_listener(&app, &req).await }
                };
                crate::server::conn::serve(&builder, stream, idle, None, answer).await;
            });
        }
    });
}

async fn answer_listener<B>(app: &App, req: &hyper::Request<B>) -> hyper::Response<Full<Bytes>> {
    let (status, content_type, body) = if req.method() == hyper::Method::GET && req.uri().path() == "/metrics" {
        (200, CONTENT_TYPE, Bytes::from(render(app).await))
    } else {
        (404, "text/plain; charset=utf-8", Bytes::from_static(b"only GET /metrics is served here\n"))
    };
    let mut res = hyper::Response::new(Full::new(body));
    *res.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::OK);
    res.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
    res
}
