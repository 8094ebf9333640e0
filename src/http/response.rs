//! Building responses: JSON success bodies, streamed bodies (server-sent events) and the
//! spec §7 error body.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Either, Full};
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::error::{Code, Error};

/// What a handler answers: status, body, extra headers.
pub struct Reply {
    pub status: StatusCode,
    pub body: Body,
    /// `None`: no body, no `Content-Type` (204).
    pub content_type: Option<&'static str>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// A reply's body: whole, or streamed as it is produced.
pub enum Body {
    Full(Bytes),
    /// Ends when its producer is done; dropped (which its producer sees) when the client goes.
    Stream(UnsyncBoxBody<Bytes, Infallible>),
}

/// The body type of every response the server sends.
pub type ResponseBody = Either<Full<Bytes>, UnsyncBoxBody<Bytes, Infallible>>;

/// A body fed by a channel, each item encoded to bytes as it comes.
struct ChannelBody<T, F> {
    rx: mpsc::Receiver<T>,
    encode: F,
}

impl<T, F: FnMut(T) -> Bytes + Unpin> http_body::Body for ChannelBody<T, F> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        this.rx.poll_recv(cx).map(|item| item.map(|t| Ok(Frame::data((this.encode)(t)))))
    }
}

impl Reply {
    /// `status` with `{success: true}` merged into the JSON object `value`: every success body
    /// carries `success`. `value` is written once, after `{"success":true` (its own opening
    /// brace becomes the comma), instead of through serde's `flatten`, which wraps every field
    /// in a map serializer, a cost paid on every answer. A value that is not a JSON object gives
    /// `{"success":true}`.
    pub fn success<T: Serialize>(status: u16, value: &T) -> Reply {
        const HEAD: &[u8] = br#"{"success":true"#;
        let mut body = Vec::with_capacity(1024);
        body.extend_from_slice(HEAD);
        let object = serde_json::to_writer(&mut body, value).is_ok() && body.get(HEAD.len()) == Some(&b'{');
        if object && body.len() > HEAD.len() + 2 {
            body[HEAD.len()] = b','; // a non-empty object: `{"success":true,"a":…}`
        } else {
            body.truncate(HEAD.len()); // `{}`, or not an object
            body.push(b'}');
        }
        Reply::raw(status, body.into(), "application/json")
    }

    /// 200 `{success: true, ...value}`.
    pub fn ok<T: Serialize>(value: &T) -> Reply {
        Reply::success(200, value)
    }

    /// 200 `{success: true}`.
    pub fn done() -> Reply {
        Reply::success(200, &Empty {})
    }

    /// 204, no body and no `Content-Type` (`DELETE /v1/users/me`, CORS preflights).
    pub fn no_content() -> Reply {
        Reply {
            status: StatusCode::NO_CONTENT,
            body: Body::Full(Bytes::new()),
            content_type: None,
            headers: Vec::new(),
        }
    }

    /// A body as given (e.g. a JSON document that is not an object with `success`).
    pub fn raw(status: u16, body: Bytes, content_type: &'static str) -> Reply {
        Reply {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            body: Body::Full(body),
            content_type: Some(content_type),
            headers: Vec::new(),
        }
    }

    /// 200 `text/event-stream` whose body is the items of `rx`, each encoded by `encode` (one
    /// or more complete SSE events). The body ends when every sender is dropped; when the
    /// client goes away the receiver is dropped, which the senders see as a closed channel.
    pub fn event_stream<T, F>(rx: mpsc::Receiver<T>, encode: F) -> Reply
    where
        T: Send + 'static,
        F: FnMut(T) -> Bytes + Send + Unpin + 'static,
    {
        let body = ChannelBody { rx, encode }.boxed_unsync();
        Reply {
            status: StatusCode::OK,
            body: Body::Stream(body),
            content_type: Some("text/event-stream"),
            headers: Vec::new(),
        }
        .with_header("cache-control", "no-cache")
    }

    /// 200 `content_type` whose body is the bytes of `rx` as they come (a file written while it
    /// is sent: a replica bundle). The body ends when every sender is dropped; when the client
    /// goes away the receiver is dropped, which the senders see as a closed channel.
    pub fn stream(rx: mpsc::Receiver<Bytes>, content_type: &'static str) -> Reply {
        let body = ChannelBody { rx, encode: |b: Bytes| b }.boxed_unsync();
        Reply {
            status: StatusCode::OK,
            body: Body::Stream(body),
            content_type: Some(content_type),
            headers: Vec::new(),
        }
    }

    /// Adds a header (values that are not valid header text are dropped).
    pub fn with_header(mut self, name: &'static str, value: &str) -> Reply {
        if let Ok(v) = HeaderValue::from_str(value) {
            self.headers.push((HeaderName::from_static(name), v));
        }
        self
    }

    /// Into a hyper response carrying `X-Request-Id`.
    pub fn into_response(self, request_id: &str) -> Response<ResponseBody> {
        let body = match self.body {
            Body::Full(bytes) => Either::Left(Full::new(bytes)),
            Body::Stream(s) => Either::Right(s),
        };
        let mut res = Response::new(body);
        *res.status_mut() = self.status;
        let h = res.headers_mut();
        if let Some(ct) = self.content_type {
            h.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
        }
        if let Ok(v) = HeaderValue::from_str(request_id) {
            h.insert(HeaderName::from_static("x-request-id"), v);
        }
        for (k, v) in self.headers {
            h.append(k, v);
        }
        res
    }
}

/// One server-sent event: `event: NAME` (when given) and `data:` lines, then a blank line.
pub fn sse_event(event: Option<&str>, data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + 32);
    if let Some(name) = event {
        out.push_str(&format!("event: {name}\n"));
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// The spec §7 error reply for `err` (body by [`error_body`]).
pub fn error_reply(err: &Error, request_id: &str, expose_internal: bool) -> Reply {
    let body = serde_json::to_vec(&error_body(err, request_id, expose_internal)).unwrap_or_default();
    Reply::raw(err.code.status(), body.into(), "application/json")
}

/// The spec §7 error body (the `Error` schema): `success: false`, `error`, `request_id`,
/// `error_code` and `fingerprint` where the code has one, and `inner_exception` for a 500 when
/// the operator exposes internal errors; absent fields are omitted.
#[derive(Serialize)]
pub struct ErrorBody<'a> {
    success: bool,
    error: &'a str,
    request_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fingerprint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inner_exception: Option<InnerException>,
}

/// `inner_exception` of an exposed 500: `{name: "InternalError", message}`, the message the
/// cause's text ([`Error::cause_text`]).
#[derive(Serialize)]
pub struct InnerException {
    name: &'static str,
    message: String,
}

/// The spec §7 body for `err` ([`ErrorBody`]); `inner_exception` only for a 500 and only when
/// `expose_internal` is set.
pub fn error_body<'a>(err: &'a Error, request_id: &'a str, expose_internal: bool) -> ErrorBody<'a> {
    let code = err.code.as_str();
    let exposed = err.code == Code::Internal && expose_internal;
    ErrorBody {
        success: false,
        error: &err.message,
        request_id,
        error_code: code,
        fingerprint: code.map(|c| fingerprint(c, &err.message)),
        inner_exception: exposed
            .then(|| InnerException { name: "InternalError", message: err.cause_text().unwrap_or_default() }),
    }
}

/// Stable identifier of an error kind: the same code and message give the same fingerprint.
fn fingerprint(code: &str, message: &str) -> String {
    let digest = Sha256::digest(format!("{code}\n{message}").as_bytes());
    hex::encode(&digest[..8])
}

/// An empty JSON object: the body of [`Reply::done`] before `success` is merged in.
#[derive(Serialize)]
struct Empty {}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// The error body of `err` as JSON.
    fn error_json(err: &Error, expose_internal: bool) -> Value {
        serde_json::to_value(error_body(err, "r1", expose_internal)).unwrap()
    }

    fn body_of(reply: Reply) -> String {
        match reply.body {
            Body::Full(b) => String::from_utf8(b.to_vec()).unwrap(),
            Body::Stream(_) => panic!("a whole body"),
        }
    }

    #[test]
    fn success_is_merged_into_the_value() {
        assert_eq!(body_of(Reply::ok(&json!({"a": 1, "b": "x"}))), r#"{"success":true,"a":1,"b":"x"}"#);
        assert_eq!(body_of(Reply::ok(&json!({}))), r#"{"success":true}"#);
        assert_eq!(body_of(Reply::done()), r#"{"success":true}"#);
        assert_eq!(body_of(Reply::ok(&json!([1, 2]))), r#"{"success":true}"#);
        assert_eq!(body_of(Reply::ok(&"text")), r#"{"success":true}"#);
    }

    /// A 500's cause reaches the body as text in `inner_exception`, and only when exposed.
    #[test]
    fn the_cause_of_a_500_is_its_inner_exception_when_exposed() {
        let err = Error::from(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"));
        let body = error_json(&err, true);
        assert_eq!(body["error"], "internal error");
        assert_eq!(body["inner_exception"], json!({"name": "InternalError", "message": "denied"}));
        assert!(error_json(&err, false).get("inner_exception").is_none());
        let full = Error::from(std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left on device"));
        assert!(error_json(&full, true).get("inner_exception").is_none(), "only a 500 shows its cause");
        let keys: Vec<String> = error_json(&full, false).as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["success", "error", "request_id", "error_code", "fingerprint"]);
        assert!(error_json(&Error::new(Code::InviteNotFound, "no such code"), false).get("error_code").is_none());
    }
}
