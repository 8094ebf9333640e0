//! Fetching the page of a `website` entry (docs/decisions.md "Knowledge base": `url`).
//!
//! One `reqwest` client with: a connect timeout and an overall timeout, at most
//! [`MAX_REDIRECTS`] redirects, a body cap (the download stops past `max_bytes`), and — unless
//! the operator allows it with `--allow-private-urls` — no connection to an address that is not
//! on the public Internet ([`is_public`]: every range of the IANA IPv4 and IPv6 special-purpose
//! registries that is not globally reachable), checked on the addresses DNS returns (so a name
//! that resolves to 127.0.0.1 is refused as well as the literal) and on every redirect.
//!
//! **Environment proxies are ignored** (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`: the client
//! is built with `no_proxy()`). Through a proxy the fetcher never sees the address it reaches:
//! the proxy resolves the name itself, so a check on our own resolution could be answered
//! differently (DNS rebinding) and the proxy might reach the server's own network for us. The
//! address check is only sound on the connection we make, so the fetcher always connects
//! directly; a deployment whose egress must go through a proxy has to enforce this policy in
//! that proxy.

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

/// IPv4 ranges that are not globally reachable: the IANA IPv4 special-purpose registry (RFC
/// 6890 and its updates) plus multicast and the deprecated 6to4 relay anycast. `192.0.0.0/24`
/// is refused whole (its two globally reachable anycast addresses serve no web pages).
const V4_NOT_PUBLIC: &[([u8; 4], u32)] = &[
    ([0, 0, 0, 0], 8),       // "this network"
    ([10, 0, 0, 0], 8),      // private
    ([100, 64, 0, 0], 10),   // shared address space (carrier-grade NAT)
    ([127, 0, 0, 0], 8),     // loopback
    ([169, 254, 0, 0], 16),  // link-local (cloud metadata services)
    ([172, 16, 0, 0], 12),   // private
    ([192, 0, 0, 0], 24),    // IETF protocol assignments (DS-Lite, NAT64 discovery, …)
    ([192, 0, 2, 0], 24),    // documentation (TEST-NET-1)
    ([192, 88, 99, 0], 24),  // 6to4 relay anycast (deprecated)
    ([192, 168, 0, 0], 16),  // private
    ([198, 18, 0, 0], 15),   // benchmarking
    ([198, 51, 100, 0], 24), // documentation (TEST-NET-2)
    ([203, 0, 113, 0], 24),  // documentation (TEST-NET-3)
    ([224, 0, 0, 0], 4),     // multicast
    ([240, 0, 0, 0], 4),     // reserved, and the limited broadcast 255.255.255.255
];

/// Ranges inside the IPv6 global unicast space `2000::/3` that are not globally reachable
/// (IANA IPv6 special-purpose registry). `2001::/23` (IETF protocol assignments: Teredo,
/// benchmarking, ORCHID, …) is refused whole, as no web page is served from it.
const V6_NOT_PUBLIC: &[(u128, u32)] = &[
    (0x2001_0000 << 96, 23), // IETF protocol assignments
    (0x2001_0db8 << 96, 32), // documentation
    (0x3fff_0000 << 96, 20), // documentation (RFC 9637)
];

fn in_range(addr: u128, bits: u32, net: u128, prefix: u32) -> bool {
    prefix == 0 || (addr ^ net) >> (bits - prefix) == 0
}

/// Whether `ip` is an address on the public Internet. IPv4: outside [`V4_NOT_PUBLIC`]. IPv6:
/// inside the global unicast space `2000::/3` and outside [`V6_NOT_PUBLIC`], so loopback,
/// unspecified, IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), discard-only,
/// ULA (`fc00::/7`), link-local, site-local (`fec0::/10`), multicast, SRv6 (`5f00::/16`) and
/// every still unassigned range are refused. Two prefixes embed the IPv4 address they reach
/// and take its verdict: 6to4 (`2002::/16`, the address in bits 16–47) and the well-known NAT64
/// prefix (`64:ff9b::/96`, the last 32 bits: a host behind DNS64 reaches every IPv4-only site
/// through it, so refusing it whole would refuse the IPv4 Internet there). The local-use NAT64
/// prefix `64:ff9b:1::/48` is refused.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let addr = u32::from(v4);
            !V4_NOT_PUBLIC
                .iter()
                .any(|(net, prefix)| in_range(addr.into(), 32, u32::from_be_bytes(*net).into(), *prefix))
        }
        IpAddr::V6(v6) => {
            let addr = u128::from(v6);
            let embedded = |shift: u32| IpAddr::V4(std::net::Ipv4Addr::from((addr >> shift) as u32));
            if in_range(addr, 128, 0x0064_ff9b << 96, 96) {
                return is_public(embedded(0));
            }
            if in_range(addr, 128, 0x2002 << 112, 16) {
                return is_public(embedded(80));
            }
            in_range(addr, 128, 0x2000 << 112, 3)
                && !V6_NOT_PUBLIC.iter().any(|(net, prefix)| in_range(addr, 128, *net, *prefix))
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

/// Why a URL is not fetched or followed ([`check_fetchable`]); the text is for the entry's
/// `error.message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    /// Another scheme than `http` or `https`.
    #[error("only http and https URLs can be fetched, not {0}")]
    Scheme(String),
    /// No host.
    #[error("the URL has no host")]
    NoHost,
    /// A literal address that is not public (unless `--allow-private-urls`).
    #[error("the URL points to a private or local address, which this server does not fetch")]
    Private,
}

/// Checks a URL before it is fetched or followed: http(s), a host, and a public literal address.
pub fn check_fetchable(url: &Url, allow_private: bool) -> Result<(), UrlRefused> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(UrlRefused::Scheme(url.scheme().to_string()));
    }
    let ip = match url.host() {
        None => return Err(UrlRefused::NoHost),
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        Some(url::Host::Domain(_)) => None,
    };
    if !allow_private && ip.is_some_and(|ip| !is_public(ip)) {
        return Err(UrlRefused::Private);
    }
    Ok(())
}

impl Fetcher {
    /// A client; `allow_private` lifts the address checks, `max_bytes` caps a body (the process's
    /// TLS provider must be installed: `serve` does it). Errors: the TLS set-up failed.
    pub fn new(allow_private: bool, max_bytes: u64) -> reqwest::Result<Fetcher> {
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
            .no_proxy()
            .redirect(policy);
        if !allow_private {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        let client = builder.build()?;
        Ok(Fetcher { client, allow_private, max_bytes })
    }

    /// Fetches `url` (GET). Errors say why in words fit for the entry's `error.message`.
    pub async fn fetch(&self, url: &str) -> Result<Fetched, FetchError> {
        let parsed = Url::parse(url).map_err(|e| FetchError::permanent(format!("invalid URL: {e}")))?;
        check_fetchable(&parsed, self.allow_private).map_err(|e| FetchError::permanent(e.to_string()))?;
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

    fn refused(ips: &[&str]) {
        for ip in ips {
            assert!(!is_public(ip.parse().unwrap()), "{ip} is taken for public");
        }
    }

    fn allowed(ips: &[&str]) {
        for ip in ips {
            assert!(is_public(ip.parse().unwrap()), "{ip} is taken for non-public");
        }
    }

    #[test]
    fn public_addresses_are_public() {
        allowed(&["93.184.216.34", "8.8.8.8", "1.1.1.1", "223.255.255.255", "2606:4700:4700::1111", "2a00:1450::1"]);
        // AS112 and AMT anycast are globally reachable.
        allowed(&["192.31.196.1", "192.52.193.1", "192.175.48.1", "2620:4f:8000::1"]);
    }

    #[test]
    fn ipv4_this_network_private_and_loopback_are_not_public() {
        refused(&["0.0.0.0", "0.255.255.255", "10.0.0.0", "10.255.255.255", "127.0.0.1", "127.255.255.255"]);
        refused(&["172.16.0.1", "172.31.255.255", "192.168.0.0", "192.168.255.255"]);
        allowed(&["11.0.0.0", "172.15.255.255", "172.32.0.0", "192.169.0.0"]);
    }

    #[test]
    fn ipv4_shared_and_link_local_are_not_public() {
        refused(&["100.64.0.0", "100.127.255.255", "169.254.0.1", "169.254.169.254"]);
        allowed(&["100.63.255.255", "100.128.0.0", "169.253.255.255", "169.255.0.0"]);
    }

    #[test]
    fn ipv4_ietf_assignments_and_the_6to4_relay_are_not_public() {
        refused(&["192.0.0.0", "192.0.0.8", "192.0.0.170", "192.0.0.255", "192.88.99.1"]);
        allowed(&["192.0.1.0", "192.88.98.255"]);
    }

    #[test]
    fn ipv4_documentation_and_benchmarking_are_not_public() {
        refused(&["192.0.2.1", "198.51.100.7", "203.0.113.255", "198.18.0.0", "198.19.255.255"]);
        allowed(&["198.17.255.255", "198.20.0.0", "203.0.114.0"]);
    }

    #[test]
    fn ipv4_multicast_reserved_and_broadcast_are_not_public() {
        refused(&["224.0.0.1", "239.255.255.255", "240.0.0.1", "255.255.255.254", "255.255.255.255"]);
    }

    #[test]
    fn ipv6_outside_global_unicast_is_not_public() {
        refused(&["::", "::1", "100::1", "100:0:0:1::1", "5f00::1", "fc00::1", "fd12:3456::1"]);
        refused(&["fe80::1", "febf::1", "fec0::1", "feff::1", "ff02::1", "ff0e::1", "4000::1", "1fff::1"]);
    }

    #[test]
    fn ipv6_forms_of_ipv4_addresses_are_not_public() {
        // IPv4-compatible (deprecated) and IPv4-mapped, whatever the address inside.
        refused(&["::127.0.0.1", "::8.8.8.8", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "::ffff:0:10.0.0.1"]);
    }

    #[test]
    fn nat64_and_6to4_take_the_verdict_of_the_ipv4_address_inside() {
        refused(&["64:ff9b::127.0.0.1", "64:ff9b::10.0.0.1", "64:ff9b::169.254.169.254"]);
        refused(&["2002:7f00:1::1", "2002:a00:1::", "2002:c0a8:101::1", "2002:a9fe:a9fe::1"]);
        allowed(&["64:ff9b::8.8.8.8", "2002:808:808::1"]);
        // The local-use NAT64 prefix is refused whatever it embeds.
        refused(&["64:ff9b:1::8.8.8.8", "64:ff9b:1:ffff::1"]);
    }

    #[test]
    fn ipv6_ietf_assignments_and_documentation_are_not_public() {
        // Teredo, benchmarking, ORCHIDv2, all of 2001::/23; documentation 2001:db8::/32, 3fff::/20.
        refused(&["2001::1", "2001:0:4136:e378::1", "2001:2::1", "2001:20::1", "2001:1ff::1"]);
        refused(&["2001:db8::1", "2001:db8:ffff::1", "3fff::1", "3fff:fff::1"]);
        allowed(&["2001:200::1", "2001:db9::1", "3fff:1000::1"]);
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
        let ftp = check_fetchable(&Url::parse("ftp://example.com/a").unwrap(), false);
        assert_eq!(ftp, Err(UrlRefused::Scheme("ftp".into())));
        assert_eq!(check_fetchable(&Url::parse("http://127.0.0.1:8080/").unwrap(), false), Err(UrlRefused::Private));
        assert_eq!(check_fetchable(&Url::parse("http://[::1]/").unwrap(), false), Err(UrlRefused::Private));
        assert!(check_fetchable(&Url::parse("http://127.0.0.1:8080/").unwrap(), true).is_ok());
        assert!(check_fetchable(&Url::parse("https://example.com/doc").unwrap(), false).is_ok());
    }
}
