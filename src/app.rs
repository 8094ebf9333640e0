//! The shared state of a running server.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::api::{self, Route};
use crate::channels::Channels;
use crate::config::Config;
use crate::generate::Backends;
use crate::http::rate_limit::RateLimiter;
use crate::http::router::Router;
use crate::models::Models;
use crate::search::indexer::RebuildRequest;
use crate::search::Search;
use crate::store::Store;

/// Everything a handler may use.
pub struct App {
    pub config: Config,
    pub store: Store,
    pub search: Arc<Search>,
    pub models: Models,
    /// Which generation backend serves each model.
    pub backends: Arc<Backends>,
    pub routes: Vec<Route>,
    pub router: Router,
    /// Asks the indexer task for a rebuild (admin `reindex`).
    pub reindex: mpsc::Sender<RebuildRequest>,
    /// Background tasks as readiness and shutdown see them.
    pub ops: crate::ops::Ops,
    /// Per-key request buckets (`--rate-limit-per-key`); `None`: no limit.
    pub rate_limiter: Option<RateLimiter>,
    /// The public embed operations' own rate limits (`--embed-rate-limit-*`).
    pub embed_limits: api::embed::Limits,
    /// Organizations already found by their API key (authentication's lookups).
    pub org_keys: crate::service::orgs::KeyCache,
    /// The channel bots running in this server.
    pub channels: Channels,
    /// Answers of the hot reads, kept until the next commit (`--read-cache-bytes`).
    pub read_cache: crate::http::read_cache::ReadCache,
}

impl App {
    /// Assembles the state and compiles the route table.
    pub fn new(
        config: Config,
        store: Store,
        search: Arc<Search>,
        models: Models,
        backends: Backends,
        reindex: mpsc::Sender<RebuildRequest>,
        channels: Channels,
    ) -> App {
        let routes: Vec<Route> = api::routes()
            .into_iter()
            .chain(api::docs::pages())
            .chain(api::embed::pages())
            .chain([crate::ops::metrics::route()])
            .collect();
        let router = Router::new(routes.iter().map(|r| (r.method.clone(), r.path)));
        let rate_limiter = config.rate_limit_per_key.map(|n| RateLimiter::for_store(n, &store, "key"));
        let read_cache = crate::http::read_cache::ReadCache::new(config.read_cache_bytes);
        let embed_limits = api::embed::Limits::new(&config, &store);
        App {
            config,
            store,
            search,
            models,
            backends: Arc::new(backends),
            routes,
            router,
            reindex,
            ops: Default::default(),
            rate_limiter,
            embed_limits,
            org_keys: Default::default(),
            channels,
            read_cache,
        }
    }

    /// What the chat service needs of the server (the API's completions and the channels' bots).
    pub fn chat_context(&self) -> crate::service::chat::Context {
        crate::service::chat::Context {
            store: self.store.clone(),
            search: self.search.clone(),
            backends: self.backends.clone(),
            max_tokens: self.config.llm.llm_max_tokens,
        }
    }
}
