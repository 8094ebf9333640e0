//! What kind of answer a question asks for, from its wording: a definition ("What is X?"), a
//! way to do something ("How do I …?"), a comparison ("difference between A and B"), or a fact.
//! Phrasings are recognised in English, French, Spanish, German and Japanese; any other
//! question is a [`Intent::Fact`] and still gets the passage that answers it best.

/// The kind of a question, with the subjects it names (as written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// "What is X?": the passage that defines X.
    Definition(String),
    /// "How do I …?": the explanation and its example.
    HowTo,
    /// "Difference between A and B": sentences about both.
    Comparison(String, String),
    /// Anything else.
    Fact,
}

const DEFINITION: &[&str] = &[
    "what is an ",
    "what is a ",
    "what is the ",
    "what is ",
    "what are the ",
    "what are ",
    "what's a ",
    "what's an ",
    "what's ",
    "define ",
    "what does the ",
    "what does ",
    "what do ",
    "qu'est-ce qu'une ",
    "qu'est-ce qu'un ",
    "qu'est-ce que le ",
    "qu'est-ce que la ",
    "qu'est-ce que les ",
    "qu'est-ce que l'",
    "qu'est-ce que ",
    "qu'est-ce qu'",
    "c'est quoi ",
    "que fait ",
    "qué es un ",
    "qué es una ",
    "qué es el ",
    "qué es la ",
    "qué es ",
    "qué son ",
    "was ist ein ",
    "was ist eine ",
    "was ist der ",
    "was ist die ",
    "was ist das ",
    "was ist ",
    "was sind ",
];
const DEFINITION_END: &[&str] = &[" mean", " do", " for", " stand for"];
const HOW_TO: &[&str] = &[
    "how do i ",
    "how can i ",
    "how should i ",
    "how do you ",
    "how can you ",
    "how do we ",
    "how to ",
    "how would i ",
    "comment ",
    "cómo ",
    "wie kann ich ",
    "wie macht man ",
];
const JA_DEFINITION: &[&str] = &["とは", "って何", "ってなに"];
const JA_HOW_TO: &[&str] = &["どうやって", "方法", "するには", "どうすれば", "には？", "には?"];
const COMPARISON: &[(&str, &str)] = &[
    ("difference between ", " and "),
    ("differences between ", " and "),
    ("compare ", " and "),
    ("compare ", " with "),
    ("différence entre ", " et "),
    ("différences entre ", " et "),
    ("diferencia entre ", " y "),
    ("unterschied zwischen ", " und "),
];

/// The question lowered, without its final punctuation and surrounding space.
pub(crate) fn plain(question: &str) -> String {
    let q = question.trim().to_lowercase().replace('’', "'");
    q.trim_end_matches(['?', '!', '.', '？', '！', '。', ' ']).trim().to_string()
}

/// The strings `a` and `b` of "… a and b …" after `lead`.
fn pair<'a>(q: &'a str, lead: &str, join: &str) -> Option<(&'a str, &'a str)> {
    let rest = &q[q.find(lead)? + lead.len()..];
    let (a, b) = rest.split_once(join)?;
    let b = b.split([',', ';', '?']).next().unwrap_or(b);
    (!a.trim().is_empty() && !b.trim().is_empty()).then(|| (a.trim(), b.trim()))
}

fn comparison(q: &str) -> Option<Intent> {
    for (lead, join) in COMPARISON {
        if let Some((a, b)) = pair(q, lead, join) {
            return Some(Intent::Comparison(a.into(), b.into()));
        }
    }
    for sep in [" vs. ", " vs ", " versus "] {
        if let Some((a, b)) = q.split_once(sep) {
            let a = a.rsplit([',', ':']).next().unwrap_or(a);
            return Some(Intent::Comparison(a.trim().into(), b.trim().into()));
        }
    }
    if let Some((pair, _)) = q.split_once("の違い") {
        let (a, b) = pair.split_once('と')?;
        return Some(Intent::Comparison(a.into(), b.into()));
    }
    // "how do A and B differ"
    let rest = q.strip_prefix("how do ").or_else(|| q.strip_prefix("how does "))?;
    let (a, b) = rest.strip_suffix(" differ")?.split_once(" and ")?;
    Some(Intent::Comparison(a.into(), b.into()))
}

/// The task a how-to question asks about, from its verb on ("How do I sort a list?": "sort a
/// list"), when it opens with a how-to phrase.
pub fn task(question: &str) -> Option<String> {
    let q = plain(question);
    let p = HOW_TO.iter().find(|p| q.starts_with(*p))?;
    Some(q[p.len()..].trim().to_string()).filter(|t| !t.is_empty())
}

/// The intent of `question`.
pub fn of(question: &str) -> Intent {
    let q = plain(question);
    if let Some(c) = comparison(&q) {
        return c;
    }
    if let Some(p) = DEFINITION.iter().find(|p| q.starts_with(*p)) {
        let mut subject = &q[p.len()..];
        if let Some(end) = DEFINITION_END.iter().find(|e| subject.ends_with(*e)) {
            subject = &subject[..subject.len() - end.len()];
        }
        return Intent::Definition(subject.trim().to_string());
    }
    if let Some(i) = JA_DEFINITION.iter().filter_map(|m| q.find(m)).min() {
        return Intent::Definition(q[..i].to_string());
    }
    if HOW_TO.iter().any(|p| q.starts_with(p)) || JA_HOW_TO.iter().any(|m| q.contains(m)) {
        return Intent::HowTo;
    }
    Intent::Fact
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_recognised_in_several_languages() {
        assert_eq!(of("What is a list comprehension?"), Intent::Definition("list comprehension".into()));
        assert_eq!(of("What does the -n option do?"), Intent::Definition("-n option".into()));
        assert_eq!(of("Qu'est-ce qu'un module ?"), Intent::Definition("module".into()));
        assert_eq!(of("モジュールとは何ですか？"), Intent::Definition("モジュール".into()));
        assert_eq!(of("How do I read a file?"), Intent::HowTo);
        assert_eq!(of("Comment lire un fichier ?"), Intent::HowTo);
        assert_eq!(of("ファイルを読むにはどうすればいいですか"), Intent::HowTo);
        assert_eq!(
            of("What is the difference between a tuple and a list?"),
            Intent::Comparison("a tuple".into(), "a list".into())
        );
        assert_eq!(
            of("Quelle est la différence entre un tuple et une liste ?"),
            Intent::Comparison("un tuple".into(), "une liste".into())
        );
        assert_eq!(of("タプルとリストの違いは？"), Intent::Comparison("タプル".into(), "リスト".into()));
        assert_eq!(of("Does Python have a switch statement?"), Intent::Fact);
    }

    #[test]
    fn a_how_to_names_its_task() {
        assert_eq!(task("How do I brew tea?").as_deref(), Some("brew tea"));
        assert_eq!(task("Comment brasser le thé ?").as_deref(), Some("brasser le thé"));
        assert_eq!(task("Why is tea bitter?"), None);
    }
}
