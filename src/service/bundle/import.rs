//! Importing a bundle: read and check it whole (nothing is written for a bad bundle), plan the
//! replica and its entries (validated as a create body is), check the quotas, then write the
//! uploaded files and, in one write transaction, the replica, its embed origins and every
//! entry with its text, chunks and vectors (all or nothing: a failure or a crash before the
//! commit leaves no replica and no entry; files written before it are removed).
//!
//! Vectors are kept when this server serves the bundle's embedding model with the same id,
//! the same fingerprint (files and arithmetic) and the same segmentation version: the entries
//! then become `READY` as soon as the indexer applied them, with no embedding. Otherwise the
//! replica gets `embedding_model` (else the bundle's model when served here, else the default)
//! and its entries are embedded again in the background (`search::embedding`).

use std::io::Read;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::archive::{self, Unpacked};
use super::export::entry_path;
use super::export::{HISTORY_MESSAGES, HISTORY_USERS};
use super::format::{decode_vectors, ChunkMember, EntryMeta, HistoryMessage, HistoryUser, TextMember, VectorSet};
use super::BundleError;
use crate::backup::Progress;
use crate::embed::catalog::Embedders;
use crate::embed::Embedder;
use crate::error::{Code, Error, Result};
use crate::models::Models;
use crate::search::vectors::{passage_text, text_key, SEGMENTATION_VERSION};
use crate::service::replicas::{self, LlmInput, ReplicaInput};
use crate::store::kv::WriteTransaction;
use crate::store::records::{Chunk, ChunkVector, KbEntry, KbKind, KbSource, KbStatus, KbText, Replica};
use crate::store::{codec, kb, next_seq, now_ms, replica_index, Sequence, Store};

/// Where and how to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The organization the replica is made in.
    pub org: Uuid,
    /// Its owner: a user id or e-mail of the organization.
    pub owner: String,
    /// Its slug; `None` keeps the bundle's (409 `SLUG_TAKEN` when taken).
    pub slug: Option<String>,
    /// Its embedding model (an id of this server's catalog); `None`: the bundle's when served
    /// here, else the default.
    pub embedding_model: Option<String>,
    /// Most bytes the bundle may inflate to.
    pub max_inflated: u64,
    /// The server's default quotas: replicas and knowledge-base entries per organization.
    pub default_max: (u64, u64),
}

/// What an import made (the answer of `POST /v1/replicas/import`, printed as JSON by
/// `replicad replicas import`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Imported {
    /// The new replica's id and slug.
    #[serde(rename = "replicaUUID")]
    pub replica_uuid: Uuid,
    pub slug: String,
    /// Entries, chunks and original files made.
    pub entries: u64,
    pub chunks: u64,
    pub files: u64,
    /// Chunks whose vectors were taken from the bundle (no embedding).
    pub vectors_reused: u64,
    /// History items made (with a bundle holding the history), and the users of the history
    /// created in the organization (the others were found there).
    pub messages: u64,
    pub users_created: u64,
    /// The replica's embedding model (none without an embedding catalog).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding_model: Option<String>,
    /// Whether its entries are being embedded again in the background (another model, files
    /// or segmentation than the bundle's vectors were made with).
    pub reembedding: bool,
    /// The replica's language model.
    pub llm_model: String,
    /// The bundle's language model when this server does not serve it (the replica got the
    /// default, `llmModel`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_model_replaced: Option<String>,
    /// The integrations to connect again (their tokens are never in a bundle).
    pub integrations_to_reconnect: Vec<String>,
    /// Wall time, ms.
    pub millis: u64,
}

/// An entry ready to write (its id given at the write).
struct PlannedEntry {
    entry: KbEntry,
    source: KbSource,
    text: Option<Vec<u8>>,
    chunks: Vec<Vec<u8>>,
    vectors: Vec<(u32, ChunkVector)>,
    original: Option<Vec<u8>>,
    /// Queued for the ingestion worker (a fetch, an extraction, an auto-refresh).
    job: bool,
    /// Its id where it was exported (the history's sources name it).
    source_id: u64,
}

/// The replica and entries to write.
struct Plan {
    replica: Replica,
    origins: Vec<String>,
    entries: Vec<PlannedEntry>,
    summary: Imported,
    /// The history's users and items, when the bundle holds them.
    history: Option<(Vec<HistoryUser>, Vec<HistoryMessage>)>,
    /// The server's default quotas ([`ImportOptions::default_max`]).
    default_max: (u64, u64),
}

/// Imports the bundle read from `input` (`size` bytes, for the progress) into `opts.org` (see
/// the module documentation). Errors: a bad bundle ([`BundleError`]: 400 `INVALID_BUNDLE`,
/// 400 `BUNDLE_FORMAT_UNSUPPORTED`, 413); 400 for an owner or embedding model this server does
/// not have, or a configuration a create would refuse; 409 `SLUG_TAKEN`; 429
/// `REPLICA_QUOTA_EXCEEDED` / `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`; the store's. Nothing is
/// written on any error.
pub async fn import(
    store: &Store,
    embedders: Option<Arc<Embedders>>,
    models: Models,
    input: Box<dyn Read + Send>,
    size: u64,
    opts: ImportOptions,
    mut progress: Box<dyn FnMut(Progress) + Send>,
) -> Result<Imported> {
    let started = Instant::now();
    let o = opts.clone();
    let plan = tokio::task::spawn_blocking(move || {
        let unpacked = archive::read(input, size, o.max_inflated, &mut *progress)?;
        plan(&unpacked, embedders.as_deref(), &models, &o)
    })
    .await
    .map_err(Error::internal)??;
    let (org, n) = (opts.org, plan.entries.len() as u64);
    store
        .read(move |txn| {
            let (replicas, _) = replica_index::count(txn, org)?;
            crate::service::quotas::check_room(txn, org, replicas, n, opts.default_max)
        })
        .await?;
    let summary = write(store, plan, opts.owner).await?;
    Ok(Imported { millis: started.elapsed().as_millis() as u64, ..summary })
}

/// The replica and entries of `bundle`, checked (see [`import`]). Blocking (a model's
/// fingerprint may be computed).
fn plan(bundle: &Unpacked, embedders: Option<&Embedders>, models: &Models, opts: &ImportOptions) -> Result<Plan> {
    let m = &bundle.manifest;
    let set = m.vector_sets.first();
    if let Some(set) = set {
        check_dimension(set, embedders)?;
    }
    let target = target_model(m.replica.llm.embedding_model.as_deref(), set, embedders, opts)?;
    let reuse = match (set, &target) {
        (Some(set), Some(t)) => {
            set.model == t.id() && m.segmentation_version == SEGMENTATION_VERSION && set.fingerprint == t.fingerprint()
        }
        _ => false,
    };
    let served = models.contains(&m.replica.llm.model);
    let mut input = replica_input(&m.replica, opts.slug.clone());
    input.llm.model = Some(if served { m.replica.llm.model.clone() } else { models.default_id().to_string() });
    input.llm.embedding_model = target.as_ref().map(|t| t.id().to_string()).or(m.replica.llm.embedding_model.clone());
    let mut replica = replicas::from_body(&input, models, embedders)?;
    replica.org = opts.org;
    let model_id = target.as_ref().map(|t| t.id().to_string());
    let mut entries = Vec::new();
    for i in 0..m.counts.entries as usize {
        entries.push(plan_entry(bundle, i, set.filter(|_| reuse), model_id.as_deref())?);
    }
    let history = match m.with_history {
        true => {
            let users: Vec<HistoryUser> = bundle.json(HISTORY_USERS)?;
            let items: Vec<HistoryMessage> = bundle.json(HISTORY_MESSAGES)?;
            super::history::check(&users, &items)?;
            Some((users, items))
        }
        false => None,
    };
    let summary = Imported {
        replica_uuid: Uuid::nil(),
        slug: replica.slug.clone(),
        entries: entries.len() as u64,
        chunks: entries.iter().map(|e| e.chunks.len() as u64).sum(),
        files: entries.iter().filter(|e| e.original.is_some()).count() as u64,
        vectors_reused: entries.iter().map(|e| e.vectors.len() as u64).sum(),
        messages: history.as_ref().map_or(0, |(_, items)| items.len() as u64),
        users_created: 0,
        embedding_model: model_id,
        reembedding: target.is_some() && !reuse && entries.iter().any(|e| !e.chunks.is_empty()),
        llm_model: replica.llm.model.clone(),
        llm_model_replaced: (!served).then(|| m.replica.llm.model.clone()),
        integrations_to_reconnect: m.integrations_to_reconnect.clone(),
        millis: 0,
    };
    let origins = m.replica.embed_allowed_origins.clone();
    Ok(Plan { replica, origins, entries, summary, history, default_max: opts.default_max })
}

/// Refuses vectors of another dimension than the model of the same id here.
fn check_dimension(set: &VectorSet, embedders: Option<&Embedders>) -> Result<(), BundleError> {
    match embedders.and_then(|e| e.get(&set.model)) {
        Some(model) if model.dimension() != set.dimension as usize => Err(BundleError::ModelDimension {
            model: set.model.clone(),
            bundle: set.dimension,
            served: model.dimension(),
        }),
        _ => Ok(()),
    }
}

/// The embedding model of the new replica (none without a catalog): the one asked for (400
/// when not served), else the bundle's replica's or vectors' model when served, else the
/// default.
fn target_model(
    named: Option<&str>,
    set: Option<&VectorSet>,
    embedders: Option<&Embedders>,
    opts: &ImportOptions,
) -> Result<Option<Arc<dyn Embedder>>> {
    let Some(catalog) = embedders else { return Ok(None) };
    if let Some(asked) = &opts.embedding_model {
        let found = catalog.get(asked);
        let ids = catalog.ids().join(", ");
        return found.map(Some).ok_or_else(|| {
            Error::invalid(
                "embeddingModel",
                format!("{asked:?} is not in this server's embedding-model catalog ({ids})"),
            )
        });
    }
    let bundled = named.and_then(|n| catalog.get(n)).or_else(|| set.and_then(|s| catalog.get(&s.model)));
    Ok(Some(bundled.unwrap_or_else(|| catalog.default_model())))
}

/// The create body of `config` (validated by `replicas::from_body` as a create is).
fn replica_input(c: &super::format::ReplicaConfig, slug: Option<String>) -> ReplicaInput {
    ReplicaInput {
        name: c.name.clone(),
        short_description: c.short_description.clone(),
        greeting: c.greeting.clone(),
        owner_id: String::new(),
        slug: slug.unwrap_or_else(|| c.slug.clone()),
        llm: LlmInput {
            model: None,
            memory_mode: Some(c.llm.memory_mode.clone()),
            system_message: c.llm.system_message.clone(),
            embedding_model: None,
        },
        purpose: c.purpose.clone(),
        kind: Some(c.kind.clone()),
        private: Some(c.private),
        tags: c.tags.clone(),
        suggested_questions: c.suggested_questions.clone(),
        whitelist_emails: c.whitelist_emails.clone(),
        profile_image: c.profile_image.clone(),
        voice_preview_text: c.voice_preview_text.clone(),
        voice_enabled: Some(c.voice_enabled),
        video_enabled: Some(c.video_enabled),
        is_every_conversation_accessible_by_support: Some(c.is_every_conversation_accessible_by_support),
        is_private_conversations_enabled: Some(c.is_private_conversations_enabled),
        voice_vendor_id: c.voice_vendor_id.clone(),
        system_message: None,
    }
}

/// Entry `i` of `bundle`, with the vectors of `reuse` (the set kept) under `model`.
fn plan_entry(bundle: &Unpacked, i: usize, reuse: Option<&VectorSet>, model: Option<&str>) -> Result<PlannedEntry> {
    let path = entry_path(i, "entry.json");
    let meta: EntryMeta = bundle.json(&path)?;
    let bad = |why: String| BundleError::Member { path: path.clone(), why };
    let kind = KbKind::parse(&meta.kind).ok_or_else(|| bad(format!("unknown type {:?}", meta.kind)))?;
    let status = KbStatus::parse(&meta.status).ok_or_else(|| bad(format!("unknown status {:?}", meta.status)))?;
    let text: Option<TextMember> = match bundle.members.contains_key(&entry_path(i, "text.json")) {
        true => Some(bundle.json(&entry_path(i, "text.json"))?),
        false => None,
    };
    let chunks: Vec<Chunk> = bundle
        .json::<Vec<ChunkMember>>(&entry_path(i, "chunks.json"))?
        .into_iter()
        .map(|c| Chunk { title: c.title, text: c.text, page: c.page })
        .collect();
    if chunks.len() != meta.chunks as usize {
        return Err(bad(format!("{} chunks, {} in chunks.json", meta.chunks, chunks.len())).into());
    }
    let original = match meta.original {
        true => Some(bundle.get(&entry_path(i, "original"))?.to_vec()),
        false => None,
    };
    let vectors = planned_vectors(bundle, i, &chunks, reuse, model)?;
    let content =
        text.is_some() && matches!(status, KbStatus::ProcessedText | KbStatus::VectorCreated | KbStatus::Ready);
    let (status, job, error) = match status {
        _ if content => (KbStatus::ProcessedText, kind == KbKind::Website && meta.auto_refresh, None),
        KbStatus::Unprocessable => (KbStatus::Unprocessable, false, meta.error.clone()),
        KbStatus::New if meta.url.is_some() => (KbStatus::New, true, None),
        KbStatus::FileUploaded if original.is_some() => (status, true, None),
        KbStatus::RawText if text.is_some() => (status, true, None),
        _ => {
            (KbStatus::Unprocessable, false, Some("the entry was not processed before its replica was exported".into()))
        }
    };
    let entry = KbEntry {
        id: 0,
        replica: Uuid::nil(),
        org: Uuid::nil(),
        kind,
        status,
        title: meta.title.clone(),
        generated_title: meta.generated_title.clone(),
        language: meta.language.clone(),
        auto_refresh: meta.auto_refresh,
        summary: meta.summary.clone(),
        chunk_count: if content { chunks.len() as u32 } else { 0 },
        revision: u64::from(content),
        error,
        created_at: meta.created_at,
        updated_at: meta.updated_at,
    };
    let text = text.map(|t| codec::encode(&KbText { raw: t.raw, processed: t.processed })).transpose()?;
    let chunks = if content { chunks.iter().map(codec::encode).collect::<Result<Vec<_>>>()? } else { Vec::new() };
    Ok(PlannedEntry { entry, source: meta.source(), text, chunks, vectors, original, job, source_id: meta.source_id })
}

/// The vectors of entry `i` as records under `model`, when `reuse` keeps them; checked (layout,
/// dimension, chunk indexes) whenever the bundle holds them.
fn planned_vectors(
    bundle: &Unpacked,
    i: usize,
    chunks: &[Chunk],
    reuse: Option<&VectorSet>,
    model: Option<&str>,
) -> Result<Vec<(u32, ChunkVector)>> {
    let path = entry_path(i, "vectors.bin");
    let (Some(bytes), Some(set)) = (bundle.members.get(&path), bundle.manifest.vector_sets.first()) else {
        return Ok(Vec::new());
    };
    let decoded = decode_vectors(&path, bytes, set.dimension)?;
    let (Some(_), Some(model)) = (reuse, model) else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(decoded.len());
    for v in decoded {
        let chunk = chunks.get(v.chunk as usize).ok_or_else(|| BundleError::Vectors {
            path: path.clone(),
            why: format!("chunk {} is past the entry's {} chunks", v.chunk, chunks.len()),
        })?;
        let key = text_key(&passage_text(chunk));
        out.push((
            v.chunk,
            ChunkVector { model: model.to_string(), text_key: key, vector: v.vector, sentences: Some(v.sentences) },
        ));
    }
    Ok(out)
}

/// Writes `plan` owned by `owner`: the entries' ids reserved, the files written, then one
/// transaction; the files are kept once it committed (removed otherwise).
async fn write(store: &Store, plan: Plan, owner: String) -> Result<Imported> {
    let n = plan.entries.len();
    let ids: Vec<u64> = store.write(move |txn| (0..n).map(|_| next_seq(txn, Sequence::KbEntry)).collect()).await?;
    let files = store.files.clone();
    let originals: Vec<(usize, Vec<u8>)> =
        plan.entries.iter().enumerate().filter_map(|(i, e)| e.original.clone().map(|b| (i, b))).collect();
    let ids_for_files = ids.clone();
    let written = tokio::task::spawn_blocking(move || {
        originals
            .into_iter()
            .map(|(i, bytes)| Ok((i, files.write(ids_for_files[i], &bytes)?)))
            .collect::<Result<Vec<_>>>()
    })
    .await
    .map_err(Error::internal)??;
    let mut replica = plan.replica.clone();
    let now = now_ms();
    (replica.id, replica.created_at, replica.updated_at) = (Uuid::now_v7(), now, now);
    let stored: Vec<(usize, crate::store::records::StoredFile)> =
        written.iter().map(|(i, w)| (*i, w.stored.clone())).collect();
    let plan = Arc::new(Plan { replica, ..plan });
    let (p, ids) = (plan.clone(), Arc::new(ids));
    let users_created =
        store.write_kb(move |txn| write_in(txn, &p, &owner, &ids, &stored)).await.map_err(|e| match e.code {
            Code::SlugTaken => {
                Error::new(Code::SlugTaken, format!("{}: import it under another slug (--slug, ?slug=)", e.message))
            }
            _ => e,
        })?;
    written.into_iter().for_each(|(_, w)| w.keep());
    Ok(Imported { replica_uuid: plan.replica.id, users_created, ..plan.summary.clone() })
}

/// The import's one transaction (may run more than once: everything comes from its
/// arguments); returns the history's users it created.
fn write_in(
    txn: &WriteTransaction,
    plan: &Plan,
    owner: &str,
    ids: &[u64],
    stored: &[(usize, crate::store::records::StoredFile)],
) -> Result<u64> {
    let mut replica = plan.replica.clone();
    let (org, id) = (replica.org, replica.id);
    replicas::insert_in(txn, &mut replica, owner, plan.default_max.0)?;
    crate::service::embed::put_origins_in(txn, org, id, &plan.origins)?;
    for (i, planned) in plan.entries.iter().enumerate() {
        let entry = KbEntry { id: ids[i], replica: id, org, ..planned.entry.clone() };
        crate::service::quotas::count_kb_entry_in(txn, org, plan.default_max.1, None)?;
        if let Some(url) = &planned.source.url {
            crate::service::knowledge::claim_url(txn, id, url, entry.id)?;
        }
        kb::put_source(txn, entry.id, &planned.source)?;
        if let Some(text) = &planned.text {
            kb::put_encoded_text(txn, entry.id, text)?;
        }
        kb::put_encoded_chunks(txn, entry.id, &planned.chunks)?;
        kb::put_vectors(txn, entry.id, &planned.vectors, planned.chunks.len() as u32)?;
        if let Some((_, file)) = stored.iter().find(|(j, _)| *j == i) {
            kb::put_stored_file(txn, entry.id, file)?;
        }
        kb::summary::put_entry(txn, &entry)?;
        kb::add_to_replica(txn, id, entry.id)?;
        if entry.revision > 0 {
            kb::enqueue(txn, entry.id, entry.revision)?;
        }
        if planned.job {
            crate::service::knowledge::add_job(txn, entry.id)?;
        }
    }
    let Some((users, items)) = &plan.history else { return Ok(0) };
    let entries = plan.entries.iter().zip(ids).map(|(e, id)| (e.source_id, *id)).collect();
    super::history::write_in(txn, (org, id), users, items, &entries)
}
