//! The kernels of replicad's in-process embedding encoder (`src/embed/`), in a crate of their
//! own so that every profile compiles them optimised (`[profile.dev.package]` in the workspace's
//! `Cargo.toml`): SIMD code unoptimised is tens of times slower, and the debug-built tests embed
//! whole knowledge bases. All of replicad's `unsafe` arithmetic is here: the 8-bit matrix product
//! ([`int8`]), attention ([`attention`], on the small `f32` products of [`matmul`], or the
//! `bf16` ones of [`bf16`] where the CPU has AVX-512 BF16), layer normalisation ([`norm`]) and GELU
//! ([`activation`]), each on plain slices, allocation-free where a forward pass calls it per
//! layer, with an AVX2 + FMA version chosen at run time ([`avx2_available`]) and a plain one
//! that the tests hold it to; the matrix products ([`int8`], [`q4`]) also have an AVX-512 VNNI
//! one ([`vnni_available`]).
//!
//! The element-wise and row-wise kernels ([`norm`], [`activation`], the softmax) are plain Rust
//! compiled twice, once for the baseline CPU and once with AVX2 and FMA enabled
//! (`#[target_feature]`), so that the compiler vectorises them 8 lanes wide; Rust never fuses a
//! multiply and an add on its own, so both compilations compute the same bits.

pub mod activation;
pub mod attention;
pub mod bf16;
pub mod int8;
pub mod matmul;
pub mod norm;
pub mod q4;

/// Whether the AVX2 kernels can run here: the CPU has AVX2 and FMA (checked once by the
/// standard library, then cached).
#[cfg(target_arch = "x86_64")]
pub fn avx2_available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// Whether the AVX2 kernels can run here: never off x86-64.
#[cfg(not(target_arch = "x86_64"))]
pub fn avx2_available() -> bool {
    false
}

/// Whether the AVX-512 VNNI kernels can run here: the CPU has AVX-512 F, BW and VNNI (and AVX2
/// and FMA, which the rest of a product needs).
#[cfg(target_arch = "x86_64")]
pub fn vnni_available() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
        && avx2_available()
}

/// Whether the AVX-512 VNNI kernels can run here: never off x86-64.
#[cfg(not(target_arch = "x86_64"))]
pub fn vnni_available() -> bool {
    false
}

/// The kernel a matrix product ([`int8`], [`q4`]) runs on: each module's `chosen()` (once per
/// process) and `describe` (the instructions it uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// AVX-512 VNNI (with F and BW): `zmm` registers and one-instruction dot products.
    Vnni,
    /// AVX2 and FMA.
    Avx2,
    /// Plain Rust: every CPU, and the reference the tests hold the others to.
    Plain,
}

impl Path {
    /// The fastest path this CPU has (checked once by the standard library, then cached), or a
    /// slower one that the environment variable `var` names (`avx2`, `plain`: to measure one
    /// against another on one machine).
    pub fn detect(var: &str) -> Path {
        match std::env::var(var).as_deref() {
            Ok("plain") => Path::Plain,
            Ok("avx2") if avx2_available() => Path::Avx2,
            _ if vnni_available() => Path::Vnni,
            _ if avx2_available() => Path::Avx2,
            _ => Path::Plain,
        }
    }

    /// Whether this CPU can run the path.
    pub fn available(self) -> bool {
        match self {
            Path::Vnni => vnni_available(),
            Path::Avx2 => avx2_available(),
            Path::Plain => true,
        }
    }
}

/// Heights of the tiles that `rows` rows are cut into by a kernel that takes at most `most` rows
/// at a time: as few tiles as that allows, of near-equal heights (the taller first), so that no
/// short tile re-reads the weights for few products (13 rows by 6: 5 + 4 + 4, not 6 + 6 + 1).
pub(crate) fn tile_heights(rows: usize, most: usize) -> impl Iterator<Item = usize> {
    let tiles = rows.div_ceil(most);
    (0..tiles).map(move |t| rows / tiles + usize::from(t < rows % tiles))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_cut_into_tiles_of_near_equal_height() {
        let heights = |rows| tile_heights(rows, 6).collect::<Vec<_>>();
        assert_eq!(heights(13), vec![5, 4, 4]);
        assert_eq!(heights(12), vec![6, 6]);
        assert_eq!(heights(1), vec![1]);
        assert_eq!(heights(64).iter().sum::<usize>(), 64);
        assert!(heights(0).is_empty());
    }
}
