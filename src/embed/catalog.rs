//! The catalog of embedding models (the interface's `llm.embeddingModel` values), beside the
//! language-model catalog ([`crate::models`]): an operator's JSON file, since no weights ship in
//! the binary.
//!
//! ```json
//! {
//!   "default": "all-minilm-l6-v2",
//!   "models": {
//!     "all-minilm-l6-v2": {"name": "all-MiniLM-L6-v2", "description": "…", "dir": "models/all-MiniLM-L6-v2"},
//!     "multilingual-e5-large": {"name": "multilingual-e5-large", "description": "…",
//!       "route": "tei/intfloat/multilingual-e5-large", "dimension": 1024,
//!       "prompts": {"query": "query: ", "passage": "passage: "}}
//!   }
//! }
//! ```
//! An entry is served in-process from `dir` (a model directory, relative paths from the
//! catalog file's directory; prompts and pooling come from the directory), in-process from
//! `hub` (`"sentence-transformers/all-MiniLM-L6-v2"`: its directory `DATA_DIR/models/ID`,
//! fetched once from `--model-hub` when the operator allows it, [`super::hub`]) or by an upstream:
//! `route` is `NAME/UPSTREAM_MODEL` as in the language-model catalog, `NAME` declared by
//! `--llm-upstream`, `dimension` the length of its vectors, `prompts` optional. `default` names
//! the model of replicas that name none; it defaults to the first entry.
//!
//! `aliases` (optional) are other ids the entry answers to: the ids of a hosted service's
//! catalog (`"aliases": ["multilingual-e5-large"]`), so that clients generated from that
//! service's document, whose `llm.embeddingModel` is an enum of those ids, create and read
//! replicas unchanged. A replica created with an alias keeps the alias as its
//! `llm.embeddingModel` (a client reads what it wrote) and is served by the entry. No id or
//! alias may name two entries.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::error::LoadError;
use super::install::InstallError;
use super::local::Local;
use super::upstream::Upstream;
use super::{Embedder, Precision};
use crate::upstream::{Client, DeclareError, Policy};

/// Why the embedding models cannot be served: a catalog that is not one
/// ([`EmbeddingModels::parse`], [`EmbeddingModels::load`]), a hub model that cannot be fetched
/// ([`EmbeddingModels::fetch_hub`]), a model that does not load or an upstream that is not
/// declared ([`EmbeddingModels::build`]). The text names the catalog file, the entry or the flag
/// at fault; a start-up failure, never an HTTP answer.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The catalog is not JSON, or not an object of `default` and `models`.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// Entry `id` is not an entry (a missing `name`, an unknown field, …).
    #[error("model {id:?}: {source}")]
    Entry { id: String, source: serde_json::Error },
    /// Entry `id` names a hub repository that is not `OWNER/NAME[@REVISION]` (or climbs out of
    /// the models directory).
    #[error("model {id:?}: hub {repo:?} is not OWNER/NAME or OWNER/NAME@REVISION")]
    Hub { id: String, repo: String },
    /// Entry `id` has a route that is not `NAME/UPSTREAM_MODEL`.
    #[error("model {id:?}: route {route:?} is not NAME/UPSTREAM_MODEL")]
    Route { id: String, route: String },
    /// Upstream entry `.0` has no positive `dimension`.
    #[error("model {0:?}: an upstream model needs \"dimension\" (the length of its vectors)")]
    NoDimension(String),
    /// Entry `.0` gives none, or more than one, of `dir`, `hub` and `route`.
    #[error("model {0:?}: give exactly one of \"dir\" or \"hub\" (in-process) or \"route\" (upstream)")]
    NotOneWay(String),
    /// An id or alias (`.0`) names two entries.
    #[error("{0:?} names two embedding models (ids and aliases must be unique)")]
    Duplicate(String),
    /// `models` is empty.
    #[error("no embedding model in \"models\"")]
    Empty,
    /// `default` (`.0`) is not the id of an entry.
    #[error("default {0:?} is not one of the models")]
    UnknownDefault(String),
    /// The catalog file cannot be read.
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The catalog file is not a catalog (`source` says why).
    #[error("{}: {source}", path.display())]
    File { path: PathBuf, source: Box<CatalogError> },
    /// No model directory was given ([`EmbeddingModels::from_dirs`]).
    #[error("no embedding model directory")]
    NoDirectory,
    /// The directory of hub entry `id` is missing and cannot be fetched.
    #[error("embedding model {id:?}: {source}")]
    Fetch { id: String, source: InstallError },
    /// The directory of entry `id` does not load (boxed: the largest of the causes).
    #[error("embedding model {id:?}: {source}")]
    Load { id: String, source: Box<LoadError> },
    /// Entry `id` is routed to an upstream `name` no `--llm-upstream` declares.
    #[error("embedding model {id:?}: no upstream named {name:?} (declare it with --llm-upstream {name}=BASE_URL)")]
    NoUpstream { id: String, name: String },
    /// An `--llm-upstream` spec, key file or client that cannot be used.
    #[error(transparent)]
    Declare(#[from] DeclareError),
}

/// One catalog entry.
#[derive(Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Model directory (in-process); exclusive with `route` and `hub`.
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// Hub repository `OWNER/NAME[@REVISION]` (in-process, from `DATA_DIR/models/ID`, fetched
    /// there once when the operator allows it: [`super::hub`]); exclusive with `dir` and
    /// `route`.
    #[serde(default)]
    pub hub: Option<String>,
    /// `NAME/UPSTREAM_MODEL` (upstream); exclusive with `dir`.
    #[serde(default)]
    pub route: Option<String>,
    /// Length of the upstream's vectors (required with `route`).
    #[serde(default)]
    pub dimension: Option<usize>,
    /// `query` / `passage` prefixes sent upstream (with `route`; a directory has its own).
    #[serde(default)]
    pub prompts: Prompts,
    /// Other ids this entry serves (a hosted catalog's ids).
    #[serde(default)]
    pub aliases: Vec<String>,
}

/// Prefixes of questions and passages.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Prompts {
    #[serde(default)]
    pub query: String,
    #[serde(default)]
    pub passage: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    default: Option<String>,
    models: serde_json::Map<String, serde_json::Value>,
}

/// The operator's embedding models, in file order.
#[derive(Debug)]
pub struct EmbeddingModels {
    entries: Vec<(String, Entry)>,
    default: String,
    /// The arithmetic of the in-process models ([`EmbeddingModels::set_precision`]).
    precision: Precision,
}

impl EmbeddingModels {
    /// Parses a catalog; relative `dir`s are taken from `base`. Errors name the entry at fault
    /// (no entry, unknown default, `dir` and `route` both or neither, a route without
    /// `dimension`, a malformed route).
    pub fn parse(text: &str, base: &Path) -> Result<EmbeddingModels, CatalogError> {
        let file: File = serde_json::from_str(text)?;
        let mut entries = Vec::new();
        for (id, value) in file.models {
            let mut entry: Entry = match serde_json::from_value(value) {
                Ok(entry) => entry,
                Err(source) => return Err(CatalogError::Entry { id, source }),
            };
            check(&id, &entry)?;
            entry.dir = entry.dir.map(|d| base.join(d));
            entries.push((id, entry));
        }
        let mut names = std::collections::HashSet::new();
        for name in entries.iter().flat_map(|(id, e)| std::iter::once(id).chain(&e.aliases)) {
            if !names.insert(name.as_str()) {
                return Err(CatalogError::Duplicate(name.clone()));
            }
        }
        let first = entries.first().map(|(id, _)| id.clone()).ok_or(CatalogError::Empty)?;
        let default = file.default.unwrap_or(first);
        if !entries.iter().any(|(id, _)| *id == default) {
            return Err(CatalogError::UnknownDefault(default));
        }
        Ok(EmbeddingModels { entries, default, precision: Precision::Auto })
    }

    /// The catalog in `path`: a catalog file, or a model directory, which is then the one
    /// model, its id the directory's name in lower case (`…/all-MiniLM-L6-v2` →
    /// `all-minilm-l6-v2`). Errors name the file.
    pub fn load(path: &Path) -> Result<EmbeddingModels, CatalogError> {
        if path.is_dir() {
            let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
            let entry = Entry {
                name: name.clone(),
                description: String::new(),
                dir: Some(path.to_path_buf()),
                hub: None,
                route: None,
                dimension: None,
                prompts: Prompts::default(),
                aliases: Vec::new(),
            };
            return Ok(EmbeddingModels {
                entries: vec![(name.clone(), entry)],
                default: name,
                precision: Precision::Auto,
            });
        }
        let text =
            std::fs::read_to_string(path).map_err(|source| CatalogError::Read { path: path.to_path_buf(), source })?;
        let base = path.parent().unwrap_or(Path::new("."));
        EmbeddingModels::parse(&text, base)
            .map_err(|e| CatalogError::File { path: path.to_path_buf(), source: Box::new(e) })
    }

    /// The catalog of model directories `dirs` (`(id, directory)`, in order; the first is the
    /// default): the models `replicad models install` put in a data directory. Errors if
    /// `dirs` is empty.
    pub fn from_dirs(dirs: Vec<(String, PathBuf)>) -> Result<EmbeddingModels, CatalogError> {
        let default = dirs.first().map(|(id, _)| id.clone()).ok_or(CatalogError::NoDirectory)?;
        let entries = dirs
            .into_iter()
            .map(|(id, dir)| {
                let entry = Entry {
                    name: id.clone(),
                    description: String::new(),
                    dir: Some(dir),
                    hub: None,
                    route: None,
                    dimension: None,
                    prompts: Prompts::default(),
                    aliases: Vec::new(),
                };
                (id, entry)
            })
            .collect();
        Ok(EmbeddingModels { entries, default, precision: Precision::Auto })
    }

    /// Makes [`EmbeddingModels::build`] load the in-process models in `precision` (`Auto`
    /// unless set: `serve --embedding-precision`).
    pub fn set_precision(&mut self, precision: Precision) {
        self.precision = precision;
    }

    /// The model ids, in file order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(id, _)| id.as_str())
    }

    /// The entry of `id` (an id or an alias), if it is a catalog model.
    pub fn entry(&self, id: &str) -> Option<&Entry> {
        self.entries.iter().find(|(i, e)| i == id || e.aliases.iter().any(|a| a == id)).map(|(_, e)| e)
    }

    /// The model of replicas that name none.
    pub fn default_id(&self) -> &str {
        &self.default
    }

    /// Gives every hub entry its directory, `models/ID`, fetching the missing ones from `hub`
    /// (`--model-hub`; `None`: a missing directory is an error saying where to put it).
    pub async fn fetch_hub(&mut self, models: &Path, hub: Option<&str>) -> Result<(), CatalogError> {
        for (id, entry) in &mut self.entries {
            let Some(repo) = &entry.hub else { continue };
            let dir = models.join(&*id);
            super::hub::ensure(hub, repo, &dir)
                .await
                .map_err(|source| CatalogError::Fetch { id: id.clone(), source })?;
            entry.dir = Some(dir);
        }
        Ok(())
    }

    /// Loads every model: directories read and mapped, upstreams bound to their declared
    /// `--llm-upstream` specs (`NAME=BASE_URL`) with `policy`. Errors name the model at fault.
    pub fn build(&self, upstream_specs: &[String], policy: Policy) -> Result<Embedders, CatalogError> {
        let mut declared = HashMap::new();
        for spec in upstream_specs {
            let (name, url) = crate::upstream::parse_spec(spec)?;
            declared.insert(name.to_string(), url.to_string());
        }
        let mut clients: HashMap<String, Arc<Client>> = HashMap::new();
        let mut models: HashMap<String, Arc<dyn Embedder>> = HashMap::new();
        for (id, entry) in &self.entries {
            let embedder: Arc<dyn Embedder> = match (&entry.dir, &entry.route) {
                (Some(dir), _) => Arc::new(
                    Local::load(id, dir, self.precision)
                        .map_err(|e| CatalogError::Load { id: id.clone(), source: Box::new(e) })?,
                ),
                (None, Some(route)) => {
                    let (name, model) = route.split_once('/').unwrap_or_default();
                    let client = match clients.get(name) {
                        Some(c) => c.clone(),
                        None => {
                            let url = declared
                                .get(name)
                                .ok_or_else(|| CatalogError::NoUpstream { id: id.clone(), name: name.to_string() })?;
                            let key = crate::upstream::api_key(name)?;
                            let c = Arc::new(Client::new(name, url, key, policy)?);
                            clients.insert(name.to_string(), c.clone());
                            c
                        }
                    };
                    let prompts = (entry.prompts.query.clone(), entry.prompts.passage.clone());
                    Arc::new(Upstream::new(id, client, model, entry.dimension.unwrap_or_default(), prompts))
                }
                (None, None) => unreachable!("checked by parse; a hub entry has its directory"),
            };
            for alias in &entry.aliases {
                models.insert(alias.clone(), embedder.clone());
            }
            models.insert(id.clone(), embedder);
        }
        Ok(Embedders { models, default: self.default.clone() })
    }
}

/// Whether an entry names exactly one way of serving it, completely.
fn check(id: &str, e: &Entry) -> Result<(), CatalogError> {
    match (&e.dir, &e.route, &e.hub) {
        (Some(_), None, None) => Ok(()),
        (None, None, Some(repo)) => {
            let (name, revision) = repo.split_once('@').unwrap_or((repo, "main"));
            let ok = name.split_once('/').is_some_and(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'));
            let safe = |s: &str| !s.is_empty() && !s.contains("..") && !s.starts_with('/');
            if ok && safe(name) && safe(revision) {
                Ok(())
            } else {
                Err(CatalogError::Hub { id: id.to_string(), repo: repo.clone() })
            }
        }
        (None, Some(route), None) => {
            let ok = route.split_once('/').is_some_and(|(n, m)| !n.is_empty() && !m.is_empty());
            if !ok {
                return Err(CatalogError::Route { id: id.to_string(), route: route.clone() });
            }
            match e.dimension {
                Some(d) if d > 0 => Ok(()),
                _ => Err(CatalogError::NoDimension(id.to_string())),
            }
        }
        _ => Err(CatalogError::NotOneWay(id.to_string())),
    }
}

/// The loaded models of a running server.
pub struct Embedders {
    models: HashMap<String, Arc<dyn Embedder>>,
    default: String,
}

impl Embedders {
    /// The model `id` (an id or an alias: the model's own [`Embedder::id`] is its catalog id),
    /// if the catalog has it.
    pub fn get(&self, id: &str) -> Option<Arc<dyn Embedder>> {
        self.models.get(id).cloned()
    }

    /// The default model.
    pub fn default_model(&self) -> Arc<dyn Embedder> {
        self.models[&self.default].clone()
    }

    /// The model of a replica whose `llm.embeddingModel` is `named`: that model when the
    /// catalog has it, else the default (a replica stored before the catalog had its model,
    /// or made with no catalog configured).
    pub fn of_replica(&self, named: Option<&str>) -> Arc<dyn Embedder> {
        named.and_then(|id| self.get(id)).unwrap_or_else(|| self.default_model())
    }

    /// Every id and alias that names the same model as `id` (`id` itself included; empty when
    /// the catalog has no `id`).
    pub fn names_of_same_model(&self, id: &str) -> Vec<String> {
        let Some(model) = self.get(id) else { return Vec::new() };
        self.models.iter().filter(|(_, m)| m.id() == model.id()).map(|(name, _)| name.clone()).collect()
    }

    /// The ids and aliases the catalog answers to, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.models.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }

    /// The catalog id of the default model.
    pub fn default_id(&self) -> &str {
        &self.default
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATALOG: &str = r#"{
        "default": "e5",
        "models": {
            "minilm": {"name": "all-MiniLM-L6-v2", "dir": "models/minilm"},
            "e5": {"name": "multilingual-e5-large", "route": "tei/intfloat/multilingual-e5-large", "dimension": 1024,
                   "prompts": {"query": "query: ", "passage": "passage: "}}
        }
    }"#;

    #[test]
    fn a_catalog_lists_local_and_upstream_models_with_a_default() {
        let c = EmbeddingModels::parse(CATALOG, Path::new("/etc/replicad")).unwrap();
        assert_eq!(c.ids().collect::<Vec<_>>(), vec!["minilm", "e5"]);
        assert_eq!(c.default_id(), "e5");
        assert_eq!(c.entry("minilm").unwrap().dir.as_deref(), Some(Path::new("/etc/replicad/models/minilm")));
        assert_eq!(c.entry("e5").unwrap().prompts.query, "query: ");
        assert!(c.entry("nope").is_none());
    }

    #[test]
    fn the_default_is_the_first_model_unless_named() {
        let c = EmbeddingModels::parse(r#"{"models": {"a": {"name": "A", "dir": "/m/a"}}}"#, Path::new(".")).unwrap();
        assert_eq!(c.default_id(), "a");
    }

    #[test]
    fn malformed_catalogs_name_the_entry_at_fault() {
        for (text, needle) in [
            (r#"{"models": {}}"#, "no embedding model"),
            (r#"{"default": "b", "models": {"a": {"name": "A", "dir": "/m"}}}"#, "default \"b\""),
            (r#"{"models": {"a": {"name": "A"}}}"#, "exactly one of"),
            (r#"{"models": {"a": {"name": "A", "dir": "/m", "route": "x/y", "dimension": 3}}}"#, "exactly one of"),
            (r#"{"models": {"a": {"name": "A", "route": "x/y"}}}"#, "needs \"dimension\""),
            (r#"{"models": {"a": {"name": "A", "route": "xy", "dimension": 3}}}"#, "NAME/UPSTREAM_MODEL"),
            (r#"{"models": {"a": {"name": "A", "dir": "/m", "pooling": "cls"}}}"#, "unknown field"),
        ] {
            let err = EmbeddingModels::parse(text, Path::new(".")).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn an_upstream_model_needs_its_upstream_declared() {
        crate::install_crypto_provider();
        let c = EmbeddingModels::parse(
            CATALOG.replace("\"dir\": \"models/minilm\"", "\"route\": \"tei/m\", \"dimension\": 3").as_str(),
            Path::new("."),
        )
        .unwrap();
        let policy = Policy {
            connect: std::time::Duration::from_secs(1),
            first_byte: std::time::Duration::from_secs(1),
            idle: std::time::Duration::from_secs(1),
            max_retries: 0,
            backoff: std::time::Duration::from_millis(1),
        };
        let err = c.build(&[], policy).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("no upstream named \"tei\""), "{err}");
        let built = c.build(&["tei=http://127.0.0.1:1/v1".to_string()], policy).ok().unwrap();
        assert_eq!((built.default_model().id(), built.default_model().dimension()), ("e5", 1024));
        assert_eq!(built.get("minilm").map(|m| m.dimension()), Some(3));
    }
}
