//! What every OpenAI-compatible upstream call shares, whatever it asks for (chat completions in
//! `generate::openai`, embeddings in `embed::upstream`): how an upstream is
//! declared (`--llm-upstream NAME=BASE_URL`, its key from the environment), the timeouts and
//! retries of a call, and the one error a failure becomes.
//!
//! - Failures before the answer's head came (connect errors, 429, 5xx) are retried up to
//!   `max_retries` times with exponential backoff and jitter (`Retry-After` in seconds is
//!   honoured, capped at [`MAX_RETRY_AFTER`]); other failures are not retried.
//! - Timeouts: connecting ([`Policy::connect`]), the answer's head ([`Policy::first_byte`]) and
//!   the gap between two body chunks ([`Policy::idle`], applied by the readers of the body).
//! - Every failure is 502 `UPSTREAM_ERROR` with a message naming the upstream and the kind of
//!   failure only: never the key, never the upstream's body (which may echo secrets).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use crate::error::{Code, Error, Result};

/// Longest `Retry-After` honoured; a longer one is waited for this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

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

/// One declared upstream: its name, base URL, key and call policy, and a connection pool.
pub struct Client {
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
    Error::new(Code::UpstreamError, format!("the model server {name:?} {what}")).with_cause_text(detail)
}

impl Client {
    /// A client of upstream `name` (the process's TLS provider must be installed: `serve` does
    /// it); errors only if the TLS set-up fails.
    pub fn new(name: &str, base_url: &str, key: Option<String>, policy: Policy) -> Result<Client, DeclareError> {
        let client = reqwest::Client::builder()
            .connect_timeout(policy.connect)
            .build()
            .map_err(|source| DeclareError::Client { name: name.to_string(), source })?;
        let base_url = base_url.trim_end_matches('/').to_string();
        Ok(Client { name: name.to_string(), base_url, key, policy, client })
    }

    /// The upstream's name, as declared.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The timeouts and retries of its calls.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// 502 `UPSTREAM_ERROR` about this upstream; `detail` is logged, not shown.
    pub fn err(&self, what: &str, detail: impl std::fmt::Display) -> Error {
        upstream_error(&self.name, what, detail)
    }

    /// `POST {base}{path}` with the JSON `body`, retrying connect errors, 429 and 5xx; the
    /// response has a 2xx status and its body is still to be read (within [`Policy::idle`]).
    pub async fn post(&self, path: &str, body: &Value) -> Result<reqwest::Response> {
        let url = format!("{}{path}", self.base_url);
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

/// Why an upstream could not be declared (a start-up failure); the text names the flag, the
/// variable or the upstream at fault.
#[derive(Debug, thiserror::Error)]
pub enum DeclareError {
    /// An `--llm-upstream` value that is not `NAME=BASE_URL`.
    #[error("--llm-upstream {0:?}: expected NAME=BASE_URL (NAME of letters, digits, - or _)")]
    Spec(String),
    /// The file named by `REPLICAD_LLM_<NAME>_API_KEY_FILE` (`var`) cannot be read.
    #[error("{var}_FILE {path}: {source}")]
    KeyFile { var: String, path: String, source: std::io::Error },
    /// The HTTP client of upstream `name` cannot be built (the TLS set-up failed).
    #[error("HTTP client for upstream {name}: {source}")]
    Client { name: String, source: reqwest::Error },
}

/// `(NAME, BASE_URL)` of an `--llm-upstream NAME=BASE_URL` value; the error names the flag.
pub fn parse_spec(spec: &str) -> Result<(&str, &str), DeclareError> {
    spec.split_once('=')
        .filter(|(n, u)| valid_name(n) && (u.starts_with("http://") || u.starts_with("https://")))
        .ok_or_else(|| DeclareError::Spec(spec.to_string()))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The key of upstream `name` from `REPLICAD_LLM_<NAME>_API_KEY` or `..._API_KEY_FILE` (NAME
/// upper-cased, `-` as `_`); `None` when neither is set (no `Authorization` header is sent).
pub fn api_key(name: &str) -> Result<Option<String>, DeclareError> {
    let var = format!("REPLICAD_LLM_{}_API_KEY", name.to_ascii_uppercase().replace('-', "_"));
    if let Ok(key) = std::env::var(&var) {
        return Ok(Some(key.trim().to_string()).filter(|k| !k.is_empty()));
    }
    match std::env::var(format!("{var}_FILE")) {
        Ok(path) => std::fs::read_to_string(&path)
            .map(|k| Some(k.trim().to_string()).filter(|k| !k.is_empty()))
            .map_err(|source| DeclareError::KeyFile { var, path, source }),
        Err(_) => Ok(None),
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

    #[test]
    fn specs_are_name_equals_http_url() {
        assert_eq!(parse_spec("local=http://127.0.0.1:8081/v1").unwrap(), ("local", "http://127.0.0.1:8081/v1"));
        for bad in ["local", "=http://h", "a b=http://h", "a=ftp://h"] {
            let e = parse_spec(bad).unwrap_err();
            assert!(matches!(&e, DeclareError::Spec(s) if s == bad), "{bad}");
            assert!(e.to_string().contains("NAME=BASE_URL"), "{bad}");
        }
    }
}
