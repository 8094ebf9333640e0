//! Embedding models fetched from a hub (`"hub"` catalog entries, `serve --model-hub URL`),
//! against a loopback stand-in of the Hugging Face hub serving the real all-MiniLM-L6-v2
//! directory of `.ci/install-embedding-model`: fetched once into `DATA_DIR/models/ID` and
//! used at once; used from there at the next start without a hub; without `--model-hub`
//! nothing is downloaded and the start fails saying where to put the model; a repository the
//! hub does not have fails the start and leaves no directory behind.

use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::common::fake_llm::read_request;
use crate::common::{run, DataDir, Server, BIN};
use crate::embedding::real_model_dir;

const REPO: &str = "sentence-transformers/all-MiniLM-L6-v2";

/// A loopback stand-in of a model hub: `GET /REPO/resolve/main/FILE` answers the file of the
/// real model directory, anything else 404; it records the paths asked.
struct Hub {
    url: String,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Hub {
    async fn start() -> Hub {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind hub");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let Some((head, _)) = read_request(&mut stream).await else { return };
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    seen.lock().unwrap().push(path.clone());
                    let prefix = format!("/{REPO}/resolve/main/");
                    let file = path.strip_prefix(&prefix).filter(|f| !f.contains(".."));
                    let body = file.and_then(|f| std::fs::read(real_model_dir().join(f)).ok());
                    let (status, body) = match body {
                        Some(b) => ("200 OK", b),
                        None => ("404 Not Found", b"Entry not found".to_vec()),
                    };
                    let head =
                        format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(&body).await;
                });
            }
        });
        Hub { url, asked }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

/// A catalog of one model `minilm` from hub repository `repo`, written into `dir`.
fn hub_catalog(dir: &DataDir, repo: &str) -> String {
    let path = dir.path().parent().unwrap().join("embedding-models.json");
    let models = json!({ "models": { "minilm": { "name": "all-MiniLM-L6-v2", "hub": repo } } });
    std::fs::write(&path, models.to_string()).unwrap();
    path.display().to_string()
}

/// `replicad serve` on `dir` with `flags`, expected to fail at start: its stderr.
fn failed_start(dir: &DataDir, flags: &[&str]) -> String {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.path()).args(flags);
    let out = run(cmd);
    assert!(!out.status.success(), "the start must fail");
    assert!(out.stdout.is_empty(), "no listening line: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).to_string()
}

// the stand-in hub runs on another worker while the test blocks on the server's start
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_model_is_fetched_once_where_allowed_and_never_without_a_hub() {
    let hub = Hub::start().await;
    let dir = DataDir::new();
    std::fs::create_dir_all(dir.path()).unwrap();
    let catalog = hub_catalog(&dir, REPO);

    // without --model-hub nothing is downloaded: the start fails and says where the model goes
    let err = failed_start(&dir, &["--embedding-models", &catalog]);
    assert!(err.contains("--model-hub") && err.contains("models/minilm"), "{err}");
    assert!(hub.asked().is_empty(), "nothing asked of the hub: {:?}", hub.asked());

    // with it, the model is fetched into the data directory and serves at once
    let server = Server::start_in(dir, &["--embedding-models", &catalog, "--model-hub", &hub.url]);
    let fetched = server.dir().path().join("models/minilm");
    for file in ["config.json", "tokenizer.json", "model.safetensors", "1_Pooling/config.json"] {
        let (got, want) =
            (std::fs::read(fetched.join(file)).unwrap(), std::fs::read(real_model_dir().join(file)).unwrap());
        assert!(got == want, "{file} fetched whole");
    }
    assert!(!server.dir().path().join("models/minilm.partial").exists(), "no partial directory left");
    let asked = hub.asked().len();
    assert!(asked >= 3, "{:?}", hub.asked());
    let org = server.new_org("Hub").await;
    let replica = org.create_replica("hub").await;
    org.add_ready_text(&replica, "Felines", "Felines sleep for most of the day, often twelve to sixteen hours.").await;
    let path = format!("/v1/replicas/{replica}/chat/completions/test");
    let (_, v) = org.post(&path, json!({ "content": "How long do cats nap?" })).await;
    assert_eq!(v["sources"][0]["vectorRank"], 1, "found by meaning: {v}");

    // the next start, without a hub, uses the fetched copy and asks nothing more
    let (_, dir) = server.stop();
    let server = Server::start_in(dir, &["--embedding-models", &catalog]);
    assert_eq!(hub.asked().len(), asked, "nothing fetched again");
    let org = org.at(&server);
    let (_, v) = org.post(&path, json!({ "content": "How long do cats nap?" })).await;
    assert_eq!(v["sources"][0]["vectorRank"], 1, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_the_hub_lacks_fails_the_start_and_leaves_nothing_behind() {
    let hub = Hub::start().await;
    let dir = DataDir::new();
    std::fs::create_dir_all(dir.path()).unwrap();
    let catalog = hub_catalog(&dir, "someone/no-such-model");
    let err = failed_start(&dir, &["--embedding-models", &catalog, "--model-hub", &hub.url]);
    assert!(err.contains("someone/no-such-model/resolve/main/config.json") && err.contains("404"), "{err}");
    assert!(!dir.path().join("models/minilm").exists(), "no model directory");
    // a catalog naming no OWNER/NAME is refused before anything is asked
    let bad = hub_catalog(&dir, "../../etc");
    let err = failed_start(&dir, &["--embedding-models", &bad, "--model-hub", &hub.url]);
    assert!(err.contains("is not OWNER/NAME"), "{err}");
    assert_eq!(hub.asked().len(), 1, "only the first start asked: {:?}", hub.asked());
}
