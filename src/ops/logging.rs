//! The log on stderr: `--log-format text` (human-readable lines, the default) or `json` (one
//! JSON object per line, for journald and log shippers), filtered by `--log`.
//!
//! A JSON line carries `timestamp` (RFC 3339, UTC), `level`, `target`, `message` and the
//! event's fields. Each answered request is one line with `message: "request"`, `request_id`,
//! `method`, `route` (the route template), `path`, `status`, `micros` (latency) and, when the
//! caller was authenticated, `org` (the organization id). Nothing logs API keys, tokens,
//! invitation codes or message contents (a path whose parameter is a credential is logged as
//! its template).

/// The format of log lines.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Sets up the process's logger on stderr with `filter` (tracing syntax, `info` when invalid).
pub fn init(filter: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).with_span_list(false).init(),
    }
}
