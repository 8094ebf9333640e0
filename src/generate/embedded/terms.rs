//! The analyzed terms of a sentence or heading, with a membership test cheaper than a slice's.
//!
//! Scoring a question asks, for every candidate sentence of the retrieved chunks, whether it
//! holds each of the question's terms, again for its heading path and code block, and again
//! per selection step. With the terms in a `Vec<String>`, each test compared the term with
//! every string of equal length byte by byte: `memcmp` alone was 5.5 % of a completion's CPU in
//! a profile of the completions benchmark, 1.4 % since. [`Terms::contains`]
//! compares a 64-bit tag per term first (its length and first seven bytes), which decides alone
//! for terms of up to seven bytes, most stems.

use std::ops::Deref;

/// Terms in the order they were found (iterated and sliced as a `[String]`), with their tags.
#[derive(Debug, Default)]
pub struct Terms {
    list: Box<[String]>,
    tags: Box<[u64]>,
}

impl Terms {
    /// Whether `term` is one of these terms.
    pub fn contains(&self, term: &str) -> bool {
        let tag = tag(term);
        self.tags.iter().zip(&*self.list).any(|(t, s)| *t == tag && (term.len() <= 7 || s == term))
    }
}

impl From<Vec<String>> for Terms {
    fn from(list: Vec<String>) -> Terms {
        let tags = list.iter().map(|t| tag(t)).collect();
        Terms { list: list.into_boxed_slice(), tags }
    }
}

impl Deref for Terms {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.list
    }
}

/// A term's length (the low byte, saturated at 255) and its first seven bytes (zero-padded):
/// equal tags mean equal terms when both have at most seven bytes.
fn tag(term: &str) -> u64 {
    let bytes = term.as_bytes();
    let mut head = [0u8; 8];
    let n = bytes.len().min(7);
    head[1..=n].copy_from_slice(&bytes[..n]);
    head[0] = u8::try_from(bytes.len()).unwrap_or(u8::MAX);
    u64::from_le_bytes(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(list: &[&str]) -> Terms {
        list.iter().map(|t| t.to_string()).collect::<Vec<_>>().into()
    }

    #[test]
    fn membership_is_exact_for_short_long_and_multibyte_terms() {
        let t = terms(&["modul", "comprehens", "comprehenz", "données", "x", ""]);
        for present in ["modul", "comprehens", "comprehenz", "données", "x", ""] {
            assert!(t.contains(present), "{present}");
        }
        // the same first seven bytes or the same length, other terms
        for absent in ["modulx", "modu", "comprehend", "comprehension", "donnéez", "y", "xx"] {
            assert!(!t.contains(absent), "{absent}");
        }
        assert_eq!(&t[..2], ["modul", "comprehens"], "kept in order");
        assert!(!Terms::default().contains("modul"));
    }

    #[test]
    fn terms_longer_than_255_bytes_are_compared_whole() {
        let long = "a".repeat(300);
        let t = terms(&[&long]);
        assert!(t.contains(&long));
        assert!(!t.contains(&"a".repeat(299)));
        assert!(!t.contains(&"a".repeat(400)));
    }
}
