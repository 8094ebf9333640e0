//! The ingestion queue's scheduler: which jobs run now, taken from each organization in turn.
//!
//! Every pass reads the whole `kbid_job` table (so a job not yet due, such as an `autoRefresh`
//! page fetched again tomorrow, never hides one that is due), keeps the due jobs not already
//! running, and orders them by organization in turn: the first job of each organization, then
//! the second of each, …, starting one organization further at every pass. Jobs start while a
//! slot is free (`--ingest-concurrency`); each holds its own slot until its run ends, so one
//! slow page or document holds only that slot. A job that ends wakes the scheduler
//! (`Store::jobs_notify`, as do new entries); otherwise it sleeps until the next job is due.
//! At a stop, the runs in progress are aborted and their counts taken back.
//! The steps of a job are `super::pipeline`'s.
//!
//! **Several nodes** (a shared store): every node's scheduler sees every job, and a job runs
//! on the node that takes its lease (`store::lease`, named `ingest <entry id>`) for as long as
//! the run lasts; a node that does not get it leaves the job alone. A run whose lease is lost
//! (its node's database session ended) is aborted, since another node may take the job over.
//! Jobs added through other nodes, and jobs whose node died, wake nothing here, so the
//! scheduler also looks every [`SHARED_POLL`].

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use uuid::Uuid;

use super::pipeline::{self, Worker};
use crate::error::Result;
use crate::store::kv::ReadableTable;
use crate::store::lease::Lease;
use crate::store::{self, now_ms, tables, Store};

/// The longest sleep of the scheduler on a shared store.
pub const SHARED_POLL: Duration = Duration::from_secs(2);

/// A due job: the organization of its entry (nil when the entry is gone) and the entry id.
type Due = (Uuid, u64);

/// Starts the scheduler; it ends at the worker's stop, aborting the runs in progress (each is
/// resumed from its stored status at the next start).
pub fn spawn(store: Store, worker: Worker) -> tokio::task::JoinHandle<()> {
    let mut stop = worker.stop.clone();
    tokio::spawn(async move {
        let mut scheduler = Scheduler::new(store.clone(), worker);
        while !stop.requested() {
            let wait = match scheduler.pass().await {
                Ok(wait) => wait,
                Err(e) => {
                    tracing::error!(error = %e, "ingestion queue scan failed; retrying");
                    Some(Duration::from_secs(1))
                }
            };
            let wait = async {
                match wait {
                    Some(d) => {
                        let _ = tokio::time::timeout(d, store.jobs_notify.notified()).await;
                    }
                    None => store.jobs_notify.notified().await,
                }
            };
            tokio::select! {
                _ = wait => {}
                _ = stop.wait() => break,
            }
        }
        scheduler.stop().await;
    })
}

struct Scheduler {
    store: Store,
    worker: Arc<Worker>,
    slots: Arc<Semaphore>,
    /// Entry ids of the jobs running now.
    running: Arc<Mutex<HashSet<u64>>>,
    runs: JoinSet<()>,
    /// Passes so far: which organization goes first.
    turn: usize,
}

impl Scheduler {
    fn new(store: Store, worker: Worker) -> Scheduler {
        let slots = Arc::new(Semaphore::new(worker.concurrency));
        let (running, runs) = (Arc::default(), JoinSet::new());
        Scheduler { store, worker: Arc::new(worker), slots, running, runs, turn: 0 }
    }

    /// Starts the due jobs that get a slot; answers how long until the next job is due (`None`:
    /// wait for a wake-up, from a job that ends or a new entry).
    async fn pass(&mut self) -> Result<Option<Duration>> {
        while self.runs.try_join_next().is_some() {}
        let now = now_ms();
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (due, next) = self.store.read_scan(move |txn| due_jobs(txn, now, &running)).await?;
        self.turn = self.turn.wrapping_add(1);
        for id in in_turn(due, self.turn) {
            let Ok(slot) = self.slots.clone().try_acquire_owned() else { return Ok(None) };
            if let Some(lease) = lease(&self.store, id).await {
                self.start(id, slot, lease);
            }
        }
        let next = next.map(|at| Duration::from_millis((at - now).max(1) as u64));
        Ok(match self.store.is_shared() {
            true => Some(next.map_or(SHARED_POLL, |d| d.min(SHARED_POLL))),
            false => next,
        })
    }

    /// Aborts the runs in progress and takes back their counts: a stop is not a crash (see
    /// `pipeline::MAX_ATTEMPTS`). Their jobs resume at the next start.
    async fn stop(&mut self) {
        self.runs.shutdown().await;
        let running: Vec<u64> = self.running.lock().unwrap_or_else(|e| e.into_inner()).drain().collect();
        if running.is_empty() {
            return;
        }
        if let Err(e) = self.store.write(move |txn| pipeline::unclaim(txn, &running)).await {
            tracing::warn!(error = %e, "the runs stopped were not uncounted; they count as interrupted");
        }
    }

    fn start(&mut self, id: u64, slot: tokio::sync::OwnedSemaphorePermit, mut lease: Lease) {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).insert(id);
        let (store, worker, running) = (self.store.clone(), self.worker.clone(), self.running.clone());
        self.runs.spawn(async move {
            // A panic in a step ends this run only: the job is freed below and, its run counted,
            // is given up after `pipeline::MAX_ATTEMPTS` like a crash.
            let run = std::panic::AssertUnwindSafe(pipeline::run_or_retry(&store, &worker, id));
            tokio::select! {
                ran = futures_util::FutureExt::catch_unwind(run) => match ran {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::error!(entry = id, error = %e, "ingestion job failed; it is retried at the next pass")
                    }
                    Err(_) => tracing::error!(entry = id, "ingestion job panicked; it is retried at the next pass"),
                },
                () = lease.lost() => tracing::warn!(entry = id, "the ingestion job's lease was lost; its run is stopped"),
            }
            running.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            drop((slot, lease));
            store.jobs_notify.notify_one();
        });
    }
}

/// The lease of job `id` if this node takes it (`None`: another node runs it; an error is
/// logged and counts as `None`, the job is tried again at a later pass).
async fn lease(store: &Store, id: u64) -> Option<Lease> {
    match store.leases.try_acquire(&format!("ingest {id}")).await {
        Ok(lease) => lease,
        Err(e) => {
            tracing::warn!(entry = id, error = %e, "taking an ingestion job's lease failed");
            None
        }
    }
}

/// The due jobs not in `running`, with their organizations, and when the first job not yet
/// due is due (ms since the epoch).
fn due_jobs(
    txn: &crate::store::kv::ReadTransaction,
    now: i64,
    running: &HashSet<u64>,
) -> Result<(Vec<Due>, Option<i64>)> {
    let (jobs, entries) = (txn.open_table(tables::KBID_JOB)?, store::kb::entry_reader(txn)?);
    let (mut due, mut next) = (Vec::new(), None::<i64>);
    for row in jobs.iter()? {
        let (id, (_, not_before)) = row.map(|(k, v)| (k.value(), v.value()))?;
        if not_before > now {
            next = Some(next.map_or(not_before, |n| n.min(not_before)));
        } else if !running.contains(&id) {
            let org = entries.entry(id)?.map_or(Uuid::nil(), |e| e.org);
            due.push((org, id));
        }
    }
    Ok((due, next))
}

/// Orders `due` (in id order) by organization in turn: the first job of each organization,
/// then the second of each, …; the organizations taken in id order, rotated by `turn`.
fn in_turn(due: Vec<Due>, turn: usize) -> Vec<u64> {
    let mut by_org: BTreeMap<Uuid, VecDeque<u64>> = BTreeMap::new();
    for (org, id) in due {
        by_org.entry(org).or_default().push_back(id);
    }
    let mut queues: VecDeque<VecDeque<u64>> = by_org.into_values().collect();
    if !queues.is_empty() {
        let first = turn % queues.len();
        queues.rotate_left(first);
    }
    let mut order = Vec::new();
    while let Some(mut queue) = queues.pop_front() {
        if let Some(id) = queue.pop_front() {
            order.push(id);
            queues.push_back(queue);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn org(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn organizations_take_turns_whatever_their_queue_length() {
        let mut due: Vec<Due> = (1..=64).map(|id| (org(1), id)).collect();
        due.push((org(2), 100));
        due.push((org(2), 101));
        let order = in_turn(due, 0);
        assert_eq!(&order[..4], &[1, 100, 2, 101]);
        assert_eq!(order.len(), 66);
    }

    #[test]
    fn the_first_organization_rotates_from_pass_to_pass() {
        let due = vec![(org(1), 1), (org(2), 2), (org(3), 3)];
        assert_eq!(in_turn(due.clone(), 0), vec![1, 2, 3]);
        assert_eq!(in_turn(due.clone(), 1), vec![2, 3, 1]);
        assert_eq!(in_turn(due, 5), vec![3, 1, 2]);
    }

    #[test]
    fn nothing_due_is_nothing_to_run() {
        assert!(in_turn(Vec::new(), 3).is_empty());
    }
}
