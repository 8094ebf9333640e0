//! The question a message asks when a client wraps it in context of its own.
//!
//! Bots and integrations often send the user's question after what they know of the user or
//! the conversation, the question introduced by a label of their own:
//!
//! ```text
//! Context about the user: Name: Ann, plan: pro.
//!
//! User's query: "Which brand makes the Glowmax headlamp?"
//! ```
//!
//! Retrieval and the embedded reader match the question's words against the knowledge base, so
//! the context's words (a name, a plan) would count as part of what is asked. [`asked`] finds
//! the final labelled part by its shape alone, in any language: no list of label words, which
//! every client writes differently ("Question", "User's query", "Frage", "質問"). A routed
//! model still reads the whole message (the context may matter to a model that can use it), and
//! the history keeps it as sent.

/// Most words a label has ("Question", "User's query", "The user asks").
pub const MAX_LABEL_WORDS: usize = 3;

/// Most characters looked at before a colon for its label: a longer run of words is no label,
/// and the bound keeps a long message with many colons cheap.
const MAX_LABEL_CHARS: usize = 64;

/// Quotation marks a question may be wrapped in, opening or closing.
const QUOTES: &[char] = &['"', '\'', '`', '“', '”', '„', '‘', '’', '«', '»', '「', '」', '『', '』'];

/// The question `message` asks: its final labelled part when it has one, quotes stripped; else
/// `message` itself.
///
/// A labelled part is a label followed by a colon (`:` then a space or a line break, or `：`)
/// and the rest of the message, which is a question (it ends with `?` or `？`, possibly inside
/// quotes). The label is 1 to [`MAX_LABEL_WORDS`] words of letters (an apostrophe, hyphen or
/// underscore within them allowed) opening a line or a sentence. Some text must come before the
/// label, the context it ends: a message that opens with its label ("Note: the server crashed,
/// why?") is the client's own words and stays whole. Of several labelled parts the last
/// wins, as the question is what a wrapper puts last.
pub fn asked(message: &str) -> &str {
    let text = message.trim_end();
    for (at, colon) in text.char_indices().rev().filter(|(_, c)| matches!(c, ':' | '：')) {
        let after = &text[at + colon.len_utf8()..];
        if colon == ':' && !after.starts_with(char::is_whitespace) {
            continue;
        }
        let Some(label) = label_start(&text[..at]) else { continue };
        if text[..label].trim().is_empty() {
            continue;
        }
        let question = unquoted(after.trim());
        if question.ends_with(['?', '？']) && question.chars().any(char::is_alphabetic) {
            return question;
        }
    }
    message
}

/// Where the label ending `before` (the text up to a colon) starts: 1 to [`MAX_LABEL_WORDS`]
/// words of letters that open a line or follow the end of a sentence; `None` when `before`
/// does not end with one.
fn label_start(before: &str) -> Option<usize> {
    let label_char = |c: char| c.is_alphabetic() || matches!(c, ' ' | '\t' | '\'' | '’' | '-' | '_');
    // the run of label characters ending `before`, and the label in it (its leading spaces aside)
    let run =
        before.char_indices().rev().take(MAX_LABEL_CHARS).take_while(|(_, c)| label_char(*c)).last().map(|(i, _)| i)?;
    let label = before[run..].trim_start();
    let words: Vec<&str> = label.split_whitespace().collect();
    if words.is_empty() || words.len() > MAX_LABEL_WORDS || !words.iter().all(|w| w.starts_with(char::is_alphabetic)) {
        return None;
    }
    let begin = before.len() - label.len();
    // the label opens its line, or a sentence: after a sentence's end (and its closing quote or
    // bracket) and a space; scripts written without spaces need none after their full stops
    let prior = before[..run].trim_end_matches(QUOTES).trim_end_matches([')', ']']);
    let opens = match before[..run].chars().next_back() {
        None | Some('\n' | '\r') => true,
        Some('。' | '！' | '？') => true,
        Some(_) => begin > run && prior.ends_with(['.', '!', '?', '。', '！', '？']),
    };
    opens.then_some(begin)
}

/// `text` without the quotation marks around it, when it opens and closes with one.
fn unquoted(text: &str) -> &str {
    match (text.chars().next(), text.chars().next_back()) {
        (Some(open), Some(close)) if text.chars().count() >= 2 && QUOTES.contains(&open) && QUOTES.contains(&close) => {
            text[open.len_utf8()..text.len() - close.len_utf8()].trim()
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_question_after_the_client_s_context_is_the_question() {
        let m = "Context about the user: Name: Ann, plan: pro.\n\nUser's query: \"Which brand makes the Glowmax headlamp?\"";
        assert_eq!(asked(m), "Which brand makes the Glowmax headlamp?");
        let m = "Context about the user: Name: Ann, plan: pro.\nQuestion: How do I reset it?";
        assert_eq!(asked(m), "How do I reset it?");
    }

    #[test]
    fn the_label_may_end_a_sentence_or_stand_on_its_own_line() {
        assert_eq!(asked("Ann is on the pro plan. The user asks: why is it red?"), "why is it red?");
        assert_eq!(asked("Plan: pro\nQuestion:\n  How do I reset it?  \n"), "How do I reset it?");
        assert_eq!(asked("Nutzerin: Ann.\nFrage: «Wie setze ich es zurück?»"), "Wie setze ich es zurück?");
        assert_eq!(asked("利用者：アン。\n質問：リセットの方法は？"), "リセットの方法は？");
        assert_eq!(asked("Plan: pro.\r\nQuestion: 'What is X?'"), "What is X?");
    }

    #[test]
    fn the_last_labelled_question_wins_and_its_own_colons_stay() {
        let m = "Earlier question: What is X?\nUser's query: What does the note: 'code 42' mean?";
        assert_eq!(asked(m), "What does the note: 'code 42' mean?");
    }

    #[test]
    fn a_label_cut_by_the_length_bound_is_no_label() {
        let long = format!("Context: Ann.\n{}: why?", "word ".repeat(20).trim_end());
        assert_eq!(asked(&long), long);
        let many = format!("{}\nQuestion: why?", "a: b. ".repeat(2000));
        assert_eq!(asked(&many), "why?");
    }

    #[test]
    fn messages_without_a_wrapped_question_stay_whole() {
        for m in [
            "How do I reset it?",
            "Note: the server crashed, why?",
            "  Question: How do I reset it?",
            "Context: Ann, pro.\nQuestion: I want to reset it.",
            "Context: Ann.\nCan we meet at 10:30?",
            "Context: Ann.\nSee https://example.com/a?",
            "Name: Ann, plan: why?",
            "Context: Ann.\nThe user asked me about it again: why?",
            "Context: Ann.\nQuestion: ?",
            "",
        ] {
            assert_eq!(asked(m), m, "{m:?}");
        }
    }
}
