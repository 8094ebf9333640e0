//! The knowledge-base pipeline: fetch (`url`) or upload (`filename`) → extract → detect the
//! language → chunk → store and outbox (then the indexer, see `search`).

pub mod chunk;
pub mod extract;
pub mod fetch;
pub mod formats;
pub mod language;
pub mod pipeline;
