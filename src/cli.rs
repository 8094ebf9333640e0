//! The command line: `serve`, `invites create`, `reindex`, `check`, `orgs list|set-quota`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::Config;

/// replicad: the Conversational Replica Service Interface in one binary.
#[derive(Parser, Debug)]
#[command(name = "replicad", version, about)]
pub struct Cli {
    /// Log filter (tracing syntax, e.g. `info`, `replicad=debug`); logs go to stderr.
    #[arg(long, env = "REPLICAD_LOG", default_value = "info", global = true)]
    pub log: String,
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
    /// Organizations: their usage and the operator's quotas.
    Orgs {
        #[command(subcommand)]
        command: OrgsCommand,
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

/// The data directory flag shared by admin commands.
#[derive(clap::Args, Debug, Clone)]
pub struct DataDir {
    /// Directory of the runtime state.
    #[arg(long, env = "REPLICAD_DATA_DIR", default_value = "replicad-data")]
    pub data_dir: PathBuf,
}

/// Parses `7d`, `12h`, `30m`, `45s` or plain seconds into seconds.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], c),
        _ => (s, 's'),
    };
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a duration like 7d, 12h, 30m, 45s"))?;
    let mult = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 604_800,
        _ => return Err(format!("unknown unit {unit:?} in {s:?}; use s, m, h, d or w")),
    };
    n.checked_mul(mult).filter(|v| *v > 0).ok_or_else(|| format!("{s:?} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("7d"), Ok(604_800));
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("5y").is_err());
        assert!(parse_duration("abc").is_err());
    }
}
