//! Printed pages of a text: a form feed (U+000C, the plain-text page break that `pdftotext`
//! also writes) on a line of its own between two pages. PDF extraction joins its pages so
//! (`ingest::extract`), and a text entry holding form feeds has pages too. The chunker reads
//! the line as blank and packs no chunk over it, so a chunk lies on one page, which
//! [`first_pages`] finds.

/// The form feed that marks a page break.
pub const PAGE_BREAK_CHAR: char = '\u{c}';

/// The page break between two pages of extracted text: a blank line, a form feed alone on its
/// line, a blank line.
pub const PAGE_BREAK: &str = "\n\n\u{c}\n\n";

/// Characters of a chunk's opening looked for in the text to place it.
const PROBE_CHARS: usize = 48;

/// Bytes after the previous chunk's opening searched for the next one's (chunks are far
/// shorter; the bound keeps a text of many unfound chunks linear).
const WINDOW_BYTES: usize = 64 * 1024;

/// The 1-based page on which each of `chunks` (in order, cut from `text`) begins; `None` for
/// every chunk when `text` has no page break. A chunk whose opening is not found verbatim
/// (the chunker reflowed it) takes the page where the previous one was found.
pub fn first_pages<'a>(text: &str, chunks: impl Iterator<Item = &'a str>) -> Vec<Option<u32>> {
    let paged = text.contains(PAGE_BREAK_CHAR);
    // where the last chunk found begins, its page, and where the search for the next one starts
    let (mut found, mut page, mut from) = (0, 1, 0);
    chunks
        .map(|chunk| {
            let probe: String = chunk.trim().chars().take(PROBE_CHARS).collect();
            if let Some(at) = text[from..window_end(text, from)].find(probe.as_str()).filter(|_| !probe.is_empty()) {
                page += text[found..from + at].matches(PAGE_BREAK_CHAR).count() as u32;
                (found, from) = (from + at, from + at + probe.len());
            }
            paged.then_some(page)
        })
        .collect()
}

/// The end of the search window from `from`: [`WINDOW_BYTES`] on, at a character boundary.
fn window_end(text: &str, from: usize) -> usize {
    let mut end = (from + WINDOW_BYTES).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_chunk_is_placed_on_the_page_it_begins_on() {
        let text = ["One.\n\nTwo.", "Three.", "Four."].join(PAGE_BREAK);
        let pages = first_pages(&text, ["One.", "Two.", "Three.", "Four."].into_iter());
        assert_eq!(pages, vec![Some(1), Some(1), Some(2), Some(3)]);
        let reflowed = first_pages(&text, ["One.", "Thr ee.", "Four."].into_iter());
        assert_eq!(reflowed, vec![Some(1), Some(1), Some(3)], "a chunk not found keeps the last page found");
        assert_eq!(first_pages("One.\n\nTwo.", ["One.", "Two."].into_iter()), vec![None, None]);
    }

    #[test]
    fn the_chunker_packs_no_chunk_over_a_page_break() {
        let text = ["Short first page.", "Short second page.\n\nIts second paragraph."].join(PAGE_BREAK);
        let chunks = crate::text::chunk::chunk("Doc", &text);
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, vec!["Short first page.", "Short second page.\n\nIts second paragraph."]);
        assert_eq!(first_pages(&text, texts.into_iter()), vec![Some(1), Some(2)]);
    }

    #[test]
    fn a_repeated_opening_is_found_after_the_previous_chunk() {
        let text = ["Note.", "Note.", "Other."].join(PAGE_BREAK);
        assert_eq!(first_pages(&text, ["Note.", "Note."].into_iter()), vec![Some(1), Some(2)]);
        assert_eq!(first_pages(&text, ["Note.", "Other."].into_iter()), vec![Some(1), Some(3)]);
    }
}
