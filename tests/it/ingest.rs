//! Knowledge-base ingestion end to end: files through signed upload URLs, web pages fetched
//! from a loopback server, languages, failures, quotas, crash safety and `replicad check`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_error, DataDir, Org, Server, PATIENCE};
use crate::fixtures::{self, Page};

/// Asks and returns the stored assistant item (answer and sources).
async fn ask_sources(org: &Org, replica: &str, question: &str) -> (String, Vec<Value>) {
    let answer = org.ask(replica, question).await;
    let items = org.history(replica, "").await;
    let last = items.last().expect("answer stored").clone();
    (answer, last["sources"].as_array().cloned().unwrap_or_default())
}

fn names(sources: &[Value]) -> Vec<String> {
    sources.iter().map(|s| s["name"].as_str().unwrap_or("").to_string()).collect()
}

#[tokio::test]
async fn the_file_types_list_every_extractable_format() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let (s, v) = org.get("/v1/knowledge-base/file-types").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let mut extensions = Vec::new();
    for g in v["mediaGroups"].as_array().expect("mediaGroups") {
        for t in g["fileTypes"].as_array().expect("fileTypes") {
            assert_eq!(t["supportLevel"], json!("production"), "{t}");
            extensions.extend(t["extensions"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_string()));
        }
    }
    for ext in ["pdf", "docx", "epub", "txt", "md", "csv", "json", "html"] {
        assert!(extensions.contains(&ext.to_string()), "{ext} missing from {extensions:?}");
    }
}

#[tokio::test]
async fn a_pdf_upload_is_extracted_indexed_and_cited() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let pdf = fixtures::pdf(&[
        "Maintenance manual of the Vorbix turbine.",
        "The Vorbix turbine must be greased every 37 days with blue lithium paste.",
        "Never open the housing while the rotor spins.",
    ]);
    let kb = org.upload(&replica, "vorbix-manual.pdf", pdf).await;
    let entry = org.wait_settled(&replica, kb).await;
    assert_eq!(entry["status"], json!("READY"), "{entry}");
    assert_eq!(entry["type"], json!("file"));
    assert_eq!(entry["file"]["name"], json!("vorbix-manual.pdf"));
    assert_eq!(entry["file"]["mimeType"], json!("application/pdf"));
    assert!(entry["rawText"].as_str().unwrap().contains("every 37 days"), "{entry}");
    let (answer, sources) = ask_sources(&org, &replica, "How often must the Vorbix turbine be greased?").await;
    assert!(answer.contains("37 days"), "{answer}");
    assert!(names(&sources).iter().any(|n| n.contains("vorbix-manual.pdf")), "{sources:?}");
}

#[tokio::test]
async fn a_pdf_source_names_the_page_its_passage_begins_on() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let history: Vec<String> = (1..=12)
        .map(|i| format!("In year {i} of its history the Vorbix company built {i} hundred small river boats."))
        .collect();
    let care: Vec<String> = (1..=8)
        .map(|i| format!("Inspection step {i} of the Vorbix turbine checks the {i} bolts of the outer ring."))
        .chain(["The Vorbix turbine must be greased every 37 days with blue lithium paste.".to_string()])
        .collect();
    let (history, care): (Vec<&str>, Vec<&str>) =
        (history.iter().map(String::as_str).collect(), care.iter().map(String::as_str).collect());
    let pdf = fixtures::pdf_pages(&[&history, &care]);
    let kb = org.upload(&replica, "vorbix-book.pdf", pdf).await;
    let entry = org.wait_settled(&replica, kb).await;
    assert_eq!(entry["status"], json!("READY"), "{entry}");
    let (answer, sources) = ask_sources(&org, &replica, "How often must the Vorbix turbine be greased?").await;
    assert!(answer.contains("37 days"), "{answer}");
    assert_eq!(sources[0]["page"], json!(2), "{sources:?}");
    assert!(answer.ends_with("(From: vorbix-book.pdf, p. 2)"), "the source line names the page: {answer}");
    assert!(sources[0].get("url").is_none(), "an uploaded file has no page to link: {sources:?}");
    let (_, sources) = ask_sources(&org, &replica, "How many river boats did Vorbix build in year 3?").await;
    assert_eq!(sources[0]["page"], json!(1), "{sources:?}");
}

#[tokio::test]
async fn a_docx_upload_keeps_its_heading_in_the_source_name() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let docx = fixtures::docx(
        "Refund policy",
        &["Customers of Plimsoll Bakery may return unopened cakes within 14 days for a full refund."],
    );
    let kb = org.upload(&replica, "policies.docx", docx).await;
    assert_eq!(org.wait_settled(&replica, kb).await["status"], json!("READY"));
    let (answer, sources) = ask_sources(&org, &replica, "Can I return a cake to Plimsoll Bakery?").await;
    assert!(answer.contains("14 days"), "{answer}");
    assert!(names(&sources).iter().any(|n| n.contains("Refund policy")), "{sources:?}");
}

#[tokio::test]
async fn an_epub_upload_is_read_chapter_by_chapter() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let body = "<h1>The Lighthouse</h1><p>The keeper of the Quillon lighthouse lit the lamp with whale oil \
                every evening at dusk, and wrote the weather into a green logbook.</p>";
    let kb = org.upload(&replica, "quillon.epub", fixtures::epub("Quillon Stories", "The Lighthouse", body)).await;
    let entry = org.wait_settled(&replica, kb).await;
    assert_eq!(entry["status"], json!("READY"), "{entry}");
    let (answer, _) = ask_sources(&org, &replica, "What did the Quillon lighthouse keeper burn in the lamp?").await;
    assert!(answer.contains("whale oil"), "{answer}");
}

#[tokio::test]
async fn a_web_page_is_fetched_through_a_redirect_and_its_main_text_cited() {
    let html = "<html><head><title>Gardening notes</title></head><body><nav>Home | About | Shop</nav>\
        <article><h1>Growing the moonberry</h1><p>The moonberry shrub needs acid soil with a pH of 4.5 \
        and flowers only after a cold winter. Water it with rain water, never with tap water.</p>\
        <h2>Harvest</h2><p>Pick moonberries in late October when they turn silver.</p></article>\
        <footer>Copyright</footer></body></html>";
    let mut pages = HashMap::new();
    pages.insert("/garden", Page::html(html));
    pages.insert("/old-garden", Page::redirect("/garden"));
    let base = fixtures::web_server(pages).await;
    let server = Server::start_with(&["--allow-private-urls"]);
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    let (s, v) = org.post(&path, json!({ "url": format!("{base}/old-garden") })).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    assert_eq!(v["results"][0]["type"], json!("website"));
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    let entry = org.wait_settled(&replica, kb).await;
    assert_eq!(entry["status"], json!("READY"), "{entry}");
    assert_eq!(entry["website"]["finalURL"], json!(format!("{base}/garden")));
    assert_eq!(entry["generatedTitle"], json!("Gardening notes"));
    assert!(!entry["rawText"].as_str().unwrap().contains("Shop"), "navigation kept: {entry}");
    let (answer, sources) = ask_sources(&org, &replica, "What soil does the moonberry need?").await;
    assert!(answer.contains("4.5"), "{answer}");
    assert!(names(&sources).iter().any(|n| n.contains("Gardening notes")), "{sources:?}");
    // the link opens the page (where the redirect ended) scrolled to the quoted words
    let url = sources[0]["url"].as_str().expect("a web page's source links it");
    let (page, directive) = url.split_once("#:~:text=").expect("a text fragment");
    assert_eq!(page, format!("{base}/garden"));
    let start = directive.split(',').next().unwrap().replace("%20", " ");
    assert!(answer.contains(&start), "the fragment names quoted words: {start:?} not in {answer}");
    assert!(sources[0].get("page").is_none(), "{sources:?}");

    let dup = org.call(Method::POST, &path, Some(&json!({ "url": format!("{base}/old-garden#top") })), &[]).await;
    assert_error(&dup, StatusCode::CONFLICT, Some("URL_ALREADY_EXISTS"));
}

#[tokio::test]
async fn an_auto_refreshed_page_is_fetched_again_and_re_indexed_when_it_changes() {
    let page = |day: &str| {
        Page::html(&format!(
            "<html><head><title>Ferry timetable</title></head><body><article><h1>Ferry to Skerra</h1>\
         <p>The ferry to the island of Skerra leaves the harbour every {day} at nine in the morning, \
         weather permitting, and returns in the evening.</p></article></body></html>"
        ))
    };
    let pages: fixtures::Pages = Arc::new(Mutex::new(HashMap::from([("/ferry", page("Tuesday"))])));
    let base = fixtures::web_server_shared(pages.clone()).await;
    let server = Server::start_with(&["--allow-private-urls", "--kb-refresh-interval", "1"]);
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let body = json!({ "url": format!("{base}/ferry"), "autoRefresh": true });
    let (_, v) = org.post(&format!("/v1/replicas/{replica}/knowledge-base"), body).await;
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    assert!(org.wait_settled(&replica, kb).await["rawText"].as_str().unwrap().contains("Tuesday"));

    pages.lock().unwrap().insert("/ferry", page("Thursday"));
    let deadline = Instant::now() + PATIENCE;
    loop {
        let entry = org.wait_settled(&replica, kb).await;
        if entry["rawText"].as_str().unwrap().contains("Thursday") {
            break;
        }
        assert!(Instant::now() < deadline, "not refreshed: {entry}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    org.wait_settled(&replica, kb).await;
    let answer = org.ask(&replica, "When does the ferry to Skerra leave?").await;
    assert!(answer.contains("Thursday") && !answer.contains("Tuesday"), "{answer}");
}

#[tokio::test]
async fn private_addresses_are_not_fetched_unless_the_operator_allows_it() {
    let mut pages = HashMap::new();
    pages.insert("/secret", Page::html("<html><body><p>internal admin data</p></body></html>"));
    let base = fixtures::web_server(pages).await;
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let (s, v) =
        org.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({ "url": format!("{base}/secret") })).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let entry = org.wait_settled(&replica, v["results"][0]["knowledgeBaseID"].as_u64().unwrap()).await;
    assert_eq!(entry["status"], json!("UNPROCESSABLE"), "{entry}");
    assert!(entry["error"]["message"].as_str().unwrap().contains("private or local"), "{entry}");
    assert!(entry["rawText"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn a_youtube_url_is_accepted_and_ends_unprocessable_with_a_reason() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let body = json!({ "url": "https://www.youtube.com/watch?v=dQw4w9WgXcQ" });
    let (s, v) = org.post(&format!("/v1/replicas/{replica}/knowledge-base"), body).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    assert_eq!(v["results"][0]["type"], json!("youtube"));
    let entry = org.wait_settled(&replica, v["results"][0]["knowledgeBaseID"].as_u64().unwrap()).await;
    assert_eq!(entry["status"], json!("UNPROCESSABLE"));
    assert!(entry["error"]["message"].as_str().unwrap().contains("transcript"), "{entry}");
    let (s, v) = org.get(&format!("/v1/replicas/{replica}/knowledge-base?hasError=true")).await;
    assert_eq!((s, v["total"].clone()), (StatusCode::OK, json!(1)), "{v}");
    let (_, v) = org.get(&format!("/v1/replicas/{replica}/knowledge-base?hasError=false")).await;
    assert_eq!(v["total"], json!(0), "{v}");
}

#[tokio::test]
async fn corrupt_and_empty_files_end_unprocessable_and_the_server_keeps_serving() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let corrupt = org.upload(&replica, "broken.pdf", b"%PDF-1.7\nthis is not really a pdf".to_vec()).await;
    let fake_docx = org.upload(&replica, "broken.docx", b"PK\x03\x04 not a zip".to_vec()).await;
    let blank = org.upload(&replica, "blank.txt", b"  \n\n  ".to_vec()).await;
    for kb in [corrupt, fake_docx, blank] {
        let entry = org.wait_settled(&replica, kb).await;
        assert_eq!(entry["status"], json!("UNPROCESSABLE"), "{entry}");
        assert!(!entry["error"]["message"].as_str().unwrap().is_empty(), "{entry}");
    }
    org.add_ready_text(&replica, "Still", "The server still works after bad files.").await;
}

#[tokio::test]
async fn a_signed_url_is_single_use_unknown_tokens_are_404_and_the_size_is_capped() {
    let server = Server::start_with(&["--max-upload-bytes", "2048"]);
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    let (_, v) = org.post(&path, json!({ "filename": "../../etc/notes.txt" })).await;
    let url = v["results"][0]["signedURL"].as_str().unwrap().to_string();
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    let (_, entry) = org.get(&format!("{path}/{kb}")).await;
    assert_eq!(entry["file"]["name"], json!("notes.txt"), "the path is dropped: {entry}");
    assert_eq!(entry["status"], json!("NEW"));

    let too_big = org.client.put(&url).body(vec![b'a'; 4096]).send().await.unwrap();
    assert_eq!(too_big.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let ok = org.client.put(&url).body("Notes about the Hexley clock: it chimes 13 times.").send().await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let again = org.client.put(&url).body("other").send().await.unwrap();
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert_eq!(again.json::<Value>().await.unwrap()["error_code"], json!("UPLOAD_ALREADY_USED"));
    let unknown = org.client.put(server.url("/v1/knowledge-base/uploads/nope")).body("x").send().await.unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(org.wait_settled(&replica, kb).await["status"], json!("READY"));
    let token = url.rsplit('/').next().unwrap();
    assert!(!server.dir().log().contains(token), "the upload token reached the log");
}

#[tokio::test]
async fn chinese_text_is_detected_and_found_by_a_chinese_question() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let text = "熊猫是中国的国宝。大熊猫主要吃竹子，每天要吃十几个小时。它们生活在四川的山区森林里。";
    let (s, v) =
        org.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({ "text": text, "title": "熊猫" })).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    let entry = org.wait_settled(&replica, kb).await;
    assert_eq!(entry["detectedLanguage"], json!("zh"), "{entry}");
    org.add_ready_text(&replica, "Other", "Penguins live in Antarctica and eat fish.").await;
    let (answer, sources) = ask_sources(&org, &replica, "大熊猫吃什么？").await;
    assert!(answer.contains("竹子"), "{answer} {sources:?}");
    assert!(names(&sources)[0].contains("熊猫"), "{sources:?}");
}

#[tokio::test]
async fn a_french_text_is_stemmed_as_french() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let text = "Les chevaux de la ferme Morvelle mangeaient de l'avoine fraîche chaque matin avant le travail.";
    let (_, v) = org.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({ "text": text })).await;
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    assert_eq!(org.wait_settled(&replica, kb).await["detectedLanguage"], json!("fr"));
    let (answer, sources) =
        ask_sources(&org, &replica, "Que donne-t-on à manger au cheval de la ferme Morvelle le matin ?").await;
    assert!(answer.contains("avoine"), "{answer} {sources:?}");
}

#[tokio::test]
async fn the_entry_quota_is_429_and_a_custom_usage_limit_is_400() {
    let server = Server::start_with(&["--max-kb-entries-per-org", "2"]);
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    org.add_text(&replica, "One", "first entry").await;
    let custom = json!({ "text": "second", "usageLimits": { "knowledgeBaseEntries": 1 } });
    let r = org.call(Method::POST, &path, Some(&custom), &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED"));
    let second = org.add_text(&replica, "Two", "second entry").await;
    let r = org.call(Method::POST, &path, Some(&json!({ "text": "third" })), &[]).await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, Some("KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED"));
    assert_eq!(org.delete(&format!("{path}/{second}")).await.0, StatusCode::OK);
    org.add_text(&replica, "Three", "room again after a delete").await;
}

#[tokio::test]
async fn the_list_filters_by_type_and_sorts_by_title() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    org.add_text(&replica, "Banana", "yellow").await;
    org.add_text(&replica, "apple", "red").await;
    org.upload(&replica, "cherry.txt", b"dark red".to_vec()).await;
    let base = format!("/v1/replicas/{replica}/knowledge-base");
    let (_, v) = org.get(&format!("{base}?sort=title")).await;
    let titles: Vec<&str> = v["items"].as_array().unwrap().iter().map(|i| i["title"].as_str().unwrap_or("-")).collect();
    assert_eq!(titles, vec!["apple", "Banana", "-"], "{v}");
    let (_, v) = org.get(&format!("{base}?sort=-createdAt&type=text")).await;
    assert_eq!(v["total"], json!(2));
    assert_eq!(v["items"][0]["title"], json!("apple"));
    let (_, v) = org.get(&format!("{base}?search=CHERRY")).await;
    assert_eq!(v["items"][0]["file"]["name"], json!("cherry.txt"), "{v}");
    let r = org.call(Method::GET, &format!("{base}?sort=size"), None, &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_QUERY"));
}

#[tokio::test]
async fn ingestion_resumes_after_kill_9_and_the_index_agrees_with_the_store() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let mut ids = Vec::new();
    for i in 0..12 {
        let lines = [format!("Report {i} of the Tarn observatory."), format!("Comet {i} was seen on night {}.", i * 7)];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        ids.push(org.upload(&replica, &format!("report-{i}.pdf"), fixtures::pdf(&lines)).await);
    }
    // Every upload was acknowledged; kill the server while it is extracting and indexing.
    let dir: DataDir = server.kill9();
    let server = Server::start_in(dir, &[]);
    let org = org.at(&server);
    for kb in &ids {
        assert_eq!(org.wait_settled(&replica, *kb).await["status"], json!("READY"));
    }
    let (answer, _) = ask_sources(&org, &replica, "When was comet 11 seen?").await;
    assert!(answer.contains("77"), "{answer}");
    let out = server.dir().cli(&["check"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["ok"], json!(true), "{report}");
    assert_eq!(report["mismatched"], json!([]));
    assert_eq!(report["documents_in_index"], report["chunks_in_store"], "{report}");
}

/// A stand-in HTTP proxy on loopback that answers every request with a page; returns its URL
/// and the number of connections it has accepted.
async fn counting_proxy() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
            let body = "<html><body><p>internal admin data, through the proxy</p></body></html>";
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n", body.len());
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
        }
    });
    (url, accepted)
}

#[tokio::test]
async fn environment_proxies_are_ignored_so_a_url_to_localhost_is_still_refused() {
    let (proxy, accepted) = counting_proxy().await;
    let dir = DataDir::new();
    let mut cmd = std::process::Command::new(crate::common::BIN);
    cmd.arg("serve").arg("--listen").arg("127.0.0.1:0").arg("--data-dir").arg(dir.path());
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        cmd.env(name, &proxy);
    }
    cmd.env_remove("NO_PROXY").env_remove("no_proxy");
    let server = Server::spawn(cmd, dir, &[]);
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    for url in ["http://localhost:9/secret", "http://127.0.0.1:9/secret"] {
        let (s, v) = org.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({ "url": url })).await;
        assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
        let entry = org.wait_settled(&replica, v["results"][0]["knowledgeBaseID"].as_u64().unwrap()).await;
        assert_eq!(entry["status"], json!("UNPROCESSABLE"), "{url}: {entry}");
        assert!(entry["error"]["message"].as_str().unwrap().contains("private or local"), "{entry}");
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0, "the fetcher went through the proxy");
}
