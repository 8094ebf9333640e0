//! The shared state of a running server: what a handler, a bot runner or an operability task
//! may use. It names nothing above it (no route, no handler, no runner): the route table and the
//! bots are composed once, at the top (`crate::serve`), around it.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::config::Config;
use crate::generate::Backends;
use crate::models::Models;
use crate::rate_limit::EmbedLimits;
use crate::search::indexer::RebuildRequest;
use crate::search::Search;
use crate::secrets::Secrets;
use crate::service::channel::Bots;
use crate::service::orgs::KeyCache;
use crate::stop::Tasks;
use crate::store::Store;

/// Everything a handler may use.
pub struct App {
    pub config: Config,
    pub store: Store,
    pub search: Arc<Search>,
    pub models: Models,
    /// Which generation backend serves each model.
    pub backends: Arc<Backends>,
    /// Asks the indexer task for a rebuild (admin `reindex`).
    pub reindex: mpsc::Sender<RebuildRequest>,
    /// Background tasks as readiness and shutdown see them.
    pub tasks: Tasks,
    /// The public embed operations' own rate limits (`--embed-rate-limit-*`).
    pub embed_limits: EmbedLimits,
    /// Organizations already found by their API key (authentication's lookups).
    pub org_keys: KeyCache,
    /// Seals and opens the stored channel tokens and embed identity secrets.
    pub secrets: Secrets,
    /// The HTTP client of calls to the chat platforms (the bots' own, and the check of a token
    /// when a bot is connected): one connection pool.
    pub platform_http: reqwest::Client,
    /// The channel bots running in this server (`crate::channels::Channels`).
    pub bots: Arc<dyn Bots>,
}

impl App {
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
