//! Static files compiled into the binary (the docs page, the chat widget): served gzipped to
//! clients that accept it (`Accept-Encoding`), the compressed form made once, on first use.

use std::io::Write;
use std::sync::OnceLock;

use bytes::Bytes;

use super::request::Req;
use super::response::Reply;

/// One static file: its bytes, its content type, and its gzip form made on first use.
pub struct Asset {
    bytes: &'static [u8],
    content_type: &'static str,
    gzipped: OnceLock<Bytes>,
}

impl Asset {
    /// A file of `content_type` (a full `Content-Type` value).
    pub const fn new(bytes: &'static [u8], content_type: &'static str) -> Asset {
        Asset { bytes, content_type, gzipped: OnceLock::new() }
    }

    /// 200 with the file, gzipped (`Content-Encoding: gzip`) when `req` accepts it, and
    /// `Vary: accept-encoding`; the caller adds its caching and security headers.
    pub fn reply(&self, req: &Req) -> Reply {
        let accepts_gzip = req
            .headers
            .get_all(hyper::header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(accepts_gzip_item);
        let reply = if accepts_gzip {
            let body = self.gzipped.get_or_init(|| gzip(self.bytes));
            Reply::raw(200, body.clone(), self.content_type).with_header("content-encoding", "gzip")
        } else {
            Reply::raw(200, Bytes::from_static(self.bytes), self.content_type)
        };
        reply.with_header("vary", "accept-encoding")
    }
}

/// Whether one `Accept-Encoding` item (`gzip`, `gzip;q=0.5`, `*`) allows gzip.
fn accepts_gzip_item(item: &str) -> bool {
    let mut parts = item.split(';').map(str::trim);
    let name = parts.next().unwrap_or("");
    let q = parts.find_map(|p| p.strip_prefix("q=")).map(|q| q.parse::<f32>().unwrap_or(0.0)).unwrap_or(1.0);
    (name.eq_ignore_ascii_case("gzip") || name == "*") && q > 0.0
}

fn gzip(bytes: &[u8]) -> Bytes {
    let mut e = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 3), flate2::Compression::default());
    let _ = e.write_all(bytes);
    Bytes::from(e.finish().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::accepts_gzip_item;

    #[test]
    fn gzip_is_accepted_unless_its_quality_is_zero() {
        assert!(accepts_gzip_item("gzip") && accepts_gzip_item(" GZIP;q=0.5") && accepts_gzip_item("*"));
        assert!(!accepts_gzip_item("gzip;q=0") && !accepts_gzip_item("br") && !accepts_gzip_item("deflate"));
    }
}
