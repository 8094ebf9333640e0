//! The embeddable chat widget and the web chat page (see `service::embed` for the rules):
//!
//! - `POST /v1/replicas/{replicaUUID}/embed-keys` (our own operation): a public embed key and
//!   the replica's allowed origins; `DELETE /v1/replicas/{replicaUUID}/embed-keys/{embedKey}`
//!   revokes one.
//! - `POST /v1/replicas/{replicaUUID}/embed-identity-secret` (our own operation): a new secret
//!   the site's backend signs its users' ids with (shown once; it replaces the earlier one);
//!   `DELETE` on the same path turns signed identities off.
//! - `POST /v1/embed/{replicaUUID}/chat` and `GET /v1/embed/{replicaUUID}/history`: what the
//!   widget (key in `X-Embed-Key`) and the page (no key) call; visitor id in
//!   `X-Embed-Visitor`, or, for a site's logged-in user, a signed `X-Embed-Identity` (the widget
//!   only; `service::embed::verify_identity`). CORS: `Access-Control-Allow-Origin` is the
//!   caller's origin when allowed, on every answer past the origin check (errors included, but a
//!   500, so the widget can show why); `OPTIONS` on both paths answers the preflight. Both are
//!   anonymous, so they have limits of their own ([`crate::rate_limit::EmbedLimits`]; README "Channels: the chat
//!   widget"): requests per visitor and per replica, new visitors per replica, and the visitors'
//!   own monthly conversations (`service::quotas::Pool::Visitors`), none of which touch the
//!   organization's.
//! - `GET /embed/widget.js` (the script a site includes) and `GET /r/{organizationID}/{replicaSlug}`
//!   (the web chat page of a public replica).

use std::sync::Arc;

use hyper::header::HOST;
use hyper::Method;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::chat::encode;
use super::history::{source_view, view, SourceView};
use super::path_replica;
use super::Items;
use super::{BodyKind, Route};
use crate::app::App;
use crate::channels::embed as assets;
use crate::error::{Code, Error, Result};
use crate::http::asset::Asset;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::{error_reply, Reply};
use crate::openapi::derived::{Derived, SparseId};
use crate::rate_limit::RateLimiter;
use crate::service::channel::Channel;
use crate::service::chat::{self, Ask};
use crate::service::embed::{self, Credentials, Visit, MAX_ORIGINS};
use crate::service::history::{self as history_service, Page};
use crate::service::quotas::Pool;
use crate::service::{check_len, users};

const ALLOW_HEADERS: &str = "content-type, accept, x-embed-key, x-embed-visitor, x-embed-identity";

/// Body of `POST …/embed-keys`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "EmbedKeyCreate")]
struct EmbedKeyBody {
    #[serde(rename = "allowedOrigins")]
    #[schemars(length(min = 1, max = MAX_ORIGINS), transform = origin_items)]
    allowed_origins: Vec<String>,
}

/// What an item of `allowedOrigins` is, in the document.
fn origin_items(schema: &mut schemars::Schema) {
    if let Some(items) = schema.get_mut("items") {
        items["description"] = "An origin: scheme://host[:port].".into();
    }
}

/// # `DELETE /v1/replicas/{replicaUUID}/embed-keys/{embedKey}`
/// Revokes the embed key `embedKey` (the key itself, `rpl_embed_…`: it is public, in the site's
/// HTML): requests carrying it are refused from this answer on (403 `EMBED_KEY_REFUSED`). The
/// replica's other keys and allowed origins stay. 200 `{success}`. Errors: 404 (no such
/// replica, or not a key of it).
pub async fn revoke_key(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    embed::revoke_key(&app.store, replica.id, req.param("embedKey")).await?;
    Ok(Reply::done())
}

/// A new embed key on the wire (the `EmbedKeyCreated` schema): `{key, replicaUUID,
/// allowedOrigins}`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "EmbedKeyCreated")]
pub struct EmbedKeyView {
    /// The public embed key (`data-key` of the widget).
    pub key: String,
    #[serde(rename = "replicaUUID")]
    pub replica_uuid: Uuid,
    pub allowed_origins: Vec<String>,
}

/// # `POST /v1/replicas/{replicaUUID}/embed-keys`
/// Body `{allowedOrigins: ["https://example.com", …]}` (1–50 origins; they replace the
/// replica's allowed origins). 200 `{success, key, replicaUUID, allowedOrigins}`: the key is
/// shown only here (stored hashed); earlier keys keep working. Errors: 400, 404.
pub async fn create_key(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: EmbedKeyBody = req.json()?;
    let (key, origins) = embed::create_key(&app.store, replica.org, replica.id, &body.allowed_origins).await?;
    Ok(Reply::ok(&EmbedKeyView { key, replica_uuid: replica.id, allowed_origins: origins }))
}

/// Body of `POST …/embed-identity-secret`: none, or `{}`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "EmbedIdentitySecretCreate")]
struct IdentitySecretBody {}

/// A new identity secret on the wire (the `EmbedIdentitySecretCreated` schema): `{replicaUUID,
/// identitySecret}`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "EmbedIdentitySecretCreated")]
pub struct IdentitySecretView {
    #[serde(rename = "replicaUUID")]
    pub replica_uuid: Uuid,
    /// The secret the site's backend signs `X-Embed-Identity` with (shown only here).
    #[schemars(regex(pattern = r"^rpl_idsec_[0-9a-f]{64}$"))]
    pub identity_secret: String,
}

/// # `POST /v1/replicas/{replicaUUID}/embed-identity-secret`
/// No body, or `{}`. Makes the replica's identity secret, replacing an earlier one (identities
/// signed with that are refused from this answer on). 200 `{success, replicaUUID,
/// identitySecret}`: the secret (`rpl_idsec_<64 hex>`) is shown only here. Errors: 400, 404.
pub async fn create_identity_secret(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    if !req.body.is_empty() {
        req.json::<IdentitySecretBody>()?;
    }
    let secret = embed::create_identity_secret(&app.store, &app.secrets, replica.org, replica.id).await?;
    Ok(Reply::ok(&IdentitySecretView { replica_uuid: replica.id, identity_secret: secret }))
}

/// # `DELETE /v1/replicas/{replicaUUID}/embed-identity-secret`
/// Forgets the replica's identity secret: signed identities are refused from this answer on
/// (403 `EMBED_IDENTITY_REFUSED`). 200 `{success}`. Errors: 404 (no such replica, or it has no
/// identity secret).
pub async fn delete_identity_secret(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    embed::delete_identity_secret(&app.store, replica.id).await?;
    Ok(Reply::done())
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

/// Takes a token of `key`'s bucket in `limiter`; when there is none, the 429 `RATE_LIMITED`
/// answer (spec §7 body, `Retry-After` and the `RateLimit` headers) for `request_id`. Errors:
/// the shared store's, when the buckets are there.
async fn take(limiter: &RateLimiter, key: u128, what: &str, request_id: &str) -> Result<Option<Reply>> {
    let d = limiter.check_now(key).await?;
    if d.allowed {
        return Ok(None);
    }
    let message = format!("too many requests {what}; retry in {} s", d.retry_after_secs);
    let reply = error_reply(&Error::new(Code::RateLimited, message), request_id, false);
    Ok(Some(limiter.headers(&d).into_iter().fold(reply, |r, (name, value)| r.with_header(name, &value))))
}

/// A widget or page request past its credentials and its rate limits.
struct Admitted {
    visit: Visit,
    /// The visitor's `embed` linked-account id: the anonymous visitor id, or `user:<id>` for a
    /// signed site user ([`embed::visitor_account`]).
    visitor: String,
}

/// Checks the key and the origin of a widget or page request. Its errors carry no CORS header:
/// a page whose origin is refused may not read why.
async fn visit(app: &App, req: &Req) -> Result<Visit> {
    let credentials = Credentials {
        key: header(req, "x-embed-key").map(str::to_string),
        origin: header(req, "origin").map(str::to_string),
        own_origin: own_origin(app, req),
    };
    embed::authorize(&app.store, req.uuid_param("replicaUUID")?, credentials).await
}

/// Who the visitor of `visit` is (a signed site user or an anonymous visitor id), then the rate
/// limits of that visitor and of its replica. `Ok(Err(reply))`: the 429 to answer as it is.
async fn admit(app: &App, req: &Req, visit: Visit) -> Result<Result<Admitted, Reply>> {
    let identity = header(req, "x-embed-identity");
    let visitor = embed::visitor_account(&app.secrets, &visit, identity, header(req, "x-embed-visitor"))?;
    let (limits, id, replica) = (&app.embed_limits, &req.request_id, visit.replica.id);
    let mut refused = take(&limits.per_visitor, embed::visitor_key(replica, &visitor), "from this visitor", id).await?;
    if refused.is_none() {
        refused = take(&limits.per_replica, replica.as_u128(), "to this replica's public chat", id).await?;
    }
    Ok(match refused {
        Some(reply) => Err(reply),
        None => Ok(Admitted { visit, visitor }),
    })
}

/// Whose monthly conversations the visitors' questions count in.
fn visitors(app: &App) -> Pool {
    Pool::Visitors { default: app.config.embed_conversations_per_month }
}

/// The user of the admitted visitor, made at its first question unless the replica took in
/// as many new visitors as it may this minute (429 answer in `Err`) or the visitors' monthly
/// quota is used up (429 error): refused visitors leave no user behind.
async fn visitor_user(app: &App, req: &Req, a: &Admitted) -> Result<Result<Uuid, Reply>> {
    let org = a.visit.replica.org;
    if let Some(user) = users::find_linked(&app.store, org, Channel::Embed.name(), &a.visitor).await? {
        return Ok(Ok(user.id));
    }
    let replica = a.visit.replica.id.as_u128();
    if let Some(reply) = take(&app.embed_limits.new_visitors, replica, "from new visitors", &req.request_id).await? {
        return Ok(Err(reply));
    }
    embed::check_new_visitor(&app.store, org, visitors(app)).await?;
    Ok(Ok(users::linked(&app.store, org, Channel::Embed.name(), &a.visitor).await?.id))
}

fn with_cors(reply: Reply, origin: Option<&str>) -> Reply {
    match origin {
        Some(o) => reply.with_header("access-control-allow-origin", o).with_header("vary", "Origin"),
        None => reply,
    }
}

/// The answer of the widget's chat without streaming (the `EmbedChatReply` schema): `{content,
/// sources, id}`; `id`, the history id of the reply, is `null` when none was stored (the
/// schema says so).
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "EmbedChatReply")]
pub struct EmbedReplyView<'a> {
    pub content: &'a str,
    pub sources: Vec<SourceView<'a>>,
    /// The chat-history id of the reply.
    #[schemars(with = "Option<SparseId>")]
    pub id: Option<u64>,
}

/// The most characters of a visitor's message.
const MAX_CONTENT_CHARS: usize = 10_000;

#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "EmbedChatRequest")]
struct ChatBody {
    #[schemars(length(min = 1, max = MAX_CONTENT_CHARS))]
    content: String,
}

/// The schemas of this file's bodies and answers.
pub fn schemas(d: &mut Derived) {
    d.request::<EmbedKeyBody>().request::<IdentitySecretBody>().request::<ChatBody>();
    d.answer::<EmbedKeyView>().answer::<IdentitySecretView>().answer::<EmbedReplyView>();
    d.answer_as::<Items<super::history::MessageView>>("EmbedHistory");
}

/// # `POST /v1/embed/{replicaUUID}/chat`
/// Body `{content}`. Asks the replica as the visitor (`embed` source with a key, `web` on the
/// page) and stores the exchange. With `Accept: text/event-stream` the events of
/// `…/chat/completions`; else `{success, content, sources, id}`. Errors: 400, 403
/// `EMBED_KEY_REFUSED` / `ORIGIN_NOT_ALLOWED` / `EMBED_IDENTITY_REFUSED`, 404, 502.
pub async fn chat(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: ChatBody = req.json()?;
    check_len("content", &body.content, 1, MAX_CONTENT_CHARS)?;
    let visit = visit(&app, &req).await?;
    let cors = visit.cors_origin.clone();
    readable(&app, &req, cors, answer(&app, &req, visit, body.content).await)
}

/// The answer to a request whose origin passed, with the CORS header of that origin whether it
/// succeeded or not (a refused identity, a 429, a 502), so that the widget can show the error
/// body's text; an internal error is left to the server's own handling (logged, its message
/// generic).
fn readable(app: &App, req: &Req, cors: Option<String>, result: Result<Reply>) -> Result<Reply> {
    let reply = match result {
        Ok(reply) => reply,
        Err(e) if e.code == Code::Internal => return Err(e),
        Err(e) => error_reply(&e, &req.request_id, app.config.expose_internal_errors),
    };
    Ok(with_cors(reply, cors.as_deref()))
}

/// Asks the replica `content` as the visitor of `visit`.
async fn answer(app: &Arc<App>, req: &Req, visit: Visit, content: String) -> Result<Reply> {
    let admitted = match admit(app, req, visit).await? {
        Ok(a) => a,
        Err(limited) => return Ok(limited),
    };
    let user = match visitor_user(app, req, &admitted).await? {
        Ok(user) => user,
        Err(limited) => return Ok(limited),
    };
    let visit = admitted.visit;
    let cx = app.chat_context();
    let source = visit.source.to_string();
    let ask = Ask { content, source, pool: visitors(app), ..Ask::default() };
    let streaming = header(req, "accept").is_some_and(|a| a.contains("text/event-stream"));
    Ok(if streaming {
        let started = chat::stream(&cx, &visit.replica, user, ask).await?;
        let (request_id, expose) = (req.request_id.clone(), app.config.expose_internal_errors);
        Reply::event_stream(started.events, move |ev| encode(ev, &request_id, expose))
    } else {
        let c = chat::complete(&cx, &visit.replica, user, ask).await?;
        let sources = c.sources.iter().map(source_view).collect();
        Reply::ok(&EmbedReplyView { content: &c.content, sources, id: c.message_id })
    })
}

/// # `GET /v1/embed/{replicaUUID}/history`
/// The visitor's own conversation on this channel, `{success, items}` (chat history items,
/// oldest first, the newest 100). Errors: 400, 403 `EMBED_KEY_REFUSED` / `ORIGIN_NOT_ALLOWED` /
/// `EMBED_IDENTITY_REFUSED`, 404.
pub async fn history(app: Arc<App>, req: Req) -> Result<Reply> {
    let visit = visit(&app, &req).await?;
    let cors = visit.cors_origin.clone();
    readable(&app, &req, cors, visitor_history(&app, &req, visit).await)
}

/// The own conversation of the visitor of `visit` on its channel (the newest 100 items).
async fn visitor_history(app: &App, req: &Req, visit: Visit) -> Result<Reply> {
    let Admitted { visit, visitor } = match admit(app, req, visit).await? {
        Ok(a) => a,
        Err(limited) => return Ok(limited),
    };
    // A visitor who never asked has no history, and is not made a user by reading it.
    let items = match users::find_linked(&app.store, visit.replica.org, Channel::Embed.name(), &visitor).await? {
        Some(user) => {
            let page = Page { channel: Some(visit.source.to_string()), limit: 100, before_id: None };
            history_service::list(&app.store, visit.replica.id, user.id, page).await?
        }
        None => Vec::new(),
    };
    Ok(Reply::ok(&Items { items: items.iter().map(view).collect() }))
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
/// The widget script (`channels::embed::WIDGET_JS`), gzipped when the client accepts it; any
/// site may load it (`Access-Control-Allow-Origin: *`): what it may do is the embed key's.
async fn widget(_app: Arc<App>, req: Req) -> Result<Reply> {
    static WIDGET: Asset = Asset::new(assets::WIDGET_JS.as_bytes(), "text/javascript; charset=utf-8");
    Ok(WIDGET
        .reply(&req)
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
        .with_header("content-security-policy", &assets::page_csp(assets::image_origin(&replica).as_deref()))
        .with_header("x-content-type-options", "nosniff")
        .with_header("referrer-policy", "no-referrer"))
}

fn route(method: Method, path: &'static str, handler: super::Handler) -> Route {
    Route { method, path, access: Access::Public, body: BodyKind::Json, cached: false, handler }
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
