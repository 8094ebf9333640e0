//! The walkthrough's flow (docs/walkthrough.md) as a program: make a replica, give it knowledge, chat, read the history.
//!
//! ```text
//! cargo run --example quickstart -- --base-url http://127.0.0.1:8080 --key rpl_…
//! ```

use std::time::Duration;

use clap::Parser;
use serde_json::{json, Value};

/// Talks to a running replicad.
#[derive(Parser)]
struct Args {
    /// Where replicad listens.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    base_url: String,
    /// An organization API key (from `serve --demo` or an invitation redeemed).
    #[arg(long, env = "REPLICAD_KEY")]
    key: String,
}

struct Client {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Client {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value, String> {
        let mut req = self.http.request(method.clone(), format!("{}{path}", self.base));
        req = req.header("X-ORGANIZATION-SECRET", &self.key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.map_err(|e| format!("{method} {path}: {e}"))?;
        let status = res.status();
        let v: Value = res.json().await.map_err(|e| format!("{method} {path}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{method} {path}: {status} {v}"));
        }
        Ok(v)
    }
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args = Args::parse();
    replicad::install_crypto_provider();
    let c = Client { http: reqwest::Client::new(), base: args.base_url.trim_end_matches('/').into(), key: args.key };
    let tag = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();

    let owner = c
        .call(
            reqwest::Method::POST,
            "/v1/users",
            Some(json!({"name": "Quickstart owner", "email": format!("owner-{tag}@example.org")})),
        )
        .await?;
    let owner_id = owner["user"]["id"].as_str().unwrap_or_default().to_string();
    let replica = c
        .call(
            reqwest::Method::POST,
            "/v1/replicas",
            Some(json!({
                "name": "Lighthouse keeper", "slug": format!("keeper-{tag}"), "ownerID": owner_id,
                "shortDescription": "Knows the lighthouse", "greeting": "Ahoy! Ask me about the lighthouse.",
                "llm": {"model": "replicad-extractive"}
            })),
        )
        .await?;
    let id = replica["uuid"].as_str().unwrap_or_default().to_string();
    println!("replica {id}");

    let text = "The Skerry Point lighthouse was built in 1874. Its lamp is visible for 22 nautical miles. \
                The keeper climbs 143 steps to reach the lantern room every evening.";
    let kb = c
        .call(
            reqwest::Method::POST,
            &format!("/v1/replicas/{id}/knowledge-base"),
            Some(json!({"text": text, "title": "Skerry Point"})),
        )
        .await?;
    let entry = kb["results"][0]["knowledgeBaseID"].as_u64().unwrap_or_default();
    for _ in 0..100 {
        let e = c.call(reqwest::Method::GET, &format!("/v1/replicas/{id}/knowledge-base/{entry}"), None).await?;
        if e["status"] == "READY" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("knowledge entry {entry} is READY");

    for q in ["Hello!", "How many steps does the keeper climb?", "When was the lighthouse built?"] {
        let a = c
            .call(reqwest::Method::POST, &format!("/v1/replicas/{id}/chat/completions"), Some(json!({"content": q})))
            .await?;
        println!("> {q}\n{}\n", a["content"].as_str().unwrap_or_default());
    }

    let history = c.call(reqwest::Method::GET, &format!("/v1/replicas/{id}/chat/history"), None).await?;
    for item in history["items"].as_array().into_iter().flatten() {
        let sources: Vec<&str> =
            item["sources"].as_array().into_iter().flatten().filter_map(|s| s["name"].as_str()).collect();
        println!(
            "#{} {}: {} {:?}",
            item["id"],
            item["role"].as_str().unwrap_or(""),
            item["content"].as_str().unwrap_or("").lines().next().unwrap_or(""),
            sources
        );
    }
    Ok(())
}
