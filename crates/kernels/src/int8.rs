//! Linear layers on 8-bit integer weights: `y = x · Wᵀ + b` with `W` quantized per output
//! channel (symmetric, `i8` in −127..=127, one `f32` scale per output) and each row of `x`
//! quantized on the fly (symmetric, one `f32` scale per row), the products summed exactly in
//! `i32` and scaled back to `f32` with the bias added.
//!
//! # The kernel (x86-64 with AVX2, or AVX-512 VNNI: below)
//! AVX2 has no 8-bit dot product that is exact on signed operands (`vpmaddubsw` multiplies
//! unsigned by signed bytes and saturates its 16-bit pair sums), so this kernel takes the
//! 16-bit route: weights are stored as bytes (a quarter of the `f32` weights' memory) and
//! sign-extended to 16 bits as they are loaded (`vpmovsxbw`), activations are quantized to 16-bit
//! integers, and `vpmaddwd` multiplies 16 pairs and sums them two by two into 8 `i32` lanes.
//! That does as many multiply-adds per instruction as `vpmaddubsw` + `vpmaddwd` would, without
//! their saturation, and lets the activations keep up to 15 bits instead of 7 or 8: each row is
//! scaled to `±QMAX(k)`, the largest value for which `k` products of it with ±127 cannot
//! overflow an `i32` (32,767 for 384 inputs, 11,008 for 1,536). The error of a product is then
//! that of the 8-bit weights alone.
//!
//! Weights are packed once at load into panels of [`NR`] outputs: for each pair of inputs
//! `(2i, 2i+1)`, the 16 outputs' two weights side by side (32 bytes), so that the inner loop reads
//! one panel front to back. A tile of up to [`MR`] rows × [`NR`] outputs is kept in 12 `ymm`
//! accumulators; each step broadcasts a row's two activations (`vpbroadcastd`) and multiplies
//! them with two vectors of 8 outputs' weights. With the two weight vectors, the broadcast and
//! the product before its addition, that is all 16 `ymm` registers: none is spilled to the stack
//! in the inner loop (24 outputs × 4 rows, this kernel's first shape, spilled one accumulator
//! and its store-to-load latency bounded each step). The rows of a block are split into tiles of
//! near-equal height (13 rows: 5 + 4 + 4, not 6 + 6 + 1), a short tile re-reading the weights
//! for few products. Rows are taken [`ROW_BLOCK`] at a time so that their activations stay in
//! the core's L2 cache while every panel passes over them; a question's few rows are one block,
//! and each weight is read from memory once per product.
//!
//! # AVX-512 VNNI ([`Path::Vnni`], chosen at run time where the CPU has AVX-512 F, BW and VNNI)
//! `vpdpwssd` does what `vpmaddwd` + `vpaddd` do, on 32 `i16` lanes into 16 `i32` (no
//! saturation), in one instruction: the same packed panels are loaded 32 bytes at a time and
//! sign-extended to one `zmm` (`vpmovsxbw`), a row's pair of activations is broadcast, and a
//! tile of up to [`MR_VNNI`] rows × two panels (32 outputs) keeps its sums in `zmm` registers.
//! `vpdpwssd` waits for the sum it adds to, so a tile of fewer than 8 sums (1 to 3 rows, or one
//! panel) spreads its input pairs over up to 8 sets of sums, added at the end.
//! The integer sums are exact on both paths (any order), and they are scaled by the same
//! operations (`vmulps` of the row's and the output's scales, one `vfmadd` with the bias), so
//! the VNNI path gives the AVX2 path's bits: the tests assert it (`assert_eq!` on the `f32`
//! outputs, edge shapes), and `embed_bench --fingerprint` gives the same hash of the vectors
//! with `REPLICAD_INT8_PATH=avx2` (which forces AVX2 on a VNNI CPU) and without.
//!
//! Measured on an AMD EPYC with AVX-512 VNNI (2 cores, shared with a CI run: load 2 to 5, so
//! the figures vary by 20 to 40 % from run to run), one core:
//!
//! ```sh
//! cargo build --release --example embed_bench
//! taskset -c 1 target/release/examples/embed_bench --kernels   # int8 Vnni beside int8 Avx2
//! taskset -c 1 target/release/examples/embed_bench ~/.cache/replicad-ci/models/all-minilm-l6-v2 --no-search
//! REPLICAD_INT8_PATH=avx2 taskset -c 1 target/release/examples/embed_bench ~/.cache/replicad-ci/models/all-minilm-l6-v2 --no-search
//! ```
//!
//! `--kernels`, GMAC/s, VNNI against AVX2 (two runs): 13 × 384 → 384 50-71 against 39-52;
//! 256 × 384 → 384 68-69 against 55-56; 13 × 384 → 1536 59-69 against 43-50; 256 × 384 → 1536
//! 70-72 against 52-54; 13 × 1536 → 384 83-101 against 62-66; 256 × 1536 → 384 69-86 against
//! 53-77; 3 × 1536 → 384 96-101 against 58-74; 3 × 384 → 1536 95 and 32 against 51 and 54; 1
//! row about even (memory-bound: 37-72 against 36-54); 3 × 384 → 384 27-46 against 50-53, the
//! one shape where VNNI measured slower in both runs, yet faster timed alone (the two paths
//! only, wall time, median of 15 rounds, three runs: 4.4-5.0 µs against 6.3-8.4; 3 × 384 → 1536
//! 16-18 against 24-33; 3 × 1536 → 384 16-17 against 24-31).
//!
//! The model, VNNI against AVX2 (3 runs each, alternated): a question (10 words, 14 tokens) CPU
//! p50 2.26 / 2.43 / 2.81 ms against 2.78 / 3.70 / 4.00 ms; 64 passages in one call (as the
//! indexer) 26.1 / 26.2 / 24.2 chunks per CPU second (24.3 / 24.4 / 23.8 wall) against 22.8 /
//! 23.4 / 20.8 (21.3 / 22.1 / 17.7 wall). Main's figures on this machine, quieter: 2.79 ms and
//! 24.7 chunks/s.
//!
//! The 4-bit weights of multilingual-e5-small are multiplied by [`crate::q4`], on AVX-512 VNNI
//! (`vpdpbusd`) where the CPU has it and on `vpmaddubsw` with AVX2; this kernel serves the
//! models whose weights come in `f32` (all-MiniLM-L6-v2). Without AVX2 (older x86, aarch64)
//! [`Linear::forward`] computes the same integers in plain Rust ([`Linear::forward_reference`]), but the encoder does not choose this
//! module there (`replicad::embed::encoder::Kernel::detect`): it stays on `f32`. The path in use
//! is named by `serve`'s log (`Kernel::describe`), `.ci/run`'s "kernel paths" step and
//! `embed_bench --kernels` ([`describe`]).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

pub use crate::avx2_available;

/// Outputs per weight panel: two AVX2 vectors of 8 `i32` lanes.
pub const NR: usize = 16;
/// Most rows per tile: 6 rows × 2 vectors = 12 accumulators, plus 2 weight vectors, a
/// broadcast and a product, fill the 16 `ymm` registers.
pub const MR: usize = 6;
/// Rows whose quantized activations are multiplied by every panel before the next rows come:
/// 64 rows × 1,536 inputs × 2 bytes = 192 KiB, within a core's L2 cache.
pub const ROW_BLOCK: usize = 64;

/// Most rows per tile of the AVX-512 VNNI kernel, which multiplies two panels at a time: 6 rows
/// × 2 panels = 12 `i32` accumulators (12 independent `vpdpwssd` chains), two weight vectors and
/// a broadcast, within the 32 `zmm` registers.
pub const MR_VNNI: usize = 6;

pub use crate::Path;

/// The path [`Linear::forward`] runs, chosen once per process ([`Path::detect`], which
/// `REPLICAD_INT8_PATH` may turn to a slower one). The integer sums are exact on every path and
/// scaled by the same operations, so every path gives the same bits: `vpdpwssd` (AVX-512 VNNI:
/// 32 `i16` products summed two by two into 16 `i32` and added, one instruction), `vpmaddwd` +
/// `vpaddd` (AVX2: 16 products into 8 `i32`, two instructions), or plain Rust
/// ([`Linear::forward_reference`]).
pub fn chosen() -> Path {
    static PATH: std::sync::OnceLock<Path> = std::sync::OnceLock::new();
    *PATH.get_or_init(|| Path::detect("REPLICAD_INT8_PATH"))
}

/// How logs and `.ci/run` name `path` for this kernel.
pub fn describe(path: Path) -> &'static str {
    match path {
        Path::Vnni => "8-bit weights × 16-bit activations, AVX-512 VNNI (vpdpwssd)",
        Path::Avx2 => "8-bit weights × 16-bit activations, AVX2 (vpmaddwd)",
        Path::Plain => "8-bit weights × 16-bit activations, plain Rust",
    }
}

/// A linear layer with `outputs × inputs` 8-bit weights, packed for the kernel.
pub struct Linear {
    inputs: usize,
    outputs: usize,
    /// Input pairs: `inputs` rounded up to even, halved.
    pairs: usize,
    /// `panels × pairs × NR × 2` bytes (see the module documentation), zero beyond `outputs`.
    packed: Vec<i8>,
    /// The weights' scale per output, `panels × NR` (0 beyond `outputs`).
    scales: Vec<f32>,
    /// The bias per output, `panels × NR` (0 beyond `outputs`).
    bias: Vec<f32>,
}

/// Rows of activations quantized to 16-bit integers: `rows × 2·pairs` values (the odd input
/// padded with 0) and one scale per row (`x ≈ q · scale`).
struct Rows {
    values: Vec<i16>,
    scales: Vec<f32>,
}

/// The largest magnitude of a quantized activation for `k` inputs (padded to even): `k`
/// products with ±127 stay within `i32`, and `vpmaddwd`'s pair sums too.
fn qmax(k: usize) -> f32 {
    let limit = i32::MAX as usize / (k.max(1) * 127);
    limit.min(i16::MAX as usize) as f32
}

impl Linear {
    /// Quantizes `weight` (`outputs × inputs` `f32`, row-major, as `nn.Linear` stores it) per
    /// output row and packs it; `bias` has `outputs` values. Panics if the lengths disagree.
    pub fn quantize(weight: &[f32], bias: &[f32], outputs: usize, inputs: usize) -> Linear {
        assert_eq!(weight.len(), outputs * inputs, "weight is not {outputs} × {inputs}");
        assert_eq!(bias.len(), outputs, "bias is not {outputs} long");
        let pairs = inputs.div_ceil(2);
        let panels = outputs.div_ceil(NR);
        let mut packed = vec![0i8; panels * pairs * NR * 2];
        let mut scales = vec![0f32; panels * NR];
        let mut padded_bias = vec![0f32; panels * NR];
        for (o, row) in weight.chunks_exact(inputs).enumerate() {
            let amax = row.iter().fold(0f32, |m, w| m.max(w.abs()));
            let scale = if amax > 0.0 && amax.is_finite() { amax / 127.0 } else { 0.0 };
            let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            let (panel, lane) = (o / NR, o % NR);
            for (i, w) in row.iter().enumerate() {
                let at = ((panel * pairs + i / 2) * NR + lane) * 2 + i % 2;
                packed[at] = (w * inv).round().clamp(-127.0, 127.0) as i8;
            }
            scales[o] = scale;
            padded_bias[o] = bias[o];
        }
        Linear { inputs, outputs, pairs, packed, scales, bias: padded_bias }
    }

    /// Inputs per row.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Outputs per row.
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// Bytes held (packed weights, scales and bias).
    pub fn bytes(&self) -> usize {
        self.packed.len() + 4 * (self.scales.len() + self.bias.len())
    }

    /// `x · Wᵀ + b` for `x` of `rows × inputs` (row-major): `rows × outputs` values, on the
    /// fastest [`Path`] of this CPU ([`chosen`]): the same bits on every SIMD path. Panics if
    /// `x` is not `rows × inputs`.
    pub fn forward(&self, x: &[f32], rows: usize) -> Vec<f32> {
        self.forward_on(chosen(), x, rows)
    }

    /// [`Linear::forward`] on `path`, which must be [`Path::available`] (the tests hold the
    /// paths to one another, `examples/embed_bench.rs --kernels` times them). Panics if it is
    /// not, or if `x` is not `rows × inputs`.
    pub fn forward_on(&self, path: Path, x: &[f32], rows: usize) -> Vec<f32> {
        assert_eq!(x.len(), rows * self.inputs, "x is not {rows} × {}", self.inputs);
        assert!(path.available(), "{path:?} is not available on this CPU");
        let q = self.quantize_rows(x, rows);
        let mut out = vec![0f32; rows * self.outputs];
        match path {
            // SAFETY: the CPU has the path's instructions (asserted above); `q` holds
            // `rows × 2·pairs` values and `out` `rows × outputs`, the lengths the kernels read
            // and write.
            #[cfg(target_arch = "x86_64")]
            Path::Vnni => unsafe { self.gemm_vnni(&q, rows, &mut out) },
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { self.gemm_avx2(&q, rows, &mut out) },
            _ => self.gemm_reference(&q, rows, &mut out),
        }
        out
    }

    /// What [`Linear::forward`] computes, in plain Rust: the same quantized activations, the same
    /// `i32` sums (bit for bit), the same scaling (up to the rounding of a fused multiply-add).
    pub fn forward_reference(&self, x: &[f32], rows: usize) -> Vec<f32> {
        assert_eq!(x.len(), rows * self.inputs, "x is not {rows} × {}", self.inputs);
        let q = self.quantize_rows(x, rows);
        let mut out = vec![0f32; rows * self.outputs];
        self.gemm_reference(&q, rows, &mut out);
        out
    }

    /// Each row of `x` scaled to `±qmax` and rounded (ties to even) to 16-bit integers, the odd
    /// input padded; with AVX2 when the CPU has it.
    fn quantize_rows(&self, x: &[f32], rows: usize) -> Rows {
        let width = 2 * self.pairs;
        let top = qmax(width);
        let mut values = vec![0i16; rows * width];
        let mut scales = vec![0f32; rows];
        let simd = avx2_available();
        for ((row, out), scale) in
            x.chunks_exact(self.inputs.max(1)).zip(values.chunks_exact_mut(width)).zip(&mut scales)
        {
            *scale = match simd {
                // SAFETY: AVX2 and FMA are present; `out` is at least as long as `row`.
                #[cfg(target_arch = "x86_64")]
                true => unsafe { quantize_row_avx2(row, out, top) },
                _ => quantize_row(row, out, top),
            };
        }
        Rows { values, scales }
    }

    /// The integer products and their scaling, one output at a time.
    fn gemm_reference(&self, q: &Rows, rows: usize, out: &mut [f32]) {
        let width = 2 * self.pairs;
        for r in 0..rows {
            let a = &q.values[r * width..(r + 1) * width];
            for o in 0..self.outputs {
                let (panel, lane) = (o / NR, o % NR);
                let mut sum = 0i32;
                for (i, &x) in a.iter().enumerate() {
                    let w = self.packed[((panel * self.pairs + i / 2) * NR + lane) * 2 + i % 2];
                    sum += i32::from(x) * i32::from(w);
                }
                out[r * self.outputs + o] = (sum as f32).mul_add(q.scales[r] * self.scales[o], self.bias[o]);
            }
        }
    }

    /// The AVX2 kernel over every row block, panel and tile.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `q` must hold `rows × 2·pairs` values and `rows` scales,
    /// `out` `rows × outputs` values.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn gemm_avx2(&self, q: &Rows, rows: usize, out: &mut [f32]) {
        debug_assert!(q.values.len() >= rows * 2 * self.pairs && out.len() >= rows * self.outputs);
        let width = 2 * self.pairs;
        let panels = self.outputs.div_ceil(NR);
        for block in (0..rows).step_by(ROW_BLOCK) {
            let end = (block + ROW_BLOCK).min(rows);
            for panel in 0..panels {
                let cols = NR.min(self.outputs - panel * NR);
                let tile = Tile {
                    weights: self.packed.as_ptr().add(panel * self.pairs * NR * 2),
                    scales: self.scales.as_ptr().add(panel * NR),
                    bias: self.bias.as_ptr().add(panel * NR),
                    pairs: self.pairs,
                    width,
                    cols,
                    out_stride: self.outputs,
                    ahead: 0,
                };
                let mut r = block;
                for height in crate::tile_heights(end - block, MR) {
                    let at = out.as_mut_ptr().add(r * self.outputs + panel * NR);
                    match height {
                        6 => tile.run::<6>(q, r, at),
                        5 => tile.run::<5>(q, r, at),
                        4 => tile.run::<4>(q, r, at),
                        3 => tile.run::<3>(q, r, at),
                        2 => tile.run::<2>(q, r, at),
                        _ => tile.run::<1>(q, r, at),
                    }
                    r += height;
                }
            }
        }
    }
}

impl Linear {
    /// The AVX-512 VNNI kernel over every row block, pair of panels and tile: the AVX2 kernel's
    /// loops, its packed weights and its scaling, 16 outputs to a vector.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VNNI, AVX2 and FMA; `q` must hold `rows × 2·pairs`
    /// values and `rows` scales, `out` `rows × outputs` values.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    unsafe fn gemm_vnni(&self, q: &Rows, rows: usize, out: &mut [f32]) {
        debug_assert!(q.values.len() >= rows * 2 * self.pairs && out.len() >= rows * self.outputs);
        let panels = self.outputs.div_ceil(NR);
        for block in (0..rows).step_by(ROW_BLOCK) {
            let end = (block + ROW_BLOCK).min(rows);
            for panel in (0..panels).step_by(2) {
                let tile = Tile {
                    weights: self.packed.as_ptr().add(panel * self.pairs * NR * 2),
                    scales: self.scales.as_ptr().add(panel * NR),
                    bias: self.bias.as_ptr().add(panel * NR),
                    pairs: self.pairs,
                    width: 2 * self.pairs,
                    cols: self.outputs - panel * NR,
                    out_stride: self.outputs,
                    ahead: 0,
                };
                let two = panel + 1 < panels;
                // the panels of the next tile, which the first row tile asks for
                let next = panels.saturating_sub(panel + 2).min(2);
                let mut r = block;
                for height in crate::tile_heights(end - block, MR_VNNI) {
                    let at = out.as_mut_ptr().add(r * self.outputs + panel * NR);
                    let tile = Tile { ahead: if r == block { next } else { 0 }, ..tile };
                    // at least 8 independent chains of `vpdpwssd` (S sets of R · P sums)
                    match (height, two) {
                        (6, true) => tile.vnni::<6, 2, 1>(q, r, at),
                        (5, true) => tile.vnni::<5, 2, 1>(q, r, at),
                        (4, true) => tile.vnni::<4, 2, 1>(q, r, at),
                        (3, true) => tile.vnni::<3, 2, 2>(q, r, at),
                        (2, true) => tile.vnni::<2, 2, 2>(q, r, at),
                        (_, true) => tile.vnni::<1, 2, 4>(q, r, at),
                        (6, false) => tile.vnni::<6, 1, 2>(q, r, at),
                        (5, false) => tile.vnni::<5, 1, 2>(q, r, at),
                        (4, false) => tile.vnni::<4, 1, 2>(q, r, at),
                        (3, false) => tile.vnni::<3, 1, 4>(q, r, at),
                        (2, false) => tile.vnni::<2, 1, 4>(q, r, at),
                        (_, false) => tile.vnni::<1, 1, 8>(q, r, at),
                    }
                    r += height;
                }
            }
        }
    }
}

/// `row` scaled to `±top` and rounded (ties to even) into `out`; returns the scale (`x ≈ q ·
/// scale`), 0 for a row of zeros or with a non-finite value (its `out` stays 0).
fn quantize_row(row: &[f32], out: &mut [i16], top: f32) -> f32 {
    let amax = row.iter().fold(0f32, |m, v| m.max(v.abs()));
    if !(amax > 0.0 && amax.is_finite()) || row.iter().any(|v| !v.is_finite()) {
        return 0.0;
    }
    let inv = top / amax;
    for (q, v) in out.iter_mut().zip(row) {
        *q = (v * inv).round_ties_even() as i16;
    }
    amax / top
}

/// [`quantize_row`] with AVX2 (`vcvtps2dq` rounds ties to even, as the scalar code).
///
/// # Safety
/// The CPU must have AVX2 and FMA; `out` must be at least as long as `row`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn quantize_row_avx2(row: &[f32], out: &mut [i16], top: f32) -> f32 {
    debug_assert!(out.len() >= row.len());
    let whole = row.len() / 8 * 8;
    let (src, dst) = (row.as_ptr(), out.as_mut_ptr());
    // the largest magnitude, and `x - x` OR-ed over the row: 0 unless some value is NaN or ±inf
    let (mut max, mut odd) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for i in (0..whole).step_by(8) {
        let x = _mm256_loadu_ps(src.add(i));
        max = _mm256_max_ps(max, _mm256_andnot_ps(_mm256_set1_ps(-0.0), x));
        odd = _mm256_or_ps(odd, _mm256_sub_ps(x, x));
    }
    let (mut lanes, mut odd_lanes) = ([0f32; 8], [0f32; 8]);
    _mm256_storeu_ps(lanes.as_mut_ptr(), max);
    _mm256_storeu_ps(odd_lanes.as_mut_ptr(), odd);
    let amax = lanes.iter().chain(&row[whole..]).fold(0f32, |m, v| m.max(v.abs()));
    let finite = odd_lanes.iter().all(|v| v.to_bits() == 0) && row[whole..].iter().all(|v| v.is_finite());
    if !(amax > 0.0 && amax.is_finite() && finite) {
        return 0.0;
    }
    let inv = top / amax;
    for i in (0..whole).step_by(8) {
        let q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src.add(i)), _mm256_set1_ps(inv)));
        let packed = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q));
        _mm_storeu_si128(dst.add(i) as *mut __m128i, packed);
    }
    for (q, v) in out[whole..row.len()].iter_mut().zip(&row[whole..]) {
        *q = (v * inv).round_ties_even() as i16;
    }
    amax / top
}

/// One panel of [`NR`] outputs, as the tile kernel reads it.
#[cfg(target_arch = "x86_64")]
struct Tile {
    weights: *const i8,
    scales: *const f32,
    bias: *const f32,
    pairs: usize,
    /// Quantized values per row (2 · pairs).
    width: usize,
    /// Outputs that exist from the panel's first on: at most [`NR`] for the AVX2 kernel (the
    /// last panel may have fewer), all those of the following panels for the VNNI kernel.
    cols: usize,
    out_stride: usize,
    /// Panels after the tile's own whose weights it asks for in the L2 cache as it reads its
    /// own ([`Tile::prefetch_ahead`]): the next tile's, for the first row tile of a row block
    /// (0 for the others, whose panels are already in the caches, and for the last tile).
    ahead: usize,
}

/// Input pairs of a panel whose weights (256 bytes) [`Tile::prefetch_ahead`] asks for at once.
#[cfg(target_arch = "x86_64")]
const PREFETCH_PAIRS: usize = 8;

#[cfg(target_arch = "x86_64")]
impl Tile {
    /// Asks for the [`PREFETCH_PAIRS`] input pairs from `from` (a byte offset) of each of the
    /// [`Tile::ahead`] panels after the tile's `P` in the L2 cache, one tile ahead of their
    /// reads (the VNNI kernel's first row tile of a row block). A panel is a run of 6 KiB of
    /// weights (24 KiB at 1,536 inputs), too short for the hardware's stream prefetcher to get
    /// ahead of: a question's first row tile waited on memory at every panel's start
    /// (`kernel_bench`'s question, 24 distinct matrices: 1,393 → 1,036 µs at the median of 8;
    /// one prefetch per 64 bytes instead, in the inner loop, made it slower).
    ///
    /// # Safety
    /// The tile's panels are followed by `ahead` more of `pairs × NR × 2` bytes each.
    #[inline]
    unsafe fn prefetch_ahead<const P: usize>(&self, from: usize) {
        let stride = self.pairs * NR * 2;
        for k in P..P + self.ahead {
            for line in 0..PREFETCH_PAIRS * NR * 2 / 64 {
                _mm_prefetch::<_MM_HINT_T1>(self.weights.wrapping_add(k * stride + from + 64 * line));
            }
        }
    }

    /// `R` rows from `row` of `q` times the panel, scaled, biased and written at `out` (the
    /// tile's first output; rows `out_stride` apart).
    ///
    /// # Safety
    /// AVX2 and FMA; rows `row..row + R` exist in `q`; the panel holds `pairs × NR × 2` bytes
    /// and `NR` scales and biases; `out` has `R` rows of `cols` writable values.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn run<const R: usize>(&self, q: &Rows, row: usize, out: *mut f32) {
        let mut acc = [[_mm256_setzero_si256(); 2]; R];
        let a = q.values.as_ptr().add(row * self.width);
        let mut w = self.weights;
        for pair in 0..self.pairs {
            let w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(w as *const __m128i));
            let w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(w.add(16) as *const __m128i));
            w = w.add(NR * 2);
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm256_set1_epi32((a.add(r * self.width + 2 * pair) as *const i32).read_unaligned());
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(x, w0));
                acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(x, w1));
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let row_scale = _mm256_set1_ps(q.scales[row + r]);
            let mut y = [0f32; NR];
            // a whole panel is stored in place; the last, narrower one through `y`
            let to = if self.cols == NR { out.add(r * self.out_stride) } else { y.as_mut_ptr() };
            for (v, sum) in acc.iter().enumerate() {
                let scale = _mm256_mul_ps(row_scale, _mm256_loadu_ps(self.scales.add(8 * v)));
                let value = _mm256_fmadd_ps(_mm256_cvtepi32_ps(*sum), scale, _mm256_loadu_ps(self.bias.add(8 * v)));
                _mm256_storeu_ps(to.add(8 * v), value);
            }
            if self.cols < NR {
                std::ptr::copy_nonoverlapping(y.as_ptr(), out.add(r * self.out_stride), self.cols);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Tile {
    /// `R` rows from `row` of `q` times `P` panels side by side (the tile's `cols` count from the
    /// first), with AVX-512 VNNI, written at `out` as [`Tile::run`] writes. Each step loads the
    /// `P` panels' 32 bytes of a pair of inputs once for the `R` rows, sign-extended to 32 `i16`
    /// (`vpmovsxbw`), and broadcasts each row's two activations once for the `P` panels;
    /// `vpdpwssd` adds their 16 pair sums to the `i32` lanes, what `vpmaddwd` and `vpaddd` do
    /// (no saturation: the sums are bounded as in the AVX2 kernel). The sums are exact, and each
    /// is then scaled as [`Tile::run`] scales it (`vmulps` of the two scales, one `vfmadd` with
    /// the bias), 16 lanes at a time: the same bits. A tile of few rows has few sums, and
    /// `vpdpwssd` waits for the sum it adds to (where `vpaddd` waits one cycle, the product
    /// aside): its pairs of inputs go in turn to `S` sets of sums, added up at the end (exact,
    /// in `i32`), so that at least 8 chains run side by side.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI, AVX2 and FMA; rows `row..row + R` exist in `q`; the tile has `P`
    /// panels of `pairs × NR × 2` bytes, `pairs × NR × 2` bytes apart, and their `P · NR` scales
    /// and biases; `out` has `R` rows of `min(cols, P · NR)` writable values, `out_stride` apart.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    #[inline]
    unsafe fn vnni<const R: usize, const P: usize, const S: usize>(&self, q: &Rows, row: usize, out: *mut f32) {
        let mut sets = [[[_mm512_setzero_si512(); P]; R]; S];
        let whole = self.pairs / S * S;
        for first in (0..whole).step_by(S) {
            if first % PREFETCH_PAIRS == 0 {
                self.prefetch_ahead::<P>(first * NR * 2);
            }
            for (s, acc) in sets.iter_mut().enumerate() {
                self.vnni_step(q, row, first + s, acc);
            }
        }
        for pair in whole..self.pairs {
            self.vnni_step(q, row, pair, &mut sets[0]);
        }
        let mut acc = sets[0];
        for set in &sets[1..] {
            for (acc, set) in acc.iter_mut().zip(set) {
                for (acc, v) in acc.iter_mut().zip(set) {
                    *acc = _mm512_add_epi32(*acc, *v);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let row_scale = _mm512_set1_ps(q.scales[row + r]);
            for (p, sum) in acc.iter().enumerate() {
                let scale = _mm512_mul_ps(row_scale, _mm512_loadu_ps(self.scales.add(NR * p)));
                let value = _mm512_fmadd_ps(_mm512_cvtepi32_ps(*sum), scale, _mm512_loadu_ps(self.bias.add(NR * p)));
                let cols = NR.min(self.cols - NR * p);
                let to = out.add(r * self.out_stride + NR * p);
                // a whole panel is stored in place; the last, narrower one under a mask
                _mm512_mask_storeu_ps(to, ((1u32 << cols) - 1) as u16, value);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Tile {
    /// One step of [`Tile::vnni`]: input pair `pair` of `R` rows from `row` into `acc`.
    ///
    /// # Safety
    /// As [`Tile::vnni`], and `pair < pairs`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    #[inline]
    unsafe fn vnni_step<const R: usize, const P: usize>(
        &self,
        q: &Rows,
        row: usize,
        pair: usize,
        acc: &mut [[__m512i; P]; R],
    ) {
        let w = self.weights.add(pair * NR * 2);
        let stride = self.pairs * NR * 2;
        let wv: [__m512i; P] =
            std::array::from_fn(|p| _mm512_cvtepi8_epi16(_mm256_loadu_si256(w.add(p * stride) as *const __m256i)));
        let a = q.values.as_ptr().add(row * self.width + 2 * pair);
        for (r, acc) in acc.iter_mut().enumerate() {
            let x = _mm512_set1_epi32((a.add(r * self.width) as *const i32).read_unaligned());
            for (acc, w) in acc.iter_mut().zip(&wv) {
                *acc = _mm512_dpwssd_epi32(*acc, x, *w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pseudo_random as random;

    /// `x · Wᵀ + b` in `f64`.
    fn exact(x: &[f32], w: &[f32], b: &[f32], rows: usize, outputs: usize, inputs: usize) -> Vec<f32> {
        let mut y = vec![0f32; rows * outputs];
        for r in 0..rows {
            for o in 0..outputs {
                let s: f64 = (0..inputs).map(|i| f64::from(x[r * inputs + i]) * f64::from(w[o * inputs + i])).sum();
                y[r * outputs + o] = (s + f64::from(b[o])) as f32;
            }
        }
        y
    }

    /// The edge shapes: rows around the tiles (6) and the row block (64); inputs odd and not a
    /// multiple of 16; outputs not a multiple of the panel (16) nor of the VNNI kernel's two.
    const SHAPES: [(usize, usize, usize); 9] = [
        (1, 384, 384),
        (3, 37, 50),
        (31, 16, 24),
        (32, 385, 25),
        (33, 1536, 384),
        (255, 61, 47),
        (65, 64, 16),
        (13, 384, 1552),
        (256, 384, 1536),
    ];

    #[test]
    fn the_kernel_matches_the_f32_product_and_the_integer_reference_on_edge_shapes() {
        for (i, &(rows, inputs, outputs)) in SHAPES.iter().enumerate() {
            let w = random(outputs * inputs, 1 + i as u64);
            let b = random(outputs, 100 + i as u64);
            let x = random(rows * inputs, 200 + i as u64);
            let layer = Linear::quantize(&w, &b, outputs, inputs);
            let (fast, reference) = (layer.forward(&x, rows), layer.forward_reference(&x, rows));
            let want = exact(&x, &w, &b, rows, outputs, inputs);
            // the error of 8-bit weights: ~ |x|·|w|·√inputs / 127 / √3 per output
            let bound = 0.01 * (inputs as f32).sqrt();
            for (j, ((f, r), e)) in fast.iter().zip(&reference).zip(&want).enumerate() {
                assert!((f - r).abs() <= 1e-5 * r.abs().max(1.0), "{rows}×{inputs}×{outputs} [{j}]: {f} vs {r}");
                assert!((f - e).abs() < bound, "{rows}×{inputs}×{outputs} [{j}]: {f} vs exact {e}");
            }
        }
    }

    #[test]
    fn the_vnni_kernel_gives_the_avx2_kernels_bits_on_edge_shapes() {
        eprintln!(
            "kernel paths of this CPU: 8-bit × 16-bit {:?} (serving: {:?}), VNNI held bit for bit to AVX2: {}",
            chosen(),
            describe(chosen()),
            if Path::Vnni.available() && Path::Avx2.available() {
                "yes"
            } else {
                "NOT TESTED (this CPU lacks AVX-512 VNNI or AVX2)"
            }
        );
        if !(Path::Vnni.available() && Path::Avx2.available()) {
            return;
        }
        for (i, &(rows, inputs, outputs)) in SHAPES.iter().enumerate() {
            let w = random(outputs * inputs, 1 + i as u64);
            let b = random(outputs, 100 + i as u64);
            let mut x = random(rows * inputs, 200 + i as u64);
            x[..inputs].fill(0.0); // a row of zeros
            let layer = Linear::quantize(&w, &b, outputs, inputs);
            let (vnni, avx2) = (layer.forward_on(Path::Vnni, &x, rows), layer.forward_on(Path::Avx2, &x, rows));
            assert_eq!(vnni.len(), rows * outputs);
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&vnni), bits(&avx2), "{rows}×{inputs}×{outputs}");
            assert_eq!(vnni, avx2, "{rows}×{inputs}×{outputs}");
        }
    }

    #[test]
    fn a_zero_row_gives_the_bias_and_sums_cannot_overflow() {
        let (inputs, outputs) = (1536, 30);
        let w = vec![1.0; outputs * inputs];
        let b: Vec<f32> = (0..outputs).map(|o| o as f32).collect();
        let layer = Linear::quantize(&w, &b, outputs, inputs);
        let mut x = vec![0.0; 2 * inputs];
        x[inputs..].iter_mut().for_each(|v| *v = -3.0); // every product at the extreme
        for path in [Path::Plain, Path::Avx2, Path::Vnni].into_iter().filter(|p| p.available()) {
            let y = layer.forward_on(path, &x, 2);
            assert_eq!(&y[..outputs], &b[..], "{path:?}");
            for (o, v) in y[outputs..].iter().enumerate() {
                let want = -3.0 * inputs as f32 + o as f32;
                assert!((v - want).abs() < 1e-3 * want.abs(), "{path:?}: {v} vs {want}");
            }
        }
    }
}
