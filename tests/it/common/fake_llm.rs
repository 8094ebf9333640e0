//! A protocol-faithful fake OpenAI Chat Completions server on loopback, for the failures a real
//! model server does not produce on demand (429, 5xx, a stalled stream, a client that leaves).
//!
//! It speaks HTTP/1.1 on `POST /v1/chat/completions`: a JSON `chat.completion` answer, or with
//! `stream: true` a chunked `text/event-stream` of `chat.completion.chunk` frames, a usage
//! frame and `data: [DONE]`. Each connection serves one request (`connection: close`). Every
//! request is recorded (body and `Authorization`), and a stream whose reader closed the
//! connection before the end is reported by [`FakeLlm::wait_closed`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::PATIENCE;

/// Text the fake puts in its error bodies; it must never reach a client of replicad.
pub const UPSTREAM_SECRET: &str = "upstream-internal-token-f00d";
/// Usage the fake reports for every answer.
pub const FAKE_USAGE: (u64, u64) = (11, 7);

/// What the fake does with one request.
#[derive(Clone, Debug)]
pub enum Script {
    /// Answers `status` with an error body holding [`UPSTREAM_SECRET`], and `Retry-After`.
    Fail { status: u16, retry_after: Option<u64> },
    /// Answers `words` (one delta each when streaming).
    Reply(Vec<&'static str>),
    /// Streams `words`, then sends nothing more and keeps the connection open.
    Stall(Vec<&'static str>),
    /// Never answers (not even the head) and keeps the connection open.
    Hang,
    /// Answers `words` (not streamed) after waiting `delay`.
    Slow(Duration, Vec<&'static str>),
    /// Streams a word every `delay` until the reader closes the connection.
    Endless(Duration),
}

/// A request the fake received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub body: Value,
    pub authorization: Option<String>,
}

struct State {
    script: VecDeque<Script>,
    /// Used once the script is exhausted.
    otherwise: Script,
    seen: Vec<Seen>,
    closed_early: usize,
}

/// The running fake; stops when dropped.
pub struct FakeLlm {
    /// `http://127.0.0.1:PORT/v1`, the value of `--llm-upstream NAME=...`.
    pub base_url: String,
    state: Arc<Mutex<State>>,
    closed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeLlm {
    /// Starts a fake that follows `script`, then answers every further request `otherwise`.
    pub async fn start(script: Vec<Script>, otherwise: Script) -> FakeLlm {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake upstream");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State { script: script.into(), otherwise, seen: Vec::new(), closed_early: 0 }));
        let closed = Arc::new(Notify::new());
        let (s, c) = (state.clone(), closed.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, s.clone(), c.clone()));
            }
        });
        FakeLlm { base_url, state, closed, task }
    }

    /// A fake that answers every request with `words`.
    pub async fn replying(words: Vec<&'static str>) -> FakeLlm {
        FakeLlm::start(vec![], Script::Reply(words)).await
    }

    /// The requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Waits until a stream's reader closed the connection before the stream ended.
    pub async fn wait_closed(&self) {
        let closed = async {
            loop {
                let notified = self.closed.notified();
                if self.state.lock().unwrap().closed_early > 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(PATIENCE, closed).await.expect("the upstream connection was not closed");
    }
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>, closed: Arc<Notify>) {
    let Some((head, body)) = read_request(&mut stream).await else { return };
    let authorization = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("authorization")))
        .map(|(_, v)| v.trim().to_string());
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let streaming = body["stream"] == json!(true);
    let script = {
        let mut s = state.lock().unwrap();
        s.seen.push(Seen { body, authorization });
        let next = s.script.pop_front();
        next.unwrap_or_else(|| s.otherwise.clone())
    };
    if !head.starts_with("POST /v1/chat/completions ") {
        let _ = respond(&mut stream, 404, &[], r#"{"error":{"message":"not found"}}"#).await;
        return;
    }
    let finished = match script {
        Script::Fail { status, retry_after } => {
            let extra: Vec<(&str, String)> = retry_after.map(|s| ("retry-after", s.to_string())).into_iter().collect();
            let body = json!({"error": {"message": format!("internal failure, token {UPSTREAM_SECRET}")}});
            respond(&mut stream, status, &extra, &body.to_string()).await.is_ok()
        }
        Script::Reply(words) if !streaming => {
            respond(&mut stream, 200, &[], &completion(&words.concat()).to_string()).await.is_ok()
        }
        Script::Reply(words) => stream_words(&mut stream, &words, Duration::ZERO, true).await,
        Script::Stall(words) => {
            stream_words(&mut stream, &words, Duration::ZERO, false).await && wait_eof(&mut stream).await
        }
        Script::Hang => wait_eof(&mut stream).await,
        Script::Slow(delay, words) => {
            tokio::time::sleep(delay).await;
            respond(&mut stream, 200, &[], &completion(&words.concat()).to_string()).await.is_ok()
        }
        Script::Endless(delay) => endless(&mut stream, delay).await,
    };
    if !finished {
        state.lock().unwrap().closed_early += 1;
        closed.notify_waiters();
    }
}

/// Reads the head and the `content-length` body of one request.
pub async fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < end + len {
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((head, buf[end..end + len].to_vec()))
}

pub async fn respond(stream: &mut TcpStream, status: u16, extra: &[(&str, String)], body: &str) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} Fake\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    stream.write_all(format!("{head}\r\n{body}").as_bytes()).await
}

fn completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": FAKE_USAGE.0, "completion_tokens": FAKE_USAGE.1, "total_tokens": FAKE_USAGE.0 + FAKE_USAGE.1},
    })
}

fn chunk_frame(delta: Value, finish: Option<&str>) -> String {
    let frame = json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {frame}\n\n")
}

/// Writes one HTTP chunk.
async fn write_chunk(stream: &mut TcpStream, data: &str) -> bool {
    stream.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes()).await.is_ok() && stream.flush().await.is_ok()
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\
                        connection: close\r\n\r\n";

/// Streams `words` (one frame each; CRLF line ends on every other frame, as servers differ);
/// with `end` also the finish, usage and `[DONE]` frames. `false` if the reader went away.
async fn stream_words(stream: &mut TcpStream, words: &[&str], delay: Duration, end: bool) -> bool {
    if stream.write_all(SSE_HEAD.as_bytes()).await.is_err() {
        return false;
    }
    if !write_chunk(stream, &chunk_frame(json!({"role": "assistant", "content": ""}), None)).await {
        return false;
    }
    for (i, w) in words.iter().enumerate() {
        tokio::time::sleep(delay).await;
        let frame = chunk_frame(json!({"content": w}), None);
        let frame = if i % 2 == 1 { frame.replace('\n', "\r\n") } else { frame };
        if !write_chunk(stream, &frame).await {
            return false;
        }
    }
    if !end {
        return true;
    }
    let usage = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake",
        "choices": [], "usage": {"prompt_tokens": FAKE_USAGE.0, "completion_tokens": FAKE_USAGE.1}});
    write_chunk(stream, &chunk_frame(json!({}), Some("stop"))).await
        && write_chunk(stream, &format!("data: {usage}\n\n")).await
        && write_chunk(stream, "data: [DONE]\n\n").await
        && stream.write_all(b"0\r\n\r\n").await.is_ok()
}

/// Waits until the reader closes the connection; always `false` (the stream never ended).
async fn wait_eof(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 256];
    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
    false
}

/// Streams a word every `delay`, watching for the reader to close; always `false`.
async fn endless(stream: &mut TcpStream, delay: Duration) -> bool {
    if stream.write_all(SSE_HEAD.as_bytes()).await.is_err() {
        return false;
    }
    let (mut reader, mut writer) = stream.split();
    let mut buf = [0u8; 256];
    loop {
        tokio::select! {
            r = reader.read(&mut buf) => if !matches!(r, Ok(n) if n > 0) { return false },
            _ = tokio::time::sleep(delay) => {
                let frame = chunk_frame(json!({"content": "word "}), None);
                let data = format!("{:x}\r\n{frame}\r\n", frame.len());
                if writer.write_all(data.as_bytes()).await.is_err() {
                    return false;
                }
            }
        }
    }
}
