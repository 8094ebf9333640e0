//! How plain text marks code, for chunking (a code block is never cut at a blank line inside
//! it) and for the embedded generator (a code block is quoted whole): lines indented by
//! [`CODE_INDENT`] or more, interactive sessions (`>>>`, `$ `), and Markdown fences (```` ``` ````
//! or `~~~` lines around the code).

/// Indentation (in spaces; a tab counts as 4) from which a line belongs to a code block.
pub const CODE_INDENT: usize = 3;

/// Indentation of `line`, in spaces (a tab counts as 4).
pub fn indent(line: &str) -> usize {
    line.chars().take_while(|c| c.is_whitespace()).map(|c| if c == '\t' { 4 } else { 1 }).sum()
}

/// Whether `line` is a prompt of an interactive session (`>>> …`, `$ …`).
pub fn is_session(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with(">>>") || t.starts_with("$ ")
}

/// Whether a non-blank `line` reads as code by its place: indented by [`CODE_INDENT`] or more,
/// or a session prompt.
pub fn is_code_line(line: &str) -> bool {
    indent(line) >= CODE_INDENT || is_session(line)
}

/// Whether `line` opens or closes a Markdown fenced code block (three or more backticks or
/// tildes, indented by less than four spaces).
pub fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    indent(line) < 4 && (t.starts_with("```") || t.starts_with("~~~"))
}

/// `text` with its fenced code blocks written as indented ones (fence lines dropped, the
/// code indented by four spaces, blank lines inside kept), so that one rule reads both. An
/// unclosed fence runs to the end of the text.
pub fn unfence(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("```") && !text.contains("~~~") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut fenced = false;
    for line in text.lines() {
        if is_fence(line) {
            fenced = !fenced;
            continue;
        }
        if fenced && !line.trim().is_empty() {
            out.push_str("    ");
        }
        out.push_str(line);
        out.push('\n');
    }
    out.truncate(out.trim_end_matches('\n').len());
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indented_lines_sessions_and_fences_are_code() {
        assert!(is_code_line("   import sys"));
        assert!(is_code_line("\tx = 1"));
        assert!(is_code_line("$ sed p"));
        assert!(!is_code_line("  two spaces of prose"));
        assert!(is_fence("```python") && is_fence("~~~") && !is_fence("    ```"));
        assert_eq!(unfence("Run:\n\n```sh\na\n\nb\n```\nDone."), "Run:\n\n    a\n\n    b\nDone.");
        assert_eq!(unfence("no fence"), "no fence");
    }
}
