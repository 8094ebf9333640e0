//! Fetching the page of a `website` entry (DECISIONS.md "Knowledge base": `url`).
//!
//! One `reqwest` client with: a connect timeout and an overall timeout, at most
//! [`MAX_REDIRECTS`] redirects, a body cap (the download stops past `max_bytes`), and — unless
//! the operator allows it with `--allow-private-urls` — no connection to loopback, private,
//! link-local or otherwise non-public addresses, checked on the addresses DNS returns (so a name
//! that resolves to 127.0.0.1 is refused as well as the literal) and on every redirect.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::Url;

/// Most redirects followed for one fetch.
pub const MAX_REDIRECTS: usize = 5;
/// Time allowed to connect, in seconds.
const CONNECT_TIMEOUT_SECS: u64 = 10;
/// Time allowed for the whole fetch (headers and body), in seconds.
const TOTAL_TIMEOUT_SECS: u64 = 30;

/// What a fetch brought back.
pub struct Fetched {
    pub final_url: String,
    pub status: u16,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
}

/// Why a fetch failed: words for the entry's `error.message`, and whether to retry.
#[derive(Debug)]
pub struct FetchError {
    pub message: String,
    pub kind: FailureKind,
}

/// Whether a failed fetch (or extraction of what it brought) is worth retrying later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Timeouts, refused connections, 5xx and 429 answers: retried with backoff.
    Transient,
    /// Bad URLs, refused addresses, 4xx answers, oversized or unreadable pages: never retried.
    Permanent,
}

impl FetchError {
    /// A failure not worth retrying.
    pub fn permanent(message: impl Into<String>) -> FetchError {
        FetchError { message: message.into(), kind: FailureKind::Permanent }
    }

    fn transient(message: impl Into<String>) -> FetchError {
        FetchError { message: message.into(), kind: FailureKind::Transient }
    }

    /// Whether the fetch may succeed if tried again later.
    pub fn is_transient(&self) -> bool {
        self.kind == FailureKind::Transient
    }
}

/// The resolver's refusal of a name whose addresses are all non-public (never retried).
#[derive(Debug)]
struct NotPublic(String);

impl std::fmt::Display for NotPublic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves only to private or local addresses", self.0)
    }
}

impl std::error::Error for NotPublic {}

/// The HTTP client for knowledge-base URLs.
#[derive(Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    allow_private: bool,
    max_bytes: u64,
}

/// Whether `ip` is an address on the public Internet (not loopback, private, link-local,
/// shared, documentation, multicast, unspecified, …).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] == 0x2001 && s[1] == 0x0db8))
        }
    }
}

/// DNS through the system resolver, keeping only public addresses.
struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = addrs.into_iter().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(Box::new(NotPublic(host)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// Checks a URL before it is fetched or followed: http(s), a host, and a public literal address.
pub fn check_fetchable(url: &Url, allow_private: bool) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("only http and https URLs can be fetched, not {}", url.scheme()));
    }
    let ip = match url.host() {
        None => return Err("the URL has no host".into()),
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        Some(url::Host::Domain(_)) => None,
    };
    if !allow_private && ip.is_some_and(|ip| !is_public(ip)) {
        return Err("the URL points to a private or local address, which this server does not fetch".into());
    }
    Ok(())
}

impl Fetcher {
    /// A client; `allow_private` lifts the address checks, `max_bytes` caps a body (the process's
    /// TLS provider must be installed: `serve` does it).
    pub fn new(allow_private: bool, max_bytes: u64) -> Result<Fetcher, String> {
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else if let Err(e) = check_fetchable(attempt.url(), allow_private) {
                attempt.error(e)
            } else {
                attempt.follow()
            }
        });
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("replicad/", env!("CARGO_PKG_VERSION"), " (knowledge-base fetcher)"))
            .connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_SECS))
            .timeout(Duration::from_secs(TOTAL_TIMEOUT_SECS))
            .redirect(policy);
        if !allow_private {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        let client = builder.build().map_err(|e| format!("HTTP client: {e}"))?;
        Ok(Fetcher { client, allow_private, max_bytes })
    }

    /// Fetches `url` (GET). Errors say why in words fit for the entry's `error.message`.
    pub async fn fetch(&self, url: &str) -> Result<Fetched, FetchError> {
        let parsed = Url::parse(url).map_err(|e| FetchError::permanent(format!("invalid URL: {e}")))?;
        check_fetchable(&parsed, self.allow_private).map_err(FetchError::permanent)?;
        let response = self.client.get(parsed).send().await.map_err(|e| describe(&e))?;
        let status = response.status();
        if !status.is_success() {
            let message = format!("the server answered HTTP {status}");
            return Err(if status.is_server_error() || status.as_u16() == 429 {
                FetchError::transient(message)
            } else {
                FetchError::permanent(message)
            });
        }
        let final_url = response.url().to_string();
        let content_type =
            response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        if response.content_length().is_some_and(|n| n > self.max_bytes) {
            return Err(self.too_large());
        }
        let mut bytes = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            bytes.extend_from_slice(&chunk.map_err(|e| describe(&e))?);
            if bytes.len() as u64 > self.max_bytes {
                return Err(self.too_large());
            }
        }
        Ok(Fetched { final_url, status: status.as_u16(), content_type, bytes })
    }

    fn too_large(&self) -> FetchError {
        FetchError::permanent(format!("the page is larger than {} bytes", self.max_bytes))
    }
}

/// Words for a client error, without the error chain's internals; timeouts and connection
/// failures are transient, except a connection the resolver refused ([`NotPublic`]).
fn describe(e: &reqwest::Error) -> FetchError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let (mut deepest, mut not_public) = (e.to_string(), false);
    while let Some(s) = source {
        deepest = s.to_string();
        not_public |= s.is::<NotPublic>();
        source = s.source();
    }
    if e.is_timeout() {
        FetchError::transient("the server did not answer in time")
    } else if e.is_redirect() {
        FetchError::permanent(format!("redirect refused: {deepest}"))
    } else if e.is_connect() && not_public {
        FetchError::permanent(format!("could not connect: {deepest}"))
    } else if e.is_connect() {
        FetchError::transient(format!("could not connect: {deepest}"))
    } else {
        FetchError::transient(format!("the fetch failed: {deepest}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused_for_good() {
        crate::install_crypto_provider();
        let e = Fetcher::new(false, 1024).unwrap().fetch("http://localhost:9/").await.err().unwrap();
        assert_eq!(e.kind, FailureKind::Permanent, "{}", e.message);
        assert!(e.message.contains("private or local"), "{}", e.message);
    }

    #[test]
    fn urls_are_checked_before_fetching() {
        assert!(check_fetchable(&Url::parse("ftp://example.com/a").unwrap(), false).is_err());
        assert!(check_fetchable(&Url::parse("http://127.0.0.1:8080/").unwrap(), false).is_err());
        assert!(check_fetchable(&Url::parse("http://[::1]/").unwrap(), false).is_err());
        assert!(check_fetchable(&Url::parse("http://127.0.0.1:8080/").unwrap(), true).is_ok());
        assert!(check_fetchable(&Url::parse("https://example.com/doc").unwrap(), false).is_ok());
    }
}
