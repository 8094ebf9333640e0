//! Users of an organization (spec §4.2 `/v1/users*`, DECISIONS.md "Auth").

use redb::{ReadableTable, WriteTransaction};
use uuid::Uuid;

use super::{check_len, normalize_email};
use crate::error::{Code, Error, Result};
use crate::store::records::{Org, Replica, User};
use crate::store::{self, k, now_ms, tables, Store};

/// The kinds of `X-USER-ID-TYPE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdType {
    /// The user's own id (a UUID).
    Id,
    /// The user's e-mail address.
    Email,
    /// A linked account; the user is made on first contact.
    Linked(&'static str),
}

impl IdType {
    /// Accepted header values.
    pub const NAMES: &'static [&'static str] = &["id", "email", "messengerA", "messengerB", "embed"];

    /// Parses a header value (exact names as in [`IdType::NAMES`]).
    pub fn parse(s: &str) -> Option<IdType> {
        match s {
            "id" => Some(IdType::Id),
            "email" => Some(IdType::Email),
            "messengerA" => Some(IdType::Linked("messengerA")),
            "messengerB" => Some(IdType::Linked("messengerB")),
            "embed" => Some(IdType::Linked("embed")),
            _ => None,
        }
    }
}

/// Fields a caller sets on a user (`POST /v1/users`, `PUT /v1/users/me`).
#[derive(Clone, Debug, Default)]
pub struct UserInput {
    pub name: String,
    pub email: Option<String>,
    pub profile_image: Option<String>,
}

impl UserInput {
    fn validated(mut self) -> Result<UserInput> {
        self.name = self.name.trim().to_string();
        check_len("name", &self.name, 1, 100)?;
        self.email = self.email.map(|e| normalize_email("email", &e)).transpose()?;
        if let Some(url) = &self.profile_image {
            super::check_http_url("profileImage", url)?;
        }
        Ok(self)
    }
}

/// The user named by `X-USER-ID` of `kind`. 401 `USER_NOT_FOUND` for unknown `id`/`email`
/// users; linked-account users are made on first contact.
pub async fn resolve(store: &Store, org: &Org, kind: IdType, id: &str) -> Result<User> {
    let org_id = org.id;
    let not_found = || Error::new(Code::UserNotFound, "X-USER-ID names no user of this organization");
    match kind {
        IdType::Id => {
            let uid = Uuid::parse_str(id).map_err(|_| not_found())?;
            get(store, org_id, uid).await.map_err(|e| if e.code == Code::NotFound { not_found() } else { e })
        }
        IdType::Email => {
            let email = id.trim().to_lowercase();
            store.read(move |txn| by_index(txn, tables::EMAIL_USER, org_id, &email)).await?.ok_or_else(not_found)
        }
        IdType::Linked(kind) => linked(store, org_id, kind, id).await,
    }
}

/// The user that index `table` (`(org, key) → user id`) names under `key`, if any.
fn by_index(
    txn: &redb::ReadTransaction,
    table: redb::TableDefinition<(u128, &'static str), u128>,
    org: Uuid,
    key: &str,
) -> Result<Option<User>> {
    let Some(uid) = txn.open_table(table)?.get((k(org), key))?.map(|v| v.value()) else { return Ok(None) };
    store::get::<u128, User, _>(&txn.open_table(tables::USERID_USER)?, uid)
}

/// The linked-account user `kind:external` of `org`, made on first contact.
pub async fn linked(store: &Store, org: Uuid, kind: &'static str, external: &str) -> Result<User> {
    check_len("X-USER-ID", external, 1, 200)?;
    let key = format!("{kind}:{external}");
    let found = {
        let key = key.clone();
        store.read(move |txn| by_index(txn, tables::LINKED_USER, org, &key)).await?
    };
    if let Some(user) = found {
        return Ok(user);
    }
    let (new_id, now, external) = (Uuid::now_v7(), now_ms(), external.to_string());
    store
        .write(move |txn| {
            if let Some(uid) = txn.open_table(tables::LINKED_USER)?.get((k(org), key.as_str()))?.map(|v| v.value()) {
                return store::get::<u128, User, _>(&txn.open_table(tables::USERID_USER)?, uid)?
                    .ok_or_else(|| Error::internal("linked user index points nowhere"));
            }
            let user = User {
                id: new_id,
                org,
                name: format!("{kind} user {external}"),
                email: None,
                profile_image: None,
                linked: Some((kind.to_string(), external.clone())),
                created_at: now,
                updated_at: now,
            };
            insert(txn, &user)?;
            Ok(user)
        })
        .await
}

/// Claims `email` for user `id` of `org` in `email_user`; 409 `EMAIL_TAKEN` if it is in use.
fn claim_email(txn: &WriteTransaction, org: Uuid, email: &str, id: Uuid) -> Result<()> {
    let mut idx = txn.open_table(tables::EMAIL_USER)?;
    if idx.get((k(org), email))?.is_some() {
        return Err(Error::new(Code::EmailTaken, format!("e-mail {email} is used by another user")));
    }
    idx.insert((k(org), email), k(id))?;
    Ok(())
}

/// Writes a new user and its index rows; 409 `EMAIL_TAKEN` if the e-mail is in use.
pub fn insert(txn: &WriteTransaction, user: &User) -> Result<()> {
    let org = k(user.org);
    if let Some(email) = &user.email {
        claim_email(txn, user.org, email, user.id)?;
    }
    if let Some((kind, ext)) = &user.linked {
        let key = format!("{kind}:{ext}");
        txn.open_table(tables::LINKED_USER)?.insert((org, key.as_str()), k(user.id))?;
    }
    txn.open_table(tables::ORG_USER)?.insert((org, k(user.id)), ())?;
    store::put(&mut txn.open_table(tables::USERID_USER)?, k(user.id), user)
}

/// Creates a user of `org`. Errors: 400 invalid fields, 409 `EMAIL_TAKEN`.
pub async fn create(store: &Store, org: Uuid, input: UserInput) -> Result<User> {
    let input = input.validated()?;
    let (id, now) = (Uuid::now_v7(), now_ms());
    let user = User {
        id,
        org,
        name: input.name,
        email: input.email,
        profile_image: input.profile_image,
        linked: None,
        created_at: now,
        updated_at: now,
    };
    store.write(move |txn| insert(txn, &user).map(|_| user.clone())).await
}

/// The user `id` of `org`; 404 when missing or of another organization.
pub async fn get(store: &Store, org: Uuid, id: Uuid) -> Result<User> {
    store.read(move |txn| load(&txn.open_table(tables::USERID_USER)?, org, id)).await
}

fn load(users: &impl ReadableTable<u128, &'static [u8]>, org: Uuid, id: Uuid) -> Result<User> {
    store::get::<u128, User, _>(users, k(id))?.filter(|u| u.org == org).ok_or_else(|| Error::not_found("user"))
}

/// Replaces name, e-mail and picture of user `id`. Errors: 400, 404, 409 `EMAIL_TAKEN`.
pub async fn update(store: &Store, org: Uuid, id: Uuid, input: UserInput) -> Result<User> {
    let input = input.validated()?;
    let now = now_ms();
    store
        .write(move |txn| {
            let mut users = txn.open_table(tables::USERID_USER)?;
            let mut user = load(&users, org, id)?;
            if user.email != input.email {
                if let Some(new) = &input.email {
                    claim_email(txn, org, new, id)?;
                }
                if let Some(old) = &user.email {
                    txn.open_table(tables::EMAIL_USER)?.remove((k(org), old.as_str()))?;
                }
            }
            user.name = input.name.clone();
            user.email = input.email.clone();
            user.profile_image = input.profile_image.clone();
            user.updated_at = now;
            store::put(&mut users, k(id), &user)?;
            Ok(user)
        })
        .await
}

/// Deletes user `id`; replicas it owned pass to the organization's owner user. The owner user
/// itself cannot be deleted (400 `VALIDATION_ERROR`). 404 when missing.
pub async fn delete(store: &Store, org: &Org, id: Uuid) -> Result<()> {
    if id == org.owner_user {
        return Err(Error::invalid("user", "the organization's owner user cannot be deleted"));
    }
    let (org_id, heir) = (org.id, org.owner_user);
    store
        .write(move |txn| {
            let mut users = txn.open_table(tables::USERID_USER)?;
            let user = load(&users, org_id, id)?;
            users.remove(k(id))?;
            txn.open_table(tables::ORG_USER)?.remove((k(org_id), k(id)))?;
            if let Some(email) = &user.email {
                txn.open_table(tables::EMAIL_USER)?.remove((k(org_id), email.as_str()))?;
            }
            if let Some((kind, ext)) = &user.linked {
                let key = format!("{kind}:{ext}");
                txn.open_table(tables::LINKED_USER)?.remove((k(org_id), key.as_str()))?;
            }
            reassign_replicas(txn, org_id, id, heir)
        })
        .await
}

fn reassign_replicas(txn: &WriteTransaction, org: Uuid, from: Uuid, to: Uuid) -> Result<()> {
    let ids: Vec<u128> = txn
        .open_table(tables::ORG_REPLICA)?
        .range((k(org), 0)..=(k(org), u128::MAX))?
        .map(|r| r.map(|(key, _)| key.value().1))
        .collect::<Result<_, _>>()?;
    let mut replicas = txn.open_table(tables::REPLICAID_REPLICA)?;
    for id in ids {
        if let Some(mut r) = store::get::<u128, Replica, _>(&replicas, id)? {
            if r.owner == from {
                r.owner = to;
                store::put(&mut replicas, id, &r)?;
            }
        }
    }
    Ok(())
}

/// The user `owner` given as a UUID or an e-mail address, if it is a user of `org`.
pub fn find_owner(
    users: &impl ReadableTable<u128, &'static [u8]>,
    emails: &impl ReadableTable<(u128, &'static str), u128>,
    org: Uuid,
    owner: &str,
) -> Result<Option<Uuid>> {
    if let Ok(id) = Uuid::parse_str(owner.trim()) {
        return Ok(load(users, org, id).ok().map(|u| u.id));
    }
    let email = owner.trim().to_lowercase();
    Ok(emails.get((k(org), email.as_str()))?.map(|v| Uuid::from_u128(v.value())))
}
