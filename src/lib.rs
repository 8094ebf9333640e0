//! replicad: one binary serving the Conversational Replica Service Interface.
//!
//! See `ARCHITECTURE.md` of the team for the layout: `http` (decode, auth, errors) → `api`
//! (one row per operation) → `service` (rules) → `store` (redb), `search` (tantivy),
//! `generate` (replies).

pub mod admin;
pub mod api;
pub mod app;
pub mod channels;
pub mod cli;
pub mod config;
pub mod demo;
pub mod error;
pub mod generate;
pub mod http;
pub mod ingest;
pub mod models;
pub mod openapi;
pub mod search;
pub mod secrets;
pub mod server;
pub mod service;
pub mod store;

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;

pub use config::Config;

/// Installs rustls' ring crypto provider as the process default (TLS serving and HTTPS clients
/// need one); later calls do nothing.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Opens the store and the index, starts the indexer and the admin socket, makes the demo
/// data when asked, prints `listening on http://ADDR` (`https://` with TLS) on stdout, and serves `listener` until
/// `shutdown` resolves. Errors are start-up failures, as text for the operator.
pub async fn serve(config: Config, listener: TcpListener, shutdown: impl Future<Output = ()>) -> Result<(), String> {
    install_crypto_provider();
    config.validate()?;
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(server::tls::acceptor(cert, key)?),
        _ => None,
    };
    let models = models::Models::load(config.models.as_deref())?;
    let backends = generate::Backends::build(&config.llm, &models)?;
    backends.log(&models);
    let store = store::Store::open(&config.data_dir).map_err(|e| e.to_string())?;
    let (search, index_seq) = search::Search::open(&config.data_dir).map_err(|e| e.to_string())?;
    let search = Arc::new(search);
    let rebuild = search::indexer::needs_rebuild(&store, index_seq).await.map_err(|e| e.to_string())?;
    let reindex = search::indexer::spawn(store.clone(), search.clone(), rebuild);
    let fetcher = ingest::fetch::Fetcher::new(config.allow_private_urls, config.max_fetch_bytes)?;
    let refresh_ms = (config.kb_refresh_interval as i64).saturating_mul(1000);
    ingest::pipeline::spawn(store.clone(), ingest::pipeline::Worker { fetcher, refresh_ms });
    let secrets = secrets::Secrets::load_or_create(config.secrets_key_file.as_deref(), &config.data_dir)?;
    let channels = channels::Channels::new(secrets)?;
    let app = Arc::new(app::App::new(config, store, search, models, backends, reindex, channels));
    if app.config.demo {
        demo::ensure(&app).await.map_err(|e| format!("demo set-up failed: {e}"))?;
    }
    admin::spawn(app.clone()).map_err(|e| format!("admin socket: {e}"))?;
    channels::start_all(&app).await.map_err(|e| format!("starting the channel bots: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("listening on {}://{addr}", if tls.is_some() { "https" } else { "http" });
    tracing::info!(%addr, data_dir = %app.config.data_dir.display(), "serving");
    server::run(app, listener, tls, shutdown).await;
    Ok(())
}
