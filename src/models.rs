//! The model catalog (spec §2.4): exactly 19 model ids, loaded from `data/models.json`
//! (compiled into the binary, so it always starts) or from an operator's copy (`--models FILE`)
//! whose entries may also carry `route` (`NAME/UPSTREAM_MODEL`, see `generate::routing`)
//! and `vision` (the model accepts images); those two are never shown on the wire.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One catalog entry as on the wire.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct ModelInfo {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub deprecated: bool,
    /// `NAME/UPSTREAM_MODEL`: the upstream serving this model (operator catalogs only).
    #[serde(default, skip_serializing)]
    pub route: Option<String>,
    /// Whether the model accepts images (`imageURL` is passed to it).
    #[serde(default, skip_serializing)]
    pub vision: bool,
}

/// The catalog, in file order.
#[derive(Clone)]
pub struct Models {
    pub entries: serde_json::Map<String, serde_json::Value>,
    ids: Vec<String>,
    /// `(route, vision)` of the entries, in file order.
    serving: Vec<(Option<String>, bool)>,
}

/// The catalog shipped in `data/models.json`.
pub const SHIPPED: &str = include_str!("../data/models.json");

/// Number of entries the interface requires.
pub const CATALOG_SIZE: usize = 19;

/// What is wrong with the text of a catalog ([`Models::parse`]).
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// Not a JSON object of well-formed entries.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Another number of entries than [`CATALOG_SIZE`].
    #[error("model catalog has {0} entries, must have {CATALOG_SIZE}")]
    Size(usize),
}

/// Why the catalog could not be loaded ([`Models::load`]); the text names the file.
#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    /// The `--models` file cannot be read.
    #[error("--models {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The `--models` file is not a catalog.
    #[error("--models {}: {source}", path.display())]
    File { path: PathBuf, source: CatalogError },
    /// The shipped catalog is not one (a broken build).
    #[error("data/models.json: {0}")]
    Shipped(CatalogError),
}

impl Models {
    /// Parses a catalog; errors unless it has exactly 19 well-formed entries.
    pub fn parse(text: &str) -> Result<Models, CatalogError> {
        let raw: indexmap_like::Ordered = serde_json::from_str(text)?;
        if raw.0.len() != CATALOG_SIZE {
            return Err(CatalogError::Size(raw.0.len()));
        }
        let mut entries = serde_json::Map::new();
        let mut ids = Vec::new();
        let mut serving = Vec::new();
        for (id, info) in raw.0 {
            entries.insert(id.clone(), serde_json::to_value(&info)?);
            ids.push(id);
            serving.push((info.route, info.vision));
        }
        Ok(Models { entries, ids, serving })
    }

    /// The catalog of `--models FILE`, or the shipped one; errors name the file.
    pub fn load(file: Option<&Path>) -> Result<Models, ModelsError> {
        match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| ModelsError::Read { path: path.to_path_buf(), source })?;
                Models::parse(&text).map_err(|source| ModelsError::File { path: path.to_path_buf(), source })
            }
            None => Models::parse(SHIPPED).map_err(ModelsError::Shipped),
        }
    }

    /// The model ids, in catalog order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// `(model id, route, vision)` of the entries that carry a `route`.
    pub fn routes(&self) -> impl Iterator<Item = (&str, &str, bool)> {
        self.ids.iter().zip(&self.serving).filter_map(|(id, (r, v))| Some((id.as_str(), r.as_deref()?, *v)))
    }

    /// Whether the entry `id` says the model accepts images.
    pub fn vision(&self, id: &str) -> bool {
        self.ids.iter().position(|i| i == id).is_some_and(|i| self.serving[i].1)
    }

    /// Whether `id` is a catalog model.
    pub fn contains(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    /// The default model of new replicas: the first catalog entry (the embedded generator).
    pub fn default_id(&self) -> &str {
        &self.ids[0]
    }
}

mod indexmap_like {
    use super::ModelInfo;
    use serde::de::{Deserializer, MapAccess, Visitor};

    /// A JSON object kept in file order.
    pub struct Ordered(pub Vec<(String, ModelInfo)>);

    impl<'de> serde::Deserialize<'de> for Ordered {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Ordered;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object of model ids")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Ordered, A::Error> {
                    let mut out = Vec::new();
                    while let Some((k, v)) = m.next_entry::<String, ModelInfo>()? {
                        if out.iter().any(|(e, _)| e == &k) {
                            return Err(serde::de::Error::custom(format!("duplicate model id {k}")));
                        }
                        out.push((k, v));
                    }
                    Ok(Ordered(out))
                }
            }
            d.deserialize_map(V)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_catalog_has_19_models_one_deprecated() {
        let m = Models::parse(SHIPPED).unwrap();
        assert_eq!(m.entries.len(), 19);
        let deprecated: Vec<_> =
            m.entries.iter().filter(|(_, v)| v["deprecated"] == true).map(|(k, _)| k.clone()).collect();
        assert_eq!(deprecated, vec!["gpt-oss-120b".to_string()]);
        assert_eq!(m.default_id(), "replicad-extractive");
    }

    #[test]
    fn a_catalog_of_another_size_is_refused_naming_the_file() {
        assert!(matches!(Models::parse("{}"), Err(CatalogError::Size(0))));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("models.json");
        std::fs::write(&path, "{}").unwrap();
        let e = Models::load(Some(&path)).err().unwrap();
        assert!(matches!(e, ModelsError::File { source: CatalogError::Size(0), .. }));
        assert_eq!(e.to_string(), format!("--models {}: model catalog has 0 entries, must have 19", path.display()));
    }
}
