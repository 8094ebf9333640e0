//! Signed visitor identities of the chat widget: a replica's identity secret (shown once,
//! replaced by a new one, turned off by `DELETE`), and `X-Embed-Identity` tokens signed with it
//! by the site's backend (here, by the test) that make a logged-in user the same visitor on every
//! device; tampered, expired, too distant, malformed or stale tokens are refused with 403
//! `EMBED_IDENTITY_REFUSED`, never taken as anonymous visits.

use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::common::{assert_error, send, user, DataDir, Org, Resp, Server, ZORBLAX_QUESTION};
use crate::embed::{embed_key, reactor, widget_req};

const SITE: &str = "https://shop.example.com";
const DAY: i64 = 86_400;

pub(crate) fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs() as i64
}

/// `X-Embed-Identity` for `user` of `replica` expiring at `expires`, signed with `secret` as a
/// site's backend does: HMAC-SHA256 keyed with the secret string over
/// `"{replica}\n{user}\n{expires}"`.
pub(crate) fn sign(secret: &str, replica: &str, user: &str, expires: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(format!("{replica}\n{user}\n{expires}").as_bytes());
    format!("{expires}.{}.{user}", hex::encode(mac.finalize().into_bytes()))
}

/// `POST …/embed-identity-secret` with `body` (`None`: no body at all).
async fn post_secret(org: &Org, replica: &str, body: Option<Value>) -> Resp {
    org.call(Method::POST, &format!("/v1/replicas/{replica}/embed-identity-secret"), body.as_ref(), &[]).await
}

/// A new identity secret of `replica`.
pub(crate) async fn new_secret(org: &Org, replica: &str) -> String {
    let r = post_secret(org, replica, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["replicaUUID"], json!(replica));
    let secret = r.body["identitySecret"].as_str().expect("identitySecret").to_string();
    let hex = secret.strip_prefix("rpl_idsec_").expect("rpl_idsec_ prefix");
    assert!(hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{secret}");
    secret
}

/// A widget request from [`SITE`] of device `device`, as the signed user `identity` when given.
fn widget(
    server: &Server,
    method: Method,
    path: &str,
    key: &str,
    device: &str,
    identity: Option<&str>,
) -> reqwest::RequestBuilder {
    let rb = widget_req(server, method, path, key, SITE, device);
    match identity {
        Some(token) => rb.header("x-embed-identity", token),
        None => rb,
    }
}

/// A question `content` for the widget (see [`widget`]).
async fn ask(rb: reqwest::RequestBuilder, content: &str) -> Resp {
    send(rb.json(&json!({ "content": content }))).await
}

/// The `items` of a history answer.
fn items(r: &Resp) -> &Vec<Value> {
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.body["items"].as_array().expect("items")
}

fn assert_refused(r: &Resp, why: &str) {
    assert_error(r, StatusCode::FORBIDDEN, Some("EMBED_IDENTITY_REFUSED"));
    assert!(r.body["error"].as_str().unwrap().contains(why), "expected {why:?}: {}", r.text);
}

#[tokio::test]
async fn the_identity_secret_is_shown_once_and_kept_when_embed_keys_are_made() {
    let server = Server::start();
    let org = server.new_org("Secrets").await;
    let replica = org.create_replica("shop").await;
    let first = new_secret(&org, &replica).await;
    let r = post_secret(&org, &replica, Some(json!({}))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let second = r.body["identitySecret"].as_str().unwrap().to_string();
    assert_ne!(first, second, "a new call makes a new secret");
    let r = post_secret(&org, &replica, Some(json!({"name": "x"}))).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
    let missing = uuid::Uuid::new_v4();
    let r = post_secret(&org, &missing.to_string(), None).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));

    // Never echoed: not by reads of the replica, not by the embed-keys answer.
    let created = org
        .call(
            Method::POST,
            &format!("/v1/replicas/{replica}/embed-keys"),
            Some(&json!({"allowedOrigins": [SITE]})),
            &[],
        )
        .await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text);
    for path in [format!("/v1/replicas/{replica}"), "/v1/replicas".to_string()] {
        let r = org.call(Method::GET, &path, None, &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert!(!r.text.contains("rpl_idsec_") && !r.text.contains(&second[10..]), "{path}: {}", r.text);
    }
    assert!(!created.text.contains("rpl_idsec_") && !created.text.contains(&second[10..]), "{}", created.text);

    // Making an embed key (which rewrites the replica's embed settings) keeps the secret.
    let key = created.body["key"].as_str().unwrap().to_string();
    let token = sign(&second, &replica, "kept", unix_now() + 600);
    let r = send(widget(
        &server,
        Method::GET,
        &format!("/v1/embed/{replica}/history"),
        &key,
        "device-aaaa-0001",
        Some(&token),
    ))
    .await;
    assert_eq!(items(&r), &Vec::<Value>::new());
}

#[tokio::test]
async fn a_signed_user_is_the_same_visitor_on_every_device_while_anonymous_visitors_are_unchanged() {
    let server = Server::start();
    let org = server.new_org("Devices").await;
    let replica = reactor(&org).await;
    let key = embed_key(&org, &replica, &[SITE]).await;
    let secret = new_secret(&org, &replica).await;
    let (chat, history) = (format!("/v1/embed/{replica}/chat"), format!("/v1/embed/{replica}/history"));
    let ann = sign(&secret, &replica, "ann@shop.example", unix_now() + DAY);

    let r = ask(widget(&server, Method::POST, &chat, &key, "laptop-0001-aaaa", Some(&ann)), ZORBLAX_QUESTION).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.header("access-control-allow-origin"), Some(SITE));
    assert!(r.body["content"].as_str().unwrap().contains("451 kelvin"), "{}", r.text);

    // Another device, another visitor id: the same conversation.
    let phone = send(widget(&server, Method::GET, &history, &key, "phone-0002-bbbb", Some(&ann))).await;
    assert_eq!(items(&phone).len(), 2, "{}", phone.text);
    assert_eq!(phone.header("access-control-allow-origin"), Some(SITE));
    // X-Embed-Visitor is not needed with an identity.
    let bare = server
        .req(Method::GET, &history)
        .header("x-embed-key", &key)
        .header("origin", SITE)
        .header("x-embed-identity", &ann);
    assert_eq!(items(&send(bare).await).len(), 2);
    // The user is the linked account `embed:user:<id>`.
    let (_, v) = org
        .get_as(&format!("/v1/replicas/{replica}/chat/history/embed"), &user("embed", "user:ann@shop.example"))
        .await;
    assert_eq!(v["items"].as_array().unwrap().len(), 2, "{v}");

    // Another signed user, and the devices without identity, see nothing of Ann's.
    let bob = sign(&secret, &replica, "bob", unix_now() + DAY);
    let r = send(widget(&server, Method::GET, &history, &key, "phone-0002-bbbb", Some(&bob))).await;
    assert_eq!(items(&r), &Vec::<Value>::new());
    let r = send(widget(&server, Method::GET, &history, &key, "phone-0002-bbbb", None)).await;
    assert_eq!(items(&r), &Vec::<Value>::new());

    // Anonymous visitors as before: their own id, required.
    let r = ask(widget(&server, Method::POST, &chat, &key, "laptop-0001-aaaa", None), "hello").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = send(widget(&server, Method::GET, &history, &key, "laptop-0001-aaaa", None)).await;
    assert_eq!(items(&r).len(), 2, "only the anonymous exchange: {}", r.text);
    let r = send(server.req(Method::GET, &history).header("x-embed-key", &key).header("origin", SITE)).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_USER_HEADERS"));

    // The CORS preflight allows the header.
    let r = server
        .req(Method::OPTIONS, &chat)
        .header("origin", SITE)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "x-embed-key, x-embed-identity")
        .send()
        .await
        .expect("preflight");
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let allowed = r.headers().get("access-control-allow-headers").and_then(|v| v.to_str().ok()).unwrap_or("");
    assert!(allowed.contains("x-embed-identity"), "{allowed}");
}

#[tokio::test]
async fn tampered_expired_distant_malformed_and_stale_identities_are_refused() {
    let server = Server::start();
    let org = server.new_org("Refusals").await;
    let replica = reactor(&org).await;
    let key = embed_key(&org, &replica, &[SITE]).await;
    let history = format!("/v1/embed/{replica}/history");
    let chat = format!("/v1/embed/{replica}/chat");
    let get = |token: String| {
        let (server, history, key) = (&server, history.clone(), key.clone());
        async move { send(widget(server, Method::GET, &history, &key, "device-cccc-0003", Some(&token))).await }
    };

    // No secret yet.
    let r = get(sign("rpl_idsec_guess", &replica, "ann", unix_now() + 60)).await;
    assert_refused(&r, "no identity secret");
    assert_eq!(r.header("access-control-allow-origin"), Some(SITE), "the widget can read the refusal");

    let secret = new_secret(&org, &replica).await;
    let good = sign(&secret, &replica, "ann", unix_now() + 600);
    assert_eq!(get(good.clone()).await.status, StatusCode::OK);
    assert_refused(&get(good.replace(".ann", ".bob")).await, "bad signature");
    assert_refused(&get(sign(&secret, &replica, "ann", unix_now() - 5)).await, "expired");
    assert_refused(&get(sign(&secret, &replica, "ann", unix_now() + 32 * DAY)).await, "31 days");
    for bad in
        ["garbage", "12.34.ann", &format!("{}.{}", unix_now() + 60, "a".repeat(64)), &good.replace(".ann", ".a n")]
    {
        assert_refused(&get(bad.to_string()).await, "malformed");
    }
    // Signed for another replica.
    let other = org.create_replica("other").await;
    assert_refused(&get(sign(&secret, &other, "ann", unix_now() + 600)).await, "bad signature");
    // A refused identity is never taken as the anonymous visitor it came with.
    let r = ask(widget(&server, Method::POST, &chat, &key, "device-cccc-0003", Some("garbage")), "hi").await;
    assert_refused(&r, "malformed");

    // A new secret: tokens signed with the earlier one are refused, new ones accepted.
    let rotated = new_secret(&org, &replica).await;
    assert_refused(&get(good).await, "bad signature");
    assert_eq!(get(sign(&rotated, &replica, "ann", unix_now() + 600)).await.status, StatusCode::OK);

    // The web chat page (no key) takes no identity.
    let token = sign(&rotated, &replica, "ann", unix_now() + 600);
    let page = server
        .req(Method::POST, &chat)
        .header("x-embed-visitor", "device-cccc-0003")
        .header("x-embed-identity", &token);
    assert_refused(&send(page.json(&json!({"content": "hi"}))).await, "web chat page");
}

#[tokio::test]
async fn deleting_the_secret_turns_identities_off_and_a_second_delete_is_404() {
    let server = Server::start();
    let org = server.new_org("Off").await;
    let replica = reactor(&org).await;
    let path = format!("/v1/replicas/{replica}/embed-identity-secret");
    let (s, v) = org.delete(&path).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "no settings at all: {v}");
    let key = embed_key(&org, &replica, &[SITE]).await;
    let (s, v) = org.delete(&path).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "settings without a secret: {v}");

    let secret = new_secret(&org, &replica).await;
    let history = format!("/v1/embed/{replica}/history");
    let token = sign(&secret, &replica, "ann", unix_now() + 600);
    let r = send(widget(&server, Method::GET, &history, &key, "device-dddd-0004", Some(&token))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    let (s, v) = org.delete(&path).await;
    assert_eq!((s, &v), (StatusCode::OK, &json!({"success": true})));
    let r = send(widget(&server, Method::GET, &history, &key, "device-dddd-0004", Some(&token))).await;
    assert_refused(&r, "no identity secret");
    // The key and the allowed origins stay: anonymous visitors go on.
    let r = send(widget(&server, Method::GET, &history, &key, "device-dddd-0004", None)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = org.call(Method::DELETE, &path, None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    let missing = format!("/v1/replicas/{}/embed-identity-secret", uuid::Uuid::new_v4());
    assert_error(&org.call(Method::DELETE, &missing, None, &[]).await, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
}

#[tokio::test]
async fn the_identity_secret_is_stored_sealed_and_a_replaced_secrets_key_refuses_identities_clearly() {
    // On redb: its file is scanned for the secret, and a node of a shared store with a replaced
    // key refuses to start instead (`nodes::a_node_given_another_secrets_key_refuses_to_start`).
    let server = Server::start_in(DataDir::redb(), &[]);
    let org = server.new_org("Sealed").await;
    let replica = reactor(&org).await;
    let key = embed_key(&org, &replica, &[SITE]).await;
    let secret = new_secret(&org, &replica).await;
    let token = sign(&secret, &replica, "ann", unix_now() + 600);
    let (_, dir) = server.stop();
    let hex = secret.strip_prefix("rpl_idsec_").unwrap();
    for entry in walk(&dir.path()) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(!bytes.windows(hex.len()).any(|w| w == hex.as_bytes()), "the secret in clear in {entry:?}");
    }
    // Another secrets key: the sealed secret cannot be opened, and the refusal says what to do.
    std::fs::write(dir.path().join("secrets.key"), format!("{}\n", "ab".repeat(32))).unwrap();
    let server = Server::start_in(dir, &[]);
    let history = format!("/v1/embed/{replica}/history");
    let r = send(widget(&server, Method::GET, &history, &key, "device-eeee-0005", Some(&token))).await;
    assert_refused(&r, "make a new one");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            files.extend(walk(&p));
        } else {
            files.push(p);
        }
    }
    files
}
