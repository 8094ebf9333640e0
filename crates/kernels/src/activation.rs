//! The feed-forward activations of the BERT family, in place on a slice of `f32`: GELU with the
//! error function ([`gelu_erf`]), its tanh approximation ([`gelu_tanh`]) and ReLU ([`relu`]).
//!
//! [`gelu_erf`] is plain Rust compiled for the baseline CPU and with AVX2 + FMA, chosen at run
//! time (the crate's documentation): the same bits either way.

/// GELU with the error function, `x · (1 + erf(x / √2)) / 2`, on every value of `x`.
pub fn gelu_erf(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::avx2_available() {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512 F, AVX2 and FMA (checked just above).
            return unsafe { gelu_erf_avx512(x) };
        }
        // SAFETY: the CPU has AVX2 and FMA (checked just above).
        return unsafe { gelu_erf_avx2(x) };
    }
    gelu_erf_body(x);
}

/// [`gelu_erf_body`] compiled with AVX-512 F (16 values a vector; the same bits: Rust never
/// fuses a multiply and an add on its own).
///
/// # Safety
/// The CPU must have AVX-512 F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn gelu_erf_avx512(x: &mut [f32]) {
    gelu_erf_body(x);
}

/// [`gelu_erf_body`] compiled with AVX2 and FMA.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_erf_avx2(x: &mut [f32]) {
    gelu_erf_body(x);
}

#[inline(always)]
fn gelu_erf_body(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// GELU's tanh approximation, `x · (1 + tanh(√(2/π) · (x + 0.044715 x³))) / 2` (`gelu_new`).
pub fn gelu_tanh(x: &mut [f32]) {
    const SQRT_TWO_OVER_PI: f32 = 0.797_884_6;
    for v in x {
        *v = 0.5 * *v * (1.0 + (SQRT_TWO_OVER_PI * *v * (1.0 + 0.044_715 * *v * *v)).tanh());
    }
}

/// `max(x, 0)` on every value of `x`.
pub fn relu(x: &mut [f32]) {
    for v in x {
        *v = v.max(0.0);
    }
}

/// The error function in `f32`: a rational approximation on `[-4, 4]` (beyond which `erf` is
/// ±1 in `f32`), as Eigen computes it in single precision (odd numerator of degree 13,
/// even denominator of degree 8), accurate to a few units in the last place. Branch-free, so
/// that a loop of it vectorises.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let alpha = [
        -2.726_142_3e-10,
        2.770_681_4e-8,
        -2.101_024e-6,
        -5.692_506_4e-5,
        -7.349_906_3e-4,
        -2.954_6e-3,
        -1.609_603_3e-2,
    ];
    let beta = [-1.456_607_2e-5, -2.133_740_6e-4, -1.682_827e-3, -7.373_329_3e-3, -1.426_474e-2];
    let p = alpha.iter().fold(0.0, |acc, &a| acc * x2 + a);
    let q = beta.iter().fold(0.0, |acc, &b| acc * x2 + b);
    x * p / q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_the_error_function() {
        // erf at 0, 0.5, 1, 2, 3 and far out, to 7 digits
        let known = [(0.0, 0.0), (0.5, 0.520_499_9), (1.0, 0.842_700_8), (2.0, 0.995_322_3), (3.0, 0.999_977_9)];
        for (x, y) in known {
            assert!((erf(x) - y).abs() < 2e-7, "erf({x}) = {} against {y}", erf(x));
            assert!((erf(-x) + y).abs() < 2e-7, "erf(-{x})");
        }
        assert!((erf(9.0) - 1.0).abs() < 2e-7 && (erf(-9.0) + 1.0).abs() < 2e-7, "erf(±9) = ±{}", erf(9.0));
    }

    #[test]
    fn gelu_vectorised_gives_the_bits_of_the_scalar_formula_on_every_length() {
        for n in [1, 3, 7, 8, 9, 31, 33, 1536] {
            let x: Vec<f32> = crate::pseudo_random(n, n as u64).iter().map(|v| v * 6.0).collect();
            let mut paths = vec![x.clone()];
            gelu_erf(&mut paths[0]);
            #[cfg(target_arch = "x86_64")]
            if crate::avx2_available() {
                let mut y = x.clone();
                // SAFETY: the CPU has AVX2 and FMA (checked just above).
                unsafe { gelu_erf_avx2(&mut y) };
                paths.push(y);
                if is_x86_feature_detected!("avx512f") {
                    let mut y = x.clone();
                    // SAFETY: the CPU has AVX-512 F, AVX2 and FMA (checked just above).
                    unsafe { gelu_erf_avx512(&mut y) };
                    paths.push(y);
                }
            }
            for fast in &paths {
                for (f, v) in fast.iter().zip(&x) {
                    let want = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
                    assert_eq!(f.to_bits(), want.to_bits(), "gelu({v}) over {n} values");
                }
            }
        }
    }

    #[test]
    fn gelu_tanh_and_relu_match_their_definitions() {
        let mut x = vec![-3.0, -0.5, 0.0, 0.5, 3.0];
        let mut r = x.clone();
        gelu_tanh(&mut x);
        relu(&mut r);
        let erf_gelu = [-0.004_049_7, -0.154_285_9, 0.0, 0.345_714_1, 2.995_950_3];
        for (g, e) in x.iter().zip(erf_gelu) {
            assert!((g - e).abs() < 2e-3, "{g} vs {e}");
        }
        assert_eq!(r, vec![0.0, 0.0, 0.0, 0.5, 3.0]);
    }
}
