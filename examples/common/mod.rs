//! What the benchmark examples share: an organization with one replica written straight into a
//! store, and replicad serving a data directory in this process on loopback.

use uuid::Uuid;

use replicad::service::{orgs, replicas};
use replicad::store::Store;

/// E-mail of the owner user of [`bench_org`]'s organization.
pub const EMAIL: &str = "bench@example.org";

/// Makes the organization "Bench" and its replica `bench` (model `replicad-extractive`) in
/// `store`; returns (API key, replica).
pub async fn bench_org(store: &Store) -> (String, Uuid) {
    let new = orgs::NewOrg { organization_name: "Bench".into(), name: "Bench Owner".into(), email: EMAIL.into() };
    let (org, key) = orgs::create_direct(store, new).await.expect("org");
    let llm = replicas::LlmInput { model: Some("replicad-extractive".into()), ..Default::default() };
    let body = replicas::ReplicaInput {
        name: "Bench".into(),
        short_description: "bench".into(),
        greeting: "Hi".into(),
        owner_id: EMAIL.into(),
        slug: "bench".into(),
        llm,
        ..Default::default()
    };
    let models = replicad::models::Models::parse(replicad::models::SHIPPED).expect("models");
    let replica = replicas::create(store, org.id, &body, &models, 10).await.expect("replica");
    (key, replica)
}

/// Serves `config` on a free loopback port in this process; returns the base URL. Exits the
/// process if the server fails.
pub async fn serve(config: replicad::Config) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        if let Err(e) = replicad::serve(config, listener, std::future::pending()).await {
            eprintln!("replicad: {e}");
            std::process::exit(1);
        }
    });
    base
}
