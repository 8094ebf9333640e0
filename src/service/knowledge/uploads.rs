//! Signed upload URLs of `file` entries (docs/decisions.md "Knowledge base": `filename` →
//! `signedURL`). The URL carries a random token (only its SHA-256 is stored); `PUT`ting the
//! file's bytes to it once, before it expires, stores the file and queues its extraction.

use crate::store::kv::{ReadTransaction, WriteTransaction};

use super as knowledge;
use crate::error::{Code, Error, Result};
use crate::ingest::formats::Format;
use crate::store::records::{KbStatus, StoredFile, Upload};
use crate::store::{self, now_ms, tables, Store};

/// Path of the upload operation; the token is its last segment.
pub const PATH_PREFIX: &str = "/v1/knowledge-base/uploads/";

/// What an upload stored.
#[derive(Debug, Clone)]
pub struct Uploaded {
    pub entry: u64,
    pub size: u64,
    pub mime_type: String,
}

/// Stores `bytes` as the file of the entry `token` names, moves the entry to `FILE_UPLOADED`
/// and queues its extraction. 404 for an unknown token (or a deleted entry), 409
/// `UPLOAD_ALREADY_USED`, 400 `UPLOAD_EXPIRED`, 413 above the size the URL allows, 400 for an
/// empty body, 507 when the disk is full.
///
/// The file's type is found first (from the name the entry was created with, which never
/// changes, the request's `Content-Type` and the first bytes). The bytes are then written and
/// fsynced as a file of their own (`store::files`), on the blocking pool and outside the
/// writer: the other writes never wait for them. Only then does a write
/// check the URL and the entry again and put the records naming the file; when it fails, the
/// file is removed.
pub async fn upload(store: &Store, token: &str, bytes: bytes::Bytes, content_type: Option<String>) -> Result<Uploaded> {
    let hash = crate::service::hash_secret(token);
    let now = now_ms();
    let (up, name) = store
        .read(move |txn| {
            let up = usable_upload(txn, &hash, now)?;
            let source = store::kb::source_in(txn, up.entry)?;
            Ok((up, source.file.unwrap_or_default().name))
        })
        .await?;
    fits(&up, bytes.len() as u64)?;
    let mime_type = match (Format::detect(&name, content_type.as_deref(), &bytes), content_type) {
        (Some(f), _) => f.info().mime_types[0].to_string(),
        (None, Some(ct)) => ct,
        (None, None) => "application/octet-stream".into(),
    };
    let files = store.files.clone();
    let written =
        tokio::task::spawn_blocking(move || files.write(up.entry, &bytes)).await.map_err(Error::internal)??;
    let stored = written.stored.clone();
    let result = store.write_kb(move |txn| record_file(txn, &hash, &stored, &mime_type, now)).await;
    if result.is_ok() {
        written.keep();
    }
    result
}

/// Checks the signed upload URL of `token` before the request's body is read (the request
/// path calls it: the token is the operation's credential, so an unknown token costs the
/// server no body): 404 for an unknown token, 409 `UPLOAD_ALREADY_USED`, 400 `UPLOAD_EXPIRED`.
/// Returns the most bytes the URL takes (its `max_bytes`); [`upload`] checks all again in
/// its write.
pub async fn admit(store: &Store, token: &str) -> Result<u64> {
    let hash = crate::service::hash_secret(token);
    let now = now_ms();
    store.read(move |txn| usable_upload(txn, &hash, now).map(|up| up.max_bytes)).await
}

/// The upload URL whose token hashes to `hash`, when it can still take a file: 404, 409
/// `UPLOAD_ALREADY_USED` or 400 `UPLOAD_EXPIRED` otherwise.
fn usable_upload(txn: &ReadTransaction, hash: &[u8; 32], now: i64) -> Result<Upload> {
    let found = store::get::<_, Upload, _>(&txn.open_table(tables::TOKENHASH_UPLOAD)?, hash)?;
    let up = found.ok_or_else(|| Error::not_found("upload URL"))?;
    usable(&up, now)?;
    Ok(up)
}

/// 409 `UPLOAD_ALREADY_USED` or 400 `UPLOAD_EXPIRED` when `up` can no longer take a file.
fn usable(up: &Upload, now: i64) -> Result<()> {
    if up.used {
        return Err(Error::new(Code::UploadAlreadyUsed, "this upload URL was already used; create a new entry"));
    }
    if now > up.expires_at {
        return Err(Error::new(Code::UploadExpired, "this upload URL has expired; create a new entry"));
    }
    Ok(())
}

/// 413 when `size` bytes are more than `up` takes, 400 for none.
fn fits(up: &Upload, size: u64) -> Result<()> {
    if size > up.max_bytes {
        return Err(Error::new(Code::PayloadTooLarge, format!("the file exceeds {} bytes", up.max_bytes)));
    }
    if size == 0 {
        return Err(Error::invalid("body", "the file is empty"));
    }
    Ok(())
}

/// The upload's write: checks the URL and the entry again, then puts the records that name
/// the file written (`stored`).
fn record_file(
    txn: &WriteTransaction,
    hash: &[u8; 32],
    stored: &StoredFile,
    mime_type: &str,
    now: i64,
) -> Result<Uploaded> {
    let mut uploads = txn.open_table(tables::TOKENHASH_UPLOAD)?;
    let mut up: Upload = store::get(&uploads, hash)?.ok_or_else(|| Error::not_found("upload URL"))?;
    usable(&up, now)?;
    fits(&up, stored.size)?;
    let found = store::kb::entry(txn, up.entry)?;
    let mut entry = found.ok_or_else(|| Error::not_found("knowledge-base entry"))?;
    let mut source = knowledge::source_in(txn, up.entry)?;
    let file = source.file.get_or_insert_with(Default::default);
    file.size = stored.size;
    file.mime_type = mime_type.to_string();
    let uploaded = Uploaded { entry: up.entry, size: file.size, mime_type: file.mime_type.clone() };
    knowledge::put_source(txn, up.entry, &source)?;
    store::kb::put_stored_file(txn, up.entry, stored)?;
    entry.move_to(KbStatus::FileUploaded);
    entry.updated_at = now;
    store::kb::summary::put_entry(txn, &entry)?;
    knowledge::add_job(txn, up.entry)?;
    up.used = true;
    store::put(&mut uploads, hash, &up)?;
    Ok(uploaded)
}
