//! Usage and analytics (docs/decisions.md "Usage and analytics"): counters of conversations started,
//! per replica and month, day and source, and per organization and month, kept in the write
//! transaction that starts each conversation ([`count_in`]); reads answer from them (and from
//! the per-month token counters of `service::token_usage`), never by scanning history.
//! Months and days are UTC.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::quotas::Pool;
use super::token_usage::month_of;
use crate::error::Result;
use crate::generate::Usage;
use crate::store::kv::WriteTransaction;
use crate::store::records::Message;
use crate::store::{k, tables, Store};

/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

/// Days since the Unix epoch (UTC) of a store timestamp.
pub fn day_of(ms: i64) -> u32 {
    ms.div_euclid(DAY_MS).max(0) as u32
}

/// `YYYY-MM-DD` of a day number.
pub fn date_of(day: u32) -> String {
    chrono::DateTime::from_timestamp_millis(day as i64 * DAY_MS).unwrap_or_default().format("%Y-%m-%d").to_string()
}

fn add(table: &mut crate::store::kv::Table<(u128, u32), u64>, key: (u128, u32)) -> Result<()> {
    let n = table.get(key)?.map(|v| v.value()).unwrap_or(0);
    table.insert(key, n + 1)?;
    Ok(())
}

/// Counts the conversation item `m` starts in the counters of its replica and in `pool`'s count
/// of its organization. A pure counter: whether the conversation may start at all is
/// `service::quotas`' to say, before this is called ([`super::quotas::admit_conversation_in`]).
pub fn count_in(txn: &WriteTransaction, m: &Message, pool: Pool) -> Result<()> {
    let (replica, month) = (k(m.replica), month_of(m.created_at));
    add(&mut txn.open_table(tables::REPLICAMONTH_CONVERSATIONS)?, (replica, month))?;
    add(&mut txn.open_table(tables::REPLICADAY_CONVERSATIONS)?, (replica, day_of(m.created_at)))?;
    let mut by_source = txn.open_table(tables::REPLICASOURCE_CONVERSATIONS)?;
    let n = by_source.get((replica, m.source.as_str()))?.map(|v| v.value()).unwrap_or(0);
    by_source.insert((replica, m.source.as_str()), n + 1)?;
    super::quotas::count_started_in(txn, m, pool)
}

/// Removes the counters of `replica` (being deleted); the organization's monthly count stays.
pub fn delete_all_in(txn: &WriteTransaction, replica: Uuid) -> Result<()> {
    let r = k(replica);
    txn.open_table(tables::REPLICAMONTH_CONVERSATIONS)?.retain_in((r, 0)..=(r, u32::MAX), |_, _| false)?;
    txn.open_table(tables::REPLICADAY_CONVERSATIONS)?.retain_in((r, 0)..=(r, u32::MAX), |_, _| false)?;
    txn.open_table(tables::REPLICASOURCE_CONVERSATIONS)?.retain_in((r, "")..=(r, "\u{10FFFF}"), |_, _| false)?;
    Ok(())
}

/// What `GET /v1/users/me/usage` answers, for the replicas the user owns (and the tokens the
/// user's own completions used on any replica of the organization).
#[derive(Debug, Clone, Default)]
pub struct MyUsage {
    pub conversations_by_replica: BTreeMap<Uuid, u64>,
    pub kb_entries_by_replica: BTreeMap<Uuid, u64>,
    pub tokens_by_replica: BTreeMap<Uuid, Usage>,
    /// `YYYYMM` of the month counted.
    pub month: u32,
}

/// The usage of `user` of `org` in the month of `now` (see [`MyUsage`]).
pub async fn of_user(store: &Store, org: Uuid, user: Uuid, now: i64) -> Result<MyUsage> {
    let month = month_of(now);
    store
        .read(move |txn| {
            let ids = crate::store::replica_index::ids_of_org(txn, org)?;
            let convs = txn.open_table(tables::REPLICAMONTH_CONVERSATIONS)?;
            let mut out = MyUsage { month, ..MyUsage::default() };
            for replica in ids {
                let id = k(replica);
                if let Some(usage) = super::token_usage::in_month(txn, replica, user, month)? {
                    out.tokens_by_replica.insert(replica, usage);
                }
                let Some(r) = crate::store::replica_index::get_in(txn, replica)? else { continue };
                if r.owner != user {
                    continue;
                }
                let n = convs.get((id, month))?.map(|v| v.value()).unwrap_or(0);
                out.conversations_by_replica.insert(r.id, n);
                out.kb_entries_by_replica.insert(r.id, crate::store::kb::ids_of_replica(txn, replica)?.len() as u64);
            }
            Ok(out)
        })
        .await
}

/// `(date, conversations started up to the end of that day)` for the `days` days ending with
/// the day of `now`, oldest first.
pub async fn cumulative(store: &Store, replica: Uuid, now: i64, days: u32) -> Result<Vec<(String, u64)>> {
    let last = day_of(now);
    let first = last.saturating_sub(days.saturating_sub(1));
    store
        .read(move |txn| {
            let t = txn.open_table(tables::REPLICADAY_CONVERSATIONS)?;
            let r = k(replica);
            let mut total = 0;
            for row in t.range((r, 0)..(r, first))? {
                total += row?.1.value();
            }
            let mut per_day = BTreeMap::new();
            for row in t.range((r, first)..=(r, last))? {
                let (key, v) = row?;
                per_day.insert(key.value().1, v.value());
            }
            Ok((first..=last)
                .map(|d| {
                    total += per_day.get(&d).copied().unwrap_or(0);
                    (date_of(d), total)
                })
                .collect())
        })
        .await
}

/// Conversations of `replica` started on each source (every source, zeros included).
pub async fn by_source(store: &Store, replica: Uuid) -> Result<Vec<(&'static str, u64)>> {
    store
        .read(move |txn| {
            let t = txn.open_table(tables::REPLICASOURCE_CONVERSATIONS)?;
            super::channel::sources()
                .into_iter()
                .map(|s| Ok((s, t.get((k(replica), s))?.map(|v| v.value()).unwrap_or(0))))
                .collect()
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_utc_dates() {
        assert_eq!(date_of(day_of(0)), "1970-01-01");
        assert_eq!(date_of(day_of(1_795_391_999_000)), "2026-11-22", "the last second of a day");
        assert_eq!(date_of(day_of(1_795_392_000_000)), "2026-11-23");
        assert_eq!(day_of(DAY_MS - 1) + 1, day_of(DAY_MS));
    }
}
