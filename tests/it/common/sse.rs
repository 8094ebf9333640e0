//! Reading server-sent events as a client does.

use serde_json::Value;

/// One event: its `event:` name (if any) and its data (the `data:` lines joined by `\n`).
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    /// The data as JSON (panics when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("event data is not JSON ({e}): {}", self.data))
    }
}

/// Parses a whole event-stream body; asserts every line is a field or a blank line.
pub fn parse(text: &str) -> Vec<SseEvent> {
    let mut out = Vec::new();
    let (mut event, mut data): (Option<String>, Vec<String>) = (None, Vec::new());
    for line in text.split('\n') {
        if line.is_empty() {
            if !data.is_empty() || event.is_some() {
                out.push(SseEvent { event: event.take(), data: data.join("\n") });
                data.clear();
            }
        } else if let Some(v) = line.strip_prefix("event: ") {
            event = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("data: ") {
            data.push(v.to_string());
        } else {
            panic!("unexpected line {line:?} in the event stream:\n{text}");
        }
    }
    assert!(data.is_empty() && event.is_none(), "the stream ends inside an event:\n{text}");
    out
}

/// The shape every replicad stream has: `delta` events, at most one `error`, one `message`,
/// then `[DONE]`. Returns (the joined deltas, the error's data if any, the message's data).
pub fn check_shape(events: &[SseEvent]) -> (String, Option<Value>, Value) {
    let n = events.len();
    assert!(n >= 2, "{events:?}");
    assert_eq!((events[n - 1].event.as_deref(), events[n - 1].data.as_str()), (None, "[DONE]"), "{events:?}");
    assert_eq!(events[n - 2].event.as_deref(), Some("message"), "{events:?}");
    let mut text = String::new();
    let mut error = None;
    for e in &events[..n - 2] {
        match e.event.as_deref() {
            Some("delta") => {
                assert!(error.is_none(), "a delta after the error: {events:?}");
                text.push_str(e.json()["delta"].as_str().expect("delta text"));
            }
            Some("error") => {
                assert!(error.is_none(), "two errors: {events:?}");
                error = Some(e.json());
            }
            other => panic!("unexpected event {other:?}: {events:?}"),
        }
    }
    (text, error, events[n - 2].json())
}
