//! The curl walkthrough of `docs/walkthrough.md`, run as written: every `sh` block of the page,
//! in order, in one `bash` with `curl` and `python3`, against a real server started as the
//! README's first command starts it (`serve --demo`, the sample data, hybrid retrieval with the
//! test embedding model) on a loopback port. The only changes to the page's text are the base URL,
//! the demo key and `cargo run --release -q --` (the binary under test). Each answer is checked
//! against the comment under its command (`# {…}`): every field the comment shows is in the
//! answer (at any depth), `true`, `false`, `null` and texts as shown, `…` in a text standing for
//! any text. The README's first conversation must be the page's, word for word.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{Server, BIN};
use crate::embedding::real_model_dir;

const PAGE: &str = include_str!("../../docs/walkthrough.md");
const README: &str = include_str!("../../README.md");

/// What the test replaces in the page's commands: the demo key line, the base URL and the way a
/// checkout runs the binary.
const KEY_LINE: &str = "KEY=rpl_...   # printed by `serve --demo`";
const BASE: &str = "http://127.0.0.1:8080";
const CARGO_RUN: &str = "cargo run --release -q --";

/// The fenced blocks of `markdown` whose info string is `lang`, in order.
fn blocks(markdown: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match &mut current {
            None if line.trim_end() == format!("```{lang}") => current = Some(String::new()),
            Some(block) if line.trim_end() == "```" => {
                out.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    out
}

/// The script run for `blocks`: each answer comment (`# {…}`, continued on the comment lines
/// indented under it) becomes a marker line the output is split at. Returns the script and the
/// comments, in order.
fn script(blocks: &[String]) -> (String, Vec<String>) {
    let mut shapes: Vec<String> = Vec::new();
    let mut text = String::from("set -euo pipefail\ncurl() { command curl --max-time 60 \"$@\"; }\n");
    for block in blocks {
        let mut in_shape = false;
        for line in block.lines() {
            if let Some(rest) = line.strip_prefix("# {") {
                shapes.push(format!("{{{rest}"));
                text.push_str(&format!("echo; echo '@@@ {}'\n", shapes.len()));
                in_shape = true;
            } else if let (true, Some(more)) = (in_shape, line.strip_prefix("#  ")) {
                shapes.last_mut().expect("a shape").push_str(more.trim_start());
            } else {
                in_shape = false;
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    (text, shapes)
}

/// The constraints a shown answer puts on the real one: each `"field":` it shows, with `true`,
/// `false`, `null` or a text when that is its value (JSON escapes read as JSON reads them).
fn constraints(shape: &str) -> Vec<(String, Option<Value>)> {
    let mut out = Vec::new();
    let mut rest = shape;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('"') else { break };
        let name = &after[..end];
        rest = &after[end + 1..];
        let Some(value) = rest.strip_prefix(':') else { continue };
        let literal = ["true", "false", "null"].into_iter().find(|l| value.starts_with(l));
        let expected = match literal {
            Some(l) => Some(serde_json::from_str(l).expect("a literal")),
            None => match value.strip_prefix('"').and_then(|v| v.find('"').map(|e| &v[..e])) {
                Some(text) => {
                    rest = &value[text.len() + 2..];
                    let unescaped = serde_json::from_str(&format!("\"{text}\""));
                    Some(unescaped.unwrap_or_else(|_| Value::String(text.to_string())))
                }
                None => None,
            },
        };
        out.push((name.to_string(), expected));
    }
    out
}

/// Every value of the field `name`, at any depth of `v`.
fn values<'a>(v: &'a Value, name: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if k == name {
                    out.push(child);
                }
                values(child, name, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|child| values(child, name, out)),
        _ => {}
    }
}

/// Whether `real` is the text `shown`, in which each `…` stands for any text.
fn glob(shown: &str, real: &str) -> bool {
    let mut parts = shown.split('…');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = real.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether `actual` is what `expected` (from a shown answer) shows.
fn matches(expected: &Option<Value>, actual: &Value) -> bool {
    match (expected, actual) {
        (None, _) => true,
        (Some(Value::String(shown)), Value::String(real)) => glob(shown, real),
        (Some(shown), real) => shown == real,
    }
}

/// Checks one answer against the comment shown under its command.
fn check(shape: &str, answer: &str) {
    let answer: Value = serde_json::from_str(answer.trim())
        .unwrap_or_else(|e| panic!("the answer shown as `# {shape}` is not one JSON value ({e}): {answer}"));
    for (name, expected) in constraints(shape) {
        let mut found = Vec::new();
        values(&answer, &name, &mut found);
        assert!(!found.is_empty(), "`{name}`, shown in `# {shape}`, is not in the answer {answer}");
        assert!(
            found.iter().any(|v| matches(&expected, v)),
            "`{name}` is not {} as `# {shape}` shows: {answer}",
            expected.as_ref().map_or(String::new(), Value::to_string)
        );
    }
}

/// The demo organization's key, as `serve --demo` printed it on its first start.
fn demo_key(log: &str) -> String {
    let key = log.split_whitespace().find(|w| w.starts_with("rpl_"));
    key.unwrap_or_else(|| panic!("serve --demo printed no key:\n{log}")).to_string()
}

#[test]
fn the_readme_shows_the_walkthroughs_first_conversation() {
    let readme = blocks(README, "sh");
    let first = readme.iter().find(|b| b.contains("chat/completions")).expect("a conversation in the README");
    assert!(
        blocks(PAGE, "sh")[0].starts_with(first.as_str()),
        "the README's first conversation is not the start of docs/walkthrough.md's:\n{first}"
    );
}

#[test]
fn the_walkthrough_runs_as_written() {
    let model = real_model_dir();
    let server = Server::start_with(&["--demo", "--embedding-models", model.to_str().expect("a UTF-8 path")]);
    let key = demo_key(&server.dir().log());
    let base = server.url("");
    let base = base.trim_end_matches('/');
    let (mut text, shapes) = script(&blocks(PAGE, "sh"));
    for (shown, real) in [(KEY_LINE, format!("KEY={key}")), (BASE, base.to_string()), (CARGO_RUN, format!("'{BIN}'"))] {
        assert!(text.contains(shown), "docs/walkthrough.md no longer has `{shown}`, which this test replaces");
        text = text.replace(shown, &real);
    }
    assert!(shapes.len() >= 5, "docs/walkthrough.md shows {} answers", shapes.len());

    let work = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(&text).current_dir(work.path()).env("REPLICAD_DATA_DIR", server.dir().path());
    server.dir().apply_store(&mut cmd);
    let out = cmd.stdin(Stdio::null()).output().expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the walkthrough failed ({}):\n{stdout}\n{}\nserver log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        server.dir().log_tail()
    );
    let mut rest = stdout.as_ref();
    for (i, shape) in shapes.iter().enumerate() {
        let marker = format!("\n@@@ {}\n", i + 1);
        let (answer, after) = rest.split_once(&marker).unwrap_or_else(|| panic!("no answer for `# {shape}`: {stdout}"));
        check(shape, answer);
        rest = after;
    }
}

#[test]
fn a_shown_text_matches_with_any_text_for_each_ellipsis() {
    assert!(glob("rpl_…", "rpl_abc"));
    assert!(glob("…", ""));
    assert!(glob("…lamp…\n(From: Lamp)", "The closest passage I have:\n\nThe lamp\n(From: Lamp)"));
    assert!(!glob("…lamp…\n(From: Lamp)", "The lamp (From: Lighthouse)"));
    assert!(glob("exact", "exact"));
    assert!(!glob("exact", "exactly"));
    assert!(!glob("a…b…c", "a c b"));
    let shape = r#"{"success":true,"items":[{"role":"user","content":"x\ny…"}],"n":…}"#;
    let c = constraints(shape);
    let names: Vec<&str> = c.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["success", "items", "role", "content", "n"]);
    assert_eq!(c[3].1, Some(Value::String("x\ny…".into())));
}
