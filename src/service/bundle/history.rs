//! The history part of a bundle (`--with-history`): the replica's history items with their
//! users, read from the export's snapshot, and written again by the import's transaction
//! through the history's own write ([`crate::service::history::Append`]), which files them under
//! their chats and conversations as any history write does.
//!
//! A user is found in the target organization by the id its client chose (else by its e-mail);
//! one not found is created there. A user whose id is taken there by a user of another e-mail,
//! or whose e-mail or linked account belongs to another user there, refuses the import (409).

use std::collections::HashMap;

use uuid::Uuid;

use super::format::{HistoryMessage, HistorySource, HistoryUser};
use crate::error::{Code, Error, Result};
use crate::service::history::{Append, NewItem};
use crate::service::quotas::Pool;
use crate::service::{messages, passages, users};
use crate::store::kv::WriteTransaction;
use crate::store::records::{Message, SourceRef, User};
use crate::store::{Grouped, Snapshot};

/// The history items of `replica`, oldest first, and their users (what the items' `user`
/// indexes). Errors: the store's.
pub fn read(txn: &Snapshot, replica: Uuid) -> Result<(Vec<HistoryUser>, Vec<HistoryMessage>)> {
    let mut items = messages::open(txn)?.of_replica(replica)?;
    items.sort_by_key(|m| (m.created_at, m.id));
    let reader = users::reader(txn)?;
    let (mut found, mut index) = (Vec::new(), HashMap::new());
    let mut out = Vec::with_capacity(items.len());
    for mut m in items {
        passages::fill(txn, &mut m)?;
        let user = match index.get(&m.user) {
            Some(i) => *i,
            None => {
                // a user deleted since: its items travel under a user with no id, made anew
                let u = reader.get(m.user)?.map(|u| user_of(&u));
                found.push(u.unwrap_or_default());
                index.insert(m.user, found.len() as u32 - 1);
                found.len() as u32 - 1
            }
        };
        out.push(message_of(m, user));
    }
    Ok((found, out))
}

fn user_of(u: &User) -> HistoryUser {
    HistoryUser {
        id: u.client_id.clone(),
        name: u.name.clone(),
        email: u.email.clone(),
        profile_image: u.profile_image.clone(),
        linked_accounts: u.linked.clone(),
    }
}

fn message_of(m: Message, user: u32) -> HistoryMessage {
    let sources = m
        .sources
        .into_iter()
        .map(|s| HistorySource {
            entry: s.id,
            score: s.score,
            created_at: s.created_at,
            name: s.name,
            content: s.content,
            url: s.url,
            page: s.page,
        })
        .collect();
    HistoryMessage {
        user,
        role: m.role,
        content: m.content,
        source: m.source,
        sources,
        private: m.is_private,
        channel_data: m.channel_data,
        created_at: m.created_at,
        interrupted: m.interrupted,
    }
}

/// Checks the items' users and roles. Errors: 400 `INVALID_BUNDLE` naming the first wrong one.
pub fn check(users: &[HistoryUser], items: &[HistoryMessage]) -> Result<()> {
    for (i, m) in items.iter().enumerate() {
        if m.user as usize >= users.len() || role(&m.role).is_none() {
            let why = format!("history item {i}: user {} of {}, role {:?}", m.user, users.len(), m.role);
            return Err(Error::new(Code::InvalidBundle, why));
        }
    }
    Ok(())
}

fn role(name: &str) -> Option<&'static str> {
    ["user", "assistant"].into_iter().find(|r| *r == name)
}

/// Writes `items` as history of new replica `replica` of `org` in `txn`, their users found or
/// created in `org` (see the module documentation), their sources naming the new entries
/// (`entries`: the bundle's entry id → the new one). Returns the users created. Errors: 409
/// `USER_ID_TAKEN`, `EMAIL_TAKEN`, `LINKED_ACCOUNT_TAKEN`; 429 `CONVERSATION_QUOTA_EXCEEDED`; the
/// store's.
pub fn write_in(
    txn: &WriteTransaction,
    (org, replica): (Uuid, Uuid),
    bundled: &[HistoryUser],
    items: &[HistoryMessage],
    entries: &HashMap<u64, u64>,
) -> Result<u64> {
    let mut ids = Vec::with_capacity(bundled.len());
    let mut created = 0;
    for u in bundled {
        let (id, new) = user_in(txn, org, u)?;
        ids.push(id);
        created += u64::from(new);
    }
    let mut tables = Append::open(txn)?;
    for m in items {
        let item = NewItem {
            role: role(&m.role).unwrap_or("user"),
            content: m.content.clone(),
            source: m.source.clone(),
            sources: m.sources.iter().map(|s| source_ref(s, entries)).collect(),
            channel_data: m.channel_data.clone(),
            channel_key: None,
            interrupted: m.interrupted,
        };
        let user = ids[m.user as usize];
        let append = Append {
            replica,
            user,
            private: m.private,
            items: vec![item],
            now: m.created_at,
            tokens: None,
            pool: Pool::Organization,
        };
        append.apply(&mut tables)?;
    }
    Append::close(&mut tables)?;
    Ok(created)
}

fn source_ref(s: &HistorySource, entries: &HashMap<u64, u64>) -> SourceRef {
    SourceRef {
        id: entries.get(&s.entry).copied().unwrap_or(0),
        score: s.score,
        created_at: s.created_at,
        name: s.name.clone(),
        content: s.content.clone(),
        url: s.url.clone(),
        page: s.page,
    }
}

/// The user of `org` that `u` is, and whether it was created now.
fn user_in(txn: &WriteTransaction, org: Uuid, u: &HistoryUser) -> Result<(Uuid, bool)> {
    let by = u.id.as_deref().or(u.email.as_deref());
    if let Some(found) = by.map(|by| users::find_owner(txn, org, by)).transpose()?.flatten() {
        let existing = users::reader(txn)?.get(found)?;
        let same = existing.as_ref().is_some_and(|e| u.id.is_none() || e.email == u.email);
        if !same {
            let id = u.id.as_deref().unwrap_or_default();
            return Err(Error::new(
                Code::UserIdTaken,
                format!(
                    "user id {id:?} of the bundle's history is another user's in this organization (another e-mail)"
                ),
            ));
        }
        return Ok((found, false));
    }
    let id = u.id.as_deref().map_or_else(Uuid::now_v7, |id| users::key_of(org, id));
    let now = crate::store::now_ms();
    let user = User {
        id,
        client_id: u.id.clone().filter(|given| *given != id.to_string()),
        org,
        name: u.name.clone(),
        email: u.email.clone(),
        profile_image: u.profile_image.clone(),
        linked: u.linked_accounts.clone(),
        created_at: now,
        updated_at: now,
    };
    users::insert(txn, &user)?;
    Ok((id, true))
}
