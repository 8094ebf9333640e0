//! replicad: one binary serving the Conversational Replica Service Interface.
//!
//! Dependencies point one way, from the top of this list down (a module uses only modules of
//! lower layers, and two modules of one layer never name each other; the test `layering` below
//! reads every `crate::` path to hold it):
//!
//! 1. `main` (the binary) and this crate root (`serve`, the one place the state, the route
//!    table and the bots are composed; `install_crypto_provider`);
//! 2. `orgs_cli` and `replicas_cli`, then `admin` (admin socket), `demo` (demo data), `cli`;
//! 3. `api` (one row per operation: parse → authorize → service → DTO; [`api::served`] is every
//!    row the server routes);
//! 4. `channels` (the bots, which the state knows only as `service::channel::Bots`; each bot's
//!    module gives its runner, its connect and its operations' document rows);
//! 5. `openapi` (the published document), `ops` (metrics, health, shutdown);
//! 6. `server` (accept loop, TLS);
//! 7. `http` (the [`http::Dispatcher`]: route lookup, decode, auth, per-key rate limits, the read
//!    cache, errors; a route row names a handler taking `http`'s `Req` and `app`'s `App`);
//! 8. `app` (the state handlers, bots and operability tasks get; it names nothing above it);
//! 9. `config` (flags and defaults);
//! 10. `service` (business rules; plain Rust types in and out);
//! 11. `generate` (replies; it scores sentences with `search`'s analyzers) and `backup` (online
//!     backup and restore of a data directory), then `search`
//!     (tantivy), then `ingest` (fetch, extract, write an entry's text) and `embed` (text →
//!     vectors, by an in-process model or an OpenAI-compatible upstream);
//! 12. `text` (language detection, chunking) and `rate_limit` (token buckets, in memory or in a
//!     shared store);
//! 13. `store` (redb, records, codec), `secrets` (sealing channel tokens) and `upstream` (what
//!     every OpenAI-compatible upstream call shares: declaration, timeouts, retries, errors);
//! 14. `error`, `models` (the model catalog), and the modules every layer may use: `clock`,
//!     `stop` (stopping background tasks), `telemetry`, `memory` (giving freed heap back to the
//!     system).

pub mod admin;
pub mod api;
pub mod app;
pub mod backup;
pub mod channels;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod embed;
pub mod error;
pub mod generate;
pub mod http;
pub mod ingest;
pub mod memory;
pub mod models;
pub mod openapi;
pub mod ops;
pub mod orgs_cli;
pub mod rate_limit;
pub mod replicas_cli;
pub mod search;
pub mod secrets;
pub mod server;
pub mod service;
pub mod stop;
pub mod store;
pub mod telemetry;
pub mod text;
pub mod upstream;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

pub use config::Config;

/// Why the server did not start ([`serve`], [`serve_until_signal`]); the text names the flag,
/// file or part at fault, for the operator.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is refused.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// `--tls-cert` / `--tls-key` do not make an acceptor.
    #[error(transparent)]
    Tls(#[from] server::tls::TlsError),
    /// The model catalog does not load.
    #[error(transparent)]
    Models(#[from] models::ModelsError),
    /// The generation backends cannot be built.
    #[error(transparent)]
    Backends(#[from] generate::RouteError),
    /// The embedding models cannot be loaded.
    #[error(transparent)]
    Embeddings(#[from] embed::catalog::CatalogError),
    /// The store does not open.
    #[error(transparent)]
    Open(#[from] store::OpenError),
    /// The store or the index failed while opening.
    #[error("{0}")]
    Store(#[from] error::Error),
    /// The secrets key file cannot be read or made.
    #[error(transparent)]
    SecretsKey(#[from] secrets::KeyFileError),
    /// On a shared store, the stored channel tokens were sealed with another key than `path`.
    #[error(
        "the stored channel tokens were sealed with another key than {}: give every node of this database the \
         same --secrets-key-file",
        path.display()
    )]
    SecretsKeyMismatch { path: PathBuf },
    /// The knowledge-base fetcher's HTTP client cannot be built.
    #[error("HTTP client: {0}")]
    FetcherClient(reqwest::Error),
    /// The HTTP client of the channel bots cannot be built.
    #[error("HTTP client of the channels: {0}")]
    ChannelsClient(reqwest::Error),
    /// The extraction sandbox cannot find this binary.
    #[error("cannot find the replicad binary: {0}")]
    Sandbox(std::io::Error),
    /// `--listen` cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    /// `--metrics-listen` cannot be bound.
    #[error("cannot listen on {addr} (--metrics-listen): {source}")]
    MetricsListen { addr: SocketAddr, source: std::io::Error },
    /// A bound listener has no local address.
    #[error("{0}")]
    LocalAddr(std::io::Error),
    /// The admin socket cannot be made.
    #[error("admin socket: {0}")]
    AdminSocket(std::io::Error),
    /// The demo data cannot be made (`--demo`).
    #[error("demo set-up failed: {0}")]
    Demo(error::Error),
    /// The stored channel bots cannot be started.
    #[error("starting the channel bots: {0}")]
    Bots(error::Error),
}

/// Refuses to start a node of a shared store whose secrets key is not the one the stored tokens
/// were sealed with (every node must be given the same `--secrets-key-file`); on redb, warns
/// (the bots report the error in their state and must be connected again).
async fn check_secrets_key(
    store: &store::Store,
    secrets: &secrets::Secrets,
    config: &config::Config,
) -> Result<(), StartError> {
    if service::integrations::secrets_key_matches(store, secrets).await? {
        return Ok(());
    }
    let path = secrets::key_path(config.secrets_key_file.as_deref(), &config.data_dir);
    if store.is_shared() {
        return Err(StartError::SecretsKeyMismatch { path });
    }
    tracing::warn!(
        "the stored channel tokens were sealed with another key than {}; the bots must be connected again",
        path.display()
    );
    Ok(())
}

/// Installs rustls' ring crypto provider as the process default (TLS serving and HTTPS clients
/// need one; [`serve`] calls it before building either); later calls do nothing.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The embedding models of `--embedding-models` (else every model `replicad models install` put
/// in the data directory, [`embed::install::installed`], the first of them the default), fetched
/// from `--model-hub` when missing and allowed, and loaded (`None`, and said in the log, when
/// there are none: retrieval is then BM25 alone). Errors name the catalog entry at fault.
async fn load_embedders(config: &Config) -> Result<Option<Arc<embed::catalog::Embedders>>, StartError> {
    let mut catalog = match &config.embedding_models {
        Some(path) => embed::catalog::EmbeddingModels::load(path)?,
        None => {
            let installed = embed::install::installed(&config.data_dir);
            if installed.is_empty() {
                tracing::info!(
                    "no embedding model configured (--embedding-models, or `replicad models install \
                     all-minilm-l6-v2`): retrieval is BM25 alone"
                );
                return Ok(None);
            }
            let dirs: Vec<String> = installed.iter().map(|(_, d)| d.display().to_string()).collect();
            tracing::info!(?dirs, "embedding models installed in the data directory");
            embed::catalog::EmbeddingModels::from_dirs(installed)?
        }
    };
    catalog.set_precision(config.embedding_precision);
    let kernel = embed::encoder::Kernel::detect(config.embedding_precision);
    tracing::info!(precision = ?config.embedding_precision, kernel = kernel.describe(), "in-process embedding arithmetic");
    if kernel == embed::encoder::Kernel::Int8Avx2 {
        let q4 = replicad_kernels::q4::chosen();
        let attention = replicad_kernels::attention::Products::chosen().describe();
        tracing::info!(kernel = replicad_kernels::q4::describe(q4), attention, "4-bit models (multilingual-e5-small)");
    }
    catalog.fetch_hub(&config.data_dir.join("models"), config.model_hub.as_deref()).await?;
    let built = catalog.build(&config.llm.upstreams, config.llm.policy())?;
    tracing::info!(models = ?built.ids(), default = built.default_id(), "hybrid retrieval: BM25 and embeddings");
    Ok(Some(Arc::new(built)))
}

/// Binds `config.listen` and [`serve`]s until SIGINT or SIGTERM (`replicad serve`).
pub async fn serve_until_signal(config: Config) -> Result<(), StartError> {
    let addr = config.listen;
    let listener = TcpListener::bind(addr).await.map_err(|source| StartError::Listen { addr, source })?;
    serve(config, listener, ops::shutdown::on_signal()).await
}

/// Opens the store and the index, starts the indexer and the admin socket, makes the demo
/// data when asked, prints `listening on http://ADDR` (`https://` with TLS) on stdout, and serves `listener` until
/// `shutdown` resolves. Errors are start-up failures.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    install_crypto_provider();
    config.validate()?;
    if config.metrics_token.is_some() || config.metrics_listen.is_some() {
        ops::metrics::install(&config.node());
    }
    if config.test_clock {
        clock::make_adjustable();
    }
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(server::tls::acceptor(cert, key)?),
        _ => None,
    };
    let (app, bots) = state(open(config).await?).await?;
    service::chats::insights::spawn(app.store.clone(), app.backends.clone());
    if app.config.demo {
        demo::ensure(&app).await.map_err(StartError::Demo)?;
    }
    admin::spawn(app.clone()).map_err(StartError::AdminSocket)?;
    if let Some(addr) = app.config.metrics_listen {
        let metrics = TcpListener::bind(addr).await.map_err(|source| StartError::MetricsListen { addr, source })?;
        let addr = metrics.local_addr().map_err(StartError::LocalAddr)?;
        tracing::info!(%addr, "serving metrics at http://{addr}/metrics");
        ops::metrics::spawn_listener(app.clone(), metrics);
    }
    channels::start_all(&bots).await.map_err(StartError::Bots)?;
    let addr = listener.local_addr().map_err(StartError::LocalAddr)?;
    println!("listening on {}://{addr}", if tls.is_some() { "https" } else { "http" });
    let version = ops::version::text();
    tracing::info!(%addr, data_dir = %app.config.data_dir.display(), version, "serving");
    server::run(Arc::new(http::Dispatcher::new(app.clone(), api::served())), listener, tls, shutdown).await;
    ops::shutdown::finish(&app, Duration::from_secs(app.config.shutdown_grace)).await;
    Ok(())
}

/// What [`open`] starts, for [`state`] to assemble.
struct Opened {
    config: Config,
    store: store::Store,
    search: Arc<search::Search>,
    models: models::Models,
    backends: generate::Backends,
    reindex: tokio::sync::mpsc::Sender<search::indexer::RebuildRequest>,
    tasks: stop::Tasks,
}

/// Loads the model catalog and the generation backends, opens the store (filing the history
/// stored before schema 3) and the index, and starts the indexer, the embedding and the
/// ingestion workers.
async fn open(config: Config) -> Result<Opened, StartError> {
    let models = models::Models::load(config.models.as_deref())?;
    let backends = generate::Backends::build(&config.llm, &models).map_err(StartError::Backends)?;
    backends.log(&models);
    let store = store::Store::open_on(&config.data_dir, config.store.as_deref(), config.min_free_space)?;
    match store.write(service::chats::derive_pending_in).await {
        Ok(true) => tracing::info!("the history stored before schema 3 is filed under its chats"),
        Ok(false) => {}
        // A full disk must not keep the server from serving reads; the next start retries.
        Err(e) if e.code == error::Code::InsufficientStorage => {
            tracing::warn!(error = %e, "the disk is full: the history stored before schema 3 is filed at a later start")
        }
        Err(e) => return Err(e.into()),
    }
    let embedders = load_embedders(&config).await?;
    let (search, index_seq) = search::Search::open(&config.data_dir)?;
    let search = Arc::new(search.with_embedders(embedders));
    let rebuild = search::indexer::needs_rebuild(&store, index_seq).await?;
    let tasks = stop::Tasks::default();
    let reindex = search::indexer::spawn(store.clone(), search.clone(), rebuild, tasks.stopper.stop());
    search::embedding::spawn(store.clone(), search.clone(), tasks.stopper.stop());
    let fetcher = ingest::fetch::Fetcher::new(config.allow_private_urls, config.max_fetch_bytes)
        .map_err(StartError::FetcherClient)?;
    let refresh_ms = (config.kb_refresh_interval as i64).saturating_mul(1000);
    let limits =
        ingest::sandbox::Limits { memory_mib: config.extract_memory_mib, cpu_seconds: config.extract_cpu_seconds };
    let sandbox = ingest::sandbox::Sandbox::new(limits).map_err(StartError::Sandbox)?;
    let concurrency = config.ingest_concurrency;
    let worker = ingest::pipeline::Worker { fetcher, sandbox, refresh_ms, concurrency, stop: tasks.stopper.stop() };
    tasks.set_ingest(ingest::queue::spawn(store.clone(), worker));
    Ok(Opened { config, store, search, models, backends, reindex, tasks })
}

/// The server's state around what [`open`] started, made with its bots ([`channels::Channels`],
/// which holds the state weakly): the one place the state and the bots are composed. Errors:
/// the secrets key (`--secrets-key-file`) cannot be read or does not match the stored tokens
/// on a shared store; the bots' HTTP client cannot be built.
async fn state(opened: Opened) -> Result<(Arc<app::App>, Arc<channels::Channels>), StartError> {
    let Opened { config, store, search, models, backends, reindex, tasks } = opened;
    let secrets = secrets::Secrets::load_or_create(config.secrets_key_file.as_deref(), &config.data_dir)?;
    check_secrets_key(&store, &secrets, &config).await?;
    let embed_limits = rate_limit::EmbedLimits::new(
        config.embed_rate_limit_per_visitor,
        config.embed_rate_limit_per_replica,
        config.embed_new_visitors_per_minute,
        &store,
    );
    let platform_http = channels::platform_http().map_err(StartError::ChannelsClient)?;
    let mut bots = None;
    let app = Arc::new_cyclic(|me| {
        let channels = Arc::new(channels::Channels::new(me.clone()));
        bots = Some(channels.clone());
        app::App {
            config,
            store,
            search,
            models,
            backends: Arc::new(backends),
            reindex,
            tasks,
            embed_limits,
            org_keys: Default::default(),
            secrets,
            platform_http,
            bots: channels,
        }
    });
    Ok((app, bots.expect("made with the state")))
}

#[cfg(test)]
mod layering {
    use std::path::Path;

    /// Each module and its layer (see the crate documentation); a module uses only modules of
    /// lower layers: two modules of one layer never name each other.
    const LAYERS: &[(&str, u8)] = &[
        ("orgs_cli", 15),
        ("replicas_cli", 15),
        ("admin", 14),
        ("demo", 14),
        ("cli", 14),
        ("api", 13),
        ("channels", 12),
        ("openapi", 11),
        ("ops", 11),
        ("server", 10),
        ("http", 9),
        ("app", 8),
        ("config", 7),
        ("service", 6),
        ("generate", 5),
        ("backup", 5),
        ("search", 4),
        ("ingest", 3),
        ("embed", 3),
        ("text", 2),
        ("rate_limit", 2),
        ("store", 1),
        ("secrets", 1),
        ("upstream", 1),
        ("error", 0),
        ("models", 0),
        ("clock", 0),
        ("stop", 0),
        ("telemetry", 0),
        ("memory", 0),
    ];

    /// The modules of `service` from the bottom up: each names only modules before it (test
    /// `service_modules_point_one_way`), so no two of them name each other, however indirectly.
    const SERVICE_ORDER: &[&str] = &[
        "token_usage",
        "channel",
        "visibility",
        "passages",
        "text_fragment",
        "messages",
        "users",
        "orgs",
        "quotas",
        "usage",
        "channel_data",
        "chats",
        "history",
        "integrations",
        "embed",
        "knowledge",
        "replicas",
        "chat",
        "bundle",
    ];

    fn layer(module: &str) -> Option<u8> {
        LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
    }

    /// `crate::NAME` paths in the non-test code of `text` (none in a file that is all tests,
    /// `#![cfg(test)]`), and the doc links to them (see
    /// [`named_after`]).
    fn crate_paths(text: &str) -> Vec<String> {
        named_after(text, "crate::")
    }

    /// The names following `prefix` (`crate::`, `super::`…) in the non-test code of `text`,
    /// each name of a `prefix{a, b::c}` group counted, and in docs the links (rustdoc resolves a
    /// link as the compiler resolves an import); plain `//` comments are skipped, and so is a
    /// `prefix` inside a longer path (`super::super::x` has no `super::x`).
    fn named_after(text: &str, prefix: &str) -> Vec<String> {
        if text.lines().any(|l| l.trim() == "#![cfg(test)]") {
            return Vec::new(); // a file of tests alone
        }
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut found = Vec::new();
        for line in code.lines() {
            let l = line.trim_start();
            let doc = l.starts_with("///") || l.starts_with("//!");
            if l.starts_with("//") && !doc {
                continue;
            }
            // in docs, links only: a path in plain backticks names a thing, it does not link it
            let pattern = if doc { format!("[`{prefix}") } else { prefix.to_string() };
            for (i, _) in line.match_indices(&pattern) {
                if line[..i].ends_with("::") {
                    continue;
                }
                found.extend(names(&line[i + pattern.len()..]).into_iter().filter(|n| n != "super"));
            }
        }
        found
    }

    /// The leading name of `rest`, or each top-level name of a leading `{…}` group.
    fn names(rest: &str) -> Vec<String> {
        let ident = |s: &str| s.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let Some(group) = rest.strip_prefix('{') else { return vec![ident(rest)] };
        let (mut depth, mut start, mut out) = (0, 0, Vec::new());
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    out.push(ident(&group[start..i]));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(ident(&group[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
        out
    }

    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn dependencies_point_one_way() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut all = Vec::new();
        files(&src, &mut all);
        let mut wrong = Vec::new();
        for path in all {
            let rel = path.strip_prefix(&src).unwrap();
            let top = rel.iter().next().unwrap().to_string_lossy().trim_end_matches(".rs").to_string();
            if top == "lib" || top == "main" {
                continue;
            }
            let own = layer(&top).unwrap_or_else(|| panic!("module {top} has no layer in LAYERS"));
            for used in crate_paths(&std::fs::read_to_string(&path).unwrap()) {
                let ok = match layer(&used) {
                    _ if used == top => true,
                    Some(l) => l < own,
                    None => false, // the crate root (`serve`, `install_crypto_provider`) is the top
                };
                if !ok {
                    wrong.push(format!("{} uses crate::{used}", rel.display()));
                }
            }
        }
        assert!(wrong.is_empty(), "dependencies against the layering of src/lib.rs:\n{}", wrong.join("\n"));
    }

    /// Each table of `store::tables` and the module that owns it (a file, or a directory for a
    /// module of several files): only the owner names the table; other modules call the owner.
    /// `store::{migrate,copy}` name every table (schema steps, copies between engines).
    const OWNERS: &[(&str, &str)] = &[
        ("META", "store/meta.rs"),
        ("SEQUENCES", "store/mod.rs"),
        ("ORGID_ORG", "service/orgs.rs"),
        ("KEYHASH_ORG", "service/orgs.rs"),
        ("CODEHASH_INVITE", "service/orgs.rs"),
        ("REPLICAID_REPLICA", "store/replica_index.rs"),
        ("ORG_REPLICA", "store/replica_index.rs"),
        ("SLUG_REPLICA", "service/replicas.rs"),
        ("USERID_USER", "service/users.rs"),
        ("ORG_USER", "service/users.rs"),
        ("EMAIL_USER", "service/users.rs"),
        ("LINKEDACCOUNT_USER", "service/users.rs"),
        ("KBID_ENTRY", "store/kb/"),
        ("KBID_TEXT", "store/kb/"),
        ("REPLICA_KB", "store/kb/"),
        ("KBCHUNK_CHUNK", "store/kb/"),
        ("KBCHUNK_VECTOR", "store/kb/"),
        ("SEQ_KBOUTBOX", "store/kb/"),
        ("REPLICAUSERMSG_MESSAGE", "service/messages.rs"),
        ("REPLICAPASSAGE_TEXT", "service/passages.rs"),
        ("REPLICA_MESSAGECOUNT", "store/replica_index.rs"),
        ("ONCE", "demo.rs"),
        ("REPLICACHANNELMSG_MESSAGE", "service/channel_data.rs"),
        ("KBID_SOURCE", "store/kb/"),
        ("KBID_STOREDFILE", "store/kb/"),
        ("KBID_JOB", "ingest/"),
        ("TOKENHASH_UPLOAD", "service/knowledge/"),
        ("REPLICA_URL", "service/knowledge/"),
        ("REPLICA_KBSUMMARY", "store/kb/"),
        ("ORG_KBCOUNT", "service/quotas.rs"),
        ("REPLICAUSERMONTH_USAGE", "service/token_usage.rs"),
        ("REPLICACHATKEY_CHAT", "service/chats/"),
        ("CHATS", "service/chats/"),
        ("CONVERSATIONS", "service/chats/"),
        ("REPLICACONV_CHAT", "service/chats/"),
        ("CHATMSG_USERCONV", "service/chats/"),
        ("CONVMSG_USER", "service/chats/"),
        ("USER_CHAT", "service/chats/"),
        ("USERSOURCE_CHAT", "service/chats/"),
        ("REPLICAMONTH_CONVERSATIONS", "service/usage.rs"),
        ("REPLICADAY_CONVERSATIONS", "service/usage.rs"),
        ("REPLICASOURCE_CONVERSATIONS", "service/usage.rs"),
        ("ORGMONTH_CONVERSATIONS", "service/quotas.rs"),
        ("ORG_QUOTA", "service/quotas.rs"),
        ("OPEN_CONVERSATION", "service/chats/"),
        ("REPLICATERM_CONVERSATIONS", "service/chats/"),
        ("CHANNELREPLICA_INTEGRATION", "service/integrations.rs"),
        ("KEYHASH_EMBED", "service/embed.rs"),
        ("REPLICA_EMBED", "service/embed.rs"),
        ("ORG_REPLICAORDER", "store/replica_index.rs"),
        ("ORG_PRIVATEREPLICA", "store/replica_index.rs"),
        ("SCOPE_KBORDER", "store/kb/"),
        ("ORG_REPLICACOUNT", "store/replica_index.rs"),
    ];

    #[test]
    fn tables_are_named_only_by_their_owners() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let defined = std::fs::read_to_string(src.join("store/tables.rs")).unwrap();
        let tables: Vec<&str> = defined
            .lines()
            .filter_map(|l| l.strip_prefix("pub const ")?.split_once(": TableDefinition").map(|(name, _)| name))
            .collect();
        assert_eq!(tables.len(), OWNERS.len(), "every table has one owner in OWNERS");
        let mut all = Vec::new();
        files(&src, &mut all);
        let mut foreign: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for path in &all {
            let rel = path.strip_prefix(&src).unwrap().display().to_string();
            if ["store/tables.rs", "store/migrate.rs", "store/copy.rs"].contains(&rel.as_str()) {
                continue;
            }
            for name in named_after(&std::fs::read_to_string(path).unwrap(), "tables::") {
                let Some((table, owner)) = OWNERS.iter().find(|(t, _)| *t == name) else { continue };
                if !rel.starts_with(owner) {
                    foreign.entry(table).or_default().push(rel.clone());
                }
            }
        }
        for (table, _) in OWNERS {
            assert!(tables.contains(table), "{table} is not a table of store::tables");
        }
        assert!(foreign.is_empty(), "tables named outside their owners: {foreign:?}");
        assert_eq!(
            named_after("let t = txn.open_table(tables::META)?;", "tables::"),
            ["META"],
            "the check finds a use"
        );
    }

    /// The storage engine is `store`'s alone: no other module's code names a `redb::` path (it
    /// names `store::kv`'s `TableDef`, `StoreKey` and `StoreValue`).
    #[test]
    fn only_store_names_redb() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut all = Vec::new();
        files(&src, &mut all);
        let named: Vec<String> = all
            .iter()
            .filter(|path| !path.starts_with(src.join("store")))
            .filter(|path| !named_after(&std::fs::read_to_string(path).unwrap(), "redb::").is_empty())
            .map(|path| path.strip_prefix(&src).unwrap().display().to_string())
            .collect();
        assert!(named.is_empty(), "redb named outside store: {named:?}");
        assert!(!named_after("use redb::{Key, Value};", "redb::").is_empty(), "the check finds an import");
    }

    /// A channel's name is written as a literal only where the channel is: `service::channel`
    /// (its one type), `channels/` (its bot) and `openapi/` (the document's prose); elsewhere the
    /// code says `Channel::…name()`. Comments and test code are not read.
    #[test]
    fn channel_names_are_written_where_the_channels_are() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let quoted: Vec<String> =
            crate::service::channel::Channel::ALL.iter().map(|c| format!("\"{}\"", c.name())).collect();
        let mut all = Vec::new();
        files(&src, &mut all);
        let mut found = Vec::new();
        for path in all {
            let rel = path.strip_prefix(&src).unwrap().display().to_string();
            // `store/migrate.rs`: the names a past schema stored its bots under, frozen.
            let frozen = rel == "store/migrate.rs";
            if rel.starts_with("channels/") || rel.starts_with("openapi/") || rel == "service/channel.rs" || frozen {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let lines = code.lines().filter(|l| !l.trim_start().starts_with("//"));
            if lines.into_iter().any(|l| quoted.iter().any(|q| l.contains(q.as_str()))) {
                found.push(rel);
            }
        }
        assert!(found.is_empty(), "channel names written as literals in {found:?}");
    }

    /// `(file, module, used)` for each name of another module of `service` (a file or a folder
    /// of `src/service`) in its files: `crate::service::used`, and `super::used` in a file of
    /// `service` itself or a folder's `mod.rs` (`super::super::used` deeper in a folder). The
    /// service root (`service/mod.rs`, shared helpers) is no node.
    fn service_edges(src: &Path) -> Vec<(String, String, String)> {
        let service = src.join("service");
        let mut all = Vec::new();
        files(&service, &mut all);
        let mut edges = Vec::new();
        for path in all {
            let rel: Vec<String> =
                path.strip_prefix(&service).unwrap().iter().map(|p| p.to_string_lossy().into()).collect();
            if rel == ["mod.rs"] {
                continue;
            }
            let module = rel[0].trim_end_matches(".rs").to_string();
            let up = if rel.len() == 1 || rel[1] == "mod.rs" { "super::" } else { "super::super::" };
            let text = std::fs::read_to_string(&path).unwrap();
            let mut used = named_after(&text, "crate::service::");
            used.extend(named_after(&text, up));
            for u in used {
                let is_module = service.join(format!("{u}.rs")).exists() || service.join(&u).is_dir();
                if u != module && is_module {
                    edges.push((rel.join("/"), module.clone(), u));
                }
            }
        }
        edges
    }

    /// A cycle among `edges` (`from → to`), as the modules along it, if there is one.
    fn cycle(edges: &[(String, String)]) -> Option<Vec<String>> {
        fn visit<'a>(
            at: &'a str,
            edges: &'a [(String, String)],
            path: &mut Vec<&'a str>,
            done: &mut Vec<&'a str>,
        ) -> Option<Vec<String>> {
            if let Some(i) = path.iter().position(|m| *m == at) {
                return Some(path[i..].iter().chain([&at]).map(|m| m.to_string()).collect());
            }
            if done.contains(&at) {
                return None;
            }
            path.push(at);
            for (_, to) in edges.iter().filter(|(from, _)| from == at) {
                if let Some(c) = visit(to, edges, path, done) {
                    return Some(c);
                }
            }
            path.pop();
            done.push(at);
            None
        }
        let mut done = Vec::new();
        edges.iter().find_map(|(from, _)| visit(from, edges, &mut Vec::new(), &mut done))
    }

    #[test]
    fn service_modules_point_one_way() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let edges = service_edges(&src);
        let pairs: Vec<(String, String)> = edges.iter().map(|(_, m, u)| (m.clone(), u.clone())).collect();
        assert_eq!(cycle(&pairs), None, "the modules of service name each other in a circle");
        let place = |m: &str| SERVICE_ORDER.iter().position(|o| *o == m);
        let mut wrong = Vec::new();
        for (file, module, used) in &edges {
            let (Some(own), Some(other)) = (place(module), place(used)) else {
                panic!("service::{module} or service::{used} has no place in SERVICE_ORDER");
            };
            if other > own {
                wrong.push(format!("service/{file} uses service::{used}, which comes after it in SERVICE_ORDER"));
            }
        }
        assert!(wrong.is_empty(), "upward imports in service:\n{}", wrong.join("\n"));
    }

    #[test]
    fn the_cycle_finder_finds_a_circle_and_only_one() {
        let e = |pairs: &[(&str, &str)]| pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(cycle(&e(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
        assert_eq!(cycle(&e(&[("a", "b"), ("b", "c"), ("c", "a")])).map(|c| c.len()), Some(4));
        assert_eq!(names("{a, b::{c, d}, e}"), ["a", "b", "e"]);
        assert_eq!(named_after("use super::super::x;\nuse super::y;", "super::"), ["y"]);
    }
}
