//! What the channel-bot tests share: a server pointed at a stand-in, a replica that knows the
//! Zorblax reactor, and the replica's integration object (read, and waited for).

use serde_json::Value;

use super::{replica_body, DataDir, Org, Server, PATIENCE, ZORBLAX};

/// A server in `dir` started with the stand-in's `flags` and `extra` ones.
pub fn start_with(flags: Vec<String>, dir: DataDir, extra: &[&str]) -> Server {
    let mut flags = flags;
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Server::start_in(dir, &flags)
}

/// A replica that knows the Zorblax reactor (`body`, default a replica named "reactor").
pub async fn reactor(org: &Org, body: Option<Value>) -> String {
    let replica = org.create_replica_from(body.unwrap_or_else(|| replica_body("reactor", &org.owner_email))).await;
    org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    replica
}

/// The replica's `field` (`messengerA_integration`, `messengerB_integration`).
pub async fn integration(org: &Org, replica: &str, field: &str) -> Value {
    let (s, v) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(s, reqwest::StatusCode::OK, "{v}");
    v[field].clone()
}

/// Waits (bounded by [`PATIENCE`]) until the replica's `field` satisfies `check`; returns it.
pub async fn wait_integration(org: &Org, replica: &str, field: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let v = integration(org, replica, field).await;
        if check(&v) {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "{field} never matched: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
