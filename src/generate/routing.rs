//! Which backend serves which catalog model (docs/decisions.md "Model catalog").
//!
//! Upstreams are named by `--llm-upstream NAME=BASE_URL` (repeatable); the key of upstream
//! `NAME` is read from `REPLICAD_LLM_<NAME>_API_KEY` or from the file named by
//! `REPLICAD_LLM_<NAME>_API_KEY_FILE` (NAME upper-cased, `-` as `_`; no key: no
//! `Authorization` header, as local servers expect). A model is routed by
//! `--model-route MODEL_ID=NAME/UPSTREAM_MODEL` (repeatable) or by the `route` field of its
//! entry in the operator's catalog (`--models FILE`; `vision: true` there lets `imageURL` reach
//! the model); a flag wins over the file. Unrouted models are served by the embedded generator.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::embedded::Embedded;
use super::openai::Upstream;
use super::{Backend, EMBEDDED};
use crate::models::Models;
use crate::upstream::Policy;

/// Flags of the generation backends (part of `replicad serve`, each also read from the
/// environment as `REPLICAD_<FLAG>`; repeatable flags take comma-separated lists there).
#[derive(clap::Args, Clone, Debug)]
pub struct LlmConfig {
    /// An OpenAI-compatible upstream, `NAME=BASE_URL` (e.g. `local=http://127.0.0.1:8081/v1`);
    /// repeatable. Its key comes from REPLICAD_LLM_<NAME>_API_KEY or ..._API_KEY_FILE.
    #[arg(long = "llm-upstream", env = "REPLICAD_LLM_UPSTREAM", value_delimiter = ',')]
    pub upstreams: Vec<String>,
    /// Serve a catalog model by an upstream, `MODEL_ID=NAME/UPSTREAM_MODEL`; repeatable.
    #[arg(long = "model-route", env = "REPLICAD_MODEL_ROUTE", value_delimiter = ',')]
    pub routes: Vec<String>,
    /// Milliseconds to wait for a connection to an upstream.
    #[arg(long, env = "REPLICAD_LLM_CONNECT_TIMEOUT_MS", default_value_t = DEFAULT_CONNECT_TIMEOUT_MS)]
    pub llm_connect_timeout_ms: u64,
    /// Milliseconds to wait for the head of an upstream's answer (a non-streamed answer is
    /// generated whole before its head comes) and for the first delta of a streamed one.
    #[arg(long, env = "REPLICAD_LLM_FIRST_BYTE_TIMEOUT_MS", default_value_t = DEFAULT_FIRST_BYTE_TIMEOUT_MS)]
    pub llm_first_byte_timeout_ms: u64,
    /// Milliseconds an upstream may stay silent between two chunks of its answer.
    #[arg(long, env = "REPLICAD_LLM_IDLE_TIMEOUT_MS", default_value_t = DEFAULT_IDLE_TIMEOUT_MS)]
    pub llm_idle_timeout_ms: u64,
    /// Retries of a failed upstream call (connect error, 429, 5xx) before answering 502.
    #[arg(long, env = "REPLICAD_LLM_MAX_RETRIES", default_value_t = DEFAULT_MAX_RETRIES)]
    pub llm_max_retries: u32,
    /// Most tokens of one upstream reply (`max_tokens`); the upstream's default when absent.
    #[arg(long, env = "REPLICAD_LLM_MAX_TOKENS")]
    pub llm_max_tokens: Option<u32>,
    /// First retry backoff in milliseconds (doubled per retry, ±50 % jitter).
    #[arg(long, env = "REPLICAD_LLM_BACKOFF_MS", default_value_t = DEFAULT_BACKOFF_MS)]
    pub llm_backoff_ms: u64,
}

/// Default of `--llm-connect-timeout-ms`.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Default of `--llm-first-byte-timeout-ms`.
pub const DEFAULT_FIRST_BYTE_TIMEOUT_MS: u64 = 120_000;
/// Default of `--llm-idle-timeout-ms`.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 30_000;
/// Default of `--llm-max-retries`.
pub const DEFAULT_MAX_RETRIES: u32 = 2;
/// Default of `--llm-backoff-ms`.
pub const DEFAULT_BACKOFF_MS: u64 = 250;

impl Default for LlmConfig {
    /// No upstreams, no routes, the flags' default timeouts and retries.
    fn default() -> Self {
        LlmConfig {
            upstreams: Vec::new(),
            routes: Vec::new(),
            llm_connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            llm_first_byte_timeout_ms: DEFAULT_FIRST_BYTE_TIMEOUT_MS,
            llm_idle_timeout_ms: DEFAULT_IDLE_TIMEOUT_MS,
            llm_max_retries: DEFAULT_MAX_RETRIES,
            llm_max_tokens: None,
            llm_backoff_ms: DEFAULT_BACKOFF_MS,
        }
    }
}

impl LlmConfig {
    /// The timeouts and retries of upstream calls.
    pub fn policy(&self) -> Policy {
        Policy {
            connect: Duration::from_millis(self.llm_connect_timeout_ms),
            first_byte: Duration::from_millis(self.llm_first_byte_timeout_ms),
            idle: Duration::from_millis(self.llm_idle_timeout_ms),
            max_retries: self.llm_max_retries,
            backoff: Duration::from_millis(self.llm_backoff_ms),
        }
    }
}

/// How one model is served.
#[derive(Clone)]
pub struct ModelRoute {
    pub backend: Arc<dyn Backend>,
    /// The model name sent upstream (empty for the embedded backend).
    pub upstream_model: String,
    /// Whether `imageURL` is passed to the model.
    pub vision: bool,
}

/// The model → backend map of a running server.
pub struct Backends {
    routes: HashMap<String, ModelRoute>,
    embedded: ModelRoute,
}

/// Why [`Backends::build`] refused the flags or the catalog; each names the flag at fault.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// An `--llm-upstream` spec, name or key file that cannot be used.
    #[error(transparent)]
    Declare(#[from] crate::upstream::DeclareError),
    /// Two upstreams of one name, or one named as the embedded generator.
    #[error("--llm-upstream {spec:?}: the name {name:?} is taken")]
    Taken { spec: String, name: String },
    /// A `--model-route` without `=`.
    #[error("--model-route {0:?}: expected MODEL_ID=NAME/UPSTREAM_MODEL")]
    Malformed(String),
    /// A route for a model id the catalog lacks.
    #[error("{flag}: {id:?} is not a model of the catalog")]
    UnknownModel { flag: &'static str, id: String },
    /// A route that is not `NAME/UPSTREAM_MODEL`.
    #[error("{flag} {id}: route {route:?} is not NAME/UPSTREAM_MODEL")]
    BadRoute { flag: &'static str, id: String, route: String },
    /// A route naming an upstream no `--llm-upstream` declares.
    #[error("{flag} {id}: no upstream named {name:?} (declare it with --llm-upstream {name}=BASE_URL)")]
    NoUpstream { flag: &'static str, id: String, name: String },
}

impl Backends {
    /// Every model served by the embedded generator (no configuration).
    pub fn embedded_only() -> Backends {
        Backends {
            routes: HashMap::new(),
            embedded: ModelRoute { backend: Arc::new(Embedded), upstream_model: String::new(), vision: false },
        }
    }

    /// The route of `model` (the embedded generator when it has none).
    pub fn route(&self, model: &str) -> &ModelRoute {
        self.routes.get(model).unwrap_or(&self.embedded)
    }

    /// Builds the map from the flags and the catalog; errors name the flag at fault (unknown
    /// upstream in a route, unknown model id, malformed values, unreadable key file).
    pub fn build(config: &LlmConfig, models: &Models) -> Result<Backends, RouteError> {
        let policy = config.policy();
        let mut upstreams: HashMap<String, Arc<dyn Backend>> = HashMap::new();
        for spec in &config.upstreams {
            let (name, url) = crate::upstream::parse_spec(spec)?;
            if name == EMBEDDED || upstreams.contains_key(name) {
                return Err(RouteError::Taken { spec: spec.clone(), name: name.to_string() });
            }
            let key = crate::upstream::api_key(name)?;
            upstreams.insert(name.to_string(), Arc::new(Upstream::new(name, url, key, policy)?));
        }
        let mut out = Backends::embedded_only();
        let from_file =
            models.routes().map(|(id, route, vision)| (id.to_string(), route.to_string(), vision, "--models"));
        let from_flags = config.routes.iter().map(|spec| match spec.split_once('=') {
            Some((id, route)) => Ok((id.to_string(), route.to_string(), models.vision(id), "--model-route")),
            None => Err(RouteError::Malformed(spec.clone())),
        });
        for item in from_file.map(Ok).chain(from_flags) {
            let (id, route, vision, flag) = item?;
            if !models.contains(&id) {
                return Err(RouteError::UnknownModel { flag, id });
            }
            let (name, model) = route
                .split_once('/')
                .filter(|(n, m)| !n.is_empty() && !m.is_empty())
                .ok_or_else(|| RouteError::BadRoute { flag, id: id.clone(), route: route.clone() })?;
            let backend = upstreams.get(name).ok_or_else(|| RouteError::NoUpstream {
                flag,
                id: id.clone(),
                name: name.to_string(),
            })?;
            out.routes.insert(id, ModelRoute { backend: backend.clone(), upstream_model: model.to_string(), vision });
        }
        Ok(out)
    }

    /// Logs which backend serves each model (at start-up).
    pub fn log(&self, models: &Models) {
        let mut embedded = Vec::new();
        for id in models.ids() {
            match self.routes.get(id) {
                Some(r) => tracing::info!(
                    model = %id, backend = r.backend.name(), upstream_model = %r.upstream_model, vision = r.vision,
                    "model served by an upstream"
                ),
                None => embedded.push(id.as_str()),
            }
        }
        if !embedded.is_empty() {
            tracing::info!(models = %embedded.join(", "), "models served by the embedded generator");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        llm: LlmConfig,
    }

    fn flags(args: &[&str]) -> LlmConfig {
        Flags::try_parse_from(std::iter::once("replicad").chain(args.iter().copied())).unwrap().llm
    }

    #[test]
    fn the_default_is_what_the_flags_default_to() {
        assert_eq!(format!("{:?}", flags(&[])), format!("{:?}", LlmConfig::default()));
    }

    #[test]
    fn routes_name_declared_upstreams_and_catalog_models() {
        crate::install_crypto_provider();
        let models = Models::parse(crate::models::SHIPPED).unwrap();
        let ok = flags(&["--llm-upstream", "local=http://127.0.0.1:1/v1", "--model-route", "qwen3-32b=local/org/q3"]);
        let b = Backends::build(&ok, &models).unwrap();
        assert_eq!(
            (b.route("qwen3-32b").backend.name(), b.route("qwen3-32b").upstream_model.as_str()),
            ("local", "org/q3")
        );
        assert_eq!(b.route("replicad-extractive").backend.name(), EMBEDDED);
        for (args, needle) in [
            (vec!["--model-route", "qwen3-32b=nope/x"], "no upstream named \"nope\""),
            (vec!["--llm-upstream", "a=http://h/v1", "--model-route", "nosuch=a/x"], "not a model"),
            (vec!["--llm-upstream", "a=ftp://h"], "NAME=BASE_URL"),
            (vec!["--llm-upstream", "embedded=http://h"], "taken"),
            (vec!["--llm-upstream", "a=http://h", "--model-route", "qwen3-32b=a"], "NAME/UPSTREAM_MODEL"),
        ] {
            let err = Backends::build(&flags(&args), &models).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }
}
