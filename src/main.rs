//! Entry point: parse the command line, set up logging (stderr), dispatch.

use clap::Parser;
use std::process::ExitCode;

use replicad::admin;
use replicad::cli::{Cli, Command, InvitesCommand};

fn main() -> ExitCode {
    let cli = Cli::parse();
    replicad::ops::logging::init(&cli.log, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(format!("cannot start the runtime: {e}")),
    };
    let result = runtime.block_on(run(cli.command));
    // A blocking task still running (an extraction) does not hold the exit: its job resumes at
    // the next start.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
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
        Command::Serve(config) => replicad::serve_until_signal(*config).await,
        Command::Invites { command: InvitesCommand::Create { dir, expires_in } } => {
            println!("{}", admin::create_invite(&dir.data_dir, expires_in).await?);
            Ok(())
        }
        Command::Reindex(dir) => {
            eprintln!("reindexed {} chunks", admin::reindex(&dir.data_dir).await?);
            Ok(())
        }
        Command::Orgs { command } => replicad::orgs_cli::run(command).await,
        Command::Check(dir) => {
            let report = admin::check(&dir.data_dir).await?;
            println!("{}", serde_json::to_string(&report).map_err(|e| e.to_string())?);
            if report.ok {
                Ok(())
            } else {
                Err("the search index disagrees with the store; run `replicad reindex`".into())
            }
        }
    }
}
