//! Decoding of requests: headers checked once, the body read with a size cap that applies to
//! the *decompressed* bytes (`Content-Encoding: gzip` inflated as a stream by flate2), JSON and
//! query parsing.

use std::io::Write;

use bytes::Bytes;
use flate2::write::MultiGzDecoder;
use http_body_util::BodyExt;
use hyper::body::Body;
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
    /// The path pattern of the route that matched (`/v1/replicas/{replicaUUID}/chat/history/web`):
    /// a handler that serves the rows of several channels reads its channel from it.
    pub route: &'static str,
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
}

/// Parses the query string into decoded pairs.
pub fn parse_query(raw: Option<&str>) -> Vec<(String, String)> {
    raw.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default()
}

/// Reads the body: 415 for a `Content-Encoding` other than gzip or (when `json`) a non-JSON
/// `Content-Type`, 413 when the raw or the decompressed body exceeds `limit` bytes, 400 for a
/// broken gzip stream.
///
/// Called only once the request is authenticated (`http::dispatch`). A gzip body is inflated
/// as it arrives, frame by frame, into a buffer that refuses to grow past `limit`: a gzip
/// bomb is cut at `limit` bytes (413) and never inflated further, and the compressed bytes are
/// never held whole. Inflation runs on the request's task in slices of [`INFLATE_SLICE`]
/// compressed bytes, yielding to the runtime after a slice that inflated to more than 64 times
/// its size: a worker is never held for more than one slice of a bomb (deflate inflates at most
/// about 1,000:1, so 4 MiB). A panic in the decoder is answered as an internal error.
///
/// A body that stalls — nothing arrives for `stall` (`--body-timeout`) — is answered 408
/// `BODY_TIMEOUT`: a client that sends headers and then holds its body back holds a request,
/// and with it its connection, only that long.
pub async fn read_body(
    headers: &HeaderMap,
    body: &mut Incoming,
    limit: usize,
    json: bool,
    stall: std::time::Duration,
) -> Result<Bytes> {
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
    if body.size_hint().lower() > limit as u64 {
        return Err(too_large(limit)); // its Content-Length says so: nothing is read
    }
    // An empty body is no body: its Content-Type does not matter.
    let mut wrong_type = if json { check_content_type(headers).err() } else { None };
    let mut sink =
        if gzip { Sink::Gzip(Box::new(MultiGzDecoder::new(Capped::new(limit)))) } else { Sink::Plain(Vec::new()) };
    let mut read = 0usize;
    let stalled = || {
        let secs = stall.as_secs();
        Error::new(Code::BodyTimeout, format!("the body stalled: nothing of it arrived for {secs} s (--body-timeout)"))
    };
    while let Some(frame) = tokio::time::timeout(stall, body.frame()).await.map_err(|_| stalled())? {
        let frame = frame.map_err(|e| Error::new(Code::InvalidBody, format!("the body could not be read: {e}")))?;
        let Ok(data) = frame.into_data() else { continue }; // trailers
        if data.is_empty() {
            continue;
        }
        if let Some(e) = wrong_type.take() {
            return Err(e);
        }
        read += data.len();
        if read > limit {
            return Err(too_large(limit));
        }
        sink.push(data, limit).await?;
    }
    sink.finish(limit)
}

/// Bytes of a refused request's body [`linger`] reads and drops at most.
const LINGER_BYTES: usize = 64 * 1024;

/// What [`linger`] waits for the rest of a refused body at most.
const LINGER_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// Before a refusal (401, 403, 404 of an upload URL, 413 of a bomb cut at the limit, …) is
/// answered: reads and drops what is left of the request's body, at most [`LINGER_BYTES`]
/// within [`LINGER_TIME`], never buffered, inflated or parsed. A client still sending a small
/// body (a 60 KB gzip bomb) then reads its answer instead of a connection reset by the close of
/// a socket with unread data (what nginx's `lingering_close` does); a larger body is cut off
/// with the connection.
pub async fn linger(body: &mut Incoming) {
    let _ = tokio::time::timeout(LINGER_TIME, discard(body, LINGER_BYTES)).await;
}

/// Reads and drops what is left of `body` while it stays within `budget` bytes.
async fn discard(body: &mut Incoming, mut budget: usize) {
    while let Some(Ok(frame)) = body.frame().await {
        let n = frame.data_ref().map_or(0, Bytes::len);
        if n > budget {
            return;
        }
        budget -= n;
    }
}

/// Compressed bytes inflated between two yields to the runtime (see [`read_body`]).
const INFLATE_SLICE: usize = 4 * 1024;

/// Where [`read_body`] puts the body's frames.
enum Sink {
    /// Frames as received (concatenated at the end).
    Plain(Vec<Bytes>),
    /// A gzip stream inflated as it comes.
    Gzip(Box<MultiGzDecoder<Capped>>),
}

impl Sink {
    async fn push(&mut self, data: Bytes, limit: usize) -> Result<()> {
        let decoder = match self {
            Sink::Plain(frames) => {
                frames.push(data);
                return Ok(());
            }
            Sink::Gzip(decoder) => decoder,
        };
        for slice in data.chunks(INFLATE_SLICE) {
            let before = decoder.get_ref().out.len();
            inflate(decoder, limit, |d| d.write_all(slice))?;
            if decoder.get_ref().out.len() - before > INFLATE_SLICE * 64 {
                tokio::task::yield_now().await; // a slice that inflated much: let other tasks run
            }
        }
        Ok(())
    }

    fn finish(self, limit: usize) -> Result<Bytes> {
        match self {
            Sink::Plain(frames) if frames.len() == 1 => Ok(frames.into_iter().next().unwrap_or_default()),
            Sink::Plain(frames) => Ok(Bytes::from(frames.concat())),
            Sink::Gzip(mut decoder) => {
                inflate(&mut decoder, limit, |d| d.try_finish())?; // a truncated stream fails here
                Ok(Bytes::from(std::mem::take(&mut decoder.get_mut().out)))
            }
        }
    }
}

/// Runs `step` on the decoder: 413 when the inflated body passed `limit`, 400 when the stream is
/// not gzip, 500 when the decoder panicked.
fn inflate(
    decoder: &mut MultiGzDecoder<Capped>,
    limit: usize,
    step: impl FnOnce(&mut MultiGzDecoder<Capped>) -> std::io::Result<()>,
) -> Result<()> {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| step(decoder)))
        .map_err(|_| Error::internal("inflating the request body panicked"))?;
    match result {
        Ok(()) => Ok(()),
        Err(_) if decoder.get_ref().exceeded => Err(too_large(limit)),
        Err(e) => Err(Error::new(Code::InvalidBody, format!("body is not valid gzip: {e}"))),
    }
}

/// The inflated body: a buffer that fails the write that would take it past `limit` bytes.
struct Capped {
    out: Vec<u8>,
    limit: usize,
    /// Set when a write was refused for the limit.
    exceeded: bool,
}

impl Capped {
    fn new(limit: usize) -> Capped {
        Capped { out: Vec::new(), limit, exceeded: false }
    }
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len() + buf.len() > self.limit {
            self.exceeded = true;
            return Err(std::io::Error::other("the inflated body exceeds the limit"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(bytes: &[u8]) -> Bytes {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(bytes).unwrap();
        Bytes::from(e.finish().unwrap())
    }

    /// Pushes `body` through a gzip sink capped at `limit`, in frames of 16 KiB.
    async fn inflate_all(body: Bytes, limit: usize) -> (Result<Bytes>, usize) {
        let mut sink = Sink::Gzip(Box::new(MultiGzDecoder::new(Capped::new(limit))));
        for frame in body.chunks(16 * 1024) {
            if let Err(e) = sink.push(Bytes::copy_from_slice(frame), limit).await {
                let Sink::Gzip(d) = &sink else { unreachable!() };
                return (Err(e), d.get_ref().out.len());
            }
        }
        (sink.finish(limit), 0)
    }

    #[tokio::test]
    async fn a_gzip_bomb_is_cut_at_the_limit_without_inflating_the_rest() {
        let bomb = gzip(&vec![0u8; 60 << 20]);
        let (result, held) = inflate_all(bomb, 1 << 20).await;
        assert_eq!(result.unwrap_err().code, Code::PayloadTooLarge);
        assert!(held <= 1 << 20, "the inflated body never passes the limit ({held} bytes held)");
    }

    #[tokio::test]
    async fn a_stream_inflates_whole_across_frames_and_members_and_a_truncated_one_is_400() {
        let text: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_string().into_bytes()).collect();
        let (result, _) = inflate_all(gzip(&text), text.len()).await;
        assert_eq!(result.unwrap(), Bytes::from(text.clone()), "exactly at the limit is accepted");
        let two = [gzip(b"first "), gzip(b"second")].concat();
        assert_eq!(inflate_all(Bytes::from(two), 100).await.0.unwrap(), Bytes::from_static(b"first second"));
        let zipped = gzip(&text);
        let (result, _) = inflate_all(zipped.slice(..zipped.len() / 2), text.len()).await;
        assert_eq!(result.unwrap_err().code, Code::InvalidBody);
        let (result, _) = inflate_all(Bytes::from_static(b"not gzip at all"), 100).await;
        assert_eq!(result.unwrap_err().code, Code::InvalidBody);
    }
}
