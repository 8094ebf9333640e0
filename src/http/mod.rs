//! From a hyper request to a hyper response: route lookup, version check, auth, then the body
//! (read and inflated only for an authenticated caller), the handler (its panic caught, so it
//! becomes a 500 and never takes the server down: [`run_handler`]), and the spec §7 error body
//! for every failure. Every response carries `X-Request-Id`, and every answer of a request whose
//! `X-API-Version` was accepted names the version served in its own `X-API-Version`.

pub mod asset;
pub mod auth;
pub mod read_cache;
pub mod request;
pub mod response;
pub mod route;
pub mod router;
pub mod version;

use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};

use crate::app::App;
use crate::error::{Error, Result};
use crate::rate_limit::RateLimiter;
use read_cache::ReadCache;
use request::Req;
use response::{error_reply, Reply};
use route::{BodyKind, Route};
use router::{Matched, Router};

/// What answers a request around its handler: the route table and its compiled [`Router`], the
/// per-key rate limits (`--rate-limit-per-key`), the read cache (`--read-cache-bytes`), and the
/// state the handlers get. Made once, at the top (`crate::serve`), from `crate::api`'s rows.
pub struct Dispatcher {
    pub app: Arc<App>,
    routes: Vec<Route>,
    router: Router,
    /// Per-key request buckets; `None`: no limit.
    rate_limiter: Option<RateLimiter>,
    /// Answers of the hot reads, kept until the next commit.
    read_cache: ReadCache,
}

impl Dispatcher {
    /// Compiles `routes` (row `i` is route `i` of the router) around `app`. Panics on a
    /// malformed or conflicting path: the table is static and checked by tests.
    pub fn new(app: Arc<App>, routes: Vec<Route>) -> Dispatcher {
        let router = Router::new(routes.iter().map(|r| (r.method.clone(), r.path)));
        let rate_limiter = app.config.rate_limit_per_key.map(|n| RateLimiter::for_store(n, &app.store, "key"));
        let read_cache = ReadCache::new(app.config.read_cache_bytes);
        Dispatcher { app, routes, router, rate_limiter, read_cache }
    }
}

/// Serves one request. Never fails: errors become spec §7 bodies.
pub async fn handle(d: Arc<Dispatcher>, req: Request<Incoming>) -> Response<response::ResponseBody> {
    let in_flight = crate::telemetry::InFlight::start();
    let request_id = next_request_id();
    let method = req.method().clone();
    let matched = d.router.find(&method, req.uri().path());
    let path = loggable_path(&d.routes, matched.as_ref().ok(), req.uri().path());
    let route = matched.as_ref().map_or("unmatched", |m| d.routes[m.route].path);
    let mut org = None;
    let mut limit_headers = Vec::new();
    let mut served = None;
    let result = match matched {
        Ok(m) => dispatch(&d, m, req, &request_id, &mut org, &mut limit_headers, &mut served).await,
        Err(e) => Err(e),
    };
    let reply = match result {
        Ok(reply) => reply,
        Err((err, allow)) => {
            match err.code {
                crate::error::Code::Internal => {
                    tracing::error!(%request_id, %method, %path, error = %err, "internal error")
                }
                crate::error::Code::InsufficientStorage => {
                    tracing::warn!(%request_id, %method, %path, error = %err, "write refused: the disk is full")
                }
                _ => {}
            }
            let reply = error_reply(&err, &request_id, d.app.config.expose_internal_errors);
            match allow {
                Some(a) => reply.with_header("allow", &a),
                None => reply,
            }
        }
    };
    crate::telemetry::request(method.as_str(), route, reply.status.as_u16(), in_flight.elapsed());
    let reply = limit_headers.into_iter().fold(reply, |r, (name, value)| r.with_header(name, &value));
    let reply = match served {
        Some(date) => reply.with_header("x-api-version", date),
        None => reply,
    };
    tracing::info!(
        %request_id, %method, route, %path, status = reply.status.as_u16(),
        micros = in_flight.elapsed().as_micros() as u64, org = org.as_ref().map(tracing::field::display), "request"
    );
    reply.into_response(&request_id)
}

/// A new request id: 32 hex digits, like the simple form of the UUID it replaced, made of a
/// random 64-bit prefix drawn once per process and a counter — unique across the server's life
/// and across restarts without a random-number call per request (every request gets one, so
/// it must cost next to nothing).
fn next_request_id() -> String {
    static PREFIX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair().0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = (u128::from(prefix) << 64) | u128::from(n);
    // The hex digits written directly: `format!` cost more than the rest of this function.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    (0..32).rev().map(|i| char::from(HEX[((id >> (4 * i)) & 0xf) as usize])).collect()
}

/// The path as logged: on public operations whose path parameter is the credential (the invite
/// code of redeem), the route template instead, so no secret reaches the log.
fn loggable_path(routes: &[Route], matched: Option<&Matched>, path: &str) -> String {
    match matched {
        Some(m) if routes[m.route].access == auth::Access::Public && !m.params.is_empty() => {
            routes[m.route].path.to_string()
        }
        _ => path.to_string(),
    }
}

async fn dispatch(
    d: &Dispatcher,
    matched: Matched,
    req: Request<Incoming>,
    request_id: &str,
    org: &mut Option<uuid::Uuid>,
    limit_headers: &mut Vec<(&'static str, String)>,
    served: &mut Option<&'static str>,
) -> Result<Reply, (Error, Option<String>)> {
    let (app, route) = (&d.app, &d.routes[matched.route]);
    let (parts, mut body) = req.into_parts();
    let began = d.read_cache.began(&app.store, &parts.method, route.cached);
    let prepared = async {
        let version = version::negotiate(&parts.headers)?;
        *served = Some(version.date);
        // Authenticated (and rate-limited) before the body is read or inflated: an anonymous
        // client cannot make the server read or gunzip anything.
        let caller = auth::authenticate(&app.store, &app.org_keys, &parts.headers, route.access).await?;
        *org = caller.as_ref().map(|c| c.org.id);
        if let (Some(limiter), Some(c)) = (&d.rate_limiter, &caller) {
            let decision = limiter.check_now(c.org.id.as_u128()).await?;
            *limit_headers = limiter.headers(&decision);
            if !decision.allowed {
                let wait = decision.retry_after_secs;
                return Err(Error::new(
                    crate::error::Code::RateLimited,
                    format!("too many requests; retry in {wait} s"),
                ));
            }
        }
        // Operations without a request body ignore whatever body is sent (no 413/415 there).
        let stall = std::time::Duration::from_secs(app.config.body_timeout);
        let body = match (&parts.method, route.body) {
            (&Method::GET | &Method::HEAD | &Method::DELETE, _) => Bytes::new(),
            (_, BodyKind::Json) => {
                request::read_body(&parts.headers, &mut body, app.config.max_body_bytes, true, stall).await?
            }
            (_, BodyKind::Raw) => {
                // The signed URL's token is the credential: checked before the body is read.
                let token = matched.params.iter().find(|(k, _)| k == "token").map_or("", |(_, v)| v.as_str());
                let allowed = crate::service::knowledge::uploads::admit(&app.store, token).await?;
                let limit = usize::try_from(allowed).unwrap_or(usize::MAX).min(app.config.max_upload_bytes);
                request::read_body(&parts.headers, &mut body, limit, false, stall).await?
            }
            (_, BodyKind::Archive) => {
                request::read_body(&parts.headers, &mut body, app.config.max_upload_bytes, false, stall).await?
            }
        };
        let req = Req {
            params: matched.params,
            query: request::parse_query(parts.uri.query()),
            headers: parts.headers,
            body: version.adapt_request(body),
            caller,
            request_id: request_id.to_string(),
            route: route.path,
        };
        Ok::<_, Error>((version, req))
    };
    let (version, req) = match prepared.await {
        Ok(prepared) => prepared,
        Err(e) => {
            request::linger(&mut body).await; // a refused body: dropped unread, see `linger`
            return Err((e, None));
        }
    };
    let kept = began.and_then(|g| Some((g, cache_key(matched.route, &parts.uri, version, &req)?)));
    if let Some(reply) = kept.as_ref().and_then(|(g, key)| d.read_cache.get(key, *g)) {
        return Ok(reply);
    }
    let reply = run_handler(route.handler, app.clone(), req, &parts.method)
        .await
        .map(|reply| version.adapt_response(route.path, reply))
        .map_err(|e| (e, None))?;
    if let Some((began, key)) = kept {
        d.read_cache.put(key, began, app.store.commit_generation(), &reply);
    }
    Ok(reply)
}

/// What the answer to `req` (an authenticated `GET` of route `route`) is kept under.
fn cache_key(route: usize, uri: &hyper::Uri, version: &version::Version, req: &Req) -> Option<read_cache::Key> {
    let caller = req.caller.as_ref()?;
    Some(read_cache::Key {
        route,
        target: uri.path_and_query().map_or(uri.path(), |p| p.as_str()).into(),
        version: version.date,
        org: caller.org.id,
        user: caller.user.as_ref().map(|u| u.id),
    })
}

/// Runs a handler so that its panic becomes an error (a 500, the panic's text its cause) and
/// never takes the server down.
///
/// Reads (`GET`, `HEAD`) run inline in the connection's task, with the panic caught around the
/// future: a task of their own cost an allocation, a trip through the scheduler and a wake-up
/// of the connection per request. Other methods run in a task of their own,
/// so a write whose client goes away mid-request still completes all of its steps (a chat
/// completion stores its reply after its question) instead of stopping between them.
async fn run_handler(handler: route::Handler, app: Arc<App>, req: Req, method: &Method) -> Result<Reply> {
    use futures_util::FutureExt;
    let panicked = |text: String| Err(Error::internal(format!("handler panicked: {text}")));
    if matches!(*method, Method::GET | Method::HEAD) {
        let caught = std::panic::AssertUnwindSafe(handler(app, req)).catch_unwind().await;
        return caught.unwrap_or_else(|p| panicked(panic_message(&*p)));
    }
    tokio::spawn(handler(app, req)).await.unwrap_or_else(|join| panicked(join.to_string()))
}

/// The text of a caught panic's payload (`panic!` with a literal or a formatted message).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_string(),
    }
}
