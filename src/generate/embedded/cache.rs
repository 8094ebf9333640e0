//! The embedded generator's memory of the chunks it has read: each chunk's language and its
//! question-independent [`Analysis`] (blocks, sentences, terms), so that a completion only
//! scores the question against them.
//!
//! Reading a chunk (sentence segmentation, stemming, language detection) cost about 1 ms of
//! CPU per completion when it was done on every request, while the same few chunks answer most
//! questions. Entries are keyed by a hash of the chunk's name and text (and its length), so a
//! re-processed or edited chunk is simply a new entry, and the old one ages out; nothing needs
//! invalidating.
//!
//! Memory is bounded: analyses are kept least-recently-used within [`BUDGET_BYTES`] (estimated
//! by [`Analysis::bytes`]), languages within [`LANGUAGES`] entries of a few bytes each.

use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::{Arc, LazyLock, Mutex};

use lru::LruCache;

use super::passage::Analysis;
use crate::store::records::SourceRef;
use crate::text::language;

/// Most bytes (estimated) of chunk analyses kept.
pub const BUDGET_BYTES: usize = 8 << 20;

/// Most chunk languages kept.
pub const LANGUAGES: usize = 8192;

/// Characters of a chunk that language detection looks at (enough for a reliable answer;
/// detection cost grows with the text).
const LANGUAGE_SAMPLE: usize = 400;

/// A chunk's identity: a hash of its name and text, and the text's length.
type Key = (u64, usize);

struct Cache {
    languages: LruCache<Key, Option<&'static str>>,
    analyses: LruCache<(Key, Option<&'static str>), Arc<Analysis>>,
    bytes: usize,
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| {
    Mutex::new(Cache {
        languages: LruCache::new(NonZeroUsize::new(LANGUAGES).expect("LANGUAGES > 0")),
        analyses: LruCache::unbounded(),
        bytes: 0,
    })
});

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    // the cache holds no invariant a panicking holder could break half-way
    CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn key(src: &SourceRef) -> Key {
    let mut h = rustc_hash::FxHasher::default();
    src.name.hash(&mut h);
    src.content.hash(&mut h);
    (h.finish(), src.content.len())
}

/// The language (ISO 639-1) of `src`'s text, detected on its first characters; `None` when
/// detection is unsure.
pub fn language(src: &SourceRef) -> Option<&'static str> {
    let k = key(src);
    if let Some(lang) = cache().languages.get(&k) {
        return *lang;
    }
    let lang = language::detect(super::prefix(&src.content, LANGUAGE_SAMPLE));
    cache().languages.put(k, lang);
    lang
}

/// The [`Analysis`] of `src` with terms in language `lang`, from the cache or made now (outside
/// the cache's lock) and kept.
pub fn analysis(src: &SourceRef, lang: Option<&'static str>) -> Arc<Analysis> {
    let k = (key(src), lang);
    if let Some(a) = cache().analyses.get(&k) {
        return a.clone();
    }
    let a = Arc::new(Analysis::of(&src.name, &src.content, lang));
    let mut c = cache();
    if let Some(old) = c.analyses.put(k, a.clone()) {
        c.bytes -= old.bytes();
    }
    c.bytes += a.bytes();
    while c.bytes > BUDGET_BYTES && c.analyses.len() > 1 {
        let Some((_, old)) = c.analyses.pop_lru() else { break };
        c.bytes -= old.bytes();
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(content: &str) -> SourceRef {
        SourceRef::sample("Doc › Part", content)
    }

    #[test]
    fn the_same_chunk_is_analysed_once_and_an_edited_one_again() {
        let a = src("Lists are mutable sequences. Tuples are immutable sequences of values.");
        let first = analysis(&a, Some("en"));
        assert!(Arc::ptr_eq(&first, &analysis(&a.clone(), Some("en"))));
        assert!(!Arc::ptr_eq(&first, &analysis(&a, Some("fr"))));
        let edited = src("Lists are mutable sequences. Tuples are immutable sequences of items.");
        assert!(!Arc::ptr_eq(&first, &analysis(&edited, Some("en"))));
    }

    #[test]
    fn the_language_is_the_detected_one() {
        let fr = src("Les listes sont des séquences modifiables, alors que les tuples ne le sont pas du tout.");
        assert_eq!(language(&fr), language::detect(&fr.content));
        assert_eq!(language(&fr), Some("fr"));
    }
}
