//! `bf16` products of small matrices, `C = A · B`, where the CPU has AVX-512 BF16: attention's
//! scores (`Q · Kᵀ`) and context (`P · V`) on multilingual-e5-small's 4-bit path
//! ([`crate::attention::Products::Bf16`]).
//!
//! Both operands are rounded to `bf16` when packed ([`bf16`]: the top 16 bits of the `f32`,
//! rounded to nearest, ties to even: 8 significant bits). `vdpbf16ps` multiplies 16 pairs of
//! `bf16` by 16 pairs and adds each pair's two products to an `f32` lane: 32 multiply-adds per
//! instruction against an `f32` FMA's 16 (on the AMD EPYC of docs/benchmarks.md, Zen 4, the
//! products take about half the time of the `f32` ones: `kernel_bench --attention`). The
//! products of two `bf16` are exact in `f32`; the sums are `f32`. Packing converts 16 or 32
//! values an instruction (`vcvtneps2bf16`, `vcvtne2ps2bf16`).
//!
//! `A` is packed by rows ([`Rows`]: `bf16` row-major, each row padded to an even length), so
//! that one 32-bit broadcast gives every lane a row's pair `(p, p + 1)`; `B` in panels of [`NR`]
//! columns ([`Packed`]), each pair of its rows interleaved (value `(p, j)` of a panel at
//! `(p / 2) · 32 + (j % NR) · 2 + p % 2`), so that one `zmm` load holds a pair of rows as
//! `vdpbf16ps` pairs them. An odd `k` is padded with a zero on both sides.
//!
//! # The kernel
//! Tiles of up to [`MR`] rows × two panels (32 columns), 24 independent `zmm` sums, as
//! [`crate::matmul`]'s AVX-512 tile; per pair of `k`, two loads of `B` and one broadcast per row.
//! Without AVX-512 BF16 the same roundings are multiplied in plain Rust ([`Simd::Plain`], the
//! tests' yardstick), whose sums differ from the kernel's only in their order.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Columns per panel: one `zmm` of 16 `f32` sums.
pub const NR: usize = 16;
// (the sums are written as the `f32` product's: [`crate::matmul::store_tile`])
const _: () = assert!(NR == crate::matmul::NR);

/// Most rows per tile: 12 rows × 2 panels = 24 accumulators.
pub const MR: usize = 12;

/// `x` rounded to `bf16` (nearest, ties to even), as its 16 bits; a NaN stays a NaN.
#[inline(always)]
pub fn bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

/// The `f32` value of the `bf16` `h` (exact).
#[inline(always)]
pub fn to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// The left operand of a product, `m × k` in `bf16`, row by row, each row `k` rounded up to an
/// even length (the padding 0). Kept between products so that its memory is reused.
#[derive(Default)]
pub struct Rows {
    m: usize,
    k: usize,
    values: Vec<u16>,
}

impl Rows {
    /// Values per packed row: `k` rounded up to even.
    fn stride(&self) -> usize {
        self.k.next_multiple_of(2)
    }

    /// Makes it `m × k`, its padding (a last column past an odd `k`) 0, its values what the
    /// memory held: every row is to be written ([`Rows::row_mut`]) before a product.
    pub fn reset(&mut self, m: usize, k: usize) {
        (self.m, self.k) = (m, k);
        let stride = self.stride();
        self.values.resize(m * stride, 0);
        if k % 2 == 1 {
            self.values.chunks_exact_mut(stride).for_each(|row| row[k] = 0);
        }
    }

    /// Row `i`'s `k` values, to write (`bf16` bits). Panics if there is no row `i`.
    pub fn row_mut(&mut self, i: usize) -> &mut [u16] {
        let (stride, k) = (self.stride(), self.k);
        &mut self.values[i * stride..][..k]
    }

    /// Packs the `m × k` matrix held row by row in `src` (value `(i, p)` at `src[i · stride +
    /// p]`) times `scale`, rounded to `bf16` ([`convert`] on `simd`), replacing what it held.
    /// Panics if `src` is too short.
    pub fn pack(&mut self, simd: Simd, m: usize, k: usize, src: &[f32], stride: usize, scale: f32) {
        assert!(m == 0 || src.len() >= (m - 1) * stride + k, "src is not {m} rows of {k} apart by {stride}");
        assert!(simd.available(), "{simd:?} is not available on this CPU");
        self.reset(m, k);
        for i in 0..m {
            let (src, row) = (&src[i * stride..][..k], self.row_mut(i));
            match simd {
                // SAFETY: the CPU has the instructions (asserted above); `row` is as long as `src`.
                #[cfg(target_arch = "x86_64")]
                Simd::Avx512Bf16 => unsafe { convert_avx512(src, scale, row) },
                _ => convert(simd, src, scale, row),
            }
        }
    }
}

/// `out[i] ← bf16(scale · x[i])` (the product rounded to `f32`, then to `bf16`), 16 values an
/// instruction on AVX-512 BF16 (`vcvtneps2bf16`: the same rounding for every value but
/// subnormals, which it flushes to zero). Panics if `out` is shorter than `x`.
pub fn convert(simd: Simd, x: &[f32], scale: f32, out: &mut [u16]) {
    assert!(out.len() >= x.len(), "out holds {} of {} values", out.len(), x.len());
    assert!(simd.available(), "{simd:?} is not available on this CPU");
    match simd {
        // SAFETY: the CPU has the instructions (asserted above), `out` is as long as `x`.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512Bf16 => unsafe { convert_avx512(x, scale, out) },
        _ => out.iter_mut().zip(x).for_each(|(h, x)| *h = bf16(scale * x)),
    }
}

/// [`convert`] with AVX-512 BF16.
///
/// # Safety
/// AVX-512 F, BW, VL and BF16; `out` at least as long as `x`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn convert_avx512(x: &[f32], scale: f32, out: &mut [u16]) {
    let n = x.len();
    for i in (0..n).step_by(16) {
        let lanes = if n - i >= 16 { 0xffff } else { (1u16 << (n - i)) - 1 };
        let v = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, x.as_ptr().add(i)), _mm512_set1_ps(scale));
        let h = std::mem::transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(v));
        _mm256_mask_storeu_epi16(out.as_mut_ptr().add(i) as *mut i16, lanes, h);
    }
}

/// The right operand of a product, `k × n` in `bf16`, in panels of [`NR`] columns, the rows of
/// each panel interleaved two by two (see the module documentation), zeros past `n` and past an
/// odd `k`. Kept between products so that its memory is reused.
#[derive(Default)]
pub struct Packed {
    k: usize,
    n: usize,
    values: Vec<u16>,
}

impl Packed {
    /// Pairs of rows: `k / 2` rounded up.
    fn pairs(&self) -> usize {
        self.k.div_ceil(2)
    }

    /// Empties the packing for a `k × n` matrix (all zeros).
    fn reset(&mut self, k: usize, n: usize) {
        (self.k, self.n) = (k, n);
        self.values.clear();
        self.values.resize(n.div_ceil(NR) * self.pairs() * 2 * NR, 0);
    }

    /// Where value `(p, j)` goes.
    #[inline(always)]
    fn at(&self, p: usize, j: usize) -> usize {
        ((j / NR) * self.pairs() + p / 2) * 2 * NR + (j % NR) * 2 + p % 2
    }

    /// Packs the `k × n` matrix held row by row in `src`: value `(p, j)` at `src[p · stride +
    /// j]` (attention's values: a token per row), rounded to `bf16` as [`convert`] does on
    /// `simd`. Panics if `src` is too short.
    pub fn pack_rows(&mut self, simd: Simd, k: usize, n: usize, src: &[f32], stride: usize) {
        assert!(k == 0 || src.len() >= (k - 1) * stride + n, "src is not {k} rows of {n} apart by {stride}");
        assert!(simd.available(), "{simd:?} is not available on this CPU");
        self.reset(k, n);
        match simd {
            // SAFETY: the CPU has the instructions (asserted above); `src` holds the rows
            // (asserted above), `values` the panels (`reset`).
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512Bf16 => unsafe { self.pack_rows_avx512(src, stride) },
            _ => {
                for p in 0..k {
                    for (j, x) in src[p * stride..][..n].iter().enumerate() {
                        let at = self.at(p, j);
                        self.values[at] = bf16(*x);
                    }
                }
            }
        }
    }

    /// [`Packed::pack_rows`] with AVX-512 BF16: per pair of rows and panel, 16 values of each
    /// converted and interleaved into one `zmm` of 32-bit pairs.
    ///
    /// # Safety
    /// AVX-512 F, BW, VL and BF16; `src` holds `k` rows of `n` values `stride` apart; `reset`
    /// has sized the panels.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
    unsafe fn pack_rows_avx512(&mut self, src: &[f32], stride: usize) {
        let (k, n) = (self.k, self.n);
        let words = self.values.as_mut_ptr() as *mut u32;
        for panel in 0..n.div_ceil(NR) {
            let cols = n - panel * NR;
            let lanes = if cols >= NR { 0xffff } else { (1u16 << cols) - 1 };
            let row = |p: usize| {
                let v = _mm512_maskz_loadu_ps(if p < k { lanes } else { 0 }, src.as_ptr().add(p * stride + panel * NR));
                _mm512_cvtepu16_epi32(std::mem::transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(v)))
            };
            for q in 0..self.pairs() {
                let pair = _mm512_or_si512(row(2 * q), _mm512_slli_epi32::<16>(row(2 * q + 1)));
                _mm512_storeu_si512(words.add((panel * self.pairs() + q) * NR) as *mut _, pair);
            }
        }
    }

    /// Packs the `k × n` matrix held column by column in `src`: value `(p, j)` at `src[j ·
    /// stride + p]` (attention's keys, transposed), rounded to `bf16` as [`convert`] does on
    /// `simd`. Panics if `src` is too short.
    pub fn pack_columns(&mut self, simd: Simd, k: usize, n: usize, src: &[f32], stride: usize) {
        assert!(n == 0 || src.len() >= (n - 1) * stride + k, "src is not {n} columns of {k} apart by {stride}");
        assert!(simd.available(), "{simd:?} is not available on this CPU");
        self.reset(k, n);
        #[cfg(target_arch = "x86_64")]
        if simd == Simd::Avx512Bf16 {
            // SAFETY: the CPU has the instructions (asserted above); `src` holds the columns
            // (asserted above), `values` the panels (`reset`).
            return unsafe { self.pack_columns_avx512(src, stride) };
        }
        let pairs = self.pairs();
        let mut column = vec![0u16; pairs * 2];
        for j in 0..n {
            convert(simd, &src[j * stride..][..k], 1.0, &mut column);
            let (panel, jj) = (j / NR, j % NR);
            let words = &mut self.values[panel * pairs * 2 * NR..][..pairs * 2 * NR];
            for (q, pair) in column.chunks_exact(2).enumerate() {
                words[(q * NR + jj) * 2..][..2].copy_from_slice(pair);
            }
        }
    }

    /// [`Packed::pack_columns`] with AVX-512 BF16: per column, 32 values at a time converted
    /// into 16 pairs (`vcvtne2ps2bf16`) and scattered to their 16 rows of pairs.
    ///
    /// # Safety
    /// AVX-512 F, BW, VL and BF16; `src` holds `n` columns of `k` values `stride` apart; `reset`
    /// has sized the panels.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
    unsafe fn pack_columns_avx512(&mut self, src: &[f32], stride: usize) {
        let (k, pairs) = (self.k, self.pairs());
        let words = self.values.as_mut_ptr() as *mut u32;
        let rows = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32(NR as i32),
        );
        let lanes = |from: usize| if k - from.min(k) >= 16 { 0xffff } else { (1u16 << (k - from.min(k))) - 1 };
        for j in 0..self.n {
            let column = src.as_ptr().add(j * stride);
            let at = words.add((j / NR) * pairs * NR + j % NR);
            for p in (0..k).step_by(32) {
                let low = _mm512_maskz_loadu_ps(lanes(p), column.add(p));
                let high = _mm512_maskz_loadu_ps(lanes(p + 16), column.add(p + 16));
                let both = std::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(high, low));
                let count = (pairs - p / 2).min(16);
                let mask = if count == 16 { 0xffff } else { (1u16 << count) - 1 };
                _mm512_mask_i32scatter_epi32::<4>(at.add(p / 2 * NR) as *mut _, mask, rows, both);
            }
        }
    }
}

/// The instructions [`product`] multiplies with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Simd {
    /// AVX-512 BF16 (`vdpbf16ps`), with F and BW.
    Avx512Bf16,
    /// Plain Rust: every CPU, and the reference the tests hold the other to.
    #[default]
    Plain,
}

impl Simd {
    /// AVX-512 BF16 if this CPU has it (checked once by the standard library, then cached).
    pub fn detect() -> Simd {
        if Simd::Avx512Bf16.available() {
            Simd::Avx512Bf16
        } else {
            Simd::Plain
        }
    }

    /// Whether this CPU has them: AVX-512 F, BW, VL and BF16 (and AVX2 and FMA).
    pub fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512Bf16 => {
                is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx512bf16")
                    && crate::avx2_available()
            }
            Simd::Plain => true,
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// `c[i · ldc + j] = Σ_p a(i, p) · b(p, j)` for `i < a`'s rows, `j < b`'s columns, with
/// `simd`'s instructions (the operands' `bf16` values, exact products, `f32` sums); the rest of
/// `c` is left as it was. Panics if `a` and `b` disagree on `k`, if `c` is too short for the
/// rows of its stride, or if this CPU lacks `simd`.
pub fn product(simd: Simd, a: &Rows, b: &Packed, c: &mut [f32], ldc: usize) {
    assert_eq!(a.k, b.k, "a is {} wide, b {} tall", a.k, b.k);
    if a.m == 0 || b.n == 0 {
        return;
    }
    assert!(c.len() >= (a.m - 1) * ldc + b.n, "c is not {} rows of {} apart by {ldc}", a.m, b.n);
    assert!(simd.available(), "{simd:?} is not available on this CPU");
    match simd {
        // SAFETY: the CPU has the instructions (asserted above); `c` holds the rows (checked
        // above), `a` and `b` the values their packing left: what the kernel reads and writes.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512Bf16 => unsafe { product_avx512(a, b, c, ldc) },
        _ => product_plain(a, b, c, ldc),
    }
}

/// [`product`] in plain Rust: per pair, the two exact products added, then the sum.
fn product_plain(a: &Rows, b: &Packed, c: &mut [f32], ldc: usize) {
    for i in 0..a.m {
        let row = &a.values[i * a.stride()..][..a.stride()];
        for j in 0..b.n {
            let mut sum = 0f32;
            for (q, pair) in row.chunks_exact(2).enumerate() {
                let (b0, b1) = (b.values[b.at(2 * q, j)], b.values[b.at(2 * q + 1, j)]);
                sum += to_f32(pair[0]) * to_f32(b0) + to_f32(pair[1]) * to_f32(b1);
            }
            c[i * ldc + j] = sum;
        }
    }
}

/// [`product`] with AVX-512 BF16, tile by tile, two panels at a time.
///
/// # Safety
/// AVX-512 F, BW, BF16, AVX2 and FMA; `c` holds `a.m` rows of `b.n` values `ldc` apart; `a`
/// and `b` as their packing left them, of the same `k`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")]
unsafe fn product_avx512(a: &Rows, b: &Packed, c: &mut [f32], ldc: usize) {
    let panels = b.n.div_ceil(NR);
    let lda = a.stride() / 2;
    for panel in (0..panels).step_by(2) {
        let words = b.values.as_ptr().add(panel * b.pairs() * 2 * NR) as *const u32;
        let tile = Tile { b: words, pairs: b.pairs(), lda, ldc, cols: b.n - panel * NR };
        let pair = panel + 1 < panels;
        let mut row = 0;
        for height in crate::tile_heights(a.m, MR) {
            let a = a.values.as_ptr().add(row * a.stride()) as *const u32;
            let c = c.as_mut_ptr().add(row * ldc + panel * NR);
            tile.run_any(height, pair, a, c);
            row += height;
        }
    }
}

/// One or two panels of `B` (as 32-bit words: a pair of `bf16`), as the tile kernel reads them.
#[cfg(target_arch = "x86_64")]
struct Tile {
    b: *const u32,
    /// Pairs of `k`: a panel is `pairs · NR` words.
    pairs: usize,
    /// Words between rows of `A`.
    lda: usize,
    ldc: usize,
    /// Columns that exist from the tile's first panel on.
    cols: usize,
}

#[cfg(target_arch = "x86_64")]
impl Tile {
    /// [`Tile::run`] for `height` rows (1 to [`MR`]) and two panels (`pair`) or one.
    ///
    /// # Safety
    /// As [`Tile::run`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")]
    #[inline]
    unsafe fn run_any(&self, height: usize, pair: bool, a: *const u32, c: *mut f32) {
        macro_rules! by_height {
            ($p:literal) => {
                match height {
                    12 => self.run::<12, $p>(a, c),
                    11 => self.run::<11, $p>(a, c),
                    10 => self.run::<10, $p>(a, c),
                    9 => self.run::<9, $p>(a, c),
                    8 => self.run::<8, $p>(a, c),
                    7 => self.run::<7, $p>(a, c),
                    6 => self.run::<6, $p>(a, c),
                    5 => self.run::<5, $p>(a, c),
                    4 => self.run::<4, $p>(a, c),
                    3 => self.run::<3, $p>(a, c),
                    2 => self.run::<2, $p>(a, c),
                    _ => self.run::<1, $p>(a, c),
                }
            };
        }
        if pair {
            by_height!(2)
        } else {
            by_height!(1)
        }
    }

    /// `R` rows of `A` from `a` times `P` panels, written at `c` (rows `ldc` apart): per pair
    /// of `k`, `P` loads of the panels and `R · P` `vdpbf16ps` by a broadcast pair of each row.
    ///
    /// # Safety
    /// AVX-512 F, BW and BF16; `a` holds `R` rows of `pairs` words `lda` apart; the tile has
    /// `P` panels of `pairs · NR` words; `c` has `R` rows of `cols` (at most `P · NR`)
    /// writable values, `ldc` apart.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")]
    #[inline]
    unsafe fn run<const R: usize, const P: usize>(&self, a: *const u32, c: *mut f32) {
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        // through `black_box`, so that the compiler cannot derive each address from the last
        let rows: [*const u32; R] = std::hint::black_box(std::array::from_fn(|r| a.add(r * self.lda)));
        for q in 0..self.pairs {
            let b: [__m512bh; P] = std::array::from_fn(|p| {
                let v = _mm512_loadu_si512(self.b.add((p * self.pairs + q) * NR) as *const _);
                std::mem::transmute::<__m512i, __m512bh>(v)
            });
            for (row, acc) in rows.iter().zip(acc.iter_mut()) {
                let x = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(*row.add(q) as i32));
                for (acc, b) in acc.iter_mut().zip(&b) {
                    *acc = _mm512_dpbf16_ps(*acc, x, *b);
                }
            }
        }
        crate::matmul::store_tile(&acc, c, self.ldc, self.cols);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pseudo_random as random;

    #[test]
    fn rounding_to_bf16_is_to_nearest_with_ties_to_even() {
        assert_eq!(bf16(1.0), 0x3f80);
        assert_eq!(to_f32(bf16(1.0 + 2f32.powi(-8))), 1.0, "a tie goes to the even value below");
        assert_eq!(to_f32(bf16(1.0 + 3.0 * 2f32.powi(-8))), 1.0 + 2f32.powi(-6), "and to the even above");
        assert_eq!(to_f32(bf16(1.0 + 2f32.powi(-8) + 2f32.powi(-20))), 1.0 + 2f32.powi(-7));
        assert_eq!(to_f32(bf16(-0.0)).to_bits(), (-0.0f32).to_bits());
        assert!(to_f32(bf16(f32::NAN)).is_nan());
        assert_eq!(to_f32(bf16(f32::MAX)), f32::INFINITY, "beyond bf16's largest finite value");
    }

    #[test]
    fn every_conversion_path_rounds_as_the_plain_one() {
        // around ties (the 17th bit) and carries into the exponent, both signs, and random values
        let mut x: Vec<f32> = (0..4096u32).map(|i| f32::from_bits(0x3f80_0000 + i * 0x3f + (i % 3) * 0x8000)).collect();
        x.extend([1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8), 2.0 - 2f32.powi(-9), 0.0, -0.0, 1e30, 3.4e38]);
        x.extend(random(1001, 9).iter().map(|v| 7.0 * v));
        x.extend(x.clone().iter().map(|v| -v));
        let plain = {
            let mut out = vec![0u16; x.len()];
            convert(Simd::Plain, &x, 0.75, &mut out);
            out
        };
        for simd in [Simd::Avx512Bf16].into_iter().filter(|s| s.available()) {
            for n in [0, 1, 15, 16, 17, x.len()] {
                let mut out = vec![7u16; x.len()];
                convert(simd, &x[..n], 0.75, &mut out);
                assert_eq!(out[..n], plain[..n], "{simd:?} {n} values");
                assert!(out[n..].iter().all(|h| *h == 7), "{simd:?} wrote past {n} values");
            }
        }
    }

    #[test]
    fn every_bf16_path_matches_the_exact_product_of_the_rounded_values_on_edge_shapes() {
        let paths: Vec<Simd> = [Simd::Avx512Bf16, Simd::Plain].into_iter().filter(|s| s.available()).collect();
        eprintln!("kernel paths of this CPU: bf16 attention products {:?}, tested: {paths:?}", Simd::detect());
        // rows around the tile (12); k odd, even, 1; columns not a multiple of a panel (16) or
        // of a tile's two panels
        let shapes = [(1, 32, 1), (1, 1, 16), (3, 7, 17), (13, 33, 31), (12, 32, 33), (25, 255, 32), (236, 32, 236)];
        for (s, &(m, k, n)) in shapes.iter().enumerate() {
            let (lda, ldb, ldc) = (k + 3, n + 2, n + 5);
            let a = random(m * lda, s as u64).iter().map(|v| 3.0 * v).collect::<Vec<_>>();
            let bm = random(k * ldb, 50 + s as u64).iter().map(|v| 3.0 * v).collect::<Vec<_>>();
            let (mut rows, mut by_rows, mut by_columns) = (Rows::default(), Packed::default(), Packed::default());
            let transposed: Vec<f32> = (0..n * k).map(|i| bm[(i % k) * ldb + i / k]).collect();
            for simd in &paths {
                rows.pack(*simd, m, k, &a, lda, 1.0);
                by_rows.pack_rows(*simd, k, n, &bm, ldb);
                by_columns.pack_columns(*simd, k, n, &transposed, k);
                assert_eq!(by_rows.values, by_columns.values, "{simd:?} {m}×{k}×{n}: the two packings differ");
                let mut c = vec![f32::NAN; m * ldc];
                product(*simd, &rows, &by_rows, &mut c, ldc);
                check(&c, (&a, lda), (&bm, ldb), (m, k, n), ldc, *simd);
            }
        }
    }

    /// `c` is the exact product of `a`'s and `bm`'s `bf16` values, within `k · 2⁻²⁴` of the sum
    /// of the products' magnitudes (the `f32` sums' rounding in any order), and untouched past
    /// its `n` columns.
    fn check(
        c: &[f32],
        (a, lda): (&[f32], usize),
        (bm, ldb): (&[f32], usize),
        (m, k, n): (usize, usize, usize),
        ldc: usize,
        simd: Simd,
    ) {
        let round = |x: f32| f64::from(to_f32(bf16(x)));
        for i in 0..m {
            for j in 0..ldc {
                let got = c[i * ldc + j];
                if j >= n {
                    assert!(got.is_nan(), "{simd:?} {m}×{k}×{n}: wrote past the row at ({i}, {j})");
                    continue;
                }
                let terms = (0..k).map(|p| round(a[i * lda + p]) * round(bm[p * ldb + j]));
                let (want, size) = terms.fold((0.0, 0.0), |(s, t), x| (s + x, t + x.abs()));
                let tolerance = k as f64 * 2f64.powi(-24) * size;
                assert!(
                    (f64::from(got) - want).abs() <= tolerance,
                    "{simd:?} {m}×{k}×{n} ({i}, {j}): {got} vs {want} (± {tolerance})"
                );
            }
        }
    }
}
