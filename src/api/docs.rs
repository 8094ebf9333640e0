//! The published contract: `GET /v1/openapi.json` (an operation of the route table) and the
//! docs page `GET /docs`, which renders it with Swagger UI embedded in the binary (no CDN;
//! vendored under `data/docs/swagger-ui/`, Apache-2.0). The docs page and its assets are not API
//! operations: [`pages`] adds them to the router but not to `api::routes()` or the document.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use hyper::Method;

use super::{BodyKind, Route};
use super::{Operation, Serve};
use crate::app::App;
use crate::error::{Error, Result};
use crate::http::asset::Asset;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::op;

const INDEX_HTML: &[u8] = include_bytes!("../../data/docs/index.html");
const INIT_JS: &[u8] = include_bytes!("../../data/docs/init.js");
const BUNDLE_JS: &[u8] = include_bytes!("../../data/docs/swagger-ui/swagger-ui-bundle.js");
const UI_CSS: &[u8] = include_bytes!("../../data/docs/swagger-ui/swagger-ui.css");
const LICENSE: &[u8] = include_bytes!("../../data/docs/swagger-ui/LICENSE");

/// The Content-Security-Policy of the docs page: its own scripts only (Swagger UI and
/// `init.js`; no inline script, no eval), its own stylesheet, images from itself and the `data:`
/// icons of its stylesheet, requests to this server only (the document and "Try it out"), and
/// never inside a frame. Checked in Chromium (`tests/it/openapi.rs`): the page renders and
/// opens an operation without a violation.
pub const DOCS_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                            img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
                            frame-ancestors 'none'";

static ASSETS: [(&str, Asset); 5] = [
    ("index.html", Asset::new(INDEX_HTML, "text/html; charset=utf-8")),
    ("init.js", Asset::new(INIT_JS, "text/javascript; charset=utf-8")),
    ("swagger-ui-bundle.js", Asset::new(BUNDLE_JS, "text/javascript; charset=utf-8")),
    ("swagger-ui.css", Asset::new(UI_CSS, "text/css; charset=utf-8")),
    ("LICENSE", Asset::new(LICENSE, "text/plain; charset=utf-8")),
];

/// The routes of the docs page (public; not part of the OpenAPI document).
pub fn pages() -> Vec<Route> {
    vec![
        Route {
            method: Method::GET,
            path: "/docs",
            access: Access::Public,
            body: BodyKind::Json,
            cached: false,
            handler: |a, r| Box::pin(page(a, r)),
        },
        Route {
            method: Method::GET,
            path: "/docs/{file}",
            access: Access::Public,
            body: BodyKind::Json,
            cached: false,
            handler: |a, r| Box::pin(asset(a, r)),
        },
    ]
}

/// # `GET /v1/openapi.json`
/// The OpenAPI 3.1 document (see `crate::openapi`), built once.
pub async fn openapi(app: Arc<App>, _req: Req) -> Result<Reply> {
    static DOC: OnceLock<Bytes> = OnceLock::new();
    let doc = DOC.get_or_init(|| {
        let doc = crate::openapi::document(&super::document_rows(), &app.models);
        Bytes::from(serde_json::to_vec(&doc).unwrap_or_default())
    });
    Ok(Reply::raw(200, doc.clone(), "application/json"))
}

/// `GET /docs`: the page rendering `/v1/openapi.json`.
async fn page(_app: Arc<App>, req: Req) -> Result<Reply> {
    serve(&ASSETS[0].1, &req)
}

/// `GET /docs/{file}`: a vendored asset; 404 for any other name.
async fn asset(_app: Arc<App>, req: Req) -> Result<Reply> {
    let name = req.param("file");
    let (_, asset) = ASSETS.iter().find(|(n, _)| *n == name).ok_or_else(|| Error::not_found("docs file"))?;
    serve(asset, &req)
}

fn serve(asset: &Asset, req: &Req) -> Result<Reply> {
    Ok(asset
        .reply(req)
        .with_header("cache-control", "public, max-age=3600")
        .with_header("content-security-policy", DOCS_CSP)
        .with_header("x-frame-options", "DENY")
        .with_header("x-content-type-options", "nosniff")
        .with_header("referrer-policy", "no-referrer"))
}

/// The document's row of `GET /v1/openapi.json`.
pub fn operations() -> Vec<Operation> {
    let doc = op("GET", "/v1/openapi.json", "getOpenApi", "Meta", "This OpenAPI document");
    let doc = doc.ok(200, "OpenApiDocument").describe("Public. The document every other operation is checked against.");
    vec![doc.serve(Access::Public, handler!(openapi))]
}
