//! The checks behind `GET /readyz` and `GET /v1/healthcheck` (docs/decisions.md "Operations"):
//! the store is open and writable, the search index is caught up with the store's outbox
//! within `--max-index-lag`, and the background tasks run. Cheap enough to poll every second:
//! no scan, and a probe write only when the writer has not committed for [`FRESH`].

use std::time::Duration;

use crate::app::App;
use crate::error::Code;
use crate::store::{now_ms, Store};

/// A commit this recent proves the store writable without a probe.
pub const FRESH: Duration = Duration::from_secs(5);
/// Longest wait for a probe write before the store counts as not writable.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The outcome of one check: whether it passed, and a short text for the operator (never a
/// path, key or internal error: those go to the log).
#[derive(Debug, Clone)]
pub struct Check {
    pub ok: bool,
    pub message: String,
}

impl Check {
    fn ok(message: impl Into<String>) -> Check {
        Check { ok: true, message: message.into() }
    }

    fn failing(message: impl Into<String>) -> Check {
        Check { ok: false, message: message.into() }
    }
}

/// The names of the checks, in the order of a [`Report`].
pub const CHECKS: [&str; 3] = ["store", "search", "ingestion"];

/// Every check, by name ([`CHECKS`]).
pub struct Report {
    pub checks: Vec<(&'static str, Check)>,
}

impl Report {
    /// Whether every check passed.
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|(_, c)| c.ok)
    }
}

/// Runs every check.
pub async fn check(app: &App) -> Report {
    let store = store(&app.store).await;
    let search = search(app).await;
    let ingestion = if app.tasks.ingest_running() {
        Check::ok("the ingestion worker is running")
    } else {
        Check::failing("the ingestion worker is not running")
    };
    Report { checks: CHECKS.into_iter().zip([store, search, ingestion]).collect() }
}

/// Writable: the writer's last commit succeeded and is recent, or a probe write commits within
/// [`PROBE_TIMEOUT`]. After a failed commit the probe decides, so readiness comes back by itself
/// once the cause is gone (a full disk freed: nothing else would write to find out).
async fn store(store: &Store) -> Check {
    let (last_ok, error) = store.commits.last();
    match error {
        Some(e) => tracing::warn!(error = %e, "readiness: the store's last commit failed; probing"),
        None if last_ok.is_some_and(|t| now_ms() - t < FRESH.as_millis() as i64) => return Check::ok("writable"),
        None => {}
    }
    let probe = store.write(|txn| crate::store::meta::Meta::open(txn)?.put("ready_probe", &now_ms().to_be_bytes()));
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(Ok(())) => Check::ok("writable"),
        Ok(Err(e)) if e.code == Code::InsufficientStorage => {
            Check::failing("the data directory's filesystem is full: writes answer 507 until space is freed")
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: a probe write to the store failed");
            Check::failing("a probe write to the store failed (details in the server log)")
        }
        Err(_) => Check::failing(format!("the store did not commit a probe write within {PROBE_TIMEOUT:?}")),
    }
}

/// Caught up: the indexer task runs and no outbox row has waited longer than `--max-index-lag`.
/// On a shared store the message also gives this node's index position in the shared outbox.
async fn search(app: &App) -> Check {
    if app.reindex.is_closed() {
        return Check::failing("the indexer task is not running");
    }
    let bound_ms = app.config.max_index_lag.saturating_mul(1000) as i64;
    let mut check = match app.search.progress.lag_ms() {
        None => Check::ok("caught up with the store"),
        Some(lag) if lag <= bound_ms => Check::ok(format!("applying changes, {lag} ms behind the store")),
        Some(lag) => Check::failing(format!(
            "{} s behind the store (more than --max-index-lag {} s)",
            lag / 1000,
            app.config.max_index_lag
        )),
    };
    if app.store.is_shared() {
        let head = app.store.read(crate::store::outbox_seq).await;
        let position = match head {
            Ok(head) => {
                format!("; this node's index has applied {} of {head} outbox changes", app.search.applied_seq())
            }
            Err(_) => "; the outbox could not be read".to_string(),
        };
        check.message.push_str(&position);
    }
    check
}
