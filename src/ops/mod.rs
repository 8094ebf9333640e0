//! Operability: what an operator's tooling talks to besides the API. Health and readiness
//! ([`health`]), Prometheus metrics ([`metrics`]), graceful shutdown on signals
//! ([`shutdown`]), the log format ([`logging`]) and the build's identity ([`version`]).

pub mod health;
pub mod logging;
pub mod metrics;
pub mod shutdown;
pub mod version;

use std::sync::Mutex;

use tokio::task::JoinHandle;

/// The background tasks of a running server, as readiness and shutdown see them.
#[derive(Default)]
pub struct Ops {
    /// Stops the background tasks at shutdown ([`shutdown::finish`]).
    pub stopper: shutdown::Stopper,
    /// The ingestion queue (`ingest::queue`), once started; taken at shutdown.
    ingest: Mutex<Option<JoinHandle<()>>>,
}

impl Ops {
    /// Records the ingestion worker's task.
    pub fn set_ingest(&self, task: JoinHandle<()>) {
        *self.ingest.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
    }

    /// Whether the ingestion worker runs (false before it started and after it ended).
    pub fn ingest_running(&self) -> bool {
        self.ingest.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Waits for the ingestion worker to end.
    async fn wait_ingest(&self) {
        let task = self.ingest.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}
