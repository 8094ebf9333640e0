//! The embeddable chat widget and the web chat page (see `service::embed` for the rules):
//!
//! - `POST /v1/replicas/{replicaUUID}/embed-keys` (our own operation): a public embed key and
//!   the replica's allowed origins.
//! - `POST /v1/embed/{replicaUUID}/chat` and `GET /v1/embed/{replicaUUID}/history`: what the
//!   widget (key in `X-Embed-Key`) and the page (no key) call; visitor id in
//!   `X-Embed-Visitor`. CORS: `Access-Control-Allow-Origin` is the caller's origin when allowed;
//!   `OPTIONS` on both paths answers the preflight.
//! - `GET /embed/widget.js` (the script a site includes) and `GET /r/{organizationID}/{replicaSlug}`
//!   (the web chat page of a public replica).

use std::sync::Arc;

use hyper::header::HOST;
use hyper::Method;
use serde::Deserialize;
use serde_json::json;

use super::chat::encode;
use super::history::{source_view, view};
use super::path_replica;
use super::{BodyKind, Route};
use crate::app::App;
use crate::channels::embed as assets;
use crate::error::{Code, Error, Result};
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::chat::{self, Ask};
use crate::service::embed::{self, Credentials, Visit};
use crate::service::history::{self as history_service, Page};
use crate::service::{check_len, users};

const ALLOW_HEADERS: &str = "content-type, accept, x-embed-key, x-embed-visitor";

/// Body of `POST …/embed-keys`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmbedKeyBody {
    #[serde(rename = "allowedOrigins")]
    allowed_origins: Vec<String>,
}

/// # `POST /v1/replicas/{replicaUUID}/embed-keys`
/// Body `{allowedOrigins: ["https://example.com", …]}` (1–50 origins; they replace the
/// replica's allowed origins). 200 `{success, key, replicaUUID, allowedOrigins}`: the key is
/// shown only here (stored hashed); earlier keys keep working. Errors: 400, 404.
pub async fn create_key(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: EmbedKeyBody = req.json()?;
    let (key, origins) = embed::create_key(&app.store, replica.org, replica.id, &body.allowed_origins).await?;
    Ok(Reply::ok(&json!({ "key": key, "replicaUUID": replica.id, "allowedOrigins": origins })))
}

fn header<'a>(req: &'a Req, name: &str) -> Option<&'a str> {
    req.headers.get(name).and_then(|v| v.to_str().ok())
}

fn own_origin(app: &App, req: &Req) -> String {
    match &app.config.public_url {
        Some(u) => embed::normalize_origin(u).unwrap_or_else(|_| u.trim_end_matches('/').to_string()),
        None => {
            let scheme = if app.config.tls_cert.is_some() { "https" } else { "http" };
            format!("{scheme}://{}", header(req, HOST.as_str()).unwrap_or("localhost"))
        }
    }
}

/// The visit of a widget or page request and its visitor's user id.
async fn visit(app: &App, req: &Req) -> Result<(Visit, uuid::Uuid)> {
    let replica = req.uuid_param("replicaUUID")?;
    let credentials = Credentials {
        key: header(req, "x-embed-key").map(str::to_string),
        origin: header(req, "origin").map(str::to_string),
        own_origin: own_origin(app, req),
    };
    let visit = embed::authorize(&app.store, replica, credentials).await?;
    let visitor = embed::check_visitor(header(req, "x-embed-visitor"))?;
    let user = users::linked(&app.store, visit.replica.org, "embed", &visitor).await?;
    Ok((visit, user.id))
}

fn with_cors(reply: Reply, origin: Option<&str>) -> Reply {
    match origin {
        Some(o) => reply.with_header("access-control-allow-origin", o).with_header("vary", "Origin"),
        None => reply,
    }
}

#[derive(Deserialize)]
struct ChatBody {
    content: String,
}

/// # `POST /v1/embed/{replicaUUID}/chat`
/// Body `{content}`. Asks the replica as the visitor (`embed` source with a key, `web` on the
/// page) and stores the exchange. With `Accept: text/event-stream` the events of
/// `…/chat/completions`; else `{success, content, sources, id}`. Errors: 400, 403
/// `EMBED_KEY_REFUSED` / `ORIGIN_NOT_ALLOWED`, 404, 502.
pub async fn chat(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: ChatBody = req.json()?;
    check_len("content", &body.content, 1, 10_000)?;
    let (visit, user) = visit(&app, &req).await?;
    let cx = super::chat::context(&app);
    let ask = Ask { content: body.content, source: visit.source.to_string(), ..Ask::default() };
    let streaming = header(&req, "accept").is_some_and(|a| a.contains("text/event-stream"));
    let reply = if streaming {
        let started = chat::stream(&cx, &visit.replica, user, ask).await?;
        let (request_id, expose) = (req.request_id.clone(), app.config.expose_internal_errors);
        Reply::event_stream(started.events, move |ev| encode(ev, &request_id, expose))
    } else {
        let c = chat::complete(&cx, &visit.replica, user, ask).await?;
        let sources: Vec<_> = c.sources.iter().map(source_view).collect();
        Reply::ok(&json!({ "content": c.content, "sources": sources, "id": c.message_id }))
    };
    Ok(with_cors(reply, visit.cors_origin.as_deref()))
}

/// # `GET /v1/embed/{replicaUUID}/history`
/// The visitor's own conversation on this channel, `{success, items}` (chat history items,
/// oldest first, the newest 100). Errors: 400, 403 `EMBED_KEY_REFUSED` / `ORIGIN_NOT_ALLOWED`, 404.
pub async fn history(app: Arc<App>, req: Req) -> Result<Reply> {
    let (visit, user) = visit(&app, &req).await?;
    let page = Page { channel: Some(visit.source.to_string()), limit: 100, before_id: None };
    let items = history_service::list(&app.store, visit.replica.id, user, page).await?;
    let items: Vec<_> = items.iter().map(view).collect();
    Ok(with_cors(Reply::ok(&json!({ "items": items })), visit.cors_origin.as_deref()))
}

/// `OPTIONS` of the widget operations: the CORS preflight. 204 with the allowed methods and
/// headers when the origin is allowed; 403 `ORIGIN_NOT_ALLOWED` otherwise.
async fn preflight(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = req.uuid_param("replicaUUID")?;
    let origin = header(&req, "origin")
        .map(str::to_string)
        .ok_or_else(|| Error::new(Code::OriginNotAllowed, "a CORS preflight carries an Origin header"))?;
    if !embed::origin_allowed(&app.store, replica, origin.clone()).await? {
        return Err(Error::new(Code::OriginNotAllowed, "this page's origin may not use this replica's chat"));
    }
    let reply = Reply::no_content()
        .with_header("access-control-allow-methods", "GET, POST, OPTIONS")
        .with_header("access-control-allow-headers", ALLOW_HEADERS)
        .with_header("access-control-max-age", "600");
    Ok(with_cors(reply, Some(&origin)))
}

/// # `GET /embed/widget.js`
async fn widget(_app: Arc<App>, _req: Req) -> Result<Reply> {
    Ok(Reply::raw(200, bytes::Bytes::from_static(assets::WIDGET_JS.as_bytes()), "text/javascript; charset=utf-8")
        .with_header("cache-control", "public, max-age=300")
        .with_header("access-control-allow-origin", "*")
        .with_header("x-content-type-options", "nosniff"))
}

/// # `GET /r/{organizationID}/{replicaSlug}`
/// The web chat page of a public replica (404 for private or missing ones).
async fn page(app: Arc<App>, req: Req) -> Result<Reply> {
    let org = req.uuid_param("organizationID")?;
    let replica = embed::public_by_slug(&app.store, org, req.param("replicaSlug").to_string()).await?;
    let html = assets::page(&replica);
    Ok(Reply::raw(200, html.into(), "text/html; charset=utf-8")
        .with_header("content-security-policy", assets::PAGE_CSP)
        .with_header("x-content-type-options", "nosniff")
        .with_header("referrer-policy", "no-referrer"))
}

fn route(method: Method, path: &'static str, handler: super::Handler) -> Route {
    Route { method, path, access: Access::Public, body: BodyKind::Json, handler }
}

/// The routes that are not API operations (assets, the page, CORS preflights).
pub fn pages() -> Vec<Route> {
    vec![
        route(Method::GET, "/embed/widget.js", |a, r| Box::pin(widget(a, r))),
        route(Method::GET, "/r/{organizationID}/{replicaSlug}", |a, r| Box::pin(page(a, r))),
        route(Method::OPTIONS, "/v1/embed/{replicaUUID}/chat", |a, r| Box::pin(preflight(a, r))),
        route(Method::OPTIONS, "/v1/embed/{replicaUUID}/history", |a, r| Box::pin(preflight(a, r))),
    ]
}
