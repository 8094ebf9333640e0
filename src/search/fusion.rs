//! Hybrid ranking: the BM25 ranking and the vector ranking of one question, fused into one.
//!
//! Two standard ways are implemented and measured on the labelled sets
//! (`examples/retrieval sections`; figures in the module docs of [`super`]):
//! - [`Fusion::Rrf`], reciprocal rank fusion (Cormack et al. 2009): `Σ 1 / (K + rank)` over
//!   the rankings a chunk is in, `K` = 60; only ranks count;
//! - [`Fusion::Convex`], a normalised convex combination: `w · bm25 / bm25_max + (1 − w) ·
//!   cosine'` (`w` its `bm25_weight`) where `cosine'` maps the vector hits' cosines onto 0..=1 between the last and
//!   the first vector hit; scores count, so a chunk far ahead in one ranking stays ahead.

use super::vectors::VectorHit;
use super::Hit;

/// RRF's rank constant (the paper's, and Elasticsearch's and Vespa's default).
const RRF_K: f32 = 60.0;
/// How many hits of each ranking are fused, however few the caller keeps
/// ([`super::Search::hybrid`]): the depth the fusion and its weight were chosen at
/// (`examples/retrieval.rs`). [`Fusion::Convex`] maps the vector hits' cosines onto 0..=1
/// between the first and the last hit fused, so fusing fewer stretches small differences of
/// cosine into large ones: fused at 5, the depth the embedded reader keeps, the right chunk was
/// among the 5 kept for 0.923 of the answerable questions of `tests/answers` (dev), fused at 10
/// for 0.962 (15 and 20: the same).
pub const DEPTH: usize = 10;
/// [`Fusion::Convex`]'s BM25 weight for a question in another language than every document
/// ([`Fusion::across_languages`]).
pub const ACROSS_LANGUAGES_BM25_WEIGHT: f32 = 0.3;
/// How two rankings are fused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    Rrf,
    /// `bm25_weight` in 0..=1; the vectors weigh the rest.
    Convex {
        bm25_weight: f32,
    },
}

/// Where a chunk ranked in each ranking (1 = first; `None`: not in that ranking's hits), and
/// the question's cosine similarity to the chunk's vector (in −1..=1; `None`: no vector of the
/// replica's model), whether or not it made the vector ranking.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ranks {
    pub bm25: Option<u32>,
    pub vector: Option<u32>,
    pub cosine: Option<f32>,
}

/// A chunk of the fused ranking, with its fused score and where it ranked each way.
#[derive(Debug, Clone, Copy)]
pub struct Fused {
    pub entry: u64,
    pub chunk: u32,
    pub score: f32,
    pub ranks: Ranks,
}

/// `bm25` and `vector` (each best first) fused by `how`, best first, at most `limit`; ties keep
/// the BM25 order.
pub fn fuse(bm25: &[Hit], vector: &[VectorHit], how: Fusion, limit: usize) -> Vec<Fused> {
    let mut out: Vec<Fused> = Vec::with_capacity(bm25.len() + vector.len());
    let bm25_max = bm25.iter().map(|h| h.score).fold(0.0f32, f32::max);
    for (i, h) in bm25.iter().enumerate() {
        let score = match how {
            Fusion::Rrf => 1.0 / (RRF_K + (i + 1) as f32),
            Fusion::Convex { bm25_weight } if bm25_max > 0.0 => bm25_weight * h.score / bm25_max,
            Fusion::Convex { .. } => 0.0,
        };
        let ranks = Ranks { bm25: Some(i as u32 + 1), ..Ranks::default() };
        out.push(Fused { entry: h.entry, chunk: h.chunk, score, ranks });
    }
    let (top, bottom) = (vector.first().map_or(0.0, |v| v.score), vector.last().map_or(0.0, |v| v.score));
    for (i, v) in vector.iter().enumerate() {
        let score = match how {
            Fusion::Rrf => 1.0 / (RRF_K + (i + 1) as f32),
            Fusion::Convex { bm25_weight } if top > bottom => (1.0 - bm25_weight) * (v.score - bottom) / (top - bottom),
            Fusion::Convex { bm25_weight } => 1.0 - bm25_weight,
        };
        match out.iter_mut().find(|f| f.entry == v.entry && f.chunk == v.chunk) {
            Some(f) => {
                f.score += score;
                f.ranks.vector = Some(i as u32 + 1);
                f.ranks.cosine = Some(v.score);
            }
            None => {
                let ranks = Ranks { bm25: None, vector: Some(i as u32 + 1), cosine: Some(v.score) };
                out.push(Fused { entry: v.entry, chunk: v.chunk, score, ranks });
            }
        }
    }
    // stable: equal scores keep BM25's order, then the vector order
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    out.truncate(limit);
    out
}

impl Fusion {
    /// How a question in another language than every document is fused
    /// (`search::Hybrid::other_language`): its words meet the documents' only in the names,
    /// numbers and identifiers the two share, so [`Fusion::Convex`] weighs BM25
    /// [`ACROSS_LANGUAGES_BM25_WEIGHT`] instead of its own weight; [`Fusion::Rrf`], which
    /// weighs ranks alike, stays. Chosen with multilingual-e5-small on the two tuning blocks
    /// asked across languages (`examples/answers --set dev-crosslingual` and `--set
    /// calibration-crosslingual`, `docs/retrieval.md`): on the dev manuals (hundreds of chunks,
    /// where shared tokens find noise) the right section among the five read 0.743 → 0.800 and
    /// the quote holding the keys 0.371 → 0.400; on the short business documents 0.954 → 0.947
    /// and 0.649 → 0.664 (every weight from 0.1 to 0.4 the same; 0: 0.829 and 0.931).
    pub fn across_languages(self) -> Fusion {
        match self {
            Fusion::Convex { .. } => Fusion::Convex { bm25_weight: ACROSS_LANGUAGES_BM25_WEIGHT },
            Fusion::Rrf => Fusion::Rrf,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(entry: u64, score: f32) -> Hit {
        Hit { entry, chunk: 0, score }
    }

    fn vhit(entry: u64, score: f32) -> VectorHit {
        VectorHit { entry, chunk: 0, score }
    }

    #[test]
    fn a_chunk_both_rankings_find_comes_first_and_keeps_both_ranks() {
        let bm25 = [hit(1, 9.0), hit(2, 8.0)];
        let vector = [vhit(3, 0.9), vhit(2, 0.8), vhit(4, 0.1)];
        for how in [Fusion::Rrf, Fusion::Convex { bm25_weight: 0.5 }] {
            let fused = fuse(&bm25, &vector, how, 10);
            assert_eq!(fused[0].entry, 2, "{how:?}: {fused:?}");
            assert_eq!(fused[0].ranks, Ranks { bm25: Some(2), vector: Some(2), cosine: Some(0.8) });
            assert_eq!(fused.len(), 4);
            let only_vector = fused.iter().find(|f| f.entry == 3).expect("a chunk found by its vector only");
            assert_eq!(only_vector.ranks, Ranks { bm25: None, vector: Some(1), cosine: Some(0.9) });
            assert_eq!(fuse(&bm25, &vector, how, 2).len(), 2);
        }
    }

    #[test]
    fn across_languages_a_chunk_found_by_meaning_outranks_one_found_by_a_shared_name() {
        // the product's name, in every profile line, is all a question in another language
        // shares with the documents: its profile leads BM25, the answer leads the vectors
        let bm25 = [hit(1, 9.0), hit(2, 2.0)];
        let vector = [vhit(2, 0.86), vhit(3, 0.84), vhit(1, 0.80)];
        let how = Fusion::Convex { bm25_weight: 0.6 };
        assert_eq!(fuse(&bm25, &vector, how, 3)[0].entry, 1, "in the documents' language");
        let across = how.across_languages();
        assert_eq!(across, Fusion::Convex { bm25_weight: ACROSS_LANGUAGES_BM25_WEIGHT });
        assert_eq!(fuse(&bm25, &vector, across, 3)[0].entry, 2, "in another language");
        assert_eq!(Fusion::Rrf.across_languages(), Fusion::Rrf);
    }

    #[test]
    fn one_ranking_alone_keeps_its_order() {
        let bm25 = [hit(1, 9.0), hit(2, 3.0), hit(3, 1.0)];
        for how in [Fusion::Rrf, Fusion::Convex { bm25_weight: 0.5 }] {
            let fused = fuse(&bm25, &[], how, 10);
            assert_eq!(fused.iter().map(|f| f.entry).collect::<Vec<_>>(), vec![1, 2, 3]);
        }
    }
}
