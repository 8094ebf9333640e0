//! Users of an organization (spec §4.2 `/v1/users*`, docs/decisions.md "Auth").

use uuid::Uuid;

use super::channel::{linked_account_types, Channel};
use super::{check_len, normalize_email};
use crate::error::{Code, Error, Result};
use crate::store::kv::{ReadableTable, Reads, WriteTransaction};
use crate::store::records::{Org, User};
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
    /// The own ids' header values (`user_uuid`, sent by some clients of the hosted service, is
    /// an alias of `id`, as the OpenAPI description says).
    const OWN: [&'static str; 3] = ["id", "user_uuid", "email"];

    /// Accepted header values: [`IdType::OWN`]'s, then the channels that link their users
    /// ([`linked_account_types`]).
    pub fn names() -> Vec<&'static str> {
        IdType::OWN.into_iter().chain(linked_account_types()).collect()
    }

    /// Parses a header value (exact names as in [`IdType::names`]; the linked types are the
    /// channels that link their users, [`Channel::links_users`]).
    pub fn parse(s: &str) -> Option<IdType> {
        match s {
            "id" | "user_uuid" => Some(IdType::Id),
            "email" => Some(IdType::Email),
            _ => Channel::parse(s).filter(|c| c.links_users()).map(|c| IdType::Linked(c.name())),
        }
    }
}

/// Fields a caller sets on a user (`POST /v1/users`, `PUT /v1/users/me`; docs/decisions.md
/// "Users"). `None`: not given — a new user gets the default (a fresh id, an empty name, none),
/// an update keeps the current value.
#[derive(Clone, Debug, Default)]
pub struct UserInput {
    /// The client's id: on create, the new user's id (1–100 visible characters, unique in the
    /// organization); on update, it must be the caller's own.
    pub id: Option<String>,
    pub name: Option<String>,
    pub email: Option<String>,
    pub profile_image: Option<String>,
    /// `(accountType, accountID)` pairs; replaces the user's linked accounts when given.
    pub linked: Option<Vec<(String, String)>>,
}

/// The most characters of a user's `id` and of its `name`.
pub const TEXT_MAX: usize = 100;

impl UserInput {
    fn validated(mut self) -> Result<UserInput> {
        if let Some(id) = &self.id {
            check_len("id", id, 1, TEXT_MAX)?;
            if id.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(Error::invalid("id", "must be visible characters, without spaces"));
            }
        }
        self.name = self.name.map(|n| n.trim().to_string());
        if let Some(name) = &self.name {
            check_len("name", name, 1, TEXT_MAX)?;
        }
        self.email = self.email.map(|e| normalize_email("email", &e)).transpose()?;
        if let Some(url) = &self.profile_image {
            super::check_http_url("profileImage", url)?;
        }
        for (i, (kind, account)) in self.linked.iter().flatten().enumerate() {
            let types = linked_account_types();
            if !types.contains(&kind.as_str()) {
                let allowed = types.join(", ");
                return Err(Error::invalid(
                    &format!("linkedAccounts[{i}].accountType"),
                    format!("must be one of {allowed}"),
                ));
            }
            check_len(&format!("linkedAccounts[{i}].accountID"), account, 1, 200)?;
        }
        Ok(self)
    }
}

/// The store key of the user whose id is `id` in `org`: `id` itself when it is a UUID (the
/// ids this server makes, and UUIDs a client chose), else the UUID v5 of `id` in the
/// organization's namespace — so a client's id needs no index of its own.
pub fn key_of(org: Uuid, id: &str) -> Uuid {
    Uuid::parse_str(id).unwrap_or_else(|_| Uuid::new_v5(&org, id.as_bytes()))
}

/// The user named by `X-USER-ID` of `kind`. 401 `USER_NOT_FOUND` for unknown `id`/`email`
/// users; linked-account users are made on first contact.
pub async fn resolve(store: &Store, org: &Org, kind: IdType, id: &str) -> Result<User> {
    let org_id = org.id;
    let not_found = || Error::new(Code::UserNotFound, "X-USER-ID names no user of this organization");
    match kind {
        IdType::Id => get(store, org_id, id).await.map_err(|e| if e.code == Code::NotFound { not_found() } else { e }),
        IdType::Email => {
            let email = id.trim().to_lowercase();
            store
                .read(move |txn| user_at(txn, txn.open_table(tables::EMAIL_USER)?.get((k(org_id), email.as_str()))?))
                .await?
                .ok_or_else(not_found)
        }
        IdType::Linked(kind) => linked(store, org_id, kind, id).await,
    }
}

/// The user an index row names (`row`: the row's user id), if any.
fn user_at(
    txn: &crate::store::kv::ReadTransaction,
    row: Option<crate::store::kv::AccessGuard<'_, u128>>,
) -> Result<Option<User>> {
    let Some(uid) = row.map(|v| v.value()) else { return Ok(None) };
    store::get::<u128, User, _>(&txn.open_table(tables::USERID_USER)?, uid)
}

/// The `LINKEDACCOUNT_USER` row of account `account` of type `kind` in `org`.
fn linked_row<'a>(org: Uuid, kind: &'a str, account: &'a str) -> (u128, &'a str, &'a str) {
    (k(org), kind, account)
}

/// The linked-account user `kind:external` of `org`, if there is one (none is made).
pub async fn find_linked(store: &Store, org: Uuid, kind: &'static str, external: &str) -> Result<Option<User>> {
    check_len("X-USER-ID", external, 1, 200)?;
    let external = external.to_string();
    store
        .read(move |txn| {
            user_at(txn, txn.open_table(tables::LINKEDACCOUNT_USER)?.get(linked_row(org, kind, &external))?)
        })
        .await
}

/// The linked-account user `kind:external` of `org`, made on first contact.
pub async fn linked(store: &Store, org: Uuid, kind: &'static str, external: &str) -> Result<User> {
    if let Some(user) = find_linked(store, org, kind, external).await? {
        return Ok(user);
    }
    let (new_id, now, external) = (Uuid::now_v7(), now_ms(), external.to_string());
    store
        .write(move |txn| {
            let row = linked_row(org, kind, &external);
            if let Some(uid) = txn.open_table(tables::LINKEDACCOUNT_USER)?.get(row)?.map(|v| v.value()) {
                return store::get::<u128, User, _>(&txn.open_table(tables::USERID_USER)?, uid)?
                    .ok_or_else(|| Error::internal("linked user index points nowhere"));
            }
            let user = User {
                id: new_id,
                client_id: None,
                org,
                name: format!("{kind} user {external}"),
                email: None,
                profile_image: None,
                linked: vec![(kind.to_string(), external.clone())],
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

/// Claims linked accounts `accounts` for user `id` of `org`; 409 `LINKED_ACCOUNT_TAKEN` when
/// another user holds one.
fn claim_linked(txn: &WriteTransaction, org: Uuid, accounts: &[(String, String)], id: Uuid) -> Result<()> {
    let mut idx = txn.open_table(tables::LINKEDACCOUNT_USER)?;
    for (kind, account) in accounts {
        let holder = idx.get(linked_row(org, kind, account))?.map(|v| v.value());
        match holder {
            Some(other) if other != k(id) => {
                return Err(Error::new(
                    Code::LinkedAccountTaken,
                    format!("{kind} account {account} is linked to another user"),
                ))
            }
            Some(_) => {}
            None => {
                idx.insert(linked_row(org, kind, account), k(id))?;
            }
        }
    }
    Ok(())
}

/// Removes the index rows of linked accounts `accounts` of `org`.
fn release_linked(txn: &WriteTransaction, org: Uuid, accounts: &[(String, String)]) -> Result<()> {
    let mut idx = txn.open_table(tables::LINKEDACCOUNT_USER)?;
    for (kind, account) in accounts {
        idx.remove(linked_row(org, kind, account))?;
    }
    Ok(())
}

/// Writes a new user and its index rows. 409 `USER_ID_TAKEN` if the id is in use,
/// `EMAIL_TAKEN` if the e-mail is, `LINKED_ACCOUNT_TAKEN` if a linked account is.
pub fn insert(txn: &WriteTransaction, user: &User) -> Result<()> {
    let org = k(user.org);
    let mut users = txn.open_table(tables::USERID_USER)?;
    if users.get(k(user.id))?.is_some() {
        return Err(Error::new(Code::UserIdTaken, format!("user id {} is taken", user.public_id())));
    }
    if let Some(email) = &user.email {
        claim_email(txn, user.org, email, user.id)?;
    }
    claim_linked(txn, user.org, &user.linked, user.id)?;
    txn.open_table(tables::ORG_USER)?.insert((org, k(user.id)), ())?;
    store::put(&mut users, k(user.id), user)
}

/// Creates a user of `org` with the client's `id` if given. Errors: 400 invalid fields, 409
/// `USER_ID_TAKEN`, `EMAIL_TAKEN`, `LINKED_ACCOUNT_TAKEN`.
pub async fn create(store: &Store, org: Uuid, input: UserInput) -> Result<User> {
    let input = input.validated()?;
    let now = now_ms();
    let id = input.id.as_deref().map_or_else(Uuid::now_v7, |id| key_of(org, id));
    let user = User {
        id,
        client_id: input.id.filter(|given| *given != id.to_string()),
        org,
        name: input.name.unwrap_or_default(),
        email: input.email,
        profile_image: input.profile_image,
        linked: input.linked.unwrap_or_default(),
        created_at: now,
        updated_at: now,
    };
    store.write(move |txn| insert(txn, &user).map(|_| user.clone())).await
}

/// The user whose id (see [`User::public_id`]) is `id` in `org`; 404 when missing or of
/// another organization.
pub async fn get(store: &Store, org: Uuid, id: &str) -> Result<User> {
    let key = key_of(org, id);
    store.read(move |txn| load(&txn.open_table(tables::USERID_USER)?, org, key)).await
}

/// The organization's owner user (the contact given at redemption): whom the key alone acts
/// as. Every organization has one, and it cannot be deleted.
pub async fn owner(store: &Store, org: &Org) -> Result<User> {
    let (org_id, id) = (org.id, org.owner_user);
    store.read(move |txn| load(&txn.open_table(tables::USERID_USER)?, org_id, id)).await
}

/// The users table open for reading several users in one read (a list's senders or owners).
pub struct Reader<T>(T);

/// The users table of `txn` (a store snapshot's is shared by its reads). Errors: the store's.
pub fn reader<R: Reads>(txn: &R) -> Result<Reader<R::Table<'_, u128, &'static [u8]>>> {
    Ok(Reader(txn.read_table(tables::USERID_USER)?))
}

impl<T: ReadableTable<u128, &'static [u8]>> Reader<T> {
    /// User `id`, if stored. Errors: the store's (a record that does not decode).
    pub fn get(&self, id: Uuid) -> Result<Option<User>> {
        store::get::<u128, User, _>(&self.0, k(id))
    }

    /// The public id of user `id` ([`User::public_id`]), or the UUID itself when no such
    /// user is stored.
    pub fn public_id(&self, id: Uuid) -> Result<String> {
        Ok(self.get(id)?.map_or_else(|| id.to_string(), |u| u.public_id()))
    }
}

fn load(users: &impl ReadableTable<u128, &'static [u8]>, org: Uuid, id: Uuid) -> Result<User> {
    store::get::<u128, User, _>(users, k(id))?.filter(|u| u.org == org).ok_or_else(|| Error::not_found("user"))
}

/// Sets the given fields of user `id` (name, e-mail, picture, linked accounts); fields not
/// given keep their value. Errors: 400 (also when `input.id` is not the user's own id), 404,
/// 409 `EMAIL_TAKEN`, `LINKED_ACCOUNT_TAKEN`.
pub async fn update(store: &Store, org: Uuid, id: Uuid, input: UserInput) -> Result<User> {
    let input = input.validated()?;
    let now = now_ms();
    store
        .write(move |txn| {
            let mut user = load(&txn.open_table(tables::USERID_USER)?, org, id)?;
            if input.id.as_ref().is_some_and(|given| *given != user.public_id()) {
                return Err(Error::invalid("id", "must be the id of the user named by X-USER-ID"));
            }
            if let Some(new) = input.email.as_ref().filter(|new| user.email.as_ref() != Some(*new)) {
                claim_email(txn, org, new, id)?;
                if let Some(old) = &user.email {
                    txn.open_table(tables::EMAIL_USER)?.remove((k(org), old.as_str()))?;
                }
                user.email = Some(new.clone());
            }
            if let Some(linked) = &input.linked {
                release_linked(txn, org, &user.linked)?;
                claim_linked(txn, org, linked, id)?;
                user.linked = linked.clone();
            }
            user.name = input.name.clone().unwrap_or(user.name);
            user.profile_image = input.profile_image.clone().or(user.profile_image);
            user.updated_at = now;
            store::put(&mut txn.open_table(tables::USERID_USER)?, k(id), &user)?;
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
            release_linked(txn, org_id, &user.linked)?;
            crate::store::replica_index::reassign_owner_in(txn, org_id, id, heir)
        })
        .await
}

/// The user `owner` given as its id (see [`User::public_id`]) or its e-mail address, if it is
/// a user of `org`.
pub fn find_owner(txn: &impl Reads, org: Uuid, owner: &str) -> Result<Option<Uuid>> {
    let (users, emails) = (txn.read_table(tables::USERID_USER)?, txn.read_table(tables::EMAIL_USER)?);
    if let Ok(user) = load(&users, org, key_of(org, owner.trim())) {
        return Ok(Some(user.id));
    }
    let email = owner.trim().to_lowercase();
    let found = emails.get((k(org), email.as_str()))?.map(|v| Uuid::from_u128(v.value()));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_names_are_the_own_ids_and_the_linked_channels() {
        let names = IdType::names();
        assert_eq!(names[..3], ["id", "user_uuid", "email"]);
        assert_eq!(names[3..], linked_account_types());
        for n in &names[3..] {
            assert_eq!(IdType::parse(n), Some(IdType::Linked(n)), "{n} is a linked account type");
        }
        assert_eq!(IdType::parse("user_uuid"), Some(IdType::Id));
        assert_eq!(IdType::parse("web"), None, "the web channel links no users");
        assert_eq!(IdType::parse("fax"), None);
    }
}
