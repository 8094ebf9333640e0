//! A stand-in for the messengerB platform on loopback, written for the tests: the gateway
//! (WebSocket, JSON payloads `{op, d, s, t}`) and the REST API (`/api/v10/…`, `Authorization:
//! Bot <token>`).
//!
//! Gateway: HELLO (heartbeat interval 500 ms) on connect; heartbeats (op 1) are ACKed (op 11);
//! IDENTIFY (op 2) with a known token answers the READY dispatch (a new session, its
//! `resume_gateway_url` this same gateway), with an unknown one closes 4004; RESUME (op 6) of a
//! known session answers the RESUMED dispatch. [`MessengerBApi::push_message`] dispatches
//! MESSAGE_CREATE to the live session (queued until one is live); [`MessengerBApi::reconnect`]
//! sends RECONNECT (op 7); [`MessengerBApi::revoke`] forgets the token and closes its sessions
//! with 4004.
//!
//! REST: `GET users/@me`, `GET channels/{id}`, `POST channels/{id}/messages`, `POST
//! channels/{id}/typing`; an unknown token answers 401; [`MessengerBApi::rate_limit_sends`]
//! makes the next message creations answer 429 with `retry_after`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio_websockets::{CloseCode, Message};

use super::fake_llm::{read_request, respond};
use super::PATIENCE;

/// What the stand-in sends on a gateway connection.
enum Out {
    Payload(Value),
    Close(u16, &'static str),
}

struct Conn {
    id: usize,
    token: String,
    session: String,
    tx: UnboundedSender<Out>,
}

#[derive(Default)]
struct State {
    /// token → (bot user id, username)
    bots: HashMap<String, (u64, String)>,
    channels: HashMap<String, String>,
    /// Live sessions (identified or resumed).
    live: Vec<Conn>,
    /// session id → (token, last sequence)
    sessions: HashMap<String, (String, u64)>,
    pending: VecDeque<Value>,
    connections: usize,
    identifies: usize,
    resumes: usize,
    heartbeats: usize,
    /// Created messages: (channel id, body).
    sent: Vec<(String, Value)>,
    typing: Vec<String>,
    rate_limited: u32,
    throttled: usize,
}

/// The running stand-in; stops when dropped.
pub struct MessengerBApi {
    pub rest_url: String,
    pub gateway_url: String,
    state: Arc<Mutex<State>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for MessengerBApi {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl MessengerBApi {
    pub async fn start() -> MessengerBApi {
        let rest = TcpListener::bind("127.0.0.1:0").await.expect("bind rest");
        let gateway = TcpListener::bind("127.0.0.1:0").await.expect("bind gateway");
        let rest_url = format!("http://{}", rest.local_addr().unwrap());
        let gateway_url = format!("ws://{}", gateway.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let (s1, s2, url) = (state.clone(), state.clone(), gateway_url.clone());
        let tasks = vec![
            tokio::spawn(async move {
                while let Ok((stream, _)) = rest.accept().await {
                    tokio::spawn(serve_rest(stream, s1.clone()));
                }
            }),
            tokio::spawn(async move {
                while let Ok((stream, _)) = gateway.accept().await {
                    tokio::spawn(serve_gateway(stream, s2.clone(), url.clone()));
                }
            }),
        ];
        MessengerBApi { rest_url, gateway_url, state, tasks }
    }

    /// The server flags that point replicad at this stand-in.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--messenger-b-api-base".into(),
            self.rest_url.clone(),
            "--messenger-b-gateway".into(),
            self.gateway_url.clone(),
        ]
    }

    /// Makes `token` valid for a bot `id` named `username`.
    pub fn add_bot(&self, token: &str, id: u64, username: &str) {
        self.state.lock().unwrap().bots.insert(token.into(), (id, username.into()));
    }

    /// Names a server channel (answered by `GET channels/{id}`).
    pub fn add_channel(&self, id: &str, name: &str) {
        self.state.lock().unwrap().channels.insert(id.into(), name.into());
    }

    /// Revokes `token`: REST answers 401, its sessions are closed with 4004.
    pub fn revoke(&self, token: &str) {
        let mut s = self.state.lock().unwrap();
        s.bots.remove(token);
        for c in s.live.iter().filter(|c| c.token == token) {
            let _ = c.tx.send(Out::Close(4004, "Authentication failed."));
        }
    }

    /// Sends RECONNECT (op 7) on every live session.
    pub fn reconnect(&self) {
        for c in &self.state.lock().unwrap().live {
            let _ = c.tx.send(Out::Payload(json!({"op": 7, "d": null, "s": null, "t": null})));
        }
    }

    /// Dispatches MESSAGE_CREATE with `message` to the live session (or the next one).
    pub fn push_message(&self, message: Value) {
        let mut s = self.state.lock().unwrap();
        s.pending.push_back(message);
        flush(&mut s);
    }

    /// The next `n` message creations answer 429 (`retry_after` 0.2 s).
    pub fn rate_limit_sends(&self, n: u32) {
        self.state.lock().unwrap().rate_limited = n;
    }

    /// Created messages of `channel`: their bodies.
    pub fn sent_to(&self, channel: &str) -> Vec<Value> {
        self.state.lock().unwrap().sent.iter().filter(|(c, _)| c == channel).map(|(_, b)| b.clone()).collect()
    }

    pub fn typing(&self) -> Vec<String> {
        self.state.lock().unwrap().typing.clone()
    }

    /// (connections, identifies, resumes, heartbeats ACKed, 429s answered)
    pub fn counts(&self) -> (usize, usize, usize, usize, usize) {
        let s = self.state.lock().unwrap();
        (s.connections, s.identifies, s.resumes, s.heartbeats, s.throttled)
    }

    /// Whether a session is live (identified or resumed, not closed).
    pub fn live(&self) -> bool {
        !self.state.lock().unwrap().live.is_empty()
    }

    /// Waits (bounded by [`PATIENCE`]) until `check` holds for the stand-in.
    pub async fn wait_for(&self, what: &str, check: impl Fn(&MessengerBApi) -> bool) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !check(self) {
            let sent = self.state.lock().unwrap().sent.clone();
            let counts = self.counts();
            assert!(
                tokio::time::Instant::now() < deadline,
                "waited in vain for {what}; sent: {sent:?}; counts: {counts:?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// Dispatches the pending messages on the first live session.
fn flush(s: &mut State) {
    let Some(conn) = s.live.first() else { return };
    let (tx, session) = (conn.tx.clone(), conn.session.clone());
    while let Some(m) = s.pending.pop_front() {
        let seq = next_seq(s, &session);
        let _ = tx.send(Out::Payload(json!({"op": 0, "t": "MESSAGE_CREATE", "s": seq, "d": m})));
    }
}

fn next_seq(s: &mut State, session: &str) -> u64 {
    let entry = s.sessions.get_mut(session).expect("known session");
    entry.1 += 1;
    entry.1
}

async fn serve_gateway(stream: TcpStream, state: Arc<Mutex<State>>, url: String) {
    let Ok((_, mut ws)) = tokio_websockets::ServerBuilder::new().accept(stream).await else { return };
    let (tx, mut rx) = unbounded_channel::<Out>();
    let id = {
        let mut s = state.lock().unwrap();
        s.connections += 1;
        s.connections
    };
    let hello = json!({"op": 10, "d": {"heartbeat_interval": 500}, "s": null, "t": null});
    if ws.send(Message::text(hello.to_string())).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            incoming = ws.next() => {
                let Some(Ok(msg)) = incoming else { break };
                if msg.is_close() {
                    break;
                }
                let Some(text) = msg.as_text() else { continue };
                let payload: Value = serde_json::from_str(text).unwrap_or(json!({}));
                if let Some(reply) = on_payload(&state, &tx, id, &url, &payload) {
                    if ws.send(Message::text(reply.to_string())).await.is_err() {
                        break;
                    }
                }
            }
            out = rx.recv() => match out {
                Some(Out::Payload(v)) => {
                    if ws.send(Message::text(v.to_string())).await.is_err() {
                        break;
                    }
                }
                Some(Out::Close(code, reason)) => {
                    let code = CloseCode::try_from(code).expect("close code");
                    let _ = ws.send(Message::close(Some(code), reason)).await;
                    let _ = tokio::time::timeout(Duration::from_secs(2), ws.next()).await;
                    break;
                }
                None => break,
            },
        }
    }
    state.lock().unwrap().live.retain(|c| c.id != id);
}

/// The answer to one gateway payload of the bot, if any.
fn on_payload(state: &Mutex<State>, tx: &UnboundedSender<Out>, id: usize, url: &str, p: &Value) -> Option<Value> {
    let mut s = state.lock().unwrap();
    let token = p["d"]["token"].as_str().unwrap_or("").trim_start_matches("Bot ").to_string();
    match p["op"].as_u64() {
        Some(1) => {
            s.heartbeats += 1;
            Some(json!({"op": 11, "d": null, "s": null, "t": null}))
        }
        Some(2) => {
            let Some((bot_id, name)) = s.bots.get(&token).cloned() else {
                let _ = tx.send(Out::Close(4004, "Authentication failed."));
                return None;
            };
            s.identifies += 1;
            let session = format!("session-{}", s.identifies);
            s.sessions.insert(session.clone(), (token.clone(), 1));
            s.live.push(Conn { id, token, session: session.clone(), tx: tx.clone() });
            let ready = json!({
                "v": 10, "session_id": session, "resume_gateway_url": url, "guilds": [],
                "application": {"id": bot_id.to_string(), "flags": 0},
                "user": {"id": bot_id.to_string(), "username": name, "discriminator": "0", "avatar": null,
                         "bot": true, "mfa_enabled": false, "verified": true, "flags": 0},
            });
            let _ = tx.send(Out::Payload(json!({"op": 0, "t": "READY", "s": 1, "d": ready})));
            flush(&mut s);
            None
        }
        Some(6) => {
            let session = p["d"]["session_id"].as_str().unwrap_or("").to_string();
            let known = s.sessions.get(&session).is_some_and(|(t, _)| *t == token) && s.bots.contains_key(&token);
            if !known {
                return Some(json!({"op": 9, "d": false, "s": null, "t": null}));
            }
            s.resumes += 1;
            let seq = next_seq(&mut s, &session);
            s.live.push(Conn { id, token, session, tx: tx.clone() });
            let _ = tx.send(Out::Payload(json!({"op": 0, "t": "RESUMED", "s": seq, "d": {}})));
            flush(&mut s);
            None
        }
        _ => None,
    }
}

async fn serve_rest(mut stream: TcpStream, state: Arc<Mutex<State>>) {
    let Some((head, body)) = read_request(&mut stream).await else { return };
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or("").to_string(), words.next().unwrap_or("").to_string());
    let token = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("authorization")).map(|(_, v)| v.trim()))
        .unwrap_or("")
        .trim_start_matches("Bot ")
        .to_string();
    let body: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    let (status, answer) = rest_answer(&state, &method, &path, &token, body);
    let _ = respond(&mut stream, status, &[], &answer.to_string()).await;
}

fn rest_answer(state: &Mutex<State>, method: &str, path: &str, token: &str, body: Value) -> (u16, Value) {
    let mut s = state.lock().unwrap();
    let Some((bot_id, name)) = s.bots.get(token).cloned() else {
        return (401, json!({"message": "401: Unauthorized", "code": 0}));
    };
    let path = path.strip_prefix("/api/v10/").unwrap_or("");
    let parts: Vec<&str> = path.split('/').collect();
    match (method, parts.as_slice()) {
        ("GET", ["users", "@me"]) => (
            200,
            json!({"id": bot_id.to_string(), "username": name, "discriminator": "0", "avatar": null,
                   "bot": true, "mfa_enabled": false, "verified": true, "flags": 0, "public_flags": 0}),
        ),
        ("GET", ["channels", id]) => match s.channels.get(*id) {
            Some(n) => (200, json!({"id": id, "type": 0, "name": n, "guild_id": "200", "position": 0})),
            None => (404, json!({"message": "Unknown Channel", "code": 10003})),
        },
        ("POST", ["channels", id, "typing"]) => {
            s.typing.push(id.to_string());
            (200, json!({}))
        }
        ("POST", ["channels", id, "messages"]) => {
            if s.rate_limited > 0 {
                s.rate_limited -= 1;
                s.throttled += 1;
                return (429, json!({"message": "You are being rate limited.", "retry_after": 0.2, "global": false}));
            }
            s.sent.push((id.to_string(), body.clone()));
            (200, json!({"id": (50_000 + s.sent.len()).to_string(), "channel_id": id, "content": body["content"]}))
        }
        _ => (404, json!({"message": "404: Not Found", "code": 0})),
    }
}
