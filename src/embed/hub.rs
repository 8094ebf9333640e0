//! Model directories fetched from a Hugging Face–compatible hub, where the operator allows it.
//!
//! A catalog entry may name a hub repository (`"hub": "sentence-transformers/all-MiniLM-L6-v2"`,
//! optionally `@REVISION`, default `main`) instead of a directory: its directory is then
//! `DATA_DIR/models/ID`. When that directory is missing at start and the operator gave a hub
//! (`serve --model-hub URL`, e.g. `https://huggingface.co`), the model's files ([`FILES`]) are
//! fetched from `URL/REPO/resolve/REVISION/FILE` into a sibling `ID.partial` directory, which
//! is renamed into place only once every file is in: an interrupted fetch leaves nothing a
//! later start would take for a model. Without `--model-hub` nothing is downloaded, ever, and
//! a missing directory is a start-up error that says where to put the model.

use std::path::Path;

use tokio::io::AsyncWriteExt;

use super::install::InstallError;

/// The files of a model directory, and whether each is required (the others are fetched when
/// the repository has them: a 404 skips them).
pub const FILES: &[(&str, bool)] = &[
    ("config.json", true),
    ("tokenizer.json", true),
    ("model.safetensors", true),
    ("modules.json", false),
    ("1_Pooling/config.json", false),
    ("sentence_bert_config.json", false),
    ("config_sentence_transformers.json", false),
];

/// Longest wait for a hub's answer to one file's request (the download itself may take longer).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Fetches repository `repo` (`OWNER/NAME[@REVISION]`) from `hub` (a base URL) into `dir`,
/// unless `dir` holds a `config.json` already. Errors ([`InstallError`]) name the URL and
/// status at fault.
pub async fn ensure(hub: Option<&str>, repo: &str, dir: &Path) -> Result<(), InstallError> {
    if dir.join("config.json").is_file() {
        return Ok(());
    }
    let Some(hub) = hub else {
        return Err(InstallError::NoHub { dir: dir.to_path_buf(), repo: repo.to_string() });
    };
    let partial = dir.with_extension("partial");
    let _ = tokio::fs::remove_dir_all(&partial).await;
    let client = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).build().map_err(InstallError::Client)?;
    let (name, revision) = repo.split_once('@').unwrap_or((repo, "main"));
    for (file, required) in FILES {
        let url = format!("{}/{name}/resolve/{revision}/{file}", hub.trim_end_matches('/'));
        tracing::info!(%url, "fetching an embedding model file");
        download(&client, &url, &partial.join(file), *required).await?;
    }
    tokio::fs::rename(&partial, dir).await.map_err(InstallError::io(dir))
}

/// Writes the body of `url` to `to` (its directories made); a 404 of a file not `required`
/// writes nothing.
async fn download(client: &reqwest::Client, url: &str, to: &Path, required: bool) -> Result<(), InstallError> {
    let mut response = client.get(url).send().await.map_err(InstallError::request(url))?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND && !required {
        return Ok(());
    }
    if !status.is_success() {
        return Err(InstallError::HubStatus { url: url.to_string(), status });
    }
    if let Some(parent) = to.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(InstallError::io(parent))?;
    }
    let mut out = tokio::fs::File::create(to).await.map_err(InstallError::io(to))?;
    while let Some(chunk) = response.chunk().await.map_err(InstallError::request(url))? {
        out.write_all(&chunk).await.map_err(InstallError::io(to))?;
    }
    out.sync_all().await.map_err(InstallError::io(to))
}
