//! Building responses: JSON success bodies and the spec §7 error body.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::error::{Code, Error};

/// What a handler answers: status, body bytes, extra headers.
pub struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
    pub content_type: &'static str,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// `{success: true, ...value}`: every success body carries `success`.
#[derive(Serialize)]
struct Success<'a, T: Serialize> {
    success: bool,
    #[serde(flatten)]
    inner: &'a T,
}

impl Reply {
    /// `status` with `{success: true}` merged into the JSON object `value`.
    pub fn success<T: Serialize>(status: u16, value: &T) -> Reply {
        let body = serde_json::to_vec(&Success { success: true, inner: value })
            .unwrap_or_else(|_| br#"{"success":true}"#.to_vec());
        Reply::raw(status, body.into(), "application/json")
    }

    /// 200 `{success: true, ...value}`.
    pub fn ok<T: Serialize>(value: &T) -> Reply {
        Reply::success(200, value)
    }

    /// 200 `{success: true}`.
    pub fn done() -> Reply {
        Reply::success(200, &json!({}))
    }

    /// A body as given (e.g. a JSON document that is not an object with `success`).
    pub fn raw(status: u16, body: Bytes, content_type: &'static str) -> Reply {
        Reply {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            body,
            content_type,
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
    pub fn into_response(self, request_id: &str) -> Response<Full<Bytes>> {
        let mut res = Response::new(Full::new(self.body));
        *res.status_mut() = self.status;
        let h = res.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        if let Ok(v) = HeaderValue::from_str(request_id) {
            h.insert(HeaderName::from_static("x-request-id"), v);
        }
        for (k, v) in self.headers {
            h.append(k, v);
        }
        res
    }
}

/// The spec §7 body for `err`: `success:false, error, error_code?, fingerprint?, request_id`,
/// and `inner_exception` for a 500 when `expose_internal` is set.
pub fn error_reply(err: &Error, request_id: &str, expose_internal: bool) -> Reply {
    let mut body = json!({ "success": false, "error": err.message, "request_id": request_id });
    if let Some(code) = err.code.as_str() {
        body["error_code"] = json!(code);
        body["fingerprint"] = json!(fingerprint(code, &err.message));
    }
    if err.code == Code::Internal && expose_internal {
        body["inner_exception"] = json!({
            "name": "InternalError",
            "message": err.internal.clone().unwrap_or_default(),
        });
    }
    let body = serde_json::to_vec(&body).unwrap_or_default();
    Reply::raw(err.code.status(), body.into(), "application/json")
}

/// Stable identifier of an error kind: the same code and message give the same fingerprint.
fn fingerprint(code: &str, message: &str) -> String {
    let digest = Sha256::digest(format!("{code}\n{message}").as_bytes());
    hex::encode(&digest[..8])
}
