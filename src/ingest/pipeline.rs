//! The steps of one ingestion job: `kbid_job` rows in redb, scheduled by `super::queue`.
//!
//! An entry's status says which step comes next: `NEW` (a `website`: fetch it), `FILE_UPLOADED`
//! (extract the uploaded file), `RAW_TEXT` (chunk the extracted text and queue it for the
//! index: `PROCESSED_TEXT`; the indexer then moves it to `READY` once searches see it). Each step
//! is one write transaction that checks the entry is still at the status the step started
//! from, so a step is never applied twice and a PATCH or DELETE in between wins. The job row is
//! removed in the transaction of the last step. After a crash (even `kill -9`) the queue finds
//! the rows at start and resumes each entry from its stored status.
//!
//! Every run of a job is counted in its row before it starts ([`claim`]), and the count is
//! kept when the run fails or is cut short: a job whose runs were cut short [`MAX_ATTEMPTS`]
//! times (a crash, a `kill -9`; a clean stop takes its count back: [`unclaim`]) ends `UNPROCESSABLE`
//! instead of being tried forever, and `replicad check` lists the jobs already interrupted.
//! Transient fetch failures are retried with backoff within the same count; anything else ends
//! `UNPROCESSABLE` with the reason in `error.message`. Documents are parsed only in the
//! extraction sandbox (`super::sandbox`). A `website` entry with `autoRefresh` keeps its job: it
//! is fetched again every `--kb-refresh-interval`, and re-processed only when its text changed.

use super::content::{self, Naming, PreparedText};
use super::extract::Extracted;
use super::fetch::{FetchError, Fetcher};
use super::formats::Format;
use super::sandbox::{Sandbox, SandboxError};
use crate::error::Result;
use crate::store::kb;
use crate::store::kv::{ReadableTable, Reads, WriteTransaction};
use crate::store::records::{KbEntry, KbKind, KbSource, KbStatus, KbText, WebsiteMeta};
use crate::store::{self, now_ms, tables, Store};

/// Runs of one job (and attempts of a transiently failing fetch) before the entry ends
/// `UNPROCESSABLE`.
pub const MAX_ATTEMPTS: u32 = 4;

/// What the worker needs besides the store.
#[derive(Clone)]
pub struct Worker {
    pub fetcher: Fetcher,
    /// Where documents are parsed.
    pub sandbox: Sandbox,
    /// Time between re-fetches of `website` entries with `autoRefresh`, in milliseconds.
    pub refresh_ms: i64,
    /// Jobs run at the same time (`--ingest-concurrency`).
    pub concurrency: usize,
    /// Ends the worker at its next safe point: between two steps (each one write transaction;
    /// a restart resumes every job from its stored status).
    pub stop: crate::stop::Stop,
}

/// What [`claim`] found.
enum Claim {
    /// Run the job; its runs before this one.
    Run(u32),
    /// The row is gone (the entry was deleted or finished meanwhile).
    Gone,
    /// [`MAX_ATTEMPTS`] runs were already started and none finished.
    Exhausted,
}

/// Counts a run of job `id` in its row, before the run starts (see the module doc).
async fn claim(store: &Store, id: u64) -> Result<Claim> {
    store
        .write(move |txn| {
            let mut jobs = txn.open_table(tables::KBID_JOB)?;
            let Some((attempts, not_before)) = jobs.get(id)?.map(|v| v.value()) else { return Ok(Claim::Gone) };
            if attempts >= MAX_ATTEMPTS {
                return Ok(Claim::Exhausted);
            }
            jobs.insert(id, (attempts + 1, not_before))?;
            Ok(Claim::Run(attempts))
        })
        .await
}

/// Takes back the count of a run of each job of `ids` (runs aborted by a stop, not cut short
/// by a crash). A run aborted before its count was written gives its job one more try.
pub fn unclaim(txn: &crate::store::kv::WriteTransaction, ids: &[u64]) -> Result<()> {
    let mut jobs = txn.open_table(tables::KBID_JOB)?;
    for &id in ids {
        let Some((attempts, not_before)) = jobs.get(id)?.map(|v| v.value()) else { continue };
        jobs.insert(id, (attempts.saturating_sub(1), not_before))?;
    }
    Ok(())
}

/// Runs job `entry` once (see [`claim`]); an error (not an entry failure: those end
/// `UNPROCESSABLE` inside) is retried with backoff, and ends the entry `UNPROCESSABLE` after
/// [`MAX_ATTEMPTS`].
pub async fn run_or_retry(store: &Store, worker: &Worker, entry: u64) -> Result<()> {
    let attempts = match claim(store, entry).await? {
        Claim::Run(attempts) => attempts,
        Claim::Gone => return Ok(()),
        Claim::Exhausted => {
            tracing::error!(entry, "ingestion job interrupted {MAX_ATTEMPTS} times; giving up");
            let message = format!(
                "processing was interrupted {MAX_ATTEMPTS} times (the server stopped while working on it); \
                 delete the entry, or add the document again"
            );
            return fail(store, entry, None, message).await;
        }
    };
    let Err(e) = run_job(store, worker, entry, attempts).await else { return Ok(()) };
    if attempts + 1 < MAX_ATTEMPTS {
        tracing::error!(entry, error = %e, "ingestion step failed; will retry");
        crate::telemetry::ingest_outcome("retried");
        store.write(move |txn| reschedule(txn, entry, 1_000 << attempts)).await
    } else {
        tracing::error!(entry, error = %e, "ingestion step failed; giving up");
        let message = format!("processing failed after {MAX_ATTEMPTS} attempts (details in the server log)");
        fail(store, entry, None, message).await
    }
}

/// What one step needs from the store.
struct Job {
    entry: KbEntry,
    source: KbSource,
    file: Option<Vec<u8>>,
    /// The stored raw text of an `autoRefresh` website (compared with a re-fetch).
    raw: Option<String>,
}

async fn load(store: &Store, id: u64) -> Result<Option<Job>> {
    let files = store.files.clone();
    store // the blocking pool: the file may be 50 MiB, the stored text 2,000,000 characters
        .read_scan(move |txn| {
            let Some(entry) = kb::entry(txn, id)? else {
                return Ok(None);
            };
            let source = kb::source_in(txn, id)?;
            let file = match entry.status {
                KbStatus::FileUploaded => match kb::stored_file(txn, id)? {
                    Some(stored) => Some(files.read(&stored)?),
                    None => None,
                },
                _ => None,
            };
            let raw = match entry.kind {
                KbKind::Website if entry.auto_refresh => kb::text(txn, id)?.map(|t| t.raw),
                _ => None,
            };
            Ok(Some(Job { entry, source, file, raw }))
        })
        .await
}

/// Runs entry `id`'s next steps until it is queued for the index, failed, or must wait.
async fn run_job(store: &Store, worker: &Worker, id: u64, attempts: u32) -> Result<()> {
    let refresh_ms = worker.refresh_ms;
    while !worker.stop.requested() {
        let Some(job) = load(store, id).await? else {
            return store.write(move |txn| drop_job(txn, id)).await;
        };
        let status = job.entry.status;
        match (status, job.entry.kind) {
            (KbStatus::New, KbKind::Website) => match fetch_page(worker, &job).await {
                Ok((extracted, meta, format)) => save_raw(store, id, status, extracted, Some(meta), format).await?,
                Err(e) if e.is_transient() && attempts + 1 < MAX_ATTEMPTS => {
                    let delay = 2_000i64 << attempts;
                    tracing::warn!(entry = id, error = %e.message, delay_ms = delay, "fetch failed; will retry");
                    crate::telemetry::ingest_outcome("retried");
                    return store.write(move |txn| reschedule(txn, id, delay)).await;
                }
                Err(e) => return fail(store, id, Some(status), e.message).await,
            },
            (KbStatus::FileUploaded, KbKind::File) => match extract_file(&worker.sandbox, job).await {
                Ok((extracted, format)) => save_raw(store, id, status, extracted, None, format).await?,
                Err(e) => return fail(store, id, Some(status), e.to_string()).await,
            },
            (KbStatus::RawText, _) => {
                if process(store, id, refresh_ms).await? {
                    crate::telemetry::ingest_outcome("processed");
                    return Ok(());
                }
            }
            (KbStatus::ProcessedText | KbStatus::VectorCreated | KbStatus::Ready, KbKind::Website)
                if job.entry.auto_refresh =>
            {
                match fetch_page(worker, &job).await {
                    Ok((extracted, meta, format)) if job.raw.as_deref() != Some(extracted.text.as_str()) => {
                        tracing::info!(entry = id, "auto-refresh: the page changed; re-processing");
                        save_raw(store, id, status, extracted, Some(meta), format).await?
                    }
                    Ok(_) => return store.write(move |txn| refresh_later(txn, id, refresh_ms)).await,
                    Err(e) => {
                        tracing::warn!(entry = id, error = %e.message, "auto-refresh fetch failed; keeping the content");
                        return store.write(move |txn| refresh_later(txn, id, refresh_ms)).await;
                    }
                }
            }
            // Anything else (a PATCH gave it text, it failed, it was re-queued): nothing to do.
            _ => return store.write(move |txn| drop_job(txn, id)).await,
        }
    }
    Ok(())
}

async fn fetch_page(worker: &Worker, job: &Job) -> Result<(Extracted, WebsiteMeta, Format), FetchError> {
    let url = job.source.url.clone().unwrap_or_default();
    let page = worker.fetcher.fetch(&url).await?;
    let path = url::Url::parse(&page.final_url).map(|u| u.path().to_string()).unwrap_or_default();
    let Some(format) = Format::detect_fetched(&path, page.content_type.as_deref(), &page.bytes) else {
        let ct = page.content_type.unwrap_or_default();
        return Err(FetchError::permanent(format!("the page's content type {ct:?} is not a supported format")));
    };
    let meta = WebsiteMeta {
        final_url: page.final_url.clone(),
        status: page.status,
        content_type: page.content_type.clone().unwrap_or_default(),
        page_title: None,
        fetched_at: now_ms(),
    };
    let extracted =
        worker.sandbox.extract(format, page.bytes, "page").await.map_err(|e| FetchError::permanent(e.to_string()))?;
    Ok((extracted, meta, format))
}

/// Why an uploaded file has no text; the text is the entry's `error.message`.
#[derive(Debug, thiserror::Error)]
enum FileError {
    /// The entry records no stored file.
    #[error("the uploaded file is missing")]
    Missing,
    /// The file (named `0`) is of no supported format.
    #[error("{0:?} is not a supported file type (see GET /v1/knowledge-base/file-types)")]
    Unsupported(String),
    /// The extraction failed.
    #[error(transparent)]
    Extract(#[from] SandboxError),
}

/// Extracts the uploaded file of `job` in the sandbox.
async fn extract_file(sandbox: &Sandbox, job: Job) -> std::result::Result<(Extracted, Format), FileError> {
    let Some(bytes) = job.file else { return Err(FileError::Missing) };
    let file = job.source.file.unwrap_or_default();
    let Some(format) = Format::detect(&file.name, Some(&file.mime_type), &bytes) else {
        return Err(FileError::Unsupported(file.name));
    };
    Ok((sandbox.extract(format, bytes, "file").await?, format))
}

/// Stores the extracted text: status `from` → `RAW_TEXT`.
async fn save_raw(
    store: &Store,
    id: u64,
    from: KbStatus,
    extracted: Extracted,
    website: Option<WebsiteMeta>,
    format: Format,
) -> Result<()> {
    let now = now_ms();
    let (title, text) = (extracted.title, extracted.text);
    // Encoded before the write: the writer only puts the finished record (see `content`).
    let text = store::codec::encode(&KbText { raw: text, processed: String::new() })?;
    store
        .write_kb(move |txn| {
            let found = kb::entry(txn, id)?;
            let Some(mut e) = found.filter(|e| e.status == from && from.may_become(KbStatus::RawText)) else {
                return Ok(());
            };
            let mut source = kb::source_in(txn, id)?;
            source.format = Some(format.info().name.to_string());
            if let Some(mut w) = website.clone() {
                w.page_title = title.clone();
                source.website = Some(w);
            }
            kb::put_source(txn, id, &source)?;
            if let Some(t) = title.clone().filter(|t| !t.trim().is_empty()) {
                e.generated_title = Some(t.trim().chars().take(200).collect());
            }
            kb::put_encoded_text(txn, id, &text)?;
            e.move_to(KbStatus::RawText);
            e.updated_at = now;
            store::kb::summary::put_entry(txn, &e)
        })
        .await
}

/// Chunks the raw text and queues it for the index (`RAW_TEXT` → `PROCESSED_TEXT`); the job
/// ends, or waits for the next re-fetch of an `autoRefresh` website. The text is chunked before
/// the write (see `content`); `false` (nothing written) when the entry left `RAW_TEXT` or
/// changed its title meanwhile: the caller loads it again.
async fn process(store: &Store, id: u64, refresh_ms: i64) -> Result<bool> {
    let read = store
        .read_scan(move |txn| {
            let found = kb::entry(txn, id)?;
            let Some(e) = found.filter(|e| e.status == KbStatus::RawText) else { return Ok(None) };
            let raw = kb::text(txn, id)?.unwrap_or_default().raw;
            Ok(Some((e, raw)))
        })
        .await?;
    let Some((read, raw)) = read else { return Ok(false) };
    let text = PreparedText::prepare(Naming::of(&read), raw).await?;
    let now = now_ms();
    store
        .write_kb(move |txn| {
            let found = kb::entry(txn, id)?;
            // At `RAW_TEXT` and the same revision, the stored text is the one read.
            let still = |e: &KbEntry| e.status == KbStatus::RawText && e.revision == read.revision && text.fits(e);
            let Some(mut e) = found.filter(still) else { return Ok(false) };
            content::write_content(txn, &mut e, &text)?;
            e.updated_at = now;
            store::kb::summary::put_entry(txn, &e)?;
            match e.kind == KbKind::Website && e.auto_refresh {
                true => refresh_later(txn, id, refresh_ms)?,
                false => drop_job(txn, id)?,
            }
            Ok(true)
        })
        .await
}

/// Ends the entry `UNPROCESSABLE` with `message` (if it is still at status `from`, when given)
/// and drops its job.
async fn fail(store: &Store, id: u64, from: Option<KbStatus>, message: String) -> Result<()> {
    tracing::info!(entry = id, reason = %message, "knowledge-base entry unprocessable");
    crate::telemetry::ingest_outcome("unprocessable");
    let now = now_ms();
    store
        .write_kb(move |txn| {
            let found = kb::entry(txn, id)?;
            if let Some(mut e) = found.filter(|e| from.is_none_or(|f| e.status == f)) {
                e.move_to(KbStatus::Unprocessable);
                e.error = Some(message.clone());
                e.updated_at = now;
                store::kb::summary::put_entry(txn, &e)?;
            }
            drop_job(txn, id)
        })
        .await
}

/// Adds an ingestion job for `entry` (see the module documentation), runnable now; the other nodes hear of
/// it at the commit (`store::notify::KB`). Errors: the store's.
pub fn add_job(txn: &WriteTransaction, entry: u64) -> Result<()> {
    txn.open_table(tables::KBID_JOB)?.insert(entry, (0u32, 0i64))?;
    txn.notify_on_commit(store::notify::KB);
    Ok(())
}

/// Removes the job of `entry`, if any (its entry is deleted, done, or given new text). Errors:
/// the store's.
pub fn drop_job(txn: &WriteTransaction, entry: u64) -> Result<()> {
    txn.open_table(tables::KBID_JOB)?.remove(entry)?;
    Ok(())
}

/// The number of jobs queued (the metrics' queue depth). Errors: the store's.
pub fn job_count(txn: &impl Reads) -> Result<u64> {
    txn.read_table(tables::KBID_JOB)?.len()
}

/// The jobs whose run count is not zero, `(entry, runs)`: runs started and never finished (a
/// crash, or an entry that keeps failing). Errors: the store's.
pub fn interrupted_jobs(txn: &impl Reads) -> Result<Vec<(u64, u32)>> {
    let mut jobs = Vec::new();
    for row in txn.read_table(tables::KBID_JOB)?.iter()? {
        let (entry, (runs, _)) = row.map(|(k, v)| (k.value(), v.value()))?;
        if runs > 0 {
            jobs.push((entry, runs));
        }
    }
    Ok(jobs)
}

/// Makes job `id` a fresh one due in `refresh_ms` (the next `autoRefresh` re-fetch).
fn refresh_later(txn: &crate::store::kv::WriteTransaction, id: u64, refresh_ms: i64) -> Result<()> {
    txn.open_table(tables::KBID_JOB)?.insert(id, (0u32, now_ms() + refresh_ms))?;
    Ok(())
}

/// Makes job `id` wait `delay_ms`, keeping the count of its runs (see [`claim`]).
fn reschedule(txn: &crate::store::kv::WriteTransaction, id: u64, delay_ms: i64) -> Result<()> {
    let mut jobs = txn.open_table(tables::KBID_JOB)?;
    let attempts = match jobs.get(id)? {
        Some(v) => v.value().0,
        None => return Ok(()),
    };
    jobs.insert(id, (attempts, now_ms() + delay_ms))?;
    Ok(())
}
