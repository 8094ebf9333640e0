//! Knowledge-base pipeline pieces that do not touch the store: text → chunks.

pub mod chunk;
