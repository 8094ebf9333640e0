//! Plain-text pieces shared by ingestion and generation: language detection and chunking. Below
//! `ingest`, `search` and `generate`; uses nothing of the crate.

pub mod chunk;
pub mod language;
