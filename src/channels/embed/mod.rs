//! Assets of the embeddable widget and the web chat page: `widget.js` (one script, no build
//! step, no inline script or eval, so it runs under a strict Content-Security-Policy) and the
//! page's HTML.
//!
//! The script served is assembled at compile time from three files of this directory: the
//! vendored Markdown lexer `vendor/marked.umd.js` (marked, MIT licence, `vendor/marked.LICENSE.md`;
//! its UMD wrapper sees a local `module` and exports there, so the page's globals are untouched),
//! the widget's stylesheet `widget.css` (adopted by the widget's shadow root as a constructed
//! stylesheet, which `style-src` does not govern) and the widget itself, `widget.js`.

use crate::store::records::Replica;

/// The widget script served at `GET /embed/widget.js`: marked, the stylesheet, the widget, in
/// one function scope.
pub const WIDGET_JS: &str = concat!(
    "(function () {\nvar module = { exports: {} }, exports = module.exports;\n",
    include_str!("vendor/marked.umd.js"),
    "\nvar marked = module.exports;\nvar STYLE = `",
    include_str!("widget.css"),
    "`;\n",
    include_str!("widget.js"),
    "})();\n"
);

/// The Content-Security-Policy of the web chat page: only the server's own script and
/// connections; no inline script, style or eval. Images come from the server itself, and from
/// `image_origin` when given (the origin of the replica's `profileImage`).
pub fn page_csp(image_origin: Option<&str>) -> String {
    let images = image_origin.map(|o| format!(" {o}")).unwrap_or_default();
    format!(
        "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'{images}; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// The origin (`https://host[:port]`) of the replica's `profileImage` when it is an http(s)
/// URL: the page may load that image and nothing else from another host.
pub fn image_origin(replica: &Replica) -> Option<String> {
    let url = url::Url::parse(replica.profile_image.as_deref()?).ok()?;
    matches!(url.scheme(), "http" | "https").then(|| url.origin().ascii_serialization())
}

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

/// The web chat page of `replica`: the widget in page mode (the whole page, on the `web`
/// source) given the replica's name, `shortDescription`, `profileImage`, greeting and
/// suggested questions as `data-` attributes.
pub fn page(replica: &Replica) -> String {
    let name = escape(&replica.name);
    let questions = escape(&serde_json::to_string(&replica.suggested_questions).unwrap_or_default());
    let image = match image_origin(replica) {
        Some(_) => format!(" data-image=\"{}\"", escape(replica.profile_image.as_deref().unwrap_or(""))),
        None => String::new(),
    };
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1, viewport-fit=cover\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n<title>{name}</title>\n\
         <script src=\"/embed/widget.js\" data-replica=\"{id}\" data-mode=\"page\" data-name=\"{name}\" \
         data-description=\"{description}\" data-greeting=\"{greeting}\" data-questions=\"{questions}\"{image} \
         data-target=\"replicad-chat\" defer></script>\n</head>\n\
         <body>\n<main id=\"replicad-chat\" aria-label=\"{name}\"><noscript>{name}: this chat needs JavaScript.</noscript></main>\n\
         </body>\n</html>\n",
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

    #[test]
    fn the_page_may_load_the_profile_image_and_no_other_image() {
        let mut r = Replica { profile_image: Some("https://cdn.example.com/a/face.png".into()), ..Replica::default() };
        assert_eq!(image_origin(&r).as_deref(), Some("https://cdn.example.com"));
        assert!(page_csp(image_origin(&r).as_deref()).contains("img-src 'self' https://cdn.example.com;"));
        r.profile_image = Some("javascript:alert(1)".into());
        assert_eq!(image_origin(&r), None);
        assert!(!page(&r).contains("data-image"));
        assert!(page_csp(None).contains("img-src 'self';"));
    }

    #[test]
    fn the_widget_script_is_small_and_its_stylesheet_is_a_plain_template_literal() {
        let css = include_str!("widget.css");
        assert!(
            !css.contains('`') && !css.contains("${") && !css.contains('\\'),
            "the stylesheet is pasted in a template literal"
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, WIDGET_JS.as_bytes()).unwrap();
        let size = gz.finish().unwrap().len();
        assert!(size <= 40 * 1024, "widget.js is {size} bytes gzipped; the budget is 40 KB");
    }
}
