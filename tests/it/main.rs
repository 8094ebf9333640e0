//! Integration tests of replicad: each test starts the real binary on its own temporary data
//! directory and drives it over HTTP and through its CLI, as operators and clients do.

mod common;

mod answers;
mod auth;
mod chat;
mod cli;
mod concurrency;
mod errors;
mod fixtures;
mod history;
mod ingest;
mod invites;
mod isolation;
mod knowledge_base;
mod llm;
mod llm_real;
mod openapi;
mod replicas;
mod restart;
mod security;
mod tls;
mod users;
