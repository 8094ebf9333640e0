//! An OpenAI-compatible upstream (Chat Completions, `POST {base}/chat/completions`), as spoken by
//! hosted providers, llama.cpp's `llama-server`, vLLM and Ollama.
//!
//! - Requests carry `model`, `messages` (see [`super::prompt`]), `max_tokens` when asked, and
//!   with `stream: true` also `stream_options.include_usage` so the usage arrives as a last frame.
//! - Retries, timeouts and errors are those of every upstream call ([`crate::upstream`]); the
//!   idle timeout ([`Policy::idle`]) is applied here, between two chunks of the body.

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::{json, Value};

use super::{prompt, Backend, BoxFuture, Generation, Piece, Pieces, Usage};
use crate::error::{Error, Result};

use crate::upstream::{upstream_error, Policy};

/// Largest non-streamed upstream answer read, in bytes.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// One configured upstream (`--llm-upstream NAME=BASE_URL`) serving chat completions.
pub struct Upstream {
    http: crate::upstream::Client,
}

impl Upstream {
    /// An upstream client (the process's TLS provider must be installed: `serve` does it);
    /// errors only if the TLS set-up fails.
    pub fn new(
        name: &str,
        base_url: &str,
        key: Option<String>,
        policy: Policy,
    ) -> Result<Upstream, crate::upstream::DeclareError> {
        Ok(Upstream { http: crate::upstream::Client::new(name, base_url, key, policy)? })
    }

    /// Sends `body`, retrying connect errors, 429 and 5xx; the response has a 2xx status.
    async fn send(&self, body: &Value) -> Result<reqwest::Response> {
        self.http.post("/chat/completions", body).await
    }
}

impl Backend for Upstream {
    fn name(&self) -> &str {
        self.http.name()
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
            crate::telemetry::upstream_answered(self.http.name(), started.elapsed());
            let mut reader =
                Reader { resp, name: self.http.name().to_string(), idle: self.http.policy().idle, buf: Vec::new() };
            Ok(if stream {
                // Until the first delta, the stream may be silent as long as a first byte may take.
                reader.idle = self.http.policy().first_byte;
                let idle = self.http.policy().idle;
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
            crate::telemetry::upstream_answered(self.http.name(), started.elapsed());
            let reader =
                Reader { resp, name: self.http.name().to_string(), idle: self.http.policy().idle, buf: Vec::new() };
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
