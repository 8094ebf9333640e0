//! Query expansion by question form: the words a question implies but does not say, written the
//! way documentation writes them. Retrieval adds them to the question's terms (BM25 and the
//! named-heading match) and the embedded generator weighs them as question terms that an
//! answer need not cover.
//!
//! - A concrete ordinal ("replace only the *second* match") implies the placeholder ordinals of
//!   reference manuals ("Only replace the NUMBERth match", "the Nth line"). A time unit ("a
//!   second") reads as one too: it only adds two terms that few chunks hold.
//! - "How does X …?" asked of a thing (not "How do I …?") asks how X works, which documents
//!   title "How X works" ("How does sed process its input?": "How sed Works").
//!
//! English questions only: the forms are English, and other languages' words are left alone.

use super::intent::{self, Intent};

/// Ordinals a question writes out; "first" and "last" have words of their own in documents.
const ORDINALS: &[&str] = &["second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"];
/// How reference manuals write an ordinal they leave open.
const PLACEHOLDER_ORDINALS: &[&str] = &["Nth", "NUMBERth"];
/// Openings of a question about how something works, its subject after them.
const MECHANISM: &[&str] = &["how does ", "how do "];
/// Subjects that make "How do …" a how-to ("How do I …", "How does one …").
const ASKERS: &[&str] = &["i", "you", "we", "one", "someone"];
/// The word documents title a mechanism with ("How sed Works").
const WORKS: &str = "works";

/// A word a question implies, to be analysed like its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Implied {
    pub word: &'static str,
    /// The question's word it writes another way ("second" for "NUMBERth"), whose place it may
    /// take in an answer; `None` for a word the question leaves unsaid.
    pub of: Option<String>,
}

/// The words `question` implies (none for most questions).
pub fn expansion(question: &str) -> Vec<Implied> {
    let q = intent::plain(question);
    let words: Vec<&str> = q.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let mut out = Vec::new();
    if let Some(ordinal) = words.iter().find(|w| ORDINALS.contains(w) || is_numbered_ordinal(w)) {
        out.extend(PLACEHOLDER_ORDINALS.iter().map(|&word| Implied { word, of: Some(ordinal.to_string()) }));
    }
    let subject = MECHANISM.iter().find_map(|m| q.strip_prefix(m)).and_then(|rest| rest.split_whitespace().next());
    let says_it = words.iter().any(|w| w.starts_with("work"));
    if subject.is_some_and(|s| !ASKERS.contains(&s)) && intent::of(question) == Intent::Fact && !says_it {
        out.push(Implied { word: WORKS, of: None });
    }
    out
}

/// The implied words of `question` after its own, as one text (what retrieval searches for).
pub fn expanded(question: &str) -> String {
    [question].into_iter().chain(expansion(question).iter().map(|i| i.word)).collect::<Vec<_>>().join(" ")
}

/// "2nd", "3rd", "10th": an ordinal written with digits (not "1st").
fn is_numbered_ordinal(word: &str) -> bool {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits != "1"
        && ["nd", "rd", "th"].contains(&suffix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(question: &str) -> Vec<&'static str> {
        expansion(question).iter().map(|i| i.word).collect()
    }

    #[test]
    fn a_concrete_ordinal_implies_the_manuals_placeholders() {
        let second = expansion("How do I replace only the second match on a line?");
        let of = Some("second".to_string());
        assert_eq!(second, [Implied { word: "Nth", of: of.clone() }, Implied { word: "NUMBERth", of }]);
        assert_eq!(words("How do I print every 3rd line?"), ["Nth", "NUMBERth"]);
        assert_eq!(expanded("Print the 3rd line"), "Print the 3rd line Nth NUMBERth");
        assert!(words("How do I print the first line?").is_empty());
        assert!(words("What is the 1st rule?").is_empty());
    }

    #[test]
    fn how_a_thing_does_something_asks_how_it_works() {
        assert_eq!(expansion("How does sed process its input?"), [Implied { word: "works", of: None }]);
        assert_eq!(words("How do generators save their state?"), ["works"]);
        assert!(words("How does sed work?").is_empty(), "it says it already");
        assert!(words("How do I read a file?").is_empty());
        assert!(words("How does one read a file?").is_empty());
        assert!(words("How do lists and tuples differ?").is_empty(), "a comparison");
        assert!(words("Why does sed print twice?").is_empty());
    }
}
