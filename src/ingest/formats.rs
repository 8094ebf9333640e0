//! The formats replicad extracts text from, and how a file or page is recognised as one: the
//! single table behind `GET /v1/knowledge-base/file-types` and `ingest::extract`.

/// A format replicad extracts text from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Html,
    Pdf,
    Docx,
    Csv,
    Json,
    Epub,
}

/// One row of the file-type table: how a format is recognised and listed.
pub struct FormatInfo {
    pub format: Format,
    /// Short name kept with the entry (`pdf`, `docx`, …).
    pub name: &'static str,
    /// `mediaGroups[].label` of `GET /v1/knowledge-base/file-types`.
    pub group: &'static str,
    /// `mediaGroups[].mediaType`: one of [`MEDIA_TYPES`] (docs/decisions.md "Knowledge base").
    pub media_type: &'static str,
    pub mime_types: &'static [&'static str],
    pub extensions: &'static [&'static str],
    /// `production` (tested end to end) or `preview`.
    pub support: &'static str,
}

/// The values of `mediaGroups[].mediaType` (docs/decisions.md "Knowledge base").
pub const MEDIA_TYPES: &[&str] = &["document", "data", "image", "audio", "video", "ebook"];

/// Every extractable format, in the order `file-types` lists them.
pub const FORMATS: &[FormatInfo] = &[
    FormatInfo {
        format: Format::Pdf,
        name: "pdf",
        group: "Documents",
        media_type: "document",
        mime_types: &["application/pdf"],
        extensions: &["pdf"],
        support: "production",
    },
    FormatInfo {
        format: Format::Docx,
        name: "docx",
        group: "Documents",
        media_type: "document",
        mime_types: &["application/vnd.openxmlformats-officedocument.wordprocessingml.document"],
        extensions: &["docx"],
        support: "production",
    },
    FormatInfo {
        format: Format::Epub,
        name: "epub",
        group: "E-books",
        media_type: "ebook",
        mime_types: &["application/epub+zip"],
        extensions: &["epub"],
        support: "production",
    },
    FormatInfo {
        format: Format::Text,
        name: "text",
        group: "Text",
        media_type: "document",
        mime_types: &["text/plain"],
        extensions: &["txt", "text", "rst", "log"],
        support: "production",
    },
    FormatInfo {
        format: Format::Markdown,
        name: "markdown",
        group: "Text",
        media_type: "document",
        mime_types: &["text/markdown", "text/x-markdown"],
        extensions: &["md", "markdown"],
        support: "production",
    },
    FormatInfo {
        format: Format::Csv,
        name: "csv",
        group: "Data",
        media_type: "data",
        mime_types: &["text/csv"],
        extensions: &["csv"],
        support: "production",
    },
    FormatInfo {
        format: Format::Json,
        name: "json",
        group: "Data",
        media_type: "data",
        mime_types: &["application/json"],
        extensions: &["json"],
        support: "production",
    },
    FormatInfo {
        format: Format::Html,
        name: "html",
        group: "Web pages",
        media_type: "document",
        mime_types: &["text/html", "application/xhtml+xml"],
        extensions: &["html", "htm", "xhtml"],
        support: "production",
    },
];

impl Format {
    /// The table row of this format.
    pub fn info(self) -> &'static FormatInfo {
        FORMATS.iter().find(|f| f.format == self).unwrap_or(&FORMATS[0])
    }

    /// The format of an uploaded file named `name`: its extension, else media type `mime`, else
    /// its first bytes; `None` when nothing says which format it is.
    pub fn detect(name: &str, mime: Option<&str>, bytes: &[u8]) -> Option<Format> {
        by_extension(name).or_else(|| by_mime(mime)).or_else(|| sniff(bytes))
    }

    /// The format of a fetched page: the server's `Content-Type` first (a URL's extension often
    /// says nothing, `.php`, or lies), then the URL path's extension, then the first bytes.
    pub fn detect_fetched(path: &str, mime: Option<&str>, bytes: &[u8]) -> Option<Format> {
        by_mime(mime).or_else(|| by_extension(path)).or_else(|| sniff(bytes))
    }
}

fn by_extension(name: &str) -> Option<Format> {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
    FORMATS.iter().find(|f| f.extensions.contains(&ext.as_str())).map(|f| f.format)
}

fn by_mime(mime: Option<&str>) -> Option<Format> {
    let essence = mime?.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    FORMATS.iter().find(|f| f.mime_types.contains(&essence.as_str())).map(|f| f.format)
}

fn sniff(bytes: &[u8]) -> Option<Format> {
    let head = &bytes[..bytes.len().min(1024)];
    let lower = String::from_utf8_lossy(head).to_ascii_lowercase();
    if head.starts_with(b"%PDF-") {
        Some(Format::Pdf)
    } else if head.starts_with(b"PK\x03\x04") {
        if lower.contains("mimetypeapplication/epub+zip") {
            Some(Format::Epub)
        } else {
            Some(Format::Docx)
        }
    } else if lower.trim_start().starts_with("<!doctype html") || lower.contains("<html") {
        Some(Format::Html)
    } else if !head.contains(&0) {
        Some(Format::Text)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_by_extension_mime_and_magic() {
        assert_eq!(Format::detect("a.PDF", None, b""), Some(Format::Pdf));
        assert_eq!(Format::detect("notes", Some("text/markdown; charset=utf-8"), b""), Some(Format::Markdown));
        assert_eq!(Format::detect("blob", None, b"%PDF-1.7 ..."), Some(Format::Pdf));
        assert_eq!(Format::detect("blob", None, b"<!DOCTYPE html><html>"), Some(Format::Html));
        assert_eq!(Format::detect("blob", None, &[0, 159, 146, 150, 0]), None);
        assert_eq!(Format::detect_fetched("/index.php", Some("text/html; charset=utf-8"), b""), Some(Format::Html));
        assert_eq!(Format::detect_fetched("/report.pdf", Some("text/html"), b"<html>"), Some(Format::Html));
        assert_eq!(Format::detect_fetched("/report.pdf", Some("application/octet-stream"), b"x"), Some(Format::Pdf));
    }
}
