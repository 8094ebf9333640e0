//! Answers of the hot reads kept until the next commit.
//!
//! Why: after the shared snapshot ([`crate::store::snapshot`]) a read's cost is the JSON of its
//! body — a list of 24 replicas is 22 KB, escaped byte by byte — and the records it decodes.
//! A replica, its list, a chat history page and a knowledge-base entry are read far more often
//! than they change (dashboards and widgets poll them), so their answers are kept, as bytes,
//! until the store's next commit, and a read that finds one sends it as the minimal server
//! sends its bytes.
//!
//! Why it stays correct: the answers of the routes marked `Cached` in the route table
//! (`crate::api::routes`, [`super::route::Route::cached`]) are a function of the store, the
//! request target (path and query), the API version and the caller (organization and user)
//! only: no clock, no randomness, no other header, no search index. An answer is kept under
//! those and under the store's commit generation ([`Store::commit_generation`]) read *before*
//! the caller was authenticated, and only if the generation was still the same after the
//! handler: then every read of the request saw that store. A read uses a kept answer only
//! under the generation it read when it began, so a read that begins after a write was
//! acknowledged never gets an answer from before it. Authentication, the rate limit and the
//! version check still run for every request; only the handler is skipped.
//!
//! What it costs: at most `--read-cache-bytes` of bodies (8 MiB by default; `0` turns it off),
//! all dropped by the first access after the next commit (a kept answer of an older generation
//! is never sent). Under a steady stream of writes every commit empties it, and
//! reads cost what they cost without it (the first read after a commit renders and keeps).

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::StatusCode;
use uuid::Uuid;

use super::response::{Body, Reply};
use crate::store::Store;

/// What an answer is kept under, besides the commit generation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// Index of the route in the route table.
    pub route: usize,
    /// Path and query as sent.
    pub target: Box<str>,
    /// The negotiated `X-API-Version`.
    pub version: &'static str,
    pub org: Uuid,
    /// The user named by the headers, if any.
    pub user: Option<Uuid>,
}

/// A kept 200 answer.
struct Answer {
    content_type: Option<&'static str>,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Bytes,
}

/// The answers kept for one commit generation.
#[derive(Default)]
struct Kept {
    generation: u64,
    bytes: usize,
    answers: HashMap<Key, Answer>,
}

impl Kept {
    /// Empties the answers when `generation` is newer than theirs.
    fn move_to(&mut self, generation: u64) {
        if generation > self.generation {
            self.answers.clear();
            self.bytes = 0;
            self.generation = generation;
        }
    }
}

/// The kept answers, at most `max_bytes` of bodies.
pub struct ReadCache {
    max_bytes: usize,
    kept: Mutex<Kept>,
}

impl ReadCache {
    /// A cache of at most `max_bytes` of bodies; `0` keeps nothing.
    pub fn new(max_bytes: u64) -> ReadCache {
        ReadCache { max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX), kept: Mutex::default() }
    }

    /// The store's generation when a `GET` of a route marked `Cached` (`cached`) begins (before
    /// its caller is authenticated), if its answer may be kept (not with a cache of 0 bytes).
    pub fn began(&self, store: &Store, method: &hyper::Method, cached: bool) -> Option<u64> {
        (self.max_bytes > 0 && cached && method == hyper::Method::GET).then(|| store.commit_generation()).flatten()
    }

    /// The answer kept under `key` for `generation` (read when the request began).
    pub fn get(&self, key: &Key, generation: u64) -> Option<Reply> {
        let mut kept = self.lock();
        kept.move_to(generation);
        let found = kept.answers.get(key).filter(|_| kept.generation == generation);
        crate::telemetry::read_cache(if found.is_some() { "hit" } else { "miss" });
        let a = found?;
        Some(Reply {
            status: StatusCode::OK,
            body: Body::Full(a.body.clone()),
            content_type: a.content_type,
            headers: a.headers.clone(),
        })
    }

    /// Keeps `reply` under `key` when it is a whole 200 answer, `began` (the generation read
    /// when the request began) equals `ended` (read after its handler), and it fits.
    pub fn put(&self, key: Key, began: u64, ended: Option<u64>, reply: &Reply) {
        let Body::Full(body) = &reply.body else { return };
        if ended != Some(began) || reply.status != StatusCode::OK {
            return;
        }
        let mut kept = self.lock();
        kept.move_to(began);
        if kept.generation != began || kept.bytes + body.len() > self.max_bytes {
            return;
        }
        let answer = Answer { content_type: reply.content_type, headers: reply.headers.clone(), body: body.clone() };
        kept.bytes += body.len();
        if let Some(old) = kept.answers.insert(key, answer) {
            kept.bytes -= old.body.len();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(target: &str) -> Key {
        Key { route: 1, target: target.into(), version: "v", org: Uuid::nil(), user: None }
    }

    fn body(r: &Reply) -> Bytes {
        match &r.body {
            Body::Full(b) => b.clone(),
            Body::Stream(_) => panic!("a kept answer is whole"),
        }
    }

    /// An answer is found under its generation only, and a newer generation empties the cache.
    #[test]
    fn answers_live_until_the_next_generation() {
        let cache = ReadCache::new(1024);
        cache.put(key("/a"), 5, Some(5), &Reply::raw(200, Bytes::from_static(b"A"), "application/json"));
        assert_eq!(body(&cache.get(&key("/a"), 5).unwrap()), "A");
        assert!(cache.get(&key("/b"), 5).is_none(), "another target");
        assert!(cache.get(&key("/a"), 4).is_none(), "a request that began before it");
        assert!(cache.get(&key("/a"), 6).is_none(), "a request that began after a commit");
        assert!(cache.get(&key("/a"), 5).is_none(), "gone for good after the commit");
    }

    /// Nothing is kept when a commit came during the handler, for another status, past the
    /// size bound, or for an older generation than the cache's.
    #[test]
    fn only_whole_answers_of_one_generation_that_fit_are_kept() {
        let cache = ReadCache::new(4);
        let ok = |b: &'static [u8]| Reply::raw(200, Bytes::from_static(b), "application/json");
        cache.put(key("/moved"), 5, Some(6), &ok(b"x"));
        cache.put(key("/reopening"), 5, None, &ok(b"x"));
        cache.put(key("/404"), 5, Some(5), &Reply::raw(404, Bytes::from_static(b"x"), "application/json"));
        cache.put(key("/big"), 5, Some(5), &ok(b"12345"));
        for k in ["/moved", "/reopening", "/404", "/big"] {
            assert!(cache.get(&key(k), 5).is_none(), "{k} kept");
        }
        cache.put(key("/fits"), 7, Some(7), &ok(b"1234"));
        cache.put(key("/older"), 6, Some(6), &ok(b""));
        assert!(cache.get(&key("/older"), 6).is_none());
        assert_eq!(body(&cache.get(&key("/fits"), 7).unwrap()), "1234");
    }
}
