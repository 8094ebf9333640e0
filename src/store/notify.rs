//! Commits of other nodes, heard through PostgreSQL's `LISTEN`/`NOTIFY`, when several nodes
//! share one database.
//!
//! Every write transaction notifies [`COMMIT`] as it commits (in the same round trip as its
//! `COMMIT`), naming the tables it wrote in the payload ([`super::stamps`]); one that adds an
//! outbox row or an ingestion job also notifies [`KB`] (`store::kb`). PostgreSQL delivers a
//! notification only if its transaction commits, once per transaction and channel, to every
//! session listening.
//!
//! Each node listens on a connection of its own, on a thread of its own ([`Listener`]). A
//! notification on either channel moves this node's commit generation on (the read cache,
//! `http::read_cache`, keeps answers under it: one kept before another node's commit is not
//! sent after this node heard of it); one on [`KB`] also wakes the indexer and the ingestion
//! scheduler, so a change made through another node is indexed as soon as it is committed.
//! This node's own commits move the generation on before they are answered (the writer), so a
//! node always reads its own writes. A write through another node is seen here once its
//! notification has arrived (`tests/it/nodes.rs` measures it: on loopback, a read through this
//! node showed another node's write at most 3.2 ms after it was acknowledged, the read
//! included); a read on this node in that window may get the answer kept from before.
//!
//! While the connection is down the generation is `None` (the read cache keeps nothing), and
//! after it comes back the generation moves on and both tasks are woken, since notifications
//! sent meanwhile are lost.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use postgres::{Client, NoTls};
use tokio::sync::Notify;

use super::stamps::Stamps;

/// The channel every write transaction notifies.
pub const COMMIT: &str = "replicad_commit";
/// The channel of a transaction that added an outbox row or an ingestion job.
pub const KB: &str = "replicad_kb";

/// How long the listening thread waits for a notification before it looks at its stop flag.
const WAIT: Duration = Duration::from_millis(500);
/// The pause before the connection is made again after it failed.
const RECONNECT: Duration = Duration::from_secs(1);

/// This node's listening thread; it ends (within [`WAIT`]) when the listener is dropped.
pub struct Listener {
    state: Arc<State>,
}

struct State {
    generation: AtomicU64,
    /// The tables' stamps, moved on by the commits heard ([`super::stamps`]).
    stamps: Arc<Stamps>,
    listening: AtomicBool,
    stop: AtomicBool,
}

/// What a notification on [`KB`] wakes: the indexer and the ingestion scheduler.
#[derive(Clone, Default)]
pub struct Wake {
    pub outbox: Arc<Notify>,
    pub jobs: Arc<Notify>,
}

impl Listener {
    /// Starts listening on the database at `url`, on a thread of its own; the commits heard
    /// stamp the tables they wrote in `stamps`.
    pub fn spawn(url: &str, wake: Wake, stamps: Arc<Stamps>) -> Listener {
        let state = Arc::new(State {
            generation: AtomicU64::new(0),
            stamps,
            listening: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let (s, url) = (state.clone(), url.to_string());
        let spawned = std::thread::Builder::new().name("store-listener".into()).spawn(move || listen(&s, &url, &wake));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "the commit listener thread did not start; the read cache stays off");
        }
        Listener { state }
    }

    /// The commit generation: moves on at every commit heard of or made here; `None` while not
    /// listening.
    pub fn generation(&self) -> Option<u64> {
        let s = &self.state;
        s.listening.load(Ordering::Acquire).then(|| s.generation.load(Ordering::Acquire))
    }

    /// What moves the generation on for a commit of this node (the writer calls it before the
    /// commit is answered).
    pub fn on_commit(&self) -> impl Fn() + Send + 'static {
        let state = self.state.clone();
        move || {
            state.generation.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Release);
    }
}

/// Listens until stopped, connecting again after a failure.
fn listen(state: &State, url: &str, wake: &Wake) {
    while !state.stop.load(Ordering::Acquire) {
        let mut client = match Client::connect(url, NoTls) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "the commit listener cannot connect; trying again");
                std::thread::sleep(RECONNECT);
                continue;
            }
        };
        if let Err(e) = client.batch_execute(&format!("LISTEN {COMMIT}; LISTEN {KB}")) {
            tracing::warn!(error = %e, "LISTEN failed; trying again");
            std::thread::sleep(RECONNECT);
            continue;
        }
        // Commits made while no connection listened were not heard.
        state.generation.fetch_add(1, Ordering::AcqRel);
        state.listening.store(true, Ordering::Release);
        state.stamps.listening(true);
        wake_all(wake);
        hear(state, &mut client, wake);
        state.stamps.listening(false);
        state.listening.store(false, Ordering::Release);
        if !state.stop.load(Ordering::Acquire) {
            tracing::warn!("the commit listener's connection closed; connecting again");
        }
    }
}

/// Handles notifications until the connection fails or the listener is stopped.
fn hear(state: &State, client: &mut Client, wake: &Wake) {
    while !state.stop.load(Ordering::Acquire) {
        let mut notifications = client.notifications();
        let mut heard = notifications.timeout_iter(WAIT);
        loop {
            match postgres::fallible_iterator::FallibleIterator::next(&mut heard) {
                Ok(Some(n)) => {
                    state.generation.fetch_add(1, Ordering::AcqRel);
                    match n.channel() {
                        COMMIT => state.stamps.heard(n.payload()),
                        _ => wake_all(wake),
                    }
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
        drop(heard);
        drop(notifications);
        if client.is_closed() {
            return;
        }
    }
}

fn wake_all(wake: &Wake) {
    wake.outbox.notify_one();
    wake.jobs.notify_one();
}
