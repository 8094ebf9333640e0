//! Replica bundles over HTTP (docs/bundles.md): `GET /v1/replicas/{replicaUUID}/export` streams
//! a replica's bundle, `POST /v1/replicas/import` makes a replica of one.

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::query;
use super::{Operation, Serve};
use crate::app::App;
use crate::error::Result;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::{op, ARCHIVE_MEDIA};
use crate::service::bundle::{self, export, Imported, ReplicaRef};

/// The query of `GET /v1/replicas/{replicaUUID}/export`.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(default, rename_all = "camelCase")]
struct ExportParams {
    /// Carry the replica's history too: its chats, conversations and items, with their users.
    with_history: bool,
}

/// # `GET /v1/replicas/{replicaUUID}/export`
/// The replica's bundle (its history too with `withHistory=true`), streamed as it is written
/// (`application/gzip`, `Content-Disposition: attachment`), read from one snapshot of the
/// store. 404 when the organization has no such replica.
pub async fn export(app: Arc<App>, req: Req) -> Result<Reply> {
    let id = req.uuid_param("replicaUUID")?;
    let q: ExportParams = query::read(&req)?;
    let org = req.caller()?.org.id;
    let embedders = app.search.embedders.clone();
    let prepared = export::prepare(&app.store, embedders, org, ReplicaRef::Id(id), q.with_history).await?;
    let (tx, rx) = mpsc::channel(8);
    let name = format!("attachment; filename=\"replica-{id}.tar.gz\"");
    tokio::spawn(async move {
        if let Err(e) = export::export_to_writer(prepared, ChannelWriter::new(tx)).await {
            tracing::warn!(replica = %id, error = %e, "streaming a replica bundle failed (the client went away?)");
        }
    });
    Ok(Reply::stream(rx, ARCHIVE_MEDIA).with_header("content-disposition", &name))
}

/// The query of `POST /v1/replicas/import`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ImportParams {
    /// The owner of the new replica: a user id or e-mail of the organization.
    #[serde(rename = "ownerID")]
    owner_id: String,
    /// Its slug (default: the bundle's; 409 `SLUG_TAKEN` when taken).
    slug: Option<String>,
    /// Its embedding model, an id of this server's catalog (default: the bundle's when served
    /// here, else the server's default); fixed from then on, as every replica's.
    embedding_model: Option<String>,
}

/// # `POST /v1/replicas/import`
/// Makes a replica of the bundle in the body (at most `--max-upload-bytes` as sent,
/// `--max-bundle-bytes` inflated): 201 with what was made ([`Imported`]). Errors: 400
/// `INVALID_BUNDLE` / `BUNDLE_FORMAT_UNSUPPORTED`, 413, 400 for an unknown owner or model, 409
/// `SLUG_TAKEN` or a history user's clash, 429 quotas; nothing is written on any error.
pub async fn import(app: Arc<App>, req: Req) -> Result<Reply> {
    let q: ImportParams = query::read(&req)?;
    let org = req.caller()?.org.id;
    let opts = app.config.import_options(org, q.owner_id, q.slug, q.embedding_model);
    let (size, body) = (req.body.len() as u64, Box::new(std::io::Cursor::new(req.body.clone())));
    let embedders = app.search.embedders.clone();
    let imported =
        bundle::import(&app.store, embedders, app.models.clone(), body, size, opts, Box::new(|_| {})).await?;
    Ok(Reply::success(201, &imported))
}

/// A writer sending what it is given, in pieces of [`ChannelWriter::PIECE`] bytes, to a
/// response body (from a blocking task). A gone client is a broken pipe.
struct ChannelWriter {
    tx: mpsc::Sender<Bytes>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    const PIECE: usize = 256 << 10;

    fn new(tx: mpsc::Sender<Bytes>) -> ChannelWriter {
        ChannelWriter { tx, buf: Vec::with_capacity(Self::PIECE) }
    }

    fn send(&mut self) -> std::io::Result<()> {
        let piece = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(Self::PIECE)));
        self.tx.blocking_send(piece).map_err(|_| std::io::ErrorKind::BrokenPipe.into())
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= Self::PIECE {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.send()
    }
}

impl Drop for ChannelWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// The bundle operations' rows.
pub fn operations() -> Vec<Operation> {
    vec![
        op("GET", "/v1/replicas/{replicaUUID}/export", "exportReplica", "Replicas", "Export a replica as a bundle")
            .query_of::<ExportParams>()
            .ok_file(200, ARCHIVE_MEDIA, "ReplicaBundle")
            .describe(
                "The replica in one file (docs/bundles.md): a gzip'd tar with a manifest (format, versions, the \
                segmentation version of its sentence vectors, its configuration, the embedding model of its vectors \
                with a fingerprint of the model's files and arithmetic, counts and the SHA-256 of every member), its \
                knowledge-base entries with their original files, extracted text, chunks, vectors and summaries, \
                website refresh settings, and its embed widget's allowed origins; with `withHistory=true` its chat \
                history with the history's users. Never bot tokens, identity secrets or usage counts. Read from one \
                snapshot while the server keeps serving; streamed with `Content-Disposition: attachment`.",
            )
            .serve(Access::Org, handler!(export)),
        op("POST", "/v1/replicas/import", "importReplica", "Replicas", "Import a replica bundle")
            .query_of::<ImportParams>()
            .archive_body("ReplicaBundle")
            .ok_of::<Imported>(201)
            .creates("replicaUUID", "/replicaUUID")
            .extra(&[409, 413, 429])
            .describe(
                "Makes a replica of the bundle in the body (any content type: `application/gzip` or \
                `application/octet-stream`; at most the server's `--max-upload-bytes` as sent and \
                `--max-bundle-bytes` inflated) in the caller's organization, with new ids, owned by `ownerID`. Its \
                entries become `READY` without embedding when this server serves the bundle's embedding model with \
                the same fingerprint and segmentation version; otherwise they are embedded again in the background \
                (`reembedding`). A language model this server does not serve is replaced by its default \
                (`llmModelReplaced`). A bundle with history creates the history's users missing in the organization \
                (`usersCreated`); one whose id is another user's here refuses it (409 `USER_ID_TAKEN`). All or nothing: 400 `INVALID_BUNDLE` (truncated or corrupt, a member whose hash \
                differs from the manifest, a member path with `..` or absolute, vectors of another dimension than \
                their model's), 400 `BUNDLE_FORMAT_UNSUPPORTED` (a newer format), 413 (inflates past the limit), 409 \
                `SLUG_TAKEN`, 429 `REPLICA_QUOTA_EXCEEDED` / `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED` write nothing.",
            )
            .serve(Access::Org, handler!(import)),
    ]
}
