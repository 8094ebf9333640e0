//! Integration tests of replicad: each test starts the real binary on its own temporary data
//! directory and drives it over HTTP and through its CLI, as operators and clients do.

mod common;

mod answers;
mod auth;
mod backup;
mod chat;
mod chats;
mod cli;
mod concurrency;
mod disk_full;
mod embed;
mod errors;
mod fixtures;
mod framing;
mod health;
mod heavy_work;
mod history;
mod hosted_tools;
mod ingest;
mod insights;
mod invites;
mod isolation;
mod knowledge_base;
mod knowledge_base_org;
mod lists;
mod llm;
mod llm_real;
mod logs;
mod messenger_a;
mod messenger_b;
mod metrics;
mod openapi;
mod quotas;
mod rate_limit;
mod read_cache;
mod replicas;
mod restart;
mod searchable;
mod security;
mod shapes;
mod shutdown;
mod stored_files;
mod tls;
mod usage;
mod users;
