//! Graceful shutdown. The first SIGTERM or SIGINT stops accepting connections; in-flight
//! requests finish (at most `--shutdown-grace`); the background tasks stop at their next safe
//! point (between two steps, each of which is one write transaction, so a restart resumes from
//! the store); queued writes are committed; the process exits 0. A second signal exits at once
//! (status 128 + the signal's number): every acknowledged write is already durable.

use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::app::App;

pub use crate::stop::{Stop, Stopper};

/// SIGINT and SIGTERM, listened to from the start.
struct Signals {
    int: Signal,
    term: Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        Ok(Signals { int: signal(SignalKind::interrupt())?, term: signal(SignalKind::terminate())? })
    }

    /// The next signal's number.
    async fn next(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => 2,
            _ = self.term.recv() => 15,
        }
    }
}

/// Resolves at the first SIGTERM or SIGINT (give it to `crate::serve`); from then on, a second
/// one ends the process at once. Never resolves if the signals cannot be listened to.
pub async fn on_signal() {
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen to SIGTERM/SIGINT");
            return std::future::pending().await;
        }
    };
    let first = signals.next().await;
    tracing::info!(signal = first, "shutting down: finishing in-flight requests (a second signal exits at once)");
    tokio::spawn(async move {
        let second = signals.next().await;
        tracing::warn!(signal = second, "second signal: exiting at once");
        std::process::exit(128 + second);
    });
}

/// After the listener closed and in-flight requests ended: stops the background tasks at their
/// next safe point (waiting at most `grace` for them) and commits every queued write.
pub async fn finish(app: &App, grace: Duration) {
    app.tasks.stopper.request();
    let tasks = async {
        app.tasks.wait_ingest().await;
        app.reindex.closed().await;
    };
    if tokio::time::timeout(grace, tasks).await.is_err() {
        tracing::warn!("background tasks did not reach a safe point in time; they resume at the next start");
    }
    // The writer applies its queue in order: once this empty write is acknowledged, every write
    // queued before it is durable.
    if let Err(e) = app.store.write(|_| Ok(())).await {
        tracing::error!(error = %e, "the last writes could not be committed");
    }
    tracing::info!("stopped");
}
