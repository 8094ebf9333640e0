//! Graceful shutdown as an operator's service manager drives it: SIGTERM lets requests in
//! flight finish and exits 0; a second signal exits at once.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::common::fake_llm::{FakeLlm, Script};
use crate::common::{Server, PATIENCE, ZORBLAX_QUESTION};
use crate::llm::{reactor, serve};

/// Polls until the upstream received `n` requests.
async fn wait_seen(fake: &FakeLlm, n: usize) {
    let deadline = Instant::now() + PATIENCE;
    while fake.seen().len() < n {
        assert!(Instant::now() < deadline, "the upstream did not receive the request");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls until new connections to `server` are refused (the listener is closed).
async fn wait_refused(server: &Server) {
    let addr = server.base_url.trim_start_matches("http://").to_string();
    let deadline = Instant::now() + PATIENCE;
    while tokio::net::TcpStream::connect(&addr).await.is_ok() {
        assert!(Instant::now() < deadline, "the server still accepts connections after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn sigterm_finishes_the_request_in_flight_then_exits_0() {
    let fake = FakeLlm::start(vec![], Script::Slow(Duration::from_secs(3), vec!["It runs at 451 kelvin."])).await;
    let server = serve(&fake, &[]);
    let org = server.new_org("Graceful").await;
    let (replica, _) = reactor(&org).await;
    let asking = {
        let (org, replica) = (org.clone(), replica.clone());
        tokio::spawn(async move { org.chat(&replica, ZORBLAX_QUESTION).await })
    };
    wait_seen(&fake, 1).await;
    server.signal("TERM");
    wait_refused(&server).await;
    let (status, body) = asking.await.expect("the request task");
    assert_eq!(status, StatusCode::OK, "the request in flight was cut: {body}");
    assert_eq!(body["content"], json!("It runs at 451 kelvin."));
    let (exit, dir) = tokio::task::spawn_blocking(move || server.wait()).await.expect("wait");
    assert!(exit.success(), "exit status after SIGTERM: {exit:?}\n{}", dir.log_tail());
    assert!(dir.log().contains("stopped"), "{}", dir.log_tail());
    // What the answered request wrote is in the store at the next start.
    let server = Server::start_in(dir, &[]);
    let items = org.at(&server).history(&replica, "").await;
    assert_eq!(items.last().map(|i| i["content"].clone()), Some(json!("It runs at 451 kelvin.")));
}

#[tokio::test]
async fn a_second_signal_exits_at_once() {
    let fake = FakeLlm::start(vec![], Script::Hang).await;
    let server = serve(&fake, &["--shutdown-grace", "5m", "--llm-first-byte-timeout-ms", "600000"]);
    let org = server.new_org("Impatient").await;
    let (replica, _) = reactor(&org).await;
    let asking = tokio::spawn(async move { org.chat(&replica, ZORBLAX_QUESTION).await });
    wait_seen(&fake, 1).await;
    server.signal("TERM");
    wait_refused(&server).await;
    server.signal("INT");
    // The request in flight would hold a graceful shutdown for minutes: the process must be gone
    // well before (`wait` fails after PATIENCE).
    let (exit, _dir) = tokio::task::spawn_blocking(move || server.wait()).await.expect("wait");
    assert_eq!(exit.code(), Some(128 + 2), "exit status after a second signal (SIGINT): {exit:?}");
    asking.abort();
}
