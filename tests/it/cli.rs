//! The operator's command line: `serve`, `invites create`, `reindex`.

use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::{invite_code, run, send, DataDir, Server, BIN};

#[tokio::test]
async fn invites_create_help_explains_the_running_server_case() {
    let out = run({
        let mut c = Command::new(BIN);
        c.args(["invites", "create", "--help"]);
        c
    });
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(help.contains("running server"), "{help}");
    assert!(help.contains("--data-dir") && help.contains("--expires-in"), "{help}");
}

#[tokio::test]
async fn the_data_dir_can_be_given_by_replicad_data_dir() {
    let server = Server::start();
    let mut cmd = Command::new(BIN);
    cmd.args(["invites", "create"]).env("REPLICAD_DATA_DIR", server.dir().path());
    let code = invite_code(&run(cmd));
    let body = json!({"organizationName": "Env", "name": "Env", "email": "env@example.org"});
    let r = send(server.req(Method::POST, &format!("/v1/api-keys/invites/{code}/redeem")).json(&body)).await;
    assert_eq!(r.status, StatusCode::OK, "the code was minted in this server's store: {}", r.text);
}

#[tokio::test]
async fn serve_takes_its_data_dir_from_the_environment() {
    // Finds the redb file in the directory.
    let dir = DataDir::redb();
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0"]).env("REPLICAD_DATA_DIR", dir.path());
    let data = dir.path();
    let server = Server::spawn(cmd, dir, &[]);
    let org = server.new_org("EnvServe").await;
    assert!(data.join("replicad.redb").exists(), "the store is in REPLICAD_DATA_DIR");
    let (s, _) = org.get("/v1/replicas").await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn an_invitation_minted_while_no_server_runs_is_redeemable_later() {
    let dir = DataDir::new();
    let code = dir.invite_with(&[]);
    let server = Server::start_in(dir, &[]);
    let body = json!({"organizationName": "Early", "name": "Early", "email": "early@example.org"});
    let r = send(server.req(Method::POST, &format!("/v1/api-keys/invites/{code}/redeem")).json(&body)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

#[tokio::test]
async fn each_invitation_is_a_new_code() {
    let server = Server::start();
    let a = server.invite();
    let b = server.invite();
    assert_ne!(a, b);
}

#[tokio::test]
async fn an_invalid_expiry_is_refused_by_the_cli() {
    let dir = DataDir::new();
    for bad in ["0", "5y", "soon"] {
        let out = dir.cli(&["invites", "create", "--expires-in", bad]);
        assert!(!out.status.success(), "--expires-in {bad}");
        assert!(out.stdout.is_empty(), "no code printed for --expires-in {bad}");
    }
}

#[tokio::test]
async fn a_second_server_on_the_same_data_dir_refuses_to_start() {
    let server = Server::start();
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(server.dir().path());
    let out = run(cmd);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no listening line: {}", String::from_utf8_lossy(&out.stdout));
    assert!(!String::from_utf8_lossy(&out.stderr).trim().is_empty(), "an explanation on stderr");
    // The first server is unaffected.
    let org = server.new_org("Still").await;
    assert_eq!(org.get("/v1/replicas").await.0, StatusCode::OK);
}

#[test]
fn version_names_the_release_the_commit_and_the_store_schema() {
    let out = run({
        let mut c = Command::new(BIN);
        c.arg("--version");
        c
    });
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let rest = text.strip_prefix(&format!("replicad {} (commit ", env!("CARGO_PKG_VERSION"))).expect(&text);
    let (commit, rest) = rest.split_once(", ").expect(&text);
    assert!(
        commit == "unknown" || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "commit {commit:?} in {text:?}"
    );
    assert_eq!(rest, format!("store schema {})", replicad::store::SCHEMA_VERSION), "{text}");
}
