//! Plain-text pieces shared by ingestion and generation: language detection, chunking and
//! what reads as code. Below `ingest`, `search` and `generate`; uses nothing of the crate.

pub mod chunk;
pub mod code;
pub mod language;
