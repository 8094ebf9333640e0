//! The one error type of replicad and its table of codes.
//!
//! Every failure a request can meet is an [`Error`]: a [`Code`] (which fixes the HTTP status and
//! the machine-readable `error_code` of spec §7) plus a human-readable message. Internal details
//! (I/O, storage, index errors) travel in `internal` and are logged, never sent, unless the
//! operator enables `--expose-internal-errors` (then they appear in `inner_exception` of a 500).

use std::fmt;

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

/// A failed operation: what to answer (code, message) and what to log (internal).
#[derive(Debug, Clone)]
pub struct Error {
    /// Selects the status and `error_code`.
    pub code: Code,
    /// Text for the `error` field of the body; safe to show to the caller.
    pub message: String,
    /// Cause for the log (and `inner_exception` when enabled); never shown by default.
    pub internal: Option<String>,
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with a caller-facing message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error { code, message: message.into(), internal: None }
    }

    /// A 500 whose cause is logged but not shown.
    pub fn internal(cause: impl fmt::Display) -> Self {
        Error { code: Code::Internal, message: "internal error".into(), internal: Some(cause.to_string()) }
    }

    /// 400 `VALIDATION_ERROR` naming the field at fault.
    pub fn invalid(field: &str, problem: impl fmt::Display) -> Self {
        Error::new(Code::ValidationFailed, format!("{field}: {problem}"))
    }

    /// 507 `INSUFFICIENT_STORAGE`: the write was refused or rolled back because the data
    /// directory's filesystem is full; `cause` goes to the log.
    pub fn insufficient_storage(cause: impl fmt::Display) -> Self {
        Error {
            code: Code::InsufficientStorage,
            message: "the server's storage is full; the write was not made (reads still work, retry later)".into(),
            internal: Some(cause.to_string()),
        }
    }

    /// 404 `NOT_FOUND` for a resource kind (e.g. "replica").
    pub fn not_found(what: &str) -> Self {
        Error::new(Code::NotFound, format!("{what} not found"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)?;
        if let Some(inner) = &self.internal {
            write!(f, " ({inner})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

macro_rules! internal_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self { Error::internal(e) }
        }
    )*};
}

/// The message of a 500 that a reopened store handle cures: redb's `PreviousIo` (the handle
/// latched by a failed write) or `DatabaseClosed` (a read begun on the handle a reopen closed).
/// `store::handle` retries such a read on the new handle ([`Error::is_store_latched`]).
const STORE_LATCHED: &str = "the store is being reopened after a failed write";

impl Error {
    /// Whether this is a store error that a reopened handle cures (see [`STORE_LATCHED`]).
    pub fn is_store_latched(&self) -> bool {
        self.code == Code::Internal && self.message == STORE_LATCHED
    }
}

/// Store errors: an I/O error of kind `StorageFull` (ENOSPC) is a 507, any other a 500.
macro_rules! storage_from {
    ($($t:ty => |$e:ident| $storage:expr),* $(,)?) => {$(
        impl From<$t> for Error {
            fn from($e: $t) -> Self {
                match $storage {
                    Some(redb::StorageError::Io(io)) if io.kind() == std::io::ErrorKind::StorageFull => {
                        Error::insufficient_storage($e)
                    }
                    Some(redb::StorageError::PreviousIo | redb::StorageError::DatabaseClosed) => {
                        Error { code: Code::Internal, message: STORE_LATCHED.into(), internal: Some($e.to_string()) }
                    }
                    _ => Error::internal($e),
                }
            }
        }
    )*};
}

storage_from!(
    redb::StorageError => |e| Some(&e),
    redb::DatabaseError => |e| match &e { redb::DatabaseError::Storage(s) => Some(s), _ => None },
    redb::TransactionError => |e| match &e { redb::TransactionError::Storage(s) => Some(s), _ => None },
    redb::TableError => |e| match &e { redb::TableError::Storage(s) => Some(s), _ => None },
    redb::CommitError => |e| match &e { redb::CommitError::Storage(s) => Some(s), _ => None },
);

impl From<redb::Error> for Error {
    fn from(e: redb::Error) -> Self {
        match e {
            redb::Error::Io(io) => Error::from(io),
            redb::Error::PreviousIo | redb::Error::DatabaseClosed => Error::from(redb::StorageError::PreviousIo),
            e => Error::internal(e),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::StorageFull {
            Error::insufficient_storage(e)
        } else {
            Error::internal(e)
        }
    }
}

internal_from!(tantivy::TantivyError);
