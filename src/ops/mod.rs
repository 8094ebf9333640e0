//! Operability: what an operator's tooling talks to besides the API. Health and readiness
//! ([`health`]), Prometheus metrics ([`metrics`]), graceful shutdown on signals
//! ([`shutdown`]), the log format ([`logging`]) and the build's identity ([`version`]).

pub mod health;
pub mod metrics;

use std::sync::OnceLock;

use tokio::task::JoinHandle;

/// The background tasks of a running server, as readiness and shutdown see them.
#[derive(Default)]
pub struct Ops {
    /// The ingestion worker (`ingest::pipeline`), once started.
    ingest: OnceLock<JoinHandle<()>>,
}

impl Ops {
    /// Records the ingestion worker's task (once; later calls are ignored).
    pub fn set_ingest(&self, task: JoinHandle<()>) {
        let _ = self.ingest.set(task);
    }

    /// Whether the ingestion worker runs (false before it started and after it ended).
    pub fn ingest_running(&self) -> bool {
        self.ingest.get().is_some_and(|t| !t.is_finished())
    }
}
