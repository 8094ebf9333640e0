//! Time of each kernel on all-MiniLM-L6-v2's shapes, for a question (13 tokens) and a chunk (256
//! tokens): the 8-bit products (36 distinct weight matrices in turn, so that they come from
//! memory as in a forward pass), attention over 12 heads of 32, layer normalisation and GELU.
//! Wall time per call, median of 7 rounds; run it pinned to an idle core:
//!
//! ```sh
//! cargo build --release -p replicad-kernels --example kernel_bench
//! taskset -c 1 target/release/examples/kernel_bench
//! ```

use std::hint::black_box;
use std::time::Instant;

use replicad_kernels::attention::{attention, Shape};
use replicad_kernels::int8::Linear;
use replicad_kernels::norm::LayerNorm;
use replicad_kernels::{activation, pseudo_random};

/// Median over 7 rounds of the time per call of `f` (called `calls` times a round), in µs.
fn time(calls: usize, mut f: impl FnMut(usize)) -> f64 {
    let mut rounds: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for i in 0..calls {
                f(i);
            }
            t.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[3]
}

fn products() {
    for (inputs, outputs) in [(384, 1152), (384, 384), (384, 1536), (1536, 384)] {
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

fn row_kernels() {
    for len in [13, 256] {
        let shape = Shape { rows: 1, len, heads: 12, head_dim: 32 };
        let qkv = pseudo_random(len * 3 * 384, 7);
        let mask = vec![1u32; len];
        let mut out = vec![0f32; len * 384];
        let us = time(20, |_| attention(&qkv, &mask, shape, black_box(&mut out)));
        let gmacs = (2 * len * len * 384) as f64 / us / 1e3;
        println!("attention 1 × {len:>3} tokens, 12 heads of 32: {us:>8.1} µs {gmacs:>5.1} GMAC/s");
        let norm = LayerNorm::new(pseudo_random(384, 1), pseudo_random(384, 2), 1e-12);
        let residual = pseudo_random(len * 384, 3);
        let mut x = pseudo_random(len * 384, 4);
        let us = time(20, |_| norm.forward_residual(black_box(&mut x), Some(&residual)));
        println!("layer norm with residual, {len:>3} × 384: {us:>8.1} µs");
        let mut h = pseudo_random(len * 1536, 5);
        let us = time(20, |_| activation::gelu_erf(black_box(&mut h)));
        println!("GELU (erf), {len:>3} × 1536: {us:>8.1} µs");
    }
}

fn main() {
    println!("AVX2 + FMA: {}", replicad_kernels::avx2_available());
    products();
    row_kernels();
}
