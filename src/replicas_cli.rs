//! `replicad replicas export|import` (docs/bundles.md): through a running server's admin
//! socket, or on the store itself when no server holds it ([`crate::admin::bundle`]).

use crate::admin::{self, AdminError, Answer, Request};
use crate::backup::Progress;
use crate::cli::ReplicasCommand;

/// Runs a `replicas` subcommand: prints the JSON summary on stdout and one line on stderr;
/// `progress` sees each step's progress. The text of an error is for the operator.
pub async fn run(command: ReplicasCommand, progress: &mut (dyn FnMut(Progress) + Send)) -> Result<(), AdminError> {
    match command {
        ReplicasCommand::Export { replica, org, dir, to, with_history } => {
            let to = absolute(&to)?;
            let req = Request::ExportReplica { org, replica, to, with_history };
            let Answer::Exported { exported } = admin::bundle(&dir, req, progress).await? else {
                return Err(AdminError::Failed("the server answered another operation".into()));
            };
            let mib = exported.bytes as f64 / 1_048_576.0;
            eprintln!(
                "export: {} entries, {} chunks, {mib:.1} MiB written to {} in {:.1} s",
                exported.counts.entries,
                exported.counts.chunks,
                exported.file.as_deref().unwrap_or(std::path::Path::new("-")).display(),
                exported.millis as f64 / 1000.0
            );
            println!("{}", serde_json::to_string(&exported)?);
        }
        ReplicasCommand::Import { file, org, owner, slug, embedding_model, dir } => {
            let from = absolute(&file)?;
            let req = Request::ImportReplica { from, org, owner, slug, embedding_model };
            let Answer::Imported { imported } = admin::bundle(&dir, req, progress).await? else {
                return Err(AdminError::Failed("the server answered another operation".into()));
            };
            let how = if imported.reembedding { "embedding again in the background" } else { "vectors kept" };
            eprintln!(
                "import: replica {} ({}) with {} entries and {} chunks in {:.1} s ({how})",
                imported.replica_uuid,
                imported.slug,
                imported.entries,
                imported.chunks,
                imported.millis as f64 / 1000.0
            );
            println!("{}", serde_json::to_string(&imported)?);
        }
    }
    Ok(())
}

fn absolute(path: &std::path::Path) -> Result<std::path::PathBuf, AdminError> {
    std::path::absolute(path).map_err(|source| AdminError::Path { path: path.to_path_buf(), source })
}
