//! Text rules of the messengerA bot: when a group message is addressed to the bot, and how a
//! long reply is cut into messages the platform accepts.

/// Longest message text the platform accepts, in UTF-16 code units.
pub const MESSAGE_LIMIT: usize = 4096;

/// Whether `text` mentions `mention` (`@handle`, compared case-insensitively as a whole word).
pub fn mentions(text: &str, mention: &str) -> bool {
    find_mention(text, mention).is_some()
}

fn find_mention(text: &str, mention: &str) -> Option<(usize, usize)> {
    let (hay, needle) = (text.to_lowercase(), mention.to_lowercase());
    if needle.len() < 2 || hay.len() != text.len() {
        // Lower-casing changed byte lengths (rare scripts): fall back to an exact search.
        return text.find(mention).map(|i| (i, i + mention.len())).filter(|(_, e)| word_end(text, *e));
    }
    let mut from = 0;
    while let Some(i) = hay[from..].find(&needle) {
        let (start, end) = (from + i, from + i + needle.len());
        if word_end(text, end) {
            return Some((start, end));
        }
        from = end;
    }
    None
}

fn word_end(text: &str, end: usize) -> bool {
    text[end..].chars().next().is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
}

/// `text` without the first mention of `mention`, trimmed; `text` trimmed when that leaves
/// nothing.
pub fn strip_mention(text: &str, mention: &str) -> String {
    match find_mention(text, mention) {
        Some((s, e)) => {
            let rest = format!("{}{}", &text[..s], &text[e..]);
            let rest = rest.trim().trim_start_matches([',', ':']).trim();
            if rest.is_empty() {
                text.trim().to_string()
            } else {
                rest.to_string()
            }
        }
        None => text.trim().to_string(),
    }
}

/// `text` cut into parts of at most `limit` UTF-16 code units, at a paragraph break, else a
/// line break, else a space, else anywhere (never inside a character). Empty text gives no part.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if utf16_len(rest) <= limit {
            parts.push(rest.to_string());
            break;
        }
        let hard = byte_index_at_utf16(rest, limit);
        let window = &rest[..hard];
        let cut = ["\n\n", "\n", " "]
            .iter()
            .find_map(|sep| window.rfind(sep).filter(|i| *i > hard / 2).map(|i| i + sep.len()))
            .unwrap_or(hard);
        let part = rest[..cut].trim_end();
        if !part.is_empty() {
            parts.push(part.to_string());
        }
        rest = rest[cut..].trim_start();
    }
    parts
}

fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// The largest char boundary of `s` whose prefix has at most `limit` UTF-16 units.
fn byte_index_at_utf16(s: &str, limit: usize) -> usize {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > limit {
            return i;
        }
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mention_is_a_whole_word_in_any_case() {
        assert!(mentions("hey @Docs_Bot, what is up?", "@docs_bot"));
        assert!(!mentions("hey @docs_bottle", "@docs_bot"));
        assert!(!mentions("no mention", "@docs_bot"));
        assert_eq!(strip_mention("@docs_bot what is BM25?", "@Docs_Bot"), "what is BM25?");
        assert_eq!(strip_mention("@docs_bot", "@docs_bot"), "@docs_bot");
    }

    #[test]
    fn long_text_is_split_at_breaks_under_the_limit() {
        let para = "word ".repeat(300); // 1500 chars
        let text = format!("{para}\n\n{para}\n\n{para}");
        let parts = split(&text, MESSAGE_LIMIT);
        assert_eq!(parts.len(), 2, "{:?}", parts.iter().map(|p| p.len()).collect::<Vec<_>>());
        assert!(parts.iter().all(|p| utf16_len(p) <= MESSAGE_LIMIT));
        let emoji = "😀".repeat(3000); // 6000 UTF-16 units, no spaces
        let parts = split(&emoji, MESSAGE_LIMIT);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| utf16_len(p) <= MESSAGE_LIMIT));
        assert_eq!(parts.concat(), emoji);
        assert!(split("  ", MESSAGE_LIMIT).is_empty());
    }
}
