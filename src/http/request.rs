//! Decoding of requests: headers checked once, the body read with a size cap that applies to
//! the *decompressed* bytes (`Content-Encoding: gzip` via flate2), JSON and query parsing.

use std::io::Read;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, CONTENT_ENCODING, CONTENT_TYPE};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::auth::Caller;
use crate::error::{Code, Error, Result};

/// The API version this server speaks (spec §9).
pub const CURRENT_API_VERSION: &str = "2025-03-25";

/// A decoded request as handlers see it.
pub struct Req {
    /// Path parameters by name (`replicaUUID`, `knowledgeBaseID`, …).
    pub params: Vec<(String, String)>,
    /// Query pairs in order, percent-decoded.
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    /// The decompressed body (empty when none was sent).
    pub body: Bytes,
    /// Who is calling; `None` only on public operations.
    pub caller: Option<Caller>,
    pub request_id: String,
}

impl Req {
    /// The path parameter `name` (always present: the route declares it).
    pub fn param(&self, name: &str) -> &str {
        self.params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("")
    }

    /// The path parameter `name` as a UUID; 400 `INVALID_PATH_PARAMETER` otherwise.
    pub fn uuid_param(&self, name: &str) -> Result<Uuid> {
        let raw = self.param(name);
        Uuid::parse_str(raw).map_err(|_| Error::new(Code::InvalidPath, format!("{name} must be a UUID, got {raw:?}")))
    }

    /// The path parameter `name` as a positive integer id; 400 otherwise.
    pub fn id_param(&self, name: &str) -> Result<u64> {
        let raw = self.param(name);
        raw.parse::<u64>()
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| Error::new(Code::InvalidPath, format!("{name} must be a positive integer, got {raw:?}")))
    }

    /// The authenticated caller; operations that are not public always have one.
    pub fn caller(&self) -> Result<&Caller> {
        self.caller.as_ref().ok_or_else(|| Error::new(Code::Unauthorized, "credentials required"))
    }

    /// The body as JSON of type `T`; 400 `INVALID_BODY` with serde's explanation otherwise.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        if self.body.is_empty() {
            return Err(Error::new(Code::InvalidBody, "a JSON body is required"));
        }
        serde_json::from_slice(&self.body).map_err(|e| Error::new(Code::InvalidBody, format!("invalid JSON body: {e}")))
    }

    /// Last value of query parameter `name`.
    pub fn query(&self, name: &str) -> Option<&str> {
        self.query.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, with comma-separated values split (`tags=a,b&tags=c`).
    pub fn query_all(&self, name: &str) -> Vec<String> {
        let bracketed = format!("{name}[]");
        self.query
            .iter()
            .filter(|(k, _)| k == name || *k == bracketed)
            .flat_map(|(_, v)| v.split(',').map(str::trim).filter(|s| !s.is_empty()))
            .map(str::to_string)
            .collect()
    }

    /// Query parameter `name` as an integer in `min..=max`, or `default` when absent.
    pub fn query_int(&self, names: &[&str], default: u64, min: u64, max: u64) -> Result<u64> {
        let Some((name, raw)) = names.iter().find_map(|n| self.query(n).map(|v| (*n, v))) else {
            return Ok(default);
        };
        raw.parse::<u64>()
            .ok()
            .filter(|v| (min..=max).contains(v))
            .ok_or_else(|| Error::new(Code::InvalidQuery, format!("{name} must be an integer in {min}..={max}")))
    }
}

/// Parses the query string into decoded pairs.
pub fn parse_query(raw: Option<&str>) -> Vec<(String, String)> {
    raw.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default()
}

/// Reads the body: 415 for a `Content-Encoding` other than gzip or (when `json`) a non-JSON
/// `Content-Type`, 413 when the raw or the decompressed body exceeds `limit` bytes, 400 for a
/// broken gzip stream.
pub async fn read_body(headers: &HeaderMap, body: Incoming, limit: usize, json: bool) -> Result<Bytes> {
    let gzip = match headers.get(CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("?").trim()) {
        None => false,
        Some(e) if e.eq_ignore_ascii_case("gzip") => true,
        Some(e) => {
            return Err(Error::new(
                Code::UnsupportedMediaType,
                format!("Content-Encoding {e:?} is not supported; only gzip is"),
            ))
        }
    };
    let raw = http_body_util::Limited::new(body, limit).collect().await.map_err(|_| too_large(limit))?.to_bytes();
    if raw.is_empty() {
        return Ok(raw);
    }
    if json {
        check_content_type(headers)?;
    }
    if !gzip {
        return Ok(raw);
    }
    if raw.len() <= INLINE_GUNZIP_BYTES {
        return gunzip(&raw, limit);
    }
    // A large body is inflated on the blocking pool, not on a runtime worker.
    tokio::task::spawn_blocking(move || gunzip(&raw, limit)).await.map_err(Error::internal)?
}

/// Compressed bodies up to this size are inflated inline (microseconds).
const INLINE_GUNZIP_BYTES: usize = 64 * 1024;

/// `raw` inflated, at most `limit` bytes (413 beyond; 400 when it is not gzip).
fn gunzip(raw: &[u8], limit: usize) -> Result<Bytes> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(raw)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::new(Code::InvalidBody, format!("body is not valid gzip: {e}")))?;
    if out.len() > limit {
        return Err(too_large(limit));
    }
    Ok(Bytes::from(out))
}

fn check_content_type(headers: &HeaderMap) -> Result<()> {
    let Some(ct) = headers.get(CONTENT_TYPE) else { return Ok(()) };
    let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
    let essence = ct.split(';').next().unwrap_or("").trim();
    if essence == "application/json" || essence.ends_with("+json") {
        Ok(())
    } else {
        Err(Error::new(
            Code::UnsupportedMediaType,
            format!("Content-Type {essence:?} is not supported; send application/json"),
        ))
    }
}

fn too_large(limit: usize) -> Error {
    Error::new(Code::PayloadTooLarge, format!("body exceeds {limit} bytes (after decompression)"))
}
