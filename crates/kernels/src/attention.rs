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
//!
//! [`attention_in`] may run both products on `bf16` operands instead ([`Products::Bf16`],
//! [`crate::bf16`]: queries, keys, weights and values rounded to 8 significant bits, the sums in
//! `f32`), twice the multiply-adds per instruction where the CPU has AVX-512 BF16; the softmax
//! and the division stay in `f32`. multilingual-e5-small's 4-bit path runs it
//! ([`Products::chosen`]); all-MiniLM-L6-v2 keeps `f32`, its vectors unchanged.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use crate::bf16;
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

/// The arithmetic of attention's two products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Products {
    /// `f32` operands ([`crate::matmul`]: AVX-512, AVX2 or plain).
    F32,
    /// `bf16` operands, `f32` sums ([`crate::bf16`], on `simd`).
    Bf16(bf16::Simd),
}

impl Products {
    /// The fastest products this CPU has for a model that accepts `bf16` operands, chosen once
    /// per process: `bf16` on AVX-512 BF16, else `f32` (plain `bf16` is slower than `f32` on
    /// AVX2). `REPLICAD_ATTENTION_PATH=f32` keeps `f32` (to measure one against the other).
    pub fn chosen() -> Products {
        static PATH: std::sync::OnceLock<Products> = std::sync::OnceLock::new();
        *PATH.get_or_init(|| match (std::env::var("REPLICAD_ATTENTION_PATH").as_deref(), bf16::Simd::detect()) {
            (Ok("f32"), _) | (_, bf16::Simd::Plain) => Products::F32,
            (_, simd) => Products::Bf16(simd),
        })
    }

    /// How logs and `.ci/run` name them.
    pub fn describe(self) -> &'static str {
        match (self, crate::matmul::Simd::detect()) {
            (Products::Bf16(bf16::Simd::Avx512Bf16), _) => "bf16 products, AVX-512 BF16 (vdpbf16ps)",
            (Products::Bf16(bf16::Simd::Plain), _) => "bf16 products, plain Rust",
            (Products::F32, crate::matmul::Simd::Avx512) => "f32 products, AVX-512 F",
            (Products::F32, crate::matmul::Simd::Avx2) => "f32 products, AVX2",
            (Products::F32, crate::matmul::Simd::Plain) => "f32 products, plain Rust",
        }
    }
}

/// Self-attention of every sequence and head, in `f32` ([`attention_in`] with
/// [`Products::F32`]).
///
/// `qkv` holds `rows · len` tokens of `3 · dim` values: the token's query, key and value, head
/// `h` at `h · head_dim` within each; `mask` one entry per token (1 real, 0 padding: padding
/// keys get no weight, padding queries are computed like the others); the context is written to
/// `out`, `rows · len × dim`. Panics if a length disagrees with `shape`.
pub fn attention(qkv: &[f32], mask: &[u32], shape: Shape, out: &mut [f32]) {
    attention_in(Products::F32, qkv, mask, shape, out);
}

/// [`attention`] with its two products in `products`' arithmetic. Panics as [`attention`]
/// does, or if this CPU cannot run `products`.
pub fn attention_in(products: Products, qkv: &[f32], mask: &[u32], shape: Shape, out: &mut [f32]) {
    let (len, dim) = (shape.len, shape.dim());
    let tokens = shape.rows * len;
    assert_eq!(qkv.len(), tokens * 3 * dim, "qkv is not {tokens} × 3·{dim}");
    assert_eq!(mask.len(), tokens, "mask is not {tokens} long");
    assert_eq!(out.len(), tokens * dim, "out is not {tokens} × {dim}");
    let mut heads: Box<dyn HeadProducts> = match products {
        Products::F32 => Box::<F32Products>::default(),
        Products::Bf16(simd) => {
            assert!(simd.available(), "{simd:?} is not available on this CPU");
            Box::new(Bf16Products { simd, ..Default::default() })
        }
    };
    let scale = 1.0 / (shape.head_dim as f32).sqrt();
    let (mut scores, mut inverse) = (vec![0f32; len * len], vec![0f32; len]);
    for seq in 0..shape.rows {
        let keep = &mask[seq * len..(seq + 1) * len];
        for head in 0..shape.heads {
            let base = seq * len * 3 * dim + head * shape.head_dim;
            let at = |part: usize| &qkv[base + part * dim..];
            heads.scores(at(0), at(1), shape, &mut scores);
            heads.weights(&mut scores, keep, scale, &mut inverse);
            let context = &mut out[seq * len * dim + head * shape.head_dim..];
            heads.context(&scores, at(2), shape, context);
            // the softmax's division, on the head's values of each row rather than its weights
            for (row, inverse) in context.chunks_mut(dim).zip(&inverse) {
                row[..shape.head_dim].iter_mut().for_each(|v| *v *= inverse);
            }
        }
    }
}

/// A head's products and softmax in one arithmetic, with the packings it reuses from head to
/// head.
trait HeadProducts {
    /// `scores` (`len × len`) ← the head's queries (`q`, a token every `3 · dim`) times its
    /// keys (`k`, the same) transposed.
    fn scores(&mut self, q: &[f32], k: &[f32], shape: Shape, scores: &mut [f32]);
    /// Each row's weights from its scores times `scale` ([`softmax`]; `keep` the real keys),
    /// and their sums' inverses into `inverse`.
    fn weights(&mut self, scores: &mut [f32], keep: &[u32], scale: f32, inverse: &mut [f32]);
    /// `context` (`len` rows of `head_dim`, `dim` apart) ← the weights (`scores` after
    /// [`HeadProducts::weights`], or the packing of them that `weights` kept) times the head's
    /// values (`v`, a token every `3 · dim`).
    fn context(&mut self, scores: &[f32], v: &[f32], shape: Shape, context: &mut [f32]);
}

/// [`Products::F32`]: queries read in place, keys and values packed ([`crate::matmul`]).
#[derive(Default)]
struct F32Products {
    keys: Packed,
    values: Packed,
}

impl HeadProducts for F32Products {
    fn scores(&mut self, q: &[f32], k: &[f32], shape: Shape, scores: &mut [f32]) {
        let (len, stride) = (shape.len, 3 * shape.dim());
        self.keys.pack_columns(shape.head_dim, len, k, stride);
        product(q, stride, len, &self.keys, scores, len);
    }

    fn weights(&mut self, scores: &mut [f32], keep: &[u32], scale: f32, inverse: &mut [f32]) {
        for (row, inverse) in scores.chunks_exact_mut(keep.len()).zip(inverse) {
            *inverse = softmax(row, keep, scale);
        }
    }

    fn context(&mut self, scores: &[f32], v: &[f32], shape: Shape, context: &mut [f32]) {
        let len = shape.len;
        self.values.pack_rows(len, shape.head_dim, v, 3 * shape.dim());
        product(scores, len, len, &self.values, context, shape.dim());
    }
}

/// [`Products::Bf16`]: every operand packed in `bf16` ([`crate::bf16`]), the weights written in
/// `bf16` by the softmax.
#[derive(Default)]
struct Bf16Products {
    simd: bf16::Simd,
    rows: bf16::Rows,
    columns: bf16::Packed,
}

impl HeadProducts for Bf16Products {
    fn scores(&mut self, q: &[f32], k: &[f32], shape: Shape, scores: &mut [f32]) {
        let (len, stride) = (shape.len, 3 * shape.dim());
        self.rows.pack(self.simd, len, shape.head_dim, q, stride, 1.0);
        self.columns.pack_columns(self.simd, shape.head_dim, len, k, stride);
        bf16::product(self.simd, &self.rows, &self.columns, scores, len);
    }

    fn weights(&mut self, scores: &mut [f32], keep: &[u32], scale: f32, inverse: &mut [f32]) {
        let len = keep.len();
        self.rows.reset(len, len);
        for (i, (row, inverse)) in scores.chunks_exact_mut(len).zip(inverse).enumerate() {
            *inverse = softmax_bf16(self.simd, row, keep, scale, self.rows.row_mut(i));
        }
    }

    fn context(&mut self, _: &[f32], v: &[f32], shape: Shape, context: &mut [f32]) {
        self.columns.pack_rows(self.simd, shape.len, shape.head_dim, v, 3 * shape.dim());
        bf16::product(self.simd, &self.rows, &self.columns, context, shape.dim());
    }
}

/// The weights of a row of scores, in `bf16` into `out`: [`softmax`]'s `exp(scale · s − scale ·
/// max)` in `f32` over the keys `keep` marks (the others 0), rounded to `bf16` as
/// [`bf16::convert`] does on `simd`; returns the inverse of the `f32` weights' sum (0 if none).
/// `scale` must be positive.
fn softmax_bf16(simd: bf16::Simd, scores: &mut [f32], keep: &[u32], scale: f32, out: &mut [u16]) -> f32 {
    assert!(keep.len() >= scores.len() && out.len() >= scores.len());
    match simd {
        // SAFETY: the products' path is AVX-512 BF16, which `attention_in` asserted this CPU
        // has; `keep` and `out` are as long as `scores` (asserted above).
        #[cfg(target_arch = "x86_64")]
        bf16::Simd::Avx512Bf16 => unsafe { softmax_bf16_avx512(scores, keep, scale, out) },
        _ => {
            let inverse = softmax(scores, keep, scale);
            bf16::convert(simd, scores, 1.0, out);
            inverse
        }
    }
}

/// [`softmax_bf16`] in AVX-512: one pass for the largest kept score, one for the weights, 16 at
/// a time, the last vector masked: `2ᵗ` of `t = log₂e · scale · (s − max)` (one FMA,
/// [`exp2_avx512`], to a few parts in a million: the weights are rounded to `bf16`'s 2⁻⁹
/// next).
///
/// # Safety
/// The CPU must have AVX-512 F, BW, VL and BF16, AVX2 and FMA; `keep` and `out` at least as
/// long as `scores`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")]
unsafe fn softmax_bf16_avx512(scores: &[f32], keep: &[u32], scale: f32, out: &mut [u16]) -> f32 {
    let n = scores.len();
    let (s, k) = (scores.as_ptr(), keep.as_ptr());
    let (lanes, kept) = (|i| row_lanes(n, i), |i, lanes| kept_lanes(k, i, lanes));
    let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
    for i in (0..n).step_by(16) {
        let lanes = lanes(i);
        max = _mm512_mask_max_ps(max, kept(i, lanes), max, _mm512_maskz_loadu_ps(lanes, s.add(i)));
    }
    let factor = scale * std::f32::consts::LOG2_E;
    let top = _mm512_set1_ps(factor * _mm512_reduce_max_ps(max));
    let mut sum = _mm512_setzero_ps();
    for i in (0..n).step_by(16) {
        let lanes = lanes(i);
        let t = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(lanes, s.add(i)), _mm512_set1_ps(factor), top);
        let e = _mm512_maskz_mov_ps(kept(i, lanes), exp2_avx512(t));
        let h = std::mem::transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(e));
        _mm256_mask_storeu_epi16(out.as_mut_ptr().add(i) as *mut i16, lanes, h);
        sum = _mm512_add_ps(sum, e);
    }
    reciprocal(_mm512_reduce_add_ps(sum))
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
    reciprocal(total)
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

/// `1 / total`, the factor that makes weights summing to `total` sum to 1; 0 when none is kept.
fn reciprocal(total: f32) -> f32 {
    if total > 0.0 {
        1.0 / total
    } else {
        0.0
    }
}

/// The lanes of the 16 values at `i` of a row of `n` that are in the row.
#[cfg(target_arch = "x86_64")]
fn row_lanes(n: usize, i: usize) -> __mmask16 {
    if n - i >= 16 {
        0xffff
    } else {
        (1u16 << (n - i)) - 1
    }
}

/// Those of `lanes` (of the 16 values at `i`) whose `keep` flag, from `keep`, is not 0.
///
/// # Safety
/// AVX-512 F; `keep` readable at the lanes of `lanes` from `i` on.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn kept_lanes(keep: *const u32, i: usize, lanes: __mmask16) -> __mmask16 {
    let k = _mm512_maskz_loadu_epi32(lanes, keep.add(i) as *const i32);
    _mm512_mask_cmpneq_epi32_mask(lanes, k, _mm512_setzero_si512())
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
    let (lanes, kept) = (|i| row_lanes(n, i), |i, lanes| kept_lanes(k, i, lanes));
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
    reciprocal(_mm512_reduce_add_ps(sum))
}

/// `2ᵗ` of 16 values `t ≤ 0` (larger ones too, up to 127), within 4·10⁻⁶ of it relatively:
/// `2ⁿ · 2ᶠ` with `n` the nearest integer to `t` and `f = t − n` in `[−½, ½]`, `2ᶠ` by its
/// Taylor polynomial of degree 5 (the remainder `(f ln 2)⁶ / 6!` ≤ 2.4·10⁻⁶, the rest the
/// `f32` roundings), `2ⁿ` by `vscalefps` (0 for `t` below −150, a subnormal from −126). Nine instructions against [`exp_avx512`]'s eighteen: for
/// weights rounded to `bf16` next ([`softmax_bf16`]).
///
/// # Safety
/// The CPU must have AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn exp2_avx512(t: __m512) -> __m512 {
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(t);
    let f = _mm512_sub_ps(t, n);
    let mut p = _mm512_set1_ps(EXP2_TAYLOR[0]);
    for c in &EXP2_TAYLOR[1..] {
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(*c));
    }
    _mm512_scalef_ps(p, n)
}

/// `(ln 2)ᵏ / k!` for `k` from 5 down to 0: `2ᶠ`'s Taylor polynomial, highest degree first.
const EXP2_TAYLOR: [f32; 6] = [1.333_355_8e-3, 9.618_129e-3, 5.550_411e-2, 0.240_226_5, std::f32::consts::LN_2, 1.0];

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
    fn the_short_exp2_is_within_its_stated_error() {
        #[cfg(target_arch = "x86_64")]
        if crate::avx2_available() && avx512_available() {
            for i in (-15_000..=200).step_by(16) {
                let t: [f32; 16] = std::array::from_fn(|j| (i + j as i32) as f32 / 100.0);
                let mut got = [0f32; 16];
                // SAFETY: the CPU has AVX-512 F, AVX2 and FMA (checked just above).
                unsafe { _mm512_storeu_ps(got.as_mut_ptr(), exp2_avx512(_mm512_loadu_ps(t.as_ptr()))) };
                for (t, got) in t.iter().zip(got) {
                    let want = f64::from(*t).exp2();
                    let error = (f64::from(got) - want).abs();
                    assert!(error <= 4e-6 * want + f64::from(f32::from_bits(1)), "2^{t} = {got} against {want}");
                }
            }
        }
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

    #[test]
    fn bf16_attention_is_within_the_rounding_of_its_weights_on_edge_shapes_with_padding() {
        let paths: Vec<bf16::Simd> =
            [bf16::Simd::Avx512Bf16, bf16::Simd::Plain].into_iter().filter(|s| s.available()).collect();
        eprintln!(
            "kernel paths of this CPU: attention of 4-bit models {:?} ({}), bf16 tested against the reference: {paths:?}",
            Products::chosen(),
            Products::chosen().describe()
        );
        let shapes = [(1, 1, 2, 32), (2, 3, 1, 8), (1, 31, 12, 32), (3, 32, 2, 33), (1, 33, 1, 64), (2, 237, 2, 32)];
        for (n, &(rows, len, heads, head_dim)) in shapes.iter().enumerate() {
            let shape = Shape { rows, len, heads, head_dim };
            let tokens = rows * len;
            // queries, keys and values that are bf16 values already: what remains is the
            // rounding of the weights (each within 2⁻⁹ of itself), so the context is within
            // 2⁻⁹ · max |v| = 3 / 512 of the reference, plus the f32 sums' 1e-5
            let qkv: Vec<f32> =
                random(tokens * 3 * shape.dim(), n as u64).iter().map(|v| bf16::to_f32(bf16::bf16(3.0 * v))).collect();
            let real = len.div_ceil(3);
            let mask: Vec<u32> = (0..tokens).map(|t| u32::from(t < (rows - 1) * len + real)).collect();
            let want = attention_reference(&qkv, &mask, shape);
            for simd in &paths {
                let mut out = vec![f32::NAN; tokens * shape.dim()];
                attention_in(Products::Bf16(*simd), &qkv, &mask, shape, &mut out);
                for (i, (g, w)) in out.iter().zip(&want).enumerate() {
                    assert!((g - w).abs() <= 3.0 / 512.0 + 1e-5, "{simd:?} {shape:?} [{i}]: {g} vs {w}");
                }
            }
        }
    }
}
