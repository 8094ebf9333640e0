//! An operation's row of the document ([`Op`]): its method, path and access, its name, summary,
//! description and query parameters, the types of its body and success answer (whose schemas are derived, [`super::derived`]), and the statuses beyond those every
//! operation of its kind answers (see [`super::statuses`]). The rows are kept beside their
//! handlers in `api`, which serves each row (`api::Serve`): the route table and the document
//! come from the same rows.
//!
//! A raw-bytes body is [`Op::raw_body`], an answer that may also stream [`Op::streams`].

use schemars::JsonSchema;
use serde_json::Value;

use super::derived::Derived;
use crate::http::auth::Access;

/// One operation's documentation.
pub struct Op {
    pub method: &'static str,
    pub path: &'static str,
    /// The credentials it takes (set when the row is served, `api::Serve`).
    pub access: Access,
    pub id: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    pub description: &'static str,
    /// Derives its query parameters ([`Op::query_of`]) when the document is built, as
    /// [`Op::schemas`] derives the body's and answer's: serving the row never needs them.
    pub query: Option<fn() -> Vec<Value>>,
    /// Header parameters beyond the version and the credentials (OpenAPI parameter objects).
    pub headers: Vec<Value>,
    /// Schema name of the request body (JSON unless `body_media` says otherwise).
    pub body: Option<&'static str>,
    /// Media type of the request body.
    pub body_media: &'static str,
    /// The body may be left out (`requestBody.required` false).
    pub body_optional: bool,
    /// The body is an archive an authenticated caller sends ([`Op::archive_body`]).
    pub archive_body: bool,
    /// Success status and schema name of its JSON body.
    pub ok: (u16, &'static str),
    /// Media type of the success answer (JSON unless [`Op::ok_file`] says otherwise).
    pub ok_media: &'static str,
    /// Other media types the success answer may come in (e.g. `text/event-stream`), as text.
    pub ok_also: &'static [&'static str],
    /// The 404 body carries no `error_code`/`fingerprint` (redeem, spec §7 rule 2).
    pub plain_404: bool,
    /// The path parameter of the resource this operation creates and the JSON pointer of its
    /// id in the success body (for the document's `links`).
    pub creates: Option<(&'static str, &'static str)>,
    /// Statuses beyond the derived ones (409, 429, …).
    pub extra: &'static [u16],
    /// Statuses that answer a schema of their own rather than an error body (the 503 of
    /// readiness).
    pub also: &'static [(u16, &'static str)],
    /// Marked `deprecated` in the document (spec §9: the legacy conversation operations).
    pub deprecated: bool,
    /// How the schemas of the body and answer types are derived ([`Op::body_of`],
    /// [`Op::ok_of`], …): each a [`Derived`] method for a type, and the name it gives.
    pub schemas: Vec<(Derive, &'static str)>,
}

/// Adds a type's schemas to a [`Derived`] under a name (see [`Op::schemas`]).
pub type Derive = fn(&mut Derived, &'static str);

fn request<T: JsonSchema>(d: &mut Derived, _: &'static str) {
    d.request::<T>();
}

fn answer<T: JsonSchema>(d: &mut Derived, _: &'static str) {
    d.answer::<T>();
}

fn answer_as<T: JsonSchema>(d: &mut Derived, name: &'static str) {
    d.answer_as::<T>(name);
}

fn part<T: JsonSchema>(d: &mut Derived, _: &'static str) {
    d.part::<T>();
}

/// `T`'s schema name, which a body or answer type gives itself (`#[schemars(rename = "…")]`).
///
/// # Panics
/// When the name is made at run time (a generic type's): name that answer with [`Op::ok_as`].
fn name_of<T: JsonSchema>() -> &'static str {
    match T::schema_name() {
        std::borrow::Cow::Borrowed(name) => name,
        std::borrow::Cow::Owned(name) => panic!("{name} is a generic type's name: give it one with ok_as"),
    }
}

/// The media type of a JSON body.
const JSON_MEDIA: &str = "application/json";
/// The media type of a raw-bytes body ([`Op::raw_body`]).
pub const RAW_MEDIA: &str = "application/octet-stream";
/// The media type of an archive answer ([`Op::ok_file`]): a replica bundle.
pub const ARCHIVE_MEDIA: &str = "application/gzip";

/// Answers that may also stream (`Accept: text/event-stream`).
const SSE: &[&str] = &["text/event-stream"];

/// An operation's row: a `200 Done` answer and no body until the builders say otherwise.
pub fn op(method: &'static str, path: &'static str, id: &'static str, tag: &'static str, summary: &'static str) -> Op {
    Op {
        method,
        path,
        access: Access::Public,
        id,
        tag,
        summary,
        description: "",
        query: None,
        headers: Vec::new(),
        body: None,
        body_media: JSON_MEDIA,
        body_optional: false,
        archive_body: false,
        ok: (200, "Done"),
        ok_media: JSON_MEDIA,
        ok_also: &[],
        plain_404: false,
        creates: None,
        extra: &[],
        also: &[],
        deprecated: false,
        schemas: Vec::new(),
    }
}

impl Op {
    /// The operation's description (prose; the access it needs is added after it).
    pub fn describe(mut self, d: &'static str) -> Op {
        self.description = d;
        self
    }
    fn body(mut self, schema: &'static str) -> Op {
        self.body = Some(schema);
        self
    }
    /// The body is raw bytes (`application/octet-stream`), the written schema `schema`.
    pub fn raw_body(mut self, schema: &'static str) -> Op {
        self.body_media = RAW_MEDIA;
        self.body(schema)
    }
    /// The body is an archive sent by an authenticated caller, the written schema `schema`:
    /// documented as raw bytes (`application/octet-stream`; any content type is taken, the
    /// archive tells what it is), read as `http`'s archive body.
    pub fn archive_body(mut self, schema: &'static str) -> Op {
        self.body_media = RAW_MEDIA;
        self.archive_body = true;
        self.body(schema)
    }
    /// The success answer is a file of `media` (not JSON), the written schema `schema`.
    pub fn ok_file(mut self, status: u16, media: &'static str, schema: &'static str) -> Op {
        self.ok_media = media;
        self.ok(status, schema)
    }
    /// The body is `T` as serde reads it; its schema is derived.
    pub fn body_of<T: JsonSchema>(mut self) -> Op {
        self.schemas.push((request::<T>, ""));
        self.body(name_of::<T>())
    }
    /// The body is `T`, and may be left out.
    pub fn optional_body_of<T: JsonSchema>(mut self) -> Op {
        self.body_optional = true;
        self.body_of::<T>()
    }
    /// The operation makes the resource of path parameter `param`; its id is at the JSON
    /// `pointer` of the answer (the document's `links`).
    pub fn creates(mut self, param: &'static str, pointer: &'static str) -> Op {
        self.creates = Some((param, pointer));
        self
    }
    /// Its 404 body carries no `error_code` or `fingerprint` (redeem, spec §7 rule 2).
    pub fn plain_404(mut self) -> Op {
        self.plain_404 = true;
        self
    }
    /// The success answer is the written schema `schema` (the model catalog, `Done`, …).
    pub fn ok(mut self, status: u16, schema: &'static str) -> Op {
        self.ok = (status, schema);
        self
    }
    /// The success answer is `T` with `success: true` in front (`Reply::ok`).
    pub fn ok_of<T: JsonSchema>(mut self, status: u16) -> Op {
        self.schemas.push((answer::<T>, ""));
        self.ok(status, name_of::<T>())
    }
    /// The success answer is `T` with `success: true`, named `name` (a generic type, or one
    /// that is also a part of other answers).
    pub fn ok_as<T: JsonSchema>(mut self, status: u16, name: &'static str) -> Op {
        self.schemas.push((answer_as::<T>, name));
        self.ok(status, name)
    }
    /// The success answer is `T` as it is, without `success` (the operability answers, the
    /// OpenAI-shaped completion).
    pub fn ok_raw<T: JsonSchema>(mut self, status: u16) -> Op {
        self.schemas.push((part::<T>, ""));
        self.ok(status, name_of::<T>())
    }
    /// Statuses it answers beyond the derived ones (409, 429, …).
    pub fn extra(mut self, statuses: &'static [u16]) -> Op {
        self.extra = statuses;
        self
    }
    /// Statuses that answer a schema of their own rather than an error body (the 503 of
    /// readiness: the same body, naming what failed).
    pub fn also(mut self, statuses: &'static [(u16, &'static str)]) -> Op {
        self.also = statuses;
        self
    }
    /// The success answer may also stream as server-sent events (`Accept: text/event-stream`).
    pub fn streams(mut self) -> Op {
        self.ok_also = SSE;
        self
    }
    /// Marked deprecated (spec §9: the legacy conversation operations).
    pub fn deprecated(mut self) -> Op {
        self.deprecated = true;
        self
    }
    /// Its query parameters: one per field of `T` (`api::query`; derived, [`super::derived::parameters`]).
    pub fn query_of<T: JsonSchema>(mut self) -> Op {
        self.query = Some(super::derived::parameters::<T>);
        self
    }
    /// Header parameters it reads beyond the credentials and the version (OpenAPI parameter
    /// objects, `in: header`).
    pub fn headers(mut self, params: Vec<Value>) -> Op {
        self.headers.extend(params);
        self
    }
}
