//! Leases: which node does a piece of work that exactly one node may do at a time (run a bot,
//! run an ingestion job), when several nodes share one PostgreSQL database.
//!
//! A lease is a PostgreSQL session-level advisory lock (`pg_try_advisory_lock`), held by one
//! connection per node that is used for nothing else (the session). PostgreSQL releases a
//! session's locks when the session ends, so a node that dies (`kill -9`, a crash, a lost
//! machine) lets go of its leases as soon as its connection closes, and another node's next
//! try takes them over: no expiry to wait out, no clock shared between nodes.
//!
//! **A session lost.** A keeper pings the session every [`PING_EVERY`]; a ping that fails or
//! takes longer than [`PING_TIMEOUT`] counts the session as lost: every lease taken on it
//! reports [`Lease::lost`], and the next try opens a new session. The session asks the server to
//! end it after [`SERVER_IDLE_TIMEOUT`] without a statement (`idle_session_timeout`, PostgreSQL
//! 14 and later), longer than the keeper's bound: a node cut off from the database gives its
//! leases up on its side before the server hands them to another node.
//!
//! On redb the store is one process's: every lease is granted and never lost.
//!
//! A lease's name is hashed (SHA-256, first 8 bytes) into the lock's 64-bit key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use postgres::{Client, NoTls};
use sha2::Digest;
use tokio::sync::watch;

use crate::error::{Error, Result};

/// How often the keeper checks that the session is alive.
pub const PING_EVERY: Duration = Duration::from_secs(2);
/// How long a ping may take before the session counts as lost.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server keeps a session that sends nothing (`idle_session_timeout`).
pub const SERVER_IDLE_TIMEOUT: &str = "15s";

/// The leases of this node (cheap to clone).
#[derive(Clone)]
pub struct Leases(Option<Arc<Shared>>);

/// The session and what was taken on it.
struct Shared {
    url: String,
    state: Mutex<State>,
    /// The session's generation, bumped when a session is lost.
    epoch: watch::Sender<u64>,
    keeper: Once,
}

#[derive(Default)]
struct State {
    client: Option<Arc<Mutex<Client>>>,
    epoch: u64,
    /// The keys held by this node, with the generation of the session they were taken on
    /// (advisory locks count re-entries of one session, so a key is never taken twice here).
    held: HashMap<i64, u64>,
}

/// A lease held by this node, given back when dropped.
pub struct Lease {
    held: Option<(Arc<Shared>, i64, u64)>,
    lost: Option<watch::Receiver<u64>>,
}

impl Leases {
    /// The leases of a store no other process shares: every one is granted.
    pub fn local() -> Leases {
        Leases(None)
    }

    /// The leases of the nodes sharing the database at `url` (no connection is made before the
    /// first [`Leases::try_acquire`]).
    pub fn postgres(url: &str) -> Leases {
        let state = Mutex::new(State::default());
        let shared = Shared { url: url.to_string(), state, epoch: watch::channel(0).0, keeper: Once::new() };
        Leases(Some(Arc::new(shared)))
    }

    /// Takes the lease `name` if no node holds it (this one included); `None` when one does.
    /// Errors: the database cannot be reached.
    pub async fn try_acquire(&self, name: &str) -> Result<Option<Lease>> {
        let Some(shared) = &self.0 else { return Ok(Some(Lease { held: None, lost: None })) };
        shared.keeper.call_once(|| spawn_keeper(Arc::downgrade(shared)));
        let key = key_of(name);
        let s = shared.clone();
        let taken = tokio::task::spawn_blocking(move || s.try_lock(key)).await.map_err(Error::internal)??;
        Ok(taken.map(|epoch| Lease { held: Some((shared.clone(), key, epoch)), lost: Some(shared.epoch.subscribe()) }))
    }
}

impl Lease {
    /// Whether the lease is still held (its session not lost); always on redb.
    pub fn is_held(&self) -> bool {
        match (&self.held, &self.lost) {
            (Some((_, _, epoch)), Some(rx)) => *rx.borrow() == *epoch,
            _ => true,
        }
    }

    /// Takes the lease `name`, trying again every `every` until it is granted (errors are
    /// logged and tried again alike).
    pub async fn wait(leases: &Leases, name: &str, every: Duration) -> Lease {
        loop {
            match leases.try_acquire(name).await {
                Ok(Some(lease)) => return lease,
                Ok(None) => {}
                Err(e) => tracing::warn!(lease = name, error = %e, "taking a lease failed; trying again"),
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Keeps `slot` holding the lease `name` when it can: a lost lease is dropped and a free
    /// one taken. Whether `slot` holds it now (errors are logged and count as not).
    pub async fn keep(slot: &mut Option<Lease>, leases: &Leases, name: &str) -> bool {
        if slot.as_ref().is_some_and(|l| !l.is_held()) {
            *slot = None;
        }
        if slot.is_none() {
            *slot = leases.try_acquire(name).await.unwrap_or_else(|e| {
                tracing::warn!(lease = name, error = %e, "taking a lease failed");
                None
            });
        }
        slot.is_some()
    }

    /// Resolves once the lease is no longer held (its session was lost); never on redb.
    pub async fn lost(&mut self) {
        let (Some((_, _, epoch)), Some(rx)) = (&self.held, &mut self.lost) else {
            return std::future::pending().await;
        };
        let epoch = *epoch;
        if rx.wait_for(|now| *now != epoch).await.is_err() {
            std::future::pending::<()>().await
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some((shared, key, epoch)) = self.held.take() {
            super::pg::off_runtime(move || shared.unlock(key, epoch));
        }
    }
}

impl Drop for Shared {
    /// Closes the session on a thread of its own (closing runs the client's own runtime, which
    /// cannot start on a runtime's thread, where the last store is often dropped).
    fn drop(&mut self) {
        if let Some(client) = self.lock().client.take() {
            drop(std::thread::spawn(move || drop(client)));
        }
    }
}

/// The lock key of lease `name`.
fn key_of(name: &str) -> i64 {
    let digest = sha2::Sha256::digest(name.as_bytes());
    i64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The session, if one is open, and its generation.
    fn current(&self) -> Option<(Arc<Mutex<Client>>, u64)> {
        let state = self.lock();
        state.client.clone().map(|c| (c, state.epoch))
    }

    /// The session, opened if there is none, and its generation.
    fn session(&self) -> Result<(Arc<Mutex<Client>>, u64)> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let mut client = Client::connect(&self.url, NoTls).map_err(Error::caused_by)?;
        let idle = format!("SET idle_session_timeout = '{SERVER_IDLE_TIMEOUT}'");
        if let Err(e) = client.batch_execute(&idle) {
            tracing::warn!(error = %e, "the lease session has no server-side idle timeout (PostgreSQL before 14)");
        }
        let mut state = self.lock();
        let client = state.client.get_or_insert_with(|| Arc::new(Mutex::new(client))).clone();
        Ok((client, state.epoch))
    }

    /// Tries the lock of `key`; the session's generation when taken.
    fn try_lock(&self, key: i64) -> Result<Option<u64>> {
        let (client, epoch) = self.session()?;
        if self.lock().held.get(&key) == Some(&epoch) {
            return Ok(None);
        }
        let row = lock_client(&client).query_one("SELECT pg_try_advisory_lock($1)", &[&key]);
        let taken: bool = match row {
            Ok(row) => row.get(0),
            Err(e) => {
                self.lose(epoch);
                return Err(Error::caused_by(e));
            }
        };
        let mut state = self.lock();
        if !taken || state.epoch != epoch {
            return Ok(None);
        }
        state.held.insert(key, epoch);
        Ok(Some(epoch))
    }

    /// Gives `key` back, if the session it was taken on is still the current one.
    fn unlock(&self, key: i64, epoch: u64) {
        let client = {
            let mut state = self.lock();
            if state.epoch != epoch || state.held.get(&key) != Some(&epoch) {
                return;
            }
            state.held.remove(&key);
            state.client.clone()
        };
        if let Some(client) = client {
            let unlocked = lock_client(&client).execute("SELECT pg_advisory_unlock($1)", &[&key]);
            if let Err(e) = unlocked {
                tracing::warn!(error = %e, "giving a lease back failed; the session is replaced");
                self.lose(epoch);
            }
        }
    }

    /// Counts the session of generation `epoch` as lost: its leases report it, and the next
    /// try opens a new session.
    fn lose(&self, epoch: u64) {
        let old = {
            let mut state = self.lock();
            if state.epoch != epoch {
                return;
            }
            state.epoch += 1;
            state.held.clear();
            self.epoch.send_replace(state.epoch);
            state.client.take()
        };
        tracing::warn!("the lease session to PostgreSQL was lost; its leases are given up");
        // Closing runs the client's own runtime: never on a runtime's thread.
        drop(std::thread::spawn(move || drop(old)));
    }

    /// Pings the current session, if there is one; counts it lost when the ping fails.
    fn ping(&self) {
        let Some((client, epoch)) = self.current() else { return };
        let pinged = lock_client(&client).batch_execute("SELECT 1");
        if let Err(e) = pinged {
            tracing::warn!(error = %e, "the lease session's ping failed");
            self.lose(epoch);
        }
    }
}

fn lock_client(client: &Mutex<Client>) -> std::sync::MutexGuard<'_, Client> {
    client.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Pings the session every [`PING_EVERY`] while the leases exist; a ping that takes longer than
/// [`PING_TIMEOUT`] counts the session as lost.
fn spawn_keeper(shared: std::sync::Weak<Shared>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(PING_EVERY).await;
            let Some(s) = shared.upgrade() else { return };
            let epoch = s.lock().epoch;
            let pinger = s.clone();
            let ping = tokio::task::spawn_blocking(move || pinger.ping());
            if tokio::time::timeout(PING_TIMEOUT, ping).await.is_err() {
                s.lose(epoch);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_local_lease_is_always_granted_and_never_lost() {
        let leases = Leases::local();
        let mut a = leases.try_acquire("bot").await.unwrap().unwrap();
        assert!(leases.try_acquire("bot").await.unwrap().is_some());
        let lost = tokio::time::timeout(Duration::from_millis(50), a.lost()).await;
        assert!(lost.is_err(), "a local lease is never lost");
    }

    #[test]
    fn names_hash_to_distinct_keys() {
        assert_ne!(key_of("job 1"), key_of("job 2"));
        assert_eq!(key_of("job 1"), key_of("job 1"));
    }
}
