//! Exporting a replica: everything is read from one store snapshot (the uploaded files pinned
//! first, so a deletion committed meanwhile cannot remove a file the snapshot names), so the
//! bundle holds exactly the writes acknowledged before it began while the server keeps
//! serving; then the members and the manifest are made and the archive is written.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::archive::{self, member};
use super::format::{
    encode_vectors, ChunkMember, ChunkVectors, Counts, EntryMeta, HistoryMessage, HistoryUser, Manifest, ReplicaConfig,
    TextMember, VectorSet,
};
use super::FORMAT;
use crate::backup::Progress;
use crate::embed::catalog::Embedders;
use crate::error::{Error, Result};
use crate::search::vectors::{model_of, sentences_of, SEGMENTATION_VERSION};
use crate::store::records::{Chunk, KbEntry, KbSource, KbText, Replica, StoredFile};
use crate::store::{kb, replica_index, Snapshot, Store};

/// A replica named on the command line: its uuid, or its slug in the organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplicaRef {
    Id(Uuid),
    Slug(String),
}

impl ReplicaRef {
    /// `text` as a uuid when it is one, else as a slug.
    pub fn parse(text: &str) -> ReplicaRef {
        Uuid::parse_str(text).map_or_else(|_| ReplicaRef::Slug(text.to_string()), ReplicaRef::Id)
    }
}

/// What an export wrote (printed as JSON on stdout by `replicad replicas export`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Exported {
    /// The archive written (absolute); `None` when it was streamed.
    pub file: Option<PathBuf>,
    /// The replica exported and its slug.
    #[serde(rename = "replicaUUID")]
    pub replica_uuid: Uuid,
    pub slug: String,
    /// Size of the archive, bytes.
    pub bytes: u64,
    pub counts: Counts,
    /// The embedding model of its vectors, when it holds some.
    pub embedding_model: Option<String>,
    /// The integrations to connect again after an import (their tokens are not carried).
    pub integrations_to_reconnect: Vec<String>,
    /// Wall time, ms.
    pub millis: u64,
}

/// A bundle ready to be written: its manifest and members, read from one snapshot.
pub struct Prepared {
    manifest: Manifest,
    members: Vec<(String, Vec<u8>)>,
    replica: Uuid,
    started: Instant,
}

/// One entry as read from the snapshot.
struct Read {
    entry: KbEntry,
    source: KbSource,
    text: Option<KbText>,
    chunks: Vec<Chunk>,
    vectors: Vec<ChunkVectors>,
    stored: Option<StoredFile>,
}

/// What the snapshot gave.
struct Snap {
    replica: Replica,
    origins: Vec<String>,
    integrations: Vec<String>,
    /// The replica's embedding model (with a model catalog).
    model: Option<String>,
    entries: Vec<Read>,
    /// Its history and the history's users, when asked for.
    history: Option<(Vec<HistoryUser>, Vec<HistoryMessage>)>,
}

/// Reads replica `r` of `org` and its knowledge base (and its history `with_history`) from one
/// snapshot of `store` (vectors of the replica's model in `embedders`, computed from the
/// chunks' current text), with the bytes of its uploaded files, into a bundle ready to write.
/// Errors: 404 when `org` has no such replica; 500 when an uploaded file is missing or
/// damaged; the store's.
pub async fn prepare(
    store: &Store,
    embedders: Option<Arc<Embedders>>,
    org: Uuid,
    r: ReplicaRef,
    with_history: bool,
) -> Result<Prepared> {
    let started = Instant::now();
    let pin = store.files.pin();
    let catalog = embedders.clone();
    let snap = store.read_scan(move |txn| read_snapshot(txn, catalog.as_deref(), org, (&r, with_history))).await?;
    let files = store.files.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        let originals = snap
            .entries
            .iter()
            .map(|e| e.stored.as_ref().map(|s| files.read(s)).transpose())
            .collect::<Result<Vec<_>>>()?;
        let set = vector_set(&snap, embedders.as_deref());
        Ok::<_, Error>(members_of(snap, originals, set, started))
    })
    .await
    .map_err(Error::internal)??;
    drop(pin);
    Ok(prepared)
}

fn read_snapshot(
    txn: &Snapshot,
    embedders: Option<&Embedders>,
    org: Uuid,
    (r, with_history): (&ReplicaRef, bool),
) -> Result<Snap> {
    let id = match r {
        ReplicaRef::Id(id) => Some(*id),
        ReplicaRef::Slug(slug) => crate::service::replicas::id_of_slug_in(txn, org, slug)?,
    };
    let replica = id
        .map(|id| replica_index::get_in(txn, id))
        .transpose()?
        .flatten()
        .filter(|r| r.org == org)
        .ok_or_else(|| Error::not_found("replica"))?;
    let model = embedders.map(|m| model_of(txn, m, replica.id)).transpose()?;
    let mut entries = Vec::new();
    for id in kb::ids_of_replica(txn, replica.id)? {
        let Some(entry) = kb::entry(txn, id)? else { continue };
        let chunks = kb::chunks(txn, id)?;
        let vectors = match &model {
            Some(model) => current_vectors(txn, id, &chunks, model)?,
            None => Vec::new(),
        };
        let (source, text, stored) = (kb::source_in(txn, id)?, kb::text(txn, id)?, kb::stored_file(txn, id)?);
        entries.push(Read { entry, source, text, chunks, vectors, stored });
    }
    Ok(Snap {
        history: with_history.then(|| super::history::read(txn, replica.id)).transpose()?,
        origins: crate::service::embed::allowed_origins_in(txn, replica.id)?,
        integrations: crate::service::integrations::connected_in(txn, replica.id)?
            .into_iter()
            .map(str::to_string)
            .collect(),
        replica,
        model,
        entries,
    })
}

/// The vectors of entry `id`'s `chunks` computed from their current text under `model`.
fn current_vectors(txn: &Snapshot, id: u64, chunks: &[Chunk], model: &str) -> Result<Vec<ChunkVectors>> {
    let mut out = Vec::new();
    for (chunk, v) in kb::vectors_of(txn, id)? {
        let Some(c) = chunks.get(chunk as usize) else { continue };
        let vector = v.vector.clone();
        if let Some(sentences) = sentences_of(Some(v), c, model) {
            out.push(ChunkVectors { chunk, vector, sentences });
        }
    }
    Ok(out)
}

/// The vector set of `snap` (its model's fingerprint read here: blocking), when it has vectors.
fn vector_set(snap: &Snap, embedders: Option<&Embedders>) -> Option<VectorSet> {
    let model = embedders?.get(snap.model.as_deref()?)?;
    let vectors = snap.entries.iter().flat_map(|e| &e.vectors);
    let (chunks, sentences) = vectors.fold((0u64, 0u64), |(c, s), v| (c + 1, s + v.sentences.len() as u64));
    (chunks > 0).then(|| VectorSet {
        model: model.id().to_string(),
        fingerprint: model.fingerprint(),
        dimension: model.dimension() as u32,
        chunks,
        sentences,
    })
}

/// The member of the history's users.
pub const HISTORY_USERS: &str = "history/users.json";
/// The member of the history's items.
pub const HISTORY_MESSAGES: &str = "history/messages.json";

/// The path of entry `i`'s member `name`.
pub fn entry_path(i: usize, name: &str) -> String {
    format!("entries/{i:05}/{name}")
}

fn json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// The members and the manifest of `snap`, the files' bytes in `originals` (one per entry).
fn members_of(snap: Snap, originals: Vec<Option<Vec<u8>>>, set: Option<VectorSet>, started: Instant) -> Prepared {
    let mut members = Vec::new();
    let mut counts = Counts::default();
    for (i, (e, original)) in snap.entries.into_iter().zip(originals).enumerate() {
        counts.entries += 1;
        counts.chunks += e.chunks.len() as u64;
        members.push((entry_path(i, "entry.json"), json(&EntryMeta::of(&e.entry, &e.source, original.is_some()))));
        if let Some(t) = e.text {
            members.push((entry_path(i, "text.json"), json(&TextMember { raw: t.raw, processed: t.processed })));
        }
        let chunks: Vec<ChunkMember> =
            e.chunks.into_iter().map(|c| ChunkMember { title: c.title, text: c.text, page: c.page }).collect();
        members.push((entry_path(i, "chunks.json"), json(&chunks)));
        if let (Some(set), false) = (&set, e.vectors.is_empty()) {
            counts.vectors += e.vectors.len() as u64;
            members.push((entry_path(i, "vectors.bin"), encode_vectors(set.dimension, &e.vectors)));
        }
        if let Some(bytes) = original {
            counts.files += 1;
            members.push((entry_path(i, "original"), bytes));
        }
    }
    if let Some((users, items)) = &snap.history {
        counts.messages = items.len() as u64;
        members.push((HISTORY_USERS.to_string(), json(users)));
        members.push((HISTORY_MESSAGES.to_string(), json(items)));
    }
    let manifest = Manifest {
        format: FORMAT,
        replicad: env!("CARGO_PKG_VERSION").to_string(),
        segmentation_version: SEGMENTATION_VERSION,
        created_at: crate::service::rfc3339(crate::store::now_ms()),
        replica: ReplicaConfig::of(&snap.replica, snap.origins),
        vector_sets: set.into_iter().collect(),
        counts,
        with_history: snap.history.is_some(),
        integrations_to_reconnect: snap.integrations,
        members: members.iter().map(|(p, b)| member(p, b)).collect(),
    };
    Prepared { manifest, members, replica: snap.replica.id, started }
}

impl Prepared {
    /// Writes the archive to `out` (blocking); returns `out` and what was written, `bytes`
    /// counted by `out`'s caller when it knows them (0 here).
    pub fn write<W: Write>(self, out: W, progress: &mut dyn FnMut(Progress)) -> Result<(W, Exported)> {
        let out = archive::write(out, &self.manifest, &self.members, progress)?;
        let m = self.manifest;
        let exported = Exported {
            file: None,
            replica_uuid: self.replica,
            slug: m.replica.slug,
            bytes: 0,
            counts: m.counts,
            embedding_model: m.vector_sets.first().map(|s| s.model.clone()),
            integrations_to_reconnect: m.integrations_to_reconnect,
            millis: self.started.elapsed().as_millis() as u64,
        };
        Ok((out, exported))
    }
}

/// The archive of `prepared` written to `out` on the blocking pool (the HTTP answer's
/// stream), `out` flushed and dropped there. Errors: `out`'s.
pub async fn export_to_writer<W: Write + Send + 'static>(prepared: Prepared, out: W) -> Result<Exported> {
    let job = tokio::task::spawn_blocking(move || {
        let (mut out, exported) = prepared.write(out, &mut |_| {})?;
        out.flush()?;
        drop(out);
        Ok::<_, Error>(exported)
    });
    job.await.map_err(Error::internal)?
}

/// `replicad replicas export`: replica `r` of `org` (its history `with_history`) written to `to` (absolute; replaced
/// atomically: the archive is written beside it, fsynced, then renamed; a failed export leaves
/// nothing). `progress` sees the bytes compressed. Errors as [`prepare`], and I/O at `to`.
pub async fn export_to_file(
    store: &Store,
    embedders: Option<Arc<Embedders>>,
    org: Uuid,
    (r, with_history): (ReplicaRef, bool),
    to: PathBuf,
    mut progress: Box<dyn FnMut(Progress) + Send>,
) -> Result<Exported> {
    let prepared = prepare(store, embedders, org, r, with_history).await?;
    let job = tokio::task::spawn_blocking(move || write_file(prepared, &to, &mut *progress));
    job.await.map_err(Error::internal)?
}

fn write_file(prepared: Prepared, to: &Path, progress: &mut dyn FnMut(Progress)) -> Result<Exported> {
    let name = to.file_name().ok_or_else(|| Error::internal(format!("{} is not a file name", to.display())))?;
    let parent = to.parent().unwrap_or(Path::new("/"));
    let partial = parent.join(format!(".{}.{}.part", name.to_string_lossy(), std::process::id()));
    let written = (|| {
        let file = std::fs::File::create(&partial)?;
        let (out, exported) = prepared.write(std::io::BufWriter::new(file), progress)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&partial, to)?;
        std::fs::File::open(parent)?.sync_all()?;
        Ok::<_, Error>(exported)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    let bytes = std::fs::metadata(to).map(|m| m.len()).unwrap_or(0);
    written.map(|e| Exported { file: Some(to.to_path_buf()), bytes, ..e })
}
