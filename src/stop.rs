//! The stop request of background tasks (indexer, ingestion worker): graceful shutdown
//! (`ops::shutdown`) asks, each task stops at its next safe point; and the server's background
//! tasks as readiness and shutdown see them ([`Tasks`]).

use std::sync::Mutex;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Tells background tasks to stop at their next safe point. Cheap to clone.
#[derive(Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// A stop that is never requested (for tools that run a task until the process ends).
    pub fn never() -> Stop {
        let (tx, rx) = watch::channel(false);
        std::mem::forget(tx);
        Stop(rx)
    }

    /// Whether the task should stop now.
    pub fn requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once a stop is requested (or the server that could request one is gone).
    pub async fn wait(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// Requests the stop of every [`Stop`] made from it.
pub struct Stopper(watch::Sender<bool>);

impl Default for Stopper {
    fn default() -> Self {
        Stopper(watch::channel(false).0)
    }
}

impl Stopper {
    /// A handle for one background task.
    pub fn stop(&self) -> Stop {
        Stop(self.0.subscribe())
    }

    /// Asks every task to stop.
    pub fn request(&self) {
        self.0.send_replace(true);
    }
}

/// The background tasks of a running server, as readiness (`ops::health`) and shutdown
/// (`ops::shutdown`) see them.
#[derive(Default)]
pub struct Tasks {
    /// Stops the background tasks at shutdown.
    pub stopper: Stopper,
    /// The ingestion queue (`ingest::queue`), once started; taken at shutdown.
    ingest: Mutex<Option<JoinHandle<()>>>,
}

impl Tasks {
    /// Records the ingestion worker's task.
    pub fn set_ingest(&self, task: JoinHandle<()>) {
        *self.ingest.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
    }

    /// Whether the ingestion worker runs (false before it started and after it ended).
    pub fn ingest_running(&self) -> bool {
        self.ingest.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Waits for the ingestion worker to end.
    pub async fn wait_ingest(&self) {
        let task = self.ingest.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}
