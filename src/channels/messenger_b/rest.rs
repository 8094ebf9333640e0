//! The messengerB REST side of the bot, over twilight-http: the client for a token and the
//! configured base URL (`--messenger-b-api-base`), the identity check, and what an error means
//! for the bot.

use std::time::Duration;

use twilight_http::api_error::ApiError;
use twilight_http::error::ErrorType;
use twilight_http::Client;
use twilight_model::user::CurrentUser;

use crate::config::{Config, DEFAULT_MESSENGER_B_API_BASE};

/// What a failed REST call means.
#[derive(Debug, Clone, PartialEq)]
pub enum RestError {
    /// 401: the token is wrong or was revoked.
    Unauthorized,
    /// 429: wait this long before the next call.
    RetryAfter(Duration),
    /// Another error answer (e.g. 403 missing access, 404 unknown channel).
    Api { status: u16, message: String },
    /// The API could not be reached or answered something unreadable.
    Network(String),
}

impl std::fmt::Display for RestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestError::Unauthorized => f.write_str("the messengerB token was rejected (401 Unauthorized)"),
            RestError::RetryAfter(d) => write!(f, "messengerB asked to retry after {:.1} s", d.as_secs_f64()),
            RestError::Api { status, message } => write!(f, "messengerB answered {status}: {message}"),
            RestError::Network(e) => write!(f, "messengerB unreachable: {e}"),
        }
    }
}

impl From<twilight_http::Error> for RestError {
    fn from(e: twilight_http::Error) -> RestError {
        match e.kind() {
            ErrorType::Unauthorized => RestError::Unauthorized,
            ErrorType::Response { status, error, .. } => match (status.get(), error) {
                (401, _) => RestError::Unauthorized,
                (429, ApiError::Ratelimited(r)) => {
                    RestError::RetryAfter(Duration::from_secs_f64(r.retry_after.clamp(0.0, 3600.0)))
                }
                (429, _) => RestError::RetryAfter(Duration::from_secs(1)),
                (status, error) => RestError::Api { status, message: error.to_string() },
            },
            ErrorType::RequestTimedOut => RestError::Network("timed out".into()),
            _ => RestError::Network(e.to_string()),
        }
    }
}

/// A REST client of `token` for the configured API base (the public API when it is the
/// default, else the base's `host:port` over its scheme). An unauthorized answer makes the
/// client refuse every later call (twilight's protection against bans).
pub fn client(config: &Config, token: &str) -> Client {
    let builder = Client::builder().token(token.to_string()).timeout(Duration::from_secs(30));
    let base = config.messenger_b_api_base.trim_end_matches('/');
    if base == DEFAULT_MESSENGER_B_API_BASE {
        return builder.build();
    }
    match url::Url::parse(base) {
        Ok(u) => {
            let host = u.host_str().unwrap_or_default();
            let host = match u.port() {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            };
            builder.proxy(host, u.scheme() == "http").build()
        }
        Err(_) => builder.build(), // checked at start-up (`Config::validate`)
    }
}

/// "Get current user": who the bot of the client's token is.
pub async fn current_user(client: &Client) -> Result<CurrentUser, RestError> {
    let response = client.current_user().await?;
    response.model().await.map_err(|e| RestError::Network(format!("get current user: {e}")))
}
