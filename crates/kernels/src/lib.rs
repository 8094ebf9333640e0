//! The matrix kernels of replicad's in-process embedding encoder (`src/embed/encoder.rs`), in a
//! crate of their own so that every profile compiles them optimised (`[profile.dev.package]` in
//! the workspace's `Cargo.toml`): SIMD intrinsics unoptimised are tens of times slower, and the
//! debug-built tests embed whole knowledge bases. All of replicad's `unsafe` arithmetic is here,
//! in [`int8`].

pub mod int8;

/// `n` deterministic values in `[-1, 1)` from `seed` (xorshift): the matrices the kernels' tests
/// and `examples/embed_bench.rs` multiply.
pub fn pseudo_random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}
