//! Real documents made in the tests (PDF by lopdf, DOCX by docx-rs, EPUB by rbook) and a
//! loopback web server, for driving the knowledge-base pipeline end to end.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A one-page PDF whose text is `lines` (Helvetica, one line each).
pub fn pdf(lines: &[&str]) -> Vec<u8> {
    pdf_pages(&[lines])
}

/// A PDF of one page per item of `pages`, each showing its lines (Helvetica, one line each).
pub fn pdf_pages(pages: &[&[&str]]) -> Vec<u8> {
    use lopdf::content::{Content, Operation};
    use lopdf::{dictionary, Document, Object, Stream};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! { "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica" });
    let resources_id = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font_id } });
    let mut page_ids = Vec::new();
    for lines in pages {
        let mut ops = vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 11.into()]),
            Operation::new("TL", vec![16.into()]),
            Operation::new("Td", vec![50.into(), 780.into()]),
        ];
        for line in *lines {
            ops.push(Operation::new("Tj", vec![Object::string_literal(*line)]));
            ops.push(Operation::new("T*", vec![]));
        }
        ops.push(Operation::new("ET", vec![]));
        let content = Content { operations: ops };
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.encode().expect("pdf content")));
        page_ids.push(doc.add_object(dictionary! { "Type" => "Page", "Parent" => pages_id, "Contents" => content_id }));
    }
    finish_pdf(doc, pages_id, &page_ids, resources_id.into())
}

/// Saves `doc` with its pages `page_ids` under the page tree `pages_id` (A4, `resources`
/// inherited by the pages).
pub fn finish_pdf(
    mut doc: lopdf::Document,
    pages_id: lopdf::ObjectId,
    page_ids: &[lopdf::ObjectId],
    resources: lopdf::Object,
) -> Vec<u8> {
    use lopdf::{dictionary, Object};
    let pages = dictionary! {
        "Type" => "Pages",
        "Kids" => page_ids.iter().map(|id| Object::from(*id)).collect::<Vec<_>>(),
        "Count" => page_ids.len() as i64,
        "Resources" => resources,
        "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
    };
    doc.objects.insert(pages_id, Object::Dictionary(pages));
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    doc.save_to(&mut out).expect("pdf save");
    out
}

/// A DOCX with a `Heading1` paragraph and body paragraphs.
pub fn docx(heading: &str, paragraphs: &[&str]) -> Vec<u8> {
    use docx_rs::{Docx, Paragraph, Run};
    let mut d = Docx::new().add_paragraph(Paragraph::new().add_run(Run::new().add_text(heading)).style("Heading1"));
    for p in paragraphs {
        d = d.add_paragraph(Paragraph::new().add_run(Run::new().add_text(*p)));
    }
    let mut out = std::io::Cursor::new(Vec::new());
    d.build().pack(&mut out).expect("docx pack");
    out.into_inner()
}

/// An EPUB 3 book with one chapter whose XHTML body is `body`.
pub fn epub(title: &str, chapter: &str, body: &str) -> Vec<u8> {
    use rbook::epub::EpubChapter;
    rbook::Epub::builder()
        .identifier("urn:replicad:test")
        .title(title)
        .language("en")
        .chapter(EpubChapter::new(chapter).xhtml_body(body))
        .build()
        .write()
        .to_vec()
        .expect("epub write")
}

/// A response of the loopback web server.
#[derive(Clone)]
pub struct Page {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub location: Option<String>,
    /// Time the server waits before it answers.
    pub delay: std::time::Duration,
}

impl Page {
    pub fn html(body: &str) -> Page {
        let body = body.as_bytes().to_vec();
        Page { status: 200, content_type: "text/html; charset=utf-8", body, location: None, delay: Default::default() }
    }

    pub fn redirect(to: &str) -> Page {
        let location = Some(to.to_string());
        Page { status: 301, content_type: "text/plain", body: Vec::new(), location, delay: Default::default() }
    }

    /// The same page, answered only after `delay`.
    pub fn delayed(self, delay: std::time::Duration) -> Page {
        Page { delay, ..self }
    }
}

/// Pages by path, which a test may change while the server runs.
pub type Pages = Arc<Mutex<HashMap<&'static str, Page>>>;

/// Serves `pages` by path on 127.0.0.1 (see [`web_server_shared`]).
pub async fn web_server(pages: HashMap<&'static str, Page>) -> String {
    web_server_shared(Arc::new(Mutex::new(pages))).await
}

/// Serves `pages` by path on 127.0.0.1 (HTTP/1.1, one request per connection; unknown paths
/// 404); returns the base URL. Runs until the test's runtime ends.
pub async fn web_server_shared(pages: Pages) -> String {
    web_server_logged(pages).await.0
}

/// [`web_server_shared`], with the path of every request it was asked, in order.
pub async fn web_server_logged(pages: Pages) -> (String, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (pages, log) = (pages.clone(), log.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                log.lock().unwrap().push(path.clone());
                let page = pages.lock().unwrap().get(path.as_str()).cloned().unwrap_or(Page {
                    status: 404,
                    content_type: "text/plain",
                    body: b"not found".to_vec(),
                    location: None,
                    delay: Default::default(),
                });
                tokio::time::sleep(page.delay).await;
                let location = page.location.map(|l| format!("Location: {l}\r\n")).unwrap_or_default();
                let header = format!(
                    "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\n{location}Connection: close\r\n\r\n",
                    page.status,
                    page.content_type,
                    page.body.len()
                );
                let _ = stream.write_all(header.as_bytes()).await;
                let _ = stream.write_all(&page.body).await;
            });
        }
    });
    (base, asked)
}
