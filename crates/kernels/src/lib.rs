//! The matrix kernels of replicad's in-process embedding encoder (`src/embed/encoder.rs`), in a
//! crate of their own so that every profile compiles them optimised (`[profile.dev.package]` in
//! the workspace's `Cargo.toml`): SIMD intrinsics unoptimised are tens of times slower, and the
//! debug-built tests embed whole knowledge bases. All of replicad's `unsafe` arithmetic is here,
//! in [`int8`].

pub mod int8;
