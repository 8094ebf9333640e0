//! The operator's quotas per organization (`replicad orgs set-quota`, `replicad orgs list`):
//! conversations started per UTC month (429 `CONVERSATION_QUOTA_EXCEEDED`), conversations its
//! public chats' visitors start per UTC month (429 `EMBED_CONVERSATION_QUOTA_EXCEEDED`, counted
//! apart: `service::usage::Pool`), replicas (429
//! `REPLICA_QUOTA_EXCEEDED`) and knowledge-base entries (429
//! `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`). Each is checked in the write transaction that would
//! exceed it, against counters kept in the same transactions, so no race lets one through.

use redb::{ReadableTable, WriteTransaction};
use serde::Serialize;
use uuid::Uuid;

use super::token_usage::month_of;
use super::usage::Pool;
use crate::error::{Code, Error, Result};
use crate::store::records::{Org, Quota};
use crate::store::{self, codec, k, tables, Store};

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

/// Sets the quotas given in `change` (the others stay) of organization `org`; returns them all.
/// 404 when no such organization.
pub async fn set(store: &Store, org: Uuid, change: Quota) -> Result<Quota> {
    store
        .write(move |txn| {
            if txn.open_table(tables::ORGID_ORG)?.get(k(org))?.is_none() {
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
            let by_org = txn.open_table(tables::ORG_REPLICACOUNT)?;
            let kb = txn.open_table(tables::ORG_KBCOUNT)?;
            let mut out = Vec::new();
            for row in txn.open_table(tables::ORGID_ORG)?.iter()? {
                let org: Org = codec::decode(row?.1.value())?;
                let q = of(&quotas, org.id)?;
                let o = k(org.id);
                let visitors = Pool::Visitors { default: defaults.embed_conversations_per_month };
                out.push(OrgUsage {
                    id: org.id,
                    name: org.name,
                    conversations_this_month: super::usage::org_month_in(txn, org.id, month)?,
                    conversations_per_month: q.conversations_per_month,
                    replicas: store::replica_index::count(&by_org, org.id)?.0,
                    max_replicas: q.replicas.unwrap_or(defaults.replicas),
                    knowledge_base_entries: kb.get(o)?.map(|v| v.value()).unwrap_or(0),
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
    let started = store.read(move |txn| super::usage::org_month_in(txn, org, month)).await?;
    check_conversations(started, Some(max), "usageLimits.conversationsPerMonth")
}
