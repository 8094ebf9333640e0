//! Plain-text pieces shared by ingestion, search and generation: language detection, chunking,
//! what reads as code, a chunk read as prose and code blocks ([`blocks`]) and what kind of
//! answer a question asks for ([`intent`]; the index looks for definitions of "What is X?") and
//! the words its form implies ([`expansion`]), and the question a message wrapping it in a
//! client's context asks ([`question`]).
//! Below `ingest`, `search` and `generate`; uses nothing of the crate.

pub mod blocks;
pub mod chunk;
pub mod code;
pub mod expansion;
pub mod intent;
pub mod language;
pub mod pages;
pub mod question;
