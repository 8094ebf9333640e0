//! `GET /v1/replicas/models`: the model catalog (spec §2.4).

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::app::App;
use crate::error::Result;
use crate::http::request::Req;
use crate::http::response::Reply;

/// `{models}` of the catalog (the `ModelCatalog` schema): the entries by model id, in catalog
/// order, each a `models::ModelInfo` as loaded (its wire fields only).
#[derive(Serialize)]
pub struct CatalogView<'a> {
    pub models: &'a Map<String, Value>,
}

/// # `GET /v1/replicas/models`
/// `{success, models: {<id>: {name, description, deprecated}}}`, 19 entries.
pub async fn list(app: Arc<App>, _req: Req) -> Result<Reply> {
    Ok(Reply::ok(&CatalogView { models: &app.models.entries }))
}
