//! `X-API-Version` (spec §9): the dated versions this server speaks and the one adapter layer
//! that lets clients of an older version talk to the current handlers. A request of an older
//! version is rewritten into the current shape before its handler runs, and the handler's
//! current answer is rewritten into the older shape; handlers only know the current version.
//!
//! - `2025-03-25`: current.
//! - `2024-09-01`: `messengerA_data.chat_id`, `message_id`, `user_id`, `message_thread_id` may be
//!   strings of digits (an empty `user_id` means none).
//! - `2024-03-01`: as `2024-09-01`, and `GET /v1/replicas/models` answers `models` as an array of
//!   `{id, name, description, deprecated}`.
//!
//! The older paging names of `GET /v1/replicas` (`page_index`, `pageIndex`, `pageSize`) are
//! accepted in every version (docs/decisions.md "Common"), so they need no adapter.

use bytes::Bytes;
use hyper::header::HeaderMap;
use serde_json::{json, Map, Value};

use super::response::{Body, Reply};
use crate::error::{Code, Error, Result};

/// The current version (the default when the header is absent).
pub const CURRENT: &str = super::request::CURRENT_API_VERSION;

/// One shape change between versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adapter {
    /// Request: numeric `messengerA_data` ids sent as strings become numbers.
    StringMessengerAIds,
    /// Response: the model catalog as an array of objects with their `id`.
    ModelCatalogArray,
}

/// A dated version and the adapters that turn the current shape into its shape.
#[derive(Debug, PartialEq, Eq)]
pub struct Version {
    pub date: &'static str,
    /// What differs, for the OpenAPI document.
    pub note: &'static str,
    pub adapters: &'static [Adapter],
}

/// Every version this server accepts, newest first.
pub const SUPPORTED: &[Version] = &[
    Version { date: CURRENT, note: "current", adapters: &[] },
    Version {
        date: "2024-09-01",
        note: "messengerA_data ids (chat_id, message_id, user_id, message_thread_id) may be strings of digits",
        adapters: &[Adapter::StringMessengerAIds],
    },
    Version {
        date: "2024-03-01",
        note: "as 2024-09-01, and GET /v1/replicas/models answers `models` as an array of \
            {id, name, description, deprecated}",
        adapters: &[Adapter::StringMessengerAIds, Adapter::ModelCatalogArray],
    },
];

/// The version of a request (docs/api.md, "API versions"): absent → current; a well-formed
/// `YYYY-MM-DD` → the newest version released on or before that date, a date before the oldest
/// → the oldest (clients send the date they were written against, or today's); anything that is
/// not a date → 400 `UNSUPPORTED_API_VERSION`. The version served is named in the answer's
/// `X-API-Version` header.
pub fn negotiate(headers: &HeaderMap) -> Result<&'static Version> {
    let Some(raw) = headers.get("x-api-version") else { return Ok(&SUPPORTED[0]) };
    let date = raw.to_str().ok().filter(|s| is_date(s)).ok_or_else(|| {
        Error::new(
            Code::UnsupportedApiVersion,
            format!(
                "X-API-Version {:?} is not a date (YYYY-MM-DD); versions: {}",
                String::from_utf8_lossy(raw.as_bytes()),
                SUPPORTED.iter().map(|v| v.date).collect::<Vec<_>>().join(", ")
            ),
        )
    })?;
    // ISO dates of one width order as strings; `SUPPORTED` is newest first.
    Ok(SUPPORTED.iter().find(|v| v.date <= date).unwrap_or(&SUPPORTED[SUPPORTED.len() - 1]))
}

/// Whether `s` is a calendar date written `YYYY-MM-DD` (`2025-02-30` is not).
fn is_date(s: &str) -> bool {
    let shape = s.len() == 10
        && s.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    shape && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
}

impl Version {
    fn has(&self, adapter: Adapter) -> bool {
        self.adapters.contains(&adapter)
    }

    /// The request body in the current shape. A body that is not JSON is left for the handler
    /// to reject.
    pub fn adapt_request(&self, body: Bytes) -> Bytes {
        if !self.has(Adapter::StringMessengerAIds) || body.is_empty() {
            return body;
        }
        let Ok(mut v) = serde_json::from_slice::<Value>(&body) else { return body };
        let Some(data) = v.get_mut("messengerA_data").and_then(Value::as_object_mut) else { return body };
        numeric_ids(data);
        serde_json::to_vec(&v).map(Bytes::from).unwrap_or(body)
    }

    /// The answer of the operation at `path` in this version's shape.
    pub fn adapt_response(&self, path: &str, reply: Reply) -> Reply {
        if self.has(Adapter::ModelCatalogArray) && path == "/v1/replicas/models" && reply.status.is_success() {
            return map_json(reply, catalog_as_array);
        }
        reply
    }
}

fn numeric_ids(data: &mut Map<String, Value>) {
    for field in ["chat_id", "message_id", "user_id", "message_thread_id"] {
        let Some(Value::String(s)) = data.get(field) else { continue };
        if s.is_empty() && field == "user_id" {
            data.remove(field);
        } else if let Ok(n) = s.trim().parse::<i64>() {
            data.insert(field.to_string(), json!(n));
        }
    }
}

fn catalog_as_array(mut v: Value) -> Value {
    if let Some(Value::Object(models)) = v.get_mut("models").map(Value::take) {
        let list: Vec<Value> = models
            .into_iter()
            .map(|(id, mut info)| {
                let mut entry = Map::new();
                entry.insert("id".into(), json!(id));
                if let Some(fields) = info.as_object_mut() {
                    entry.append(fields);
                }
                Value::Object(entry)
            })
            .collect();
        v["models"] = json!(list);
    }
    v
}

/// Rewrites a complete JSON body with `f` (streamed bodies pass unchanged).
fn map_json(mut reply: Reply, f: impl FnOnce(Value) -> Value) -> Reply {
    let Body::Full(bytes) = &reply.body else { return reply };
    if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
        if let Ok(body) = serde_json::to_vec(&f(v)) {
            reply.body = Body::Full(Bytes::from(body));
        }
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(value: &str) -> Result<&'static str> {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-version", value.parse().unwrap());
        negotiate(&headers).map(|v| v.date)
    }

    #[test]
    fn a_date_selects_the_newest_version_released_on_or_before_it() {
        assert_eq!(served("2026-11-25").unwrap(), CURRENT);
        assert_eq!(served("2025-03-25").unwrap(), CURRENT);
        assert_eq!(served("2025-03-24").unwrap(), "2024-09-01");
        assert_eq!(served("2024-09-01").unwrap(), "2024-09-01");
        assert_eq!(served("2024-08-31").unwrap(), "2024-03-01");
        assert_eq!(served("1999-01-01").unwrap(), "2024-03-01");
        for bad in ["latest", "2025-3-25", "2025-02-30", "20250325", "2025-03-25T00:00:00Z", " 2025-03-25"] {
            assert!(served(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn string_ids_become_numbers_and_an_empty_user_id_is_dropped() {
        let old = &SUPPORTED[1];
        let data = json!({"chat_type": "private", "chat_id": "-42", "message_id": "7", "user_id": ""});
        let body = json!({"content": "hi", "messengerA_data": data});
        let out: Value = serde_json::from_slice(&old.adapt_request(Bytes::from(body.to_string()))).unwrap();
        assert_eq!(out["messengerA_data"], json!({"chat_type": "private", "chat_id": -42, "message_id": 7}));
        let current = SUPPORTED[0].adapt_request(Bytes::from(body.to_string()));
        assert_eq!(serde_json::from_slice::<Value>(&current).unwrap(), body);
    }
}
