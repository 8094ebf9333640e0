//! Layer normalisation of rows of `f32`, in place, optionally after adding a residual (BERT's
//! post-norm `LayerNorm(x + residual)`): `(x − mean) / √(var + ε) · γ + β` per row.
//!
//! Plain Rust compiled for the baseline CPU and with AVX2 + FMA, chosen at run time (the
//! crate's documentation). The sums run in 8 lanes (then added lane by lane), so that the
//! compiler vectorises them: the result differs from a left-to-right sum by a rounding.

/// Lanes of the partial sums.
const LANES: usize = 8;

/// A layer normalisation over rows of `gamma.len()` values.
pub struct LayerNorm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

impl LayerNorm {
    /// Scale `gamma` and shift `beta` (one per value of a row, equal lengths) and `eps`, added
    /// to the variance. Panics if the lengths differ.
    pub fn new(gamma: Vec<f32>, beta: Vec<f32>, eps: f32) -> LayerNorm {
        assert_eq!(gamma.len(), beta.len(), "γ and β differ in length");
        LayerNorm { gamma, beta, eps }
    }

    /// Values per row.
    pub fn dim(&self) -> usize {
        self.gamma.len()
    }

    /// Normalises every row of `x` (`rows × dim`) in place. Panics if `x` is not whole rows.
    pub fn forward(&self, x: &mut [f32]) {
        self.forward_residual(x, None);
    }

    /// `x ← LayerNorm(x + residual)` row by row; `residual` as long as `x`. Panics if `x` is not
    /// whole rows or `residual` is not as long.
    pub fn forward_residual(&self, x: &mut [f32], residual: Option<&[f32]>) {
        let dim = self.dim();
        assert!(dim > 0 && x.len().is_multiple_of(dim), "{} values are not rows of {dim}", x.len());
        if let Some(r) = residual {
            assert_eq!(r.len(), x.len(), "the residual is not as long as x");
        }
        #[cfg(target_arch = "x86_64")]
        if crate::avx2_available() {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            return unsafe { self.rows_avx2(x, residual) };
        }
        self.rows(x, residual);
    }

    /// [`LayerNorm::rows`] compiled with AVX2 and FMA.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows_avx2(&self, x: &mut [f32], residual: Option<&[f32]>) {
        self.rows(x, residual);
    }

    #[inline(always)]
    fn rows(&self, x: &mut [f32], residual: Option<&[f32]>) {
        let dim = self.dim();
        for (i, row) in x.chunks_exact_mut(dim).enumerate() {
            if let Some(r) = residual {
                row.iter_mut().zip(&r[i * dim..(i + 1) * dim]).for_each(|(v, r)| *v += r);
            }
            let mean = sum(row) / dim as f32;
            row.iter_mut().for_each(|v| *v -= mean);
            let var = sum_squares(row) / dim as f32;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.gamma).zip(&self.beta) {
                *v = *v * inv * g + b;
            }
        }
    }
}

/// The sum of `x`, in [`LANES`] partial sums.
#[inline(always)]
fn sum(x: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        lanes.iter_mut().zip(c).for_each(|(l, v)| *l += v);
    }
    lanes.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>()
}

/// The sum of the squares of `x`, in [`LANES`] partial sums.
#[inline(always)]
fn sum_squares(x: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        lanes.iter_mut().zip(c).for_each(|(l, v)| *l += v * v);
    }
    lanes.iter().sum::<f32>() + chunks.remainder().iter().map(|v| v * v).sum::<f32>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pseudo_random as random;

    /// `LayerNorm(x + r)` of one row in `f64`.
    fn exact(x: &[f32], r: &[f32], gamma: &[f32], beta: &[f32], eps: f64) -> Vec<f32> {
        let s: Vec<f64> = x.iter().zip(r).map(|(a, b)| f64::from(*a) + f64::from(*b)).collect();
        let mean = s.iter().sum::<f64>() / s.len() as f64;
        let var = s.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / s.len() as f64;
        let inv = 1.0 / (var + eps).sqrt();
        s.iter()
            .zip(gamma)
            .zip(beta)
            .map(|((v, g), b)| ((v - mean) * inv * f64::from(*g) + f64::from(*b)) as f32)
            .collect()
    }

    #[test]
    fn layer_norm_matches_the_f64_formula_on_edge_shapes() {
        for (i, &(rows, dim)) in [(1, 384), (3, 7), (31, 8), (32, 9), (33, 33), (255, 384), (256, 1)].iter().enumerate()
        {
            let seed = 10 * i as u64;
            let x: Vec<f32> = random(rows * dim, seed).iter().map(|v| 4.0 * v + 1.0).collect();
            let r = random(rows * dim, seed + 1);
            let norm = LayerNorm::new(random(dim, seed + 2), random(dim, seed + 3), 1e-12);
            let (mut plain, mut with) = (x.clone(), x.clone());
            norm.forward_residual(&mut with, Some(&r));
            norm.forward(&mut plain);
            for row in 0..rows {
                let at = row * dim..(row + 1) * dim;
                let want = exact(&x[at.clone()], &r[at.clone()], &norm.gamma, &norm.beta, 1e-12);
                let alone = exact(&x[at.clone()], &vec![0.0; dim], &norm.gamma, &norm.beta, 1e-12);
                for ((g, w), (p, a)) in with[at.clone()].iter().zip(&want).zip(plain[at.clone()].iter().zip(&alone)) {
                    assert!((g - w).abs() < 1e-5 && (p - a).abs() < 1e-5, "{rows}×{dim}: {g} vs {w}, {p} vs {a}");
                }
            }
        }
    }
}
