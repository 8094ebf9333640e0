//! The knowledge-base pipeline: fetch (`url`) or upload (`filename`) → extract → detect the
//! language → chunk (see `text`) → store and outbox (then the indexer, see `search`).

pub mod content;
pub mod extract;
pub mod fetch;
pub mod formats;
pub mod pipeline;
