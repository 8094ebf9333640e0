//! Resolves credentials once per request into a [`Caller`] (spec §5, DECISIONS.md "Auth").
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

/// Authenticates for `access`: 401 `UNAUTHORIZED` without a valid key, 400 for incomplete user
/// headers, 401 `USER_NOT_FOUND` for an unknown `id`/`email` user. Keys are looked up in
/// `keys` (memory) before the store.
pub async fn authenticate(
    store: &Store,
    keys: &orgs::KeyCache,
    headers: &HeaderMap,
    access: Access,
) -> Result<Option<Caller>> {
    if access == Access::Public {
        return Ok(None);
    }
    let key = api_key(headers)
        .ok_or_else(|| Error::new(Code::Unauthorized, "missing X-ORGANIZATION-SECRET (or Authorization: Bearer)"))?;
    let org = keys
        .by_api_key(store, &key)
        .await?
        .ok_or_else(|| Error::new(Code::Unauthorized, "invalid organization secret"))?;
    let user = match access {
        Access::Org => None,
        _ => user_from_headers(store, &org, headers).await?,
    };
    // DECISIONS.md "Auth": the key alone acts as the organization's owner user, on the
    // operations that need a user (`/v1/users/me*`) too.
    let user = match user {
        None if access == Access::User => Some(users::owner(store, &org).await?),
        user => user,
    };
    Ok(Some(Caller { org, user }))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|s| !s.is_empty())
}

fn api_key(headers: &HeaderMap) -> Option<String> {
    if let Some(k) = header(headers, "x-organization-secret") {
        return Some(k.to_string());
    }
    let auth = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = auth.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_string()).filter(|t| !t.is_empty())
}

async fn user_from_headers(store: &Store, org: &Org, headers: &HeaderMap) -> Result<Option<User>> {
    let (id, kind) = match (header(headers, "x-user-id"), header(headers, "x-user-id-type")) {
        (None, None) => return Ok(None),
        (Some(id), Some(kind)) => (id, kind),
        // DECISIONS.md "Auth": the id alone is of type `id` (what existing clients send).
        (Some(id), None) => (id, "id"),
        (None, Some(_)) => return Err(Error::new(Code::InvalidUserHeaders, "X-USER-ID-TYPE requires X-USER-ID")),
    };
    let kind = users::IdType::parse(kind).ok_or_else(|| {
        Error::new(
            Code::InvalidUserHeaders,
            format!("X-USER-ID-TYPE {kind:?} is not one of {}", users::IdType::NAMES.join(", ")),
        )
    })?;
    let user = users::resolve(store, org, kind, id).await?;
    Ok(Some(user))
}
