//! Assets of the embeddable widget and the web chat page: `widget.js` (one script, no build
//! step, no inline script or eval, so it runs under a strict Content-Security-Policy) and the
//! page's HTML.

use crate::store::records::Replica;

/// The widget script served at `GET /embed/widget.js`.
pub const WIDGET_JS: &str = include_str!("widget.js");

/// The Content-Security-Policy of the web chat page: only the server's own script and
/// connections; no inline script, style or eval. The page shows no image (the widget draws
/// text only), so images come from the server itself at most (a favicon): none from other hosts.
pub const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; \
                            img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `text` safe inside HTML text and double-quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The web chat page of `replica`: its name, greeting and suggested questions, and the widget
/// in page mode (inline, on the `web` source).
pub fn page(replica: &Replica) -> String {
    let name = escape(&replica.name);
    let questions: String = replica
        .suggested_questions
        .iter()
        .map(|q| format!("<li><button type=\"button\" data-replicad-question=\"{0}\">{0}</button></li>", escape(q)))
        .collect();
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{name}</title>\n</head>\n\
         <body>\n<main>\n<h1>{name}</h1>\n<p>{description}</p>\n\
         <section aria-label=\"Suggested questions\"><ul>{questions}</ul></section>\n\
         <div id=\"replicad-chat\"></div>\n</main>\n\
         <script src=\"/embed/widget.js\" data-replica=\"{id}\" data-mode=\"page\" data-name=\"{name}\" \
         data-greeting=\"{greeting}\" data-target=\"replicad-chat\" defer></script>\n</body>\n</html>\n",
        description = escape(&replica.short_description),
        id = replica.id,
        greeting = escape(&replica.greeting),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_escapes_what_the_replica_owner_wrote() {
        let r = Replica {
            name: "<script>alert(1)</script>".into(),
            greeting: "Hi \"there\"".into(),
            suggested_questions: vec!["a & b?".into()],
            ..Replica::default()
        };
        let html = page(&r);
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("Hi &quot;there&quot;") && html.contains("a &amp; b?"));
    }
}
