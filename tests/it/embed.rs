//! The embeddable widget and the web chat page: embed keys, allowed origins (CORS), the visitor's
//! own history, over HTTP; and in real headless Chromium (Debian's `chromium` driven by
//! playwright-core, `tests/browser/widget.cjs`, installed by `.ci/install-browser`, which
//! `.ci/run` calls): ask, read the streamed answer and its sources, reload and see the
//! conversation kept, a disallowed origin refused, the web page of a public replica. A failing
//! browser step saves a screenshot under `target/test-artifacts/`.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::common::fake_llm::{read_request, FakeLlm, Script};
use crate::common::{assert_error, replica_body, send, Org, Server, ZORBLAX, ZORBLAX_QUESTION};

const VISITOR: &str = "visitor-0001-aaaa";

/// A public replica that knows the Zorblax reactor, with a suggested question.
pub async fn reactor(org: &Org) -> String {
    let mut body = replica_body("reactor", &org.owner_email);
    body["name"] = json!("Quenth Reactor Desk");
    body["shortDescription"] = json!("Answers about the Zorblax reactor.");
    body["suggestedQuestions"] = json!([ZORBLAX_QUESTION]);
    let replica = org.create_replica_from(body).await;
    org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    replica
}

pub async fn embed_key(org: &Org, replica: &str, origins: &[&str]) -> String {
    let (s, v) = org.post(&format!("/v1/replicas/{replica}/embed-keys"), json!({"allowedOrigins": origins})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["key"].as_str().expect("key").to_string()
}

pub fn widget_req(
    server: &Server,
    method: Method,
    path: &str,
    key: &str,
    origin: &str,
    visitor: &str,
) -> reqwest::RequestBuilder {
    server.req(method, path).header("x-embed-key", key).header("origin", origin).header("x-embed-visitor", visitor)
}

#[tokio::test]
async fn an_embed_key_chats_only_from_allowed_origins_and_reads_only_its_visitors_history() {
    let server = Server::start();
    let org = server.new_org("Embed").await;
    let replica = reactor(&org).await;
    let other = org.create_replica("other").await;
    let site = "https://docs.example.com";
    let key = embed_key(&org, &replica, &["https://docs.example.com/"]).await;
    assert!(key.starts_with("rpl_embed_"), "{key}");
    let bad = send(
        org.req(Method::POST, &format!("/v1/replicas/{replica}/embed-keys"))
            .json(&json!({"allowedOrigins": ["https://x.org/page"]})),
    )
    .await;
    assert_error(&bad, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));

    let chat = format!("/v1/embed/{replica}/chat");
    let r =
        send(widget_req(&server, Method::POST, &chat, &key, site, VISITOR).json(&json!({"content": ZORBLAX_QUESTION})))
            .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.header("access-control-allow-origin"), Some(site));
    assert!(r.body["content"].as_str().unwrap().contains("451 kelvin"), "{}", r.text);
    assert!(!r.body["sources"].as_array().unwrap().is_empty());

    let r = send(
        widget_req(&server, Method::POST, &chat, &key, "https://evil.example", VISITOR).json(&json!({"content": "hi"})),
    )
    .await;
    assert_error(&r, StatusCode::FORBIDDEN, Some("ORIGIN_NOT_ALLOWED"));
    assert!(r.header("access-control-allow-origin").is_none());
    // The CORS preflight is not an API operation (not in the document): read it directly.
    let preflight = |origin: &str| {
        server
            .req(Method::OPTIONS, &chat)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .send()
    };
    let r = preflight("https://evil.example").await.expect("preflight");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = preflight(site).await.expect("preflight");
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let h = |name: &str| r.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    assert_eq!(h("access-control-allow-origin"), site);
    assert!(h("access-control-allow-headers").contains("x-embed-key"));
    let r = send(
        widget_req(&server, Method::POST, &format!("/v1/embed/{other}/chat"), &key, site, VISITOR)
            .json(&json!({"content": "hi"})),
    )
    .await;
    assert_error(&r, StatusCode::FORBIDDEN, Some("EMBED_KEY_REFUSED"));

    let history = format!("/v1/embed/{replica}/history");
    let mine = send(widget_req(&server, Method::GET, &history, &key, site, VISITOR)).await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.text);
    let items = mine.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(items.iter().all(|i| i["source"] == "embed"));
    let theirs = send(widget_req(&server, Method::GET, &history, &key, site, "visitor-0002-bbbb")).await;
    assert_eq!(theirs.body["items"], json!([]), "another visitor sees nothing of the first");
    let (_, v) =
        org.get_as(&format!("/v1/replicas/{replica}/chat/history/embed"), &crate::common::user("embed", VISITOR)).await;
    assert_eq!(v["items"].as_array().unwrap().len(), 2, "the visitor is the embed linked account: {v}");
}

#[tokio::test]
async fn the_web_page_serves_public_replicas_only_under_a_strict_policy() {
    let server = Server::start();
    let org = server.new_org("Page").await;
    let replica = reactor(&org).await;
    let r = send(server.req(Method::GET, &format!("/r/{}/reactor", org.id))).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.text.contains("Quenth Reactor Desk") && r.text.contains(&replica), "{}", r.text);
    let csp = r.header("content-security-policy").unwrap();
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe"), "{csp}");
    let js = send(server.req(Method::GET, "/embed/widget.js")).await;
    assert_eq!(js.status, StatusCode::OK);
    assert!(js.header("content-type").unwrap().starts_with("text/javascript"));
    assert!(!js.text.contains("eval(") && !js.text.contains("innerHTML") && !js.text.contains("new Function"));

    let mut private = replica_body("secret", &org.owner_email);
    private["private"] = json!(true);
    let secret = org.create_replica_from(private).await;
    let r = send(server.req(Method::GET, &format!("/r/{}/secret", org.id))).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = send(
        server
            .req(Method::POST, &format!("/v1/embed/{secret}/chat"))
            .header("x-embed-visitor", VISITOR)
            .json(&json!({"content": "hi"})),
    )
    .await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
}

/// A site on its own loopback origin serving one page that includes the widget, under a strict
/// Content-Security-Policy naming only the replicad server.
pub async fn host_site(replicad: &str, replica: &str, key: &str) -> String {
    host_site_with(replicad, replica, key, "data-name=\"Reactor Desk\" data-greeting=\"Ask me about the reactor.\"")
        .await
}

/// [`host_site`] whose script tag carries the `data-` attributes `attrs` besides the replica
/// and the key.
pub async fn host_site_with(replicad: &str, replica: &str, key: &str, attrs: &str) -> String {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Quenth docs</title></head><body>\
         <h1>Quenth documentation</h1><p>Welcome.</p>\
         <script src=\"{replicad}/embed/widget.js\" data-replica=\"{replica}\" data-key=\"{key}\" {attrs} \
         defer></script></body></html>"
    );
    let csp =
        format!("default-src 'none'; script-src {replicad}; connect-src {replicad}; style-src 'none'; base-uri 'none'");
    let head = format!("content-type: text/html; charset=utf-8\r\ncontent-security-policy: {csp}");
    static_host(head, html.into_bytes()).await
}

/// A 2 × 2 red PNG.
const PNG: &[u8] = &[
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 2, 0, 0, 0, 2, 8, 2, 0, 0, 0, 253, 212, 154,
    115, 0, 0, 0, 16, 73, 68, 65, 84, 120, 156, 99, 248, 207, 192, 0, 68, 12, 16, 10, 0, 31, 238, 3, 253, 139, 95, 20,
    212, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];

/// A server on its own loopback origin answering every request with `body` under the header
/// lines `head` (`name: value` lines joined by CRLF); returns its origin.
async fn static_host(head: String, body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind site");
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let mut answer =
        format!("HTTP/1.1 200 OK\r\n{head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len())
            .into_bytes();
    answer.extend_from_slice(&body);
    let answer = std::sync::Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                if read_request(&mut stream).await.is_some() {
                    let _ = stream.write_all(&answer).await;
                }
            });
        }
    });
    origin
}

fn required_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: the browser tests need Debian's chromium and playwright-core. Run `bash .ci/run` \
             (or `eval \"$(bash .ci/install-browser)\"` before `cargo test`)."
        )
    })
}

/// A site on its own origin including the widget of `replica` with a fresh embed key, its origin
/// the replica's only allowed one; returns the site's origin.
pub async fn allowed_site(server: &Server, org: &Org, replica: &str) -> String {
    let key = embed_key(org, replica, &["https://placeholder.example"]).await;
    let site = host_site(&server.base_url, replica, &key).await;
    embed_key(org, replica, &[&site]).await;
    site
}

/// [`drive_browser`] on a blocking thread, for the async tests.
pub async fn in_browser(config: Value) -> Value {
    tokio::task::spawn_blocking(move || drive_browser(config)).await.expect("browser task")
}

/// Runs `tests/browser/widget.cjs` with `config`; returns what it observed.
fn drive_browser(mut config: Value) -> Value {
    config["chromium"] = json!(required_env("REPLICAD_TEST_CHROMIUM"));
    config["modules"] = json!(required_env("REPLICAD_TEST_BROWSER_MODULES"));
    config["artifacts"] = json!(concat!(env!("CARGO_MANIFEST_DIR"), "/target/test-artifacts"));
    let file = tempfile::NamedTempFile::new().expect("config file");
    std::fs::write(file.path(), config.to_string()).expect("write config");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/widget.cjs");
    let out = Command::new("node").arg(script).arg(file.path()).output().expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "browser run failed:\n{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("observations")
}

#[tokio::test]
async fn in_chromium_the_widget_streams_answers_with_sources_keeps_the_conversation_and_refuses_other_sites() {
    let server = Server::start();
    let org = server.new_org("Browser").await;
    let replica = reactor(&org).await;
    // Both sites carry a valid key; only one origin is allowed (a later call replaces the
    // origins, and earlier keys keep working).
    let key = embed_key(&org, &replica, &["https://placeholder.example"]).await;
    let allowed = host_site(&server.base_url, &replica, &key).await;
    let refused = host_site(&server.base_url, &replica, &key).await;
    let key_again = embed_key(&org, &replica, &[&allowed]).await;
    assert_ne!(key, key_again, "each call mints a new key");

    let seen = in_browser(json!({
        "steps": ["widget", "refused", "web_page"],
        "replica": replica,
        "replicad": server.base_url,
        "allowed_url": format!("{allowed}/"),
        "refused_url": format!("{refused}/"),
        "page_url": format!("{}/r/{}/reactor", server.base_url, org.id),
        "question": ZORBLAX_QUESTION,
        "suggested": ZORBLAX_QUESTION,
        "expect": "451 kelvin",
    }))
    .await;

    assert_eq!(seen["violations"], json!([]), "no Content-Security-Policy violation: {seen}");
    assert_eq!(seen["hidden_before_opening"], json!(true), "the panel starts closed: {seen}");
    assert_eq!(seen["focused_input"], json!(true), "opening moves the focus to the input");
    assert_eq!(seen["closed_with_escape"], json!(true));
    assert!(seen["first"]["text"].as_str().unwrap().contains("451 kelvin"), "{seen}");
    assert!(seen["first"]["sources"].as_array().unwrap().iter().any(|s| s == "Zorblax reactor"), "{seen}");
    assert!(!seen["first"]["text"].as_str().unwrap().contains("(From:"), "the chips name the sources: {seen}");
    // Asked while the history loaded on opening (the site's greeting) was held back: it comes
    // first, and the question is sent once it is in.
    let order: Vec<&str> = seen["first_order"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(order.len() == 3 && order[0] == "Ask me about the reactor.", "{order:?}");
    assert!(order[1] == ZORBLAX_QUESTION && order[2].contains("451 kelvin"), "{order:?}");
    let streamed = seen["chat_answers"].as_array().unwrap();
    assert!(
        streamed.iter().any(|a| a["status"] == 200 && a["type"].as_str().unwrap().starts_with("text/event-stream")),
        "{seen}"
    );
    let kept: Vec<&str> = seen["after_reload"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(kept.contains(&ZORBLAX_QUESTION) && kept.iter().any(|m| m.contains("451 kelvin")), "{kept:?}");
    assert!(seen["visitor"].as_str().is_some_and(|v| v.len() >= 8), "{seen}");
    assert!(
        seen["refused_status"].as_str().unwrap().contains("not available"),
        "a refused origin cannot read why: {seen}"
    );
    assert_eq!(seen["refused_answers"], json!(0), "nothing answered on a refused site");
    assert_eq!(seen["page_heading"], "Quenth Reactor Desk");
    assert_eq!(seen["page_description"], "Answers about the Zorblax reactor.");
    assert_eq!(seen["page_avatar"], "QR", "initials without a profile image");
    assert_eq!(seen["page_chips_after_asking"], json!(false), "the suggested questions go once asked");
    assert_eq!(seen["foreign"], json!([]), "no request to any other origin: {seen}");
    assert!(seen["page_greeting"].as_str().unwrap().starts_with("Hi, I am reactor"), "{seen}");
    assert!(seen["page_answer"]["text"].as_str().unwrap().contains("451 kelvin"), "{seen}");
    let page_kept = seen["page_after_reload"].as_array().unwrap();
    assert!(page_kept.iter().any(|m| m == ZORBLAX_QUESTION), "{seen}");
}

/// Adds to `replica` a web page and a two-page PDF about starting the reactor (the PDF's first
/// page about something else); returns the page's URL.
async fn located_sources(org: &Org, replica: &str) -> String {
    let html = "<html><head><title>Starting the reactor</title></head><body><article><h1>Starting the reactor</h1>\
                <p>To start the Zorblax reactor, check its status first and then run the start command; the core \
                warms up to 451 kelvin within ten minutes.</p></article></body></html>";
    let base = crate::fixtures::web_server(HashMap::from([("/start", crate::fixtures::Page::html(html))])).await;
    let url = format!("{base}/start");
    let (_, v) = org.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({ "url": url })).await;
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().expect("entry id");
    assert_eq!(org.wait_settled(replica, kb).await["status"], json!("READY"));
    let boats: Vec<String> = (1..=24)
        .map(|i| format!("In year {i} the Quenth shipyard built {i} hundred small river boats of oak."))
        .collect();
    let boats: Vec<&str> = boats.iter().map(String::as_str).collect();
    let manual = ["To start the Zorblax reactor, turn the blue key and start the pumps."];
    let kb = org.upload(replica, "zorblax-manual.pdf", crate::fixtures::pdf_pages(&[&boats, &manual])).await;
    assert_eq!(org.wait_settled(replica, kb).await["status"], json!("READY"));
    url
}

/// The fake model's Markdown answer: a numbered list with inline code, a fenced block, a table,
/// links (one of them `javascript:`), raw HTML and images that must not load.
const MARKDOWN: &str = "Start the reactor in two steps:\n\n1. Check `zorb --status`\n2. Run the start command\n\n\
                        ```sh\nzorb --start --kelvin 451\n```\n\n| Part | Temperature |\n|---|---|\n| core | 451 K |\n\n";
const MARKDOWN_END: &str = "See [the manual](https://manual.example/zorblax) or [this](javascript:alert(1)).\n\n\
                            <img src=\"https://leak.example/a.png\"> <script>window.__pwned = 1</script>\n\n\
                            ![diagram](https://leak.example/diagram.png)";

#[tokio::test]
async fn in_chromium_answers_are_rendered_markdown_with_citations_and_can_be_stopped_retried_and_driven_by_the_site() {
    let script = vec![
        Script::Reply(vec![MARKDOWN, MARKDOWN_END]),
        Script::Endless(Duration::from_millis(100)),
        Script::Fail { status: 400, retry_after: None },
    ];
    let fake = FakeLlm::start(script, Script::Reply(vec!["Recovered ", "answer."])).await;
    let server = crate::llm::serve(&fake, &["--allow-private-urls"]);
    let org = server.new_org("Markdown").await;
    let (replica, _) = crate::llm::reactor(&org).await;
    let web = located_sources(&org, &replica).await;
    let key = embed_key(&org, &replica, &["https://placeholder.example"]).await;
    let site = host_site(&server.base_url, &replica, &key).await;
    let attrs = "data-name=\"Reactor Desk\" data-color=\"#0a7d32\" data-position=\"left\" data-lang=\"fr\" \
                 data-launcher-label=\"Besoin d'aide ?\" data-title=\"Aide Quenth\" data-placeholder=\"Votre question\"";
    let custom = host_site_with(&server.base_url, &replica, &key, attrs).await;
    embed_key(&org, &replica, &[&site, &custom]).await;
    let secret = crate::embed_identity::new_secret(&org, &replica).await;
    let identity =
        crate::embed_identity::sign(&secret, &replica, "ada@site.example", crate::embed_identity::unix_now() + 3600);
    assert!(fake.seen().is_empty(), "nothing asked the model before the browser");

    let seen = in_browser(json!({
        "steps": ["markdown", "stop", "retry", "custom", "identity"],
        "replica": replica,
        "replicad": server.base_url,
        "allowed_url": format!("{site}/"),
        "custom_url": format!("{custom}/"),
        "markdown_question": "How do I start the reactor?",
        "stop_question": "Tell me everything.",
        "retry_question": "And the fuel?",
        "recovered": "Recovered answer.",
        "api_question": "Asked by the site",
        "identity": identity,
        "identity_question": "Asked by Ada on her laptop",
    }))
    .await;
    assert_eq!(seen["violations"], json!([]), "{seen}");
    assert_eq!(seen["foreign"], json!([]), "nothing requested from another origin (no image loaded): {seen}");

    let md = &seen["md"];
    assert_eq!(md["code"], "zorb --start --kelvin 451", "a fenced block is <pre><code>: {seen}");
    assert!(!md["text"].as_str().unwrap().contains("```"), "no literal backticks: {seen}");
    assert_eq!(md["list_items"], json!(2));
    assert!(md["inline_code"].as_u64().unwrap() >= 1, "{seen}");
    assert_eq!(md["table_cells"], json!(["core", "451 K"]));
    let links = md["links"].as_array().unwrap();
    let manual = links.iter().find(|l| l["text"] == "the manual").expect("the manual link");
    assert_eq!(manual["href"], "https://manual.example/zorblax");
    assert_eq!((&manual["target"], &manual["rel"]), (&json!("_blank"), &json!("noopener noreferrer")));
    assert!(links.iter().all(|l| !l["href"].as_str().unwrap_or("").starts_with("javascript")), "{seen}");
    assert!(links.iter().any(|l| l["href"] == "https://leak.example/diagram.png"), "an image is a link: {seen}");
    let text = md["text"].as_str().unwrap();
    assert!(text.contains("<img src=") && text.contains("<script>window.__pwned"), "raw HTML shown as text: {text}");
    assert_eq!((&md["images"], &md["scripts_in_answer"], &md["pwned"]), (&json!(0), &json!(0), &json!(false)));
    assert_eq!(md["copied"], "zorb --start --kelvin 451", "the copy button copies the block");

    let citation = &seen["citation"];
    assert_eq!(citation["expanded"], "true");
    assert_eq!(citation["label"], json!(format!("Source 1: {}", citation["name"].as_str().unwrap())), "{seen}");
    let citations = seen["citations"].as_array().unwrap();
    let zorblax = citations.iter().find(|c| c["name"] == "Zorblax reactor").expect("the text entry's chip");
    assert!(zorblax["text"].as_str().unwrap().contains("451 kelvin"), "the passage the chip stands for: {seen}");
    let pdf = citations.iter().find(|c| c["name"] == "zorblax-manual.pdf").expect("the PDF's chip");
    assert_eq!((&pdf["page"], &pdf["link"]), (&json!("p. 2"), &Value::Null), "{seen}");
    let page = citations.iter().find(|c| c["name"] == "Starting the reactor").expect("the web page's chip");
    let link = &page["link"];
    assert!(link["href"].as_str().unwrap().starts_with(&format!("{web}#:~:text=")), "{seen}");
    assert_eq!(
        (&link["target"], &link["rel"], &page["page"]),
        (&json!("_blank"), &json!("noopener noreferrer"), &Value::Null)
    );

    let stopped = &seen["stopped"];
    assert!(stopped["text"].as_str().unwrap().starts_with("word"), "what was said stays: {seen}");
    assert_eq!((&stopped["note"], &stopped["stop_hidden"]), (&json!("Stopped"), &json!(true)));
    assert_eq!(stopped["after_reload"], json!(true), "kept as interrupted by the server: {seen}");
    fake.wait_closed().await;

    assert!(seen["retry_status"].as_str().unwrap().contains("model server"), "the API's error text: {seen}");
    assert_eq!(seen["retried"]["questions_added"], json!(1), "Retry asks the same question again: {seen}");
    assert_eq!(seen["retried"]["status"], "");

    let custom = &seen["custom"];
    assert_eq!(custom["launcher"], "Besoin d'aide ?");
    assert_eq!(custom["launcher_left"], json!(true));
    assert_eq!(custom["launcher_background"], "rgb(10, 125, 50)");
    assert_eq!((&custom["title"], &custom["placeholder"]), (&json!("Aide Quenth"), &json!("Votre question")));
    assert_eq!((&custom["send"], &custom["label"]), (&json!("Envoyer"), &json!("Votre message")));
    assert_eq!(custom["api_answer"], "Recovered answer.");
    assert_eq!(custom["closed"], json!(true));

    let devices = seen["devices"].as_array().unwrap();
    assert_ne!(devices[0], devices[1], "two devices, two anonymous visitor ids: {seen}");
    let other = seen["other_device"].as_array().unwrap();
    assert!(
        other.iter().any(|m| m == "Asked by Ada on her laptop"),
        "the signed user's history on the second device: {seen}"
    );
}

#[tokio::test]
async fn in_chromium_the_page_and_the_widget_fit_phones_and_desktops_in_light_and_dark_and_pass_axe() {
    let server = Server::start();
    let org = server.new_org("Looks").await;
    let replica = reactor(&org).await;
    let site = allowed_site(&server, &org, &replica).await;
    let images = static_host("content-type: image/png".into(), PNG.to_vec()).await;
    let mut profile = replica_body("profiled", &org.owner_email);
    profile["profileImage"] = json!(format!("{images}/face.png"));
    org.create_replica_from(profile).await;
    let seen = in_browser(json!({
        "steps": ["profile", "looks"],
        "profile_url": format!("{}/r/{}/profiled", server.base_url, org.id),
        "images": images,
        "replica": replica,
        "replicad": server.base_url,
        "allowed_url": format!("{site}/"),
        "page_url": format!("{}/r/{}/reactor", server.base_url, org.id),
    }))
    .await;
    assert_eq!(seen["violations"], json!([]), "the profile image's origin is allowed, and only it: {seen}");
    assert_eq!(seen["foreign"], json!([]), "{seen}");
    assert_eq!(seen["profile_image_width"], json!(2), "the profileImage shown in the header: {seen}");
    assert_eq!(seen["axe_page"], json!([]), "no serious or critical accessibility violation on the page");
    assert_eq!(seen["axe_widget"], json!([]), "nor in the open widget");
    assert_eq!(seen["axe_page_dark"], json!([]), "nor on the page in the dark theme");
    assert_eq!(seen["axe_widget_dark"], json!([]), "nor in the widget in the dark theme");
    let scanned = seen["axe_rules_in_shadow"].as_array().unwrap();
    assert!(scanned.len() == 4 && scanned.iter().all(|n| n.as_u64() > Some(5)), "axe checked the widget: {seen}");
    let looks = &seen["looks"];
    for width in [390, 1280] {
        assert_eq!(looks[format!("page-light-{width}")]["background"], "rgb(255, 255, 255)", "{looks}");
        assert_eq!(looks[format!("page-dark-{width}")]["background"], "rgb(22, 24, 29)", "{looks}");
        assert_eq!(looks[format!("widget-dark-{width}")]["background"], "rgb(22, 24, 29)", "{looks}");
        assert_eq!(looks[format!("page-light-{width}")]["form_at_bottom"], json!(true), "{looks}");
    }
    assert_eq!(looks["widget-light-390"]["panel_width"], json!(390), "the open widget fills a phone: {looks}");
    assert_eq!(looks["widget-light-1280"]["panel_width"], json!(380), "{looks}");
    assert_eq!(looks["page-light-1280"]["column_width"], json!(760), "a centred column on a desktop: {looks}");
    let artifacts = concat!(env!("CARGO_MANIFEST_DIR"), "/target/test-artifacts");
    for shot in ["page-light-390", "page-dark-1280", "widget-dark-390", "widget-light-1280"] {
        assert!(std::path::Path::new(&format!("{artifacts}/{shot}.png")).exists(), "{shot} kept");
    }
    println!(
        "page: first contentful paint {} ms, name on screen {} ms; axe rules passed in the widget per scan {}",
        seen["first_paint_ms"], seen["header_shown_ms"], seen["axe_rules_in_shadow"]
    );
}
