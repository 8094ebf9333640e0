//! Organizations, their API keys and invitation codes (spec §4.1 redeem, docs/decisions.md "Auth").
//!
//! Keys and codes are 32 random bytes, hex; only their SHA-256 is stored.

use uuid::Uuid;

use super::{hash_secret, random_hex};
use crate::error::{Code, Error, Result};
use crate::store::kv::{ReadableTable, Reads, WriteTransaction};
use crate::store::records::{Invite, Org, User};
use crate::store::{self, codec, k, now_ms, tables, Store};

/// Prefix of organization API keys (helps secret scanners find leaked keys).
pub const KEY_PREFIX: &str = "rpl_";
/// Prefix of invitation codes.
pub const INVITE_PREFIX: &str = "inv_";

/// Contact details given when an organization is made.
#[derive(Clone, Debug)]
pub struct NewOrg {
    pub organization_name: String,
    pub name: String,
    pub email: String,
}

/// Organization `id`, if it exists. Errors: the store's.
pub fn get_in(txn: &impl Reads, id: Uuid) -> Result<Option<Org>> {
    store::get::<u128, Org, _>(&txn.read_table(tables::ORGID_ORG)?, k(id))
}

/// Every organization, in id order. Errors: the store's.
pub fn all_in(txn: &impl Reads) -> Result<Vec<Org>> {
    let table = txn.read_table(tables::ORGID_ORG)?;
    let orgs = table.iter()?.map(|row| codec::decode(row?.1.value())).collect();
    orgs
}

/// Mints an invitation code valid for `expires_in_secs` (forever when `None`).
pub async fn create_invite(store: &Store, expires_in_secs: Option<u64>) -> Result<String> {
    let code = format!("{INVITE_PREFIX}{}", random_hex(16)?);
    let h = hash_secret(&code);
    let now = now_ms();
    let invite = Invite {
        created_at: now,
        expires_at: expires_in_secs.map(|s| now.saturating_add((s as i64).saturating_mul(1000))),
        redeemed_by: None,
    };
    store
        .write(move |txn| {
            let mut t = txn.open_table(tables::CODEHASH_INVITE)?;
            store::put(&mut t, &h, &invite)
        })
        .await?;
    Ok(code)
}

/// Redeems `code`: a new organization, its owner user and API key, in one transaction.
/// Errors: 404 unknown code, 409 `INVITE_ALREADY_REDEEMED`, 400 `INVITE_EXPIRED`.
pub async fn redeem(store: &Store, code: &str, new: NewOrg) -> Result<(Org, String)> {
    let h = hash_secret(code);
    let key = format!("{KEY_PREFIX}{}", random_hex(32)?);
    let key_hash = hash_secret(&key);
    let (org_id, user_id, now) = (Uuid::now_v7(), Uuid::now_v7(), now_ms());
    let org = store
        .write(move |txn| {
            let mut invites = txn.open_table(tables::CODEHASH_INVITE)?;
            let mut invite: Invite = store::get(&invites, &h)?
                .ok_or_else(|| Error::new(Code::InviteNotFound, "invitation code not found"))?;
            if invite.redeemed_by.is_some() {
                return Err(Error::new(Code::InviteAlreadyRedeemed, "invitation code was already redeemed"));
            }
            if invite.expires_at.is_some_and(|e| e <= now) {
                return Err(Error::new(Code::InviteExpired, "invitation code has expired"));
            }
            invite.redeemed_by = Some(org_id);
            store::put(&mut invites, &h, &invite)?;
            insert_org(txn, &new, org_id, user_id, &key_hash, now)
        })
        .await?;
    Ok((org, key))
}

/// Makes an organization with its owner user and key directly (the `--demo` start).
pub async fn create_direct(store: &Store, new: NewOrg) -> Result<(Org, String)> {
    let key = format!("{KEY_PREFIX}{}", random_hex(32)?);
    let key_hash = hash_secret(&key);
    let (org_id, user_id, now) = (Uuid::now_v7(), Uuid::now_v7(), now_ms());
    let org = store.write(move |txn| insert_org(txn, &new, org_id, user_id, &key_hash, now)).await?;
    Ok((org, key))
}

fn insert_org(
    txn: &WriteTransaction,
    new: &NewOrg,
    org_id: Uuid,
    user_id: Uuid,
    key_hash: &[u8; 32],
    now: i64,
) -> Result<Org> {
    let org = Org {
        id: org_id,
        name: new.organization_name.clone(),
        owner_user: user_id,
        created_at: now,
        valid_until: None,
    };
    let owner = User {
        id: user_id,
        client_id: None,
        org: org_id,
        name: new.name.clone(),
        email: Some(new.email.clone()),
        profile_image: None,
        linked: Vec::new(),
        created_at: now,
        updated_at: now,
    };
    store::put(&mut txn.open_table(tables::ORGID_ORG)?, k(org_id), &org)?;
    txn.open_table(tables::KEYHASH_ORG)?.insert(key_hash, k(org_id))?;
    super::users::insert(txn, &owner)?;
    Ok(org)
}

/// The organization whose API key has the SHA-256 `h`, if any.
async fn by_key_hash(store: &Store, h: [u8; 32]) -> Result<Option<Org>> {
    store
        .read(move |txn| {
            let keys = txn.open_table(tables::KEYHASH_ORG)?;
            let Some(org) = keys.get(&h)?.map(|v| v.value()) else { return Ok(None) };
            store::get(&txn.open_table(tables::ORGID_ORG)?, org)
        })
        .await
}

/// The organizations found by their key so far, by the key's SHA-256: what authentication
/// asks on every request, answered without a read transaction.
///
/// It needs no invalidation because an organization and its key are written once, by
/// `insert_org` (the only writer of `orgid_org` and `keyhash_org`: keys are never rotated and
/// organizations never deleted or edited). A change that adds rotation, deletion or an edit
/// must update or clear this map in the same step. Only keys that exist are kept, so memory is bounded by the number of organizations
/// that have called (one [`Org`], about 100 bytes, each); unknown keys always go to the store.
#[derive(Default)]
pub struct KeyCache(std::sync::RwLock<std::collections::HashMap<[u8; 32], Org>>);

impl KeyCache {
    /// The organization whose API key is `key`, from memory or from the store (then kept).
    pub async fn by_api_key(&self, store: &Store, key: &str) -> Result<Option<Org>> {
        let h = hash_secret(key);
        if let Some(org) = self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(&h) {
            return Ok(Some(org.clone()));
        }
        let found = by_key_hash(store, h).await?;
        if let Some(org) = &found {
            self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(h, org.clone());
        }
        Ok(found)
    }
}
