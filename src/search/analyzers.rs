//! Text analyzers per language (spec §2.5 `language`): which tokenizer, stop words and stemmer
//! a chunk is indexed with, and a query analyzed with.
//!
//! - the 18 languages tantivy has a Snowball stemmer for: simple tokenizer, lower case, the
//!   language's stop words where tantivy has a list, the stemmer (English adds the function
//!   words of questions to Lucene's stop words);
//! - Chinese, Japanese, Korean and the other scripts written without spaces (Thai, Lao, Khmer,
//!   Burmese): overlapping character bigrams of those scripts ([`BigramTokenizer`]) — the
//!   standard dictionary-free CJK indexing (as Lucene's CJKBigramFilter), words of other scripts
//!   stay whole;
//! - every other language: simple tokenizer and lower case;
//! - besides the language's, every chunk's body is indexed by [`ExactTokenizer`]: the one-letter
//!   words and operators the language analyzers lose or conflate (`p` and `P`, `==`), case kept.

use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer, Token, TokenStream,
    Tokenizer,
};

/// An analyzer: its name (also the suffix of its index fields) and the ISO 639-1 codes it serves.
pub struct Analyzer {
    pub name: &'static str,
    pub languages: &'static [&'static str],
    stemmer: Option<Language>,
}

/// Every analyzer; the first is the default for texts whose language is unknown.
pub const ANALYZERS: &[Analyzer] = &[
    Analyzer { name: "en", languages: &["en"], stemmer: Some(Language::English) },
    Analyzer { name: "ar", languages: &["ar"], stemmer: Some(Language::Arabic) },
    Analyzer { name: "da", languages: &["da"], stemmer: Some(Language::Danish) },
    Analyzer { name: "nl", languages: &["nl"], stemmer: Some(Language::Dutch) },
    Analyzer { name: "fi", languages: &["fi"], stemmer: Some(Language::Finnish) },
    Analyzer { name: "fr", languages: &["fr"], stemmer: Some(Language::French) },
    Analyzer { name: "de", languages: &["de"], stemmer: Some(Language::German) },
    Analyzer { name: "el", languages: &["el"], stemmer: Some(Language::Greek) },
    Analyzer { name: "hu", languages: &["hu"], stemmer: Some(Language::Hungarian) },
    Analyzer { name: "it", languages: &["it"], stemmer: Some(Language::Italian) },
    Analyzer { name: "no", languages: &["no", "nb", "nn"], stemmer: Some(Language::Norwegian) },
    Analyzer { name: "pt", languages: &["pt"], stemmer: Some(Language::Portuguese) },
    Analyzer { name: "ro", languages: &["ro"], stemmer: Some(Language::Romanian) },
    Analyzer { name: "ru", languages: &["ru"], stemmer: Some(Language::Russian) },
    Analyzer { name: "es", languages: &["es"], stemmer: Some(Language::Spanish) },
    Analyzer { name: "sv", languages: &["sv"], stemmer: Some(Language::Swedish) },
    Analyzer { name: "ta", languages: &["ta"], stemmer: Some(Language::Tamil) },
    Analyzer { name: "tr", languages: &["tr"], stemmer: Some(Language::Turkish) },
    Analyzer { name: "cjk", languages: &["zh", "ja", "ko", "th", "lo", "km", "my", "bo"], stemmer: None },
    Analyzer { name: "simple", languages: &[], stemmer: None },
];

/// English stop words: Lucene's list plus the function words of questions ("how do I …"),
/// which carry no topic and would otherwise dominate short queries.
const ENGLISH_STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of",
    "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
    "what", "which", "who", "whom", "whose", "how", "why", "when", "where", "do", "does", "did", "i", "me", "my",
    "you", "your", "we", "our", "us", "can", "could", "should", "would", "shall", "may", "might", "must", "about",
    "from", "has", "have", "had", "its", "so", "than", "too", "very", "just", "am", "were", "been", "being", "he",
    "she", "him", "her", "them", "some", "any", "tell", "please", "explain", "s", "t",
];

/// Function characters of Chinese and Japanese questions and grammar (particles, "what",
/// "is", …): they say nothing about a topic, so sentence matching ignores terms that hold them.
pub const CJK_FUNCTION_CHARS: &[char] = &[
    '的', '了', '是', '吗', '呢', '什', '么', '怎', '哪', '谁', '吧', '啊', '在', '有', '和', '我', '你', '请', 'の',
    'は', 'が', 'を', 'に', 'で', 'と', 'か', 'も', 'す', 'ま', 'た', 'て', 'い', 'る', 'だ', '何', '이', '가', '은',
    '는', '을', '를', '의', '에', '요', '까',
];

/// The analyzer of a text in `language` (ISO 639-1); unknown or absent → the default.
pub fn for_language(language: Option<&str>) -> &'static Analyzer {
    let found = language.and_then(|l| {
        let simple = ANALYZERS.iter().find(|a| a.name == "simple");
        ANALYZERS.iter().find(|a| a.languages.contains(&l)).or(simple)
    });
    found.unwrap_or(&ANALYZERS[0])
}

impl Analyzer {
    /// Builds the tantivy analyzer.
    pub fn build(&self) -> TextAnalyzer {
        if self.name == "cjk" {
            return TextAnalyzer::builder(BigramTokenizer)
                .filter(RemoveLongFilter::limit(40))
                .filter(LowerCaser)
                .build();
        }
        let base =
            TextAnalyzer::builder(SimpleTokenizer::default()).filter(RemoveLongFilter::limit(40)).filter(LowerCaser);
        let Some(lang) = self.stemmer else { return base.build() };
        let stop = if lang == Language::English {
            Some(StopWordFilter::remove(ENGLISH_STOP_WORDS.iter().map(|w| w.to_string())))
        } else {
            StopWordFilter::new(lang)
        };
        match stop {
            Some(stop) => base.filter(stop).filter(Stemmer::new(lang)).build(),
            None => base.filter(Stemmer::new(lang)).build(),
        }
    }

    /// Distinct terms of `text` under this analyzer, in order of first appearance.
    pub fn terms(&self, text: &str) -> Vec<String> {
        terms(&mut self.built(), text)
    }

    /// A copy of this analyzer built once per process (building one allocates its stop-word set
    /// and stemmer; copies share them).
    fn built(&self) -> TextAnalyzer {
        static BUILT: std::sync::OnceLock<Vec<TextAnalyzer>> = std::sync::OnceLock::new();
        let all = BUILT.get_or_init(|| ANALYZERS.iter().map(Analyzer::build).collect());
        let slot = ANALYZERS.iter().position(|a| a.name == self.name).unwrap_or(0);
        all[slot].clone()
    }
}

/// Distinct terms of `text` under `analyzer`, in order of first appearance.
pub fn terms(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while let Some(t) = stream.next() {
        if !out.contains(&t.text) {
            out.push(t.text.clone());
        }
    }
    out
}

/// Whether `text` holds a character of a script written without spaces.
pub fn has_dense(text: &str) -> bool {
    text.chars().any(is_dense)
}

/// Whether `c` belongs to a script written without spaces between words.
pub fn is_dense(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF        // Thai, Lao
        | 0x0F00..=0x0FFF      // Tibetan
        | 0x1000..=0x109F      // Myanmar
        | 0x1780..=0x17FF      // Khmer
        | 0x1100..=0x11FF      // Hangul Jamo
        | 0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3130..=0x318F      // Hangul compatibility Jamo
        | 0x3400..=0x4DBF      // CJK extension A
        | 0x4E00..=0x9FFF      // CJK unified ideographs
        | 0xAC00..=0xD7AF      // Hangul syllables
        | 0xF900..=0xFAFF      // CJK compatibility ideographs
        | 0xFF66..=0xFF9F      // half-width Katakana
        | 0x20000..=0x2FFFF) // CJK extensions B–F
}

/// Tokenizer for dense scripts: every two adjacent dense characters form a token (a lone one
/// is a token itself); runs of other letters and digits are whole tokens.
#[derive(Clone, Default)]
pub struct BigramTokenizer;

/// Tokens computed up front ([`BigramTokenizer`], [`ExactTokenizer`]).
pub struct Tokens {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for BigramTokenizer {
    type TokenStream<'a> = Tokens;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Tokens {
        let mut tokens = Vec::new();
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let end_of = |i: usize| chars.get(i + 1).map_or(text.len(), |(o, _)| *o);
        let mut push = |from: usize, to: usize| {
            let position = tokens.len();
            tokens.push(Token {
                offset_from: from,
                offset_to: to,
                position,
                text: text[from..to].to_string(),
                position_length: 1,
            });
        };
        let mut i = 0;
        while i < chars.len() {
            let (start, c) = chars[i];
            if is_dense(c) {
                let mut j = i;
                while j + 1 < chars.len() && is_dense(chars[j + 1].1) {
                    j += 1;
                }
                if i == j {
                    push(start, end_of(i));
                }
                for (k, (offset, _)) in chars.iter().enumerate().take(j).skip(i) {
                    push(*offset, end_of(k + 1));
                }
                i = j + 1;
            } else if c.is_alphanumeric() {
                let mut j = i;
                while j + 1 < chars.len() && chars[j + 1].1.is_alphanumeric() && !is_dense(chars[j + 1].1) {
                    j += 1;
                }
                push(start, end_of(j));
                i = j + 1;
            } else {
                i += 1;
            }
        }
        Tokens { tokens, next: 0 }
    }
}

impl TokenStream for Tokens {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

/// Name of [`ExactTokenizer`] among an index's tokenizers.
pub const EXACT: &str = "exact";

/// Symbols an operator ([`ExactTokenizer`]) is made of.
const OPERATOR_CHARS: &str = "=<>!+-*/%&|^~:";

/// Tokenizer of the words that the language analyzers lose or conflate, case kept: a
/// one-letter word (`p` and `P` are two sed commands; lower case makes them one term) and an
/// operator of two or three symbols (`==`, `!=`, `+=`, `**`; not a dash `--`). Words are
/// whitespace-separated, without the quotes, brackets and punctuation around them. The article
/// and pronoun `a`, `A`, `I` are no such word.
#[derive(Clone, Default)]
pub struct ExactTokenizer;

impl Tokenizer for ExactTokenizer {
    type TokenStream<'a> = Tokens;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Tokens {
        let mut tokens = Vec::new();
        for word in text.split_whitespace() {
            let w = word.trim_matches(|c: char| "\"'`()[]{},.;?“”‘’".contains(c));
            let letter = w.len() == 1 && w.chars().all(|c| c.is_ascii_alphabetic()) && !matches!(w, "a" | "A" | "I");
            let operator = (2..=3).contains(&w.len())
                && w.chars().all(|c| OPERATOR_CHARS.contains(c))
                && !w.chars().all(|c| c == '-');
            if letter || operator {
                let from = w.as_ptr() as usize - text.as_ptr() as usize;
                let position = tokens.len();
                tokens.push(Token {
                    offset_from: from,
                    offset_to: from + w.len(),
                    position,
                    text: w.to_string(),
                    position_length: 1,
                });
            }
        }
        Tokens { tokens, next: 0 }
    }
}

/// Distinct terms of `text` under [`ExactTokenizer`].
pub fn exact_terms(text: &str) -> Vec<String> {
    terms(&mut TextAnalyzer::from(ExactTokenizer), text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_drops_stop_words_and_stems() {
        let en = for_language(Some("en"));
        assert_eq!(en.terms("What are the Modules?"), vec!["modul".to_string()]);
        assert_eq!(en.terms("How do I handle exceptions?"), vec!["handl".to_string(), "except".to_string()]);
    }

    #[test]
    fn cjk_text_becomes_bigrams_and_latin_words_stay_whole() {
        let cjk = for_language(Some("zh"));
        assert_eq!(cjk.terms("北京大学 Rust2024"), vec!["北京", "京大", "大学", "rust2024"]);
        assert_eq!(cjk.terms("猫"), vec!["猫"]);
        assert_eq!(for_language(Some("ja")).name, "cjk");
    }

    #[test]
    fn languages_pick_their_stemmer_or_a_fallback() {
        assert_eq!(for_language(Some("fr")).terms("les chevaux mangeaient"), vec!["cheval", "mang"]);
        assert_eq!(for_language(Some("nb")).name, "no");
        assert_eq!(for_language(Some("sw")).name, "simple");
        assert_eq!(for_language(None).name, "en");
    }

    #[test]
    fn exact_terms_keep_one_letter_words_and_operators_with_their_case() {
        assert_eq!(exact_terms("What is the difference between p and P?"), vec!["p", "P"]);
        assert_eq!(exact_terms("What is the difference between is and ==?"), vec!["=="]);
        assert_eq!(exact_terms("A cat, (x) and `y` -- I said a != b; --quiet"), vec!["x", "y", "!=", "b"]);
        assert!(exact_terms("Une liste est une séquence à modifier. リスト").is_empty());
    }
}
