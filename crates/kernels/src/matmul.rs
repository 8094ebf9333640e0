//! `f32` products of small matrices, `C = A · B` with `A` read in place (row-major, any row
//! stride) and `B` packed once in panels of [`NR`] columns ([`Packed`]): attention's scores
//! (`Q · Kᵀ`, per head) and context (`P · V`).
//!
//! # The kernel (x86-64 with AVX2 and FMA)
//! A tile of up to [`MR`] rows × [`NR`] columns is kept in 12 `ymm` accumulators; each step
//! loads one row of the panel (two vectors) and broadcasts each tile row's value of `A`
//! (`vbroadcastss` from memory), 12 independent FMAs. Each panel value loaded serves 6 rows, so
//! that the product runs from the L1 and L2 caches at close to the two FMAs per cycle of the
//! core; one query at a time (a dot product per score, a sum of value rows per context) read
//! every key and value of a head from the L2 cache per query and ran at a third of that. Rows
//! are cut into tiles of near-equal height ([`crate::tile_heights`]). Without AVX2 the same
//! product runs in plain Rust.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Columns per panel: two AVX2 vectors.
pub const NR: usize = 16;
/// Most rows per tile: 6 rows × 2 vectors = 12 accumulators.
pub const MR: usize = 6;

/// The right operand of a product, `k × n`, packed in panels of [`NR`] columns: value `(p, j)`
/// at `(j / NR) · k · NR + p · NR + j % NR`, zeros past `n`. Kept between products so that its
/// memory is reused.
#[derive(Default)]
pub struct Packed {
    k: usize,
    n: usize,
    values: Vec<f32>,
}

impl Packed {
    /// Packs the `k × n` matrix whose value `(p, j)` is `b(p, j)`, replacing what it held.
    pub fn pack(&mut self, k: usize, n: usize, b: impl Fn(usize, usize) -> f32) {
        let panels = n.div_ceil(NR);
        self.values.clear();
        self.values.resize(panels * k * NR, 0.0);
        for panel in 0..panels {
            let cols = NR.min(n - panel * NR);
            for p in 0..k {
                let row = &mut self.values[(panel * k + p) * NR..][..cols];
                for (jj, v) in row.iter_mut().enumerate() {
                    *v = b(p, panel * NR + jj);
                }
            }
        }
        (self.k, self.n) = (k, n);
    }
}

impl Packed {
    /// Packs the `k × n` matrix held row by row in `src`: value `(p, j)` at `src[p · stride + j]`
    /// (attention's values: a token per row). Panics if `src` is too short.
    pub fn pack_rows(&mut self, k: usize, n: usize, src: &[f32], stride: usize) {
        let panels = n.div_ceil(NR);
        self.values.clear();
        self.values.resize(panels * k * NR, 0.0);
        for panel in 0..panels {
            let cols = NR.min(n - panel * NR);
            for p in 0..k {
                self.values[(panel * k + p) * NR..][..cols].copy_from_slice(&src[p * stride + panel * NR..][..cols]);
            }
        }
        (self.k, self.n) = (k, n);
    }

    /// Packs the `k × n` matrix held column by column in `src`: value `(p, j)` at
    /// `src[j · stride + p]` (attention's keys, transposed). Panics if `src` is too short.
    pub fn pack_columns(&mut self, k: usize, n: usize, src: &[f32], stride: usize) {
        let panels = n.div_ceil(NR);
        self.values.clear();
        self.values.resize(panels * k * NR, 0.0);
        for j in 0..n {
            let (panel, jj) = (j / NR, j % NR);
            let column = &src[j * stride..][..k];
            for (p, v) in column.iter().enumerate() {
                self.values[(panel * k + p) * NR + jj] = *v;
            }
        }
        (self.k, self.n) = (k, n);
    }
}

/// `c[i · ldc + j] = Σ_p a[i · lda + p] · b(p, j)` for `i < m`, `j < b.n`, `p < b.k`; the rest
/// of `c` is left as it was. Panics if `a` or `c` is too short for `m` rows of its stride.
pub fn product(a: &[f32], lda: usize, m: usize, b: &Packed, c: &mut [f32], ldc: usize) {
    if m == 0 || b.n == 0 {
        return;
    }
    assert!(a.len() >= (m - 1) * lda + b.k, "a is not {m} rows of {} apart by {lda}", b.k);
    assert!(c.len() >= (m - 1) * ldc + b.n, "c is not {m} rows of {} apart by {ldc}", b.n);
    product_on(Simd::detect(), a, lda, m, b, c, ldc);
}

/// The instructions [`product`] multiplies with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Simd {
    /// AVX-512 F: tiles of up to [`MR_AVX512`] rows × one `zmm` of [`NR`] columns.
    Avx512,
    /// AVX2 and FMA: tiles of up to [`MR`] rows × two `ymm`.
    Avx2,
    /// Plain Rust.
    Plain,
}

impl Simd {
    /// The widest this CPU has (checked once by the standard library, then cached).
    pub fn detect() -> Simd {
        #[cfg(target_arch = "x86_64")]
        {
            if crate::avx2_available() && is_x86_feature_detected!("avx512f") {
                return Simd::Avx512;
            }
            if crate::avx2_available() {
                return Simd::Avx2;
            }
        }
        Simd::Plain
    }

    /// Whether this CPU has them.
    pub fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => crate::avx2_available() && is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => crate::avx2_available(),
            Simd::Plain => true,
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// Most rows per tile of the AVX-512 kernel: 12 accumulators of one `zmm` each.
pub const MR_AVX512: usize = 12;

/// [`product`] with `simd`'s instructions (the tests hold each to the `f64` product). Panics
/// as [`product`] does, or if this CPU lacks them.
pub fn product_on(simd: Simd, a: &[f32], lda: usize, m: usize, b: &Packed, c: &mut [f32], ldc: usize) {
    if m == 0 || b.n == 0 {
        return;
    }
    assert!(a.len() >= (m - 1) * lda + b.k, "a is not {m} rows of {} apart by {lda}", b.k);
    assert!(c.len() >= (m - 1) * ldc + b.n, "c is not {m} rows of {} apart by {ldc}", b.n);
    assert!(simd.available(), "{simd:?} is not available on this CPU");
    match simd {
        // SAFETY: the CPU has the instructions (asserted above); `a` and `c` hold `m` rows
        // (checked above) and `b.values` its panels (`Packed::pack`): what the kernels read and
        // write.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => unsafe { product_avx512(a, lda, m, b, c, ldc) },
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => unsafe { product_avx2(a, lda, m, b, c, ldc) },
        _ => product_plain(a, lda, m, b, c, ldc),
    }
}

/// [`product`] in plain Rust.
fn product_plain(a: &[f32], lda: usize, m: usize, b: &Packed, c: &mut [f32], ldc: usize) {
    for i in 0..m {
        for j in 0..b.n {
            let (panel, jj) = (j / NR, j % NR);
            let column = b.values[panel * b.k * NR + jj..].iter().step_by(NR);
            c[i * ldc + j] = a[i * lda..i * lda + b.k].iter().zip(column).map(|(x, y)| x * y).sum();
        }
    }
}

/// [`product`] with AVX2 and FMA, tile by tile.
///
/// # Safety
/// AVX2 and FMA; `a` holds `m` rows of `b.k` values `lda` apart, `c` `m` rows of `b.n` values
/// `ldc` apart; `b` as [`Packed::pack`] left it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn product_avx2(a: &[f32], lda: usize, m: usize, b: &Packed, c: &mut [f32], ldc: usize) {
    for panel in 0..b.n.div_ceil(NR) {
        let tile =
            Tile { b: b.values.as_ptr().add(panel * b.k * NR), k: b.k, lda, ldc, cols: NR.min(b.n - panel * NR) };
        let mut row = 0;
        for height in crate::tile_heights(m, MR) {
            let (a, c) = (a.as_ptr().add(row * lda), c.as_mut_ptr().add(row * ldc + panel * NR));
            match height {
                6 => tile.run::<6>(a, c),
                5 => tile.run::<5>(a, c),
                4 => tile.run::<4>(a, c),
                3 => tile.run::<3>(a, c),
                2 => tile.run::<2>(a, c),
                _ => tile.run::<1>(a, c),
            }
            row += height;
        }
    }
}

/// [`product`] with AVX-512 F, tile by tile, two panels at a time (each broadcast value of `A`
/// multiplies 32 columns).
///
/// # Safety
/// AVX-512 F, AVX2 and FMA; otherwise as [`product_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn product_avx512(a: &[f32], lda: usize, m: usize, b: &Packed, c: &mut [f32], ldc: usize) {
    let panels = b.n.div_ceil(NR);
    for panel in (0..panels).step_by(2) {
        let tile = Tile { b: b.values.as_ptr().add(panel * b.k * NR), k: b.k, lda, ldc, cols: b.n - panel * NR };
        let pair = panel + 1 < panels;
        let mut row = 0;
        for height in crate::tile_heights(m, MR_AVX512) {
            let (a, c) = (a.as_ptr().add(row * lda), c.as_mut_ptr().add(row * ldc + panel * NR));
            match (height, pair) {
                (12, true) => tile.run512::<12, 2>(a, c),
                (11, true) => tile.run512::<11, 2>(a, c),
                (10, true) => tile.run512::<10, 2>(a, c),
                (9, true) => tile.run512::<9, 2>(a, c),
                (8, true) => tile.run512::<8, 2>(a, c),
                (7, true) => tile.run512::<7, 2>(a, c),
                (6, true) => tile.run512::<6, 2>(a, c),
                (5, true) => tile.run512::<5, 2>(a, c),
                (4, true) => tile.run512::<4, 2>(a, c),
                (3, true) => tile.run512::<3, 2>(a, c),
                (2, true) => tile.run512::<2, 2>(a, c),
                (_, true) => tile.run512::<1, 2>(a, c),
                (12, false) => tile.run512::<12, 1>(a, c),
                (11, false) => tile.run512::<11, 1>(a, c),
                (10, false) => tile.run512::<10, 1>(a, c),
                (9, false) => tile.run512::<9, 1>(a, c),
                (8, false) => tile.run512::<8, 1>(a, c),
                (7, false) => tile.run512::<7, 1>(a, c),
                (6, false) => tile.run512::<6, 1>(a, c),
                (5, false) => tile.run512::<5, 1>(a, c),
                (4, false) => tile.run512::<4, 1>(a, c),
                (3, false) => tile.run512::<3, 1>(a, c),
                (2, false) => tile.run512::<2, 1>(a, c),
                (_, false) => tile.run512::<1, 1>(a, c),
            }
            row += height;
        }
    }
}

/// One panel of `B`, as the tile kernel reads it.
#[cfg(target_arch = "x86_64")]
struct Tile {
    b: *const f32,
    k: usize,
    lda: usize,
    ldc: usize,
    /// Columns that exist from the tile's first panel on (the AVX2 kernel's one panel: at most
    /// [`NR`]; the last panel may have fewer).
    cols: usize,
}

#[cfg(target_arch = "x86_64")]
impl Tile {
    /// `R` rows of `A` from `a` times the panel, written at `c` (rows `ldc` apart).
    ///
    /// # Safety
    /// AVX2 and FMA; `a` holds `R` rows of `k` values `lda` apart, the panel `k × NR` values,
    /// `c` `R` rows of `cols` writable values `ldc` apart.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn run<const R: usize>(&self, a: *const f32, c: *mut f32) {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for p in 0..self.k {
            let b0 = _mm256_loadu_ps(self.b.add(p * NR));
            let b1 = _mm256_loadu_ps(self.b.add(p * NR + 8));
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*a.add(r * self.lda + p));
                acc[0] = _mm256_fmadd_ps(x, b0, acc[0]);
                acc[1] = _mm256_fmadd_ps(x, b1, acc[1]);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let mut y = [0f32; NR];
            // a whole panel is stored in place; the last, narrower one through `y`
            let to = if self.cols == NR { c.add(r * self.ldc) } else { y.as_mut_ptr() };
            _mm256_storeu_ps(to, acc[0]);
            _mm256_storeu_ps(to.add(8), acc[1]);
            if self.cols < NR {
                std::ptr::copy_nonoverlapping(y.as_ptr(), c.add(r * self.ldc), self.cols);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Tile {
    /// `R` rows of `A` from `a` times `P` panels from the tile's, written at `c` (rows `ldc`
    /// apart), with AVX-512: per step `P` `zmm` of the panels and `R · P` fused multiply-adds by
    /// broadcast values of `A`, `R · P` independent sums (at most 24 registers). The rows'
    /// addresses are computed once (made in the loop, they were a chain of dependent additions
    /// that held it to one multiply-add per cycle).
    ///
    /// # Safety
    /// AVX-512 F; `a` holds `R` rows of `k` values `lda` apart; the tile has `P` panels of `k ×
    /// NR` values (`cols` counts the columns from its first on); `c` has `R` rows of those
    /// columns writable, `ldc` apart.
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[inline]
    unsafe fn run512<const R: usize, const P: usize>(&self, a: *const f32, c: *mut f32) {
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        // through `black_box`, so that the compiler cannot derive each address from the last
        let rows: [*const f32; R] = std::hint::black_box(std::array::from_fn(|r| a.add(r * self.lda)));
        for p in 0..self.k {
            let b: [__m512; P] = std::array::from_fn(|q| _mm512_loadu_ps(self.b.add((q * self.k + p) * NR)));
            for (row, acc) in rows.iter().zip(acc.iter_mut()) {
                let x = _mm512_set1_ps(*row.add(p));
                for (acc, b) in acc.iter_mut().zip(&b) {
                    *acc = _mm512_fmadd_ps(x, *b, *acc);
                }
            }
        }
        store_tile(&acc, c, self.ldc, self.cols);
    }
}

/// Writes the sums `acc` of `R` rows × `P` panels of [`NR`] columns at `c` (rows `ldc` apart),
/// the columns from `cols` on (counted from the first panel's first) left as they are.
///
/// # Safety
/// AVX-512 F; `cols` more than `(P − 1) · NR`; `c` has `R` rows of `min(cols, P · NR)` columns
/// writable, `ldc` apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn store_tile<const R: usize, const P: usize>(
    acc: &[[__m512; P]; R],
    c: *mut f32,
    ldc: usize,
    cols: usize,
) {
    for (r, acc) in acc.iter().enumerate() {
        for (p, acc) in acc.iter().enumerate() {
            let width = NR.min(cols - p * NR);
            let mask = if width == NR { 0xffff } else { (1u16 << width) - 1 };
            _mm512_mask_storeu_ps(c.add(r * ldc + p * NR), mask, *acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pseudo_random as random;

    #[test]
    fn the_product_matches_the_f64_one_on_edge_shapes_and_strides() {
        let shapes = [(1, 32, 1), (3, 7, 16), (31, 32, 17), (32, 33, 33), (33, 256, 32), (255, 32, 255), (256, 1, 256)];
        for (s, &(m, k, n)) in shapes.iter().enumerate() {
            let (lda, ldc) = (k + 3, n + 5);
            let a = random(m * lda, s as u64);
            let bm = random(k * n, 50 + s as u64);
            let mut b = Packed::default();
            b.pack(k, n, |p, j| bm[p * n + j]);
            for simd in [Simd::Avx512, Simd::Avx2, Simd::Plain].into_iter().filter(|s| s.available()) {
                let mut c = vec![f32::NAN; m * ldc];
                product_on(simd, &a, lda, m, &b, &mut c, ldc);
                check(&c, &a, &bm, (m, k, n), (lda, ldc), simd);
            }
        }
    }

    /// `c` is `a · bm` to 1e-4 in its `m × n` values (rows `ldc` apart) and untouched past them.
    fn check(
        c: &[f32],
        a: &[f32],
        bm: &[f32],
        (m, k, n): (usize, usize, usize),
        (lda, ldc): (usize, usize),
        simd: Simd,
    ) {
        for i in 0..m {
            for j in 0..ldc {
                let got = c[i * ldc + j];
                if j >= n {
                    assert!(got.is_nan(), "{simd:?} {m}×{k}×{n}: wrote past the row at ({i}, {j})");
                    continue;
                }
                let want: f64 = (0..k).map(|p| f64::from(a[i * lda + p]) * f64::from(bm[p * n + j])).sum();
                assert!((f64::from(got) - want).abs() < 1e-4, "{simd:?} {m}×{k}×{n} ({i}, {j}): {got} vs {want}");
            }
        }
    }
}
