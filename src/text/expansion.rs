//! Query expansion by question form: the words a question implies, written the way
//! documentation writes them. A word writing one of the question's words another way counts
//! like it, in retrieval (BM25 and the named-heading match) and in the embedded generator's
//! scoring and coverage. A word the question leaves unsaid is a guess at a heading's wording:
//! retrieval looks for it in headings only (the named-heading match), and the generator weighs
//! it without requiring an answer to hold it.
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

/// The words `question`, of intent `intent` ([`intent::of`]), implies (none for most questions).
pub fn expansion(question: &str, intent: &Intent) -> Vec<Implied> {
    let q = intent::plain(question);
    // a hyphenated compound is one word ("third-party" names no ordinal)
    let words: Vec<&str> = q.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric())).collect();
    let mut out = Vec::new();
    if let Some(ordinal) = words.iter().find(|w| ORDINALS.contains(w) || is_numbered_ordinal(w)) {
        out.extend(PLACEHOLDER_ORDINALS.iter().map(|&word| Implied { word, of: Some(ordinal.to_string()) }));
    }
    let subject = MECHANISM.iter().find_map(|m| q.strip_prefix(m)).and_then(|rest| rest.split_whitespace().next());
    let says_it = words.iter().any(|w| w.starts_with("work"));
    if subject.is_some_and(|s| !ASKERS.contains(&s)) && *intent == Intent::Fact && !says_it {
        out.push(Implied { word: WORKS, of: None });
    }
    out
}

/// What retrieval searches for `question`: its text with the words writing one of its words
/// another way, and apart the words it leaves unsaid (a guess at a heading's wording, looked for
/// in headings only, so that BM25 ranks what the question says).
pub fn expanded(question: &str, intent: &Intent) -> (String, String) {
    let implied = expansion(question, intent);
    let words = |alternative: bool| implied.iter().filter(move |i| i.of.is_some() == alternative).map(|i| i.word);
    let said = [question].into_iter().chain(words(true)).collect::<Vec<_>>().join(" ");
    (said, words(false).collect::<Vec<_>>().join(" "))
}

/// "2nd", "3rd", "21st": an ordinal written with digits (not "1st", as "first" is left out).
fn is_numbered_ordinal(word: &str) -> bool {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits != "1"
        && ["st", "nd", "rd", "th"].contains(&suffix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(question: &str) -> Vec<Implied> {
        expansion(question, &intent::of(question))
    }

    fn words(question: &str) -> Vec<&'static str> {
        of(question).iter().map(|i| i.word).collect()
    }

    #[test]
    fn a_concrete_ordinal_implies_the_manuals_placeholders() {
        let second = of("How do I replace only the second match on a line?");
        let of = Some("second".to_string());
        assert_eq!(second, [Implied { word: "Nth", of: of.clone() }, Implied { word: "NUMBERth", of }]);
        assert_eq!(words("How do I print every 3rd line?"), ["Nth", "NUMBERth"]);
        assert_eq!(
            expanded("Print the 3rd line", &Intent::Fact),
            ("Print the 3rd line Nth NUMBERth".into(), "".into())
        );
        assert!(words("How do I print the first line?").is_empty());
        assert!(words("What is the 1st rule?").is_empty());
        assert_eq!(words("Which is the 21st line?"), ["Nth", "NUMBERth"]);
        assert!(words("Where can I find third-party libraries?").is_empty());
    }

    #[test]
    fn how_a_thing_does_something_asks_how_it_works() {
        assert_eq!(of("How does sed process its input?"), [Implied { word: "works", of: None }]);
        assert_eq!(words("How do generators save their state?"), ["works"]);
        let (said, unsaid) = expanded("How does sed work on a 3rd line?", &Intent::Fact);
        assert_eq!((said.as_str(), unsaid.as_str()), ("How does sed work on a 3rd line? Nth NUMBERth", ""));
        let (said, unsaid) = expanded("How does sed read?", &Intent::Fact);
        assert_eq!((said.as_str(), unsaid.as_str()), ("How does sed read?", "works"));
        assert!(words("How does sed work?").is_empty(), "it says it already");
        assert!(words("How do I read a file?").is_empty());
        assert!(words("How does one read a file?").is_empty());
        assert!(words("How do lists and tuples differ?").is_empty(), "a comparison");
        assert!(words("Why does sed print twice?").is_empty());
    }
}
