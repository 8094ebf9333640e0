//! Hostile documents: files and pages made to crash, exhaust or stall a parser end
//! `UNPROCESSABLE` with a clear reason, while the server keeps answering everyone else within a
//! second and its own memory stays put; an interrupted job is not tried forever; and one
//! organization's queue does not hold another's uploads. Every document is made here.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{DataDir, Org, Server, PATIENCE};
use crate::fixtures::{self, Page};

/// `levels` nested `tag` elements around one word, as an HTML page.
fn nested_html(tag: &str, levels: usize) -> String {
    format!("<html><body>{}deep{}</body></html>", format!("<{tag}>").repeat(levels), format!("</{tag}>").repeat(levels))
}

/// A PDF whose page draws form XObject `Fm0`, and `Fm0`'s own content draws `Fm0` again.
fn self_drawing_pdf() -> Vec<u8> {
    use lopdf::{dictionary, Document, Object, Stream};
    let mut doc = Document::with_version("1.5");
    let (pages_id, form_id) = (doc.new_object_id(), doc.new_object_id());
    let form = Stream::new(
        dictionary! {
            "Type" => "XObject", "Subtype" => "Form",
            "BBox" => vec![0.into(), 0.into(), 100.into(), 100.into()],
            "Resources" => dictionary! { "XObject" => dictionary! { "Fm0" => form_id } },
        },
        b"/Fm0 Do".to_vec(),
    );
    doc.objects.insert(form_id, Object::Stream(form));
    let content_id = doc.add_object(Stream::new(dictionary! {}, b"/Fm0 Do".to_vec()));
    let page_id = doc.add_object(dictionary! { "Type" => "Page", "Parent" => pages_id, "Contents" => content_id });
    let resources = dictionary! { "XObject" => dictionary! { "Fm0" => form_id } };
    fixtures::finish_pdf(doc, pages_id, &[page_id], resources.into())
}

/// A one-page PDF whose compressed content stream shows `mib` MiB of text.
fn inflating_pdf(mib: usize) -> Vec<u8> {
    let line = format!("({}) Tj T*\n", "lorem ipsum dolor sit amet ".repeat(37));
    let mut content = b"BT /F1 11 Tf 16 TL 50 780 Td\n".to_vec();
    content.extend(line.as_bytes().repeat((mib << 20) / line.len()));
    content.extend_from_slice(b"ET");
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&content).expect("deflate");
    let compressed = z.finish().expect("deflate");
    // The fixture's one page, its content stream swapped for the compressed one.
    let mut doc = lopdf::Document::load_mem(&fixtures::pdf(&["placeholder"])).expect("pdf");
    let page = *doc.get_pages().values().next().expect("a page");
    let contents = doc.get_dictionary(page).expect("page").get(b"Contents").expect("contents").as_reference().unwrap();
    let dict = lopdf::dictionary! { "Filter" => "FlateDecode" };
    doc.objects.insert(contents, lopdf::Object::Stream(lopdf::Stream::new(dict, compressed).with_compression(false)));
    let mut pdf = Vec::new();
    doc.save_to(&mut pdf).expect("pdf save");
    pdf
}

/// A zip of `members`, each deflated; `zip64` members carry zip64 size fields.
fn zip_of(members: &[(&str, &[u8])], zip64: bool) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(9))
        .large_file(zip64);
    for (name, body) in members {
        w.start_file(*name, options).expect("zip member");
        w.write_all(body).expect("zip write");
    }
    w.finish().expect("zip finish").into_inner()
}

/// The members of a real DOCX (made by docx-rs), by name.
fn docx_members() -> Vec<(String, Vec<u8>)> {
    let bytes = fixtures::docx("Manual", &["A short paragraph."]);
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("docx zip");
    (0..zip.len())
        .map(|i| {
            let mut member = zip.by_index(i).expect("member");
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut member, &mut body).expect("read member");
            (member.name().expect("member name").into_owned(), body)
        })
        .collect()
}

/// A DOCX whose `word/document.xml` is `document`, its members written with zip64 fields when
/// `zip64`.
fn docx_with(document: &[u8], zip64: bool) -> Vec<u8> {
    let members = docx_members();
    let members: Vec<(&str, &[u8])> = members
        .iter()
        .map(|(name, body)| (name.as_str(), if name == "word/document.xml" { document } else { body.as_slice() }))
        .collect();
    zip_of(&members, zip64)
}

/// A DOCX of about 1 KB whose zip64 `word/document.xml` declares 1 TiB uncompressed.
fn lying_docx() -> Vec<u8> {
    let document = b"<?xml version=\"1.0\"?><w:document/>";
    let mut bytes = docx_with(document, true);
    // Each zip64 extra field (header id 1) starts with the member's uncompressed size.
    let actual = (document.len() as u64).to_le_bytes();
    let tib = (1u64 << 40).to_le_bytes();
    let mut i = 0;
    while i + 12 <= bytes.len() {
        if bytes[i..i + 2] == [1, 0] && bytes[i + 4..i + 12] == actual {
            bytes[i + 4..i + 12].copy_from_slice(&tib);
        }
        i += 1;
    }
    bytes
}

/// A DOCX whose one paragraph inflates to `mib` MiB of text.
fn inflating_docx(mib: usize) -> Vec<u8> {
    let mut xml = br#"<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>"#.to_vec();
    xml.extend(b"lorem ipsum ".repeat((mib << 20) / 12));
    xml.extend_from_slice(b"</w:t></w:r></w:p></w:body></w:document>");
    docx_with(&xml, false)
}

/// Resident and peak memory of process `pid`, in KiB (`VmRSS`, `VmHWM`).
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let field = |name: &str| {
        status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.split_whitespace().next()?.parse().ok())
    };
    (field("VmRSS:").expect("VmRSS"), field("VmHWM:").expect("VmHWM"))
}

/// Asks the server for a small read every 50 ms until stopped; answers the slowest answer.
fn watch_latency(org: &Org, replica: &str) -> (Arc<AtomicBool>, tokio::task::JoinHandle<Duration>) {
    let (org, path) = (org.clone(), format!("/v1/replicas/{replica}"));
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        let mut slowest = Duration::ZERO;
        while !stopped.load(Ordering::Relaxed) {
            let started = Instant::now();
            let (s, v) = org.get(&path).await;
            assert_eq!(s, StatusCode::OK, "{v}");
            slowest = slowest.max(started.elapsed());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        slowest
    });
    (stop, task)
}

/// Waits for entry `kb` to settle and asserts it ended `UNPROCESSABLE` with a message holding
/// `reason`.
async fn assert_unprocessable(org: &Org, replica: &str, kb: u64, reason: &str) -> Value {
    let entry = org.wait_settled(replica, kb).await;
    assert_eq!(entry["status"], json!("UNPROCESSABLE"), "{entry}");
    let message = entry["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(reason), "expected {reason:?} in {entry}");
    entry
}

#[tokio::test]
async fn documents_that_crash_or_exhaust_a_parser_end_unprocessable_and_nobody_else_notices() {
    let mut pages = HashMap::new();
    pages.insert("/deep", Page::html(&nested_html("span", 100_000)));
    let base = fixtures::web_server(pages).await;
    let server = Server::start_with(&["--allow-private-urls", "--extract-cpu-seconds", "5"]);
    let org = server.new_org("Hostile").await;
    let replica = org.create_replica("kb").await;
    let (rss_before, _) = memory_kib(server.pid());
    let (stop, watcher) = watch_latency(&org, &replica);

    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("form.pdf", self_drawing_pdf(), "could not be read safely: its structure nests too deeply"),
        ("lying.docx", lying_docx(), "the archive is inconsistent"),
        ("spans.html", nested_html("span", 100_000).into_bytes(), "could not be read safely"),
        ("divs.html", nested_html("div", 100_000).into_bytes(), "could not be read safely"),
        ("deep.epub", fixtures::epub("Deep", "One", &nested_html("span", 100_000)), "could not be read safely"),
        ("bomb.pdf", inflating_pdf(64), "could not be read safely"),
        ("bomb.docx", inflating_docx(300), "the archive inflates to more than 256 MiB"),
    ];
    let mut ids = Vec::new();
    for (name, bytes, reason) in &cases {
        assert!(bytes.len() < 1_400_000, "{name} is {} bytes", bytes.len());
        ids.push((org.upload(&replica, name, bytes.clone()).await, *reason));
    }
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    let (s, v) = org.post(&path, json!({ "url": format!("{base}/deep") })).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    ids.push((v["results"][0]["knowledgeBaseID"].as_u64().unwrap(), "the page could not be read safely"));
    for (kb, reason) in ids {
        assert_unprocessable(&org, &replica, kb, reason).await;
    }
    // The server is the same process, still answering, and kept its memory.
    org.add_ready_text(&replica, "Still", "The server still works after hostile files.").await;
    stop.store(true, Ordering::Relaxed);
    let slowest = watcher.await.expect("watcher");
    assert!(slowest < Duration::from_secs(1), "a read took {slowest:?} during the hostile uploads");
    let (_, peak) = memory_kib(server.pid());
    assert!(peak < rss_before + 256 * 1024, "the server's peak RSS grew from {rss_before} KiB to {peak} KiB");
}

/// The pid of a child of process `parent` (an extraction in progress), if any.
fn child_of(parent: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|d| {
        let pid: u32 = d.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(d.path().join("stat")).ok()?;
        let ppid: u32 = stat.rsplit(')').next()?.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == parent).then_some(pid)
    })
}

/// Whether process `pid` has ended and waits for its parent to reap it.
fn is_zombie(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()) == Some("Z")
}

/// Waits until process `parent` runs a child; answers its pid.
async fn wait_child(parent: u32) -> u32 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(pid) = child_of(parent) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no extraction started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_job_interrupted_by_crashes_is_given_up_and_the_server_always_starts() {
    // Deep <div>s take minutes to parse: each start's extraction is cut by a kill -9.
    let slow = nested_html("div", 100_000).into_bytes();
    let flags = ["--extract-cpu-seconds", "600"];
    let server = Server::start_with(&flags);
    let org = server.new_org("Crash").await;
    let replica = org.create_replica("kb").await;
    let kb = org.upload(&replica, "slow.html", slow).await;
    let mut server = server;
    for crash in 1..=4 {
        let child = wait_child(server.pid()).await;
        let dir: DataDir = server.kill9();
        let deadline = Instant::now() + PATIENCE;
        while std::path::Path::new(&format!("/proc/{child}/stat")).exists() && !is_zombie(child) {
            assert!(Instant::now() < deadline, "the extraction outlived its server");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let report: Value = serde_json::from_slice(&dir.cli(&["check"]).stdout).expect("JSON report");
        assert_eq!(report["interrupted_jobs"], json!([[kb, crash]]), "{report}");
        server = Server::start_in(dir, &flags);
    }
    let org = org.at(&server);
    let entry = assert_unprocessable(&org, &replica, kb, "processing was interrupted 4 times").await;
    assert!(entry["error"]["message"].as_str().unwrap().contains("add the document again"), "{entry}");
    let out = server.dir().cli(&["check"]);
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["interrupted_jobs"], json!([]), "{report}");
    org.add_ready_text(&replica, "After", "Ingestion goes on after the poison job.").await;
}

#[tokio::test]
async fn one_organizations_queue_does_not_hold_another_organizations_upload() {
    let mut pages = HashMap::new();
    let fast: Vec<String> = (0..64).map(|i| format!("/page{i}")).collect();
    for path in &fast {
        let html =
            format!("<html><body><article><p>Page {path} of the catalogue, about lamps.</p></article></body></html>");
        pages.insert(&*path.clone().leak(), Page::html(&html));
    }
    pages.insert("/slow", Page::html("<html><body><p>Slow.</p></body></html>").delayed(Duration::from_secs(25)));
    let base = fixtures::web_server(pages).await;
    let server = Server::start_with(&["--allow-private-urls"]);
    let (busy, other) = (server.new_org("Busy").await, server.new_org("Other").await);
    let busy_replica = busy.create_replica("busy").await;
    let path = format!("/v1/replicas/{busy_replica}/knowledge-base");
    let mut refreshed = Vec::new();
    for page in &fast {
        let (s, v) = busy.post(&path, json!({ "url": format!("{base}{page}"), "autoRefresh": true })).await;
        assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
        refreshed.push(v["results"][0]["knowledgeBaseID"].as_u64().unwrap());
    }
    for kb in refreshed {
        busy.wait_ready(&busy_replica, kb).await;
    }
    // 64 refresh jobs not due for a day, then a page that takes 25 s to answer.
    let (_, v) = busy.post(&path, json!({ "url": format!("{base}/slow") })).await;
    let slow = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    let started = Instant::now();
    let other_replica = other.create_replica("other").await;
    let kb = other.upload(&other_replica, "note.txt", b"The other organization's note about lamps.".to_vec()).await;
    other.wait_ready(&other_replica, kb).await;
    let (s, entry) = busy.get(&format!("{path}/{slow}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(entry["status"], json!("NEW"), "the slow page settled before the other upload: {entry}");
    eprintln!("the other organization's upload was READY {:?} after the slow page was queued", started.elapsed());
}

#[tokio::test]
async fn a_clean_stop_during_an_extraction_does_not_count_against_the_job() {
    let flags = ["--extract-cpu-seconds", "600"];
    let server = Server::start_with(&flags);
    let org = server.new_org("Stop").await;
    let replica = org.create_replica("kb").await;
    let kb = org.upload(&replica, "slow.html", nested_html("div", 100_000).into_bytes()).await;
    wait_child(server.pid()).await;
    let (status, dir) = server.stop();
    assert!(status.success(), "{status}");
    let report: Value = serde_json::from_slice(&dir.cli(&["check"]).stdout).expect("JSON report");
    assert_eq!(report["interrupted_jobs"], json!([]), "{report}");
    let server = Server::start_in(dir, &flags);
    let (s, entry) = org.at(&server).get(&format!("/v1/replicas/{replica}/knowledge-base/{kb}")).await;
    assert_eq!((s, &entry["status"]), (StatusCode::OK, &json!("FILE_UPLOADED")), "{entry}");
}
