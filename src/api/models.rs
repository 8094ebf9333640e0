//! `GET /v1/replicas/models`: the model catalog (spec §2.4).

use std::sync::Arc;

use serde_json::json;

use crate::app::App;
use crate::error::Result;
use crate::http::request::Req;
use crate::http::response::Reply;

/// # `GET /v1/replicas/models`
/// `{success, models: {<id>: {name, description, deprecated}}}`, 19 entries.
pub async fn list(app: Arc<App>, _req: Req) -> Result<Reply> {
    Ok(Reply::ok(&json!({ "models": app.models.entries })))
}
