//! A small typed client of the messengerA Bot API (`{base}/bot{token}/{method}`, JSON bodies,
//! answers `{ok, result}` or `{ok: false, error_code, description, parameters: {retry_after}}`),
//! over the project's HTTP client (reqwest). Only the methods the bot uses: `getMe`,
//! `getUpdates`, `sendMessage`, `sendChatAction`.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 401/404: the token is wrong or was revoked.
    Unauthorized(String),
    /// 429: wait this many seconds before the next call.
    RetryAfter(u64),
    /// Another error answer of the Bot API (e.g. 400 chat not found, 403 bot was blocked).
    Api { code: u16, description: String },
    /// The server could not be reached or answered something that is not the Bot API.
    Network(String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Unauthorized(d) => write!(f, "the messengerA token was rejected ({d})"),
            ApiError::RetryAfter(s) => write!(f, "messengerA asked to retry after {s} s"),
            ApiError::Api { code, description } => write!(f, "messengerA answered {code}: {description}"),
            ApiError::Network(e) => write!(f, "messengerA unreachable: {e}"),
        }
    }
}

/// `getMe`'s answer (the fields the bot uses).
#[derive(Deserialize, Debug, Clone)]
pub struct BotUser {
    pub id: i64,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub first_name: String,
}

/// The names a sender or a chat may carry.
#[derive(Deserialize, Debug, Clone, Default)]
pub struct Names {
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub first_name: Option<String>,
    #[serde(default)]
    pub last_name: Option<String>,
}

/// A sender (`from`).
#[derive(Deserialize, Debug, Clone)]
pub struct From {
    pub id: i64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(flatten)]
    pub names: Names,
}

/// A chat.
#[derive(Deserialize, Debug, Clone)]
pub struct Chat {
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(flatten)]
    pub names: Names,
}

/// The message a message replies to (only who sent it matters here).
#[derive(Deserialize, Debug, Clone)]
pub struct RepliedTo {
    #[serde(default)]
    pub from: Option<From>,
}

/// A message.
#[derive(Deserialize, Debug, Clone)]
pub struct Message {
    pub message_id: i64,
    #[serde(default)]
    pub message_thread_id: Option<i64>,
    #[serde(default)]
    pub is_topic_message: bool,
    #[serde(default)]
    pub from: Option<From>,
    pub chat: Chat,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub caption: Option<String>,
    #[serde(default)]
    pub reply_to_message: Option<Box<RepliedTo>>,
}

/// An update; kinds other than `message` are skipped (their ids still advance the offset).
#[derive(Deserialize, Debug, Clone)]
pub struct Update {
    pub update_id: i64,
    #[serde(default)]
    pub message: Option<Message>,
}

#[derive(Deserialize)]
struct Answer<T> {
    ok: bool,
    result: Option<T>,
    error_code: Option<u16>,
    description: Option<String>,
    parameters: Option<Parameters>,
}

#[derive(Deserialize)]
struct Parameters {
    retry_after: Option<u64>,
}

/// A client for one bot token. The token is only ever put in the request path.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    /// A client of `base` (e.g. the default public API) for `token`. `poll_timeout` (seconds)
    /// is the long-poll wait of `getUpdates`; requests time out 15 s after it.
    pub fn new(http: reqwest::Client, base: &str, token: &str) -> Client {
        Client { http, base: base.trim_end_matches('/').to_string(), token: token.to_string() }
    }

    async fn call<T: DeserializeOwned>(&self, method: &str, body: Value, timeout: Duration) -> Result<T, ApiError> {
        let url = format!("{}/bot{}/{method}", self.base, self.token);
        let resp = self.http.post(url).json(&body).timeout(timeout).send().await.map_err(|e| {
            // reqwest puts the URL (with the token) in its errors: keep only the kind.
            ApiError::Network(describe(&e))
        })?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| ApiError::Network(describe(&e)))?;
        let answer: Answer<T> = serde_json::from_slice(&bytes)
            .map_err(|_| ApiError::Network(format!("{method} answered HTTP {status} without a Bot API body")))?;
        if answer.ok {
            return answer.result.ok_or_else(|| ApiError::Network(format!("{method} answered ok without result")));
        }
        let code = answer.error_code.unwrap_or(status);
        let description = answer.description.unwrap_or_default();
        Err(match code {
            401 | 404 => ApiError::Unauthorized(description),
            429 => ApiError::RetryAfter(answer.parameters.and_then(|p| p.retry_after).unwrap_or(1)),
            _ => ApiError::Api { code, description },
        })
    }

    /// `getMe`: who the bot is. [`ApiError::Unauthorized`] for a bad token.
    pub async fn get_me(&self) -> Result<BotUser, ApiError> {
        self.call("getMe", json!({}), Duration::from_secs(15)).await
    }

    /// `getUpdates` from `offset`, waiting up to `timeout` seconds for one.
    pub async fn get_updates(&self, offset: i64, timeout: u64) -> Result<Vec<Update>, ApiError> {
        let body = json!({"offset": offset, "timeout": timeout, "allowed_updates": ["message"]});
        self.call("getUpdates", body, Duration::from_secs(timeout + 15)).await
    }

    /// `sendMessage` of `text` to `chat`, as a reply to `reply_to` when given, in the forum
    /// topic `thread` when given.
    pub async fn send_message(
        &self,
        chat: i64,
        text: &str,
        reply_to: Option<i64>,
        thread: Option<i64>,
    ) -> Result<(), ApiError> {
        let mut body = json!({"chat_id": chat, "text": text});
        if let Some(id) = reply_to {
            body["reply_parameters"] = json!({"message_id": id, "allow_sending_without_reply": true});
        }
        self.call::<Value>("sendMessage", in_thread(body, thread), Duration::from_secs(30)).await.map(|_| ())
    }

    /// `sendChatAction` `typing` in `chat` (shown for about five seconds).
    pub async fn send_typing(&self, chat: i64, thread: Option<i64>) -> Result<(), ApiError> {
        let body = json!({"chat_id": chat, "action": "typing"});
        self.call::<Value>("sendChatAction", in_thread(body, thread), Duration::from_secs(15)).await.map(|_| ())
    }
}

/// `body` with `message_thread_id` when `thread` is given (forum topics of supergroups).
fn in_thread(mut body: Value, thread: Option<i64>) -> Value {
    if let Some(t) = thread {
        body["message_thread_id"] = json!(t);
    }
    body
}

fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_decode() || e.is_body() {
        "the answer could not be read"
    } else {
        "request failed"
    };
    kind.to_string()
}
