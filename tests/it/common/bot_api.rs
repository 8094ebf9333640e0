//! A stand-in for the messengerA Bot API on loopback, written for the tests: `POST
//! /bot<token>/<method>` with JSON bodies, answers `{ok, result}` or `{ok: false, error_code,
//! description, parameters}` as the real API does.
//!
//! Methods: `getMe`, `getUpdates` (`offset` confirms earlier updates; `timeout` long-polls until
//! an update is queued), `sendMessage`, `sendChatAction`. A token not (or no longer) known
//! answers 401; [`BotApi::rate_limit_sends`] makes the next `sendMessage` calls answer 429 with
//! `retry_after: 1`; [`BotApi::hold_sends`] makes `sendMessage` never answer (a server killed
//! meanwhile has not delivered the message). A base URL from [`BotApi::flags_for`] names a node
//! (`/node-<name>` before `/bot…`), so a test sees which node polled ([`BotApi::pollers`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::fake_llm::{read_request, respond};
use super::PATIENCE;

/// A bot known to the stand-in.
#[derive(Clone, Debug)]
pub struct Bot {
    pub id: i64,
    pub username: String,
}

#[derive(Default)]
struct State {
    bots: HashMap<String, Bot>,
    /// Updates not yet confirmed by an `offset`.
    queue: Vec<Value>,
    next_update_id: i64,
    /// Delivered `sendMessage` bodies.
    sent: Vec<Value>,
    /// `sendChatAction` bodies.
    actions: Vec<Value>,
    /// `offset` of every `getUpdates`.
    offsets: Vec<i64>,
    /// The node named in the path of every `getUpdates` ("" when none).
    pollers: Vec<String>,
    rate_limited: u32,
    throttled: usize,
    hold: bool,
    held: usize,
}

/// The running stand-in; stops when dropped.
pub struct BotApi {
    /// The value of `--messenger-a-api-base`.
    pub base_url: String,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BotApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl BotApi {
    pub async fn start() -> BotApi {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind bot api");
        let base_url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State { next_update_id: 500, ..State::default() }));
        let changed = Arc::new(Notify::new());
        let (s, c) = (state.clone(), changed.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, s.clone(), c.clone()));
            }
        });
        BotApi { base_url, state, changed, task }
    }

    /// The server flags that point replicad at this stand-in.
    pub fn flags(&self) -> Vec<String> {
        vec!["--messenger-a-api-base".into(), self.base_url.clone(), "--messenger-a-poll-timeout".into(), "5".into()]
    }

    /// [`BotApi::flags`] for the node `name` (its polls are told apart in [`BotApi::pollers`]).
    pub fn flags_for(&self, name: &str) -> Vec<String> {
        let mut flags = self.flags();
        flags[1] = format!("{}/node-{name}", self.base_url);
        flags
    }

    /// The node of every `getUpdates` so far, in order.
    pub fn pollers(&self) -> Vec<String> {
        self.state.lock().unwrap().pollers.clone()
    }

    /// Makes `token` valid for a bot `id` named `username`.
    pub fn add_bot(&self, token: &str, id: i64, username: &str) {
        self.state.lock().unwrap().bots.insert(token.into(), Bot { id, username: username.into() });
    }

    /// Revokes `token` (every call with it answers 401 from now on).
    pub fn revoke(&self, token: &str) {
        self.state.lock().unwrap().bots.remove(token);
        self.changed.notify_waiters();
    }

    /// Queues a `message` update; returns its `update_id`.
    pub fn push_message(&self, message: Value) -> i64 {
        let id = {
            let mut s = self.state.lock().unwrap();
            s.next_update_id += 1;
            let id = s.next_update_id;
            s.queue.push(json!({"update_id": id, "message": message}));
            id
        };
        self.changed.notify_waiters();
        id
    }

    /// The next `n` `sendMessage` calls answer 429 with `retry_after: 1`.
    pub fn rate_limit_sends(&self, n: u32) {
        self.state.lock().unwrap().rate_limited = n;
    }

    /// While on, `sendMessage` calls are never answered (and not delivered).
    pub fn hold_sends(&self, on: bool) {
        self.state.lock().unwrap().hold = on;
    }

    pub fn sent(&self) -> Vec<Value> {
        self.state.lock().unwrap().sent.clone()
    }

    pub fn actions(&self) -> Vec<Value> {
        self.state.lock().unwrap().actions.clone()
    }

    pub fn offsets(&self) -> Vec<i64> {
        self.state.lock().unwrap().offsets.clone()
    }

    /// How many `sendMessage` calls were answered 429.
    pub fn throttled(&self) -> usize {
        self.state.lock().unwrap().throttled
    }

    /// How many `sendMessage` calls are held unanswered.
    pub fn held(&self) -> usize {
        self.state.lock().unwrap().held
    }

    /// Waits (bounded by [`PATIENCE`]) until `check` holds for the stand-in's records.
    pub async fn wait_for(&self, what: &str, check: impl Fn(&BotApi) -> bool) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !check(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "waited in vain for {what}; sent: {:?}; offsets: {:?}",
                self.sent(),
                self.offsets()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>, changed: Arc<Notify>) {
    let Some((head, body)) = read_request(&mut stream).await else { return };
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    let body: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    let (node, path) = match path.strip_prefix("/node-").and_then(|p| p.split_once('/')) {
        Some((node, rest)) => (node.to_string(), format!("/{rest}")),
        None => (String::new(), path),
    };
    let Some((token, method)) = path.strip_prefix("/bot").and_then(|p| p.split_once('/')) else {
        let _ = respond(&mut stream, 404, &[], &error(404, "Not Found", None)).await;
        return;
    };
    let bot = state.lock().unwrap().bots.get(token).cloned();
    let Some(bot) = bot else {
        let _ = respond(&mut stream, 401, &[], &error(401, "Unauthorized", None)).await;
        return;
    };
    let answer = match method {
        "getMe" => ok(json!({"id": bot.id, "is_bot": true, "first_name": "Docs", "username": bot.username})),
        "getUpdates" => {
            state.lock().unwrap().pollers.push(node);
            get_updates(&state, &changed, &body).await
        }
        "sendChatAction" => {
            state.lock().unwrap().actions.push(body);
            ok(json!(true))
        }
        "sendMessage" => match send_message(&state, body) {
            Some(answer) => answer,
            None => {
                // Held: never answer; the connection stays open until the client goes.
                let mut buf = [0u8; 64];
                while matches!(tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await, Ok(n) if n > 0) {}
                return;
            }
        },
        _ => (404, error(404, "Not Found: method not found", None)),
    };
    let _ = respond(&mut stream, answer.0, &[], &answer.1).await;
}

fn ok(result: Value) -> (u16, String) {
    (200, json!({"ok": true, "result": result}).to_string())
}

fn error(code: u16, description: &str, retry_after: Option<u64>) -> String {
    let mut v = json!({"ok": false, "error_code": code, "description": description});
    if let Some(s) = retry_after {
        v["parameters"] = json!({"retry_after": s});
    }
    v.to_string()
}

async fn get_updates(state: &Mutex<State>, changed: &Notify, body: &Value) -> (u16, String) {
    let offset = body["offset"].as_i64().unwrap_or(0);
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    state.lock().unwrap().offsets.push(offset);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let notified = changed.notified();
        let ready: Vec<Value> = {
            let mut s = state.lock().unwrap();
            s.queue.retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            s.queue.clone()
        };
        if !ready.is_empty() || tokio::time::Instant::now() >= deadline {
            return ok(json!(ready));
        }
        let _ = tokio::time::timeout_at(deadline, notified).await;
    }
}

/// The answer to a `sendMessage`, or `None` when it is held.
fn send_message(state: &Mutex<State>, body: Value) -> Option<(u16, String)> {
    let mut s = state.lock().unwrap();
    if s.hold {
        s.held += 1;
        return None;
    }
    if s.rate_limited > 0 {
        s.rate_limited -= 1;
        s.throttled += 1;
        return Some((429, error(429, "Too Many Requests: retry after 1", Some(1))));
    }
    let message_id = 10_000 + s.sent.len() as i64;
    let chat = body["chat_id"].clone();
    s.sent.push(body.clone());
    Some(ok(json!({"message_id": message_id, "chat": {"id": chat, "type": "private"}, "text": body["text"]})))
}
