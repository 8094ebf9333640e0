//! The stop request of background tasks (indexer, ingestion worker): graceful shutdown
//! (`ops::shutdown`) asks, each task stops at its next safe point.

use tokio::sync::watch;

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
