//! The harness: runs the real `replicad` binary on a temporary data directory and talks to it
//! over HTTP, as a client would.
//!
//! - [`DataDir`] owns the temporary directory (the store under `data/`, the server's stderr log
//!   in `server.log`) and runs the admin CLI on it.
//! - [`Server`] is one running `replicad serve` on a free port. [`Server::stop`] (SIGTERM) and
//!   [`Server::kill9`] give the directory back so a test can start another server on it.
//! - [`Org`] is an organization (its API key) bound to a server, with request helpers that
//!   answer `(StatusCode, Value)`; [`send`] answers a [`Resp`] with the headers too.

#![allow(dead_code)]

pub mod bot_api;
pub mod channels;
pub mod contract;
pub mod fake_llm;
pub mod messenger_b_api;
pub mod pg;
pub mod sse;

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{json, Value};
use tempfile::TempDir;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_replicad");
/// Longest wait for an asynchronous state (start-up line, READY entries, process exit).
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A temporary directory holding a server's state (`data/`) and its log (`server.log`).
pub struct DataDir {
    root: TempDir,
    /// The PostgreSQL database of its tables (`--store`), when this run uses one
    /// ([`pg::store_for_new_dir`]).
    store: Option<String>,
}

impl DataDir {
    /// A fresh directory, its tables on this run's engine ([`pg::store_for_new_dir`]).
    pub fn new() -> DataDir {
        DataDir::with_store(pg::store_for_new_dir())
    }

    /// A fresh directory keeping its tables in the redb file, whatever this run's engine: for
    /// what only the redb file has (its disk-full handling, its backup, its repair after a
    /// crash).
    pub fn redb() -> DataDir {
        DataDir::with_store(None)
    }

    /// A fresh directory of a node whose tables are in the PostgreSQL database `url` (several
    /// nodes may share one).
    pub fn on_store(url: &str) -> DataDir {
        DataDir::with_store(Some(url.to_string()))
    }

    fn with_store(store: Option<String>) -> DataDir {
        DataDir { root: tempfile::Builder::new().prefix("replicad-it-").tempdir().expect("temp dir"), store }
    }

    /// Points `cmd` (a command of the binary on this directory) at the directory's tables.
    pub fn apply_store(&self, cmd: &mut Command) {
        match &self.store {
            Some(url) => cmd.env("REPLICAD_STORE", url),
            None => cmd.env_remove("REPLICAD_STORE"),
        };
    }

    /// The PostgreSQL database of its tables, if they are not in the redb file.
    pub fn store(&self) -> Option<&str> {
        self.store.as_deref()
    }

    /// The directory given to `--data-dir`.
    pub fn path(&self) -> PathBuf {
        self.root.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.root.path().join("server.log")
    }

    /// Everything the servers wrote on stderr (their log).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The last lines of the servers' stderr, for failure messages.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.log_path()) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(8000)));
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// Runs `replicad ARGS --data-dir DIR` and waits for it.
    pub fn cli(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.args(args).arg("--data-dir").arg(self.path());
        self.apply_store(&mut cmd);
        run(cmd)
    }

    /// `replicad invites create [EXTRA] --data-dir DIR`: asserts success and that stdout is exactly
    /// the code and a newline; returns the code.
    pub fn invite_with(&self, extra: &[&str]) -> String {
        let mut args = vec!["invites", "create"];
        args.extend_from_slice(extra);
        let out = self.cli(&args);
        invite_code(&out)
    }
}

impl Default for DataDir {
    fn default() -> Self {
        DataDir::new()
    }
}

/// Runs a prepared command of the binary, with a clean log filter.
pub fn run(mut cmd: Command) -> Output {
    cmd.env("REPLICAD_LOG", "warn").stdin(Stdio::null());
    cmd.output().expect("run the replicad binary")
}

/// The code printed by a successful `invites create` (stdout must be exactly `CODE\n`).
pub fn invite_code(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "invites create failed: {}\n{}", stdout, String::from_utf8_lossy(&out.stderr));
    let code = stdout.strip_suffix('\n').unwrap_or_else(|| panic!("stdout {stdout:?} does not end with a newline"));
    assert!(!code.is_empty() && !code.contains(char::is_whitespace), "stdout {stdout:?} is not exactly a code");
    code.to_string()
}

/// One running `replicad serve`. Dropping it kills the process.
pub struct Server {
    child: Option<Child>,
    /// Kept open so the server never writes to a closed pipe.
    _stdout: Option<BufReader<ChildStdout>>,
    dir: Option<DataDir>,
    pub base_url: String,
    pub client: reqwest::Client,
}

impl Server {
    /// A server on a fresh data directory.
    pub fn start() -> Server {
        Server::start_in(DataDir::new(), &[])
    }

    /// A server on a fresh data directory with extra `serve` flags.
    pub fn start_with(extra: &[&str]) -> Server {
        Server::start_in(DataDir::new(), extra)
    }

    /// A server on `dir` (for instance the directory of a stopped server).
    pub fn start_in(dir: DataDir, extra: &[&str]) -> Server {
        let mut cmd = Command::new(BIN);
        cmd.arg("serve").arg("--listen").arg("127.0.0.1:0").arg("--data-dir").arg(dir.path());
        Server::spawn(cmd, dir, extra)
    }

    /// Spawns `cmd` (a `serve` command) with `extra` flags and reads its start-up line.
    pub fn spawn(mut cmd: Command, dir: DataDir, extra: &[&str]) -> Server {
        std::fs::create_dir_all(dir.path()).expect("data dir");
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.log_path()).expect("log file");
        dir.apply_store(&mut cmd);
        cmd.args(extra)
            .env("REPLICAD_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        // Everything that may panic comes before the spawn, so a panic never leaves a server behind.
        let client = http_client();
        let mut child = cmd.spawn().expect("spawn replicad serve");
        let stdout = child.stdout.take().expect("piped stdout");
        // Read the single start-up line on a thread, so a hung start fails the test instead
        // of blocking it forever.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let n = reader.read_line(&mut line).unwrap_or(0);
            let _ = tx.send((n, line, reader));
        });
        let (line, reader) = match rx.recv_timeout(PATIENCE) {
            Ok((n, line, reader)) if n > 0 => (line, reader),
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "replicad serve printed no start-up line ({}); its log:\n{}",
                    if other.is_ok() { "stdout closed" } else { "timed out" },
                    dir.log_tail()
                );
            }
        };
        let url = line
            .strip_suffix('\n')
            .and_then(|l| l.strip_prefix("listening on "))
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .unwrap_or_else(|| panic!("unexpected start-up line {line:?}"));
        Server { child: Some(child), _stdout: Some(reader), dir: Some(dir), base_url: url.to_string(), client }
    }

    pub fn dir(&self) -> &DataDir {
        self.dir.as_ref().expect("data dir")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// `url` of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Mints an invitation code through the CLI (which reaches this server by its admin socket).
    pub fn invite(&self) -> String {
        self.dir().invite_with(&[])
    }

    /// Redeems a fresh invitation: a new organization, with `owner-<name>@example.org` as the
    /// contact (the organization's owner user).
    pub async fn new_org(&self, name: &str) -> Org {
        let code = self.invite();
        let email = format!("owner-{}@example.org", name.to_lowercase().replace(' ', "-"));
        let body = json!({"organizationName": name, "name": format!("{name} Owner"), "email": email});
        let (status, v) =
            send(self.client.post(self.url(&format!("/v1/api-keys/invites/{code}/redeem"))).json(&body)).await.parts();
        assert_eq!(status, StatusCode::OK, "redeem: {v}");
        Org {
            key: v["apiKey"].as_str().expect("apiKey").to_string(),
            id: v["organizationID"].as_str().expect("organizationID").to_string(),
            owner_email: email,
            base: self.base_url.clone(),
            client: self.client.clone(),
        }
    }

    /// A request without credentials.
    pub fn req(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, self.url(path))
    }

    /// Sends `signal` (`TERM`, `INT`, …) to the server without waiting.
    pub fn signal(&self, signal: &str) {
        let sent =
            Command::new("kill").arg(format!("-{signal}")).arg(self.pid().to_string()).status().expect("run kill");
        assert!(sent.success(), "kill -{signal} failed");
    }

    /// Waits for the server to exit (after a signal); returns the exit status and the data
    /// directory.
    pub fn wait(mut self) -> (std::process::ExitStatus, DataDir) {
        let mut child = self.child.take().expect("running");
        let status = wait_exit(&mut child);
        (status, self.dir.take().expect("data dir"))
    }

    /// SIGTERM, then waits for the exit; returns the exit status and the data directory.
    pub fn stop(self) -> (std::process::ExitStatus, DataDir) {
        let (status, _, dir) = self.stop_with_output();
        (status, dir)
    }

    /// SIGTERM, then waits; returns the exit status, what the server wrote on stdout after its
    /// start-up line, and the data directory.
    pub fn stop_with_output(mut self) -> (std::process::ExitStatus, String, DataDir) {
        let mut child = self.child.take().expect("running");
        let killed = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().expect("run kill");
        assert!(killed.success(), "kill -TERM failed");
        let status = wait_exit(&mut child);
        let mut rest = String::new();
        if let Some(mut out) = self._stdout.take() {
            let _ = out.read_to_string(&mut rest);
        }
        (status, rest, self.dir.take().expect("data dir"))
    }

    /// SIGKILL (no chance to clean up), then waits; returns the data directory.
    pub fn kill9(mut self) -> DataDir {
        let mut child = self.child.take().expect("running");
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        self.dir.take().expect("data dir")
    }
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().expect("wait for replicad") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("replicad did not exit within {PATIENCE:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            if let Some(dir) = &self.dir {
                eprintln!("--- replicad log (tail) ---\n{}", dir.log_tail());
            }
        }
    }
}

/// An HTTP client for tests (the TLS provider is the one replicad installs: ring).
pub fn http_client() -> reqwest::Client {
    replicad::install_crypto_provider();
    reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("http client")
}

/// A response: status, headers, and the body as JSON (`Value::Null` when it is not JSON).
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Resp {
    pub fn parts(self) -> (StatusCode, Value) {
        (self.status, self.body)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends a prepared request and reads the whole answer.
/// Every response is checked against the OpenAPI document ([`contract`]).
pub async fn send(rb: RequestBuilder) -> Resp {
    let (client, req) = rb.build_split();
    let req = req.expect("a well-formed request");
    let (method, path) = (req.method().clone(), req.url().path().to_string());
    let res = client.execute(req).await.expect("HTTP request");
    let status = res.status();
    let headers = res.headers().clone();
    let text = res.text().await.expect("response body");
    contract::contract().check(&method, &path, status, &headers, &text);
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Resp { status, headers, body, text }
}

/// Asserts the spec §7 error shape: status, `success: false`, a text `error`, the `error_code`
/// (and with it a `fingerprint`) when `code` is given, none when it is `None`, and a
/// `request_id` equal to the `X-Request-Id` header.
pub fn assert_error(r: &Resp, status: StatusCode, code: Option<&str>) {
    assert_eq!(r.status, status, "body: {}", r.text);
    let b = &r.body;
    assert_eq!(b["success"], json!(false), "{b}");
    assert!(b["error"].as_str().is_some_and(|e| !e.is_empty()), "error text: {b}");
    match code {
        Some(c) => {
            assert_eq!(b["error_code"], json!(c), "{b}");
            assert!(b["fingerprint"].as_str().is_some_and(|f| !f.is_empty()), "fingerprint: {b}");
        }
        None => {
            assert!(b.get("error_code").is_none(), "unexpected error_code: {b}");
            assert!(b.get("fingerprint").is_none(), "unexpected fingerprint: {b}");
        }
    }
    let rid = b["request_id"].as_str().expect("request_id");
    assert!(!rid.is_empty());
    assert_eq!(r.header("x-request-id"), Some(rid), "X-Request-Id header vs body");
}

/// `X-USER-ID` + `X-USER-ID-TYPE` headers.
pub fn user<'a>(kind: &'a str, id: &'a str) -> [(&'a str, &'a str); 2] {
    [("X-USER-ID", id), ("X-USER-ID-TYPE", kind)]
}

/// A query string from pairs (percent-encoded).
pub fn query(pairs: &[(&str, &str)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

/// A valid replica create/update body.
pub fn replica_body(slug: &str, owner: &str) -> Value {
    json!({
        "name": format!("Replica {slug}"),
        "shortDescription": "A test replica",
        "greeting": format!("Hi, I am {slug}. Ask me anything."),
        "ownerID": owner,
        "slug": slug,
        "llm": {"model": "replicad-extractive"},
    })
}

/// An organization's API key, bound to one server.
#[derive(Clone)]
pub struct Org {
    pub key: String,
    pub id: String,
    /// E-mail of the owner user (the contact given at redemption).
    pub owner_email: String,
    pub base: String,
    pub client: reqwest::Client,
}

impl Org {
    /// The same organization on another server (e.g. after a restart on the same directory).
    pub fn at(&self, server: &Server) -> Org {
        Org { base: server.base_url.clone(), client: server.client.clone(), ..self.clone() }
    }

    /// A request carrying the organization key in `X-ORGANIZATION-SECRET`.
    pub fn req(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, format!("{}{path}", self.base)).header("X-ORGANIZATION-SECRET", &self.key)
    }

    /// Any request with the key, extra headers and an optional JSON body.
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>, headers: &[(&str, &str)]) -> Resp {
        let mut rb = self.req(method, path);
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        if let Some(b) = body {
            rb = rb.json(b);
        }
        send(rb).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None, &[]).await.parts()
    }

    pub async fn get_as(&self, path: &str, headers: &[(&str, &str)]) -> (StatusCode, Value) {
        self.call(Method::GET, path, None, headers).await.parts()
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(&body), &[]).await.parts()
    }

    pub async fn post_as(&self, path: &str, body: Value, headers: &[(&str, &str)]) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(&body), headers).await.parts()
    }

    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PUT, path, Some(&body), &[]).await.parts()
    }

    pub async fn put_as(&self, path: &str, body: Value, headers: &[(&str, &str)]) -> (StatusCode, Value) {
        self.call(Method::PUT, path, Some(&body), headers).await.parts()
    }

    pub async fn patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PATCH, path, Some(&body), &[]).await.parts()
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::DELETE, path, None, &[]).await.parts()
    }

    pub async fn delete_as(&self, path: &str, headers: &[(&str, &str)]) -> (StatusCode, Value) {
        self.call(Method::DELETE, path, None, headers).await.parts()
    }

    /// The owner user's id (through `GET /v1/users/me` as the owner's e-mail).
    pub async fn owner_id(&self) -> String {
        let (s, v) = self.get_as("/v1/users/me", &user("email", &self.owner_email)).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v["id"].as_str().expect("id").to_string()
    }

    /// Creates a user of the organization; returns its id.
    pub async fn create_user(&self, name: &str, email: &str) -> String {
        let (s, v) = self.post("/v1/users", json!({"name": name, "email": email})).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v["id"].as_str().expect("id").to_string()
    }

    /// Creates a replica owned by the owner user; returns its uuid.
    pub async fn create_replica(&self, slug: &str) -> String {
        self.create_replica_from(replica_body(slug, &self.owner_email)).await
    }

    /// Creates a replica from `body`; returns its uuid.
    pub async fn create_replica_from(&self, body: Value) -> String {
        let (s, v) = self.post("/v1/replicas", body).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        v["uuid"].as_str().expect("uuid").to_string()
    }

    /// Adds a text entry to `replica`; returns its `knowledgeBaseID`.
    pub async fn add_text(&self, replica: &str, title: &str, text: &str) -> u64 {
        let body = json!({"text": text, "title": title, "language": "en"});
        let (s, v) = self.post(&format!("/v1/replicas/{replica}/knowledge-base"), body).await;
        assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
        v["results"][0]["knowledgeBaseID"].as_u64().expect("knowledgeBaseID")
    }

    /// Creates a `filename` entry and PUTs `bytes` to its signed URL; returns the entry id.
    pub async fn upload(&self, replica: &str, filename: &str, bytes: Vec<u8>) -> u64 {
        let (s, v) =
            self.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({ "filename": filename })).await;
        assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
        let result = &v["results"][0];
        assert_eq!(result["type"], json!("file"), "{v}");
        let url = result["signedURL"].as_str().expect("signedURL");
        let r = send(self.client.put(url).body(bytes)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        result["knowledgeBaseID"].as_u64().expect("id")
    }

    /// Polls the entry until its status is `READY` or `UNPROCESSABLE`; returns the entry.
    pub async fn wait_settled(&self, replica: &str, kb: u64) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let (s, v) = self.get(&format!("/v1/replicas/{replica}/knowledge-base/{kb}")).await;
            assert_eq!(s, StatusCode::OK, "{v}");
            if v["status"] == "READY" || v["status"] == "UNPROCESSABLE" {
                return v;
            }
            assert!(Instant::now() < deadline, "entry {kb} did not settle in time: {v}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls the entry until it settles and asserts it is `READY`; returns the entry.
    pub async fn wait_ready(&self, replica: &str, kb: u64) -> Value {
        let v = self.wait_settled(replica, kb).await;
        assert_eq!(v["status"], "READY", "entry {kb} is not READY: {v}");
        v
    }

    /// Adds a text entry and waits until it is READY; returns its id.
    pub async fn add_ready_text(&self, replica: &str, title: &str, text: &str) -> u64 {
        let kb = self.add_text(replica, title, text).await;
        self.wait_ready(replica, kb).await;
        kb
    }

    /// Asks `replica` (as the organization); returns the status and body.
    pub async fn chat(&self, replica: &str, content: &str) -> (StatusCode, Value) {
        self.post(&format!("/v1/replicas/{replica}/chat/completions"), json!({"content": content})).await
    }

    /// Asks and asserts a 200; returns the answer text.
    pub async fn ask(&self, replica: &str, content: &str) -> String {
        let (s, v) = self.chat(replica, content).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v["content"].as_str().expect("content").to_string()
    }

    /// The chat history items at `path_suffix` (`""`, `"/web"`, …) as the organization.
    pub async fn history(&self, replica: &str, path_suffix: &str) -> Vec<Value> {
        self.history_as(replica, path_suffix, &[]).await
    }

    /// The chat history items at `path_suffix` with extra headers; asserts a 200.
    pub async fn history_as(&self, replica: &str, path_suffix: &str, headers: &[(&str, &str)]) -> Vec<Value> {
        let (s, v) = self.get_as(&format!("/v1/replicas/{replica}/chat/history{path_suffix}"), headers).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v["items"].as_array().expect("items").clone()
    }
}

/// A paragraph with one distinctive fact, for retrieval tests.
pub const ZORBLAX: &str = "The Zorblax reactor is the power source of the floating city of Quenth. \
    The Zorblax reactor operates at a steady temperature of 451 kelvin. \
    Its fuel is crystallised moonwater harvested every spring.";

/// The question whose answer is in [`ZORBLAX`].
pub const ZORBLAX_QUESTION: &str = "At what temperature does the Zorblax reactor operate?";

/// gzip of `bytes`.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).expect("gzip");
    e.finish().expect("gzip")
}
