//! The operator's quotas per organization (`replicad orgs set-quota`, `replicad orgs list`):
//! conversations started per UTC month (429 `CONVERSATION_QUOTA_EXCEEDED`), conversations its
//! public chats' visitors start per UTC month (429 `EMBED_CONVERSATION_QUOTA_EXCEEDED`, counted
//! apart: [`Pool`]), replicas (429
//! `REPLICA_QUOTA_EXCEEDED`) and knowledge-base entries (429
//! `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`). Each is checked in the write transaction that would
//! exceed it, against counters kept in the same transactions (`service::usage`), so no race lets
//! one through. Every conversation quota check is here, called by the paths that need one.

use serde::Serialize;
use uuid::Uuid;

use super::token_usage::month_of;
use crate::error::{Code, Error, Result};
use crate::store::kv::{ReadTransaction, ReadableTable, Reads, WriteTransaction};
use crate::store::records::{Message, Quota};
use crate::store::{self, k, tables, Store};

/// The quotas set for `org` (fields `None` where the server's defaults apply).
pub fn of(table: &impl ReadableTable<u128, &'static [u8]>, org: Uuid) -> Result<Quota> {
    Ok(store::get::<u128, Quota, _>(table, k(org))?.unwrap_or_default())
}

/// [`of`] in a write transaction.
pub fn of_in(txn: &WriteTransaction, org: Uuid) -> Result<Quota> {
    of(&txn.open_table(tables::ORG_QUOTA)?, org)
}

/// Refuses a conversation beyond `max` when `org` already started `started` this month.
pub fn check_conversations(started: u64, max: Option<u64>, what: &str) -> Result<()> {
    match max {
        Some(max) if started >= max => Err(Error::new(
            Code::ConversationQuotaExceeded,
            format!("the organization started {started} conversations this month; {what} is {max}"),
        )),
        _ => Ok(()),
    }
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
    /// The month of the counter key of this pool for `month` (`YYYYMM`), in
    /// [`tables::ORGMONTH_CONVERSATIONS`] (where `service::usage` counts).
    pub fn month_key(self, month: u32) -> u32 {
        match self {
            Pool::Organization => month,
            Pool::Visitors { .. } => month | VISITORS_MONTH,
        }
    }

    /// The most conversations this pool of `org` may start a month (`None`: no cap).
    pub fn max(self, quotas: &impl ReadableTable<u128, &'static [u8]>, org: Uuid) -> Result<Option<u64>> {
        match self {
            Pool::Organization => Ok(of(quotas, org)?.conversations_per_month),
            Pool::Visitors { default } => Ok(Some(of(quotas, org)?.embed_conversations_per_month.unwrap_or(default))),
        }
    }

    /// Refuses a conversation beyond `max` when this pool already started `started` this month:
    /// 429 `CONVERSATION_QUOTA_EXCEEDED` (the organization's) or
    /// `EMBED_CONVERSATION_QUOTA_EXCEEDED` (the visitors').
    pub fn check(self, started: u64, max: Option<u64>) -> Result<()> {
        match (self, max) {
            (Pool::Organization, _) => check_conversations(started, max, "its monthly conversation quota"),
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
        self.started(&txn.open_table(tables::ORGMONTH_CONVERSATIONS)?, org, month)
    }

    /// [`Pool::started_in`], read in `counts` ([`tables::ORGMONTH_CONVERSATIONS`]).
    fn started(self, counts: &impl ReadableTable<(u128, u32), u64>, org: Uuid, month: u32) -> Result<u64> {
        Ok(counts.get((k(org), self.month_key(month)))?.map(|v| v.value()).unwrap_or(0))
    }
}

/// Conversations `org` started in `month` (`YYYYMM`) for its own use ([`Pool::Organization`]).
pub fn org_month_in(txn: &ReadTransaction, org: Uuid, month: u32) -> Result<u64> {
    Pool::Organization.started_in(txn, org, month)
}

/// Refuses, in the write transaction that stores it, item `m` starting a conversation beyond
/// `pool`'s monthly quota: 429 ([`Pool::check`]; the whole write is then refused). Called by the
/// chats' recorder (`service::chats`) for an item that starts a conversation, before
/// `service::usage` counts it: the counter and the check share the transaction, so no race
/// lets one through.
pub fn admit_conversation_in(txn: &WriteTransaction, m: &Message, pool: Pool) -> Result<()> {
    let Some(org) = store::replica_index::org_of(txn, m.replica)? else { return Ok(()) };
    let counts = txn.open_table(tables::ORGMONTH_CONVERSATIONS)?;
    let started = pool.started(&counts, org, month_of(m.created_at))?;
    pool.check(started, pool.max(&txn.open_table(tables::ORG_QUOTA)?, org)?)
}

/// Counts item `m` as a conversation started by its replica's organization in `pool` (in
/// the write that stores it, after [`admit_conversation_in`] let it through).
pub fn count_started_in(txn: &WriteTransaction, m: &Message, pool: Pool) -> Result<()> {
    let Some(org) = store::replica_index::org_of(txn, m.replica)? else { return Ok(()) };
    let mut t = txn.open_table(tables::ORGMONTH_CONVERSATIONS)?;
    let key = (k(org), pool.month_key(month_of(m.created_at)));
    let started = t.get(key)?.map(|v| v.value()).unwrap_or(0);
    t.insert(key, started + 1)?;
    Ok(())
}

/// The knowledge-base entries of organization `org`, all replicas together (its counter).
/// Errors: the store's.
pub fn org_entries(txn: &impl Reads, org: Uuid) -> Result<u64> {
    let found = txn.read_table(tables::ORG_KBCOUNT)?.get(k(org))?.map(|v| v.value());
    Ok(found.unwrap_or(0))
}

/// Counts one more knowledge-base entry of `org`, refusing past its quota (its own, else
/// `default_max`: 429 `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`) or the caller's `usageLimits`
/// `custom` (400).
pub fn count_kb_entry_in(txn: &WriteTransaction, org: Uuid, default_max: u64, custom: Option<u64>) -> Result<()> {
    let mut counts = txn.open_table(tables::ORG_KBCOUNT)?;
    let n = counts.get(k(org))?.map(|v| v.value()).unwrap_or(0);
    if let Some(max) = custom.filter(|max| n >= *max) {
        return Err(Error::new(
            Code::KnowledgeBaseUsageLimitReached,
            format!("the organization has {n} knowledge-base entries; usageLimits.knowledgeBaseEntries is {max}"),
        ));
    }
    let max = of_in(txn, org)?.knowledge_base_entries.unwrap_or(default_max);
    if n >= max {
        return Err(Error::new(
            Code::KnowledgeBaseQuotaExceeded,
            format!("the organization has reached its quota of {max} knowledge-base entries"),
        ));
    }
    counts.insert(k(org), n + 1)?;
    Ok(())
}

/// Refuses, before anything is written, to add one replica and `entries` knowledge-base
/// entries to organization `org`, which has `replicas` replicas now, beyond its quotas (its
/// own, else `default_max`: replicas, entries): the check of a replica bundle's import (its
/// write checks again, as every write does). Errors: 429 `REPLICA_QUOTA_EXCEEDED`, 429
/// `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`, the store's.
pub fn check_room(txn: &impl Reads, org: Uuid, replicas: u64, entries: u64, default_max: (u64, u64)) -> Result<()> {
    let quota = of(&txn.read_table(tables::ORG_QUOTA)?, org)?;
    let max_replicas = quota.replicas.unwrap_or(default_max.0);
    if replicas >= max_replicas {
        return Err(Error::new(
            Code::ReplicaQuotaExceeded,
            format!("the organization has {replicas} replicas, its quota"),
        ));
    }
    let (have, max) = (org_entries(txn, org)?, quota.knowledge_base_entries.unwrap_or(default_max.1));
    if have.saturating_add(entries) > max {
        return Err(Error::new(
            Code::KnowledgeBaseQuotaExceeded,
            format!(
                "the organization has {have} knowledge-base entries and a quota of {max}: the {entries} entries of \
                 the bundle do not fit"
            ),
        ));
    }
    Ok(())
}

/// Counts one knowledge-base entry of `org` less (one was deleted).
pub fn uncount_kb_entry_in(txn: &WriteTransaction, org: Uuid) -> Result<()> {
    let mut counts = txn.open_table(tables::ORG_KBCOUNT)?;
    let n = counts.get(k(org))?.map(|v| v.value()).unwrap_or(0);
    counts.insert(k(org), n.saturating_sub(1))?;
    Ok(())
}

/// Refuses, before anything is generated or made, a question that would start a conversation
/// of `org` beyond `pool`'s monthly quota: 429 ([`Pool::check`]). `continues(txn, now)` says
/// whether the question continues a conversation (it then passes; asked only when `pool` has
/// a cap). The write that stores the question ([`admit_conversation_in`]) stays the authority;
/// this check spares generating a reply (or making a visitor) that would be thrown away.
pub async fn check_new_conversation<F>(store: &Store, org: Uuid, pool: Pool, continues: F) -> Result<()>
where
    F: Fn(&ReadTransaction, i64) -> Result<bool> + Send + 'static,
{
    let now = store::now_ms();
    store
        .read(move |txn| {
            let max = pool.max(&txn.open_table(tables::ORG_QUOTA)?, org)?;
            if max.is_none() || continues(txn, now)? {
                return Ok(());
            }
            pool.check(pool.started_in(txn, org, month_of(now))?, max)
        })
        .await
}

/// Sets the quotas given in `change` (the others stay) of organization `org`; returns them all.
/// 404 when no such organization.
pub async fn set(store: &Store, org: Uuid, change: Quota) -> Result<Quota> {
    store
        .write(move |txn| {
            if super::orgs::get_in(txn, org)?.is_none() {
                return Err(Error::not_found("organization"));
            }
            let mut t = txn.open_table(tables::ORG_QUOTA)?;
            let mut q = of(&t, org)?;
            q.conversations_per_month = change.conversations_per_month.or(q.conversations_per_month);
            q.replicas = change.replicas.or(q.replicas);
            q.knowledge_base_entries = change.knowledge_base_entries.or(q.knowledge_base_entries);
            q.embed_conversations_per_month = change.embed_conversations_per_month.or(q.embed_conversations_per_month);
            store::put(&mut t, k(org), &q)?;
            Ok(q)
        })
        .await
}

/// An organization with its usage and its quotas in effect (`None`: unlimited).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct OrgUsage {
    pub id: Uuid,
    pub name: String,
    pub conversations_this_month: u64,
    pub conversations_per_month: Option<u64>,
    pub replicas: u64,
    pub max_replicas: u64,
    pub knowledge_base_entries: u64,
    pub max_knowledge_base_entries: u64,
    /// Conversations the visitors of the organization's public chats started this month.
    pub embed_conversations_this_month: u64,
    pub embed_conversations_per_month: u64,
}

/// The server's defaults of the quotas an organization has not set.
#[derive(Debug, Clone, Copy)]
pub struct Defaults {
    /// `--max-replicas-per-org`.
    pub replicas: u64,
    /// `--max-kb-entries-per-org`.
    pub knowledge_base_entries: u64,
    /// `--embed-conversations-per-month`.
    pub embed_conversations_per_month: u64,
}

/// Every organization with its usage in the month of `now` and its quotas, the server's
/// `defaults` filling those not set.
pub async fn list(store: &Store, defaults: Defaults, now: i64) -> Result<Vec<OrgUsage>> {
    let month = month_of(now);
    store
        .read(move |txn| {
            let quotas = txn.open_table(tables::ORG_QUOTA)?;
            let mut out = Vec::new();
            for org in super::orgs::all_in(txn)? {
                let q = of(&quotas, org.id)?;
                let visitors = Pool::Visitors { default: defaults.embed_conversations_per_month };
                out.push(OrgUsage {
                    id: org.id,
                    name: org.name,
                    conversations_this_month: org_month_in(txn, org.id, month)?,
                    conversations_per_month: q.conversations_per_month,
                    replicas: store::replica_index::count(txn, org.id)?.0,
                    max_replicas: q.replicas.unwrap_or(defaults.replicas),
                    knowledge_base_entries: org_entries(txn, org.id)?,
                    max_knowledge_base_entries: q.knowledge_base_entries.unwrap_or(defaults.knowledge_base_entries),
                    embed_conversations_this_month: visitors.started_in(txn, org.id, month)?,
                    embed_conversations_per_month: visitors.max(&quotas, org.id)?.unwrap_or(0),
                });
            }
            Ok(out)
        })
        .await
}

/// The caller's own cap of a completion body, `usageLimits.conversationsPerMonth` (a
/// non-negative integer; other `usageLimits` fields are ignored): 429
/// `CONVERSATION_QUOTA_EXCEEDED` once `org` started that many conversations this month, before
/// anything is generated. 400 when the value is not a non-negative integer.
pub async fn check_usage_limits(store: &Store, org: Uuid, usage_limits: Option<&serde_json::Value>) -> Result<()> {
    let Some(v) = usage_limits.and_then(|u| u.get("conversationsPerMonth")) else { return Ok(()) };
    let max =
        v.as_u64().ok_or_else(|| Error::invalid("usageLimits.conversationsPerMonth", "must be an integer ≥ 0"))?;
    let month = month_of(store::now_ms());
    let started = store.read(move |txn| org_month_in(txn, org, month)).await?;
    check_conversations(started, Some(max), "usageLimits.conversationsPerMonth")
}
