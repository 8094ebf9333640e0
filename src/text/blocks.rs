//! A retrieved chunk read as a reader sees it: prose paragraphs (cut into sentences) and code
//! blocks, in document order.
//!
//! Extracted text marks code by indentation (the tutorial's examples, Markdown and HTML code
//! blocks, manuals' examples: see `ingest::extract`), so a run of lines indented by
//! [`CODE_INDENT`] or more (or fenced: `crate::text::code`) is a code block, unless it reads as
//! prose (an indented note or list item: long wrapped lines of words ending a sentence; never
//! a run opening with a comment, `#` or `//`). An interactive session (`>>>`) is code wherever
//! it starts. A code block keeps its lines, the
//! program's printed output included, and is only ever quoted whole.
//!
//! A definition list as manuals print it (a short line naming a command or option, such as
//! `q [EXIT-CODE]` or `-n` / `--quiet`, then its description) gives a [`Block::Term`] before
//! the description's prose.

use std::borrow::Cow;

use unicode_segmentation::UnicodeSegmentation;

use crate::text::code::{indent, is_session, CODE_INDENT};

/// A piece of a chunk, in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A paragraph of prose, re-flowed and cut into sentences.
    Prose(Vec<String>),
    /// A code block (example, session, literal output) with its common indentation removed.
    Code(String),
    /// The lines naming the entry of a definition list (a command, an option and its
    /// aliases); the description is the next block.
    Term(Vec<String>),
}

/// Longest line, in characters, that can name a definition-list entry.
pub const MAX_TERM_CHARS: usize = 40;

/// The leading lines of a paragraph that name a definition-list entry: at most three short
/// lines of at most three words, none ending a sentence, followed by a longer description line
/// that starts with a capital letter, a parenthesis (`(quit) Exit sed …`) or emphasis markup.
/// `None` when the paragraph is not such an entry.
fn term_lines(lines: &[&str]) -> Option<usize> {
    let is_term = |l: &str| {
        let t = l.trim();
        indent(l) < CODE_INDENT
            && !t.is_empty()
            && t.chars().count() <= MAX_TERM_CHARS
            && t.split_whitespace().count() <= 3
            && !t.ends_with(['.', ',', ';', ':', '!', '?'])
            // a line that says its own value after a colon ("Founded: 2016") names nothing
            && !t.contains(": ")
    };
    let n = lines.iter().take(3).take_while(|l| is_term(l)).count();
    let description = lines.get(n)?;
    let starts_capital =
        description.trim_start().chars().next().is_some_and(|c| c.is_uppercase() || "(_*`'\"".contains(c));
    let longer = description.trim().chars().count() > lines[..n].iter().map(|l| l.trim().chars().count()).max()? + 10;
    // a description is a sentence: lines that each state one short fact ("Founded: 2016") are
    // not a name and its description but lines of their own
    let sentence = lines[n..].last().is_some_and(|l| ends_sentence(l));
    (n > 0 && starts_capital && longer && sentence && indent(description) < CODE_INDENT).then_some(n)
}

/// Whether `text` ends a sentence (closing brackets and quotes aside).
fn ends_sentence(text: &str) -> bool {
    text.trim_end().trim_end_matches([')', '"', '\'', '»', '”']).ends_with(['.', '!', '?', '。', '！', '？'])
}

/// Characters from which a line that does not end a sentence is taken to be wrapped: a text
/// wrapped to a width fills its lines to near it (72–80 characters), while lines written one
/// by one — a record's fields, a table's rows, an address — are as long as what they say.
pub const WRAPPED_LINE_CHARS: usize = 60;

/// Whether the lines of a paragraph stand as written: more than one, and none continuing the
/// one before it — the next line opens with a lower-case letter, or the line runs to a
/// wrapping width ([`WRAPPED_LINE_CHARS`]) without ending a sentence. Such lines are cut into
/// sentences one by one and quoted as lines.
pub fn kept_lines(lines: &[&str]) -> bool {
    let continues = |(line, next): (&str, &str)| {
        let next_lower = next.trim_start().chars().next().is_some_and(char::is_lowercase);
        let filled = line.trim().chars().count() >= WRAPPED_LINE_CHARS && !ends_sentence(line);
        next_lower || filled
    };
    lines.len() > 1 && !lines.windows(2).map(|w| (w[0], w[1])).any(continues)
}

/// The lines of a paragraph as its units: a list's items (each item's wrapped lines joined
/// after its marker), or the paragraph's lines when they stand as written ([`kept_lines`]);
/// `None` for a paragraph of wrapped prose.
pub fn line_units(lines: &[&str]) -> Option<Vec<String>> {
    if lines.first().is_some_and(|l| list_item(l)) {
        let mut out: Vec<String> = Vec::new();
        for line in lines {
            match out.last_mut() {
                Some(item) if !list_item(line) => {
                    item.push(' ');
                    item.push_str(line.trim());
                }
                _ => out.push(line.trim().to_string()),
            }
        }
        return Some(out);
    }
    kept_lines(lines).then(|| lines.iter().map(|l| l.trim().to_string()).collect())
}

/// The sentences of a paragraph's units ([`line_units`]): each unit cut on its own, so that no
/// sentence spans two items or two lines; `None` for wrapped prose.
fn unit_sentences(lines: &[&str]) -> Option<Vec<String>> {
    let units = line_units(lines)?;
    Some(units.iter().flat_map(|u| sentences(&[u.as_str()])).collect())
}

/// Whether a line starts a list item (`* `, `- `, `• `, `1. `, `a. `).
pub fn list_item(line: &str) -> bool {
    let first = line.trim_start();
    ["* ", "- ", "• "].iter().any(|m| first.starts_with(m))
        || first
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.len() <= 2 && n.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// Whether a line opens with a comment marker of a script or program (`#`, `//`): the
/// comments of an example are part of its code, however much they read like sentences.
fn comment(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with('#') || t.starts_with("//")
}

/// Whether indented lines are prose after all: wrapped lines of words that end a sentence, or a
/// list item; never lines of a session or a run opening with a comment.
fn reads_as_prose(lines: &[&str]) -> bool {
    let text = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
    let list_item = lines.first().is_some_and(|l| list_item(l));
    let words = text.split_whitespace().count();
    let letters = text.chars().filter(|c| c.is_alphabetic()).count();
    let nonspace = text.chars().filter(|c| !c.is_whitespace()).count().max(1);
    let wordy = letters * 10 >= nonspace * 8 && words >= lines.len() * 6;
    let ends = text.trim_end_matches(')').ends_with(['.', '!', '?', ':', '。', '！', '？']);
    let code = lines.iter().any(|l| is_session(l)) || lines.first().is_some_and(|l| comment(l));
    !code && (list_item || (wordy && ends))
}

/// Re-flows prose lines and cuts them into sentences (Unicode rules end a sentence at every
/// line break, so line breaks become spaces first), without emphasis marks ([`unemphasize`])
/// or footnote references ([`unreferenced`]).
fn sentences(lines: &[&str]) -> Vec<String> {
    let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).map(unreferenced).collect();
    let text = unemphasize(&words).join(" ");
    text.unicode_sentences().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

/// `word` without the footnote reference a plain-text manual glues to its punctuation ("was
/// removed.(1)": "was removed."), which would otherwise open the next sentence ("1) Then …").
fn unreferenced(word: &str) -> &str {
    let Some(open) = word.strip_suffix(')').and_then(|w| w.rfind('(')) else { return word };
    let number = &word[open + 1..word.len() - 1];
    let after_mark = word[..open].ends_with(['.', ',', ';', ':', '!', '?']);
    if after_mark && !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
        &word[..open]
    } else {
        word
    }
}

/// Characters that may stand outside an emphasis mark (`(_hold_)`, `_space_.`).
const AROUND_MARK: &[char] = &['(', ')', '"', '\'', ',', '.', ';', ':', '!', '?'];

/// Most words one emphasis spans.
const EMPHASIS_WORDS: usize = 8;

/// `words` without the emphasis marks of plain-text manuals (Info writes `@emph{hold}` as
/// `_hold_`): a word opening with one `_` before a letter, and the nearest word from it closing
/// with one `_` after a letter or digit (at most [`EMPHASIS_WORDS`] in all), lose those marks, so that "the auxiliary _hold_ space"
/// reads "the auxiliary hold space". Identifiers keep theirs (`__init__`, `_private` with no
/// closing mark, `snake_case`).
fn unemphasize<'w>(words: &[&'w str]) -> Vec<Cow<'w, str>> {
    let split = |w: &'w str| {
        let body = w.trim_start_matches(AROUND_MARK);
        let lead = &w[..w.len() - body.len()];
        let inner = body.trim_end_matches(AROUND_MARK);
        (lead, inner, &body[inner.len()..])
    };
    let opens = |w: &'w str| split(w).1.strip_prefix('_').is_some_and(|r| r.starts_with(char::is_alphabetic));
    let closes = |w: &'w str| split(w).1.strip_suffix('_').is_some_and(|r| r.ends_with(char::is_alphanumeric));
    let mut out: Vec<Cow<'w, str>> = words.iter().map(|w| Cow::Borrowed(*w)).collect();
    let mut i = 0;
    while i < words.len() {
        let reach = words.len().min(i + EMPHASIS_WORDS);
        let end = if opens(words[i]) { (i..reach).find(|&j| closes(words[j])) } else { None };
        let Some(end) = end else {
            i += 1;
            continue;
        };
        let (lead, inner, trail) = split(words[i]);
        let inner = &inner[1..];
        let inner = if end == i { &inner[..inner.len() - 1] } else { inner };
        out[i] = Cow::Owned(format!("{lead}{inner}{trail}"));
        if end > i {
            let (lead, inner, trail) = split(words[end]);
            out[end] = Cow::Owned(format!("{lead}{}{trail}", &inner[..inner.len() - 1]));
        }
        i = end + 1;
    }
    out
}

/// Removes the indentation the lines have in common.
fn dedent(lines: &[&str]) -> String {
    let common = lines.iter().filter(|l| !l.trim().is_empty()).map(|l| indent(l)).min().unwrap_or(0);
    let cut = |l: &str| {
        let mut taken = 0;
        let start = l.char_indices().find(|(_, c)| {
            if taken >= common || !c.is_whitespace() {
                return true;
            }
            taken += if *c == '\t' { 4 } else { 1 };
            false
        });
        start.map_or("", |(i, _)| &l[i..]).trim_end().to_string()
    };
    lines.iter().map(|l| cut(l)).collect::<Vec<_>>().join("\n")
}

/// Pushes the runs of one paragraph: prose lines and code lines alternate.
fn push_paragraph(out: &mut Vec<Block>, paragraph: &str) {
    let mut lines: Vec<&str> = paragraph.lines().filter(|l| !l.trim().is_empty()).collect();
    if let Some(n) = term_lines(&lines) {
        out.push(Block::Term(lines[..n].iter().map(|l| l.trim().to_string()).collect()));
        lines.drain(..n);
    }
    // a list item with a hanging indent is prose throughout; a list's items and lines that
    // stand as written are cut one by one
    let indented = lines.iter().any(|l| crate::text::code::is_code_line(l));
    let listed = lines.first().is_some_and(|l| list_item(l));
    if !lines.iter().any(|l| is_session(l)) && (listed || !indented) {
        if let Some(s) = unit_sentences(&lines) {
            out.push(Block::Prose(s));
            return;
        }
    }
    let mut i = 0;
    while i < lines.len() {
        let code = crate::text::code::is_code_line;
        let start = i;
        let is_code = code(lines[i]);
        // a session's output is not indented in every source: once in a session, stay in it
        let session = is_session(lines[i]);
        while i < lines.len() && (code(lines[i]) == is_code || (session && !lines[i].trim().is_empty())) {
            i += 1;
        }
        let run = &lines[start..i];
        if is_code && !reads_as_prose(run) {
            out.push(Block::Code(dedent(run)));
        } else {
            let s = sentences(run);
            if !s.is_empty() {
                out.push(Block::Prose(s));
            }
        }
    }
}

/// How many sentences [`parse`] cuts the prose lines of `text` (one paragraph) into.
pub fn sentence_count(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    unit_sentences(&lines).unwrap_or_else(|| sentences(&lines)).len()
}

/// The blocks of a chunk's text, in order.
pub fn parse(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    for paragraph in crate::text::code::unfence(text).split("\n\n") {
        push_paragraph(&mut out, paragraph);
    }
    // Adjacent code runs (an example, a blank line, its output) are one block.
    let mut merged: Vec<Block> = Vec::with_capacity(out.len());
    for b in out {
        match (merged.last_mut(), b) {
            (Some(Block::Code(prev)), Block::Code(next)) => {
                prev.push_str("\n\n");
                prev.push_str(&next);
            }
            (_, b) => merged.push(b),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_footnote_reference_stays_out_of_the_next_sentence() {
        let b = parse("The newline is added back if it was removed.(1)  Then the next\ncycle starts, as f(1) says.");
        let want = ["The newline is added back if it was removed.", "Then the next cycle starts, as f(1) says."];
        assert_eq!(b, [Block::Prose(want.map(String::from).to_vec())]);
    }

    #[test]
    fn indented_lines_are_code_and_prose_is_cut_into_sentences() {
        let text = "To create one, run the module\nwith the path:\n\n   python3 -m venv tutorial-env\n\nThis \
                    creates a directory. It also makes\nsubdirectories.";
        let b = parse(text);
        assert_eq!(b.len(), 3, "{b:?}");
        assert_eq!(b[0], Block::Prose(vec!["To create one, run the module with the path:".into()]));
        assert_eq!(b[1], Block::Code("python3 -m venv tutorial-env".into()));
        assert_eq!(
            b[2],
            Block::Prose(vec!["This creates a directory. ".trim().into(), "It also makes subdirectories.".into()])
        );
    }

    #[test]
    fn a_paragraph_mixing_prose_and_code_is_split_and_output_stays_with_its_code() {
        let text =
            "Print the input in canonical form.\n     $ echo 1 | sed p\n     1\n     1\n\n     $ seq 2\n     1\n     2";
        let b = parse(text);
        assert_eq!(b.len(), 2, "{b:?}");
        assert_eq!(b[1], Block::Code("$ echo 1 | sed p\n1\n1\n\n$ seq 2\n1\n2".into()));
    }

    #[test]
    fn indented_notes_and_list_items_are_prose() {
        let note = "   This is an indented note with enough words on each line to read\n   as prose and it \
                    ends like a sentence does.";
        assert!(matches!(parse(note)[0], Block::Prose(_)));
        let item = "  1. sed starts by reading the first line into the pattern space\n     and goes on.";
        assert!(matches!(parse(item)[0], Block::Prose(_)));
        assert!(matches!(parse(">>> x = 1\n>>> x\n1")[0], Block::Code(_)));
    }

    #[test]
    fn an_example_s_comments_are_code_although_they_read_as_prose() {
        let text = "This script counts words.\n\n     #!/bin/sh\n\n     # count every word of the input, one per \
                    line, then print the total.\n\n     # split on blanks\n     tr -s ' ' '\\n' | wc -l";
        let b = parse(text);
        assert_eq!(b.len(), 2, "{b:?}");
        assert!(matches!(&b[1], Block::Code(c) if c.starts_with("#!/bin/sh\n\n# count every word")), "{b:?}");
    }

    #[test]
    fn definition_list_entries_name_their_term() {
        let b = parse("-n\n--quiet\nBy default, sed prints out the pattern space at the end of each\ncycle.");
        assert_eq!(b[0], Block::Term(vec!["-n".into(), "--quiet".into()]));
        assert_eq!(
            b[1],
            Block::Prose(vec!["By default, sed prints out the pattern space at the end of each cycle.".into()])
        );
        let b = parse("q [EXIT-CODE]\nExit sed without processing any more commands or input.");
        assert_eq!(b[0], Block::Term(vec!["q [EXIT-CODE]".into()]));
        // wrapped prose whose first line happens to be short is not an entry
        assert!(matches!(
            parse("Floating point\nnumbers are fractions in hardware, as shown below.")[0],
            Block::Prose(_)
        ));
    }

    #[test]
    fn lines_written_one_by_one_stay_lines_and_each_is_a_sentence() {
        let profile = "Company: Acme Tools Ltd\nFounded: 2016\nLocation: Leeds, United Kingdom\nIndustry: Garden tools";
        let want =
            ["Company: Acme Tools Ltd", "Founded: 2016", "Location: Leeds, United Kingdom", "Industry: Garden tools"];
        assert_eq!(parse(profile), [Block::Prose(want.map(String::from).to_vec())]);
        assert_eq!(sentence_count(profile), 4);
        let short = "Company: Acme\nFounded: 2016\nLocation: Leeds\nIndustry: Garden tools and their repair.";
        assert!(matches!(&parse(short)[..], [Block::Prose(s)] if s.len() == 4), "{:?}", parse(short));
        // a table's rows too (its rule, without a letter, says nothing to embed)
        let table = "| Plan | Price |\n| --- | --- |\n| Starter | £29 |";
        assert_eq!(parse(table), [Block::Prose(vec!["| Plan | Price |".into(), "| Starter | £29 |".into()])]);
        // wrapped prose is re-flowed: a line opening in lower case, or one filled to a width
        let wrapped = "The lamp of the lighthouse is visible from the harbour and from\nthe open sea. It turns.";
        assert_eq!(
            parse(wrapped),
            [Block::Prose(vec![
                "The lamp of the lighthouse is visible from the harbour and from the open sea.".into(),
                "It turns.".into()
            ])]
        );
        let filled = "Every keeper of the lamp writes the weather in the log twice a\nDay, at dawn and at dusk.";
        assert_eq!(parse(filled).len(), 1);
        assert!(matches!(&parse(filled)[0], Block::Prose(s) if s.len() == 1), "{:?}", parse(filled));
    }

    #[test]
    fn a_list_s_items_are_cut_apart() {
        let list = "- Shopify\n- WooCommerce\n- Xero accounting, with\n  its invoices";
        let want = ["- Shopify", "- WooCommerce", "- Xero accounting, with its invoices"];
        assert_eq!(parse(list), [Block::Prose(want.map(String::from).to_vec())]);
        assert_eq!(sentence_count(list), 3);
    }

    #[test]
    fn emphasis_marks_are_dropped_and_identifiers_keep_their_underscores() {
        let b = parse(
            "Two buffers: the active _pattern_ space, and the auxiliary (_hold_) space.\n\
                       Use it _with great care_. Call __init__ or _private, or snake_case_name.",
        );
        let Block::Prose(s) = &b[0] else { panic!("{b:?}") };
        assert_eq!(s[0], "Two buffers: the active pattern space, and the auxiliary (hold) space.");
        assert_eq!(s[1], "Use it with great care.");
        assert_eq!(s[2], "Call __init__ or _private, or snake_case_name.");
    }

    #[test]
    fn a_fenced_block_is_one_code_block_with_its_blank_lines() {
        let b = parse("Run this:\n\n```sh\nsed -n p\n\nsed -n P\n```\n\nBoth print.");
        assert_eq!(b[1], Block::Code("sed -n p\n\nsed -n P".into()), "{b:?}");
        assert!(matches!(&b[2], Block::Prose(s) if s[0] == "Both print."), "{b:?}");
    }
}
