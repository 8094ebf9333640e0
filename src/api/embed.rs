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
//!   anonymous, so they have limits of their own ([`crate::rate_limit::EmbedLimits`]; docs/channels.md, "The chat
//!   widget and the web chat page"): requests per visitor and per replica, new visitors per replica, and the visitors'
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
use super::{Operation, Serve};
use crate::app::App;
use crate::channels::embed as assets;
use crate::error::{Code, Error, Result};
use crate::http::asset::Asset;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::{error_reply, Reply};
use crate::openapi::derived::SparseId;
use crate::openapi::operations::op;
use crate::rate_limit::RateLimiter;
use crate::service::channel::Channel;
use crate::service::chat::{self, Ask};
use crate::service::embed::{self, Credentials, Visit, MAX_ORIGINS};
use crate::service::history::{self as history_service, Page};
use crate::service::quotas::Pool;
use crate::service::{check_len, users};
use serde_json::{json, Value};

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
    let replica =
        crate::service::replicas::public_by_slug(&app.store, org, req.param("replicaSlug").to_string()).await?;
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

/// The embed keys and the identity secret of a replica (our own operations).
fn embed_key_ops() -> Vec<Operation> {
    vec![
        op("POST", "/v1/replicas/{replicaUUID}/embed-keys", "createEmbedKey", "Integrations", "Create an embed key")
            .body_of::<EmbedKeyBody>()
            .ok_of::<EmbedKeyView>(200)
            .describe(
                "Our own operation. Mints a public key for the chat widget (`GET /embed/widget.js`, included with \
                `data-replica` and `data-key`) and sets the replica's allowed origins (they replace earlier ones; \
                earlier keys keep working). The key can only chat with this replica and read the history of the \
                visitor that uses it (`POST /v1/embed/{replicaUUID}/chat`, `GET /v1/embed/{replicaUUID}/history`); \
                every widget request must come from an allowed origin (CORS). Shown only here (stored hashed); \
                `DELETE …/embed-keys/{embedKey}` revokes it.",
            )
            .serve(Access::Either, handler!(create_key)),
        op(
            "POST",
            "/v1/replicas/{replicaUUID}/embed-identity-secret",
            "createEmbedIdentitySecret",
            "Integrations",
            "Create the identity secret",
        )
        .optional_body_of::<IdentitySecretBody>()
        .ok_of::<IdentitySecretView>(200)
        .describe(
            "Our own operation. No body, or `{}`. Makes the secret with which the site's backend signs its \
            logged-in users' ids for the widget (`X-Embed-Identity` of `POST /v1/embed/{replicaUUID}/chat` and \
            `GET /v1/embed/{replicaUUID}/history`), so that a user keeps their conversation across devices. \
            Shown only in this answer, never again; a new call replaces the earlier secret (identities signed \
            with it are refused from this answer on). The replica's embed keys and allowed origins stay.",
        )
        .serve(Access::Either, handler!(create_identity_secret)),
        op(
            "DELETE",
            "/v1/replicas/{replicaUUID}/embed-identity-secret",
            "deleteEmbedIdentitySecret",
            "Integrations",
            "Delete the identity secret",
        )
        .describe(
            "Our own operation. Turns signed identities off: from this answer on, widget requests carrying \
            `X-Embed-Identity` are refused with 403 `EMBED_IDENTITY_REFUSED` (anonymous visitors keep \
            chatting). 404 when the replica has no identity secret.",
        )
        .serve(Access::Either, handler!(delete_identity_secret)),
        op(
            "DELETE",
            "/v1/replicas/{replicaUUID}/embed-keys/{embedKey}",
            "revokeEmbedKey",
            "Integrations",
            "Revoke an embed key",
        )
        .describe(
            "Our own operation. `embedKey` is the key itself (`rpl_embed_…`; it is public, in the site's HTML, \
            so it is no secret in a path). From this answer on, widget requests carrying it are refused with 403 \
            `EMBED_KEY_REFUSED`; the replica's other keys and its allowed origins stay. 404 when it is not a key of \
            this replica (unknown, already revoked, or another replica's).",
        )
        .serve(Access::Either, handler!(revoke_key)),
    ]
}

/// The widget's and the web page's operations.
fn embed_visitor_ops() -> Vec<Operation> {
    vec![
        op("POST", "/v1/embed/{replicaUUID}/chat", "embedChat", "Integrations", "Ask as a widget or page visitor")
            .body_of::<ChatBody>()
            .headers(embed_headers())
            .ok_of::<EmbedReplyView>(200)
            .extra(&[403, 429, 502])
            .describe(
                "Called by the widget (`X-Embed-Key`; source `embed`; `Origin` must be an allowed origin, else 403 \
                `ORIGIN_NOT_ALLOWED`; a key of another replica, 403 `EMBED_KEY_REFUSED`) and by the web chat page `GET /r/{organizationID}/{replicaSlug}` of a public \
                replica (no key; the server's own origin; source `web`). `X-Embed-Visitor` (8–100 letters, digits, \
                `-`, `_`) names the visitor: the linked-account user `embed:<id>`; or, for a user logged in on the \
                site, `X-Embed-Identity` signed by the site's backend (the widget only; an invalid one, 403 \
                `EMBED_IDENTITY_REFUSED`): the user `embed:user:<userId>`. With `Accept: text/event-stream` \
                the events of `…/chat/completions`. CORS: `Access-Control-Allow-Origin` echoes an allowed origin on \
                every answer past the origin check, errors included (but a 500), so the widget can show the error \
                body's `error`; `OPTIONS` answers the preflight.\n\n\
                Limits of its own, apart from the organization's (our decisions; the operator sets them by flag): \
                requests per visitor of a replica (`--embed-rate-limit-per-visitor`, default 10 a minute) and per \
                replica from all its visitors (`--embed-rate-limit-per-replica`, default 120 a minute), both token \
                buckets with a burst of as many, shared with `GET /v1/embed/{replicaUUID}/history`: beyond, 429 \
                `RATE_LIMITED` with `Retry-After` and `RateLimit-Policy` / `RateLimit` headers (and the CORS \
                header, so the widget can read it). A visitor id seen for the first time is made a user only at its \
                first question, at most `--embed-new-visitors-per-minute` (default 20) per replica a minute \
                (beyond: 429 `RATE_LIMITED`), and only when the visitors may still start a conversation. The \
                conversations visitors start count in a monthly quota of their own per organization \
                (`--embed-conversations-per-month`, default 10000, or the operator's `replicad orgs set-quota ORG \
                --embed-conversations-per-month N`; UTC months): beyond, 429 \
                `EMBED_CONVERSATION_QUOTA_EXCEEDED` before anything is generated. They never count in the \
                organization's own conversation quota, so visitors cannot starve its API use; and the \
                organization's quota (or `--rate-limit-per-key`) does not close its public chats. A conversation \
                under way goes on.",
            )
            .serve(Access::Public, handler!(chat)),
        op("GET", "/v1/embed/{replicaUUID}/history", "embedHistory", "Integrations", "The visitor's conversation")
            .headers(embed_headers())
            .ok_as::<Items<super::history::MessageView>>(200, "EmbedHistory")
            .extra(&[403, 429])
            .describe(
                "The visitor's own history items on the channel (newest 100, oldest first); the credentials and \
                request limits of `POST /v1/embed/{replicaUUID}/chat`. A visitor that never asked has an empty \
                history (reading it makes no user).",
            )
            .serve(Access::Public, handler!(history)),
    ]
}

/// The credentials of the widget and page operations (header parameters).
fn embed_headers() -> Vec<Value> {
    vec![
        json!({ "name": "X-Embed-Key", "in": "header", "required": false, "schema": { "type": "string" },
            "description": "The public embed key (widget). Absent: the web chat page of a public replica." }),
        json!({ "name": "X-Embed-Visitor", "in": "header", "required": false,
            "schema": { "type": "string", "pattern": "^[A-Za-z0-9_-]{8,100}$" },
            "description": "The visitor's id (kept by the widget in localStorage): the linked account `embed:<id>`. \
                Required (400 `INVALID_USER_HEADERS` without it) unless a valid `X-Embed-Identity` is sent, which \
                makes it ignored." }),
        json!({ "name": "X-Embed-Identity", "in": "header", "required": false,
            "schema": {
                "type": "string",
                "pattern": "^[0-9]{1,18}\\.[0-9a-f]{64}\\.[A-Za-z0-9_@.+-]{1,128}$",
            },
            "description": "A logged-in user of the site, signed by the site's backend (widget only, with \
                `X-Embed-Key`): `<expires>.<signature>.<userId>`. `expires`: unix seconds, in the future and at \
                most 31 days ahead; `userId`: 1–128 of `A-Z a-z 0-9 _ @ . + -`; `signature`: the lowercase hex \
                HMAC-SHA256 keyed with the UTF-8 bytes of the replica's whole identity secret (`rpl_idsec_…`, \
                `createEmbedIdentitySecret`) over `{replicaUUID}\\n{userId}\\n{expires}` (the replica's UUID \
                lowercase and hyphenated, `\\n` a newline, `expires` as written in the token). The visitor is \
                then the linked account `embed:user:<userId>`, the same on every device, and `X-Embed-Visitor` \
                is ignored. Malformed, a bad signature, expired, too far ahead, a replica without an identity \
                secret, or sent by the web chat page (no key): 403 `EMBED_IDENTITY_REFUSED`, naming which." }),
    ]
}

/// The document's rows of the widget's operations: its keys, then the visitor's.
pub fn operations() -> Vec<Operation> {
    [embed_key_ops(), embed_visitor_ops()].into_iter().flatten().collect()
}
