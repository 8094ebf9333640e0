//! The model catalog (spec §2.4): exactly 19 model ids, loaded from `data/models.json`
//! (compiled into the binary, so it always starts) or from an operator's copy (`--models FILE`)
//! whose entries may also carry `route` (`NAME/UPSTREAM_MODEL`, see `generate::routing`)
//! and `vision` (the model accepts images); those two are never shown on the wire.

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

impl Models {
    /// Parses a catalog; errors unless it has exactly 19 well-formed entries.
    pub fn parse(text: &str) -> Result<Models, String> {
        let raw: indexmap_like::Ordered = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if raw.0.len() != CATALOG_SIZE {
            return Err(format!("model catalog has {} entries, must have {CATALOG_SIZE}", raw.0.len()));
        }
        let mut entries = serde_json::Map::new();
        let mut ids = Vec::new();
        let mut serving = Vec::new();
        for (id, info) in raw.0 {
            entries.insert(id.clone(), serde_json::to_value(&info).map_err(|e| e.to_string())?);
            ids.push(id);
            serving.push((info.route, info.vision));
        }
        Ok(Models { entries, ids, serving })
    }

    /// The catalog of `--models FILE`, or the shipped one; errors name the file.
    pub fn load(file: Option<&std::path::Path>) -> Result<Models, String> {
        match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("--models {}: {e}", path.display()))?;
                Models::parse(&text).map_err(|e| format!("--models {}: {e}", path.display()))
            }
            None => Models::parse(SHIPPED).map_err(|e| format!("data/models.json: {e}")),
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
}
