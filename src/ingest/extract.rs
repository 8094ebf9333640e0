//! Text extraction from uploaded files and fetched pages (docs/decisions.md "Knowledge base"; the
//! formats listed by `GET /v1/knowledge-base/file-types` are exactly `formats::FORMATS`).
//!
//! Every extractor is a maintained library: `pdf-extract` (PDF), `docx-rs` (DOCX), `rbook`
//! (EPUB), `dom_smoothie` (HTML main content, readability.js port), `pulldown-cmark`
//! (Markdown), `csv`, `serde_json`; legacy text encodings are recognised by `chardetng` and
//! decoded by `encoding_rs`. Output is plain text in which headings are Markdown `#` lines, so
//! the chunker keeps every section under its heading path. Which format a file is: see
//! [`super::formats`].

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::archive;
use super::formats::Format;
use crate::text::pages::PAGE_BREAK;

/// Most characters of text one entry holds: a text entry's limit, and the cap on what is
/// extracted from a file or page (a document that inflates to more is refused, not cut).
pub const MAX_TEXT_CHARS: usize = 2_000_000;

/// Text extracted from a document: Markdown-style headings, paragraphs split by blank lines.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Extracted {
    pub text: String,
    /// The document's own title, when it states one (HTML `<title>`, EPUB metadata, …).
    pub title: Option<String>,
}

/// Why a document has no text; its message is the entry's `error.message`. Serialised, it is
/// what the extraction child answers its parent with (`super::sandbox::child::Answer`); a
/// variant holding a `String` holds the library's own message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ExtractError {
    /// No bytes at all.
    #[error("the file is empty")]
    Empty,
    /// A library panicked on the file of this format (its name, as `formats` lists it).
    #[error("the {0} file could not be read (it may be corrupt)")]
    Corrupt(String),
    /// More than [`MAX_TEXT_CHARS`] characters of text (their count).
    #[error(
        "the document holds {0} characters of text, more than the {MAX_TEXT_CHARS} characters one entry may \
         hold; split it into smaller files"
    )]
    TooLong(usize),
    /// Only whitespace was extracted from the file of this format.
    #[error("no text found in the {0} file (it may be empty, or contain only images or scans)")]
    NoText(String),
    /// The HTML parser refused the page.
    #[error("the HTML could not be parsed: {0}")]
    Html(String),
    /// Neither the main content nor the raw body of an HTML page could be read.
    #[error("no readable content in the HTML page: {0}")]
    Unreadable(String),
    /// A PDF with a password.
    #[error("the PDF is encrypted; upload a copy without a password")]
    EncryptedPdf,
    /// A file in a known format that its library could not read (the format's name).
    #[error("the {format} file could not be read: {message}")]
    Unparsable { format: String, message: String },
    /// A DOCX that is encrypted or is an old binary `.doc` (an OLE compound file).
    #[error("the document is encrypted or in the old binary .doc format; save it as .docx")]
    OleDocument,
    /// An EPUB chapter its library could not read.
    #[error("an EPUB chapter could not be read: {0}")]
    EpubChapter(String),
    /// A zipped format (DOCX, EPUB) whose archive is refused ([`archive::ArchiveError`]'s
    /// message: a decompression bomb, an inconsistent or unreadable archive).
    #[error("{0}")]
    Archive(String),
    /// The child could not read the document from its parent.
    #[error("the document could not be received: {0}")]
    NotReceived(String),
}

impl From<archive::ArchiveError> for ExtractError {
    fn from(e: archive::ArchiveError) -> Self {
        ExtractError::Archive(e.to_string())
    }
}

/// [`ExtractError::Unparsable`] of a `format` ("PDF", "DOCX", …) with the library's error.
fn unparsable(format: &str) -> impl Fn(&dyn std::fmt::Display) -> ExtractError + '_ {
    move |e| ExtractError::Unparsable { format: format.to_string(), message: e.to_string() }
}

/// Extracts the text of `bytes` in `format`. Errors ([`ExtractError`]) are for the entry's
/// `error` (the file is corrupt, encrypted, empty, inflates too far, holds more than
/// [`MAX_TEXT_CHARS`], …); a panic inside a library becomes [`ExtractError::Corrupt`]. This
/// runs the parsers in the calling process: the server calls it only through
/// `super::sandbox`.
pub fn extract(format: Format, bytes: &[u8]) -> Result<Extracted, ExtractError> {
    if bytes.is_empty() {
        return Err(ExtractError::Empty);
    }
    let result = catch_unwind(AssertUnwindSafe(|| match format {
        Format::Text => Ok(Extracted { text: decode_text(bytes), title: None }),
        Format::Markdown => Ok(Extracted { text: markdown_to_text(&decode_text(bytes)), title: None }),
        Format::Html => html_to_text(&decode_text(bytes)),
        Format::Pdf => pdf_to_text(bytes),
        Format::Docx => docx_to_text(bytes),
        Format::Csv => csv_to_text(bytes),
        Format::Json => json_to_text(bytes),
        Format::Epub => epub_to_text(bytes),
    }));
    let extracted = result.unwrap_or_else(|_| Err(ExtractError::Corrupt(format.info().name.to_string())))?;
    let chars = extracted.text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(ExtractError::TooLong(chars));
    }
    if extracted.text.trim().is_empty() {
        return Err(ExtractError::NoText(format.info().name.to_string()));
    }
    Ok(extracted)
}

/// Decodes text: a BOM wins, then UTF-8, then the encoding `chardetng` guesses.
pub fn decode_text(bytes: &[u8]) -> String {
    if let Some((enc, bom)) = encoding_rs::Encoding::for_bom(bytes) {
        return enc.decode_without_bom_handling(&bytes[bom..]).0.into_owned();
    }
    if let Ok(s) = std::str::from_utf8(bytes) {
        return s.to_string();
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    detector.feed(bytes, true);
    detector.guess(None, chardetng::Utf8Detection::Allow).decode_without_bom_handling(bytes).0.into_owned()
}

/// Markdown to text: headings stay `#` lines; emphasis, links and HTML markup are dropped;
/// code blocks are kept indented (the generator quotes prose, not code).
pub fn markdown_to_text(md: &str) -> String {
    use pulldown_cmark::{Event, Parser, Tag, TagEnd};
    let mut out = String::new();
    let mut in_code = false;
    for event in Parser::new(md) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                out.push_str("\n\n");
                out.push_str(&"#".repeat(level as usize));
                out.push(' ');
            }
            Event::Start(Tag::CodeBlock(_)) => {
                in_code = true;
                out.push_str("\n\n");
            }
            // The block ends with its last line's newline: one more makes the blank line that
            // keeps the next paragraph out of the code.
            Event::End(TagEnd::CodeBlock) => {
                in_code = false;
                out.push('\n');
            }
            Event::Start(Tag::Item) => out.push_str("\n- "),
            Event::End(TagEnd::Heading(_) | TagEnd::Paragraph | TagEnd::List(_) | TagEnd::BlockQuote(_)) => {
                out.push_str("\n\n")
            }
            Event::Text(t) if in_code => t.lines().for_each(|l| {
                out.push_str("    ");
                out.push_str(l);
                out.push('\n');
            }),
            Event::Text(t) | Event::Code(t) => out.push_str(&t),
            // a line break stays one: lines written one by one ("Founded: 2016", a table's rows)
            // stay lines, and `text::blocks` re-flows the lines of wrapped prose
            Event::SoftBreak => out.push('\n'),
            Event::HardBreak => out.push('\n'),
            _ => {}
        }
    }
    tidy(&out)
}

/// HTML to text: the main content (readability.js rules via `dom_smoothie`) as Markdown, or the
/// whole body when no article stands out.
pub fn html_to_text(html: &str) -> Result<Extracted, ExtractError> {
    use dom_smoothie::{Config, ParsePolicy, Readability, TextMode};
    let config = Config { text_mode: TextMode::Markdown, char_threshold: 200, ..Default::default() };
    let mut r = Readability::new(html, None, Some(config)).map_err(|e| ExtractError::Html(e.to_string()))?;
    let article = r.parse().or_else(|_| r.parse_with_policy(ParsePolicy::Raw));
    let article = article.map_err(|e| ExtractError::Unreadable(e.to_string()))?;
    let title = Some(article.title.trim().to_string()).filter(|t| !t.is_empty());
    Ok(Extracted { text: tidy(&markdown_to_text(&article.text_content)), title })
}

fn pdf_to_text(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    let pages = pdf_extract::extract_text_from_mem_by_pages(bytes).map_err(|e| {
        let msg = e.to_string();
        if msg.to_ascii_lowercase().contains("encrypt") || msg.to_ascii_lowercase().contains("decrypt") {
            ExtractError::EncryptedPdf
        } else {
            unparsable("PDF")(&msg)
        }
    })?;
    // each page tidied on its own, so that the page break between them stays (`text::pages`)
    let pages: Vec<String> = pages.iter().map(|p| tidy(&reflow_pdf_page(p))).filter(|p| !p.is_empty()).collect();
    Ok(Extracted { text: pages.join(PAGE_BREAK), title: None })
}

/// PDF text comes as one line per printed line: join lines into paragraphs (a blank line ends
/// a paragraph).
fn reflow_pdf_page(page: &str) -> String {
    let mut out = String::new();
    for line in page.lines().map(str::trim) {
        if line.is_empty() {
            out.push_str("\n\n");
            continue;
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push(' ');
        }
        out.push_str(line);
    }
    out
}

fn docx_to_text(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
        return Err(ExtractError::OleDocument);
    }
    archive::check_inflated(bytes)?;
    let docx = docx_rs::read_docx(bytes).map_err(|e| unparsable("DOCX")(&e))?;
    let mut out = String::new();
    for child in &docx.document.children {
        match child {
            docx_rs::DocumentChild::Paragraph(p) => push_paragraph(&mut out, p),
            docx_rs::DocumentChild::Table(t) => push_table(&mut out, t),
            _ => {}
        }
    }
    Ok(Extracted { text: tidy(&out), title: None })
}

fn push_paragraph(out: &mut String, p: &docx_rs::Paragraph) {
    let text = p.raw_text();
    if text.trim().is_empty() {
        return;
    }
    let style = p.property.style.as_ref().map(|s| s.val.to_ascii_lowercase()).unwrap_or_default();
    let level = match style.as_str() {
        "title" => Some(1),
        s => s.strip_prefix("heading").and_then(|n| n.parse::<usize>().ok()).map(|n| n.clamp(1, 6)),
    };
    if let Some(level) = level {
        out.push_str(&"#".repeat(level));
        out.push(' ');
    }
    out.push_str(text.trim());
    out.push_str("\n\n");
}

fn push_table(out: &mut String, t: &docx_rs::Table) {
    for docx_rs::TableChild::TableRow(row) in &t.rows {
        let cells: Vec<String> = row
            .cells
            .iter()
            .map(|docx_rs::TableRowChild::TableCell(c)| {
                c.children
                    .iter()
                    .filter_map(|x| match x {
                        docx_rs::TableCellContent::Paragraph(p) => Some(p.raw_text()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        out.push_str(&cells.join(" | "));
        out.push('\n');
    }
    out.push('\n');
}

/// CSV: one paragraph per row, `header: value; header: value`.
fn csv_to_text(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    let text = decode_text(bytes);
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| unparsable("CSV")(&e))?.clone();
    let mut out = String::new();
    for record in reader.records() {
        let record = record.map_err(|e| unparsable("CSV")(&e))?;
        let fields: Vec<String> = record
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(i, v)| match headers.get(i) {
                Some(h) if !h.is_empty() => format!("{h}: {v}"),
                _ => v.to_string(),
            })
            .collect();
        out.push_str(&fields.join("; "));
        out.push_str("\n\n");
    }
    Ok(Extracted { text: tidy(&out), title: None })
}

/// JSON: one line per leaf, `path.to.key: value`; a paragraph per element of a top-level array.
fn json_to_text(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| unparsable("JSON")(&e))?;
    let mut out = String::new();
    match &value {
        serde_json::Value::Array(items) => items.iter().for_each(|v| {
            flatten_json(&mut out, "", v);
            out.push('\n');
        }),
        v => flatten_json(&mut out, "", v),
    }
    Ok(Extracted { text: tidy(&out), title: None })
}

fn flatten_json(out: &mut String, path: &str, v: &serde_json::Value) {
    use serde_json::Value;
    let join = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    match v {
        Value::Object(map) => map.iter().for_each(|(k, v)| flatten_json(out, &join(k), v)),
        Value::Array(items) => {
            items.iter().enumerate().for_each(|(i, v)| flatten_json(out, &format!("{path}[{i}]"), v))
        }
        Value::Null => {}
        Value::String(s) => out.push_str(&format!("{path}: {s}\n")),
        other => out.push_str(&format!("{path}: {other}\n")),
    }
}

fn epub_to_text(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    archive::check_inflated(bytes)?;
    let epub = rbook::Epub::read(Cursor::new(bytes.to_vec())).map_err(|e| unparsable("EPUB")(&e))?;
    let title = epub.metadata().title().map(|t| t.value().to_string());
    let mut out = String::new();
    for content in epub.reader() {
        let content = content.map_err(|e| ExtractError::EpubChapter(e.to_string()))?;
        if let Ok(chapter) = html_to_text(content.content()) {
            out.push_str(&chapter.text);
            out.push_str("\n\n");
        }
    }
    Ok(Extracted { text: tidy(&out), title })
}

/// Trims lines' trailing space and collapses runs of blank lines to one.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines().map(str::trim_end) {
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_keeps_headings_and_drops_markup() {
        let t =
            markdown_to_text("# Title\n\nSome *emphasis* and a [link](http://x.y).\n\n## Part\n\n```\ncode()\n```\n");
        assert_eq!(t, "# Title\n\nSome emphasis and a link.\n\n## Part\n\n    code()");
    }

    #[test]
    fn a_paragraph_right_after_a_fenced_block_is_prose() {
        let t = markdown_to_text("Run it:\n\n```sh\nmake all\n```\nThen read the log.\n");
        assert_eq!(t, "Run it:\n\n    make all\n\nThen read the log.");
    }

    #[test]
    fn text_past_the_entry_limit_is_refused() {
        let long = "word ".repeat(MAX_TEXT_CHARS / 5 + 1);
        let err = extract(Format::Text, long.as_bytes()).unwrap_err();
        assert_eq!(err, ExtractError::TooLong(MAX_TEXT_CHARS + 5));
        assert!(err.to_string().contains("more than the 2000000 characters one entry may hold"), "{err}");
    }

    #[test]
    fn legacy_encodings_are_decoded() {
        let latin1 = b"caf\xe9 cr\xe8me br\xfbl\xe9e, d\xe9j\xe0 vu, na\xefve fa\xe7ade";
        assert!(decode_text(latin1).contains("café crème"));
    }

    #[test]
    fn csv_and_json_become_lines() {
        let csv = extract(Format::Csv, b"name,capital\nFrance,Paris\nPeru,Lima\n").unwrap();
        assert_eq!(csv.text, "name: France; capital: Paris\n\nname: Peru; capital: Lima");
        let json = extract(Format::Json, br#"{"a": {"b": [1, "x"]}, "c": null}"#).unwrap();
        assert_eq!(json.text, "a.b[0]: 1\na.b[1]: x");
    }

    #[test]
    fn corrupt_and_empty_files_are_errors_not_panics() {
        assert!(extract(Format::Pdf, b"%PDF-1.4 garbage").is_err());
        assert!(extract(Format::Docx, b"PK\x03\x04 garbage").is_err());
        assert!(extract(Format::Epub, b"PK\x03\x04 garbage").is_err());
        assert!(extract(Format::Text, b"").is_err());
        assert!(extract(Format::Text, b"   \n\n ").is_err());
    }
}
