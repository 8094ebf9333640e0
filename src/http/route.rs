//! One operation of the route table: its method, path template, access, body kind, whether
//! the read cache may keep its answers, and its handler. The table itself is
//! `crate::api::routes`, made from the operations' rows (`crate::api::operations`);
//! [`super::router`] matches requests against it, and the operability routes (`/metrics`, the
//! docs page) are rows of the same shape.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hyper::Method;

use super::auth::Access;
use super::request::Req;
use super::response::Reply;
use crate::app::App;
use crate::error::Result;

/// A handler's future.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Reply>> + Send>>;
/// Every handler has this one shape.
pub type Handler = fn(Arc<App>, Req) -> HandlerFuture;

/// What an operation's body is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// JSON (`Content-Type` must be JSON when given), at most `--max-body-bytes`.
    Json,
    /// Bytes of any type sent to a signed upload URL, at most `--max-upload-bytes` and what the
    /// URL allows. The URL's `{token}` is its credential: the request path checks it
    /// (`service::knowledge::uploads::admit`) before the body is read.
    Raw,
    /// An archive (a replica bundle, `application/gzip`) sent by an authenticated caller, at
    /// most `--max-upload-bytes` as sent (its inflated size is the service's to check while
    /// inflating).
    Archive,
}

/// One operation.
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    pub access: Access,
    pub body: BodyKind,
    /// Whether the read cache ([`super::read_cache`]) may keep its answers: marked `.cached()`
    /// in the operation's row (`crate::api::Operation`), only on a `GET` whose handler's answer is a function of the
    /// store, the request target, the API version and the caller alone (no clock, no
    /// randomness, no other header, no search index).
    pub cached: bool,
    pub handler: Handler,
}
