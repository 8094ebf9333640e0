//! Who may see a replica: a public one everyone of its organization, a private one only the
//! organization (no user), its owner and the users whose e-mail it whitelists. Replica reads
//! (`service::replicas`) and organization-wide knowledge-base lists (`service::knowledge`) ask
//! here.

use std::collections::HashSet;

use uuid::Uuid;

use crate::error::Result;
use crate::store::records::{Replica, User};

/// Whether `user` may see `replica`: public replicas always; private ones only by the
/// organization (no user), their owner, and users whose e-mail is whitelisted.
pub fn visible_to(replica: &Replica, user: Option<&User>) -> bool {
    if !replica.private {
        return true;
    }
    match user {
        None => true,
        Some(u) => {
            u.id == replica.owner || u.email.as_ref().is_some_and(|e| replica.whitelist_emails.iter().any(|w| w == e))
        }
    }
}

/// Ids of the private replicas of `org` that `user` may not see (none for the organization; see
/// [`visible_to`]): a read of the organization's private replicas only.
pub fn hidden_in(txn: &crate::store::kv::ReadTransaction, org: Uuid, user: Option<&User>) -> Result<HashSet<u128>> {
    let mut hidden = HashSet::new();
    if user.is_none() {
        return Ok(hidden);
    }
    for id in crate::store::replica_index::private_ids(txn, org)? {
        if crate::store::replica_index::get_in(txn, Uuid::from_u128(id))?.is_some_and(|r| !visible_to(&r, user)) {
            hidden.insert(id);
        }
    }
    Ok(hidden)
}
