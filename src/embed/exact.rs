//! Exact nearest-neighbour search: every stored vector is scored against the question's.
//!
//! The vectors of a replica are one flat `Vec<f32>` (`n × dim`, row-major, each row
//! normalised). Reading them all is what a search costs (~1.5 KiB per 384-dim vector: 100,000
//! vectors are 150 MB, ~8 ms on one core), so a search first scores 8-bit codes of the rows
//! ([`Codes`]: a quarter of the bytes), then scores exactly the [`rescored`] best of them and
//! keeps the best `k` of those (scalar quantisation with rescoring, as Lucene and Qdrant do):
//! the same hits as scoring every row exactly unless a row outside the rescored ones was within
//! the codes' error of the `k`-th (figures in [`super`]'s documentation).

use super::dot;

/// The rows of a matrix coded on 8 bits, one scale per row: row `r`'s value `i` is about
/// `values[r · dim + i] · scales[r]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Codes {
    values: Vec<i8>,
    scales: Vec<f32>,
}

impl Codes {
    /// The codes of `rows` (`n × dim` values).
    pub fn of(rows: &[f32], dim: usize) -> Codes {
        let mut codes = Codes { values: Vec::with_capacity(rows.len()), scales: Vec::new() };
        if dim > 0 {
            for row in rows.chunks_exact(dim) {
                let (values, scale) = code(row);
                codes.values.extend(values);
                codes.scales.push(scale);
            }
        }
        codes
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.values.len() + 4 * self.scales.len()
    }
}

/// `v` coded on 8 bits (−127..=127) and its scale: the largest magnitude of `v` over 127.
fn code(v: &[f32]) -> (impl Iterator<Item = i8> + '_, f32) {
    let largest = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = if largest > 0.0 && largest.is_finite() { largest / 127.0 } else { 1.0 };
    (v.iter().map(move |x| (x / scale).round().clamp(-127.0, 127.0) as i8), scale)
}

/// Dot product of two codes, summed in 16 independent integer lanes (which the compiler turns
/// into SIMD multiply-adds).
fn dot_codes(a: &[i8], b: &[i8]) -> i32 {
    let mut lanes = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
    for (x, y) in ca.zip(cb) {
        for ((l, a), b) in lanes.iter_mut().zip(x).zip(y) {
            *l += i32::from(i16::from(*a) * i16::from(*b));
        }
    }
    lanes.iter().sum::<i32>() + tail
}

/// How many of the rows best by their codes are scored exactly for a search of the `k` best:
/// four times `k`, and 32 more.
pub fn rescored(k: usize) -> usize {
    4 * k + 32
}

/// How close a question is to a whole matrix of rows: the mean and the standard deviation of
/// its cosines to every row, and the largest (cosines in −1..=1; the codes' cosines, within
/// their error of the exact ones, when the search scored codes). What a question's best
/// cosine means depends on them: the best of many rows of a long manual stands higher by
/// chance than the best of a short profile's few.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spread {
    pub mean: f32,
    pub deviation: f32,
    pub largest: f32,
    /// How many rows.
    pub rows: usize,
}

impl Spread {
    /// How far the largest cosine stands above what the largest of that many would reach by
    /// chance, `mean + deviation · √(2 ln rows)` (the expected maximum of `rows` normal
    /// draws, about): at most 0 when nothing stands out.
    pub fn excess(&self) -> f32 {
        self.largest - self.mean - self.deviation * (2.0 * (self.rows as f32).ln()).sqrt()
    }

    /// The spread of `scores`; `None` when there are none.
    fn of(scores: &[(usize, f32)]) -> Option<Spread> {
        let n = scores.len() as f64;
        let largest = scores.iter().map(|s| s.1).reduce(f32::max)?;
        let mean = scores.iter().map(|s| f64::from(s.1)).sum::<f64>() / n;
        let variance = scores.iter().map(|s| (f64::from(s.1) - mean).powi(2)).sum::<f64>() / n;
        Some(Spread { mean: mean as f32, deviation: variance.sqrt() as f32, largest, rows: scores.len() })
    }
}

/// What [`top_k`] found: the best rows and the spread of every row's score.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ranked {
    /// `(row, cosine)`, best first, the cosines exact.
    pub hits: Vec<(usize, f32)>,
    /// `None` without rows.
    pub spread: Option<Spread>,
}

/// The `k` best `(row, cosine)` of `query` among the rows of `vectors` (`n × query.len()`
/// values) whose codes are `codes`, best first, the cosines exact; ties keep the lower row
/// first. Fewer than `k` when there are fewer rows. Codes that are not those of `n` rows
/// (`Codes::default()`) score every row exactly. With them, the [`Spread`] of all the rows.
pub fn top_k(query: &[f32], vectors: &[f32], codes: &Codes, k: usize) -> Ranked {
    let dim = query.len();
    if dim == 0 || k == 0 {
        return Ranked::default();
    }
    let n = vectors.len() / dim;
    if n <= rescored(k) || codes.scales.len() != n {
        let scored: Vec<(usize, f32)> = vectors.chunks_exact(dim).map(|row| dot(query, row)).enumerate().collect();
        let spread = Spread::of(&scored);
        return Ranked { hits: best(scored, k), spread };
    }
    let (coded, scale) = code(query);
    let coded: Vec<i8> = coded.collect();
    let approximate = codes.values.chunks_exact(dim).zip(&codes.scales);
    let scored: Vec<(usize, f32)> =
        approximate.map(|(row, s)| dot_codes(&coded, row) as f32 * s * scale).enumerate().collect();
    let spread = Spread::of(&scored);
    let candidates = best(scored, rescored(k));
    let hits = best(
        candidates.into_iter().map(|(row, _)| (row, dot(query, &vectors[row * dim..(row + 1) * dim]))).collect(),
        k,
    );
    let spread = spread.map(|s| Spread { largest: hits.first().map_or(s.largest, |h| h.1), ..s });
    Ranked { hits, spread }
}

/// The `k` best of `scored` `(row, score)`, best first; ties keep the lower row first.
fn best(mut scored: Vec<(usize, f32)>, k: usize) -> Vec<(usize, f32)> {
    let better = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if scored.len() > k {
        scored.select_nth_unstable_by(k - 1, better);
        scored.truncate(k);
    }
    scored.sort_unstable_by(better);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::normalize;

    fn exact(query: &[f32], rows: &[f32], k: usize) -> Vec<(usize, f32)> {
        best(rows.chunks_exact(query.len()).map(|row| dot(query, row)).enumerate().collect(), k)
    }

    #[test]
    fn the_closest_rows_come_first() {
        let rows = [[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6]].concat();
        let codes = Codes::of(&rows, 2);
        let found = top_k(&[1.0, 0.0], &rows, &codes, 2);
        assert_eq!(found.hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![0, 3]);
        assert_eq!(top_k(&[0.0, 1.0], &rows, &codes, 10).hits.len(), 4);
        assert!(top_k(&[0.0, 1.0], &rows, &codes, 0).hits.is_empty());
        // cosines 1, 0, 0.6, 0.8 to the rows: mean 0.6, deviation √0.14
        let spread = found.spread.expect("rows");
        assert!((spread.mean - 0.6).abs() < 1e-6 && (spread.deviation - 0.14f32.sqrt()).abs() < 1e-6);
        assert_eq!(spread.largest, 1.0);
    }

    /// Over thousands of random rows (many near ties: the hardest case for the codes), the
    /// hits are those of scoring every row exactly, with their exact cosines.
    #[test]
    fn the_codes_find_the_same_hits_as_scoring_every_row() {
        let (n, dim) = (5_000, 96);
        let mut state = 0x2545f4914f6cdd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let mut rows: Vec<f32> = (0..n * dim).map(|_| next()).collect();
        rows.chunks_exact_mut(dim).for_each(normalize);
        let codes = Codes::of(&rows, dim);
        assert_eq!(codes.bytes(), n * dim + 4 * n);
        for _ in 0..50 {
            let mut q: Vec<f32> = (0..dim).map(|_| next()).collect();
            normalize(&mut q);
            let found = top_k(&q, &rows, &codes, 20);
            assert_eq!(found.hits, exact(&q, &rows, 20));
            // the spread, from the codes' cosines, is the exact cosines' within their error
            let all: Vec<(usize, f32)> = rows.chunks_exact(dim).map(|row| dot(&q, row)).enumerate().collect();
            let (spread, truth) = (found.spread.expect("rows"), Spread::of(&all).expect("rows"));
            assert!((spread.mean - truth.mean).abs() < 1e-3, "{spread:?} {truth:?}");
            assert!((spread.deviation - truth.deviation).abs() < 1e-3, "{spread:?} {truth:?}");
            assert_eq!((spread.largest, spread.rows), (truth.largest, n));
        }
        // codes of other rows (a stale copy) are never used: every row is scored exactly
        assert_eq!(top_k(&rows[..dim], &rows, &Codes::default(), 3).hits, exact(&rows[..dim], &rows, 3));
    }

    #[test]
    fn a_row_of_zeros_codes_to_zeros() {
        let codes = Codes::of(&[0.0, 0.0, 1.0, -0.5], 2);
        assert_eq!(codes.values, vec![0, 0, 127, -64]);
        assert_eq!(dot_codes(&[1; 19], &[2; 19]), 38);
    }
}
