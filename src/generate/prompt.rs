//! Prompt assembly for upstream models (OpenAI Chat Completions `messages`).
//!
//! The prompt is, in order:
//! 1. one `system` message: the replica's `llm.systemMessage` (or a default naming the replica),
//!    then who the replica is (name, type, purpose, greeting), how to use sources, and the
//!    retrieved sources numbered `[1]`, `[2]`, … each with its name;
//! 2. the recent turns of this user's conversation, oldest first, as many of the newest as fit
//!    in [`HISTORY_TOKEN_BUDGET`] tokens (by [`estimate_tokens`]);
//! 3. the question as a `user` message (with the image as an `image_url` part for vision routes).

use serde_json::{json, Value};

use super::{Generation, Persona, Turn};
use crate::store::records::SourceRef;

/// Tokens of earlier turns sent with a question at most.
pub const HISTORY_TOKEN_BUDGET: usize = 1024;

/// Tokens of a conversation's transcript sent to a model for its insights at most (the newest
/// messages that fit; `service::insights`).
pub const TRANSCRIPT_TOKEN_BUDGET: usize = 3072;

/// Estimated tokens of `text`: one per 4 bytes of UTF-8, rounded up, at least 1 for non-empty
/// text. That is the usual rule of thumb for English with BPE vocabularies (GPT, Llama, Qwen);
/// it is used for the history budget and for usage when a backend reports none.
pub fn estimate_tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// The turns of `newest_first` whose estimated tokens (plus 4 per turn for its framing) add up
/// to at most `budget`, returned oldest first. A turn that does not fit ends the window (no
/// gaps); the iterator is not consumed further, so a store scan stops there.
pub fn window(newest_first: impl IntoIterator<Item = Turn>, budget: usize) -> Vec<Turn> {
    let mut used = 0;
    let mut kept: Vec<Turn> = Vec::new();
    for t in newest_first {
        used += estimate_tokens(&t.content) + 4;
        if used > budget {
            break;
        }
        kept.push(t);
    }
    kept.reverse();
    kept
}

/// The system message: persona, instructions and numbered sources.
pub fn system_message(persona: &Persona, sources: &[SourceRef]) -> String {
    let mut s = match persona.system_message.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => format!("{m}\n\n"),
        None => String::new(),
    };
    let kind = if persona.kind.is_empty() { "character" } else { persona.kind.as_str() };
    s.push_str(&format!("You are {}, a {kind} replica.", persona.name));
    if let Some(p) = persona.purpose.as_deref().map(str::trim).filter(|p| !p.is_empty()) {
        s.push_str(&format!(" Your purpose: {p}"));
    }
    if !persona.greeting.trim().is_empty() {
        s.push_str(&format!("\nYou greet people with: \"{}\"", persona.greeting.trim()));
    }
    if sources.is_empty() {
        s.push_str("\n\nNo sources were found for this question; say so if you do not know the answer.");
        return s;
    }
    s.push_str(
        "\n\nAnswer from the numbered sources below when they are relevant and cite them as [1], [2]. \
         If they do not contain the answer, say that you do not know.\n\nSources:",
    );
    for (i, src) in sources.iter().enumerate() {
        s.push_str(&format!("\n\n[{}] {}\n{}", i + 1, src.name, src.content.trim()));
    }
    s
}

/// The `messages` array of a Chat Completions request for `g`; the image is attached only
/// when `vision` is set.
pub fn messages(g: &Generation, vision: bool) -> Vec<Value> {
    let mut out = vec![json!({"role": "system", "content": system_message(&g.persona, &g.sources)})];
    for t in &g.history {
        out.push(json!({"role": t.role, "content": t.content}));
    }
    let question = match (&g.image_url, vision) {
        (Some(url), true) => json!([
            {"type": "text", "text": g.question},
            {"type": "image_url", "image_url": {"url": url}},
        ]),
        _ => json!(g.question),
    };
    out.push(json!({"role": "user", "content": question}));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: &str, content: &str) -> Turn {
        Turn { role: role.into(), content: content.into() }
    }

    #[test]
    fn the_window_keeps_the_newest_turns_that_fit() {
        let turns = vec![turn("user", &"a".repeat(400)), turn("assistant", &"b".repeat(40)), turn("user", "c")];
        let w = window(turns.clone().into_iter().rev(), 30);
        assert_eq!(w, turns[1..].to_vec());
        assert!(window(turns.into_iter().rev(), 3).is_empty());
    }

    #[test]
    fn sources_are_numbered_with_their_names_after_the_system_message() {
        let persona = Persona {
            name: "Tutor".into(),
            kind: "character".into(),
            greeting: "Hi!".into(),
            purpose: Some("Teach Python".into()),
            system_message: Some("Be brief.".into()),
        };
        let src = |name: &str, content: &str| SourceRef {
            id: 1,
            score: 1.0,
            created_at: 0,
            name: name.into(),
            content: content.into(),
        };
        let s = system_message(&persona, &[src("Modules", "A module is a file."), src("Loops", "for x in y")]);
        assert!(s.starts_with("Be brief.\n\nYou are Tutor, a character replica. Your purpose: Teach Python"));
        assert!(s.contains("\n\n[1] Modules\nA module is a file.\n\n[2] Loops\nfor x in y"), "{s}");
        let g = Generation {
            persona,
            question: "What is a module?".into(),
            sources: vec![],
            history: vec![turn("user", "hello"), turn("assistant", "Hi!")],
            image_url: Some("https://example.org/a.png".into()),
            max_tokens: None,
        };
        let m = messages(&g, false);
        assert_eq!(m.len(), 4);
        assert_eq!(m[3], json!({"role": "user", "content": "What is a module?"}));
        assert_eq!(messages(&g, true)[3]["content"][1]["image_url"]["url"], json!("https://example.org/a.png"));
    }

    #[test]
    fn estimates_round_up() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcde"), 2);
    }
}
