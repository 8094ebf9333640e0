//! THE list of operations ([`operations`]): one row per (method, path), kept beside its handler
//! in the file of its resource, giving the access it needs, its handler and its document row;
//! the route table ([`routes`]) and the published document both come from it. Handlers parse →
//! authorize → call a service → map to the wire DTO.

/// A route row's [`Handler`] of an async handler `f(Arc<App>, Req) -> Result<Reply>`.
macro_rules! handler {
    ($f:path) => {
        |app, req| Box::pin($f(app, req))
    };
}

pub mod analytics;
pub mod bundles;
pub mod chat;
pub mod chats;
pub mod conversations;
pub mod docs;
pub mod embed;
pub mod health;
pub mod history;
pub mod integrations;
pub mod invites;
pub mod knowledge_base;
pub mod models;
pub mod query;
pub mod replicas;
pub mod usage;
pub mod users;

use hyper::Method;

use crate::app::App;
use crate::error::Result;
use crate::http::auth::Access;
use crate::http::request::Req;
pub use crate::http::route::{BodyKind, Handler, HandlerFuture, Route};
use crate::openapi::operations::{Op, RAW_MEDIA};

/// One operation: its route row (method, path, access, body kind, handler) and its document
/// row ([`Op`]: prose, parameters, body and answer types), made together by [`Serve::serve`]
/// from the row kept beside its handler, so the route table and the document cannot disagree.
pub struct Operation {
    pub route: Route,
    pub doc: Op,
}

impl Operation {
    /// The read cache may keep its answers ([`Route::cached`]).
    pub fn cached(mut self) -> Operation {
        self.route.cached = true;
        self
    }
}

/// Makes an operation of a document row ([`Op`]):
/// `op(…).ok_of::<T>(200).serve(Access::Org, handler!(f))`.
pub trait Serve {
    /// The operation served with `access` by `handler`. Its body is raw bytes when the row
    /// says so ([`Op::raw_body`]), JSON otherwise.
    ///
    /// # Panics
    /// When the row's method is not an HTTP method (the unit tests build every row).
    fn serve(self, access: Access, handler: Handler) -> Operation;
}

impl Serve for Op {
    fn serve(mut self, access: Access, handler: Handler) -> Operation {
        self.access = access;
        let method = Method::from_bytes(self.method.as_bytes()).expect("an HTTP method");
        let body = match (self.archive_body, self.body_media) {
            (true, _) => BodyKind::Archive,
            (false, RAW_MEDIA) => BodyKind::Raw,
            _ => BodyKind::Json,
        };
        let route = Route { method, path: self.path, access, body, cached: false, handler };
        Operation { route, doc: self }
    }
}

/// Every operation the server answers, in the order of the document's tags; each file keeps
/// the rows of its handlers (`operations()`).
pub fn operations() -> Vec<Operation> {
    let files = [
        docs::operations(),
        invites::operations(),
        models::operations(),
        replicas::operations(),
        bundles::operations(),
        knowledge_base::operations(),
        chat::operations(),
        history::operations(),
        users::operations(),
        integrations::operations(),
        embed::operations(),
        health::operations(),
        chats::operations(),
        conversations::operations(),
        usage::operations(),
        analytics::operations(),
    ];
    files.into_iter().flatten().collect()
}

/// The route table: the route row of every operation ([`operations`]).
pub fn routes() -> Vec<Route> {
    operations().into_iter().map(|o| o.route).collect()
}

/// The document's row of every operation ([`operations`]); the published document is
/// [`docs::openapi`].
pub fn document_rows() -> Vec<Op> {
    operations().into_iter().map(|o| o.doc).collect()
}

/// Every row the server routes: the operations ([`routes`]), the docs page
/// ([`docs::pages`]), the chat widget and web page ([`embed::pages`]) and `/metrics`
/// (`ops::metrics::route`). `crate::serve` compiles it once (`http::Dispatcher`).
pub fn served() -> Vec<Route> {
    routes().into_iter().chain(docs::pages()).chain(embed::pages()).chain([crate::ops::metrics::route()]).collect()
}

/// The channel the matched route's path ends in (`…/chat/history/embed`,
/// `…/integrations/messengerA`), for a handler that serves a row per channel. Errors: 500 when
/// the route names none (a row made from the channels always does).
pub fn route_channel(req: &Req) -> Result<crate::service::channel::Channel> {
    let last = req.route.rsplit('/').next().unwrap_or_default();
    crate::service::channel::Channel::parse(last)
        .ok_or_else(|| crate::error::Error::internal(format!("route {} names no channel", req.route)))
}

/// The replica of the path (`replicaUUID`) if the caller may see it; 404 otherwise.
pub async fn path_replica(app: &App, req: &Req) -> Result<std::sync::Arc<crate::store::records::Replica>> {
    let id = req.uuid_param("replicaUUID")?;
    let caller = req.caller()?;
    crate::service::replicas::get(&app.store, caller.org.id, id, caller.user.as_ref()).await
}

/// A page of a list on the wire, the one envelope every paged list answers: `{items, total}`,
/// `items` the page (as `service::page_of` cuts it) and `total` the items of the whole list;
/// [`Reply::ok`](crate::http::response::Reply::ok) adds `success`.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "PageOf{T}")]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
}

/// A store timestamp (ms since the Unix epoch) on the wire: its RFC 3339 text
/// ([`rfc3339`](crate::service::rfc3339), UTC, milliseconds), the `date-time` format in the
/// document.
#[derive(serde::Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(transparent)]
pub struct Timestamp(String);

impl Timestamp {
    /// The time `ms`.
    pub fn of(ms: i64) -> Timestamp {
        Timestamp(crate::service::rfc3339(ms))
    }
}

impl schemars::JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "date-time" })
    }
}

/// A list that is not paged on the wire: `{items}` ([`Reply::ok`](crate::http::response::Reply::ok) adds `success`).
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "ItemsOf{T}")]
pub struct Items<T> {
    pub items: Vec<T>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reads_are_marked_cached_and_raw_is_a_body_kind() {
        let all = routes();
        assert!(all.iter().filter(|r| r.cached).all(|r| r.method == Method::GET));
        let per_channel = crate::service::channel::Channel::ALL.len(); // each channel's history list
        assert_eq!(all.iter().filter(|r| r.cached).count(), 5 + per_channel);
        let upload = all.iter().find(|r| r.path == "/v1/knowledge-base/uploads/{token}").unwrap();
        assert_eq!((upload.body, upload.cached), (BodyKind::Raw, false));
        assert!(all.iter().find(|r| r.path == "/v1/replicas" && r.method == Method::GET).unwrap().cached);
    }

    /// The per-channel rows of the route table agree with `service::channel`: a history list
    /// per channel, a connect and a disconnect per bot, and no such row for anything else (the
    /// OpenAPI rows follow the route table, tested in `openapi`).
    #[test]
    fn the_channel_routes_are_the_channels() {
        use crate::service::channel::{Bot, Channel};
        let all = routes();
        let named = |method: Method, prefix: &str| -> Vec<&str> {
            let rows = all.iter().filter(|r| r.method == method);
            let mut names: Vec<&str> = rows.filter_map(|r| r.path.strip_prefix(prefix)).collect();
            names.sort_unstable();
            names
        };
        let sorted = |mut v: Vec<&'static str>| {
            v.sort_unstable();
            v
        };
        let channels = sorted(Channel::ALL.map(Channel::name).to_vec());
        let bots = sorted(Bot::ALL.map(Bot::name).to_vec());
        assert_eq!(named(Method::GET, "/v1/replicas/{replicaUUID}/chat/history/"), channels);
        assert_eq!(named(Method::POST, "/v1/replicas/{replicaUUID}/integrations/"), bots);
        assert_eq!(named(Method::DELETE, "/v1/replicas/{replicaUUID}/integrations/"), bots);
    }
}
