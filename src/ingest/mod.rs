//! The knowledge-base pipeline: fetch (`url`) or upload (`filename`) → extract (in a confined
//! child process: `sandbox`) → detect the language → chunk (see `text`) → store and outbox
//! (then the indexer, see `search`).

pub mod archive;
pub mod content;
pub mod extract;
pub mod fetch;
pub mod formats;
pub mod pipeline;
pub mod queue;
pub mod sandbox;
