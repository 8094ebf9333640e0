//! `GET /v1/replicas/models`: the model catalog (spec §2.4).

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::{Operation, Serve};
use crate::app::App;
use crate::error::Result;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::op;

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

/// The document's row of the model catalog.
pub fn operations() -> Vec<Operation> {
    vec![op("GET", "/v1/replicas/models", "listModels", "Models", "The model catalog")
        .ok(200, "ModelCatalogResponse")
        .describe(
            "Exactly 19 models keyed by id (spec §2.4). A model with no configured upstream is served by the \
            embedded, offline generator.",
        )
        .serve(Access::Either, handler!(list))]
}
