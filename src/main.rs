//! Entry point: parse the command line, set up logging (stderr), dispatch.

use clap::Parser;
use std::process::ExitCode;

use replicad::admin;
use replicad::backup::{restore, Progress};
use replicad::cli::{Cli, Command, InvitesCommand, ModelsCommand, ReplicasCommand};

fn main() -> ExitCode {
    replicad::store::private::restrict_umask();
    replicad::memory::configure();
    replicad::embed::local::one_thread_per_product();
    let cli = Cli::parse();
    if let Command::ExtractSandboxed { format } = &cli.command {
        // A child of the server: no runtime, no logging set-up, nothing but the extraction.
        return replicad::ingest::sandbox::child::run(format);
    }
    replicad::ops::logging::init(&cli.log, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(Failure::Runtime(e)),
    };
    let result = runtime.block_on(run(cli.command));
    // A blocking task still running (a long scan) does not hold the exit; an extraction is a
    // child process that dies with the server, and its job resumes at the next start.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    // With every task dropped, the writer thread ends and the store closes cleanly (a store
    // not closed is checked at the next start, which then takes longer).
    if !replicad::store::wait_closed(std::time::Duration::from_secs(5)) {
        eprintln!("replicad: the store was still in use at exit; the next start checks it");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(failure: Failure) -> ExitCode {
    eprintln!("replicad: {failure}");
    ExitCode::FAILURE
}

/// Why a command failed; its text is printed after `replicad: ` on stderr.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// The tokio runtime cannot be built.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// `serve` did not start.
    #[error(transparent)]
    Start(#[from] replicad::StartError),
    /// An admin command (`invites`, `reindex`, `check`, `backup`, `orgs`, `replicas`) failed.
    #[error(transparent)]
    Admin(#[from] admin::AdminError),
    /// `restore` failed.
    #[error(transparent)]
    Restore(#[from] restore::RestoreError),
    /// `restore` was given a PostgreSQL store.
    #[error(
        "restore writes a redb store from a replicad backup; a PostgreSQL store is restored with pg_restore \
         (then `replicad reindex` rebuilds the search index)"
    )]
    RestorePostgres,
    /// `models install` failed.
    #[error(transparent)]
    Install(#[from] replicad::embed::install::InstallError),
    /// The command's result cannot be printed as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// `extract-sandboxed` reached the runtime (it is dispatched before).
    #[error("extract-sandboxed runs before the runtime")]
    ExtractSandboxed,
    /// `check`: the uploaded files of these entries are missing or damaged.
    #[error(
        "the uploaded files of entries {0:?} are missing or damaged; restore them from a backup, or delete those \
         entries and upload their files again"
    )]
    DamagedFiles(Vec<u64>),
    /// `check`: the search index disagrees with the store.
    #[error("the search index disagrees with the store; run `replicad reindex`")]
    IndexDisagrees,
}

async fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Serve(config) => Ok(replicad::serve_until_signal(*config).await?),
        Command::Invites { command: InvitesCommand::Create { dir, expires_in } } => {
            println!("{}", admin::create_invite(&dir, expires_in).await?);
            Ok(())
        }
        Command::Reindex(dir) => {
            eprintln!("reindexed {} chunks", admin::reindex(&dir).await?);
            Ok(())
        }
        Command::Backup { dir, to, secrets_key_file } => {
            let summary = admin::backup(&dir, secrets_key_file.as_deref(), &to, &mut progress_lines("backup")).await?;
            let mib = summary.bytes as f64 / 1_048_576.0;
            eprintln!(
                "backup: {} records, {mib:.1} MiB written to {} in {:.1} s",
                summary.records,
                summary.file.display(),
                summary.millis as f64 / 1000.0
            );
            println!("{}", serde_json::to_string(&summary)?);
            Ok(())
        }
        Command::Restore { from, dir, secrets_key_file } => {
            if dir.store.is_some() {
                return Err(Failure::RestorePostgres);
            }
            let restored = restore::restore(&from, &dir.data_dir, secrets_key_file.as_deref()).await?;
            eprintln!(
                "restore: {} records and {} indexed chunks in {}",
                restored.manifest.records,
                restored.chunks,
                dir.data_dir.display()
            );
            println!("{}", serde_json::to_string(&restored)?);
            Ok(())
        }
        Command::Models { command: ModelsCommand::Install { name, data_dir, index_url } } => {
            replicad::install_crypto_provider();
            let dir =
                replicad::embed::install::install(&name, &data_dir, &index_url).await.map_err(Failure::Install)?;
            println!("{}", dir.display());
            Ok(())
        }
        Command::Orgs { command } => Ok(replicad::orgs_cli::run(command).await?),
        Command::Replicas { command } => {
            let what = match &command {
                ReplicasCommand::Export { .. } => "export",
                ReplicasCommand::Import { .. } => "import",
            };
            Ok(replicad::replicas_cli::run(command, &mut progress_lines(what)).await?)
        }
        Command::ExtractSandboxed { .. } => Err(Failure::ExtractSandboxed),
        Command::Check(dir) => {
            let report = admin::check(&dir).await?;
            println!("{}", serde_json::to_string(&report)?);
            if report.ok {
                Ok(())
            } else if !report.files.damaged_files.is_empty() {
                Err(Failure::DamagedFiles(report.files.damaged_files))
            } else {
                Err(Failure::IndexDisagrees)
            }
        }
    }
}

/// Prints the progress of a long run on stderr after `what: `: nothing in its first second,
/// then a line at most every second.
fn progress_lines(what: &'static str) -> impl FnMut(Progress) + Send {
    let started = std::time::Instant::now();
    let mut last = started;
    move |p| {
        let now = std::time::Instant::now();
        if now.duration_since(started).as_secs() >= 1 && now.duration_since(last).as_secs() >= 1 {
            last = now;
            eprintln!("{what}: {p}");
        }
    }
}
