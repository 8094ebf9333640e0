//! `replicad orgs list|set-quota`: through a running server's admin socket, or on the store
//! itself when no server holds it.

use serde_json::Value;

use crate::admin::{self, AdminError, Answer, Request};

use crate::cli::OrgsCommand;
use crate::config::Config;
use crate::config::DataDir;
use crate::service::quotas::{self, OrgUsage};
use crate::store::now_ms;
use crate::store::records::Quota;

/// Runs an `orgs` subcommand; the text of an error is for the operator.
pub async fn run(command: OrgsCommand) -> Result<(), AdminError> {
    match command {
        OrgsCommand::List { dir, json } => {
            let orgs = list(&dir).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&orgs)?);
            } else {
                print!("{}", table(&orgs));
            }
            Ok(())
        }
        OrgsCommand::SetQuota {
            org,
            dir,
            conversations_per_month,
            replicas,
            knowledge_base_entries,
            embed_conversations_per_month,
        } => {
            let quota =
                Quota { conversations_per_month, replicas, knowledge_base_entries, embed_conversations_per_month };
            let set = match admin::request(&dir.data_dir, &Request::SetQuota { org, quota: quota.clone() }).await? {
                Some(Answer::Quota { quota }) => quota,
                Some(other) => return Err(admin::unexpected(other)),
                None => quotas::set(&admin::open_store(&dir)?, org, quota).await?,
            };
            println!("{}", serde_json::to_string(&set)?);
            Ok(())
        }
    }
}

async fn list(dir: &DataDir) -> Result<Vec<Value>, AdminError> {
    let data_dir = &dir.data_dir;
    let orgs: Vec<OrgUsage> = match admin::request(data_dir, &Request::Orgs).await? {
        Some(Answer::Orgs { orgs }) => orgs,
        Some(other) => return Err(admin::unexpected(other)),
        None => {
            let store = admin::open_store(dir)?;
            let defaults = Config::new(data_dir.to_path_buf()).quota_defaults();
            quotas::list(&store, defaults, now_ms()).await?
        }
    };
    Ok(orgs.iter().map(serde_json::to_value).collect::<Result<_, _>>()?)
}

/// `used/quota` (`used/-` when unlimited).
fn of(v: &Value, used: &str, max: &str) -> String {
    let max = v[max].as_u64().map_or("-".to_string(), |m| m.to_string());
    format!("{}/{max}", v[used].as_u64().unwrap_or(0))
}

/// The organizations as an aligned text table.
fn table(orgs: &[Value]) -> String {
    let mut rows = vec![[
        "ORGANIZATION".to_string(),
        "NAME".into(),
        "CONVERSATIONS/MONTH".into(),
        "REPLICAS".into(),
        "KB ENTRIES".into(),
        "EMBED CONVERSATIONS/MONTH".into(),
    ]];
    for o in orgs {
        rows.push([
            o["id"].as_str().unwrap_or("").to_string(),
            o["name"].as_str().unwrap_or("").to_string(),
            of(o, "conversations_this_month", "conversations_per_month"),
            of(o, "replicas", "max_replicas"),
            of(o, "knowledge_base_entries", "max_knowledge_base_entries"),
            of(o, "embed_conversations_this_month", "embed_conversations_per_month"),
        ]);
    }
    let widths: Vec<usize> = (0..6).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}
