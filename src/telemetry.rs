//! Recording of the server's measurements (Prometheus names `replicad_*`): requests, store
//! commits, ingestion outcomes and upstream calls. Every layer records through these functions;
//! they go to the `metrics` facade, a no-op until `ops::metrics::install` sets the exporter
//! (`--metrics-token` or `--metrics-listen`).

use std::time::{Duration, Instant};

use metrics::{counter, gauge, histogram};

/// Counts one answered request of `route` (a template) and its latency.
pub fn request(method: &str, route: &'static str, status: u16, took: Duration) {
    let class = match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    };
    // Methods are any token on the wire: only the standard ones become label values.
    let method = match method {
        "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS" => method.to_string(),
        _ => "other".to_string(),
    };
    counter!("replicad_http_requests_total", "method" => method.clone(), "route" => route, "status" => class)
        .increment(1);
    histogram!("replicad_http_request_duration_seconds", "method" => method, "route" => route)
        .record(took.as_secs_f64());
}

/// Counts a request in flight for as long as it lives (also when the client goes away).
pub struct InFlight(Instant);

impl InFlight {
    pub fn start() -> InFlight {
        gauge!("replicad_http_requests_in_flight").increment(1.0);
        InFlight(Instant::now())
    }

    /// Time since the request started.
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        gauge!("replicad_http_requests_in_flight").decrement(1.0);
    }
}

/// Counts a read that could be answered from `http::read_cache`: `hit` (answered from it) or
/// `miss` (answered by its handler).
pub fn read_cache(outcome: &'static str) {
    counter!("replicad_read_cache_total", "outcome" => outcome).increment(1);
}

/// Records one group commit of `batch` writes that took `took` (commit + fsync).
pub fn store_commit(batch: usize, took: Duration) {
    histogram!("replicad_store_write_batch_size").record(batch as f64);
    histogram!("replicad_store_commit_duration_seconds").record(took.as_secs_f64());
}

/// Counts an ingestion step's end: `processed` (queued for the index), `unprocessable`,
/// `retried`.
pub fn ingest_outcome(outcome: &'static str) {
    counter!("replicad_ingest_jobs_total", "outcome" => outcome).increment(1);
}

/// Records a request to upstream `name` whose answer's head came after `took` (retries
/// included).
pub fn upstream_answered(name: &str, took: Duration) {
    histogram!("replicad_upstream_request_duration_seconds", "upstream" => name.to_string()).record(took.as_secs_f64());
}

/// Counts a failure of upstream `name` (each one answered as 502 `UPSTREAM_ERROR`, or as the
/// `error` event of a stream).
pub fn upstream_failed(name: &str) {
    counter!("replicad_upstream_errors_total", "upstream" => name.to_string()).increment(1);
}
