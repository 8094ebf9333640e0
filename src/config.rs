//! Server configuration: defaults ← environment (`REPLICAD_*`) ← flags, in one struct.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Flags of `replicad serve` (each also read from `REPLICAD_<FLAG>`).
#[derive(clap::Args, Clone, Debug)]
pub struct Config {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, env = "REPLICAD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory of the runtime state (store, search index, admin socket).
    #[arg(long, env = "REPLICAD_DATA_DIR", default_value = "replicad-data")]
    pub data_dir: PathBuf,
    /// On first start, make a demo organization (its API key is printed once, on stderr) and a
    /// sample replica whose knowledge base is the documentation in --sample-dir.
    #[arg(long, env = "REPLICAD_DEMO")]
    pub demo: bool,
    /// Documentation loaded into the demo replica (every *.txt file below it).
    #[arg(long, env = "REPLICAD_SAMPLE_DIR", default_value = "data/sample")]
    pub sample_dir: PathBuf,
    /// Largest request body in bytes, measured after gzip decompression.
    #[arg(long, env = "REPLICAD_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Most replicas one organization may have (429 `REPLICA_QUOTA_EXCEEDED` beyond).
    #[arg(long, env = "REPLICAD_MAX_REPLICAS_PER_ORG", default_value_t = 1000)]
    pub max_replicas_per_org: u64,
    /// Most knowledge-base entries one organization may have (429
    /// `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED` beyond).
    #[arg(long, env = "REPLICAD_MAX_KB_ENTRIES_PER_ORG", default_value_t = 10_000)]
    pub max_kb_entries_per_org: u64,
    /// Largest file accepted on a signed upload URL, in bytes.
    #[arg(long, env = "REPLICAD_MAX_UPLOAD_BYTES", default_value_t = 50 * 1024 * 1024)]
    pub max_upload_bytes: usize,
    /// Largest replica bundle imported (`replicad replicas import`, `POST /v1/replicas/import`),
    /// in bytes once inflated: counted while inflating, so a decompression bomb stops there.
    /// Over HTTP the archive as sent is also held to --max-upload-bytes.
    #[arg(long, env = "REPLICAD_MAX_BUNDLE_BYTES", default_value_t = 1 << 30)]
    pub max_bundle_bytes: u64,
    /// Largest page fetched for a `url` entry, in bytes.
    #[arg(long, env = "REPLICAD_MAX_FETCH_BYTES", default_value_t = 20 * 1024 * 1024)]
    pub max_fetch_bytes: u64,
    /// Address space of the child process that extracts one uploaded file or fetched page,
    /// in MiB; a document needing more ends `UNPROCESSABLE`.
    #[arg(long, env = "REPLICAD_EXTRACT_MEMORY_MIB", default_value_t = 1024)]
    pub extract_memory_mib: u64,
    /// CPU time of the child process that extracts one document, in seconds (its wall-clock
    /// limit is 10 s more); a document needing more ends `UNPROCESSABLE`.
    #[arg(long, env = "REPLICAD_EXTRACT_CPU_SECONDS", default_value_t = 120)]
    pub extract_cpu_seconds: u64,
    /// Ingestion jobs (fetch, extract, chunk) worked on at the same time, taken from each
    /// organization in turn.
    #[arg(long, env = "REPLICAD_INGEST_CONCURRENCY", default_value_t = 4)]
    pub ingest_concurrency: usize,
    /// Let `url` entries fetch loopback, private and link-local addresses (refused by default,
    /// so that API users cannot reach the server's own network).
    #[arg(long, env = "REPLICAD_ALLOW_PRIVATE_URLS")]
    pub allow_private_urls: bool,
    /// How often `website` entries with `autoRefresh` are fetched again (`24h`, `30m`, seconds).
    #[arg(long, env = "REPLICAD_KB_REFRESH_INTERVAL", default_value = "24h", value_parser = parse_duration)]
    pub kb_refresh_interval: u64,
    /// Base URL clients reach this server at (e.g. `https://kb.example.com`), used in the
    /// `signedURL` of file entries; by default `http://` + the request's `Host` header.
    #[arg(long, env = "REPLICAD_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Put the internal cause of a 500 in the body's `inner_exception` (for debugging only).
    #[arg(long, env = "REPLICAD_EXPOSE_INTERNAL_ERRORS")]
    pub expose_internal_errors: bool,
    /// Serve HTTPS with this certificate chain (PEM); requires --tls-key.
    #[arg(long, env = "REPLICAD_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert; requires --tls-cert.
    #[arg(long, env = "REPLICAD_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// An operator's model catalog (a copy of data/models.json whose entries may carry `route`
    /// and `vision`); the shipped catalog when absent.
    #[arg(long, env = "REPLICAD_MODELS")]
    pub models: Option<PathBuf>,
    /// The embedding models (`llm.embeddingModel`): a catalog file (`src/embed/catalog.rs`
    /// gives its shape) or one model directory in the Hugging Face / sentence-transformers
    /// layout. Absent: retrieval is BM25 alone.
    #[arg(long, env = "REPLICAD_EMBEDDING_MODELS")]
    pub embedding_models: Option<PathBuf>,
    /// The in-process embedding models' arithmetic: `auto` runs their linear layers on 8-bit
    /// weights where the CPU has AVX2 (vectors within cosine 0.995 of `f32`'s), `f32` forces
    /// `f32` everywhere (the vectors of earlier builds, bit for bit).
    #[arg(long, env = "REPLICAD_EMBEDDING_PRECISION", value_enum, default_value_t = crate::embed::Precision::Auto)]
    pub embedding_precision: crate::embed::Precision,
    /// A Hugging Face–compatible hub (`https://huggingface.co`) from which catalog entries naming
    /// a `hub` repository are fetched once into `DATA_DIR/models/ID` when missing. Absent:
    /// nothing is ever downloaded.
    #[arg(long, env = "REPLICAD_MODEL_HUB")]
    pub model_hub: Option<String>,
    /// Longest time knowledge-base changes may wait for the search index before `GET /readyz`
    /// answers 503 (`30s`, `2m`, seconds).
    #[arg(long, env = "REPLICAD_MAX_INDEX_LAG", default_value = "30s", value_parser = parse_duration)]
    pub max_index_lag: u64,
    /// Longest time a connection may go without a request in flight (`30s`, `1m`, seconds): from
    /// its opening, or from the end of its last response, to the complete headers of its next
    /// request (HTTP/1.1) or a new stream (HTTP/2). A connection that sends nothing, only the
    /// HTTP/2 preface, or headers too slowly is closed then; a request in flight is never cut.
    #[arg(long, env = "REPLICAD_HEADER_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub header_timeout: u64,
    /// Longest pause in a request's body (`30s`, `1m`, seconds): a body of which nothing arrives
    /// for this long is answered 408 `BODY_TIMEOUT` (a slow upload that keeps sending is fine).
    #[arg(long, env = "REPLICAD_BODY_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub body_timeout: u64,
    /// Longest time a client may take to complete the TLS handshake (`10s`, seconds).
    #[arg(long, env = "REPLICAD_TLS_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub tls_handshake_timeout: u64,
    /// At SIGTERM/SIGINT, longest wait for in-flight requests, then for background tasks to
    /// reach a safe point (`10s`, `1m`, seconds). A second signal exits at once.
    #[arg(long, env = "REPLICAD_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: u64,
    /// Serve `GET /metrics` (Prometheus text format) on the main listener to requests carrying
    /// `Authorization: Bearer TOKEN`; without it (and without --metrics-listen) there is no
    /// `/metrics`.
    #[arg(long, env = "REPLICAD_METRICS_TOKEN")]
    pub metrics_token: Option<String>,
    /// Serve `GET /metrics` without a token on a separate address (e.g. `127.0.0.1:9464`, or a
    /// private interface the scraper reaches).
    #[arg(long, env = "REPLICAD_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// This node's name, the `node` label of every metric and the `node` of `/readyz` (several
    /// nodes over one database tell themselves apart by it); the host name when absent.
    #[arg(long, env = "REPLICAD_NODE_NAME")]
    pub node_name: Option<String>,
    /// Requests per minute allowed to each organization key, with a burst of as many (429
    /// `RATE_LIMITED` with `Retry-After` beyond); no limit when absent.
    #[arg(long, env = "REPLICAD_RATE_LIMIT_PER_KEY", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_per_key: Option<u32>,
    /// Requests per minute to the public embed operations (`POST /v1/embed/{replicaUUID}/chat`,
    /// `GET /v1/embed/{replicaUUID}/history`) allowed to one visitor (`X-Embed-Visitor`) of one
    /// replica, with a burst of as many (429 `RATE_LIMITED` with `Retry-After` beyond).
    #[arg(long, env = "REPLICAD_EMBED_RATE_LIMIT_PER_VISITOR", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub embed_rate_limit_per_visitor: u32,
    /// Requests per minute to the public embed operations allowed to one replica from all its
    /// visitors together, with a burst of as many (429 `RATE_LIMITED` with `Retry-After`
    /// beyond).
    #[arg(long, env = "REPLICAD_EMBED_RATE_LIMIT_PER_REPLICA", default_value_t = 120,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub embed_rate_limit_per_replica: u32,
    /// New visitors (linked-account users `embed:<id>`, made at their first question) one
    /// replica takes in per minute, with a burst of as many (429 `RATE_LIMITED` beyond).
    #[arg(long, env = "REPLICAD_EMBED_NEW_VISITORS_PER_MINUTE", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub embed_new_visitors_per_minute: u32,
    /// Conversations the anonymous visitors of one organization's public chats (widget and web
    /// page) may start per UTC month, counted apart from the organization's own quota (429
    /// `EMBED_CONVERSATION_QUOTA_EXCEEDED` beyond); `0` closes them to new conversations.
    #[arg(long, env = "REPLICAD_EMBED_CONVERSATIONS_PER_MONTH", default_value_t = 10_000)]
    pub embed_conversations_per_month: u64,
    /// Tests only: let the admin socket move the server's clock forward (`advance-clock`), so
    /// that conversation boundaries and months can be crossed without waiting.
    #[arg(long, env = "REPLICAD_TEST_CLOCK", hide = true)]
    pub test_clock: bool,
    /// Writes answer 507 `INSUFFICIENT_STORAGE` (and store nothing) while the data directory's
    /// filesystem has fewer free bytes than this (`64MiB`, `512KiB`, `1GiB` or bytes); reads
    /// keep working, and writes succeed again once space is freed. `0` turns the check off
    /// (a full disk is then met mid-commit, which costs a reopen of the store).
    #[arg(long, env = "REPLICAD_MIN_FREE_SPACE", default_value = "64MiB", value_parser = parse_bytes)]
    pub min_free_space: u64,
    /// Where the tables live: unset, the redb file in the data directory (the default); or a
    /// PostgreSQL database, `postgres://user:password@host:port/database` (no TLS), whose
    /// schema replicad creates and migrates; the uploaded files are kept in it too, and the
    /// search index stays in the data directory. Several nodes may share one database.
    #[arg(long, env = "REPLICAD_STORE", value_parser = parse_store)]
    pub store: Option<String>,
    /// Bytes of answers kept for the hot reads (a replica, the replica list, a chat history
    /// page, a knowledge-base entry) until the next commit (`8MiB`, `0` turns it off); see
    /// `http::read_cache`.
    #[arg(long, env = "REPLICAD_READ_CACHE_BYTES", default_value = "8MiB", value_parser = parse_bytes)]
    pub read_cache_bytes: u64,
    /// Tests only: let the admin socket make the filesystem look full to the store
    /// (`disk-full`, see `store::file`).
    #[arg(long, env = "REPLICAD_TEST_FAULTS", hide = true)]
    pub test_faults: bool,
    /// Key sealing channel tokens at rest (64 hex characters); generated with mode 0600 when
    /// absent. Default: `DATA_DIR/secrets.key`.
    #[arg(long, env = "REPLICAD_SECRETS_KEY_FILE")]
    pub secrets_key_file: Option<PathBuf>,
    /// Base URL of the messengerA Bot API (`{base}/bot{token}/{method}`); point it at a local
    /// Bot API server or a test stand-in.
    #[arg(long, env = "REPLICAD_MESSENGER_A_API_BASE", default_value = DEFAULT_MESSENGER_A_API_BASE)]
    pub messenger_a_api_base: String,
    /// Long-poll timeout of messengerA `getUpdates`, in seconds.
    #[arg(long, env = "REPLICAD_MESSENGER_A_POLL_TIMEOUT", default_value_t = 30)]
    pub messenger_a_poll_timeout: u64,
    /// Base URL of the messengerB REST API (`scheme://host[:port]`, no path; requests go to
    /// `{base}/api/v10/…`); point it at a test stand-in.
    #[arg(long, env = "REPLICAD_MESSENGER_B_API_BASE", default_value = DEFAULT_MESSENGER_B_API_BASE)]
    pub messenger_b_api_base: String,
    /// URL of the messengerB gateway (`ws://` or `wss://`, no query); the bot connects to
    /// `{url}/?v=10&encoding=json`, and resumes where the gateway's READY says.
    #[arg(long, env = "REPLICAD_MESSENGER_B_GATEWAY", default_value = DEFAULT_MESSENGER_B_GATEWAY)]
    pub messenger_b_gateway: String,
    /// Generation backends: upstreams, model routes, timeouts, retries.
    #[command(flatten)]
    pub llm: crate::generate::LlmConfig,
}

impl Config {
    /// A configuration with every default, for `data_dir` (tests and embedding); `listen` is
    /// `127.0.0.1:0` (a free port). The other values are the flags' defaults (a test keeps
    /// them equal).
    pub fn new(data_dir: PathBuf) -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            demo: false,
            sample_dir: PathBuf::from("data/sample"),
            max_body_bytes: 4 * 1024 * 1024,
            max_replicas_per_org: 1000,
            max_kb_entries_per_org: 10_000,
            max_upload_bytes: 50 * 1024 * 1024,
            max_bundle_bytes: 1 << 30,
            max_fetch_bytes: 20 * 1024 * 1024,
            extract_memory_mib: 1024,
            extract_cpu_seconds: 120,
            ingest_concurrency: 4,
            allow_private_urls: false,
            kb_refresh_interval: 86_400,
            public_url: None,
            expose_internal_errors: false,
            tls_cert: None,
            tls_key: None,
            models: None,
            embedding_models: None,
            embedding_precision: crate::embed::Precision::Auto,
            model_hub: None,
            max_index_lag: 30,
            shutdown_grace: 10,
            header_timeout: 30,
            body_timeout: 30,
            tls_handshake_timeout: 10,
            metrics_token: None,
            metrics_listen: None,
            node_name: None,
            rate_limit_per_key: None,
            embed_rate_limit_per_visitor: 10,
            embed_rate_limit_per_replica: 120,
            embed_new_visitors_per_minute: 20,
            embed_conversations_per_month: 10_000,
            test_clock: false,
            min_free_space: crate::store::file::DEFAULT_MIN_FREE_BYTES,
            store: None,
            test_faults: false,
            read_cache_bytes: 8 * 1024 * 1024,
            secrets_key_file: None,
            messenger_a_api_base: DEFAULT_MESSENGER_A_API_BASE.to_string(),
            messenger_a_poll_timeout: 30,
            messenger_b_api_base: DEFAULT_MESSENGER_B_API_BASE.to_string(),
            messenger_b_gateway: DEFAULT_MESSENGER_B_GATEWAY.to_string(),
            llm: crate::generate::LlmConfig::default(),
        }
    }

    /// The quotas of an organization that the operator has not set (`replicad orgs set-quota`).
    pub fn quota_defaults(&self) -> crate::service::quotas::Defaults {
        crate::service::quotas::Defaults {
            replicas: self.max_replicas_per_org,
            knowledge_base_entries: self.max_kb_entries_per_org,
            embed_conversations_per_month: self.embed_conversations_per_month,
        }
    }

    /// The options of a replica bundle's import into `org` owned by `owner` (a user id or
    /// e-mail), with this server's limits and default quotas (`service::bundle::import`).
    pub fn import_options(
        &self,
        org: uuid::Uuid,
        owner: String,
        slug: Option<String>,
        embedding_model: Option<String>,
    ) -> crate::service::bundle::ImportOptions {
        crate::service::bundle::ImportOptions {
            org,
            owner,
            slug,
            embedding_model,
            max_inflated: self.max_bundle_bytes,
            default_max: (self.max_replicas_per_org, self.max_kb_entries_per_org),
        }
    }

    /// Checks values clap cannot; the error names the flags at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::BodyLimit);
        }
        if self.extract_memory_mib < 64 || self.extract_cpu_seconds == 0 || self.ingest_concurrency == 0 {
            return Err(ConfigError::ExtractionLimits);
        }
        if self.max_kb_entries_per_org == 0 || self.max_upload_bytes == 0 || self.max_fetch_bytes == 0 {
            return Err(ConfigError::KnowledgeBaseLimits);
        }
        if let Some(u) = &self.public_url {
            check_http_url("--public-url", u)?;
        }
        if self.max_replicas_per_org == 0 {
            return Err(ConfigError::ReplicaLimit);
        }
        if self.metrics_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err(ConfigError::MetricsToken);
        }
        check_http_url("--messenger-a-api-base", &self.messenger_a_api_base)?;
        if !(1..=50).contains(&self.messenger_a_poll_timeout) {
            return Err(ConfigError::PollTimeout);
        }
        check_messenger_b_urls(&self.messenger_b_api_base, &self.messenger_b_gateway)?;
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(ConfigError::TlsHalf);
        }
        Ok(())
    }
}

/// A configuration [`Config::validate`] refuses, or a flag value its parser refuses
/// ([`parse_duration`], [`parse_bytes`], [`parse_store`]); the text names the flag or value
/// at fault, for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `--max-body-bytes` below 1024.
    #[error("--max-body-bytes must be at least 1024")]
    BodyLimit,
    /// `--extract-memory-mib` below 64, or `--extract-cpu-seconds` or `--ingest-concurrency` 0.
    #[error("--extract-memory-mib must be at least 64, --extract-cpu-seconds and --ingest-concurrency at least 1")]
    ExtractionLimits,
    /// `--max-kb-entries-per-org`, `--max-upload-bytes` or `--max-fetch-bytes` 0.
    #[error("--max-kb-entries-per-org, --max-upload-bytes and --max-fetch-bytes must be at least 1")]
    KnowledgeBaseLimits,
    /// `--max-replicas-per-org` 0.
    #[error("--max-replicas-per-org must be at least 1")]
    ReplicaLimit,
    /// `--metrics-token` shorter than 16 characters.
    #[error("--metrics-token must be at least 16 characters")]
    MetricsToken,
    /// `--messenger-a-poll-timeout` outside 1 to 50 seconds.
    #[error("--messenger-a-poll-timeout must be 1 to 50 seconds")]
    PollTimeout,
    /// `--tls-cert` without `--tls-key`, or the other way round.
    #[error("--tls-cert and --tls-key go together: give both or neither")]
    TlsHalf,
    /// The URL `value` of `flag` is not an `http(s)` URL.
    #[error("{flag} {value:?} is not an http(s) URL")]
    NotHttpUrl { flag: &'static str, value: String },
    /// `--messenger-b-api-base` is not `http(s)://host[:port]`.
    #[error("--messenger-b-api-base {0:?} is not an http(s)://host[:port] URL")]
    MessengerBApiBase(String),
    /// `--messenger-b-gateway` is not a `ws(s)://` URL without query or credentials.
    #[error("--messenger-b-gateway {0:?} is not a ws(s):// URL")]
    MessengerBGateway(String),
    /// A duration without a number.
    #[error("{0:?} is not a duration like 7d, 12h, 30m, 45s")]
    NotDuration(String),
    /// A duration of another unit than `s`, `m`, `h`, `d`, `w`.
    #[error("unknown unit {unit:?} in {value:?}; use s, m, h, d or w")]
    DurationUnit { unit: char, value: String },
    /// A size without a number.
    #[error("{0:?} is not a size like 64MiB, 512KiB or 1048576")]
    NotSize(String),
    /// A size of another unit than `B`, `KiB`, `MiB`, `GiB`.
    #[error("unknown unit {unit:?} in {value:?}; use KiB, MiB or GiB")]
    SizeUnit { unit: String, value: String },
    /// A duration or size that does not fit in 64 bits (or a duration of 0).
    #[error("{0:?} is out of range")]
    OutOfRange(String),
    /// A `--store` value that is not a PostgreSQL URL.
    #[error("expected a PostgreSQL URL, postgres://user:password@host:port/database")]
    NotPostgresUrl,
}

/// `value` of `flag` is an `http(s)` URL.
fn check_http_url(flag: &'static str, value: &str) -> Result<(), ConfigError> {
    match url::Url::parse(value).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
        true => Ok(()),
        false => Err(ConfigError::NotHttpUrl { flag, value: value.to_string() }),
    }
}

/// Default `--messenger-a-api-base`: the public messengerA Bot API.
pub const DEFAULT_MESSENGER_A_API_BASE: &str = "https://api.telegram.org";

/// Default `--messenger-b-api-base`: the public messengerB REST API.
pub const DEFAULT_MESSENGER_B_API_BASE: &str = "https://discord.com";
/// Default `--messenger-b-gateway`: the public messengerB gateway.
pub const DEFAULT_MESSENGER_B_GATEWAY: &str = "wss://gateway.discord.gg";

/// `--messenger-b-api-base` is `http(s)://host[:port]` without path, query or credentials;
/// `--messenger-b-gateway` is a `ws(s)://` URL without query or credentials.
fn check_messenger_b_urls(api_base: &str, gateway: &str) -> Result<(), ConfigError> {
    let plain = |u: &url::Url| {
        u.host_str().is_some() && u.query().is_none() && u.username().is_empty() && u.password().is_none()
    };
    let api_ok = url::Url::parse(api_base)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && plain(&u) && matches!(u.path(), "" | "/"));
    if !api_ok {
        return Err(ConfigError::MessengerBApiBase(api_base.to_string()));
    }
    let gateway_ok = url::Url::parse(gateway).is_ok_and(|u| matches!(u.scheme(), "ws" | "wss") && plain(&u));
    if !gateway_ok {
        return Err(ConfigError::MessengerBGateway(gateway.to_string()));
    }
    Ok(())
}

/// Parses `7d`, `12h`, `30m`, `45s` or plain seconds into seconds.
pub fn parse_duration(s: &str) -> Result<u64, ConfigError> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], c),
        _ => (s, 's'),
    };
    let n: u64 = num.parse().map_err(|_| ConfigError::NotDuration(s.to_string()))?;
    let mult = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 604_800,
        _ => return Err(ConfigError::DurationUnit { unit, value: s.to_string() }),
    };
    n.checked_mul(mult).filter(|v| *v > 0).ok_or_else(|| ConfigError::OutOfRange(s.to_string()))
}

/// The data directory flag shared by admin commands.
#[derive(clap::Args, Debug, Clone)]
pub struct DataDir {
    /// Directory of the runtime state.
    #[arg(long, env = "REPLICAD_DATA_DIR", default_value = "replicad-data")]
    pub data_dir: PathBuf,
    /// The PostgreSQL database holding the tables, as `serve --store` (unset: the redb file
    /// in the data directory).
    #[arg(long, env = "REPLICAD_STORE", value_parser = parse_store)]
    pub store: Option<String>,
}

impl Config {
    /// `--node-name`, or the host name (`replicad` when it cannot be read).
    pub fn node(&self) -> String {
        self.node_name.clone().unwrap_or_else(host_name)
    }
}

/// The host name of the machine, `replicad` when it cannot be read.
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into the buffer it is given.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let name = buf.split(|b| *b == 0).next().unwrap_or_default();
    match std::str::from_utf8(name) {
        Ok(n) if ok && !n.is_empty() => n.to_string(),
        _ => "replicad".to_string(),
    }
}

/// A `--store` value: a `postgres://` (or `postgresql://`) URL.
pub fn parse_store(url: &str) -> Result<String, ConfigError> {
    match url.starts_with("postgres://") || url.starts_with("postgresql://") {
        true => Ok(url.to_string()),
        false => Err(ConfigError::NotPostgresUrl),
    }
}

/// Parses a size: bytes, or a number with `KiB`, `MiB` or `GiB`.
pub fn parse_bytes(s: &str) -> Result<u64, ConfigError> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| ConfigError::NotSize(s.to_string()))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(ConfigError::SizeUnit { unit: other.to_string(), value: s.to_string() }),
    };
    n.checked_mul(mult).ok_or_else(|| ConfigError::OutOfRange(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("7d"), Ok(604_800));
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert_eq!(parse_duration("0"), Err(ConfigError::OutOfRange("0".into())));
        let unit = parse_duration("5y").unwrap_err();
        assert_eq!(unit, ConfigError::DurationUnit { unit: 'y', value: "5y".into() });
        assert_eq!(unit.to_string(), r#"unknown unit 'y' in "5y"; use s, m, h, d or w"#);
        assert_eq!(parse_duration("abc"), Err(ConfigError::NotDuration("abc".into())));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("512KiB"), Ok(512 << 10));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("1 GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("5MB"), Err(ConfigError::SizeUnit { unit: "MB".into(), value: "5MB".into() }));
        assert_eq!(parse_bytes("MiB"), Err(ConfigError::NotSize("MiB".into())));
    }

    #[test]
    fn config_new_has_the_defaults_of_the_flags() {
        #[derive(clap::Parser)]
        struct Flags {
            #[command(flatten)]
            config: Config,
        }
        let args = ["replicad", "--listen", "127.0.0.1:0", "--data-dir", "d"];
        let parsed = <Flags as clap::Parser>::try_parse_from(args).unwrap().config;
        assert_eq!(format!("{parsed:?}"), format!("{:?}", Config::new(PathBuf::from("d"))));
    }
}
