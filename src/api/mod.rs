//! THE list of operations: one row per (method, path), with the access it needs and its
//! handler. Handlers parse → authorize → call a service → map to the wire DTO.

pub mod analytics;
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
pub mod replicas;
pub mod usage;
pub mod users;

use hyper::Method;

use crate::app::App;
use crate::error::Result;
use crate::http::auth::Access;
use crate::http::request::Req;
pub use crate::http::route::{BodyKind, Handler, HandlerFuture, Route};

/// What a row of [`routes`] may say after its access: `Raw` (the body, else JSON) and
/// `Cached` ([`Route::cached`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Raw,
    Cached,
}

impl Mark {
    fn body(marks: &[Mark]) -> BodyKind {
        if marks.contains(&Mark::Raw) {
            BodyKind::Raw
        } else {
            BodyKind::Json
        }
    }
}

macro_rules! routes {
    ($($method:ident $path:literal $access:ident $($mark:ident)* => $handler:path;)*) => {
        vec![$(Route {
            method: Method::$method,
            path: $path,
            access: Access::$access,
            body: Mark::body(&[$(Mark::$mark),*]),
            cached: [$(Mark::$mark),*].contains(&Mark::Cached),
            handler: |app, req| Box::pin($handler(app, req)),
        },)*]
    };
}

/// Every operation the server answers.
pub fn routes() -> Vec<Route> {
    routes! {
        GET "/v1/openapi.json" Public => docs::openapi;
        GET "/healthz" Public => health::healthz;
        GET "/readyz" Public => health::readyz;
        GET "/v1/healthcheck" Public => health::healthcheck;
        POST "/v1/api-keys/invites/{code}/redeem" Public => invites::redeem;
        GET "/v1/replicas/models" Either => models::list;
        GET "/v1/replicas" Either Cached => replicas::list;
        POST "/v1/replicas" Org => replicas::create;
        GET "/v1/replicas/{replicaUUID}" Org Cached => replicas::read;
        PUT "/v1/replicas/{replicaUUID}" Org => replicas::update;
        DELETE "/v1/replicas/{replicaUUID}" Org => replicas::delete;
        GET "/v1/replicas/{replicaUUID}/knowledge-base" Either => knowledge_base::list;
        POST "/v1/replicas/{replicaUUID}/knowledge-base" Either => knowledge_base::create;
        GET "/v1/replicas/{replicaUUID}/knowledge-base/{knowledgeBaseID}" Either Cached => knowledge_base::read;
        PATCH "/v1/replicas/{replicaUUID}/knowledge-base/{knowledgeBaseID}" Either => knowledge_base::patch;
        DELETE "/v1/replicas/{replicaUUID}/knowledge-base/{knowledgeBaseID}" Either => knowledge_base::delete;
        GET "/v1/knowledge-base" Either => knowledge_base::list;
        GET "/v1/knowledge-base/{knowledgeBaseID}" Either Cached => knowledge_base::read;
        PATCH "/v1/knowledge-base/{knowledgeBaseID}" Either => knowledge_base::patch;
        DELETE "/v1/knowledge-base/{knowledgeBaseID}" Either => knowledge_base::delete;
        GET "/v1/knowledge-base/file-types" Either => knowledge_base::file_types;
        PUT "/v1/knowledge-base/uploads/{token}" Public Raw => knowledge_base::upload;
        POST "/v1/replicas/{replicaUUID}/chat/completions" Either => chat::complete;
        POST "/v1/replicas/{replicaUUID}/chat/completions/messengerA" Either => chat::complete_messenger_a;
        POST "/v1/replicas/{replicaUUID}/chat/completions/test" Org => chat::complete_test;
        POST "/v1/experimental/replicas/{replicaUUID}/chat/completions" User => chat::complete_experimental;
        GET "/v1/replicas/{replicaUUID}/chat/history" Either Cached => history::list_all;
        POST "/v1/replicas/{replicaUUID}/chat/history" Either => history::save;
        GET "/v1/replicas/{replicaUUID}/chat/history/web" Either Cached => history::list_web;
        GET "/v1/replicas/{replicaUUID}/chat/history/embed" Either Cached => history::list_embed;
        GET "/v1/replicas/{replicaUUID}/chat/history/messengerA" Either Cached => history::list_messenger_a;
        POST "/v1/replicas/{replicaUUID}/chat/history/messengerA" Either => history::save_messenger_a;
        GET "/v1/replicas/{replicaUUID}/chat/history/messengerB" Either Cached => history::list_messenger_b;
        GET "/v1/replicas/{replicaUUID}/chats" Either => chats::list;
        GET "/v1/replicas/{replicaUUID}/chats/{chatUUID}" Either => chats::read;
        GET "/v1/replicas/{replicaUUID}/chats/{chatUUID}/messages" Either => chats::messages;
        GET "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations" Either => conversations::list;
        GET "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}" Either => conversations::read;
        GET "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}/messages" Either => conversations::messages;
        POST "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}/insights" Either => conversations::recompute;
        GET "/v1/replicas/{replicaUUID}/conversations" Either => conversations::list;
        GET "/v1/replicas/{replicaUUID}/conversations/{conversationUUID}" Either => conversations::read;
        PATCH "/v1/replicas/{replicaUUID}/conversations/{conversationUUID}" Either => conversations::patch;
        GET "/v1/replicas/{replicaUUID}/conversations/{conversationUUID}/mentions" Either => conversations::mentions;
        GET "/v1/replicas/{replicaUUID}/conversations/{conversationUUID}/messages" Either => conversations::messages;
        GET "/v1/replicas/{replicaUUID}/analytics/conversations/historical" Either => analytics::historical;
        GET "/v1/replicas/{replicaUUID}/analytics/conversations/sources" Either => analytics::sources;
        GET "/v1/users/me/usage" User => usage::me;
        POST "/v1/replicas/{replicaUUID}/integrations/messengerA" Either => integrations::connect_messenger_a;
        DELETE "/v1/replicas/{replicaUUID}/integrations/messengerA" Either => integrations::disconnect_messenger_a;
        POST "/v1/replicas/{replicaUUID}/integrations/messengerB" Either => integrations::connect_messenger_b;
        DELETE "/v1/replicas/{replicaUUID}/integrations/messengerB" Either => integrations::disconnect_messenger_b;
        POST "/v1/replicas/{replicaUUID}/embed-keys" Either => embed::create_key;
        DELETE "/v1/replicas/{replicaUUID}/embed-keys/{embedKey}" Either => embed::revoke_key;
        POST "/v1/replicas/{replicaUUID}/embed-identity-secret" Either => embed::create_identity_secret;
        DELETE "/v1/replicas/{replicaUUID}/embed-identity-secret" Either => embed::delete_identity_secret;
        POST "/v1/embed/{replicaUUID}/chat" Public => embed::chat;
        GET "/v1/embed/{replicaUUID}/history" Public => embed::history;
        POST "/v1/users" Org => users::create;
        GET "/v1/users/me" User => users::me_read;
        PUT "/v1/users/me" User => users::update_me;
        DELETE "/v1/users/me" User => users::delete_me;
        GET "/v1/users/{userID}" Org => users::read;
    }
}

/// Every row the server routes: the operations ([`routes`]), the docs page
/// ([`docs::pages`]), the chat widget and web page ([`embed::pages`]) and `/metrics`
/// (`ops::metrics::route`). `crate::serve` compiles it once (`http::Dispatcher`).
pub fn served() -> Vec<Route> {
    routes().into_iter().chain(docs::pages()).chain(embed::pages()).chain([crate::ops::metrics::route()]).collect()
}

/// The document's row of every operation of [`routes`] (prose, parameters, statuses, and the
/// body and answer types whose schemas are derived), each kept in the file of its handler, in
/// the order of the document's tags. The published document is [`docs::openapi`]; a test holds
/// the rows and the routes to the same operations.
pub fn operations() -> Vec<crate::openapi::operations::Op> {
    let files = [
        docs::operations(),
        invites::operations(),
        models::operations(),
        replicas::operations(),
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
    ];
    files.into_iter().flatten().collect()
}

/// `page` (≥ 1, default 1) and `pageSize` (1–100, default 24) of list operations; the names in
/// `page_names`/`size_names` are accepted, first found wins.
pub fn paging(req: &Req, page_names: &[&str], size_names: &[&str]) -> Result<(u64, u64)> {
    let page = req.query_int(page_names, 1, 1, 1_000_000)?;
    let size = req.query_int(size_names, 24, 1, 100)?;
    Ok((page, size))
}

/// `sortOrder` of a list: `asc` or `desc`; `None` when not given. 400 otherwise.
pub fn sort_order(req: &Req) -> Result<Option<bool>> {
    match req.query("sortOrder") {
        None => Ok(None),
        Some("desc") => Ok(Some(true)),
        Some("asc") => Ok(Some(false)),
        Some(_) => Err(crate::error::Error::new(crate::error::Code::InvalidQuery, "sortOrder must be asc or desc")),
    }
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
        assert_eq!(all.iter().filter(|r| r.cached).count(), 9);
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
