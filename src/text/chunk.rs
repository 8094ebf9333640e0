//! Heading-aware chunking of plain text, Markdown and reStructuredText.
//!
//! The text is cut into sections at headings (`# Markdown` lines, and setext/RST titles: a line
//! underlined by a run of one punctuation character, levels in order of first use). Each
//! section's paragraphs are packed into chunks of at most [`TARGET_CHARS`]; a longer paragraph is
//! cut at sentence boundaries. A chunk's title is the document title plus its heading path,
//! joined by " › ", so a source can be named "Errors and Exceptions › Handling Exceptions".

use unicode_segmentation::UnicodeSegmentation;

use super::{code, pages};

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
    let mut fenced = false;
    while i < lines.len() {
        let line = lines[i];
        let next = lines.get(i + 1).copied().unwrap_or("");
        // a fenced block's lines are code, never headings
        let prose = !fenced && !code::is_fence(line);
        fenced ^= code::is_fence(line);
        let heading = if let Some((level, t)) = markdown_heading(line).filter(|_| prose) {
            i += 1;
            Some((level, t.to_string()))
        } else if prose && !line.trim().is_empty() && underline_char(line).is_none() && underline_char(next).is_some() {
            let c = underline_char(next).unwrap_or('=');
            let level = levels.iter().position(|x| *x == c).unwrap_or_else(|| {
                levels.push(c);
                levels.len() - 1
            }) + 1;
            i += 2;
            Some((level, line.trim().to_string()))
        } else if prose && underline_char(line).is_some() && line.trim_start() == line {
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

/// Splits `text` into paragraphs (blank-line separated), each with inner whitespace kept. A
/// code block is one paragraph although blank lines cut it (an example's `import` line, a
/// blank line, the rest): a paragraph that ends in code takes the next one when it starts with
/// code (indented or a session, [`code::is_code_line`]), as long as both fit in
/// [`TARGET_CHARS`]; a fenced block is never cut inside. The prose that announces a block
/// stays its own paragraph.
fn paragraphs(text: &str) -> impl Iterator<Item = &str> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let (mut start, mut offset, mut fenced) = (None::<usize>, 0, false);
    for line in text.split_inclusive('\n') {
        let blank = line.trim().is_empty();
        if blank && !fenced {
            spans.extend(start.take().map(|s| (s, offset)));
        } else if start.is_none() {
            start = Some(offset);
        }
        fenced ^= code::is_fence(line);
        offset += line.len();
    }
    spans.extend(start.map(|s| (s, offset)));
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (from, to) in spans {
        let continues = |(f, t): (usize, usize)| {
            let last = text[f..t].lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            let first = text[from..to].lines().next().unwrap_or("");
            code::is_code_line(last) && code::is_code_line(first) && text[f..to].chars().count() <= TARGET_CHARS
        };
        match merged.last_mut() {
            Some(prev) if continues(*prev) => prev.1 = to,
            _ => merged.push((from, to)),
        }
    }
    merged.into_iter().map(move |(f, t)| text[f..t].trim_matches('\n')).filter(|p| !p.trim().is_empty())
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
/// indentation (an indented line is code to the generator, `text::blocks`).
fn finished(text: String) -> String {
    text.trim_end().trim_start_matches(['\n', '\r']).to_string()
}

/// The title a document gets when none is given (the name its sources carry): its first
/// heading, else its first line; one longer than [`TITLE_CHARS`] is cut to its first words at a
/// word boundary and ends in `…` — never in the middle of a word ("The secret phrase is: RAINB").
pub fn generated_title(text: &str) -> String {
    let (first, _) = sections(text);
    let t = first.unwrap_or_else(|| text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string());
    if t.chars().count() <= TITLE_CHARS {
        return t;
    }
    let mut out = String::new();
    let mut len = 0;
    for word in t.split_whitespace() {
        let added = word.chars().count() + usize::from(len > 0);
        if len + added >= TITLE_CHARS {
            break;
        }
        if len > 0 {
            out.push(' ');
        }
        out.push_str(word);
        len += added;
    }
    if out.is_empty() {
        // One word longer than a title: nothing else to cut it at.
        out = t.chars().take(TITLE_CHARS - 1).collect();
    }
    out.truncate(out.trim_end_matches([',', ';', ':', '-', '–', '—']).len());
    out.push('…');
    out
}

/// The most characters of a generated title, `…` included.
pub const TITLE_CHARS: usize = 80;

/// What separates the names of a chunk's title: document title › heading › subheading.
pub const TITLE_SEPARATOR: &str = " › ";

/// The chunk's own (last) heading, from its title ([`chunk`]: "Errors › Handling Exceptions":
/// "Handling Exceptions"); the whole title when it has one name.
pub fn own_heading(title: &str) -> &str {
    title.rsplit(TITLE_SEPARATOR).next().unwrap_or(title)
}

/// Chunks `text` of a document titled `doc_title`; a chunk's title is its document's title and
/// its heading path, joined by [`TITLE_SEPARATOR`].
pub fn chunk(doc_title: &str, text: &str) -> Vec<TextChunk> {
    let (_, secs) = sections(text);
    let mut out = Vec::new();
    for (path, body) in secs {
        let mut names: Vec<&str> = vec![doc_title];
        names.extend(path.iter().map(String::as_str).filter(|h| *h != doc_title));
        let title = names.join(TITLE_SEPARATOR);
        let mut texts = Vec::new();
        // a chunk never runs over a page break: its page is the page it is on (`pages`)
        for page in body.split(pages::PAGE_BREAK_CHAR) {
            pack(&mut paragraphs(page), &mut texts);
        }
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
        assert_eq!((own_heading(titles[0]), own_heading(titles[1])), ("Errors", "Syntax Errors"));
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

    #[test]
    fn a_long_first_line_is_cut_at_a_word_boundary() {
        let text = "Remember this for the quiz tomorrow morning, it matters a lot. The secret phrase is: RAINBOW-42.";
        let title = generated_title(text);
        assert_eq!(title, "Remember this for the quiz tomorrow morning, it matters a lot. The secret…");
        assert!(title.chars().count() <= TITLE_CHARS);
        let one_word = "x".repeat(200);
        assert_eq!(generated_title(&one_word).chars().count(), TITLE_CHARS);
        assert_eq!(generated_title("Short enough: kept whole."), "Short enough: kept whole.");
    }

    #[test]
    fn a_code_block_with_blank_lines_stays_in_one_chunk_apart_from_its_announcement() {
        let intro = "Intro sentence of some length. ".repeat(40);
        let code =
            "   import sys\n\n   try:\n       f = open('myfile.txt')\n   except OSError as err:\n       print(err)";
        let doc = format!("{intro}\n\nIt is possible to handle exceptions:\n\n{code}\n\nAfter the code.\n");
        let c = chunk("T", &doc);
        let holding: Vec<&TextChunk> = c.iter().filter(|p| p.text.contains("import sys")).collect();
        assert_eq!(holding.len(), 1, "{c:#?}");
        assert!(holding[0].text.contains(code), "{c:#?}");
        // merged only with the code that continues it, not with the prose around it
        assert_eq!(paragraphs(&doc).find(|p| p.contains("import sys")), Some(code));
    }

    #[test]
    fn a_fenced_block_is_one_paragraph_and_holds_no_heading() {
        let doc = "Setup\n=====\n\nRun this:\n\n```sh\n# not a heading\n\necho hi\n```\n\nDone.\n";
        let c = chunk("Setup", doc);
        assert_eq!(c.len(), 1, "{c:#?}");
        assert_eq!(
            paragraphs(&c[0].text).collect::<Vec<_>>(),
            vec!["Run this:", "```sh\n# not a heading\n\necho hi\n```", "Done."]
        );
    }

    #[test]
    fn a_code_block_longer_than_the_target_is_cut_at_its_blank_lines() {
        let para = "   x = 1\n".repeat(100);
        let doc = format!("{para}\n{para}\n{para}");
        let c = chunk("T", &doc);
        assert_eq!(c.len(), 3, "{c:#?}");
        assert!(c.iter().all(|p| p.text.chars().count() <= TARGET_CHARS));
    }
}
