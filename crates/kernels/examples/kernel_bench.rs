//! Time of each kernel on all-MiniLM-L6-v2's shapes, for a question (13 tokens) and a chunk (256
//! tokens): the 8-bit products (36 distinct weight matrices in turn, so that they come from
//! memory as in a forward pass), attention over 12 heads of 32, layer normalisation and GELU.
//! CPU time of the thread per call, median of 7 rounds; run it pinned to one core:
//!
//! ```sh
//! cargo build --release -p replicad-kernels --example kernel_bench
//! taskset -c 1 target/release/examples/kernel_bench
//! taskset -c 1 target/release/examples/kernel_bench --q4   # multilingual-e5-small's 4-bit products
//! taskset -c 1 target/release/examples/kernel_bench --q4-question   # only their question pass
//! taskset -c 1 target/release/examples/kernel_bench --attention   # attention (f32, bf16), norm, GELU
//! ```

use std::hint::black_box;

use replicad_kernels::attention::{attention, attention_in, Products, Shape};
use replicad_kernels::int8::Linear;
use replicad_kernels::norm::LayerNorm;
use replicad_kernels::{activation, pseudo_random};

/// CPU time of the calling thread so far, in µs.
fn thread_cpu_us() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid pointer it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// Median over 7 rounds of the CPU time per call of `f` (called `calls` times a round), in µs.
fn time(calls: usize, mut f: impl FnMut(usize)) -> f64 {
    let mut rounds: Vec<f64> = (0..7)
        .map(|_| {
            let t = thread_cpu_us();
            for i in 0..calls {
                f(i);
            }
            (thread_cpu_us() - t) / calls as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[3]
}

fn products() {
    for (inputs, outputs) in LAYER_SHAPES {
        let layers = 36 * 384 * 384 / (inputs * outputs);
        let bias = vec![0.0f32; outputs];
        let int8: Vec<Linear> = (0..layers)
            .map(|i| Linear::quantize(&pseudo_random(inputs * outputs, i as u64 + 1), &bias, outputs, inputs))
            .collect();
        for rows in [1, 13, 256] {
            let x = pseudo_random(rows * inputs, 99);
            let us = time(layers, |i| {
                black_box(int8[i].forward(&x, rows));
            });
            let gmacs = (rows * inputs * outputs) as f64 / us / 1e3;
            println!("int8 {rows:>3} × {inputs:>4} → {outputs:>4}: {us:>8.1} µs {gmacs:>5.1} GMAC/s");
        }
    }
}

/// `Q4_0` blocks of random weights, `outputs × inputs`.
fn q4_blocks(outputs: usize, inputs: usize, seed: u64) -> Vec<u8> {
    let v = pseudo_random(outputs * inputs, seed);
    let mut out = Vec::new();
    for chunk in v.chunks_exact(32) {
        out.extend(0x2000u16.to_le_bytes()); // d = 2^-7
        out.extend((0..16).map(|j| {
            let n = |x: f32| ((x + 1.0) * 8.0).clamp(0.0, 15.0) as u8;
            n(chunk[j]) | n(chunk[j + 16]) << 4
        }));
    }
    out
}

/// The 4-bit products on multilingual-e5-small's shapes, on each path this CPU has: 48 distinct
/// matrices in turn (from memory), and one matrix again and again (from the caches: the
/// arithmetic alone).
fn q4_products() {
    use replicad_kernels::q4::{Linear as Q4, Path};
    let paths: Vec<Path> = [Path::Vnni, Path::Avx2, Path::Plain].into_iter().filter(|p| p.available()).collect();
    for (inputs, outputs) in LAYER_SHAPES {
        let layers = 48 * 384 * 384 / (inputs * outputs);
        let bias = vec![0.0f32; outputs];
        let q4: Vec<Q4> = (0..layers)
            .map(|i| Q4::from_q4_0(&q4_blocks(outputs, inputs, i as u64 + 1), &bias, outputs, inputs))
            .collect();
        for rows in [1, 15, 256] {
            let x = pseudo_random(rows * inputs, 99);
            let macs = (rows * inputs * outputs) as f64;
            let mut line = format!("q4 {rows:>3} × {inputs:>4} → {outputs:>4}:");
            for &path in &paths {
                if path == Path::Plain && rows > 15 {
                    continue;
                }
                let distinct = time(layers, |i| {
                    black_box(q4[i].forward_on(path, &x, rows));
                });
                let cached = time(layers, |_| {
                    black_box(q4[0].forward_on(path, &x, rows));
                });
                line += &format!(
                    "  {path:?} {distinct:>7.1} µs {:>5.1} GMAC/s (cached {:>5.1})",
                    macs / distinct / 1e3,
                    macs / cached / 1e3
                );
            }
            println!("{line}");
        }
    }
}

/// The shapes of an encoder layer's four products (`inputs, outputs`: attention's query, key
/// and value together, its output, the feed-forward's two), MiniLM's and multilingual-e5-small's.
const LAYER_SHAPES: [(usize, usize); 4] = [(384, 1152), (384, 384), (384, 1536), (1536, 384)];

/// One pass of a question of `rows` tokens through `layers` (each of [`LAYER_SHAPES`], from memory
/// or the L3 cache as in the encoder), `forward` multiplying each layer's product: µs per pass
/// ([`time`] of `calls` passes) and GMAC/s.
fn question_pass_of<L>(layers: &[Vec<L>], rows: usize, calls: usize, forward: impl Fn(&L, &[f32])) -> (f64, f64) {
    let x: Vec<Vec<f32>> = LAYER_SHAPES.iter().map(|&(i, _)| pseudo_random(rows * i, 5)).collect();
    let us = time(calls, |_| {
        for layer in layers {
            for (linear, x) in layer.iter().zip(&x) {
                forward(linear, x);
            }
        }
    });
    let macs: usize = LAYER_SHAPES.iter().map(|(i, o)| layers.len() * rows * i * o).sum();
    (us, macs as f64 / us / 1e3)
}

/// The 48 products of a question's pass through multilingual-e5-small's 12 layers (15 rows; 10.6
/// MB of nibbles), time per pass on each path this CPU has but the plain one.
fn q4_question_pass() {
    use replicad_kernels::q4::{Linear as Q4, Path};
    let layers: Vec<Vec<Q4>> = (0..12)
        .map(|l| {
            LAYER_SHAPES.iter().map(|&(i, o)| Q4::from_q4_0(&q4_blocks(o, i, 1000 + l), &vec![0.0; o], o, i)).collect()
        })
        .collect();
    for path in [Path::Vnni, Path::Avx2].into_iter().filter(|p| p.available()) {
        let (us, gmacs) = question_pass_of(&layers, 15, 20, |linear, x| {
            black_box(linear.forward_on(path, x, 15));
        });
        println!("q4 {path:?}, a question's 48 products (15 rows): {us:>8.1} µs {gmacs:>5.1} GMAC/s");
    }
}

/// The 24 products of a question's pass through MiniLM's 6 layers (13 rows; 11 MB of weights),
/// time per pass.
fn question_pass() {
    let layers: Vec<Vec<Linear>> = (0..6)
        .map(|l| {
            LAYER_SHAPES
                .iter()
                .map(|&(i, o)| Linear::quantize(&pseudo_random(i * o, 1000 + l), &vec![0.0; o], o, i))
                .collect()
        })
        .collect();
    let (us, gmacs) = question_pass_of(&layers, 13, 50, |linear, x| {
        black_box(linear.forward(x, 13));
    });
    println!("int8, a question's 24 products (13 rows): {us:>8.1} µs {gmacs:>5.1} GMAC/s");
}

fn row_kernels() {
    for len in [13, 256] {
        let shape = Shape { rows: 1, len, heads: 12, head_dim: 32 };
        let qkv = pseudo_random(len * 3 * 384, 7);
        let mask = vec![1u32; len];
        let mut out = vec![0f32; len * 384];
        let us = time(20, |_| attention(&qkv, &mask, shape, black_box(&mut out)));
        let gmacs = (2 * len * len * 384) as f64 / us / 1e3;
        println!("attention 1 × {len:>3} tokens, 12 heads of 32: {us:>8.1} µs {gmacs:>5.1} GMAC/s");
        if let products @ Products::Bf16(_) = Products::chosen() {
            let us = time(20, |_| attention_in(products, &qkv, &mask, shape, black_box(&mut out)));
            let gmacs = (2 * len * len * 384) as f64 / us / 1e3;
            println!("  the same, {}: {us:>8.1} µs {gmacs:>5.1} GMAC/s", products.describe());
        }
        let norm = LayerNorm::new(pseudo_random(384, 1), pseudo_random(384, 2), 1e-12);
        let residual = pseudo_random(len * 384, 3);
        let mut x = pseudo_random(len * 384, 4);
        let us = time(20, |_| norm.forward_residual(black_box(&mut x), Some(&residual)));
        println!("layer norm with residual, {len:>3} × 384: {us:>8.1} µs");
        // from the same values each time (applied again and again, GELU drives them to subnormals)
        let (h, mut y) = (pseudo_random(len * 1536, 5), vec![0f32; len * 1536]);
        let us = time(20, |_| {
            y.copy_from_slice(&h);
            activation::gelu_erf(black_box(&mut y));
        });
        println!("GELU (erf), {len:>3} × 1536 (with a copy): {us:>8.1} µs");
    }
}

fn main() {
    println!("AVX2 + FMA: {}", replicad_kernels::avx2_available());
    let int8 = replicad_kernels::int8::chosen();
    println!(
        "int8 (REPLICAD_INT8_PATH=avx2 to time AVX2 on a VNNI CPU): {int8:?}, {}",
        replicad_kernels::int8::describe(int8)
    );
    if std::env::args().any(|a| a == "--attention") {
        row_kernels();
        return;
    }
    if std::env::args().any(|a| a == "--q4-question") {
        q4_question_pass();
        return;
    }
    if std::env::args().any(|a| a == "--q4") {
        q4_products();
        q4_question_pass();
        return;
    }
    products();
    question_pass();
    row_kernels();
}
