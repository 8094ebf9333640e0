//! Usage and analytics (docs/decisions.md "Usage and analytics"): counters of conversations started,
//! per replica and month, day and source, and per organization and month, kept in the write
//! transaction that starts each conversation ([`count_in`]); reads answer from them (and from
//! the per-month token counters of `service::token_usage`), never by scanning history.
//! Months and days are UTC.

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable, WriteTransaction};
use uuid::Uuid;

use super::chats::Placed;
use super::token_usage::month_of;
use crate::error::{Code, Error, Result};
use crate::generate::Usage;
use crate::store::records::{Message, Replica};
use crate::store::{self, k, tables, Store};

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

fn add(table: &mut redb::Table<(u128, u32), u64>, key: (u128, u32)) -> Result<()> {
    let n = table.get(key)?.map(|v| v.value()).unwrap_or(0);
    table.insert(key, n + 1)?;
    Ok(())
}

/// Whose monthly conversation count a conversation goes to, and whose quota caps it: the
/// visitors of the public chats never use up the organization's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pool {
    /// The organization's own API use, capped by the operator's quota (`orgs set-quota`).
    #[default]
    Organization,
    /// The anonymous visitors of the organization's public chats (embed widget and web page),
    /// counted apart and capped by the organization's `embed_conversations_per_month` quota,
    /// else `default` a month (`--embed-conversations-per-month`).
    Visitors { default: u64 },
}

/// Bit set on the month of the [`tables::ORGMONTH_CONVERSATIONS`] keys that count
/// [`Pool::Visitors`] (months are `YYYYMM`, far below it).
const VISITORS_MONTH: u32 = 1 << 31;

impl Pool {
    /// The month of the counter key of this pool for `month` (`YYYYMM`).
    fn month_key(self, month: u32) -> u32 {
        match self {
            Pool::Organization => month,
            Pool::Visitors { .. } => month | VISITORS_MONTH,
        }
    }

    /// The most conversations this pool of `org` may start a month (`None`: no cap).
    pub fn max(self, quotas: &impl ReadableTable<u128, &'static [u8]>, org: Uuid) -> Result<Option<u64>> {
        match self {
            Pool::Organization => Ok(super::quotas::of(quotas, org)?.conversations_per_month),
            Pool::Visitors { default } => {
                Ok(Some(super::quotas::of(quotas, org)?.embed_conversations_per_month.unwrap_or(default)))
            }
        }
    }

    /// Refuses a conversation beyond `max` when this pool already started `started` this month:
    /// 429 `CONVERSATION_QUOTA_EXCEEDED` (the organization's) or
    /// `EMBED_CONVERSATION_QUOTA_EXCEEDED` (the visitors').
    pub fn check(self, started: u64, max: Option<u64>) -> Result<()> {
        match (self, max) {
            (Pool::Organization, _) => {
                super::quotas::check_conversations(started, max, "its monthly conversation quota")
            }
            (Pool::Visitors { .. }, Some(max)) if started >= max => Err(Error::new(
                Code::EmbedConversationQuotaExceeded,
                format!(
                    "the visitors of this organization's public chats started {started} conversations this month; \
                     their monthly quota is {max}"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Conversations this pool of `org` started in `month` (`YYYYMM`).
    pub fn started_in(self, txn: &ReadTransaction, org: Uuid, month: u32) -> Result<u64> {
        let t = txn.open_table(tables::ORGMONTH_CONVERSATIONS)?;
        Ok(t.get((k(org), self.month_key(month)))?.map(|v| v.value()).unwrap_or(0))
    }
}

/// Counts the conversation item `m` started (nothing when it continued one) in the counters of
/// its replica and in `pool`'s count of its organization. Errors: 429 when `pool`'s monthly
/// quota is reached ([`Pool::check`]; the whole write is then refused).
pub fn count_in(txn: &WriteTransaction, m: &Message, placed: &Placed, pool: Pool) -> Result<()> {
    if !placed.new_conversation {
        return Ok(());
    }
    let (replica, month) = (k(m.replica), month_of(m.created_at));
    add(&mut txn.open_table(tables::REPLICAMONTH_CONVERSATIONS)?, (replica, month))?;
    add(&mut txn.open_table(tables::REPLICADAY_CONVERSATIONS)?, (replica, day_of(m.created_at)))?;
    let mut by_source = txn.open_table(tables::REPLICASOURCE_CONVERSATIONS)?;
    let n = by_source.get((replica, m.source.as_str()))?.map(|v| v.value()).unwrap_or(0);
    by_source.insert((replica, m.source.as_str()), n + 1)?;
    let org = store::get::<u128, Replica, _>(&txn.open_table(tables::REPLICAID_REPLICA)?, replica)?.map(|r| r.org);
    if let Some(org) = org {
        let mut t = txn.open_table(tables::ORGMONTH_CONVERSATIONS)?;
        let key = (k(org), pool.month_key(month));
        let started = t.get(key)?.map(|v| v.value()).unwrap_or(0);
        pool.check(started, pool.max(&txn.open_table(tables::ORG_QUOTA)?, org)?)?;
        t.insert(key, started + 1)?;
    }
    Ok(())
}

/// Removes the counters of `replica` (being deleted); the organization's monthly count stays.
pub fn delete_all_in(txn: &WriteTransaction, replica: Uuid) -> Result<()> {
    let r = k(replica);
    txn.open_table(tables::REPLICAMONTH_CONVERSATIONS)?.retain_in((r, 0)..=(r, u32::MAX), |_, _| false)?;
    txn.open_table(tables::REPLICADAY_CONVERSATIONS)?.retain_in((r, 0)..=(r, u32::MAX), |_, _| false)?;
    txn.open_table(tables::REPLICASOURCE_CONVERSATIONS)?.retain_in((r, "")..=(r, "\u{10FFFF}"), |_, _| false)?;
    Ok(())
}

/// Conversations `org` started in `month` (`YYYYMM`) for its own use ([`Pool::Organization`]).
pub fn org_month_in(txn: &ReadTransaction, org: Uuid, month: u32) -> Result<u64> {
    Pool::Organization.started_in(txn, org, month)
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
            let ids: Vec<u128> = txn
                .open_table(tables::ORG_REPLICA)?
                .range((k(org), 0)..=(k(org), u128::MAX))?
                .map(|r| r.map(|(key, _)| key.value().1))
                .collect::<Result<_, _>>()?;
            let replicas = txn.open_table(tables::REPLICAID_REPLICA)?;
            let convs = txn.open_table(tables::REPLICAMONTH_CONVERSATIONS)?;
            let kb = txn.open_table(tables::REPLICA_KB)?;
            let tokens = txn.open_table(tables::REPLICAUSERMONTH_USAGE)?;
            let mut out = MyUsage { month, ..MyUsage::default() };
            for id in ids {
                if let Some((p, c)) = tokens.get((id, k(user), month))?.map(|v| v.value()) {
                    out.tokens_by_replica.insert(Uuid::from_u128(id), Usage { prompt_tokens: p, completion_tokens: c });
                }
                let Some(r) = store::get::<u128, Replica, _>(&replicas, id)? else { continue };
                if r.owner != user {
                    continue;
                }
                let n = convs.get((id, month))?.map(|v| v.value()).unwrap_or(0);
                out.conversations_by_replica.insert(r.id, n);
                out.kb_entries_by_replica.insert(r.id, kb.range((id, 0)..=(id, u64::MAX))?.count() as u64);
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
            super::history::SOURCES
                .iter()
                .map(|s| Ok((*s, t.get((k(replica), *s))?.map(|v| v.value()).unwrap_or(0))))
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
