//! When each table was last written, as far as this node knows: what the node's copies of rows
//! are checked against on PostgreSQL, where other nodes write the same tables (the records kept
//! by [`super::record_cache`], the rows the writer keeps between its transactions in
//! [`super::pg`]).
//!
//! A stamp is a number of one clock that only goes up. A copy read when the clock said `t` is
//! still valid while no write of its table was stamped after `t` and nothing made the node forget
//! every table (a listener that connected again: notifications sent meanwhile were lost). This
//! node's writer stamps the tables a commit wrote before it answers the commit's writes, so a
//! node reads its own writes, and marks them as being committed before it sends the `COMMIT`
//! ([`Stamps::committing`]: no copy of them is fresh until the commit is stamped, so no copy read
//! while the commit was under way passes for the state after it); the listener ([`super::notify`]) stamps the tables that another
//! process's commit names in its notification's payload ([`Stamps::payload`]), so a write through
//! another node is seen here once its notification has arrived, as the read cache sees it. A
//! notification without the list (a process of an older build) stamps every table.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Most bytes of a notification's payload (PostgreSQL refuses 8,000 or more); a commit whose
/// list of tables is longer names [`EVERY_TABLE`] instead.
const MAX_PAYLOAD: usize = 7_000;

/// The name in a payload that stamps every table.
const EVERY_TABLE: &str = "*";

/// What [`Stamps`] holds of one table.
#[derive(Clone, Copy, Default)]
struct Table {
    /// The stamp of its last write.
    written: u64,
    /// This process is committing a write of it.
    committing: bool,
}

/// This process's stamps of the tables (see the module documentation).
pub struct Stamps {
    /// This process's token: the first word of the payload of its notifications.
    token: String,
    /// The clock: the last stamp given.
    clock: AtomicU64,
    /// The stamp of the last time every table was stamped.
    all: AtomicU64,
    /// The stamp of the last write of each table, by table name, and whether this process is
    /// committing a write of it ([`Stamps::committing`]).
    tables: Mutex<HashMap<Box<str>, Table>>,
    /// Commits of other processes heard so far.
    foreign: AtomicU64,
    /// Whether the listener is connected (without it no copy is trusted).
    listening: AtomicBool,
}

impl Default for Stamps {
    fn default() -> Stamps {
        let mut random = [0u8; 8];
        // Without randomness the token is the process id: unique enough on one machine.
        let token = match getrandom::fill(&mut random) {
            Ok(()) => hex::encode(random),
            Err(_) => format!("pid{}", std::process::id()),
        };
        Stamps {
            token,
            clock: AtomicU64::new(0),
            all: AtomicU64::new(0),
            tables: Mutex::default(),
            foreign: AtomicU64::new(0),
            listening: AtomicBool::new(false),
        }
    }
}

impl Stamps {
    /// The clock now, to be taken *before* a copy is read from the database; `None` while the
    /// listener is not connected (a copy must not be kept).
    pub fn now(&self) -> Option<u64> {
        self.listening.load(Ordering::Acquire).then(|| self.clock.load(Ordering::Acquire))
    }

    /// Whether a copy of a row of `table` read at stamp `read_at` ([`Stamps::now`]) is still
    /// what the database holds, as far as this node knows.
    pub fn fresh(&self, table: &str, read_at: u64) -> bool {
        if !self.listening.load(Ordering::Acquire) || self.all.load(Ordering::Acquire) > read_at {
            return false;
        }
        self.lock().get(table).is_none_or(|t| !t.committing && t.written <= read_at)
    }

    /// Stamps a write of each of `tables` (committed: call it before the write is answered).
    pub fn written<'a>(&self, tables: impl IntoIterator<Item = &'a str>) {
        self.mark(tables, |t, stamp| t.written = stamp);
    }

    /// Marks `tables` as being committed by this process (call it before the `COMMIT` is sent):
    /// no copy of them is fresh until [`Stamps::committed`].
    pub fn committing<'a>(&self, tables: impl IntoIterator<Item = &'a str>) {
        self.mark(tables, |t, _| t.committing = true);
    }

    /// Stamps the commit of `tables` that [`Stamps::committing`] announced (whether or not it
    /// succeeded: a copy read meanwhile is not trusted either way).
    pub fn committed<'a>(&self, tables: impl IntoIterator<Item = &'a str>) {
        self.mark(tables, |t, stamp| *t = Table { written: stamp, committing: false });
    }

    /// Applies `change` with a new stamp to what is held of each of `tables`.
    fn mark<'a>(&self, tables: impl IntoIterator<Item = &'a str>, change: impl Fn(&mut Table, u64)) {
        let stamp = self.tick();
        let mut kept = self.lock();
        for table in tables {
            match kept.get_mut(table) {
                Some(t) => change(t, stamp),
                None => change(kept.entry(table.into()).or_default(), stamp),
            }
        }
    }

    /// Stamps every table: no copy read before now is trusted.
    pub fn forget_all(&self) {
        let stamp = self.tick();
        self.all.store(stamp, Ordering::Release);
    }

    /// Tells whether the listener is connected; a new connection forgets every table, and
    /// counts as a commit of another process ([`Stamps::foreign`]): commits sent while no
    /// connection listened were not heard, so what trusts the count staying the same (the
    /// writer's kept rows, `pg::Kept`) checks again.
    pub fn listening(&self, on: bool) {
        if on {
            self.forget_all();
            self.foreign.fetch_add(1, Ordering::AcqRel);
        }
        self.listening.store(on, Ordering::Release);
    }

    /// The payload of this process's notification of a commit that wrote `tables`: its token,
    /// then the tables' names, space-separated ([`EVERY_TABLE`] when they would not fit).
    pub fn payload<'a>(&self, tables: impl IntoIterator<Item = &'a str>) -> String {
        let mut payload = self.token.clone();
        for table in tables {
            payload.push(' ');
            payload.push_str(table);
        }
        if payload.len() > MAX_PAYLOAD {
            payload.truncate(self.token.len());
            payload.push(' ');
            payload.push_str(EVERY_TABLE);
        }
        payload
    }

    /// Handles the payload of a commit notification ([`Stamps::payload`]): one of another
    /// process is counted ([`Stamps::foreign`]) and stamps the tables it names (every table
    /// for an empty payload, an older build's); one of this process's own is already stamped.
    pub fn heard(&self, payload: &str) {
        let mut words = payload.split_ascii_whitespace();
        let token = words.next();
        if token == Some(self.token.as_str()) {
            return;
        }
        self.foreign.fetch_add(1, Ordering::AcqRel);
        let tables: Vec<&str> = words.collect();
        if token.is_none() || tables.contains(&EVERY_TABLE) {
            self.forget_all();
        } else if !tables.is_empty() {
            self.written(tables);
        }
    }

    /// How many commits of other processes were heard: while it stays the same, and the
    /// listener is connected, no other process wrote (as far as the notifications arrived).
    pub fn foreign(&self) -> Option<u64> {
        self.listening.load(Ordering::Acquire).then(|| self.foreign.load(Ordering::Acquire))
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::AcqRel) + 1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Table>> {
        self.tables.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listening() -> Stamps {
        let stamps = Stamps::default();
        stamps.listening(true);
        stamps
    }

    #[test]
    fn a_copy_stays_fresh_until_its_table_is_written() {
        let stamps = listening();
        let at = stamps.now().unwrap();
        stamps.written(["other"]);
        assert!(stamps.fresh("replicas", at), "a write of another table leaves it");
        stamps.written(["replicas"]);
        assert!(!stamps.fresh("replicas", at));
        assert!(stamps.fresh("replicas", stamps.now().unwrap()), "a copy read after the write is fresh");
    }

    #[test]
    fn a_table_is_fresh_for_no_copy_while_this_process_commits_it() {
        let stamps = listening();
        let before = stamps.now().unwrap();
        stamps.committing(["replicas"]);
        let during = stamps.now().unwrap();
        stamps.heard(&listening().payload(["chats"]));
        assert!(!stamps.fresh("replicas", during), "another process's commit leaves the mark");
        stamps.committed(["replicas"]);
        assert!(!stamps.fresh("replicas", before) && !stamps.fresh("replicas", during));
        assert!(stamps.fresh("replicas", stamps.now().unwrap()));
    }

    #[test]
    fn another_process_commit_stamps_the_tables_it_names_and_its_own_nothing() {
        let (here, there) = (listening(), listening());
        let (at, connected) = (here.now().unwrap(), here.foreign().unwrap());
        here.heard(&here.payload(["replicas"]));
        assert_eq!((here.fresh("replicas", at), here.foreign()), (true, Some(connected)), "its own commit");
        here.heard(&there.payload(["chats"]));
        assert_eq!((here.fresh("replicas", at), here.fresh("chats", at)), (true, false));
        here.heard(&there.payload([]));
        let after = (here.fresh("replicas", at), here.foreign());
        assert_eq!(after, (true, Some(connected + 2)), "a commit that wrote nothing");
        here.heard("");
        let after = (here.fresh("replicas", at), here.foreign());
        assert_eq!(after, (false, Some(connected + 3)), "an older build's commit");
    }

    #[test]
    fn nothing_is_fresh_while_the_listener_is_away() {
        let stamps = listening();
        let (at, foreign) = (stamps.now().unwrap(), stamps.foreign());
        stamps.listening(false);
        assert_eq!((stamps.now(), stamps.fresh("replicas", at), stamps.foreign()), (None, false, None));
        stamps.listening(true);
        assert!(!stamps.fresh("replicas", at), "notifications may have been lost meanwhile");
        assert_ne!(stamps.foreign(), foreign, "and commits of other processes with them");
    }
}
