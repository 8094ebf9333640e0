//! Links that open a web page scrolled to the words a reply quotes: a URL text fragment
//! (`#:~:text=start,end`, WICG "Text Fragments", supported by Chromium, Safari and Firefox;
//! a browser without it opens the page at its top).
//!
//! The quoted words are the source's paragraphs that the reply repeats verbatim (the embedded
//! reader's excerpt, or an upstream model's quotation); a reply that repeats none of them links
//! to the source's opening words. Only rendered words go into the directive: the lines of code
//! blocks and the list and heading markers the extracted text keeps are not looked for.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Words of the quote's opening (and of its end) that the directive names.
const EDGE_WORDS: usize = 6;

/// What a text directive's terms percent-encode: everything but letters, digits and the
/// characters the URL fragment keeps as they are (`-`, `,` and `&` are the directive's own
/// syntax and stay encoded).
const TERM: &AsciiSet = &NON_ALPHANUMERIC.remove(b'.').remove(b'_').remove(b'~').remove(b'!').remove(b'\'');

/// `page` (a web page's URL) with a text directive for the part of `content` (the source's
/// text) that `reply` quotes, or for the opening of `content` when it quotes none; without a
/// directive when `content` has no words to name. A fragment the URL already has stays before
/// the directive; credentials in it are dropped (the link is shown to visitors); a URL that does
/// not parse is returned as it is.
pub fn link(page: &str, content: &str, reply: &str) -> String {
    let Ok(mut url) = url::Url::parse(page) else { return page.to_string() };
    // a URL that cannot hold credentials has none to drop
    let _ = (url.set_username(""), url.set_password(None));
    if let Some(directive) = directive(content, reply) {
        let fragment = format!("{}:~:text={directive}", url.fragment().unwrap_or(""));
        url.set_fragment(Some(&fragment));
    }
    url.to_string()
}

/// The text directive's value (`start,end` or one term) for [`link`].
fn directive(content: &str, reply: &str) -> Option<String> {
    let said = words(reply).join(" ");
    let quoted: Vec<&str> = paragraphs(content).filter(|p| is_quoted(p, &said)).collect();
    let (first, last) = match (quoted.first(), quoted.last()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => paragraphs(content).find(|p| !words(p).is_empty()).map(|p| (p, p))?,
    };
    let (start, end) = (words(first), words(last));
    // one term when the opening already reaches the end (a short quote)
    if first == last && start.len() <= 2 * EDGE_WORDS {
        return Some(encode(&start));
    }
    let start_words = &start[..start.len().min(EDGE_WORDS)];
    let end_words = &end[end.len().saturating_sub(EDGE_WORDS)..];
    Some(format!("{},{}", encode(start_words), encode(end_words)))
}

/// The paragraphs of `text` (blank-line separated, trimmed), without empty ones.
fn paragraphs(text: &str) -> impl Iterator<Item = &str> {
    text.split("\n\n").map(str::trim).filter(|p| !p.is_empty())
}

/// Whether the reply's rendered words (`said`, joined by spaces) repeat those of paragraph `p`
/// of the source, and `p` has some.
fn is_quoted(p: &str, said: &str) -> bool {
    let words = words(p);
    !words.is_empty() && said.contains(&words.join(" "))
}

/// The rendered words of paragraph `p`: its prose lines (not a code block's), without the
/// list and heading markers of extracted text.
fn words(p: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in p.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || line.starts_with("    ") || line.starts_with('\t') {
            continue;
        }
        let words = line.split_whitespace();
        out.extend(words.skip_while(|w| is_marker(w)));
    }
    out
}

/// A list or heading marker of extracted text (`-`, `*`, `#`, `>`, `1.`): no letter or digit
/// but for a numbered item's number.
fn is_marker(word: &str) -> bool {
    let number = word.strip_suffix('.').or_else(|| word.strip_suffix(')')).unwrap_or(word);
    word.chars().all(|c| !c.is_alphanumeric()) || (!number.is_empty() && number.chars().all(|c| c.is_ascii_digit()))
}

/// `words` joined by spaces and percent-encoded as one term of a text directive.
fn encode(words: &[&str]) -> String {
    utf8_percent_encode(&words.join(" "), TERM).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "Intro paragraph of the page.\n\n- The moonberry shrub needs acid soil with a pH of 4.5 and \
                        flowers only after a cold winter.\n\nPick moonberries in late October, when they turn silver.";

    #[test]
    fn the_link_names_the_quoted_paragraphs_first_and_last_words() {
        let reply = "The closest passage I have:\n\nThe moonberry shrub needs acid soil with a pH of 4.5 and flowers \
                     only after a cold winter.\n\nPick moonberries in late October, when they turn silver.\n\n(From: Garden)";
        let link = link("https://example.com/garden", PAGE, reply);
        assert_eq!(
            link,
            "https://example.com/garden#:~:text=The%20moonberry%20shrub%20needs%20acid%20soil,\
             late%20October%2C%20when%20they%20turn%20silver."
        );
    }

    #[test]
    fn a_short_quote_is_one_term_and_an_unquoting_reply_links_the_opening() {
        let reply = "Pick moonberries in late October, when they turn silver.";
        assert_eq!(
            link("https://example.com/g#harvest", PAGE, reply),
            "https://example.com/g#harvest:~:text=Pick%20moonberries%20in%20late%20October%2C%20when%20they%20turn%20silver."
        );
        assert_eq!(
            link("https://example.com/g", PAGE, "Moonberries like acid soil."),
            "https://example.com/g#:~:text=Intro%20paragraph%20of%20the%20page."
        );
        assert_eq!(link("https://example.com/g", "```\ncode()\n```", "x"), "https://example.com/g");
        assert_eq!(
            link("https://ann:secret@example.com/g", "Words.", "x"),
            "https://example.com/g#:~:text=Words.",
            "credentials are not shown to visitors"
        );
    }

    #[test]
    fn code_lines_and_markers_are_not_named() {
        let p = "1. Run the tool:\n\n    tool --fast\n\n```\nmore code\n```\n# Heading words";
        assert_eq!(words(p), vec!["Run", "the", "tool:", "Heading", "words"]);
        assert!(is_marker("-") && is_marker("12.") && is_marker("3)") && !is_marker("v1.") && !is_marker("a"));
    }
}
