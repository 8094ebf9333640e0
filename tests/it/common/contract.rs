//! The contract check run on every response the integration tests receive: a response to an
//! operation of the OpenAPI document must carry a status the document lists for it, with the
//! documented content type and a JSON body valid against the documented schema. Responses to
//! paths that are no operation (404 `ROUTE_NOT_FOUND`, 405, the docs page) are not checked.
//!
//! The document is the one the server serves (built in-process from the same library code; the
//! `openapi` tests check the served bytes are the same document).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use jsonschema::Validator;
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// The document and the validators compiled so far, by `(method, path template, status)`.
pub struct Contract {
    pub doc: Value,
    validators: Mutex<HashMap<(String, String, u16), Arc<Validator>>>,
}

/// The document of this build.
pub fn contract() -> &'static Contract {
    static CONTRACT: OnceLock<Contract> = OnceLock::new();
    CONTRACT.get_or_init(|| {
        let models = replicad::models::Models::parse(replicad::models::SHIPPED).expect("models");
        let doc = replicad::openapi::document(&replicad::api::document_rows(), &models);
        Contract { doc, validators: Mutex::new(HashMap::new()) }
    })
}

/// The document's path template matching a request path (literal segments win over
/// parameters: `/v1/users/me` is not `/v1/users/{userID}`).
pub fn template_of(doc: &Value, path: &str) -> Option<String> {
    let segs: Vec<&str> = path.split('/').collect();
    let mut best: Option<(usize, &String)> = None;
    for template in doc["paths"].as_object()?.keys() {
        let tsegs: Vec<&str> = template.split('/').collect();
        if tsegs.len() != segs.len() {
            continue;
        }
        let mut literals = 0;
        let matched = tsegs.iter().zip(&segs).all(|(t, s)| {
            if t.starts_with('{') {
                !s.is_empty()
            } else {
                literals += 1;
                t == s
            }
        });
        if matched && best.is_none_or(|(l, _)| literals > l) {
            best = Some((literals, template));
        }
    }
    best.map(|(_, t)| t.clone())
}

/// With `REPLICAD_RESPONSE_SAMPLES=<dir>` (set by `.ci/run`), the first success answer of each
/// operation is kept as `<dir>/<operationId>.<status>.json`, for `.ci/typed-client` to parse with
/// a client model generated from the document.
fn record_sample(op: &Value, status: u16, text: &str) {
    let Some(dir) = std::env::var_os("REPLICAD_RESPONSE_SAMPLES") else { return };
    let id = op["operationId"].as_str().expect("every operation has an operationId");
    let path = std::path::Path::new(&dir).join(format!("{id}.{status}.json"));
    std::fs::create_dir_all(&dir).expect("REPLICAD_RESPONSE_SAMPLES is a writable directory");
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(mut f) => std::io::Write::write_all(&mut f, text.as_bytes()).expect("sample written"),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => panic!("cannot write {}: {e}", path.display()),
    }
}

impl Contract {
    fn validator(&self, method: &str, template: &str, status: u16) -> Arc<Validator> {
        let key = (method.to_string(), template.to_string(), status);
        if let Some(v) = self.validators.lock().unwrap().get(&key) {
            return v.clone();
        }
        // The response schema with the document's components beside it, so `#/components/...`
        // references resolve.
        let schema = &self.doc["paths"][template][method.to_ascii_lowercase()]["responses"][status.to_string()]
            ["content"]["application/json"]["schema"];
        let mut root = schema.as_object().cloned().expect("a response schema object");
        root.insert("components".into(), self.doc["components"].clone());
        let root = Value::Object(root);
        let v = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&root)
            .unwrap_or_else(|e| panic!("schema of {method} {template} {status} does not compile: {e}"));
        let v = Arc::new(v);
        self.validators.lock().unwrap().insert(key, v.clone());
        v
    }

    /// Panics unless the response conforms to the document (see the module documentation).
    pub fn check(&self, method: &Method, path: &str, status: StatusCode, headers: &HeaderMap, text: &str) {
        if method == Method::HEAD {
            return;
        }
        let Some(template) = template_of(&self.doc, path) else { return };
        let m = method.as_str().to_ascii_lowercase();
        let Some(op) = self.doc["paths"][&template].get(&m) else {
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}: not an operation, got {status}");
            return;
        };
        let code = status.as_u16();
        let Some(response) = op["responses"].get(code.to_string()) else {
            panic!("{method} {path} answered {code}, which the document does not list for {template}: {text}");
        };
        if response.get("content").is_none() {
            assert!(text.is_empty(), "{method} {path} {code}: the document says no body, got {text:.300}");
            assert!(headers.get("content-type").is_none(), "{method} {path} {code}: a Content-Type without a body");
            return;
        }
        let ct = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
        let media = ct.split(';').next().unwrap_or("").trim();
        assert!(
            response["content"].get(media).is_some(),
            "{method} {path} {code}: content type {ct:?} is not documented for {template}"
        );
        if media != "application/json" {
            return;
        }
        let body: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("{method} {path} {code}: body is not JSON ({e}): {text:.300}"));
        if status.is_success() {
            record_sample(op, code, text);
        }
        let validator = self.validator(method.as_str(), &template, code);
        let errors: Vec<String> =
            validator.iter_errors(&body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(
            errors.is_empty(),
            "{method} {path} {code}: the body breaks the document's schema:\n  {}\nbody: {text:.2000}",
            errors.join("\n  ")
        );
    }
}
