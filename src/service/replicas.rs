//! Replicas (spec §2.3, §4.2; docs/decisions.md "Replicas"): validation, slug uniqueness per
//! organization, listing with filters and paging, cascade delete.

use std::sync::Arc;

use uuid::Uuid;

use super::channel::Bot;
use super::integrations::IntegrationView;
use super::knowledge::{distilled_in, Distilled};
use super::visibility::{hidden_in, visible_to};
use super::{check_http_url, check_len, normalize_email};
use crate::embed::catalog::Embedders;
use crate::error::{Code, Error, Result};
use crate::models::Models;
use crate::store::kv::WriteTransaction;
use crate::store::records::{Llm, Replica};
use crate::store::{self, k, now_ms, replica_index, tables, Store};

/// Replica kinds accepted in `type`.
pub const KINDS: &[&str] = &["individual", "character", "brand"];

/// The most characters of a replica's `name`, `slug` and `shortDescription`.
pub const NAME_MAX: usize = 50;
/// The most characters of a replica's `greeting`.
pub const GREETING_MAX: usize = 600;
/// The most characters of a replica's `purpose`.
pub const PURPOSE_MAX: usize = 1000;
/// The most characters of a replica's `voicePreviewText`.
pub const VOICE_PREVIEW_MAX: usize = 400;
/// The most characters of a replica's `llm.systemMessage`.
pub const SYSTEM_MESSAGE_MAX: usize = 30_000;
/// The most `tags` of a replica, and the most characters of each.
pub const TAGS_MAX: (usize, usize) = (20, 50);
/// The most `suggestedQuestions` of a replica, and the most characters of each.
pub const SUGGESTED_QUESTIONS_MAX: (usize, usize) = (10, 200);
/// Accepted `llm.memoryMode` values (deprecated field).
pub const MEMORY_MODES: &[&str] = &["prompt-caching", "rag-search"];

/// The `llm` settings of a replica to create or update; `None` takes the default.
#[derive(Debug, Clone, Default)]
pub struct LlmInput {
    pub model: Option<String>,
    /// Deprecated: `prompt-caching` | `rag-search` (default).
    pub memory_mode: Option<String>,
    pub system_message: Option<String>,
    pub embedding_model: Option<String>,
}

/// A replica to create, or the replacement of one (spec §2.3 fields; `None` takes the default).
#[derive(Debug, Clone, Default)]
pub struct ReplicaInput {
    pub name: String,
    pub short_description: String,
    pub greeting: String,
    /// The owner: a user id or e-mail of the organization.
    pub owner_id: String,
    pub slug: String,
    pub llm: LlmInput,
    pub purpose: Option<String>,
    /// `individual` | `character` (default) | `brand`.
    pub kind: Option<String>,
    pub private: Option<bool>,
    pub tags: Vec<String>,
    pub suggested_questions: Vec<String>,
    pub whitelist_emails: Vec<String>,
    pub profile_image: Option<String>,
    pub voice_preview_text: Option<String>,
    pub voice_enabled: Option<bool>,
    pub video_enabled: Option<bool>,
    pub is_every_conversation_accessible_by_support: Option<bool>,
    pub is_private_conversations_enabled: Option<bool>,
    pub voice_vendor_id: Option<String>,
    /// Legacy place of `llm.system_message`.
    pub system_message: Option<String>,
}

fn check_list(field: &str, items: &[String], (max_items, max_len): (usize, usize)) -> Result<()> {
    if items.len() > max_items {
        return Err(Error::invalid(field, format!("at most {max_items} items")));
    }
    items.iter().try_for_each(|t| check_len(field, t, 1, max_len))
}

fn check_slug(slug: &str) -> Result<()> {
    check_len("slug", slug, 1, NAME_MAX)?;
    let ok = slug.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid("slug", "use lower-case letters, digits, '-' and '_'"))
    }
}

/// The `llm.embeddingModel` of a new replica: the one asked for, which must be in the embedding
/// catalog when one is configured (400 naming its ids), else the catalog's default; with no
/// catalog (BM25 alone) the value is kept as given, unused.
fn embedding_model(asked: Option<&String>, embedders: Option<&Embedders>) -> Result<Option<String>> {
    let Some(catalog) = embedders else { return Ok(asked.cloned()) };
    match asked {
        None => Ok(Some(catalog.default_id().to_string())),
        Some(id) if catalog.get(id).is_some() => Ok(Some(id.clone())),
        Some(id) => Err(Error::invalid(
            "llm.embeddingModel",
            format!(
                "{id:?} is not in this server's embedding-model catalog ({}; the operator sets it with \
                 `replicad serve --embedding-models`)",
                catalog.ids().join(", ")
            ),
        )),
    }
}

/// The embedding model a replacement keeps: the stored one, which cannot be changed once set (a
/// replica's knowledge base is embedded with it). 409 `EMBEDDING_MODEL_FIXED` when `new` names
/// another model; `new` when none was stored, or when it names the stored model by another of
/// its names (`same_model`: the catalog's names of `new`'s model, an alias among them).
fn kept_embedding_model(old: &Replica, new: &Replica, asked: bool, same_model: &[String]) -> Result<Option<String>> {
    match (&old.llm.embedding_model, &new.llm.embedding_model) {
        (Some(o), Some(n)) if asked && o != n && same_model.contains(o) => Ok(Some(n.clone())),
        (Some(o), Some(n)) if o != n && asked => Err(Error::new(
            Code::EmbeddingModelFixed,
            format!(
                "llm.embeddingModel cannot be changed once set: this replica's knowledge base is embedded with \
                 {o:?}; create a replica with {n:?} and add its knowledge base there"
            ),
        )),
        (Some(o), _) => Ok(Some(o.clone())),
        (None, n) => Ok(n.clone()),
    }
}

fn llm(
    body: &LlmInput,
    legacy_system_message: Option<&String>,
    models: &Models,
    embedders: Option<&Embedders>,
) -> Result<Llm> {
    let model = body.model.clone().unwrap_or_else(|| models.default_id().to_string());
    if !models.contains(&model) {
        return Err(Error::invalid(
            "llm.model",
            format!(
                "{model:?} is not in this server's model catalog (GET /v1/replicas/models lists it; the operator \
                 sets its ids with `replicad serve --models FILE`, see docs/migrating.md)"
            ),
        ));
    }
    let memory_mode = body.memory_mode.clone().unwrap_or_else(|| "rag-search".into());
    if !MEMORY_MODES.contains(&memory_mode.as_str()) {
        return Err(Error::invalid("llm.memoryMode", format!("must be one of {}", MEMORY_MODES.join(", "))));
    }
    let system_message = body.system_message.clone().or_else(|| legacy_system_message.cloned());
    if let Some(s) = &system_message {
        check_len("llm.systemMessage", s, 0, SYSTEM_MESSAGE_MAX)?;
    }
    let embedding_model = embedding_model(body.embedding_model.as_ref(), embedders)?;
    Ok(Llm { model, memory_mode, system_message, embedding_model })
}

/// Validates a create/update body into a record (owner still unresolved: `Uuid::nil()`).
pub fn from_body(body: &ReplicaInput, models: &Models, embedders: Option<&Embedders>) -> Result<Replica> {
    check_len("name", body.name.trim(), 1, NAME_MAX)?;
    check_len("shortDescription", &body.short_description, 0, NAME_MAX)?;
    check_len("greeting", &body.greeting, 0, GREETING_MAX)?;
    check_slug(&body.slug)?;
    if let Some(p) = &body.purpose {
        check_len("purpose", p, 0, PURPOSE_MAX)?;
    }
    let kind = body.kind.clone().unwrap_or_else(|| "character".into());
    if !KINDS.contains(&kind.as_str()) {
        return Err(Error::invalid("type", format!("must be one of {}", KINDS.join(", "))));
    }
    check_list("tags", &body.tags, TAGS_MAX)?;
    check_list("suggestedQuestions", &body.suggested_questions, SUGGESTED_QUESTIONS_MAX)?;
    if let Some(url) = &body.profile_image {
        check_http_url("profileImage", url)?;
    }
    if let Some(t) = &body.voice_preview_text {
        check_len("voicePreviewText", t, 0, VOICE_PREVIEW_MAX)?;
    }
    let whitelist_emails =
        body.whitelist_emails.iter().map(|e| normalize_email("whitelistEmails", e)).collect::<Result<Vec<_>>>()?;
    Ok(Replica {
        name: body.name.trim().to_string(),
        slug: body.slug.clone(),
        short_description: body.short_description.clone(),
        greeting: body.greeting.clone(),
        purpose: body.purpose.clone(),
        kind,
        private: body.private.unwrap_or(false),
        tags: body.tags.clone(),
        suggested_questions: body.suggested_questions.clone(),
        whitelist_emails,
        profile_image: body.profile_image.clone(),
        voice_preview_text: body.voice_preview_text.clone(),
        voice_enabled: body.voice_enabled.unwrap_or(false),
        video_enabled: body.video_enabled.unwrap_or(false),
        every_conversation_accessible_by_support: body.is_every_conversation_accessible_by_support.unwrap_or(false),
        private_conversations_enabled: body.is_private_conversations_enabled.unwrap_or(true),
        voice_vendor_id: body.voice_vendor_id.clone(),
        llm: llm(&body.llm, body.system_message.as_ref(), models, embedders)?,
        ..Replica::default()
    })
}

fn owner_in(txn: &WriteTransaction, org: Uuid, owner: &str) -> Result<Uuid> {
    super::users::find_owner(txn, org, owner)?.ok_or_else(|| {
        Error::invalid("ownerID", format!("{owner:?} is not the id or e-mail of a user of this organization"))
    })
}

fn claim_slug(txn: &WriteTransaction, org: Uuid, slug: &str, id: Uuid) -> Result<()> {
    let mut slugs = txn.open_table(tables::SLUG_REPLICA)?;
    if let Some(other) = slugs.get((k(org), slug))?.map(|v| v.value()) {
        if other != k(id) {
            return Err(Error::new(Code::SlugTaken, format!("slug {slug:?} is used by another replica")));
        }
    }
    slugs.insert((k(org), slug), k(id))?;
    Ok(())
}

/// Creates a replica. Errors: 400 invalid body or owner (or an embedding model not in
/// `embedders`), 409 `SLUG_TAKEN`, 429 `REPLICA_QUOTA_EXCEEDED` beyond `max_replicas` per
/// organization.
pub async fn create(
    store: &Store,
    org: Uuid,
    body: &ReplicaInput,
    models: &Models,
    embedders: Option<&Embedders>,
    max_replicas: u64,
) -> Result<Uuid> {
    let mut replica = from_body(body, models, embedders)?;
    let owner = body.owner_id.clone();
    let (id, now) = (Uuid::now_v7(), now_ms());
    replica.id = id;
    replica.org = org;
    replica.created_at = now;
    replica.updated_at = now;
    store
        .write(move |txn| {
            let mut r = replica.clone();
            insert_in(txn, &mut r, &owner, max_replicas)?;
            Ok(id)
        })
        .await
}

/// Writes new replica `r` (its `id`, `org` and dates set) owned by `owner` (a user id or e-mail
/// of its organization), in `txn`: `create`'s write, and a replica bundle's import. Errors: 400
/// unknown owner, 409 `SLUG_TAKEN`, 429 `REPLICA_QUOTA_EXCEEDED` beyond the organization's
/// quota (`max_replicas` unless the operator set one for it).
pub fn insert_in(txn: &WriteTransaction, r: &mut Replica, owner: &str, max_replicas: u64) -> Result<()> {
    r.owner = owner_in(txn, r.org, owner)?;
    let (count, _) = replica_index::count(txn, r.org)?;
    let max_replicas = super::quotas::of_in(txn, r.org)?.replicas.unwrap_or(max_replicas);
    if count >= max_replicas {
        return Err(Error::new(
            Code::ReplicaQuotaExceeded,
            format!("the organization has {count} replicas, its quota"),
        ));
    }
    claim_slug(txn, r.org, &r.slug, r.id)?;
    replica_index::put_replica(txn, None, r)
}

/// The replica of `org` whose slug is `slug`, if any (private ones too). Errors: the store's.
pub fn id_of_slug_in(txn: &impl crate::store::kv::Reads, org: Uuid, slug: &str) -> Result<Option<Uuid>> {
    use crate::store::kv::ReadableTable as _;
    let slugs = txn.read_table(tables::SLUG_REPLICA)?;
    let id = slugs.get((k(org), slug))?.map(|v| Uuid::from_u128(v.value()));
    Ok(id)
}

/// Replaces a replica's fields (same body as create; an absent `llm.embeddingModel` keeps the
/// stored one). Errors: 400, 404, 409 `SLUG_TAKEN`, 409 `EMBEDDING_MODEL_FIXED` (another
/// embedding model than the stored one).
pub async fn update(
    store: &Store,
    org: Uuid,
    id: Uuid,
    body: &ReplicaInput,
    models: &Models,
    embedders: Option<&Embedders>,
) -> Result<()> {
    let new = from_body(body, models, embedders)?;
    let asked = body.llm.embedding_model.is_some();
    let same_model = match (&new.llm.embedding_model, embedders) {
        (Some(n), Some(e)) => e.names_of_same_model(n),
        _ => Vec::new(),
    };
    let owner = body.owner_id.clone();
    let now = now_ms();
    store
        .write(move |txn| {
            let old = load_in(txn, org, id)?;
            let mut r = new.clone();
            r.llm.embedding_model = kept_embedding_model(&old, &new, asked, &same_model)?;
            r.owner = owner_in(txn, org, &owner)?;
            if old.slug != r.slug {
                claim_slug(txn, org, &r.slug, id)?;
                txn.open_table(tables::SLUG_REPLICA)?.remove((k(org), old.slug.as_str()))?;
            }
            r.id = id;
            r.org = org;
            r.created_at = old.created_at;
            r.updated_at = now;
            replica_index::put_replica(txn, Some(&old), &r)
        })
        .await
}

fn load_in(txn: &WriteTransaction, org: Uuid, id: Uuid) -> Result<Replica> {
    replica_index::get_in(txn, id)?.filter(|r| r.org == org).ok_or_else(|| Error::not_found("replica"))
}

/// The public replica of `org` with `slug` (the web chat page). 404 when missing or private.
pub async fn public_by_slug(store: &Store, org: Uuid, slug: String) -> Result<Replica> {
    let r = store
        .read(move |txn| {
            let Some(id) = txn.open_table(tables::SLUG_REPLICA)?.get((k(org), slug.as_str()))?.map(|v| v.value())
            else {
                return Ok(None);
            };
            replica_index::get_in(txn, Uuid::from_u128(id))
        })
        .await?;
    r.filter(|r| !r.private).ok_or_else(|| Error::not_found("replica"))
}

/// Deletes a replica with its knowledge base (index documents go through the outbox, uploaded
/// files are removed after the commit) and its chat history. 404 when missing.
pub async fn delete(store: &Store, org: Uuid, id: Uuid) -> Result<()> {
    store
        .write_kb(move |txn| {
            let r = load_in(txn, org, id)?;
            replica_index::remove_replica(txn, &r)?;
            txn.open_table(tables::SLUG_REPLICA)?.remove((k(org), r.slug.as_str()))?;
            super::messages::delete_all_in(txn, id)?;
            super::passages::delete_all_in(txn, id)?;
            super::chats::delete_all_in(txn, id)?;
            super::integrations::delete_all_in(txn, id)?;
            super::embed::delete_all_in(txn, id)?;
            super::knowledge::delete_all_in(txn, id)
        })
        .await?;
    store.sweep_files().await;
    Ok(())
}

/// The replica `id` of `org` as seen by `user`; 404 when missing or not visible.
/// The record is shared by the reads of one store snapshot on redb, and kept between reads on
/// PostgreSQL while no replica is written ([`Store::record`]).
pub async fn get(
    store: &Store,
    org: Uuid,
    id: Uuid,
    user: Option<&crate::store::records::User>,
) -> Result<Arc<Replica>> {
    let r = replica_index::cached(store, id).await?;
    seen_in(r, org, user)
}

/// `r` when it is a replica of `org` that `user` may see; 404 otherwise ([`get`]).
fn seen_in(r: Option<Arc<Replica>>, org: Uuid, user: Option<&crate::store::records::User>) -> Result<Arc<Replica>> {
    r.filter(|r| r.org == org && visible_to(r, user)).ok_or_else(|| Error::not_found("replica"))
}

/// Filters and order of `GET /v1/replicas`.
#[derive(Default, Debug)]
pub struct ListQuery {
    pub owner: Option<String>,
    pub slug: Option<String>,
    pub tags: Vec<String>,
    pub integration: Option<String>,
    pub search: Option<String>,
    pub sort: Option<String>,
    pub page: u64,
    pub page_size: u64,
}

/// A page of the organization's replicas visible to `user`, and the total that matched.
///
/// Orders (`sort`): creation (default), `name` (case-insensitive), `popularity` (most chat
/// history items first); ties in creation order. Without filters a page reads its own records
/// only: the order comes from the indexes of `store::replica_index`, `total` from the count kept
/// there (less the private replicas `user` may not see, found by reading the private ones
/// only), and index keys are walked from the nearer end of the order. With a filter (`ownerID`,
/// `slug`, `tags`, `integration`, `search`) the list walks the order once, reading each record
/// to test it and count the matches: no sort, no copy of the table, but a read of every replica
/// of the organization.
pub async fn list(
    store: &Store,
    org: Uuid,
    user: Option<crate::store::records::User>,
    q: ListQuery,
) -> Result<(Vec<Arc<Replica>>, u64)> {
    store
        .read(move |txn| {
            let hidden = hidden_in(txn, org, user.as_ref())?;
            let read = |id: u128| replica_index::record_in(txn, Uuid::from_u128(id));
            let filtered = q.owner.is_some()
                || q.slug.is_some()
                || !q.tags.is_empty()
                || q.integration.is_some()
                || q.search.is_some();
            let skip = q.page.saturating_sub(1).saturating_mul(q.page_size);
            if !filtered {
                let (all, _) = replica_index::count(txn, org)?;
                let total = all.saturating_sub(hidden.len() as u64);
                let ids = super::page_from_nearer_end(q.page, q.page_size, total, |from_end| {
                    let ids = ordered_ids(txn, org, q.sort.as_deref(), from_end)?;
                    Ok(ids.filter(|id| id.as_ref().map_or(true, |id| !hidden.contains(id))))
                })?;
                let page = ids.into_iter().map(read).filter_map(Result::transpose).collect::<Result<_>>()?;
                return Ok((page, total));
            }
            let owner = match &q.owner {
                Some(o) => Some(super::users::find_owner(txn, org, o)?),
                None => None,
            };
            let (mut page, mut total) = (Vec::new(), 0u64);
            for id in ordered_ids(txn, org, q.sort.as_deref(), false)? {
                let id = id?;
                if hidden.contains(&id) {
                    continue;
                }
                let Some(r) = read(id)? else { continue };
                let integrations = match &q.integration {
                    Some(_) => super::integrations::connected_in(txn, r.id)?,
                    None => Vec::new(),
                };
                if matches(&r, &q, owner, &integrations) {
                    if total >= skip && (page.len() as u64) < q.page_size {
                        page.push(r);
                    }
                    total += 1;
                }
            }
            Ok((page, total))
        })
        .await
}

/// The replica ids of `org` in the order `sort` (`None`/unknown: creation), from the end when
/// `reverse`.
fn ordered_ids(
    txn: &crate::store::kv::ReadTransaction,
    org: Uuid,
    sort: Option<&str>,
    reverse: bool,
) -> Result<replica_index::Ids<'static>> {
    let by = match sort {
        Some("name") => Some(tables::REPLICA_SORT_NAME),
        Some("popularity") => Some(tables::REPLICA_SORT_POPULARITY),
        _ => None,
    };
    replica_index::ordered_ids(txn, org, by, reverse)
}

fn matches(r: &Replica, q: &ListQuery, owner: Option<Option<Uuid>>, integrations: &[&str]) -> bool {
    if let Some(o) = owner {
        if o != Some(r.owner) {
            return false;
        }
    }
    if q.slug.as_ref().is_some_and(|s| s != &r.slug) {
        return false;
    }
    if !q.tags.iter().all(|t| r.tags.contains(t)) {
        return false;
    }
    if q.integration.as_deref().is_some_and(|i| !integrations.contains(&i)) {
        return false;
    }
    if let Some(s) = &q.search {
        let s = s.to_lowercase();
        let hay = format!("{} {} {}", r.name, r.short_description, r.purpose.as_deref().unwrap_or(""));
        if !hay.to_lowercase().contains(&s) {
            return false;
        }
    }
    true
}

/// What a replica's wire view shows besides the record (docs/decisions.md "Replicas").
pub struct ViewParts {
    /// `distilledKnowledge` and its counts.
    pub distilled: Distilled,
    /// Chat history items (`chat_history_count`).
    pub messages: u64,
    /// Each bot's integration object (`None`: not connected), in [`Bot::ALL`]'s order.
    pub integrations: Vec<(Bot, Option<IntegrationView>)>,
    /// The owner's id as users see it (`ownerID`).
    pub owner_id: String,
}

/// The [`ViewParts`] of each of `replicas`, in order, read in one transaction.
pub async fn view_parts(store: &Store, replicas: Vec<(Uuid, Uuid)>) -> Result<Vec<ViewParts>> {
    store
        .read(move |txn| {
            let t = ViewTables::open(txn)?;
            replicas.iter().map(|&(id, owner)| t.parts(id, owner)).collect()
        })
        .await
}

/// Replica `id` of `org` as [`get`] finds it, with its [`ViewParts`], in one read transaction
/// (what `GET /v1/replicas/{replicaUUID}` shows). Errors: 404 as [`get`].
pub async fn get_with_parts(
    store: &Store,
    org: Uuid,
    id: Uuid,
    user: Option<&crate::store::records::User>,
) -> Result<(Arc<Replica>, ViewParts)> {
    let user = user.cloned();
    store
        .read(move |txn| {
            let r = seen_in(replica_index::record_in(txn, id)?, org, user.as_ref())?;
            let parts = ViewTables::open(txn)?.parts(r.id, r.owner)?;
            Ok((r, parts))
        })
        .await
}

/// A read-only `id → record` table of a store snapshot.
type RecordTable<V = &'static [u8]> = crate::store::kv::Shared<u128, V>;

/// The tables a replica's [`ViewParts`] come from, opened once per store snapshot
/// ([`store::Snapshot::table`]; a list of 24 replicas opened each of them 24 times).
struct ViewTables {
    summaries: store::kb::summary::Summaries<RecordTable>,
    counts: replica_index::MessageCounts<RecordTable<u64>>,
    bots: super::integrations::BotViews,
    users: super::users::Reader<RecordTable>,
}

impl ViewTables {
    fn open(txn: &store::Snapshot) -> Result<ViewTables> {
        Ok(ViewTables {
            summaries: store::kb::summary::open(txn)?,
            counts: replica_index::message_counts(txn)?,
            bots: super::integrations::BotViews::of(txn)?,
            users: super::users::reader(txn)?,
        })
    }

    /// The [`ViewParts`] of replica `id`, owned by user `owner`.
    fn parts(&self, id: Uuid, owner: Uuid) -> Result<ViewParts> {
        Ok(ViewParts {
            distilled: distilled_in(&self.summaries, id)?,
            messages: self.counts.get(id)?,
            integrations: self.bots.of_replica(id)?,
            owner_id: self.users.public_id(owner)?,
        })
    }
}
