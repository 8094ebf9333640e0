//! Resolves credentials once per request into a [`Caller`] (spec §5, docs/decisions.md "Auth").
//!
//! The organization key comes in `X-ORGANIZATION-SECRET` or `Authorization: Bearer`; it is
//! looked up by its SHA-256, so neither the key nor a comparison of it is ever in the store.
//! `X-USER-ID` + `X-USER-ID-TYPE` then select a user of that organization.

use hyper::header::{HeaderMap, AUTHORIZATION};

use crate::error::{Code, Error, Result};
use crate::service::{orgs, users};
use crate::store::records::{Org, User};
use crate::store::Store;

/// What an operation requires of its caller (one per route row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No credential (redeem, the OpenAPI document).
    Public,
    /// The organization key; user headers are ignored.
    Org,
    /// The organization key and a user (`X-USER-ID` + `X-USER-ID-TYPE`); the key alone acts as
    /// the organization's owner user, resolved here so the handler always has a user.
    User,
    /// The organization key, with or without a user.
    Either,
}

/// The authenticated caller.
#[derive(Clone, Debug)]
pub struct Caller {
    pub org: Org,
    /// The user named by the headers; `None` when the organization key came alone.
    pub user: Option<User>,
}

impl Caller {
    /// The user this request acts as: the named user, else the organization's owner user.
    pub fn acting_user(&self) -> uuid::Uuid {
        self.user.as_ref().map(|u| u.id).unwrap_or(self.org.owner_user)
    }
}

/// Authenticates for `access`: 401 `UNAUTHORIZED` without a valid key, 400
/// `INVALID_AUTH_HEADERS` for a key header sent more than once, 400 `INVALID_USER_HEADERS` for
/// incomplete, repeated or non-ASCII user headers, 401 `USER_NOT_FOUND` for an unknown
/// `id`/`email` user. Keys are looked up in `keys` (memory) before the store.
pub async fn authenticate(
    store: &Store,
    keys: &orgs::KeyCache,
    headers: &HeaderMap,
    access: Access,
) -> Result<Option<Caller>> {
    if access == Access::Public {
        return Ok(None);
    }
    let key = api_key(headers)?
        .ok_or_else(|| Error::new(Code::Unauthorized, "missing X-ORGANIZATION-SECRET (or Authorization: Bearer)"))?;
    let org = keys
        .by_api_key(store, &key)
        .await?
        .ok_or_else(|| Error::new(Code::Unauthorized, "invalid organization secret"))?;
    let user = match access {
        Access::Org => None,
        _ => user_from_headers(store, &org, headers).await?,
    };
    // The key alone acts as the organization's owner user, on the operations that need a user
    // (`/v1/users/me*`) too: clients of the hosted service read their own user that way.
    let user = match user {
        None if access == Access::User => Some(users::owner(store, &org).await?),
        user => user,
    };
    Ok(Some(Caller { org, user }))
}

/// What a request sent for one header name.
enum Sent<'a> {
    /// Absent, or only whitespace.
    Nothing,
    /// One readable value, trimmed.
    One(&'a str),
    /// More than one value: which of two credentials would count is not ours to guess.
    Repeated,
    /// Not visible ASCII: a value the server cannot read must not read as "no value" (an
    /// unreadable `X-USER-ID` would otherwise act as the owner, who sees every chat).
    Unreadable,
}

fn sent<'a>(headers: &'a HeaderMap, name: &str) -> Sent<'a> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else { return Sent::Nothing };
    if values.next().is_some() {
        return Sent::Repeated;
    }
    match value.to_str().map(str::trim) {
        Ok("") => Sent::Nothing,
        Ok(text) => Sent::One(text),
        Err(_) => Sent::Unreadable,
    }
}

/// The organization key of `X-ORGANIZATION-SECRET`, else of `Authorization: Bearer`; `None`
/// when absent or unreadable (it matches no key: 401 follows). A repeated header → 400.
fn api_key(headers: &HeaderMap) -> Result<Option<String>> {
    let value = |name: &str| match sent(headers, name) {
        Sent::One(v) => Ok(Some(v)),
        Sent::Nothing | Sent::Unreadable => Ok(None),
        Sent::Repeated => Err(Error::new(Code::InvalidAuthHeaders, format!("{name} is sent more than once"))),
    };
    if let Some(k) = value("X-ORGANIZATION-SECRET")? {
        return Ok(Some(k.to_string()));
    }
    let Some(auth) = value(AUTHORIZATION.as_str())? else { return Ok(None) };
    let bearer = auth.split_once(' ').filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"));
    Ok(bearer.map(|(_, token)| token.trim().to_string()).filter(|t| !t.is_empty()))
}

/// `X-USER-ID` / `X-USER-ID-TYPE`: absent → `None`; repeated or not visible ASCII → 400.
fn user_header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>> {
    match sent(headers, name) {
        Sent::Nothing => Ok(None),
        Sent::One(v) => Ok(Some(v)),
        Sent::Repeated => Err(Error::new(Code::InvalidUserHeaders, format!("{name} is sent more than once"))),
        Sent::Unreadable => Err(Error::new(Code::InvalidUserHeaders, format!("{name} is not visible ASCII"))),
    }
}

async fn user_from_headers(store: &Store, org: &Org, headers: &HeaderMap) -> Result<Option<User>> {
    let (id, kind) = match (user_header(headers, "X-USER-ID")?, user_header(headers, "X-USER-ID-TYPE")?) {
        (None, None) => return Ok(None),
        (Some(id), Some(kind)) => (id, kind),
        // The id alone is of type `id`: existing clients send the user's id alone after creating
        // their user (docs/decisions.md "Auth").
        (Some(id), None) => (id, "id"),
        (None, Some(_)) => return Err(Error::new(Code::InvalidUserHeaders, "X-USER-ID-TYPE requires X-USER-ID")),
    };
    let kind = users::IdType::parse(kind).ok_or_else(|| {
        Error::new(
            Code::InvalidUserHeaders,
            format!("X-USER-ID-TYPE {kind:?} is not one of {}", users::IdType::names().join(", ")),
        )
    })?;
    let user = users::resolve(store, org, kind, id).await?;
    Ok(Some(user))
}
