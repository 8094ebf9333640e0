//! Entry point: parse the command line, set up logging (stderr), dispatch.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use serde_json::json;

use replicad::cli::{Cli, Command, InvitesCommand};
use replicad::{admin, search, service, store};

fn main() -> ExitCode {
    replicad::install_crypto_provider();
    let cli = Cli::parse();
    replicad::install_crypto_provider();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| "info".into()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(format!("cannot start the runtime: {e}")),
    };
    let result = runtime.block_on(run(cli.command));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(message: String) -> ExitCode {
    eprintln!("replicad: {message}");
    ExitCode::FAILURE
}

async fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Serve(config) => {
            let listener = tokio::net::TcpListener::bind(config.listen)
                .await
                .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
            replicad::serve(*config, listener, shutdown_signal()).await
        }
        Command::Invites { command: InvitesCommand::Create { dir, expires_in } } => {
            let req = json!({"op": "invite", "expires_in_secs": expires_in});
            let code = match admin::request(&dir.data_dir, &req).await? {
                Some(v) => v["code"].as_str().unwrap_or_default().to_string(),
                None => {
                    let store = store::Store::open(&dir.data_dir).map_err(|e| e.to_string())?;
                    service::orgs::create_invite(&store, expires_in).await.map_err(|e| e.to_string())?
                }
            };
            println!("{code}");
            Ok(())
        }
        Command::Reindex(dir) => {
            let chunks = match admin::request(&dir.data_dir, &json!({"op": "reindex"})).await? {
                Some(v) => v["chunks"].as_u64().unwrap_or(0) as usize,
                None => {
                    let store = store::Store::open(&dir.data_dir).map_err(|e| e.to_string())?;
                    let (s, _) = search::Search::open(&dir.data_dir).map_err(|e| e.to_string())?;
                    search::indexer::rebuild_from_store(&store, &Arc::new(s)).await.map_err(|e| e.to_string())?
                }
            };
            eprintln!("reindexed {chunks} chunks");
            Ok(())
        }
        Command::Orgs { command } => replicad::orgs_cli::run(command).await,
        Command::Check(dir) => {
            let report = match admin::request(&dir.data_dir, &json!({"op": "check"})).await? {
                Some(v) => v["report"].clone(),
                None => {
                    let store = store::Store::open(&dir.data_dir).map_err(|e| e.to_string())?;
                    let (s, _) = search::Search::open(&dir.data_dir).map_err(|e| e.to_string())?;
                    let r = search::check::check(&store, &Arc::new(s)).await.map_err(|e| e.to_string())?;
                    serde_json::to_value(r).map_err(|e| e.to_string())?
                }
            };
            println!("{report}");
            match report["ok"].as_bool() {
                Some(true) => Ok(()),
                _ => Err("the search index disagrees with the store; run `replicad reindex`".into()),
            }
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => return ctrl_c.await.unwrap_or(()),
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await.unwrap_or(());
}
