//! Text analyzers per language (spec §2.5 `language`): which tokenizer, stop words and stemmer
//! a chunk is indexed with, and a query analyzed with.
//!
//! - words are found by [`WordTokenizer`] in every analyzer: an identifier (`snake_case`,
//!   `camelCase`, `kebab-case`, `dotted.names`, `--long-options`) is a term whole and a term
//!   per part, so a question naming its parts finds it and one naming it whole finds it best;
//! - the 18 languages tantivy has a Snowball stemmer for: word tokenizer, lower case, the
//!   language's stop words where tantivy has a list, the stemmer (English adds the function
//!   words of questions to Lucene's stop words);
//! - Chinese, Japanese, Korean and the other scripts written without spaces (Thai, Lao, Khmer,
//!   Burmese): overlapping character bigrams of those scripts ([`BigramTokenizer`]) — the
//!   standard dictionary-free CJK indexing (as Lucene's CJKBigramFilter), words of other scripts
//!   stay whole;
//! - every other language: word tokenizer and lower case;
//! - besides the language's, every chunk's body is indexed by [`ExactTokenizer`]: the one-letter
//!   words and operators the language analyzers lose or conflate (`p` and `P`, `==`), case kept.

use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token, TokenFilter, TokenStream,
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

/// Languages whose questions are told apart by their function words ("I don't know" and the
/// lead-in are written in them), ISO 639-1; English first (it wins ties).
pub const QUESTION_LANGUAGES: [&str; 4] = ["en", "fr", "es", "de"];

/// The language of a question, for the reply's words: Japanese when it holds kana, else the
/// one of [`QUESTION_LANGUAGES`] whose analyzer finds the most stop words among its words (a
/// sentence's function words tell its language where trigram statistics of a few words do
/// not), the first listed of equals; English when none finds any.
pub fn question_language(question: &str) -> &'static str {
    let counted = stop_word_counts(question);
    // `max_by_key` keeps the last of equals: reversed, the first listed wins ties
    counted.into_iter().rev().max_by_key(|(_, n)| *n).filter(|(_, n)| *n > 0).map_or("en", |(l, _)| l)
}

/// The language of [`QUESTION_LANGUAGES`] whose stop words are the most among `question`'s
/// words, strictly (unlike [`question_language`]): `None` when none finds any or two find as
/// many. Cheap (no trigram model):
/// callers that need certainty only in rare cases confirm it with [`trigrams_agree`] then.
pub fn told_by_function_words(question: &str) -> Option<&'static str> {
    let mut counted = stop_word_counts(question);
    counted.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    match counted[..] {
        [(l, n)] if n > 0 => Some(l),
        [(l, n), (_, next), ..] if n > next => Some(l),
        _ => None,
    }
}

/// Whether the trigram statistics of `text::language::detect` (whatlang: the costly part, about
/// a tenth of a BM25-only completion's CPU when it ran on every question) name `told` or
/// nothing for `question`.
pub fn trigrams_agree(question: &str, told: &str) -> bool {
    crate::text::language::detect(question).is_none_or(|l| l == told)
}

/// How many of `question`'s words each language of [`QUESTION_LANGUAGES`] takes for stop
/// words, in that order; a question holding kana is Japanese's alone.
fn stop_word_counts(question: &str) -> Vec<(&'static str, usize)> {
    if question.chars().any(|c| matches!(c, '\u{3040}'..='\u{30ff}')) {
        return vec![("ja", 1)];
    }
    let mut counts = [0; QUESTION_LANGUAGES.len()];
    for word in question.split(|c: char| !c.is_alphabetic()).filter(|w| !w.is_empty()) {
        let stop = stop_word_of(&word.to_lowercase());
        counts.iter_mut().zip(stop).for_each(|(n, stop)| *n += usize::from(stop));
    }
    QUESTION_LANGUAGES.iter().copied().zip(counts).collect()
}

/// Whether `language`'s analyzer takes the lower-case `word` for a stop word: it leaves no term
/// of it, or only terms of its question stop list ([`Analyzer::topic_terms`]).
fn is_stop_word(language: &str, word: &str) -> bool {
    let a = for_language(Some(language));
    a.topic_terms(word).unwrap_or_else(|| a.terms(word)).is_empty()
}

/// Words whose [`stop_word_of`] is kept (the least recently asked forgotten first).
const STOP_WORDS_KEPT: usize = 8192;

/// Longest word (bytes) whose [`stop_word_of`] is kept, so that the words kept hold at most
/// [`STOP_WORDS_KEPT`] times this many bytes however long a question's words are (the
/// analyzers drop tokens of more than 40 bytes anyway).
const STOP_WORD_KEPT_BYTES: usize = 40;

/// Whether each language of [`QUESTION_LANGUAGES`], in that order, takes the lower-case `word`
/// for a stop word ([`is_stop_word`]). Kept per word (the last [`STOP_WORDS_KEPT`] asked, of at most
/// [`STOP_WORD_KEPT_BYTES`]): analyzing each word of a question under four analyzers, as every
/// retrieval does ([`told_by_function_words`]), was 6–7 % of a BM25-only completion's CPU, and
/// questions are mostly made of the same few words.
fn stop_word_of(word: &str) -> [bool; QUESTION_LANGUAGES.len()] {
    type Kept = lru::LruCache<String, [bool; QUESTION_LANGUAGES.len()]>;
    static KEPT: std::sync::LazyLock<std::sync::Mutex<Kept>> = std::sync::LazyLock::new(|| {
        let size = std::num::NonZeroUsize::new(STOP_WORDS_KEPT).expect("STOP_WORDS_KEPT > 0");
        std::sync::Mutex::new(lru::LruCache::new(size))
    });
    // the map holds no invariant a panicking holder could break half-way
    let kept = || KEPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(stop) = kept().get(word) {
        return *stop;
    }
    let stop = std::array::from_fn(|i| is_stop_word(QUESTION_LANGUAGES[i], word));
    if word.len() <= STOP_WORD_KEPT_BYTES {
        kept().put(word.to_string(), stop);
    }
    stop
}

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
        let base = TextAnalyzer::builder(WordTokenizer).filter(RemoveLongFilter::limit(40)).filter(LowerCaser);
        let Some(lang) = self.stemmer else { return base.build() };
        let stop = if lang == Language::English {
            Some(StopWordFilter::remove(ENGLISH_STOP_WORDS.iter().map(|w| w.to_string())))
        } else {
            StopWordFilter::new(lang)
        };
        match stop {
            Some(stop) => base.filter(stop).filter(WholeOfPartsFilter).filter(Stemmer::new(lang)).build(),
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

impl Analyzer {
    /// The terms of `question` that name its topic: its terms without the function words of
    /// questions. Chinese and Japanese function characters ([`CJK_FUNCTION_CHARS`]) are left
    /// out; for the other languages (the index's stop lists keep "available", "comment", "wie",
    /// "cómo") the terms of the language's Stopwords ISO list ([`question_stop_terms`]), the
    /// same library list for every language, English too: a question's common words ("much",
    /// "available", "need") are not what it is about, even where a small knowledge base never
    /// uses them. `None` for an analyzer without such a list (no language, or one Stopwords ISO
    /// lacks).
    pub fn topic_terms(&self, question: &str) -> Option<Vec<String>> {
        let terms = self.terms(question);
        match self.name {
            "cjk" => Some(terms.into_iter().filter(|t| !t.chars().any(|c| CJK_FUNCTION_CHARS.contains(&c))).collect()),
            _ => {
                let stop = self.question_stop_terms()?;
                Some(terms.into_iter().filter(|t| !stop.contains(t)).collect())
            }
        }
    }

    /// The terms (as this analyzer makes them) of the Stopwords ISO list of its language (the
    /// `stop-words` crate: `fr` 691 words, `de` 620, `es` 732, …), built once per process;
    /// `None` for an analyzer without a language or whose language the list lacks. Used on
    /// questions only, never on the index (a list this long holds words that name topics in
    /// a text, as "premier" or "erste").
    fn question_stop_terms(&self) -> Option<&'static std::collections::HashSet<String>> {
        type Lists = Vec<Option<std::collections::HashSet<String>>>;
        static BUILT: std::sync::OnceLock<Lists> = std::sync::OnceLock::new();
        let all = BUILT.get_or_init(|| {
            let list = |a: &Analyzer| {
                let words = a.stemmer.and_then(|_| stop_words::lookup(a.name))?;
                Some(words.iter().flat_map(|w| a.terms(w)).collect())
            };
            ANALYZERS.iter().map(list).collect()
        });
        all[ANALYZERS.iter().position(|a| a.name == self.name)?].as_ref()
    }
}

/// Distinct terms of `text` under this analyzer's parts alone: an identifier by its parts, not
/// whole ([`WordTokenizer`] gives both; the whole is for the index).
impl Analyzer {
    pub fn part_terms(&self, text: &str) -> Vec<String> {
        let mut analyzer = self.built();
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while let Some(t) = stream.next() {
            if t.position_length == 1 && !out.contains(&t.text) {
                out.push(t.text.clone());
            }
        }
        out
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

/// The identifiers of `text` (words of two or more parts, [`WordTokenizer`]) as the terms of
/// their parts in order, under the analyzer of `language` (ISO 639-1; English when `None`, as
/// `search::analyze_as`): `["rainbow", "unicorn", "abc123"]` for `RAINBOW_UNICORN_abc123`.
/// Parts the analyzer drops (stop words) are left out; an identifier left with fewer than two
/// parts is none.
pub fn identifiers(language: Option<&str>, text: &str) -> Vec<Vec<String>> {
    let mut analyzer = for_language(language.or(Some("en"))).built();
    let mut stream = analyzer.token_stream(text);
    let mut out: Vec<Vec<String>> = Vec::new();
    // the positions the identifier being read spans (its parts'), and its parts so far
    let mut open: Option<(std::ops::Range<usize>, Vec<String>)> = None;
    while let Some(t) = stream.next() {
        let inside = open.as_ref().is_some_and(|(span, _)| span.contains(&t.position));
        if t.position_length > 1 || !inside {
            out.extend(open.take().map(|(_, parts)| parts).filter(|p| p.len() >= 2));
        }
        if t.position_length > 1 {
            open = Some((t.position..t.position + t.position_length, Vec::new()));
        } else if let Some((_, parts)) = open.as_mut().filter(|_| inside) {
            parts.push(t.text.clone());
        }
    }
    out.extend(open.map(|(_, parts)| parts).filter(|p| p.len() >= 2));
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
/// is a token itself); the words of other scripts are tokens as [`WordTokenizer`] makes them.
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
        let push = |tokens: &mut Vec<Token>, from: usize, to: usize| {
            let position = next_position(tokens);
            tokens.push(Token {
                offset_from: from,
                offset_to: to,
                position,
                text: text[from..to].to_string(),
                position_length: 1,
            });
        };
        let word_char = |c: char| c.is_alphanumeric() && !is_dense(c);
        let mut i = 0;
        while i < chars.len() {
            let (start, c) = chars[i];
            if is_dense(c) {
                let mut j = i;
                while j + 1 < chars.len() && is_dense(chars[j + 1].1) {
                    j += 1;
                }
                if i == j {
                    push(&mut tokens, start, end_of(i));
                }
                for (k, (offset, _)) in chars.iter().enumerate().take(j).skip(i) {
                    push(&mut tokens, *offset, end_of(k + 1));
                }
                i = j + 1;
            } else if let Some(end) = word_at(text, start, word_char) {
                push_word(&mut tokens, text, start, end, word_char);
                while i < chars.len() && chars[i].0 < end {
                    i += 1;
                }
            } else {
                i += 1;
            }
        }
        Tokens { tokens, next: 0 }
    }
}

/// Tokenizer of words, identifiers whole and by their parts (as Elasticsearch's word delimiter
/// graph filter with `preserve_original`): a word is a run of letters and digits, and runs
/// joined by `_` (one or more), or by one `-` or `.` between two of them, make one identifier,
/// with one or two leading dashes before a letter (a command-line option). An identifier is a
/// token whole, then one per part, split at its joiners and at changes of case (`camelCase`:
/// `camel`, `Case`; `HTTPServer`: `HTTP`, `Server`); a word that is a single part is one token.
/// A number's `.` does not split it (`3.14`, `1.2.3` are one word and one token), nor do digits
/// after letters (`mp3`, `utf8`, `abc123` are parts of their own).
///
/// The whole token and the first part share a position, the parts follow one another, and the
/// next word comes after the last part, so phrase positions count parts. Text that is neither
/// letters nor digits (spaces, punctuation, other joiners) only separates words, as in
/// tantivy's `SimpleTokenizer`.
#[derive(Clone, Default)]
pub struct WordTokenizer;

impl Tokenizer for WordTokenizer {
    type TokenStream<'a> = Tokens;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Tokens {
        let mut tokens = Vec::new();
        let mut at = 0;
        while let Some(c) = text[at..].chars().next() {
            match word_at(text, at, char::is_alphanumeric) {
                Some(end) => {
                    push_word(&mut tokens, text, at, end, char::is_alphanumeric);
                    at = end;
                }
                None => at += c.len_utf8(),
            }
        }
        Tokens { tokens, next: 0 }
    }
}

/// The end (byte offset) of the word of [`WordTokenizer`] starting at byte `start` of `text`,
/// whose letters and digits satisfy `word_char`; `None` when no word starts there (one that
/// starts earlier does not count: callers scan from the left).
fn word_at(text: &str, start: usize, word_char: impl Fn(char) -> bool) -> Option<usize> {
    let rest = &text[start..];
    let before = text[..start].chars().next_back();
    let dashes = rest.len() - rest.trim_start_matches('-').len();
    let opens = match dashes {
        0 => rest.chars().next().is_some_and(&word_char),
        // an option's dashes open a word only where no word or dash comes just before them
        1 | 2 => {
            rest[dashes..].chars().next().is_some_and(|c| c.is_alphabetic() && word_char(c))
                && !before.is_some_and(|b| b == '-' || word_char(b))
        }
        _ => false,
    };
    if !opens {
        return None;
    }
    let mut end = start + dashes;
    loop {
        let run = text[end..].find(|c: char| !word_char(c)).map_or(text.len(), |n| end + n);
        end = run;
        let after = &text[run..];
        let joiner = match after.chars().next() {
            Some('_') => after.len() - after.trim_start_matches('_').len(),
            Some('-' | '.') => 1,
            _ => 0,
        };
        if joiner == 0 || !after[joiner..].chars().next().is_some_and(&word_char) {
            return Some(end);
        }
        end = run + joiner;
    }
}

/// The parts of `word` (byte ranges into it): its runs of letters and digits, split at changes
/// of case, a `.` between two numbers keeping them one part.
fn parts(word: &str, word_char: &impl Fn(char) -> bool) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut from = None;
    for (i, c) in word.char_indices().chain([(word.len(), ' ')]) {
        match (word_char(c) && i < word.len(), from) {
            (true, None) => from = Some(i),
            (false, Some(f)) => {
                let numeric = |r: &str| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit() || b == b'.');
                match runs.last_mut() {
                    // `3.14`: the previous run ends just before a `.` and both sides are numbers
                    Some(last)
                        if last.1 + 1 == f
                            && &word[last.1..f] == "."
                            && numeric(&word[last.0..last.1])
                            && numeric(&word[f..i]) =>
                    {
                        last.1 = i
                    }
                    _ => runs.push((f, i)),
                }
                from = None;
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (from, to) in runs {
        let run: Vec<(usize, char)> = word[from..to].char_indices().map(|(i, c)| (from + i, c)).collect();
        let mut start = from;
        for k in 1..run.len() {
            let (prev, (at, c), next) = (run[k - 1].1, run[k], run.get(k + 1).map(|x| x.1));
            let lower_upper = prev.is_lowercase() && c.is_uppercase();
            let acronym_end = prev.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase);
            if lower_upper || acronym_end {
                out.push((start, at));
                start = at;
            }
        }
        out.push((start, to));
    }
    out
}

/// Pushes the tokens of the word `text[from..to]` ([`WordTokenizer`]): the word, then its
/// parts when it has more than itself.
fn push_word(tokens: &mut Vec<Token>, text: &str, from: usize, to: usize, word_char: impl Fn(char) -> bool) {
    let word = &text[from..to];
    let parts = parts(word, &word_char);
    let position = next_position(tokens);
    let token = |(a, b): (usize, usize), position: usize, position_length: usize| Token {
        offset_from: from + a,
        offset_to: from + b,
        position,
        text: word[a..b].to_string(),
        position_length,
    };
    if parts != [(0, word.len())] {
        tokens.push(token((0, word.len()), position, parts.len()));
    }
    for (i, part) in parts.into_iter().enumerate() {
        tokens.push(token(part, position + i, 1));
    }
}

/// Keeps the whole of a word of [`WordTokenizer`] only while two or more of its parts remain
/// after the filters before it (stop words). The whole stands for its parts together; with one
/// part left it says no more than that part, but a question writing it otherwise would miss
/// it: French `est-ce` ("Qu'est-ce que …", `ce` a stop word) is `est`, English `is_dirty` is
/// `dirty`.
#[derive(Clone, Default)]
pub struct WholeOfPartsFilter;

impl TokenFilter for WholeOfPartsFilter {
    type Tokenizer<T: Tokenizer> = WholeOfParts<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> WholeOfParts<T> {
        WholeOfParts(tokenizer)
    }
}

/// A tokenizer followed by [`WholeOfPartsFilter`].
#[derive(Clone)]
pub struct WholeOfParts<T>(T);

impl<T: Tokenizer> Tokenizer for WholeOfParts<T> {
    type TokenStream<'a> = Tokens;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Tokens {
        let mut inner = self.0.token_stream(text);
        let mut all = Vec::new();
        while inner.advance() {
            all.push(inner.token().clone());
        }
        // a whole comes right before its parts, which lie within the positions it spans
        let keep: Vec<bool> = (0..all.len())
            .map(|i| {
                let w = &all[i];
                let span = w.position..w.position + w.position_length;
                w.position_length <= 1 || all[i + 1..].iter().take_while(|t| span.contains(&t.position)).count() >= 2
            })
            .collect();
        let tokens = all.into_iter().zip(keep).filter(|(_, k)| *k).map(|(t, _)| t).collect();
        Tokens { tokens, next: 0 }
    }
}

/// The position after the last of `tokens` (0 for none).
fn next_position(tokens: &[Token]) -> usize {
    tokens.last().map_or(0, |t| t.position + 1)
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

    /// A word's stop-word languages as analyzed now, without the words kept.
    fn analyzed(word: &str) -> [bool; QUESTION_LANGUAGES.len()] {
        QUESTION_LANGUAGES.map(|l| is_stop_word(l, word))
    }

    #[test]
    fn a_word_asked_again_counts_as_when_first_analyzed_long_words_too() {
        let long = "a".repeat(STOP_WORD_KEPT_BYTES + 1);
        for word in ["what", "comment", "wie", "cómo", "module", "exceptions", long.as_str()] {
            assert_eq!(stop_word_of(word), analyzed(word), "{word}");
            assert_eq!(stop_word_of(word), analyzed(word), "{word}, asked again");
        }
        assert_eq!(question_language("Comment ouvrir une connexion ?"), "fr");
        assert_eq!(question_language("Comment ouvrir une connexion ?"), "fr", "asked again");
    }

    /// The language a question's words tell beyond doubt: its function words', unless the
    /// trigram statistics name another ("Was stellt … her?": "was" and "her" are function words
    /// of English too) — what `search::in_another_language` decides with.
    fn told_language(question: &str) -> Option<&'static str> {
        told_by_function_words(question).filter(|told| trigrams_agree(question, told))
    }

    #[test]
    fn a_question_s_function_words_tell_its_language_unless_two_languages_share_them() {
        assert_eq!(told_language("How long does delivery take?"), Some("en"));
        assert_eq!(told_language("Combien coûte la livraison ?"), Some("fr"));
        assert_eq!(told_language("¿Cuánto cuesta el desayuno?"), Some("es"));
        assert_eq!(told_language("Wie lange dauert die Lieferung?"), Some("de"));
        assert_eq!(told_language("タプルとは何ですか？"), Some("ja"));
        // "was" and "her" are function words of English and of German alike
        assert_eq!(told_language("Was stellt Sonnenhof Möbel her?"), None);
        assert_eq!(told_language("Zeitwerk 4,50 €"), None);
        assert_eq!(question_language("Zeitwerk 4,50 €"), "en");
    }

    #[test]
    fn a_question_s_topic_terms_leave_out_its_function_words() {
        let topic = |lang: &str, q: &str| for_language(Some(lang)).topic_terms(q);
        assert_eq!(topic("en", "How do I define a function?").unwrap(), ["defin", "function"]);
        let ja = topic("ja", "タプルとは何ですか？").unwrap();
        assert!(ja.contains(&"タプ".to_string()) && ja.iter().all(|t| !t.contains('何')), "{ja:?}");
        // other languages leave out their Stopwords ISO list's words
        assert_eq!(topic("fr", "Comment installer un paquet ?").unwrap(), ["install", "paquet"]);
        assert_eq!(topic("de", "Wie installiere ich ein Paket?").unwrap(), ["installi", "pak"]);
        assert_eq!(topic("es", "¿Cómo instalo un paquete?").unwrap(), ["instal", "paquet"]);
        // … and an analyzer without such a list names none
        assert_eq!(topic("sw", "Ninawezaje kusakinisha kifurushi?"), None);
        assert_eq!(topic("ta", "தொகுப்பை எவ்வாறு நிறுவுவது?"), None);
    }

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

    /// The tokens of `text` under [`WordTokenizer`] alone: (text, position, position length).
    fn words(text: &str) -> Vec<(String, usize, usize)> {
        let mut analyzer = TextAnalyzer::from(WordTokenizer);
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while let Some(t) = stream.next() {
            out.push((t.text.clone(), t.position, t.position_length));
        }
        out
    }

    fn texts(text: &str) -> Vec<String> {
        words(text).into_iter().map(|(t, ..)| t).collect()
    }

    #[test]
    fn identifiers_are_tokens_whole_and_by_their_parts() {
        assert_eq!(texts("RAINBOW_UNICORN_42"), ["RAINBOW_UNICORN_42", "RAINBOW", "UNICORN", "42"]);
        assert_eq!(texts("a snake_case name"), ["a", "snake_case", "snake", "case", "name"]);
        assert_eq!(texts("camelCase"), ["camelCase", "camel", "Case"]);
        assert_eq!(texts("HTTPServer"), ["HTTPServer", "HTTP", "Server"]);
        assert_eq!(texts("kebab-case"), ["kebab-case", "kebab", "case"]);
        assert_eq!(texts("see os.path.join."), ["see", "os.path.join", "os", "path", "join"]);
        assert_eq!(texts("use --long-options or -n"), ["use", "--long-options", "long", "options", "or", "-n", "n"]);
        assert_eq!(texts("__init__ and a__b"), ["init", "and", "a__b", "a", "b"]);
    }

    #[test]
    fn numbers_stay_whole_and_digits_stay_with_their_letters() {
        assert_eq!(texts("0.1 and 3.14, version 1.2.3."), ["0.1", "and", "3.14", "version", "1.2.3"]);
        assert_eq!(texts("mp3 utf8 abc123"), ["mp3", "utf8", "abc123"]);
        assert_eq!(texts("python3.11"), ["python3.11", "python3", "11"]);
        assert_eq!(texts("pi_3.14"), ["pi_3.14", "pi", "3.14"]);
    }

    #[test]
    fn dashes_and_dots_that_join_nothing_only_separate() {
        assert_eq!(texts("well -- said... a-- -5 x - y"), ["well", "said", "a", "5", "x", "y"]);
        assert_eq!(texts("end.Next"), ["end.Next", "end", "Next"]);
        assert_eq!(texts("naïve café_crème"), ["naïve", "café_crème", "café", "crème"]);
    }

    #[test]
    fn parts_follow_one_another_and_the_whole_spans_them() {
        assert_eq!(
            words("one snake_case_word two"),
            vec![
                ("one".into(), 0, 1),
                ("snake_case_word".into(), 1, 3),
                ("snake".into(), 1, 1),
                ("case".into(), 2, 1),
                ("word".into(), 3, 1),
                ("two".into(), 4, 1),
            ]
        );
    }

    #[test]
    fn every_analyzer_indexes_identifiers_whole_and_by_their_parts() {
        let en = for_language(Some("en"));
        assert_eq!(en.terms("The RAINBOW_UNICORN_42 flag"), ["rainbow_unicorn_42", "rainbow", "unicorn", "42", "flag"]);
        assert_eq!(en.terms("call parseConfigFile"), ["call", "parseconfigfil", "pars", "config", "file"]);
        assert_eq!(en.terms("pi is 3.14"), ["pi", "3.14"]);
        assert_eq!(for_language(Some("sw")).terms("kebab-case"), ["kebab-case", "kebab", "case"]);
        assert_eq!(for_language(Some("fr")).terms("le fichier my_config"), ["fichi", "my_config", "my", "config"]);
        // a word left with one part by the stop words is that part
        assert_eq!(for_language(Some("fr")).terms("Qu'est-ce qu'une liste ?"), ["est", "list"]);
        assert_eq!(en.terms("a built-in, as-is, is_dirty"), ["built", "dirti"]);
        let cjk = for_language(Some("ja"));
        assert_eq!(cjk.terms("設定 max_size"), ["設定", "max_size", "max", "size"]);
    }

    #[test]
    fn identifiers_list_their_analyzed_parts() {
        let text = "Set RAINBOW_UNICORN_abc123 in parseConfigFile, not in plain words or is_a or 3.14.";
        let found = identifiers(None, text);
        assert_eq!(found, vec![vec!["rainbow", "unicorn", "abc123"], vec!["pars", "config", "file"]]);
        assert!(identifiers(Some("ja"), "設定 max_size").contains(&vec!["max".to_string(), "size".to_string()]));
    }

    #[test]
    fn exact_terms_keep_one_letter_words_and_operators_with_their_case() {
        assert_eq!(exact_terms("What is the difference between p and P?"), vec!["p", "P"]);
        assert_eq!(exact_terms("What is the difference between is and ==?"), vec!["=="]);
        assert_eq!(exact_terms("A cat, (x) and `y` -- I said a != b; --quiet"), vec!["x", "y", "!=", "b"]);
        assert!(exact_terms("Une liste est une séquence à modifier. リスト").is_empty());
    }
}
