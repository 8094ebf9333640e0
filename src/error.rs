//! The one error type of replicad and its table of codes.
//!
//! Every failure a request can meet is an [`Error`]: a [`Code`] (which fixes the HTTP status and
//! the machine-readable `error_code` of spec §7) plus a human-readable message, and optionally
//! its cause: the error value the failure came from (an [`std::io::Error`], the store's
//! `store::error::StoreError`, tantivy's `TantivyError`, …), kept typed so that code which must
//! tell failures apart matches the cause's type ([`Error::cause`]) rather than its text. Code
//! that has only a message gives a cause as text ([`Error::internal`],
//! [`Error::with_cause_text`]). The cause is logged, never sent, unless the operator enables
//! `--expose-internal-errors` (then its text, [`Error::cause_text`], appears in
//! `inner_exception` of a 500).
//!
//! This module knows no store or index: each owns the conversion of its errors into [`Error`]
//! (`store::error` for redb's, `search::error` for tantivy's); the conversion of
//! [`std::io::Error`] (file I/O anywhere, ENOSPC as 507) is here.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident => $status:literal, $code:expr;)*) => {
        /// Machine-readable error codes (spec §7 `error_code`), each with its HTTP status.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Code {
            $($(#[$doc])* $variant,)*
        }

        impl Code {
            /// HTTP status answered for this code.
            pub fn status(self) -> u16 {
                match self { $(Code::$variant => $status,)* }
            }

            /// The `error_code` string of the body, or `None` where the body carries none.
            pub fn as_str(self) -> Option<&'static str> {
                match self { $(Code::$variant => $code,)* }
            }

            /// Every code, for the OpenAPI document and tests.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];
        }
    };
}

error_codes! {
    /// The body is not valid JSON or does not have the expected shape.
    InvalidBody => 400, Some("INVALID_BODY");
    /// A field has a value outside what the operation accepts.
    ValidationFailed => 400, Some("VALIDATION_ERROR");
    /// A query parameter is malformed or out of range.
    InvalidQuery => 400, Some("INVALID_QUERY");
    /// A path parameter is malformed (e.g. `replicaUUID` is not a UUID).
    InvalidPath => 400, Some("INVALID_PATH_PARAMETER");
    /// `X-USER-ID` / `X-USER-ID-TYPE` are incomplete, of an unknown type, sent more than once or
    /// not visible ASCII.
    InvalidUserHeaders => 400, Some("INVALID_USER_HEADERS");
    /// `X-ORGANIZATION-SECRET` or `Authorization` is sent more than once.
    InvalidAuthHeaders => 400, Some("INVALID_AUTH_HEADERS");
    /// `X-API-Version` names no version this server speaks.
    UnsupportedApiVersion => 400, Some("UNSUPPORTED_API_VERSION");
    /// The invitation code has expired.
    InviteExpired => 400, Some("INVITE_EXPIRED");
    /// The caller's own `usageLimits.knowledgeBaseEntries` is reached (spec §7 rule 3). The
    /// spec has one code for this and for [`Code::KnowledgeBaseQuotaExceeded`] (docs/decisions.md
    /// "Knowledge base"); the status tells them apart.
    KnowledgeBaseUsageLimitReached => 400, Some("KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED");
    /// The signed upload URL has expired.
    UploadExpired => 400, Some("UPLOAD_EXPIRED");
    /// The channel refused the bot token given to connect an integration.
    InvalidChannelToken => 400, Some("INVALID_CHANNEL_TOKEN");
    /// No credential, or one that matches no organization.
    Unauthorized => 401, Some("UNAUTHORIZED");
    /// `X-USER-ID` of type `id`/`email` names no user of the organization.
    UserNotFound => 401, Some("USER_NOT_FOUND");
    /// `X-Embed-Key` is not an embed key of the replica of the path.
    EmbedKeyRefused => 403, Some("EMBED_KEY_REFUSED");
    /// `X-Embed-Identity` is malformed, not signed with the replica's identity secret, expired,
    /// expires too far ahead, or sent where none is accepted (no secret, or the web chat page).
    EmbedIdentityRefused => 403, Some("EMBED_IDENTITY_REFUSED");
    /// The page's origin is not among the replica's allowed origins (embed widget).
    OriginNotAllowed => 403, Some("ORIGIN_NOT_ALLOWED");
    /// The resource does not exist or is not accessible to the caller.
    NotFound => 404, Some("NOT_FOUND");
    /// The invitation code does not exist (body without `error_code`/`fingerprint`, spec §7 rule 2).
    InviteNotFound => 404, None;
    /// No operation at this path.
    RouteNotFound => 404, Some("ROUTE_NOT_FOUND");
    /// The path exists for other methods (see the `Allow` header).
    MethodNotAllowed => 405, Some("METHOD_NOT_ALLOWED");
    /// The replica bundle is not one this server imports: truncated or corrupt, a member whose
    /// size or SHA-256 differs from its manifest, a member path that is absolute or has `..`,
    /// vectors of another dimension than their model's (docs/bundles.md). Nothing is written.
    InvalidBundle => 400, Some("INVALID_BUNDLE");
    /// The replica bundle is of a newer format than this server reads (docs/bundles.md).
    BundleFormatUnsupported => 400, Some("BUNDLE_FORMAT_UNSUPPORTED");
    /// The replica slug is used by another replica of the organization.
    SlugTaken => 409, Some("SLUG_TAKEN");
    /// The e-mail address belongs to another user of the organization.
    EmailTaken => 409, Some("EMAIL_TAKEN");
    /// The user id chosen by the client belongs to another user of the organization.
    UserIdTaken => 409, Some("USER_ID_TAKEN");
    /// The linked account belongs to another user of the organization.
    LinkedAccountTaken => 409, Some("LINKED_ACCOUNT_TAKEN");
    /// The URL is already in the replica's knowledge base.
    UrlAlreadyExists => 409, Some("URL_ALREADY_EXISTS");
    /// The signed upload URL was already used (it is single-use).
    UploadAlreadyUsed => 409, Some("UPLOAD_ALREADY_USED");
    /// The invitation code was already redeemed.
    InviteAlreadyRedeemed => 409, Some("INVITE_ALREADY_REDEEMED");
    /// The channel bot is connected to another replica.
    IntegrationConflict => 409, Some("INTEGRATION_CONFLICT");
    /// A replacement names another `llm.embeddingModel` than the replica's (fixed once set: its
    /// knowledge base is embedded with it).
    EmbeddingModelFixed => 409, Some("EMBEDDING_MODEL_FIXED");
    /// The organization has as many replicas as its quota allows.
    ReplicaQuotaExceeded => 429, Some("REPLICA_QUOTA_EXCEEDED");
    /// The organization has as many knowledge-base entries as the operator's quota allows
    /// (`--max-kb-entries-per-org`); same code as [`Code::KnowledgeBaseUsageLimitReached`].
    KnowledgeBaseQuotaExceeded => 429, Some("KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED");
    /// The organization started as many conversations this month as its quota (or the
    /// request's `usageLimits.conversationsPerMonth`) allows.
    ConversationQuotaExceeded => 429, Some("CONVERSATION_QUOTA_EXCEEDED");
    /// The anonymous visitors of an organization's public chats (embed widget and web page)
    /// started their monthly conversations (`--embed-conversations-per-month`).
    EmbedConversationQuotaExceeded => 429, Some("EMBED_CONVERSATION_QUOTA_EXCEEDED");
    /// The organization key sent more requests than `--rate-limit-per-key` allows (see the
    /// `Retry-After` header).
    RateLimited => 429, Some("RATE_LIMITED");
    /// Nothing of the request's body arrived for `--body-timeout`.
    BodyTimeout => 408, Some("BODY_TIMEOUT");
    /// The (decompressed) body exceeds the size limit.
    PayloadTooLarge => 413, Some("PAYLOAD_TOO_LARGE");
    /// `Content-Type` is not JSON or `Content-Encoding` is not `gzip`.
    UnsupportedMediaType => 415, Some("UNSUPPORTED_MEDIA_TYPE");
    /// An unexpected failure; details are logged under the request id.
    Internal => 500, Some("INTERNAL_ERROR");
    /// The model server behind the replica's model failed, timed out or kept refusing after
    /// retries (the message names the upstream, never its key or its answer's body).
    UpstreamError => 502, Some("UPSTREAM_ERROR");
    /// The filesystem of the data directory is full (or has less free space than
    /// `--min-free-space`): the write was not made, nothing of it is stored. Reads keep working;
    /// writes succeed again once space is freed, without a restart.
    InsufficientStorage => 507, Some("INSUFFICIENT_STORAGE");
}

/// The cause of an [`Error`]: any error value, shared (an [`Error`] is cloned to answer every
/// write of a failed group commit).
pub type Cause = Arc<dyn StdError + Send + Sync + 'static>;

/// A failed operation: what to answer (code, message) and what to log (its cause).
#[derive(Debug, Clone)]
pub struct Error {
    /// Selects the status and `error_code`.
    pub code: Code,
    /// Text for the `error` field of the body; safe to show to the caller.
    pub message: String,
    /// What the failure came from, for the log (and `inner_exception` when enabled); never
    /// shown by default.
    cause: Option<Cause>,
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A cause known only as text (code that failed without an error value to keep).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Message(String);

impl Error {
    /// An error with a caller-facing message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error { code, message: message.into(), cause: None }
    }

    /// A 500 whose cause, `cause`, is logged but not shown.
    pub fn caused_by(cause: impl StdError + Send + Sync + 'static) -> Self {
        Error::new(Code::Internal, "internal error").with_cause(cause)
    }

    /// A 500 whose cause, known only as text, is logged but not shown.
    pub fn internal(cause: impl fmt::Display) -> Self {
        Error::caused_by(Message(cause.to_string()))
    }

    /// 400 `VALIDATION_ERROR` naming the field at fault.
    pub fn invalid(field: &str, problem: impl fmt::Display) -> Self {
        Error::new(Code::ValidationFailed, format!("{field}: {problem}"))
    }

    /// 507 `INSUFFICIENT_STORAGE`: the write was refused or rolled back because the data
    /// directory's filesystem is full (give what met it with [`Error::with_cause`] or
    /// [`Error::with_cause_text`]: it goes to the log).
    pub fn insufficient_storage() -> Self {
        Error::new(
            Code::InsufficientStorage,
            "the server's storage is full; the write was not made (reads still work, retry later)",
        )
    }

    /// 404 `NOT_FOUND` for a resource kind (e.g. "replica").
    pub fn not_found(what: &str) -> Self {
        Error::new(Code::NotFound, format!("{what} not found"))
    }

    /// This error with `cause` as its cause (replacing any).
    pub fn with_cause(self, cause: impl StdError + Send + Sync + 'static) -> Self {
        Error { cause: Some(Arc::new(cause)), ..self }
    }

    /// This error with a cause known only as text (replacing any).
    pub fn with_cause_text(self, cause: impl fmt::Display) -> Self {
        self.with_cause(Message(cause.to_string()))
    }

    /// The first error of type `E` in the cause and its [`StdError::source`] chain, if any:
    /// how code tells failures apart (e.g. a store error a reopened handle cures).
    pub fn cause<E: StdError + 'static>(&self) -> Option<&E> {
        self.cause_chain().find_map(|e| e.downcast_ref::<E>())
    }

    /// The cause as text for the log and `inner_exception`: its message, followed by those of
    /// its sources that add to it (`": "`-separated); `None` without a cause.
    pub fn cause_text(&self) -> Option<String> {
        let mut chain = self.cause_chain();
        let mut text = chain.next()?.to_string();
        for source in chain {
            let more = source.to_string();
            if !text.contains(&more) {
                text = format!("{text}: {more}");
            }
        }
        Some(text)
    }

    /// The cause, then its sources.
    fn cause_chain(&self) -> impl Iterator<Item = &(dyn StdError + 'static)> {
        let first = self.cause.as_deref().map(|c| c as &(dyn StdError + 'static));
        std::iter::successors(first, |&e| e.source())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)?;
        if let Some(cause) = self.cause_text() {
            write!(f, " ({cause})")?;
        }
        Ok(())
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.cause.as_deref().map(|c| c as &(dyn StdError + 'static))
    }
}

/// File I/O: a full filesystem (ENOSPC, [`std::io::ErrorKind::StorageFull`]) is a 507, any
/// other failure a 500; the I/O error is the cause.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::StorageFull {
            Error::insufficient_storage().with_cause(e)
        } else {
            Error::caused_by(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    /// A full disk met by file I/O is a 507 whose cause is the I/O error itself.
    #[test]
    fn a_full_disk_is_507_with_the_io_error_as_cause() {
        let e = Error::from(io::Error::new(io::ErrorKind::StorageFull, "no space left on device"));
        assert_eq!(e.code, Code::InsufficientStorage);
        assert_eq!(e.cause::<io::Error>().map(io::Error::kind), Some(io::ErrorKind::StorageFull));
        assert_eq!(e.cause_text().as_deref(), Some("no space left on device"));

        let other = Error::from(io::Error::new(io::ErrorKind::PermissionDenied, "denied"));
        assert_eq!((other.code, other.message.as_str()), (Code::Internal, "internal error"));
        assert_eq!(other.cause::<io::Error>().map(io::Error::kind), Some(io::ErrorKind::PermissionDenied));
    }

    /// A cause given as text is text: it reads as given and matches no error type.
    #[test]
    fn a_text_cause_is_only_text() {
        let e = Error::internal("sealed secret too short");
        assert_eq!(e.cause_text().as_deref(), Some("sealed secret too short"));
        assert!(e.cause::<io::Error>().is_none());
        assert_eq!(e.to_string(), "Internal: internal error (sealed secret too short)");
        assert_eq!(Error::not_found("replica").cause_text(), None);
    }

    /// The text of a cause adds the sources that say more than it, once each; the typed
    /// look-up finds an error anywhere in the chain.
    #[test]
    fn the_cause_text_adds_sources_that_say_more() {
        #[derive(Debug, thiserror::Error)]
        #[error("reading the key file")]
        struct Wrapping(#[source] io::Error);
        #[derive(Debug, thiserror::Error)]
        #[error("reading the key file: {0}")]
        struct Quoting(#[source] io::Error);

        let denied = || io::Error::new(io::ErrorKind::PermissionDenied, "denied");
        let wrapped = Error::caused_by(Wrapping(denied()));
        assert_eq!(wrapped.cause_text().as_deref(), Some("reading the key file: denied"));
        assert_eq!(wrapped.cause::<io::Error>().map(io::Error::kind), Some(io::ErrorKind::PermissionDenied));
        assert_eq!(Error::caused_by(Quoting(denied())).cause_text().as_deref(), Some("reading the key file: denied"));
    }
}
