//! An OpenAI-compatible upstream (Chat Completions, `POST {base}/chat/completions`), as spoken by
//! hosted providers, llama.cpp's `llama-server`, vLLM and Ollama.
//!
//! - Requests carry `model`, `messages` (see [`super::prompt`]), `max_tokens` when asked, and
//!   with `stream: true` also `stream_options.include_usage` so the usage arrives as a last frame.
//! - Failures before the reply started (connect errors, 429, 5xx) are retried up to
//!   `max_retries` times with exponential backoff and jitter (`Retry-After` in seconds is
//!   honoured, capped at [`MAX_RETRY_AFTER`]); other failures are not retried.
//! - Timeouts: connecting ([`Policy::connect`]), the answer's head ([`Policy::first_byte`]) and
//!   the gap between two body chunks ([`Policy::idle`]).
//! - Every failure is 502 `UPSTREAM_ERROR` with a message naming the upstream and the kind of
//!   failure only: never the key, never the upstream's body (which may echo secrets).

use std::collections::VecDeque;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use super::{prompt, Backend, BoxFuture, Generation, Piece, Pieces, Usage};
use crate::error::{Code, Error, Result};

/// Longest `Retry-After` honoured; a longer one is waited for this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Largest non-streamed upstream answer read, in bytes.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// Timeouts and retries of upstream calls.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub connect: Duration,
    pub first_byte: Duration,
    pub idle: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First backoff; doubled on every retry, then jittered by ±50 %.
    pub backoff: Duration,
}

/// One configured upstream (`--llm-upstream NAME=BASE_URL`).
pub struct Upstream {
    name: String,
    /// Base URL without a trailing slash, e.g. `http://127.0.0.1:8081/v1`.
    base_url: String,
    key: Option<String>,
    policy: Policy,
    client: reqwest::Client,
}

/// 502 `UPSTREAM_ERROR` about upstream `name`; `detail` is logged, not shown.
pub fn upstream_error(name: &str, what: &str, detail: impl std::fmt::Display) -> Error {
    tracing::warn!(upstream = name, error = %detail, "{what}");
    crate::telemetry::upstream_failed(name);
    Error {
        code: Code::UpstreamError,
        message: format!("the model server {name:?} {what}"),
        internal: Some(detail.to_string()),
    }
}

impl Upstream {
    /// An upstream client (the process's TLS provider must be installed: `serve` does it);
    /// errors only if the TLS set-up fails.
    pub fn new(name: &str, base_url: &str, key: Option<String>, policy: Policy) -> Result<Upstream, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(policy.connect)
            .build()
            .map_err(|e| format!("HTTP client for upstream {name}: {e}"))?;
        let base_url = base_url.trim_end_matches('/').to_string();
        Ok(Upstream { name: name.to_string(), base_url, key, policy, client })
    }

    fn err(&self, what: &str, detail: impl std::fmt::Display) -> Error {
        upstream_error(&self.name, what, detail)
    }

    /// Sends `body`, retrying connect errors, 429 and 5xx; the response has a 2xx status.
    async fn send(&self, body: &Value) -> Result<reqwest::Response> {
        let url = format!("{}/chat/completions", self.base_url);
        let mut attempt = 0;
        loop {
            let mut rb = self.client.post(&url).json(body);
            if let Some(key) = &self.key {
                rb = rb.bearer_auth(key);
            }
            let (failure, retry_after) = match tokio::time::timeout(self.policy.first_byte, rb.send()).await {
                Err(_) => return Err(self.err("did not answer in time", "first-byte timeout")),
                Ok(Ok(resp)) if resp.status().is_success() => return Ok(resp),
                Ok(Ok(resp)) => {
                    let status = resp.status();
                    if !(status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()) {
                        return Err(self.err(&format!("refused the request (HTTP {})", status.as_u16()), status));
                    }
                    (format!("HTTP {}", status.as_u16()), retry_after(&resp))
                }
                Ok(Err(e)) if e.is_connect() => ("could not be reached".to_string(), None),
                Ok(Err(e)) => return Err(self.err("failed", e.without_url())),
            };
            if attempt >= self.policy.max_retries {
                return Err(self.err(&format!("failed after {} attempt(s) ({failure})", attempt + 1), &failure));
            }
            let wait = retry_after.unwrap_or_else(|| backoff(self.policy.backoff, attempt));
            tracing::info!(upstream = %self.name, %failure, wait_ms = wait.as_millis() as u64, "retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not honoured), capped at [`MAX_RETRY_AFTER`].
fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    let secs: u64 = resp.headers().get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

/// `base · 2^attempt`, scaled by a random factor in [0.5, 1.5).
pub fn backoff(base: Duration, attempt: u32) -> Duration {
    let mut b = [0u8; 2];
    let _ = getrandom::fill(&mut b);
    let jitter = 0.5 + f64::from(u16::from_le_bytes(b)) / 65536.0;
    base.saturating_mul(1 << attempt.min(10)).mul_f64(jitter)
}

impl Backend for Upstream {
    fn name(&self) -> &str {
        &self.name
    }

    fn start<'a>(
        &'a self,
        g: &'a Generation,
        model: &'a str,
        vision: bool,
        stream: bool,
    ) -> BoxFuture<'a, Result<Box<dyn Pieces>>> {
        Box::pin(async move {
            let mut body = json!({"model": model, "messages": prompt::messages(g, vision), "stream": stream});
            if let Some(n) = g.max_tokens {
                body["max_tokens"] = json!(n);
            }
            if stream {
                body["stream_options"] = json!({"include_usage": true});
            }
            let started = std::time::Instant::now();
            let resp = self.send(&body).await?;
            crate::telemetry::upstream_answered(&self.name, started.elapsed());
            let mut reader = Reader { resp, name: self.name.clone(), idle: self.policy.idle, buf: Vec::new() };
            Ok(if stream {
                // Until the first delta, the stream may be silent as long as a first byte may take.
                reader.idle = self.policy.first_byte;
                let idle = self.policy.idle;
                Box::new(SseReader { reader, idle, data: String::new(), pending: VecDeque::new(), done: false })
                    as Box<dyn Pieces>
            } else {
                Box::new(WholeReader { reader: Some(reader), rest: VecDeque::new() }) as Box<dyn Pieces>
            })
        })
    }

    fn complete_messages<'a>(
        &'a self,
        messages: &'a [Value],
        model: &'a str,
        max_tokens: Option<u32>,
    ) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            let mut body = json!({"model": model, "messages": messages, "stream": false});
            if let Some(n) = max_tokens {
                body["max_tokens"] = json!(n);
            }
            let started = std::time::Instant::now();
            let resp = self.send(&body).await?;
            crate::telemetry::upstream_answered(&self.name, started.elapsed());
            let reader = Reader { resp, name: self.name.clone(), idle: self.policy.idle, buf: Vec::new() };
            let text = WholeReader::read(reader).await?.into_iter().find_map(|p| match p {
                Piece::Text(t) => Some(t),
                _ => None,
            });
            Ok(text)
        })
    }
}

/// A response body read chunk by chunk, each within the idle timeout.
struct Reader {
    resp: reqwest::Response,
    name: String,
    idle: Duration,
    buf: Vec<u8>,
}

impl Reader {
    /// Appends the next chunk to `buf`; `false` at the end of the body.
    async fn fill(&mut self) -> Result<bool> {
        match tokio::time::timeout(self.idle, self.resp.chunk()).await {
            Err(_) => Err(upstream_error(&self.name, "stalled (no data within the idle timeout)", "idle timeout")),
            Ok(Err(e)) => Err(upstream_error(&self.name, "broke off its answer", e.without_url())),
            Ok(Ok(None)) => Ok(false),
            Ok(Ok(Some(bytes))) => {
                self.buf.extend_from_slice(&bytes);
                Ok(true)
            }
        }
    }

    fn malformed(&self, detail: impl std::fmt::Display) -> Error {
        upstream_error(&self.name, "sent an answer that is not a chat completion", detail)
    }
}

/// The usage object of an answer or frame, if it has one.
fn usage_of(v: &Value) -> Option<Usage> {
    let u = v.get("usage").filter(|u| u.is_object())?;
    Some(Usage {
        prompt_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
        completion_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
    })
}

/// A non-streamed answer: one text piece, then its usage.
struct WholeReader {
    reader: Option<Reader>,
    rest: VecDeque<Piece>,
}

impl WholeReader {
    async fn read(mut r: Reader) -> Result<VecDeque<Piece>> {
        while r.fill().await? {
            if r.buf.len() > MAX_BODY_BYTES {
                return Err(r.malformed("answer too large"));
            }
        }
        let v: Value = serde_json::from_slice(&r.buf).map_err(|e| r.malformed(e))?;
        let content = v["choices"][0]["message"]["content"].as_str().ok_or_else(|| r.malformed("no content"))?;
        let mut out = VecDeque::from([Piece::Text(content.to_string())]);
        out.extend(usage_of(&v).map(Piece::Usage));
        Ok(out)
    }
}

impl Pieces for WholeReader {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Piece>>> {
        Box::pin(async move {
            if let Some(r) = self.reader.take() {
                self.rest = WholeReader::read(r).await?;
            }
            Ok(self.rest.pop_front())
        })
    }
}

/// A streamed answer (`text/event-stream` of `chat.completion.chunk` frames, `data: [DONE]`).
struct SseReader {
    reader: Reader,
    /// The idle timeout once the first piece came.
    idle: Duration,
    /// `data:` lines of the event being read.
    data: String,
    pending: VecDeque<Piece>,
    done: bool,
}

impl SseReader {
    /// Takes the next complete line out of the buffer.
    fn take_line(&mut self) -> Option<String> {
        let end = self.reader.buf.iter().position(|b| *b == b'\n')?;
        let line: Vec<u8> = self.reader.buf.drain(..=end).collect();
        let line = String::from_utf8_lossy(&line[..end]);
        Some(line.strip_suffix('\r').unwrap_or(&line).to_string())
    }

    /// Applies one SSE line: `data:` lines accumulate, a blank line ends the event.
    fn line(&mut self, line: &str) -> Result<()> {
        if line.is_empty() {
            let data = std::mem::take(&mut self.data);
            return if data.is_empty() { Ok(()) } else { self.event(&data) };
        }
        if let Some(rest) = line.strip_prefix("data:") {
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        }
        Ok(())
    }

    fn event(&mut self, data: &str) -> Result<()> {
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| self.reader.malformed(e))?;
        if v.get("error").is_some() {
            return Err(upstream_error(&self.reader.name, "reported an error in its stream", "error frame"));
        }
        if let Some(text) = v["choices"][0]["delta"]["content"].as_str().filter(|t| !t.is_empty()) {
            self.pending.push_back(Piece::Text(text.to_string()));
        }
        self.pending.extend(usage_of(&v).map(Piece::Usage));
        Ok(())
    }
}

impl Pieces for SseReader {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Piece>>> {
        Box::pin(async move {
            loop {
                if let Some(p) = self.pending.pop_front() {
                    self.reader.idle = self.idle;
                    return Ok(Some(p));
                }
                if self.done {
                    return Ok(None);
                }
                if let Some(line) = self.take_line() {
                    self.line(&line)?;
                    continue;
                }
                if !self.reader.fill().await? {
                    // The body ended without `[DONE]`: end the last event, accept what came.
                    self.line("")?;
                    self.done = true;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter() {
        let base = Duration::from_millis(100);
        for attempt in 0..4 {
            let d = backoff(base, attempt);
            let nominal = base * (1 << attempt);
            assert!(d >= nominal / 2 && d < nominal * 3 / 2, "{d:?} for attempt {attempt}");
        }
    }
}
