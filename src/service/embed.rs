//! The embeddable widget and the web chat page (issue "Channels", DECISIONS.md "Auth":
//! `embed` linked accounts): public embed keys, the origins allowed per replica, and who a
//! widget or page request is.
//!
//! - An embed key (`rpl_embed_…`) is public: it sits in the site's HTML. It can only chat with
//!   its replica and read the history of the visitor that sends it (`X-Embed-Visitor`, a random
//!   id the widget keeps in localStorage; the visitor is the linked-account user
//!   `embed:<visitor id>`). Keys are stored hashed.
//! - Every widget request must come from one of the replica's allowed origins (its `Origin`
//!   header); others are refused with 403 `ORIGIN_NOT_ALLOWED`.
//! - Without a key, the same operations serve the web chat page of a public replica, on the
//!   server's own origin only, on the `web` source.
//! - A key is revoked one at a time ([`revoke_key`]); the others stay.
//! - Visitors are anonymous: a visitor becomes a user only at its first question, and only while
//!   the visitors' own monthly quota has room ([`check_new_visitor`]); their conversations count
//!   in [`Pool::Visitors`], never in the organization's quota. The request limits are the
//!   handlers' (`api::embed::Limits`).

use redb::{ReadableTable, WriteTransaction};
use uuid::Uuid;

use super::token_usage::month_of;
use super::usage::Pool;
use crate::error::{Code, Error, Result};
use crate::store::records::{EmbedSettings, Replica};
use crate::store::{self, k, now_ms, tables, Store};

/// Most origins one replica may allow.
pub const MAX_ORIGINS: usize = 50;

/// `scheme://host[:port]` of an origin given by an operator (`https://example.com/` accepted).
/// Errors: 400 when it is not an http(s) origin (a path, query or credentials are refused).
pub fn normalize_origin(origin: &str) -> Result<String> {
    let bad = || Error::invalid("allowedOrigins", format!("{origin:?} is not an origin like https://example.com"));
    let url = url::Url::parse(origin.trim()).map_err(|_| bad())?;
    let plain = matches!(url.scheme(), "http" | "https")
        && url.host().is_some()
        && matches!(url.path(), "" | "/")
        && url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    if !plain {
        return Err(bad());
    }
    Ok(url.origin().ascii_serialization())
}

/// Mints a new embed key of `replica` and sets the replica's allowed origins to `origins`
/// (normalized, de-duplicated, 1 to [`MAX_ORIGINS`]). Earlier keys keep working. Returns the key
/// (shown once) and the origins stored.
pub async fn create_key(store: &Store, org: Uuid, replica: Uuid, origins: &[String]) -> Result<(String, Vec<String>)> {
    let mut allowed: Vec<String> = Vec::new();
    for o in origins {
        let o = normalize_origin(o)?;
        if !allowed.contains(&o) {
            allowed.push(o);
        }
    }
    if allowed.is_empty() || allowed.len() > MAX_ORIGINS {
        return Err(Error::invalid("allowedOrigins", format!("must hold 1 to {MAX_ORIGINS} origins")));
    }
    let mut raw = [0u8; 24];
    getrandom::fill(&mut raw).map_err(Error::internal)?;
    let key = format!("rpl_embed_{}", hex::encode(raw));
    let hash = super::hash_secret(&key);
    let settings = EmbedSettings { replica, org, allowed_origins: allowed.clone(), updated_at: now_ms() };
    store
        .write(move |txn| {
            txn.open_table(tables::KEYHASH_EMBED)?.insert(&hash, k(replica))?;
            store::put(&mut txn.open_table(tables::REPLICA_EMBED)?, k(replica), &settings)
        })
        .await?;
    Ok((key, allowed))
}

/// Revokes `key`, an embed key of `replica`: from this write on, requests carrying it are
/// refused (403 `EMBED_KEY_REFUSED`). The replica's other keys and its allowed origins stay.
/// Errors: 404 when `key` is not a key of `replica` (unknown, already revoked, or another
/// replica's).
pub async fn revoke_key(store: &Store, replica: Uuid, key: &str) -> Result<()> {
    let hash = super::hash_secret(key);
    store
        .write(move |txn| {
            let mut keys = txn.open_table(tables::KEYHASH_EMBED)?;
            let owner = keys.get(&hash)?.map(|v| v.value());
            if owner != Some(k(replica)) {
                return Err(Error::not_found("embed key"));
            }
            keys.remove(&hash)?;
            Ok(())
        })
        .await
}

/// Removes the keys and settings of `replica` (replica deletion).
pub fn delete_all_in(txn: &WriteTransaction, replica: Uuid) -> Result<()> {
    txn.open_table(tables::REPLICA_EMBED)?.remove(k(replica))?;
    txn.open_table(tables::KEYHASH_EMBED)?.retain(|_, r| r != k(replica))?;
    Ok(())
}

/// Who a widget or page request is.
#[derive(Debug, Clone)]
pub struct Visit {
    pub replica: Replica,
    /// `embed` (widget, with a key) or `web` (the chat page).
    pub source: &'static str,
    /// The origin to answer in `Access-Control-Allow-Origin` (widget requests).
    pub cors_origin: Option<String>,
}

/// What a widget or page request carries.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    pub key: Option<String>,
    /// The `Origin` header.
    pub origin: Option<String>,
    /// The server's own origin as the request reached it (`http://` + `Host`, or
    /// `--public-url`).
    pub own_origin: String,
}

fn not_allowed() -> Error {
    Error::new(Code::OriginNotAllowed, "this page's origin may not use this replica's chat")
}

/// Checks a request for `replica`: with a key, the key must be the replica's and `origin` one
/// of its allowed origins; without one, the replica must be public and the request come from
/// the server's own origin. Errors: 403 `EMBED_KEY_REFUSED` (unknown key or another
/// replica's), 403 `ORIGIN_NOT_ALLOWED`, 404 (no such replica, or private without a key).
pub async fn authorize(store: &Store, replica: Uuid, c: Credentials) -> Result<Visit> {
    let hash = c.key.as_deref().map(super::hash_secret);
    let (r, key_replica, settings) = store
        .read(move |txn| {
            let r = store::get::<u128, Replica, _>(&txn.open_table(tables::REPLICAID_REPLICA)?, k(replica))?;
            let key_replica = match hash {
                Some(h) => txn.open_table(tables::KEYHASH_EMBED)?.get(&h)?.map(|v| v.value()),
                None => None,
            };
            let settings = store::get::<u128, EmbedSettings, _>(&txn.open_table(tables::REPLICA_EMBED)?, k(replica))?;
            Ok((r, key_replica, settings))
        })
        .await?;
    let r = r.ok_or_else(|| Error::not_found("replica"))?;
    if c.key.is_none() {
        if r.private {
            return Err(Error::not_found("replica"));
        }
        if c.origin.as_ref().is_some_and(|o| o != &c.own_origin) {
            return Err(not_allowed());
        }
        return Ok(Visit { replica: r, source: "web", cors_origin: None });
    }
    if key_replica != Some(k(replica)) {
        return Err(Error::new(Code::EmbedKeyRefused, "X-Embed-Key is not an embed key of this replica"));
    }
    let allowed = settings.map(|s| s.allowed_origins).unwrap_or_default();
    match c.origin {
        Some(o) if allowed.contains(&o) => Ok(Visit { replica: r, source: "embed", cors_origin: Some(o) }),
        _ => Err(not_allowed()),
    }
}

/// Whether `origin` may send widget requests to `replica` (CORS preflight, which carries no
/// key).
pub async fn origin_allowed(store: &Store, replica: Uuid, origin: String) -> Result<bool> {
    store
        .read(move |txn| {
            let s = store::get::<u128, EmbedSettings, _>(&txn.open_table(tables::REPLICA_EMBED)?, k(replica))?;
            Ok(s.is_some_and(|s| s.allowed_origins.contains(&origin)))
        })
        .await
}

/// Checks `X-Embed-Visitor`: 8 to 100 letters, digits, `-` or `_`.
pub fn check_visitor(visitor: Option<&str>) -> Result<String> {
    match visitor {
        Some(v)
            if (8..=100).contains(&v.len())
                && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            Ok(v.to_string())
        }
        _ => Err(Error::new(
            Code::InvalidUserHeaders,
            "X-Embed-Visitor must be 8 to 100 letters, digits, - or _ (the widget's visitor id)",
        )),
    }
}

/// The rate-limit key of `visitor` of `replica`: the first 128 bits of a SHA-256 of both, so
/// that a visitor id chosen to collide with another visitor's bucket cannot be found.
pub fn visitor_key(replica: Uuid, visitor: &str) -> u128 {
    let digest = super::hash_secret(&format!("{replica}/{visitor}"));
    u128::from_be_bytes(digest[..16].try_into().expect("16 of 32 bytes"))
}

/// Refuses, before a new visitor is made a user, a first question that would start a
/// conversation beyond `pool`'s monthly quota (429, see [`Pool::check`]): visitors turned away
/// by the quota leave nothing behind.
pub async fn check_new_visitor(store: &Store, org: Uuid, pool: Pool) -> Result<()> {
    let month = month_of(now_ms());
    store
        .read(move |txn| {
            let max = pool.max(&txn.open_table(tables::ORG_QUOTA)?, org)?;
            pool.check(pool.started_in(txn, org, month)?, max)
        })
        .await
}

/// The public replica of `org` with `slug` (the web chat page). 404 when missing or private.
pub async fn public_by_slug(store: &Store, org: Uuid, slug: String) -> Result<Replica> {
    let r = store
        .read(move |txn| {
            let Some(id) = txn.open_table(tables::SLUG_REPLICA)?.get((k(org), slug.as_str()))?.map(|v| v.value())
            else {
                return Ok(None);
            };
            store::get::<u128, Replica, _>(&txn.open_table(tables::REPLICAID_REPLICA)?, id)
        })
        .await?;
    r.filter(|r| !r.private).ok_or_else(|| Error::not_found("replica"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_normalized_and_paths_refused() {
        assert_eq!(normalize_origin("https://Example.com/").unwrap(), "https://example.com");
        assert_eq!(normalize_origin("http://127.0.0.1:8080").unwrap(), "http://127.0.0.1:8080");
        assert_eq!(normalize_origin("https://example.com:443").unwrap(), "https://example.com");
        for bad in ["example.com", "https://example.com/page", "ftp://x.org", "https://u:p@x.org", "*"] {
            assert!(normalize_origin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn visitor_ids_are_checked() {
        assert!(check_visitor(Some("0b5e6a1c-2f4d-4c1e-9a7b-3d2e1f0a9b8c")).is_ok());
        assert!(check_visitor(Some("short")).is_err());
        assert!(check_visitor(Some("has space in it")).is_err());
        assert!(check_visitor(None).is_err());
    }
}
