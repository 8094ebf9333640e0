//! Scaled dot-product self-attention of a padded batch, every head, in `f32`:
//! `softmax(q · kᵀ / √head_dim + mask) · v` per sequence and head, read straight from the
//! output of one linear layer that gives each token's query, key and value side by side.
//!
//! Per sequence and head: the keys are packed (transposed) and the scores of all queries come
//! from one product ([`crate::matmul`]: `Q · Kᵀ`, the queries read in place); each row of scores
//! is scaled and turned into weights by a softmax over the real keys, 8 or 16 scores to a vector
//! (AVX2, AVX-512) with a polynomial `exp` ([`exp`]), padding keys getting a weight of exactly
//! 0; the values are packed and the context is a second product (`P · V`) written in place into
//! the output, then divided by the row's sum of weights (`head_dim` divisions a row, not `len`).
//! Without AVX2 the same steps run in plain Rust; [`attention_reference`] is the whole
//! computation in `f64`, the tests' yardstick.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use crate::matmul::{product, Packed};

/// The batch's and the heads' dimensions.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Sequences in the batch.
    pub rows: usize,
    /// Tokens per sequence (padding included).
    pub len: usize,
    /// Attention heads.
    pub heads: usize,
    /// Values per head (`dim = heads · head_dim`).
    pub head_dim: usize,
}

impl Shape {
    fn dim(&self) -> usize {
        self.heads * self.head_dim
    }
}

/// Self-attention of every sequence and head.
///
/// `qkv` holds `rows · len` tokens of `3 · dim` values: the token's query, key and value, head
/// `h` at `h · head_dim` within each; `mask` one entry per token (1 real, 0 padding: padding
/// keys get no weight, padding queries are computed like the others); the context is written to
/// `out`, `rows · len × dim`. Panics if a length disagrees with `shape`.
pub fn attention(qkv: &[f32], mask: &[u32], shape: Shape, out: &mut [f32]) {
    let (len, dim, hd) = (shape.len, shape.dim(), shape.head_dim);
    let tokens = shape.rows * len;
    assert_eq!(qkv.len(), tokens * 3 * dim, "qkv is not {tokens} × 3·{dim}");
    assert_eq!(mask.len(), tokens, "mask is not {tokens} long");
    assert_eq!(out.len(), tokens * dim, "out is not {tokens} × {dim}");
    let scale = 1.0 / (hd as f32).sqrt();
    let (mut keys, mut values) = (Packed::default(), Packed::default());
    let (mut scores, mut inverse) = (vec![0f32; len * len], vec![0f32; len]);
    for seq in 0..shape.rows {
        let keep = &mask[seq * len..(seq + 1) * len];
        for head in 0..shape.heads {
            let base = seq * len * 3 * dim + head * hd;
            keys.pack_columns(hd, len, &qkv[base + dim..], 3 * dim);
            product(&qkv[base..], 3 * dim, len, &keys, &mut scores, len);
            for (row, inverse) in scores.chunks_exact_mut(len).zip(&mut inverse) {
                *inverse = softmax(row, keep, scale);
            }
            values.pack_rows(len, hd, &qkv[base + 2 * dim..], 3 * dim);
            let context = &mut out[seq * len * dim + head * hd..];
            product(&scores, len, len, &values, context, dim);
            // the softmax's division, on the head's values of each row rather than its weights
            for (row, inverse) in context.chunks_mut(dim).zip(&inverse) {
                row[..hd].iter_mut().for_each(|v| *v *= inverse);
            }
        }
    }
}

/// `scores ← exp(scale · scores − max)` over the keys `keep` marks (1), the others 0, and the
/// inverse of their sum (0 for a row with no key kept): the softmax, its division left to the
/// caller (done on the context, `head_dim` values a row instead of `len`).
fn softmax(scores: &mut [f32], keep: &[u32], scale: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if crate::avx2_available() {
        if avx512_available() {
            // SAFETY: the CPU has AVX-512 F, AVX2 and FMA (checked just above); `keep` is as
            // long as `scores`.
            return unsafe { softmax_avx512(scores, keep, scale) };
        }
        // SAFETY: the CPU has AVX2 and FMA (checked just above); `keep` is as long as `scores`.
        return unsafe { softmax_avx2(scores, keep, scale) };
    }
    scores.iter_mut().for_each(|s| *s *= scale);
    let top = scores.iter().zip(keep).filter(|(_, k)| **k != 0).fold(f32::NEG_INFINITY, |m, (s, _)| m.max(*s));
    finish(scores, keep, top, 0.0)
}

/// The end of a softmax whose largest kept score is `top`, weights summing to `sum` already
/// exponentiated: `rest` the scaled scores still to be (`keep` marking its real keys). Returns
/// the inverse of the weights' total (0 if it is 0).
fn finish(rest: &mut [f32], keep: &[u32], top: f32, sum: f32) -> f32 {
    let mut total = sum;
    for (s, k) in rest.iter_mut().zip(keep) {
        *s = if *k != 0 { exp(*s - top) } else { 0.0 };
        total += *s;
    }
    if total > 0.0 {
        1.0 / total
    } else {
        0.0
    }
}

/// [`softmax`] in AVX2 intrinsics, 8 scores at a time ([`exp_avx2`]), the rest in plain Rust.
///
/// # Safety
/// The CPU must have AVX2 and FMA; `keep` at least as long as `scores`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn softmax_avx2(scores: &mut [f32], keep: &[u32], scale: f32) -> f32 {
    debug_assert!(keep.len() >= scores.len());
    let whole = scores.len() / 8 * 8;
    let (s, k) = (scores.as_mut_ptr(), keep.as_ptr());
    let dropped = |i: usize| {
        let k = _mm256_loadu_si256(k.add(i) as *const __m256i);
        _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_setzero_si256()))
    };
    let mut max = _mm256_set1_ps(f32::NEG_INFINITY);
    for i in (0..whole).step_by(8) {
        let x = _mm256_mul_ps(_mm256_loadu_ps(s.add(i)), _mm256_set1_ps(scale));
        _mm256_storeu_ps(s.add(i), x);
        max = _mm256_max_ps(max, _mm256_blendv_ps(x, _mm256_set1_ps(f32::NEG_INFINITY), dropped(i)));
    }
    scores[whole..].iter_mut().for_each(|s| *s *= scale);
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), max);
    let kept = scores[whole..].iter().zip(&keep[whole..]).filter(|(_, k)| **k != 0).map(|(s, _)| *s);
    let top = lanes.into_iter().chain(kept).fold(f32::NEG_INFINITY, f32::max);
    let mut sum = _mm256_setzero_ps();
    for i in (0..whole).step_by(8) {
        let e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s.add(i)), _mm256_set1_ps(top)));
        let e = _mm256_andnot_ps(dropped(i), e);
        _mm256_storeu_ps(s.add(i), e);
        sum = _mm256_add_ps(sum, e);
    }
    _mm256_storeu_ps(lanes.as_mut_ptr(), sum);
    let total: f32 = lanes.iter().sum();
    finish(&mut scores[whole..], &keep[whole..], top, total)
}

/// Whether the CPU has AVX-512 F (checked once by the standard library, then cached).
#[cfg(target_arch = "x86_64")]
fn avx512_available() -> bool {
    is_x86_feature_detected!("avx512f")
}

/// [`softmax`] in AVX-512, 16 scores at a time, the last vector masked ([`exp_avx512`]).
///
/// # Safety
/// The CPU must have AVX-512 F, AVX2 and FMA; `keep` at least as long as `scores`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn softmax_avx512(scores: &mut [f32], keep: &[u32], scale: f32) -> f32 {
    debug_assert!(keep.len() >= scores.len());
    let n = scores.len();
    let (s, k) = (scores.as_mut_ptr(), keep.as_ptr());
    // the lanes of the vector at `i` that are in the row, and those of them that are kept
    let lanes = |i: usize| if n - i >= 16 { 0xffff } else { (1u16 << (n - i)) - 1 };
    let kept = |i: usize, lanes: __mmask16| {
        let k = _mm512_maskz_loadu_epi32(lanes, k.add(i) as *const i32);
        _mm512_mask_cmpneq_epi32_mask(lanes, k, _mm512_setzero_si512())
    };
    let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
    for i in (0..n).step_by(16) {
        let lanes = lanes(i);
        let x = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, s.add(i)), _mm512_set1_ps(scale));
        _mm512_mask_storeu_ps(s.add(i), lanes, x);
        max = _mm512_mask_max_ps(max, kept(i, lanes), max, x);
    }
    let top = _mm512_set1_ps(_mm512_reduce_max_ps(max));
    let mut sum = _mm512_setzero_ps();
    for i in (0..n).step_by(16) {
        let lanes = lanes(i);
        let e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, s.add(i)), top));
        let e = _mm512_maskz_mov_ps(kept(i, lanes), e);
        _mm512_mask_storeu_ps(s.add(i), lanes, e);
        sum = _mm512_add_ps(sum, e);
    }
    let total = _mm512_reduce_add_ps(sum);
    if total > 0.0 {
        1.0 / total
    } else {
        0.0
    }
}

/// [`exp`] of 16 values: [`exp_avx2`]'s steps.
///
/// # Safety
/// The CPU must have AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn exp_avx512(x: __m512) -> __m512 {
    let x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0)), _mm512_set1_ps(88.0));
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(_mm512_fmadd_ps(
        x,
        _mm512_set1_ps(std::f32::consts::LOG2_E),
        _mm512_set1_ps(0.5),
    ));
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693_359_4), x);
    let r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.121_944_4e-4), r);
    let mut p = _mm512_set1_ps(EXP_POLY[0]);
    for c in &EXP_POLY[1..] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(*c));
    }
    let e_r = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0));
    let scale = _mm512_slli_epi32::<23>(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)));
    _mm512_mul_ps(e_r, _mm512_castsi512_ps(scale))
}

/// [`exp`] of 8 values.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_avx2(x: __m256) -> __m256 {
    let x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0)), _mm256_set1_ps(88.0));
    let n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E), _mm256_set1_ps(0.5)));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.121_944_4e-4), r);
    let mut p = _mm256_set1_ps(EXP_POLY[0]);
    for c in &EXP_POLY[1..] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(*c));
    }
    let e_r = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0));
    let scale = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)));
    _mm256_mul_ps(e_r, _mm256_castsi256_ps(scale))
}

/// The coefficients of `(eʳ − 1 − r) / r²` on `[−ln 2 / 2, ln 2 / 2]`, highest degree first.
const EXP_POLY: [f32; 6] = [1.987_569_1e-4, 1.398_2e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5];

/// `eˣ` in `f32` for `x ≤ 88`, to about 2 units in the last place (Cephes' `expf`):
/// `2ⁿ · eʳ` with `n = ⌊x · log₂e + ½⌋`, `r = x − n · ln 2` in two parts, `eʳ` by a polynomial
/// of degree 7; below −87, a value under 2⁻¹²⁵ (not 0). Branch-free, so that a loop of it
/// vectorises.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = EXP_POLY[1..].iter().fold(EXP_POLY[0], |acc, &c| acc * r + c);
    let e_r = p * r * r + r + 1.0;
    e_r * f32::from_bits(((n as i32 + 127) << 23) as u32)
}

/// [`attention`] computed plainly in `f64` (scores, softmax with `exp`, context), rounded to
/// `f32` at the end: the tests' yardstick.
pub fn attention_reference(qkv: &[f32], mask: &[u32], shape: Shape) -> Vec<f32> {
    let (dim, hd) = (shape.dim(), shape.head_dim);
    let at = |seq: usize, i: usize, part: usize, h: usize| (seq * shape.len + i) * 3 * dim + part * dim + h * hd;
    let mut out = vec![0f32; shape.rows * shape.len * dim];
    for seq in 0..shape.rows {
        for h in 0..shape.heads {
            for i in 0..shape.len {
                let q = &qkv[at(seq, i, 0, h)..][..hd];
                let scores: Vec<Option<f64>> = (0..shape.len)
                    .map(|j| {
                        let k = &qkv[at(seq, j, 1, h)..][..hd];
                        let dot: f64 = q.iter().zip(k).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
                        (mask[seq * shape.len + j] != 0).then_some(dot / (hd as f64).sqrt())
                    })
                    .collect();
                let max = scores.iter().flatten().fold(f64::NEG_INFINITY, |m, s| m.max(*s));
                let weights: Vec<f64> = scores.iter().map(|s| s.map_or(0.0, |s| (s - max).exp())).collect();
                let sum: f64 = weights.iter().sum();
                for d in 0..hd {
                    let c: f64 = (0..shape.len).map(|j| weights[j] * f64::from(qkv[at(seq, j, 2, h) + d])).sum();
                    out[(seq * shape.len + i) * dim + h * hd + d] = if sum > 0.0 { (c / sum) as f32 } else { 0.0 };
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pseudo_random as random;

    #[test]
    fn exp_matches_the_standard_library() {
        for i in -8700..=0 {
            let x = i as f32 / 100.0;
            let (got, want) = (exp(x), x.exp());
            assert!((got - want).abs() <= 4.0 * f32::EPSILON * want, "exp({x}) = {got} against {want}");
        }
        assert!(exp(f32::NEG_INFINITY) < 1e-37);
    }

    #[test]
    fn every_softmax_path_matches_the_plain_one_on_every_length_with_dropped_keys() {
        for len in (1..=40).chain([63, 64, 65, 255, 256]) {
            let row: Vec<f32> = random(len, len as u64).iter().map(|v| 8.0 * v).collect();
            let keep: Vec<u32> = (0..len).map(|j| u32::from(j % 5 != 3)).collect();
            let plain = {
                let mut s = row.clone();
                s.iter_mut().for_each(|s| *s *= 0.25);
                let top = s.iter().zip(&keep).filter(|(_, k)| **k != 0).fold(f32::NEG_INFINITY, |m, (s, _)| m.max(*s));
                let inverse = finish(&mut s, &keep, top, 0.0);
                (s, inverse)
            };
            let mut paths: Vec<(&str, (Vec<f32>, f32))> = Vec::new();
            #[cfg(target_arch = "x86_64")]
            {
                if crate::avx2_available() {
                    let mut s = row.clone();
                    // SAFETY: the CPU has AVX2 and FMA (checked just above); `keep` is as long as `s`.
                    let inverse = unsafe { softmax_avx2(&mut s, &keep, 0.25) };
                    paths.push(("AVX2", (s, inverse)));
                }
                if crate::avx2_available() && avx512_available() {
                    let mut s = row.clone();
                    // SAFETY: the CPU has AVX-512 F, AVX2 and FMA (checked just above).
                    let inverse = unsafe { softmax_avx512(&mut s, &keep, 0.25) };
                    paths.push(("AVX-512", (s, inverse)));
                }
            }
            for (name, (got, inverse)) in paths {
                assert!(
                    (inverse - plain.1).abs() <= 1e-6 * plain.1,
                    "{name} length {len}: 1 / Σ {inverse} vs {}",
                    plain.1
                );
                for (j, (g, p)) in got.iter().zip(&plain.0).enumerate() {
                    assert!((g - p).abs() <= 1e-6, "{name} length {len} [{j}]: {g} vs {p}");
                    assert!(keep[j] != 0 || *g == 0.0, "{name} length {len}: a dropped key weighs {g}");
                }
            }
        }
    }

    #[test]
    fn attention_matches_the_reference_on_edge_shapes_with_padding() {
        // lengths around the vector (8) and the score block (64); head dims with and without
        // the vectorised context (multiples of 32 or not)
        let shapes = [(1, 1, 2, 32), (2, 3, 1, 8), (1, 31, 12, 32), (3, 32, 2, 33), (1, 33, 1, 64), (1, 255, 2, 32)];
        for (n, &(rows, len, heads, head_dim)) in shapes.iter().chain(&[(2, 256, 1, 32)]).enumerate() {
            let shape = Shape { rows, len, heads, head_dim };
            let tokens = rows * len;
            let qkv: Vec<f32> = random(tokens * 3 * shape.dim(), n as u64).iter().map(|v| 3.0 * v).collect();
            // the last sequence padded to a third of its length (at least one real token)
            let real = len.div_ceil(3);
            let mask: Vec<u32> = (0..tokens).map(|t| u32::from(t < (rows - 1) * len + real)).collect();
            let mut out = vec![f32::NAN; tokens * shape.dim()];
            attention(&qkv, &mask, shape, &mut out);
            let want = attention_reference(&qkv, &mask, shape);
            for (i, (g, w)) in out.iter().zip(&want).enumerate() {
                assert!((g - w).abs() < 1e-5, "{shape:?} [{i}]: {g} vs {w}");
            }
        }
    }
}
