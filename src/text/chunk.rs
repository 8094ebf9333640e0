//! Heading-aware chunking of plain text, Markdown and reStructuredText.
//!
//! The text is cut into sections at headings (`# Markdown` lines, and setext/RST titles: a line
//! underlined by a run of one punctuation character, levels in order of first use). Each
//! section's paragraphs are packed into chunks of at most [`TARGET_CHARS`]; a longer paragraph is
//! cut at sentence boundaries. A chunk's title is the document title plus its heading path,
//! joined by " › ", so a source can be named "Errors and Exceptions › Handling Exceptions".

use unicode_segmentation::UnicodeSegmentation;

/// Largest chunk, in characters (a chunk holds whole sentences, so it may exceed this only
/// when one sentence does). Chosen on the labelled set of `tests/retrieval` (600–2000 tried:
/// `examples/retrieval.rs`); 1600 keeps a tutorial section's explanation with its example.
pub const TARGET_CHARS: usize = 1600;

/// A piece of a document ready for the index.
#[derive(Debug, Clone, PartialEq)]
pub struct TextChunk {
    pub title: String,
    pub text: String,
}

const UNDERLINE_CHARS: &[char] = &['=', '-', '~', '^', '"', '*', '#', '+', '`', '\''];

fn underline_char(line: &str) -> Option<char> {
    let t = line.trim_end();
    let c = t.chars().next()?;
    (t.chars().count() >= 3 && UNDERLINE_CHARS.contains(&c) && t.chars().all(|x| x == c)).then_some(c)
}

fn markdown_heading(line: &str) -> Option<(usize, &str)> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    let rest = &line[hashes..];
    ((1..=6).contains(&hashes) && rest.starts_with(' ')).then(|| (hashes, rest.trim()))
}

/// Sections of `text`: (heading path, body text).
fn sections(text: &str) -> (Option<String>, Vec<(Vec<String>, String)>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut levels: Vec<char> = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let mut first_heading = None;
    let mut out: Vec<(Vec<String>, String)> = vec![(Vec::new(), String::new())];
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let next = lines.get(i + 1).copied().unwrap_or("");
        let heading = if let Some((level, t)) = markdown_heading(line) {
            i += 1;
            Some((level, t.to_string()))
        } else if !line.trim().is_empty() && underline_char(line).is_none() && underline_char(next).is_some() {
            let c = underline_char(next).unwrap_or('=');
            let level = levels.iter().position(|x| *x == c).unwrap_or_else(|| {
                levels.push(c);
                levels.len() - 1
            }) + 1;
            i += 2;
            Some((level, line.trim().to_string()))
        } else if underline_char(line).is_some() && line.trim_start() == line {
            i += 1; // an overline or a stray rule
            continue;
        } else {
            let body = &mut out.last_mut().expect("one section").1;
            body.push_str(line);
            body.push('\n');
            i += 1;
            None
        };
        if let Some((level, title)) = heading {
            first_heading.get_or_insert_with(|| title.clone());
            path.truncate(level.saturating_sub(1));
            path.push(title);
            out.push((path.clone(), String::new()));
        }
    }
    (first_heading, out)
}

/// Splits `text` into paragraphs (blank-line separated), each with inner whitespace kept.
fn paragraphs(text: &str) -> impl Iterator<Item = &str> {
    text.split("\n\n").map(|p| p.trim_matches('\n')).filter(|p| !p.trim().is_empty())
}

fn pack(paras: &mut dyn Iterator<Item = &str>, out: &mut Vec<String>) {
    let mut cur = String::new();
    for p in paras {
        let pieces: Vec<&str> =
            if p.chars().count() > TARGET_CHARS { p.split_sentence_bounds().collect() } else { vec![p] };
        let sep = if pieces.len() > 1 { "" } else { "\n\n" };
        for piece in pieces {
            if !cur.is_empty() && cur.chars().count() + piece.chars().count() > TARGET_CHARS {
                out.push(finished(std::mem::take(&mut cur)));
            }
            if !cur.is_empty() {
                cur.push_str(sep);
            }
            cur.push_str(piece);
        }
    }
    if !cur.trim().is_empty() {
        out.push(finished(cur));
    }
}

/// A chunk's text without surrounding blank lines and trailing space; the first line keeps its
/// indentation (an indented line is code to the generator, `generate::embedded::blocks`).
fn finished(text: String) -> String {
    text.trim_end().trim_start_matches(['\n', '\r']).to_string()
}

/// The title a document gets when none is given: its first heading, else its first line
/// (at most 80 characters).
pub fn generated_title(text: &str) -> String {
    let (first, _) = sections(text);
    let t = first.unwrap_or_else(|| text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string());
    t.chars().take(80).collect()
}

/// Chunks `text` of a document titled `doc_title`.
pub fn chunk(doc_title: &str, text: &str) -> Vec<TextChunk> {
    let (_, secs) = sections(text);
    let mut out = Vec::new();
    for (path, body) in secs {
        let mut names: Vec<&str> = vec![doc_title];
        names.extend(path.iter().map(String::as_str).filter(|h| *h != doc_title));
        let title = names.join(" › ");
        let mut texts = Vec::new();
        pack(&mut paragraphs(&body), &mut texts);
        out.extend(texts.into_iter().map(|text| TextChunk { title: title.clone(), text }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_become_chunk_titles() {
        let doc =
            "Errors\n======\n\nIntro text.\n\nSyntax Errors\n-------------\n\nParsing fails.\n\n## Deep\n\nMore.\n"; // ## is level 2, a sibling of the --- heading
        let c = chunk("Errors", doc);
        let titles: Vec<&str> = c.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles, vec!["Errors", "Errors › Syntax Errors", "Errors › Deep"]);
        assert_eq!(c[1].text, "Parsing fails.");
        assert_eq!(generated_title(doc), "Errors");
    }

    #[test]
    fn long_text_is_cut_under_the_target_at_sentences() {
        let sentence = "This sentence has a handful of words in it. ";
        let doc = sentence.repeat(200);
        let c = chunk("T", &doc);
        assert!(c.len() > 5);
        for p in &c {
            assert!(p.text.chars().count() <= TARGET_CHARS, "{}", p.text.len());
            assert!(p.text.ends_with('.'));
        }
        let joined: String = c.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join(" ");
        assert_eq!(joined.split_whitespace().count(), doc.split_whitespace().count());
    }

    #[test]
    fn plain_text_without_headings_is_one_section() {
        let c = chunk("Notes", "first line\nsecond line\n\nnext paragraph");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].title, "Notes");
        assert_eq!(generated_title("  \nfirst line\nx"), "first line");
    }
}
