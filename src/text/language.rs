//! Language of a knowledge-base text (spec §2.5 `language`, ISO 639-1): given by the client, or
//! detected from the text with `whatlang` (trigram model, 69 languages).

/// ISO 639-3 codes of `whatlang` → ISO 639-1 (every language `whatlang` detects has one).
const ISO639_3_TO_1: &[(&str, &str)] = &[
    ("epo", "eo"),
    ("eng", "en"),
    ("rus", "ru"),
    ("cmn", "zh"),
    ("spa", "es"),
    ("por", "pt"),
    ("ita", "it"),
    ("ben", "bn"),
    ("fra", "fr"),
    ("deu", "de"),
    ("ukr", "uk"),
    ("kat", "ka"),
    ("ara", "ar"),
    ("hin", "hi"),
    ("jpn", "ja"),
    ("heb", "he"),
    ("yid", "yi"),
    ("pol", "pl"),
    ("amh", "am"),
    ("jav", "jv"),
    ("kor", "ko"),
    ("nob", "nb"),
    ("dan", "da"),
    ("swe", "sv"),
    ("fin", "fi"),
    ("tur", "tr"),
    ("nld", "nl"),
    ("hun", "hu"),
    ("ces", "cs"),
    ("ell", "el"),
    ("bul", "bg"),
    ("bel", "be"),
    ("mar", "mr"),
    ("kan", "kn"),
    ("ron", "ro"),
    ("slv", "sl"),
    ("hrv", "hr"),
    ("srp", "sr"),
    ("mkd", "mk"),
    ("lit", "lt"),
    ("lav", "lv"),
    ("est", "et"),
    ("tam", "ta"),
    ("vie", "vi"),
    ("urd", "ur"),
    ("tha", "th"),
    ("guj", "gu"),
    ("uzb", "uz"),
    ("pan", "pa"),
    ("aze", "az"),
    ("ind", "id"),
    ("tel", "te"),
    ("pes", "fa"),
    ("mal", "ml"),
    ("ori", "or"),
    ("mya", "my"),
    ("nep", "ne"),
    ("sin", "si"),
    ("khm", "km"),
    ("tuk", "tk"),
    ("aka", "ak"),
    ("zul", "zu"),
    ("sna", "sn"),
    ("afr", "af"),
    ("lat", "la"),
    ("slk", "sk"),
    ("cat", "ca"),
    ("tgl", "tl"),
    ("hye", "hy"),
    ("cym", "cy"),
];

/// Characters of the text looked at by detection (its beginning, where most documents state
/// their language consistently; detection cost stays bounded for large files).
const SAMPLE_CHARS: usize = 20_000;

/// The ISO 639-1 code of the language `text` is written in, or `None` when detection is not
/// reliable (too short, mixed, or a language `whatlang` does not know).
pub fn detect(text: &str) -> Option<&'static str> {
    let end = text.char_indices().nth(SAMPLE_CHARS).map_or(text.len(), |(i, _)| i);
    let info = whatlang::detect(&text[..end])?;
    // Short texts in CJK scripts are reliable from the script alone.
    let script_only =
        matches!(info.script(), whatlang::Script::Hiragana | whatlang::Script::Katakana | whatlang::Script::Hangul);
    if !info.is_reliable() && !script_only && info.confidence() < 0.5 {
        return None;
    }
    let code = info.lang().code();
    ISO639_3_TO_1.iter().find(|(three, _)| *three == code).map(|(_, one)| *one)
}

#[cfg(test)]
mod tests {
    use super::detect;

    #[test]
    fn detects_common_languages() {
        assert_eq!(detect("The quick brown fox jumps over the lazy dog while the cat sleeps in the sun."), Some("en"));
        assert_eq!(
            detect("Le renard brun rapide saute par-dessus le chien paresseux pendant que le chat dort au soleil."),
            Some("fr")
        );
        assert_eq!(detect("敏捷的棕色狐狸跳过了懒狗，猫在阳光下睡觉。我们今天去图书馆学习编程。"), Some("zh"));
        assert_eq!(detect("すばやい茶色の狐がのろまな犬を飛び越えた。猫は日向で寝ている。"), Some("ja"));
    }
}
