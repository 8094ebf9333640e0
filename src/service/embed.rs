//! The embeddable widget and the web chat page (`embed` linked accounts): public embed keys,
//! the origins allowed per replica, signed visitor identities, and who a widget or page request
//! is.
//!
//! - An embed key (`rpl_embed_…`) is public: it sits in the site's HTML. It can only chat with
//!   its replica and read the history of the visitor that sends it (`X-Embed-Visitor`, a random
//!   id the widget keeps in localStorage; the visitor is the linked-account user
//!   `embed:<visitor id>`). Keys are stored hashed.
//! - A site whose visitors are logged in can name them itself: its backend signs the site's user
//!   id with the replica's identity secret (`rpl_idsec_…`, [`create_identity_secret`]; never
//!   shown again, kept in the replica's [`EmbedSettings`]) and the widget sends the token as
//!   `X-Embed-Identity` ([`verify_identity`] gives the format and the signing recipe). The
//!   visitor is then the linked-account user `embed:user:<user id>` on every device, and
//!   `X-Embed-Visitor` is ignored. A user id from the browser is never trusted without the
//!   signature: a refused token is 403 `EMBED_IDENTITY_REFUSED`, never an anonymous visit.
//!   Anonymous visitor ids cannot hold `:`, so the two never collide.
//! - Every widget request must come from one of the replica's allowed origins (its `Origin`
//!   header); others are refused with 403 `ORIGIN_NOT_ALLOWED`.
//! - Without a key, the same operations serve the web chat page of a public replica, on the
//!   server's own origin only, on the `web` source (anonymous visitors only).
//! - A key is revoked one at a time ([`revoke_key`]); the others stay.
//! - Visitors become users only at their first question, and only while the visitors' own
//!   monthly quota has room ([`check_new_visitor`]); their conversations count in
//!   [`Pool::Visitors`], never in the organization's quota. The request limits are the
//!   handlers' (`rate_limit::EmbedLimits`).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;

use super::channel::Channel;
use super::quotas::Pool;
use crate::error::{Code, Error, Result};
use crate::secrets::Secrets;
use crate::store::kv::{ReadableTable, WriteTransaction};
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
    let origins = allowed.clone();
    store
        .write(move |txn| {
            txn.open_table(tables::KEYHASH_EMBED)?.insert(&hash, k(replica))?;
            let mut table = txn.open_table(tables::REPLICA_EMBED)?;
            let mut settings = settings_or_new(&table, org, replica)?;
            settings.allowed_origins = origins.clone();
            settings.updated_at = now_ms();
            store::put(&mut table, k(replica), &settings)
        })
        .await?;
    Ok((key, allowed))
}

/// The embed settings of `replica` in `table`, or new ones (no origins, no identity secret).
fn settings_or_new<T: ReadableTable<u128, &'static [u8]>>(
    table: &T,
    org: Uuid,
    replica: Uuid,
) -> Result<EmbedSettings> {
    let settings = store::get::<u128, EmbedSettings, _>(table, k(replica))?;
    Ok(settings.unwrap_or(EmbedSettings {
        replica,
        org,
        allowed_origins: Vec::new(),
        updated_at: now_ms(),
        identity_secret: None,
    }))
}

/// Prefix of an identity secret.
const IDENTITY_SECRET_PREFIX: &str = "rpl_idsec_";

/// How far ahead a signed identity may expire: 31 days, in seconds.
pub const MAX_IDENTITY_LIFETIME_SECS: i64 = 31 * 24 * 3600;

/// What an identity secret is sealed for: its replica.
fn seal_context(replica: Uuid) -> Vec<u8> {
    [b"embed-identity".as_slice(), replica.as_bytes()].concat()
}

/// Makes a new identity secret for `replica` of `org` (`rpl_idsec_` and 64 hex digits of 32
/// random bytes), replacing any earlier one: identities signed with that are refused from this
/// write on. It is stored sealed with `secrets` (the bots' tokens' key). Creates the replica's
/// embed settings (no allowed origins) when it has none. Returns the secret (shown once, never
/// again).
pub async fn create_identity_secret(store: &Store, secrets: &Secrets, org: Uuid, replica: Uuid) -> Result<String> {
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).map_err(Error::internal)?;
    let text = format!("{IDENTITY_SECRET_PREFIX}{}", hex::encode(raw));
    let sealed = secrets.seal(text.as_bytes(), &seal_context(replica))?;
    store
        .write(move |txn| {
            let mut table = txn.open_table(tables::REPLICA_EMBED)?;
            let mut settings = settings_or_new(&table, org, replica)?;
            settings.identity_secret = Some(sealed.clone());
            settings.updated_at = now_ms();
            store::put(&mut table, k(replica), &settings)
        })
        .await?;
    Ok(text)
}

/// Forgets the identity secret of `replica`: signed identities are refused from this write on
/// (the allowed origins and keys stay). Errors: 404 when the replica has none.
pub async fn delete_identity_secret(store: &Store, replica: Uuid) -> Result<()> {
    store
        .write(move |txn| {
            let mut table = txn.open_table(tables::REPLICA_EMBED)?;
            let settings = store::get::<u128, EmbedSettings, _>(&table, k(replica))?;
            let Some(mut settings) = settings.filter(|s| s.identity_secret.is_some()) else {
                return Err(Error::not_found("identity secret"));
            };
            settings.identity_secret = None;
            settings.updated_at = now_ms();
            store::put(&mut table, k(replica), &settings)
        })
        .await
}

fn identity_refused(why: &str) -> Error {
    Error::new(Code::EmbedIdentityRefused, format!("X-Embed-Identity refused: {why}"))
}

/// The site's user id in `token` (`X-Embed-Identity`), once checked against `secret`, the
/// identity secret of `replica` (`rpl_idsec_…`; `None` when it has none), at `now_secs` (unix
/// seconds).
///
/// `token` is `<expires>.<signature>.<userId>`: `expires` unix seconds (decimal digits),
/// `signature` the 64 lowercase hex digits of HMAC-SHA256 with the UTF-8 bytes of the whole
/// secret string as key over `"{replica}\n{userId}\n{expires}"` (the replica's UUID lowercase and
/// hyphenated, `expires` as written in the token), `userId` 1 to 128 of `A-Z a-z 0-9 _ @ . + -`
/// (the token is split on its first two dots). The signature is compared in constant time.
/// Errors: 403 `EMBED_IDENTITY_REFUSED`, saying which of these failed: malformed, no secret,
/// bad signature, expired (`expires` ≤ now), too far ahead (more than
/// [`MAX_IDENTITY_LIFETIME_SECS`] from now).
pub fn verify_identity(secret: Option<&str>, replica: Uuid, token: &str, now_secs: i64) -> Result<String> {
    let (expires_text, signature, user) = parse_identity(token).ok_or_else(|| {
        identity_refused(
            "malformed; expected <expires>.<signature>.<userId> (unix seconds, 64 lowercase hex digits, \
             1 to 128 of A-Z a-z 0-9 _ @ . + -)",
        )
    })?;
    let secret = secret.ok_or_else(|| identity_refused("this replica has no identity secret"))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(format!("{replica}\n{user}\n{expires_text}").as_bytes());
    if mac.verify_slice(&signature).is_err() {
        return Err(identity_refused("bad signature (not signed with this replica's current identity secret)"));
    }
    let expires: i64 = expires_text.parse().map_err(|_| identity_refused("malformed expiry"))?;
    if expires <= now_secs {
        return Err(identity_refused("expired"));
    }
    if expires - now_secs > MAX_IDENTITY_LIFETIME_SECS {
        return Err(identity_refused("expires more than 31 days ahead"));
    }
    Ok(user.to_string())
}

/// `(expires as written, signature bytes, user id)` of a well-formed identity token.
fn parse_identity(token: &str) -> Option<(&str, Vec<u8>, &str)> {
    let mut parts = token.splitn(3, '.');
    let (expires, signature, user) = (parts.next()?, parts.next()?, parts.next()?);
    let expires_ok = (1..=18).contains(&expires.len()) && expires.bytes().all(|b| b.is_ascii_digit());
    let signature_ok = signature.len() == 64 && signature.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let user_ok = (1..=128).contains(&user.len())
        && user.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'@' | b'.' | b'+' | b'-'));
    if !(expires_ok && signature_ok && user_ok) {
        return None;
    }
    Some((expires, hex::decode(signature).ok()?, user))
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

/// The allowed origins of `replica`'s embed widget (empty when it has no settings): what a
/// replica bundle carries of its embed settings (never the identity secret or the keys).
/// Errors: the store's.
pub fn allowed_origins_in(txn: &impl crate::store::kv::Reads, replica: Uuid) -> Result<Vec<String>> {
    let settings = store::get::<u128, EmbedSettings, _>(&txn.read_table(tables::REPLICA_EMBED)?, k(replica))?;
    Ok(settings.map(|s| s.allowed_origins).unwrap_or_default())
}

/// Sets the allowed origins of new replica `replica` of `org` to `origins` (normalized; none:
/// nothing written), with no key and no identity secret (a replica bundle's import: keys are
/// minted again). Errors: 400 for an origin that is not one ([`normalize_origin`]), the store's.
pub fn put_origins_in(txn: &WriteTransaction, org: Uuid, replica: Uuid, origins: &[String]) -> Result<()> {
    if origins.is_empty() {
        return Ok(());
    }
    let allowed = origins.iter().map(|o| normalize_origin(o)).collect::<Result<Vec<_>>>()?;
    let mut table = txn.open_table(tables::REPLICA_EMBED)?;
    let mut settings = settings_or_new(&table, org, replica)?;
    settings.allowed_origins = allowed;
    store::put(&mut table, k(replica), &settings)
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
    /// The replica's identity secret, sealed ([`visitor_account`] opens it when an identity is
    /// sent); `None` on the page or when the replica has none.
    pub identity_secret: Option<Vec<u8>>,
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

/// Checks a request for `replica`: with a key, the key must be the replica's and `origin` one of
/// its allowed origins; without one, the replica must be public and the request come from the
/// server's own origin. Who the visitor is comes after ([`visitor_account`]). Errors: 403
/// `EMBED_KEY_REFUSED` (unknown key or another replica's), 403 `ORIGIN_NOT_ALLOWED`, 404 (no
/// such replica, or private without a key).
pub async fn authorize(store: &Store, replica: Uuid, c: Credentials) -> Result<Visit> {
    let hash = c.key.as_deref().map(super::hash_secret);
    let (r, key_replica, settings) = store
        .read(move |txn| {
            let r = crate::store::replica_index::get_in(txn, replica)?;
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
        return Ok(Visit { replica: r, source: Channel::Web.name(), cors_origin: None, identity_secret: None });
    }
    if key_replica != Some(k(replica)) {
        return Err(Error::new(Code::EmbedKeyRefused, "X-Embed-Key is not an embed key of this replica"));
    }
    let (allowed, identity_secret) = settings.map(|s| (s.allowed_origins, s.identity_secret)).unwrap_or_default();
    let origin = c.origin.filter(|o| allowed.contains(o)).ok_or_else(not_allowed)?;
    Ok(Visit { replica: r, source: Channel::Embed.name(), cors_origin: Some(origin), identity_secret })
}

/// The identity secret of `replica` from its sealed form. Errors: 403 `EMBED_IDENTITY_REFUSED`
/// when the secrets key can no longer open it (the key file was replaced: make a new secret).
fn open_secret(secrets: &Secrets, replica: Uuid, sealed: Option<&[u8]>) -> Result<Option<String>> {
    let Some(sealed) = sealed else { return Ok(None) };
    let plain = secrets.open(sealed, &seal_context(replica)).map_err(|_| {
        identity_refused("this replica's identity secret cannot be read with the server's secrets key; make a new one")
    })?;
    Ok(Some(String::from_utf8_lossy(&plain).into_owned()))
}

fn now_secs() -> i64 {
    now_ms().div_euclid(1000)
}

/// The linked-account id (type `embed`) of the visitor of `visit`: `user:<id>` for a site user
/// whose `identity` (`X-Embed-Identity`, [`verify_identity`] against the replica's secret opened
/// with `secrets`) holds; else the anonymous `visitor` id (`X-Embed-Visitor`, [`check_visitor`]),
/// which an identity makes ignored. Errors: 403 `EMBED_IDENTITY_REFUSED` (a refused identity, or
/// one sent by the web chat page), 400 `INVALID_USER_HEADERS`.
pub fn visitor_account(
    secrets: &Secrets,
    visit: &Visit,
    identity: Option<&str>,
    visitor: Option<&str>,
) -> Result<String> {
    let Some(token) = identity else { return check_visitor(visitor) };
    if visit.source == Channel::Web.name() {
        return Err(identity_refused("only the widget (with an embed key) sends one, not the web chat page"));
    }
    let replica = visit.replica.id;
    let secret = open_secret(secrets, replica, visit.identity_secret.as_deref())?;
    Ok(format!("user:{}", verify_identity(secret.as_deref(), replica, token, now_secs())?))
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
    super::quotas::check_new_conversation(store, org, pool, |_, _| Ok(false)).await
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

    const SECRET: &str = "rpl_idsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const NOW: i64 = 1_700_000_000;

    /// A token for `user` expiring at `expires`, signed as a site's backend does.
    fn token(replica: Uuid, user: &str, expires: i64) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(format!("{replica}\n{user}\n{expires}").as_bytes());
        format!("{expires}.{}.{user}", hex::encode(mac.finalize().into_bytes()))
    }

    fn refusal(r: Result<String>) -> String {
        let e = r.expect_err("refused");
        assert_eq!(e.code, Code::EmbedIdentityRefused, "{e}");
        e.to_string()
    }

    #[test]
    fn a_signed_identity_names_the_sites_user() {
        let replica = Uuid::from_u128(0xABCD);
        let t = token(replica, "ann@example.com", NOW + 3600);
        assert_eq!(verify_identity(Some(SECRET), replica, &t, NOW).unwrap(), "ann@example.com");
        let dotted = token(replica, "a.b+c_d-e", NOW + MAX_IDENTITY_LIFETIME_SECS);
        assert_eq!(verify_identity(Some(SECRET), replica, &dotted, NOW).unwrap(), "a.b+c_d-e");
        // As the Node.js and Python examples of docs/channels.md sign it (the replica lowercase, hyphenated).
        let by_hand = "1700003600.4561e6f64b65ec8c6b3e87537309cec500a2e32c5fdc16b96fe6bbf6c58e6edf.ann";
        assert_eq!(verify_identity(Some(SECRET), replica, by_hand, NOW).unwrap(), "ann");
    }

    #[test]
    fn tampered_expired_too_far_and_unsigned_identities_are_refused() {
        let replica = Uuid::from_u128(7);
        let t = token(replica, "ann", NOW + 60);
        let tampered = t.replace(".ann", ".bob");
        assert!(refusal(verify_identity(Some(SECRET), replica, &tampered, NOW)).contains("bad signature"));
        let other_secret = SECRET.replace("_0", "_1");
        assert!(refusal(verify_identity(Some(&other_secret), replica, &t, NOW)).contains("bad signature"));
        let elsewhere = Uuid::from_u128(8);
        assert!(refusal(verify_identity(Some(SECRET), elsewhere, &t, NOW)).contains("bad signature"));
        let expired = token(replica, "ann", NOW);
        assert!(refusal(verify_identity(Some(SECRET), replica, &expired, NOW)).contains("expired"));
        let far = token(replica, "ann", NOW + MAX_IDENTITY_LIFETIME_SECS + 1);
        assert!(refusal(verify_identity(Some(SECRET), replica, &far, NOW)).contains("31 days"));
        assert!(refusal(verify_identity(None, replica, &t, NOW)).contains("no identity secret"));
    }

    #[test]
    fn malformed_identities_are_refused() {
        let replica = Uuid::from_u128(7);
        let t = token(replica, "ann", NOW + 60);
        let sig = t.split('.').nth(1).unwrap();
        let long_user = "u".repeat(129);
        for bad in [
            String::new(),
            "ann".to_string(),
            format!("{}.{sig}", NOW + 60),
            format!("{}.{sig}.", NOW + 60),
            format!("-1.{sig}.ann"),
            format!("soon.{sig}.ann"),
            format!("{}.{}.ann", NOW + 60, sig.to_uppercase()),
            format!("{}.{}.ann", NOW + 60, &sig[..62]),
            format!("{}.{sig}.ann:x", NOW + 60),
            format!("{}.{sig}.ann x", NOW + 60),
            format!("{}.{sig}.{long_user}", NOW + 60),
        ] {
            assert!(refusal(verify_identity(Some(SECRET), replica, &bad, NOW)).contains("malformed"), "{bad}");
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
