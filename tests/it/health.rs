//! Operability: liveness, readiness and the service health operation, as a load balancer and
//! an operator see them (docs/decisions.md "Operations").

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{send, Resp, Server, PATIENCE, ZORBLAX};

/// Polls `path` until it answers `status`; returns that answer.
async fn wait_for(server: &Server, path: &str, status: StatusCode) -> Resp {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let r = send(server.req(Method::GET, path)).await;
        if r.status == status {
            return r;
        }
        assert!(Instant::now() < deadline, "{path} never answered {status}; last: {} {}", r.status, r.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Makes a file immutable (`chattr +i`: even root cannot write it, also through open file
/// descriptors) until dropped.
struct Immutable(PathBuf);

impl Immutable {
    fn set(path: PathBuf) -> Immutable {
        let out = Command::new("chattr").arg("+i").arg(&path).output().unwrap_or_else(|e| {
            panic!("this test needs `chattr` (Debian package e2fsprogs) to make the store read-only: {e}")
        });
        assert!(
            out.status.success(),
            "chattr +i {} failed (needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs): {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Immutable(path)
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

#[tokio::test]
async fn a_fresh_server_is_alive_ready_and_healthy() {
    let server = Server::start();
    let live = send(server.req(Method::GET, "/healthz")).await;
    assert_eq!((live.status, live.body.clone()), (StatusCode::OK, json!({"status": "ok"})));
    let ready = wait_for(&server, "/readyz", StatusCode::OK).await;
    assert_eq!(ready.body["status"], "ready", "{}", ready.text);
    for check in ["store", "search", "ingestion"] {
        assert_eq!(ready.body["checks"][check]["status"], "ok", "{}", ready.text);
    }
    let health = send(server.req(Method::GET, "/v1/healthcheck")).await;
    assert_eq!(health.status, StatusCode::OK, "{}", health.text);
    assert_eq!(health.body["success"], true);
    assert_eq!(health.body["services"]["store"]["status"], "healthy");
    assert_eq!(health.body["services"]["search"]["status"], "healthy");
    let time = health.body["time"].as_str().expect("time");
    let time = chrono::DateTime::parse_from_rfc3339(time).expect("RFC 3339 time");
    assert!((chrono::Utc::now() - time.to_utc()).num_seconds().abs() < 60, "server clock: {time}");
}

#[tokio::test]
async fn a_store_that_cannot_be_written_makes_the_server_not_ready() {
    // Makes the redb file immutable.
    let server = Server::start_in(crate::common::DataDir::redb(), &[]);
    let org = server.new_org("Readonly").await;
    wait_for(&server, "/readyz", StatusCode::OK).await;
    let _guard = Immutable::set(server.dir().path().join("replicad.redb"));
    // A write now fails; readiness sees it (or its own probe fails) and says so.
    let (s, v) = org.post("/v1/replicas", crate::common::replica_body("blocked", &org.owner_email)).await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    let not_ready = wait_for(&server, "/readyz", StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(not_ready.body["status"], "not ready");
    assert_eq!(not_ready.body["checks"]["store"]["status"], "failing", "{}", not_ready.text);
    assert_eq!(not_ready.body["checks"]["search"]["status"], "ok", "{}", not_ready.text);
    let health = send(server.req(Method::GET, "/v1/healthcheck")).await;
    assert_eq!(health.status, StatusCode::SERVICE_UNAVAILABLE, "{}", health.text);
    assert_eq!(health.body["success"], false);
    assert_eq!(health.body["services"]["store"]["status"], "unhealthy");
    // Liveness does not depend on the store: the process still answers.
    let live = send(server.req(Method::GET, "/healthz")).await;
    assert_eq!(live.status, StatusCode::OK);
}

#[tokio::test]
async fn an_index_behind_the_store_makes_the_server_not_ready() {
    let server = Server::start_with(&["--max-index-lag", "1"]);
    let org = server.new_org("Lagging").await;
    let replica = org.create_replica("lagging").await;
    wait_for(&server, "/readyz", StatusCode::OK).await;
    // Take the index's directory away: the indexer cannot commit, the change waits.
    let search = server.dir().path().join("search");
    let current = std::fs::read_to_string(search.join("CURRENT")).expect("CURRENT");
    std::fs::remove_dir_all(search.join(current.trim())).expect("remove the index generation");
    org.add_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let not_ready = wait_for(&server, "/readyz", StatusCode::SERVICE_UNAVAILABLE).await;
    let search_check: &Value = &not_ready.body["checks"]["search"];
    assert_eq!(search_check["status"], "failing", "{}", not_ready.text);
    assert!(search_check["message"].as_str().unwrap().contains("behind the store"), "{search_check}");
    assert_eq!(not_ready.body["checks"]["store"]["status"], "ok", "{}", not_ready.text);
}
