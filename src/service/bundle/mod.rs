//! A replica in one file, to move it between servers or organizations (the format: docs/bundles.md): `replicad replicas export` and
//! `GET /v1/replicas/{replicaUUID}/export` write a replica with its knowledge base (entries,
//! original files, extracted text, chunks, vectors, summaries), website refresh settings and
//! embed widget origins into one archive; `replicad replicas import` and
//! `POST /v1/replicas/import` make it again in an organization, with new ids.
//!
//! - [`format`]: the members as written (JSON and one binary layout for vectors), apart from
//!   the store's records;
//! - [`archive`]: the gzip'd tar, its manifest, and the checks of a bundle read (sizes while
//!   inflating, paths, hashes, format);
//! - [`export`]: one consistent read of the store (one snapshot, the uploaded files pinned),
//!   then the archive;
//! - [`import`]: the checks, the quotas, then one write transaction (all or nothing).
//!
//! This module opens no table: it calls each table's owner (replicas, knowledge base, embed
//! settings, integrations, quotas, users). Bot tokens, identity secrets and usage counts are
//! never in a bundle. The history (chats, conversations, items, with their users) only when
//! asked for ([`history`]).

pub mod archive;
pub mod export;
pub mod format;
pub mod history;
pub mod import;

pub use export::{export_to_file, export_to_writer, Exported, ReplicaRef};
pub use import::{import, ImportOptions, Imported};

use crate::error::{Code, Error};

/// The bundle format this build writes and the newest it reads (see
/// [`archive::migrate`]).
pub const FORMAT: u32 = 1;
/// The first member of a bundle.
pub const MANIFEST: &str = "manifest.json";
/// The media type of a bundle (`GET …/export`, `POST /v1/replicas/import`).
pub const MEDIA_TYPE: &str = "application/gzip";

/// Why a bundle is refused (nothing is written), or why writing one failed. Each is answered
/// with the error body of spec §7: [`Code::InvalidBundle`] (400) for a bad bundle,
/// [`Code::BundleFormatUnsupported`] (400) for a newer format, 413 `PAYLOAD_TOO_LARGE` for one
/// that inflates past the limit.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The archive is truncated, or is not a gzip'd tar.
    #[error("the bundle is truncated or corrupt: {0}")]
    Corrupt(String),
    /// The archive does not begin with `manifest.json`.
    #[error("the bundle does not begin with {MANIFEST} (not a replica bundle?)")]
    NoManifest,
    /// The manifest is not one.
    #[error("{MANIFEST}: {0}")]
    Manifest(String),
    /// The manifest's format is newer than [`FORMAT`].
    #[error("the bundle has format {0}, newer than this replicad reads ({FORMAT}); import it with a newer replicad")]
    NewerFormat(u32),
    /// A member's path is absolute, has `..`, or is not a plain relative path.
    #[error("member path {0:?} is not a plain relative path (absolute, `..`, or empty components)")]
    UnsafePath(String),
    /// A member is a link, a directory or a device, not a file.
    #[error("member {0:?} is not a regular file")]
    NotAFile(String),
    /// A member appears twice.
    #[error("member {0:?} appears twice")]
    Duplicate(String),
    /// The archive inflates past the limit (a decompression bomb, or a bundle larger than the
    /// server takes).
    #[error("the bundle inflates to more than {0} bytes, this server's limit")]
    TooLarge(u64),
    /// A member differs in size or SHA-256 from the manifest.
    #[error("member {0:?} differs from its size or SHA-256 in the manifest")]
    Hash(String),
    /// A member the manifest lists (or an entry needs) is missing.
    #[error("member {0:?} is missing (truncated bundle?)")]
    Missing(String),
    /// A member the manifest does not list.
    #[error("member {0:?} is not listed in the manifest")]
    Unlisted(String),
    /// A JSON member is not what it should be.
    #[error("member {path:?}: {why}")]
    Member { path: String, why: String },
    /// A vectors member is not in its layout.
    #[error("member {path:?}: {why}")]
    Vectors { path: String, why: String },
    /// A vectors member's vectors are not of its set's dimension.
    #[error("member {path:?} holds vectors of dimension {found}, its model's is {expected}")]
    Dimension { path: String, found: u32, expected: u32 },
    /// The bundle's vectors are of another dimension than the model of the same id here.
    #[error("the bundle's vectors of {model:?} have dimension {bundle}; this server's {model:?} has {served}")]
    ModelDimension { model: String, bundle: u32, served: usize },
}

impl From<BundleError> for Error {
    fn from(e: BundleError) -> Error {
        let code = match e {
            BundleError::NewerFormat(_) => Code::BundleFormatUnsupported,
            BundleError::TooLarge(_) => Code::PayloadTooLarge,
            _ => Code::InvalidBundle,
        };
        Error::new(code, e.to_string())
    }
}
