//! From the encoder's hidden states of a batch to one vector per text, as sentence-transformers'
//! Pooling module does it, then L2 normalisation.

use super::normalize;

/// How token states become one text vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The first token's state (`[CLS]`, `<s>`): bge, bge-m3.
    Cls,
    /// The mean of the states of the real tokens (padding excluded): MiniLM, e5.
    Mean,
    /// The state of the last real token: decoder-style embedders (Qwen3-Embedding).
    LastToken,
}

/// Pools the states of one text and normalises the result.
///
/// `states` holds `tokens × dim` values (row-major, the batch's padded length), `mask` one
/// entry per token (1 for a real token, 0 for padding; padding is on the right). Returns `dim`
/// values with an L2 norm of 1 (zeros when the text has no real token).
pub fn pool(pooling: Pooling, states: &[f32], mask: &[u32], dim: usize) -> Vec<f32> {
    debug_assert_eq!(states.len(), mask.len() * dim);
    let rows = states.chunks_exact(dim).zip(mask);
    let mut out = vec![0.0f32; dim];
    match pooling {
        Pooling::Cls => out.copy_from_slice(&states[..dim]),
        Pooling::Mean => {
            let mut n = 0.0f32;
            for (row, _) in rows.filter(|(_, m)| **m != 0) {
                out.iter_mut().zip(row).for_each(|(o, x)| *o += x);
                n += 1.0;
            }
            if n > 0.0 {
                out.iter_mut().for_each(|o| *o /= n);
            }
        }
        Pooling::LastToken => {
            if let Some((row, _)) = { rows }.rfind(|(_, m)| **m != 0) {
                out.copy_from_slice(row);
            }
        }
    }
    normalize(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three tokens of dimension 2, the last one padding.
    const STATES: [f32; 6] = [1.0, 0.0, 3.0, 4.0, 100.0, 100.0];
    const MASK: [u32; 3] = [1, 1, 0];

    #[test]
    fn mean_pooling_ignores_padding() {
        // mean of (1,0) and (3,4) = (2,2) → normalised (0.707, 0.707)
        let v = pool(Pooling::Mean, &STATES, &MASK, 2);
        assert!((v[0] - 0.70710677).abs() < 1e-6 && (v[1] - 0.70710677).abs() < 1e-6, "{v:?}");
    }

    #[test]
    fn cls_takes_the_first_token_and_last_token_the_last_real_one() {
        assert_eq!(pool(Pooling::Cls, &STATES, &MASK, 2), vec![1.0, 0.0]);
        assert_eq!(pool(Pooling::LastToken, &STATES, &MASK, 2), vec![0.6, 0.8]);
    }

    #[test]
    fn a_text_without_tokens_pools_to_zeros() {
        assert_eq!(pool(Pooling::Mean, &[5.0, 5.0], &[0], 2), vec![0.0, 0.0]);
    }
}
