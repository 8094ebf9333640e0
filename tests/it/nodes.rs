//! Several nodes over one PostgreSQL database: `replicad serve --store postgres://…` processes,
//! each on a data directory of its own, serving the same organizations. A client spreads its
//! requests over them, concurrently.
//!
//! What is checked: a write on one node is read on the other; knowledge added through one node
//! is answered, with its source, by the other as soon as it is `READY`; two nodes racing for one slug
//! create it once (the other answers 409); an organization's replica quota holds across nodes
//! (no count read stale by one of them); entries added on both nodes are all counted; of three
//! nodes, one runs a bot and one runs an ingestion job, and a survivor takes the bot over when
//! its node is killed; the shared rate limit, the shared read cache, the outbox's old rows, a
//! rolling restart, and the start-up refusals (another secrets key, a newer schema). These run
//! on the server of `.ci/install-postgres` whatever the run's engine (`REPLICAD_TEST_STORE`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::bot_api::BotApi;
use crate::common::channels::reactor;
use crate::common::pg::fresh_database;
use crate::common::{replica_body, DataDir, Org, Server, ZORBLAX_QUESTION};
use crate::fixtures::{self, Page};

/// `n` nodes on one fresh database, and an organization made on the first.
async fn nodes(n: usize) -> (Vec<Server>, Vec<Org>) {
    nodes_with(n, |_| Vec::new()).await
}

/// A data directory on the database `url` holding the secrets key `key` (64 hex digits) as its
/// `secrets.key`: every node of one database is given the same key.
fn node_dir(url: &str, key: &str) -> DataDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = DataDir::on_store(url);
    std::fs::create_dir_all(dir.path()).expect("data dir");
    let file = dir.path().join("secrets.key");
    std::fs::write(&file, format!("{key}\n")).expect("write key");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("key mode");
    dir
}

/// [`nodes`], node `i` started with the flags `flags(i)` (and the one secrets key of all nodes).
async fn nodes_with(n: usize, flags: impl Fn(usize) -> Vec<String>) -> (Vec<Server>, Vec<Org>) {
    let url = fresh_database();
    let key = "5a".repeat(32);
    let start = |i| {
        let flags = flags(i);
        Server::start_in(node_dir(&url, &key), &flags.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let servers: Vec<Server> = (0..n).map(start).collect();
    let org = servers[0].new_org("Nodes").await;
    let orgs = servers.iter().map(|s| org.at(s)).collect();
    (servers, orgs)
}

#[tokio::test]
async fn a_write_on_one_node_is_read_on_the_other() {
    let (_servers, orgs) = nodes(2).await;
    let replica = orgs[0].create_replica("shared").await;
    let (s, v) = orgs[1].get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["slug"], "shared");
    let (s, v) = orgs[1].post(&format!("/v1/replicas/{replica}/chat/history"), json!({"content": "from node 2"})).await;
    assert!(s.is_success(), "{v}");
    let (s, v) = orgs[0].get(&format!("/v1/replicas/{replica}/chat/history")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["items"][0]["content"], "from node 2", "{v}");
}

#[tokio::test]
async fn two_nodes_racing_for_one_slug_create_it_once() {
    let (_servers, orgs) = nodes(2).await;
    for round in 0..3 {
        let slug = format!("contested-{round}");
        let body = replica_body(&slug, &orgs[0].owner_email);
        let tries = (0..8).map(|i| orgs[i % 2].post("/v1/replicas", body.clone()));
        let answers = join_all(tries).await;
        let created = answers.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
        let taken =
            answers.iter().filter(|(s, v)| *s == StatusCode::CONFLICT && v["error_code"] == "SLUG_TAKEN").count();
        assert_eq!((created, taken), (1, 7), "round {round}: {answers:?}");
    }
    let (_, list) = orgs[1].get("/v1/replicas?pageSize=100").await;
    assert_eq!(list["total"], 3, "{list}");
}

#[tokio::test]
async fn an_organizations_replica_quota_holds_across_nodes() {
    let (servers, orgs) = nodes(2).await;
    let set = servers[0].dir().cli(&["orgs", "set-quota", &orgs[0].id, "--replicas", "3"]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let tries = (0..10).map(|i| orgs[i % 2].post("/v1/replicas", replica_body(&format!("r{i}"), &orgs[0].owner_email)));
    let answers = join_all(tries).await;
    let created = answers.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    let refused = answers
        .iter()
        .filter(|(s, v)| *s == StatusCode::TOO_MANY_REQUESTS && v["error_code"] == "REPLICA_QUOTA_EXCEEDED");
    assert_eq!((created, refused.count()), (3, 7), "{answers:?}");
}

#[tokio::test]
async fn entries_added_on_both_nodes_are_all_counted() {
    let (_servers, orgs) = nodes(2).await;
    let replica = orgs[0].create_replica("counted").await;
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    let adds = (0..30)
        .map(|i| orgs[i % 2].post(&path, json!({"text": format!("Fact number {i}."), "title": format!("F{i}")})));
    for (s, v) in join_all(adds).await {
        assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    }
    for org in &orgs {
        let (s, usage) = org.get("/v1/users/me/usage").await;
        assert_eq!(s, StatusCode::OK, "{usage}");
        assert_eq!(usage["knowledgeBaseEntries"]["total"], 30, "{usage}");
    }
}

/// Facts nobody else states, their questions and what their answers hold.
const FACTS: [(&str, &str, &str, &str); 3] = [
    (
        "Quorvex reactor",
        "The Quorvex reactor operates at a steady temperature of 451 kelvin.",
        "At what temperature does the Quorvex reactor operate?",
        "451 kelvin",
    ),
    (
        "Plimbat bridge",
        "The Plimbat bridge crosses the river Ull and is 612 metres long.",
        "How long is the Plimbat bridge?",
        "612 metres",
    ),
    (
        "Drossel tower",
        "The Drossel tower was built in 1871 by the guild of glassmakers.",
        "Who built the Drossel tower?",
        "guild of glassmakers",
    ),
];

#[tokio::test]
async fn knowledge_added_through_one_node_is_answered_by_the_other_once_ready() {
    let (_servers, orgs) = nodes(2).await;
    let replica = orgs[0].create_replica("facts").await;
    let path = format!("/v1/replicas/{replica}/chat/completions");
    for (round, (title, text, question, holds)) in FACTS.into_iter().enumerate() {
        orgs[round % 2].add_ready_text(&replica, title, text).await;
        let (s, v) = orgs[(round + 1) % 2].post(&path, json!({"content": question})).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let answer = v["content"].as_str().unwrap_or("");
        assert!(answer.contains(holds) && answer.contains(title), "round {round}: {v}");
    }
}

#[tokio::test]
async fn a_node_given_another_secrets_key_refuses_to_start() {
    let url = fresh_database();
    let first = Server::start_in(node_dir(&url, &"5a".repeat(32)), &[]);
    drop(first.new_org("Sealed").await);
    assert_refuses_to_start(&node_dir(&url, &"c3".repeat(32)), "same --secrets-key-file");
}

/// Asserts that `replicad serve` on `dir` exits without serving, saying `why` on stderr.
fn assert_refuses_to_start(dir: &DataDir, why: &str) {
    let mut cmd = std::process::Command::new(crate::common::BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.path());
    dir.apply_store(&mut cmd);
    let out = cmd.output().expect("run replicad");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains(why), "{}: {stderr}", out.status);
}

/// A private messengerA message of chat `chat`.
fn private(chat: i64, message_id: i64, text: &str) -> Value {
    json!({
        "message_id": message_id, "date": 1_700_000_000,
        "chat": {"id": chat, "type": "private", "first_name": "Ada"},
        "from": {"id": 77, "is_bot": false, "first_name": "Ada"},
        "text": text,
    })
}

fn sent_to(api: &BotApi, chat: i64) -> usize {
    api.sent().iter().filter(|m| m["chat_id"] == json!(chat)).count()
}

#[tokio::test]
async fn a_bot_runs_on_one_node_and_a_survivor_takes_it_over_when_that_node_dies() {
    const TOKEN: &str = "4343:AAE-nodes_bot_secret_token_0123456789";
    let api = BotApi::start().await;
    api.add_bot(TOKEN, 4343, "docs_bot");
    let (mut servers, orgs) = nodes_with(3, |i| api.flags_for(&i.to_string())).await;
    let replica = reactor(&orgs[0], None).await;
    let path = format!("/v1/replicas/{replica}/integrations/messengerA");
    let (s, v) = orgs[1].post(&path, json!({"messengerA_token": TOKEN, "mention": "@docs_bot"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    api.push_message(private(2001, 1, ZORBLAX_QUESTION));
    api.wait_for("the first reply", |a| sent_to(a, 2001) == 1).await;
    // Every node has seen the bot (2 s) and its runner has tried the lease again (2 s) by now.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pollers: HashSet<String> = api.pollers().into_iter().collect();
    assert_eq!(pollers.len(), 1, "one node polls: {:?}", api.pollers());
    let leader = pollers.into_iter().next().unwrap();

    let killed_at = Instant::now();
    servers.remove(leader.parse().unwrap()).kill9();
    let polled_before = api.pollers().len();
    api.push_message(private(2002, 2, "What is the fuel of the Zorblax reactor?"));
    api.wait_for("a survivor's reply", |a| sent_to(a, 2002) == 1).await;
    let failover = killed_at.elapsed();
    eprintln!("bot failover: {failover:?} from kill -9 to the next reply delivered");
    assert!(failover < Duration::from_secs(30), "{failover:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    // A poll the killed node sent just before its end may be read by the stand-in after it.
    let mut survivors: HashSet<String> = api.pollers()[polled_before..].iter().cloned().collect();
    survivors.remove(&leader);
    assert_eq!(survivors.len(), 1, "one survivor polls: {:?}", api.pollers());
    assert_eq!((sent_to(&api, 2001), sent_to(&api, 2002)), (1, 1), "each message answered once: {:?}", api.sent());
}

#[tokio::test]
async fn an_ingestion_job_runs_on_one_node_of_three() {
    let html = "<html><head><title>Slow page</title></head><body><article><p>The Vellum archive \
        opens at dawn and closes at dusk, every day of the year.</p></article></body></html>";
    // Long enough for every node's scheduler to look at the job while it runs.
    let page = Page::html(html).delayed(Duration::from_secs(5));
    let (base, asked) = fixtures::web_server_logged(Arc::new(Mutex::new(HashMap::from([("/slow", page)])))).await;
    let (_servers, orgs) = nodes_with(3, |_| vec!["--allow-private-urls".into()]).await;
    let replica = orgs[0].create_replica("slow").await;
    let (s, v) =
        orgs[0].post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({"url": format!("{base}/slow")})).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    let entry = orgs[2].wait_settled(&replica, kb).await;
    assert_eq!(entry["status"], "READY", "{entry}");
    let fetches = asked.lock().unwrap().iter().filter(|p| *p == "/slow").count();
    assert_eq!(fetches, 1, "the page was fetched by one node");
}

#[tokio::test]
async fn a_file_uploaded_through_one_node_is_processed_by_another() {
    let html =
        "<html><head><title>Slow page</title></head><body><p>The Vellum archive opens at dawn.</p></body></html>";
    let page = Page::html(html).delayed(Duration::from_secs(12));
    let (base, _) = fixtures::web_server_logged(Arc::new(Mutex::new(HashMap::from([("/slow", page)])))).await;
    // Node 0 has one ingestion slot, which the slow page holds: the file's job can run on node 1
    // only, which has to read the file that node 0 stored.
    let (_servers, orgs) = nodes_with(2, |i| {
        let slots = if i == 0 { "1" } else { "2" };
        ["--allow-private-urls", "--ingest-concurrency", slots].map(String::from).to_vec()
    })
    .await;
    let replica = orgs[0].create_replica("files").await;
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    let (s, v) = orgs[0].post(&path, json!({"url": format!("{base}/slow")})).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let slow = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let text = "The Ostrel lighthouse keeps its lamp lit with whale oil from the northern harbour.";
    let file = orgs[0].upload(&replica, "lighthouse.txt", text.as_bytes().to_vec()).await;
    let entry = orgs[1].wait_settled(&replica, file).await;
    assert_eq!(entry["status"], "READY", "{entry}");
    assert!(entry["rawText"].as_str().unwrap_or("").contains("whale oil"), "{entry}");
    let (_, page_entry) = orgs[0].get(&format!("{path}/{slow}")).await;
    assert_ne!(page_entry["status"], "READY", "node 0 was still fetching the page: {page_entry}");
}

#[tokio::test]
async fn the_rate_limit_of_one_key_holds_across_three_nodes() {
    const PER_MINUTE: usize = 60;
    let (_servers, orgs) = nodes_with(3, |_| vec!["--rate-limit-per-key".into(), PER_MINUTE.to_string()]).await;
    let started = Instant::now();
    let mut allowed = 0;
    for round in 0..15 {
        let tries = (0..12).map(|i| orgs[(round + i) % 3].get("/v1/replicas"));
        for (s, v) in join_all(tries).await {
            match s {
                StatusCode::OK => allowed += 1,
                StatusCode::TOO_MANY_REQUESTS => assert_eq!(v["error_code"], "RATE_LIMITED", "{v}"),
                other => panic!("{other}: {v}"),
            }
        }
    }
    // The burst, and the tokens refilled meanwhile (one a second).
    let earned = PER_MINUTE as f64 + started.elapsed().as_secs_f64() * PER_MINUTE as f64 / 60.0;
    eprintln!("{allowed} of 180 allowed over three nodes; the key earned {earned:.1}");
    assert!(allowed >= PER_MINUTE, "{allowed} of 180 allowed, fewer than the burst");
    assert!(allowed as f64 <= earned * 1.1, "{allowed} of 180 allowed; the key earned {earned:.1}");
}

/// Every history item of the organization's own user on `replica`, read through `org`'s node
/// (paged backwards, 100 at a time): their contents.
async fn all_history(org: &Org, replica: &str) -> HashSet<String> {
    let (mut contents, mut before) = (HashSet::new(), String::new());
    loop {
        let (s, v) = org.get(&format!("/v1/replicas/{replica}/chat/history?limit=100{before}")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let items = v["items"].as_array().unwrap();
        let Some(oldest) = items.first() else { return contents };
        before = format!("&beforeID={}", oldest["id"]);
        contents.extend(items.iter().map(|i| i["content"].as_str().unwrap().to_string()));
    }
}

/// A made-up place name no other call of this process answers (for the first 4096 calls).
fn place() -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    const SYLLABLES: [&str; 8] = ["ka", "lo", "mi", "ru", "te", "zan", "vek", "dor"];
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let word: String = [n % 8, n / 8 % 8, n / 64 % 8, n / 512 % 8].iter().map(|&i| SYLLABLES[i]).collect();
    format!("{}ia", word[..1].to_uppercase() + &word[1..])
}

/// What one client acknowledged: history contents, and knowledge entries (id, place).
type Acked = (Vec<String>, Vec<(u64, String)>);

/// Writes to the nodes of `orgs` in turn until `stop`: history items, and every fourth write a
/// knowledge entry; what was acknowledged (a node that is down answers nothing).
async fn mixed_writes(
    client: usize,
    orgs: Vec<Org>,
    replica: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Acked {
    let (mut messages, mut facts) = (Vec::new(), Vec::new());
    let mut i = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let org = &orgs[(client + i) % orgs.len()];
        if i % 4 == 0 {
            let name = place();
            let body = json!({"title": name, "text": format!("The town of {name} is famous for its copper bells.")});
            let path = format!("/v1/replicas/{replica}/knowledge-base");
            if let Ok(r) = org.req(reqwest::Method::POST, &path).json(&body).send().await {
                let v: Value = r.json().await.unwrap_or_default();
                if let Some(id) = v["results"][0]["knowledgeBaseID"].as_u64() {
                    facts.push((id, name));
                }
            }
        } else {
            let content = format!("client {client} message {i}");
            let path = format!("/v1/replicas/{replica}/chat/history");
            let sent = org.req(reqwest::Method::POST, &path).json(&json!({"content": content})).send().await;
            if sent.is_ok_and(|r| r.status().is_success()) {
                messages.push(content);
            }
        }
        i += 1;
    }
    (messages, facts)
}

/// Asserts that retrieval on `org`'s node finds entry `id` about `name`.
async fn assert_finds(org: &Org, replica: &str, id: u64, name: &str) {
    let question = json!({"content": format!("What is {name} famous for?")});
    let (s, v) = org.post(&format!("/v1/replicas/{replica}/chat/completions/test"), question).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let found = v["sources"].as_array().unwrap().iter().any(|s| s["id"] == json!(id));
    assert!(found, "entry {id} ({name}) not found at {}: {v}", org.base);
}

#[tokio::test]
async fn a_node_killed_under_mixed_writes_loses_no_acknowledged_write_and_catches_up_when_restarted() {
    let (mut servers, orgs) = nodes(3).await;
    let replica = orgs[0].create_replica("load").await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> =
        (0..6).map(|c| tokio::spawn(mixed_writes(c, orgs.clone(), replica.clone(), stop.clone()))).collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let killed = servers.pop().unwrap().kill9();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut messages, mut facts) = (Vec::new(), Vec::new());
    for client in join_all(clients).await {
        let (m, f) = client.unwrap();
        messages.extend(m);
        facts.extend(f);
    }
    assert!(messages.len() >= 30 && facts.len() >= 10, "{} messages, {} facts", messages.len(), facts.len());

    for org in &orgs[..2] {
        let stored = all_history(org, &replica).await;
        let lost: Vec<&String> = messages.iter().filter(|m| !stored.contains(*m)).collect();
        assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
    }
    for (id, name) in &facts {
        assert_eq!(orgs[0].wait_settled(&replica, *id).await["status"], "READY");
        for org in &orgs[..2] {
            assert_finds(org, &replica, *id, name).await;
        }
    }
    // The killed node, started again, catches up with what was written while it was down.
    let again = Server::start_in(killed, &[]);
    let org = orgs[0].at(&again);
    for (id, name) in &facts {
        assert_finds(&org, &replica, *id, name).await;
    }
    eprintln!("{} history items and {} entries acknowledged under load", messages.len(), facts.len());
}

#[tokio::test]
async fn each_node_names_itself_in_readyz_and_its_metrics_and_gives_its_index_position() {
    let (servers, orgs) = nodes_with(2, |i| {
        ["--node-name", &format!("node-{i}"), "--metrics-token", "scrape-0123456789"].map(String::from).to_vec()
    })
    .await;
    let replica = orgs[0].create_replica("ops").await;
    orgs[0].add_ready_text(&replica, "Gauges", "The gauges are read at every scrape.").await;
    for (i, server) in servers.iter().enumerate() {
        let r = server.client.get(format!("{}/readyz", server.base_url)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            (v["status"].as_str(), v["node"].as_str()),
            (Some("ready"), Some(format!("node-{i}").as_str())),
            "{v}"
        );
        assert_eq!(v["checks"]["store"]["status"], "ok", "{v}");
        let search = v["checks"]["search"]["message"].as_str().unwrap();
        assert!(search.contains("outbox changes"), "{v}");
        let metrics = server.client.get(format!("{}/metrics", server.base_url)).bearer_auth("scrape-0123456789");
        let text = metrics.send().await.unwrap().text().await.unwrap();
        let label = format!("node=\"node-{i}\"");
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).collect();
        assert!(!samples.is_empty() && samples.iter().all(|l| l.contains(&label)), "{text}");
    }
}

/// The outbox rows left in the database `url`.
fn outbox_rows(url: &str) -> i64 {
    let sql = "SELECT count(*) FROM replicad_rows WHERE tbl = 'seq_kboutbox'";
    crate::common::pg::with_client(url, |db| db.query_one(sql, &[]).unwrap().get(0))
}

#[tokio::test]
async fn outbox_rows_every_node_applied_are_removed_and_a_node_that_missed_some_rebuilds() {
    let (mut servers, orgs) = nodes(2).await;
    let url = servers[0].dir().store().unwrap().to_string();
    let replica = orgs[0].create_replica("outbox").await;
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    // More changes than the rows kept below the slowest node's position (512).
    for batch in 0..40 {
        let adds =
            (0..16).map(|i| orgs[i % 2].post(&path, json!({"text": format!("Note {batch}-{i}."), "title": "Note"})));
        for (s, v) in join_all(adds).await {
            assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while outbox_rows(&url) > 512 {
        assert!(Instant::now() < deadline, "{} outbox rows left", outbox_rows(&url));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Node 1 is gone while entries are added and every outbox row is removed (as after an
    // absence longer than a position counts); started again, it rebuilds its index.
    let gone = servers.pop().unwrap().kill9();
    let mut added = Vec::new();
    for _ in 0..3 {
        let name = place();
        let text = format!("The town of {name} is famous for its copper bells.");
        added.push((orgs[0].add_ready_text(&replica, &name, &text).await, name));
    }
    crate::common::pg::with_client(&url, |db| db.execute("DELETE FROM replicad_rows WHERE tbl = 'seq_kboutbox'", &[]))
        .unwrap();
    let again = Server::start_in(gone, &[]);
    let org = orgs[0].at(&again);
    for (id, name) in &added {
        assert_finds(&org, &replica, *id, name).await;
    }
}

#[tokio::test]
async fn a_kept_answer_is_dropped_on_every_node_when_another_node_commits() {
    let (_servers, orgs) = nodes(2).await;
    let replica = orgs[0].create_replica("kept").await;
    let path = format!("/v1/replicas/{replica}");
    let mut renamed = replica_body("kept", &orgs[0].owner_email);
    let (mut worst, mut stale) = (Duration::ZERO, 0);
    for round in 0..5 {
        // Node 1 keeps the answer (read twice), then node 0 renames the replica.
        assert_eq!(orgs[1].get(&path).await, orgs[1].get(&path).await);
        renamed["name"] = json!(format!("Renamed {round}"));
        assert_eq!(orgs[0].put(&path, renamed.clone()).await.0, StatusCode::OK);
        let acknowledged = Instant::now();
        loop {
            let (_, v) = orgs[1].get(&path).await;
            if v["name"] == renamed["name"] {
                break;
            }
            assert!(acknowledged.elapsed() < Duration::from_secs(2), "node 1 still answers {v}");
            stale += 1;
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        worst = worst.max(acknowledged.elapsed());
    }
    eprintln!("another node's write was read through this node at most {worst:?} after it was acknowledged ({stale} stale reads in 5 rounds)");
}

/// The nodes a load balancer sends to (a node started again listens on a new port).
type Pool = Arc<std::sync::RwLock<Vec<Org>>>;

/// The answer of the first node of `pool`, from the `i`-th on, that answers `call` with a
/// success, as a load balancer that tries the next node when one does not answer.
async fn first_success<F, Fut>(pool: &Pool, i: usize, call: F) -> bool
where
    F: Fn(Org) -> Fut,
    Fut: std::future::Future<Output = reqwest::Result<reqwest::Response>>,
{
    let nodes = pool.read().unwrap().clone();
    for n in 0..nodes.len() {
        if call(nodes[(i + n) % nodes.len()].clone()).await.is_ok_and(|r| r.status().is_success()) {
            return true;
        }
    }
    false
}

/// Requests the nodes of `pool` in turn until `stop`: a write of a history item, then a read of
/// the replica. Answers the contents acknowledged, and the requests no node answered.
async fn balanced_load(
    pool: Pool,
    replica: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (Vec<String>, Vec<String>) {
    let (mut acked, mut unanswered) = (Vec::new(), Vec::new());
    let (history, path) = (format!("/v1/replicas/{replica}/chat/history"), format!("/v1/replicas/{replica}"));
    let mut i = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let content = format!("rolling {i}");
        let body = json!({"content": content});
        let wrote = first_success(&pool, i, |org| org.req(reqwest::Method::POST, &history).json(&body).send()).await;
        let read = first_success(&pool, i, |org| org.req(reqwest::Method::GET, &path).send()).await;
        if wrote {
            acked.push(content);
        }
        if !wrote || !read {
            unanswered.push(format!("request {i}: write answered {wrote}, read answered {read}"));
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (acked, unanswered)
}

// Two workers: the load runs while the test's thread waits for a node to stop or start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_every_node_keeps_serving_and_loses_nothing() {
    let (servers, orgs) = nodes(2).await;
    let replica = orgs[0].create_replica("rolling").await;
    let pool: Pool = Arc::new(std::sync::RwLock::new(orgs.clone()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = tokio::spawn(balanced_load(pool.clone(), replica.clone(), stop.clone()));
    let mut restarted = Vec::new();
    // One node at a time: stopped (SIGTERM, as an upgrade does), started again on its directory.
    for (i, server) in servers.into_iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (status, dir) = server.stop();
        assert!(status.success(), "{status}");
        let again = Server::start_in(dir, &[]);
        pool.write().unwrap()[i] = orgs[0].at(&again);
        restarted.push(again);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (acked, unanswered) = load.await.unwrap();
    assert!(unanswered.is_empty(), "{unanswered:?}");
    assert!(acked.len() > 50, "{} writes", acked.len());
    for server in &restarted {
        let stored = all_history(&orgs[0].at(server), &replica).await;
        let lost: Vec<&String> = acked.iter().filter(|c| !stored.contains(*c)).collect();
        assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
    }
}

#[tokio::test]
async fn a_node_refuses_a_database_whose_schema_is_newer_than_itself() {
    let url = fresh_database();
    let first = Server::start_in(node_dir(&url, &"5a".repeat(32)), &[]);
    drop(first.new_org("Newer").await);
    crate::common::pg::with_client(&url, |db| db.execute("UPDATE replicad_schema SET version = version + 1", &[]))
        .unwrap();
    assert_refuses_to_start(&node_dir(&url, &"5a".repeat(32)), "newer than this build");
}
