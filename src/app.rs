//! The shared state of a running server.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::api::{self, Route};
use crate::channels::Channels;
use crate::config::Config;
use crate::generate::Backends;
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
    /// The channel bots running in this server.
    pub channels: Channels,
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
        let routes: Vec<Route> =
            api::routes().into_iter().chain(api::docs::pages()).chain(api::embed::pages()).collect();
        let router = Router::new(routes.iter().map(|r| (r.method.clone(), r.path)));
        App { config, store, search, models, backends: Arc::new(backends), routes, router, reindex, channels }
    }
}
