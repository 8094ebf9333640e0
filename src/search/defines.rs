//! What a chunk defines: the subjects of its sentences of the form "X is a …" ("sed is a stream
//! editor.", "A module is a file …"), indexed in a field of their own so that "What is X?"
//! finds the passage that says what X is even where X is named in every other chunk too (the
//! program a manual is about, the language a tutorial teaches).

use super::analyze_as;
use crate::text::blocks::{self, Block};

/// Words that say "is" between a subject and its definition (English, French, Spanish, German);
/// those of [`NAMING_COPULAS`] say it alone, the others only before an article ("is a",
/// "are the"): "sed is invoked like this" or "this option is specified" say how a thing is
/// used, not what it is.
pub const COPULAS: &[&str] =
    &[" is ", " are ", " means ", " refers to ", " est ", " sont ", " désigne ", " es ", " son ", " ist ", " sind "];
/// Copulas that define without an article after them.
const NAMING_COPULAS: &[&str] = &[" means ", " refers to ", " désigne "];
/// Words after a copula that open what the subject is, besides the [`ARTICLES`] ("sed is one
/// of …").
const DEFINING_NUMERALS: &[&str] = &["one", "uno"];
/// Words that point back to something already named ("this command is the same as …"): an
/// opening with one names nothing new.
const DEMONSTRATIVES: &[&str] = &[
    "this", "these", "that", "those", "such", "ce", "cet", "cette", "ces", "este", "esta", "estos", "estas", "dieser",
    "diese", "dieses",
];

/// Articles a subject may start with ("the d command", "a tuple"): dropped before its words are
/// counted here, and before they are matched with an entry's name by the generator.
pub const ARTICLES: &[&str] =
    &["a", "an", "the", "un", "une", "le", "la", "les", "el", "los", "las", "una", "der", "die", "das", "ein", "eine"];

/// Most words of a subject (without its article): longer openings are clauses ("If there is
/// no match, …"), not names.
pub const MAX_SUBJECT_WORDS: usize = 3;

/// The subjects `text`'s prose sentences define, one per line: the words before a sentence's
/// first copula ([`without_apposition`]) when an article follows it (or it is one of [`NAMING_COPULAS`]), they are at
/// most [`MAX_SUBJECT_WORDS`] (an article aside), hold no comma (a clause: "Here, it is …") and
/// do not open with a demonstrative; and the items of a list of names after a colon
/// ([`list_after_colon`], terms of language `lang`). Code blocks and definition-list entries
/// are not read.
pub fn subjects(text: &str, lang: Option<&str>) -> String {
    let mut out = String::new();
    for b in blocks::parse(text) {
        let Block::Prose(sentences) = b else { continue };
        for s in &sentences {
            let listed = list_after_colon(s, lang).into_iter().map(|(item, _)| item);
            for subject in subject(s).into_iter().chain(listed) {
                out.push_str(subject.trim());
                out.push('\n');
            }
        }
    }
    out
}

/// The subject of `sentence` when it opens with one before a copula.
fn subject(sentence: &str) -> Option<&str> {
    let padded = format!(" {sentence}");
    let (cut, copula) = COPULAS.iter().filter_map(|c| padded.find(c).map(|i| (i, *c))).min()?;
    let next = padded[cut + copula.len()..].split_whitespace().next().unwrap_or("").to_lowercase();
    let next = next.as_str();
    if !NAMING_COPULAS.contains(&copula) && !ARTICLES.contains(&next) && !DEFINING_NUMERALS.contains(&next) {
        return None;
    }
    let before = without_apposition(sentence.get(..cut.checked_sub(1)?)?);
    let mut words: Vec<String> = before.split_whitespace().map(str::to_lowercase).collect();
    if words.first().is_some_and(|w| DEMONSTRATIVES.contains(&w.as_str())) {
        return None;
    }
    if words.first().is_some_and(|w| ARTICLES.contains(&w.as_str())) {
        words.remove(0);
    }
    let name = (1..=MAX_SUBJECT_WORDS).contains(&words.len()) && !before.contains([',', ';', ':']);
    name.then_some(before)
}

/// The opening of a sentence up to its copula (`before`) less an apposition between commas
/// that names the subject again ("Syntax errors, also known as parsing errors," gives "Syntax
/// errors"); trimmed.
pub fn without_apposition(before: &str) -> &str {
    let before = before.trim();
    match before.strip_suffix(',') {
        Some(apposed) => apposed.split(',').next().unwrap_or(apposed).trim(),
        None => before,
    }
}

/// Most terms of an item of a list of names after a colon (longer items are clauses: "first,
/// sed reads one line from the input stream, …" lists steps, not names).
pub const LIST_ITEM_TERMS: usize = 4;

/// Words that join the last item of a list ("A, B and C").
const LIST_JOINS: &[&str] = &["and ", "or ", "et ", "ou ", "y ", "o ", "und ", "oder "];

/// Each item of the list of names that follows a colon inside `sentence` (a sentence that names
/// a kind, then its members: "two data buffers: the active pattern space, and the auxiliary
/// hold space"), with its terms in language `lang` (ISO 639-1; `None`: English): at least two
/// items, each of 1 to [`LIST_ITEM_TERMS`] terms, and a kind named before the colon. Empty when
/// there is no such list.
pub fn list_after_colon<'s>(sentence: &'s str, lang: Option<&str>) -> Vec<(&'s str, Vec<String>)> {
    let Some((kind, list)) = sentence.split_once(": ") else { return Vec::new() };
    if analyze_as(lang, kind).is_empty() {
        return Vec::new();
    }
    let list = list.trim_end_matches(['.', '!', '?', ' ']);
    let mut items = Vec::new();
    for part in list.split([',', ';']) {
        let part = part.trim();
        let part = LIST_JOINS.iter().find_map(|j| part.strip_prefix(j)).unwrap_or(part);
        // "A and B" without a comma
        for item in part.split(" and ").flat_map(|p| p.split(" or ")) {
            items.push((item, analyze_as(lang, item)));
        }
    }
    let names = items.len() >= 2 && items.iter().all(|(_, t)| !t.is_empty() && t.len() <= LIST_ITEM_TERMS);
    if names {
        items
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_opening_of_a_sentence_before_is_is_its_subject() {
        let text = "grep is a line filter. It reads files. When no line matches, it prints nothing.\n\n\
                    The exit status is the number of matches.\n\n    grep is a program\n\nUn motif est une \
                    expression. A pattern means a regular expression. grep keeps two counts: the \
                    line count and the match count.";
        let got = subjects(text, None);
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(
            lines,
            vec!["grep", "The exit status", "Un motif", "A pattern", "the line count", "the match count"],
            "{got:?}"
        );
    }

    #[test]
    fn long_openings_and_clauses_define_nothing() {
        assert_eq!(subject("Unless special commands like these are used, nothing happens."), None);
        assert_eq!(subject("Here, it is a test."), None);
        assert_eq!(subject("Pipes, also called filters, are the oldest tools."), Some("Pipes"));
        assert_eq!(subject("Normally grep is invoked like this:"), None, "no article: how it is used");
        assert_eq!(subject("This option is the default."), None, "it points back");
        assert_eq!(subject("Nothing to see."), None);
    }
}
