//! Token usage of chat completions per replica, user and month (the `usage` the upstream
//! reported, or the estimate of [`crate::generate::prompt::estimate_tokens`]).

use chrono::Datelike;
use uuid::Uuid;

use crate::error::Result;
use crate::generate::Usage;
use crate::store::kv::{LazyTable, ReadableTable, Reads, Table, WriteTransaction};
use crate::store::{k, tables, Store};

/// `YYYYMM` (UTC) of a store timestamp in milliseconds.
pub fn month_of(ms: i64) -> u32 {
    let d = chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    d.year().max(0) as u32 * 100 + d.month()
}

/// The token usage table of `txn`, opened when a write first adds usage ([`add_to`]).
pub fn lazy(txn: &WriteTransaction) -> LazyTable<'_, (u128, u128, u32), (u64, u64)> {
    LazyTable::new(txn, tables::REPLICAUSERMONTH_USAGE)
}

/// The usage of `(replica, user)` in `month` (`YYYYMM`), as of `txn`; `None` when nothing
/// was counted. Errors: the store's.
pub fn in_month(txn: &impl Reads, replica: Uuid, user: Uuid, month: u32) -> Result<Option<Usage>> {
    let found = txn.read_table(tables::REPLICAUSERMONTH_USAGE)?.get((k(replica), k(user), month))?.map(|v| v.value());
    Ok(found.map(|(p, c)| Usage { prompt_tokens: p, completion_tokens: c }))
}

/// Adds `usage` to the month of `now` for `(replica, user)` in the open
/// `replicausermonth_usage` table (a completion's history write, `history::Append`).
pub fn add_to(
    t: &mut Table<(u128, u128, u32), (u64, u64)>,
    replica: Uuid,
    user: Uuid,
    now: i64,
    usage: Usage,
) -> Result<()> {
    let key = (k(replica), k(user), month_of(now));
    let (p, c) = t.get(key)?.map(|v| v.value()).unwrap_or((0, 0));
    t.put(key, (p + usage.prompt_tokens, c + usage.completion_tokens))?;
    Ok(())
}

/// The usage of `(replica, user)` in `month` (`YYYYMM`).
pub async fn of_month(store: &Store, replica: Uuid, user: Uuid, month: u32) -> Result<Usage> {
    store
        .read(move |txn| {
            let Some(t) = txn.open_existing_table(tables::REPLICAUSERMONTH_USAGE)? else {
                return Ok(Usage::default());
            };
            let (p, c) = t.get((k(replica), k(user), month))?.map(|v| v.value()).unwrap_or((0, 0));
            Ok(Usage { prompt_tokens: p, completion_tokens: c })
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn usage_adds_up_per_replica_user_and_month() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (replica, user) = (Uuid::now_v7(), Uuid::now_v7());
        let now = crate::store::now_ms();
        let usage = Usage { prompt_tokens: 10, completion_tokens: 3 };
        for _ in 0..2 {
            store
                .write(move |txn| {
                    add_to(&mut txn.open_table(tables::REPLICAUSERMONTH_USAGE)?, replica, user, now, usage)
                })
                .await
                .unwrap();
        }
        let month = month_of(now);
        let total = Usage { prompt_tokens: 20, completion_tokens: 6 };
        assert_eq!(of_month(&store, replica, user, month).await.unwrap(), total);
        assert_eq!(of_month(&store, replica, Uuid::now_v7(), month).await.unwrap(), Usage::default());
        assert_eq!(of_month(&store, replica, user, month + 1).await.unwrap(), Usage::default());
    }

    #[test]
    fn months_are_yyyymm_in_utc() {
        assert_eq!(month_of(0), 197001);
        assert_eq!(month_of(1_795_268_049_000), 202611);
    }
}
