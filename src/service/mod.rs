//! Business rules per resource: plain Rust types in, plain Rust types out; no hyper types.

pub mod bundle;
pub mod channel;
pub mod channel_data;
pub mod chat;
pub mod chats;
pub mod embed;
pub mod history;
pub mod integrations;
pub mod knowledge;
pub mod messages;
pub mod orgs;
pub mod passages;
pub mod quotas;
pub mod replicas;
pub mod text_fragment;
pub mod token_usage;
pub mod usage;
pub mod users;
pub mod visibility;

use crate::error::{Error, Result};

/// Checks a text field the server stores: between `min` and `max` characters (Unicode scalar
/// values), and no NUL character (U+0000), which no title, name or message has a use for and
/// which many consumers of the text (C strings, PostgreSQL `text`, terminals) cut or refuse.
/// The one check of every text field of the API, so each refuses NUL alike.
pub fn check_len(field: &str, value: &str, min: usize, max: usize) -> Result<()> {
    if value.contains('\0') {
        return Err(Error::invalid(field, "must not contain the NUL character (U+0000)"));
    }
    let n = value.chars().count();
    if n < min {
        return Err(Error::invalid(field, format!("must have at least {min} character(s)")));
    }
    if n > max {
        return Err(Error::invalid(field, format!("must have at most {max} characters, has {n}")));
    }
    Ok(())
}

/// Checks a URL given for display (`profileImage`): absolute http(s), at most 2048 characters.
/// (URLs the server fetches are checked by `ingest::fetch::check_fetchable`.)
pub fn check_http_url(field: &str, url: &str) -> Result<()> {
    check_len(field, url, 1, 2048)?;
    let lower = url.to_ascii_lowercase();
    let rest = lower.strip_prefix("https://").or_else(|| lower.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !url.chars().any(|c| c.is_whitespace()) => Ok(()),
        _ => Err(Error::invalid(field, "must be an absolute http(s) URL")),
    }
}

/// A plausible e-mail address (`local@domain.tld`, no spaces, ≤ 254 chars), lower-cased.
pub fn normalize_email(field: &str, value: &str) -> Result<String> {
    let v = value.trim().to_lowercase();
    let ok = v.len() <= 254
        && !v.chars().any(|c| c.is_whitespace() || c.is_control())
        && match v.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
            }
            None => false,
        };
    if ok {
        Ok(v)
    } else {
        Err(Error::invalid(field, format!("{value:?} is not an e-mail address")))
    }
}

/// Page `page` (from 1) of `page_size` items of `all`, and the number of items in `all`.
pub fn page_of<T>(all: Vec<T>, page: u64, page_size: u64) -> (Vec<T>, u64) {
    let total = all.len() as u64;
    let skip = (page.saturating_sub(1)).saturating_mul(page_size) as usize;
    (all.into_iter().skip(skip).take(page_size as usize).collect(), total)
}

/// Page `page` (from 1) of `page_size` items of an order of `total` items, read from an index
/// walked from the nearer end (the list operations kept by write-time indexes):
/// `walk(from_end)` gives the order forwards, or backwards when `from_end`. The walk skips
/// keys, not records: a page reads its own records only, and skips at most half the order.
pub fn page_from_nearer_end<T, I>(
    page: u64,
    page_size: u64,
    total: u64,
    walk: impl FnOnce(bool) -> Result<I>,
) -> Result<Vec<T>>
where
    I: Iterator<Item = Result<T>>,
{
    let skip = page.saturating_sub(1).saturating_mul(page_size);
    let end = skip.saturating_add(page_size).min(total);
    if skip >= end {
        return Ok(Vec::new());
    }
    let (len, from_end) = (end - skip, skip > total - end);
    let skip = if from_end { total - end } else { skip };
    let mut items = walk(from_end)?.skip(skip as usize).take(len as usize).collect::<Result<Vec<_>>>()?;
    if from_end {
        items.reverse();
    }
    Ok(items)
}

/// SHA-256 of a secret, the form under which API keys, invitation codes and upload tokens are
/// stored.
pub fn hash_secret(secret: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(secret.as_bytes()).into()
}

/// `len` random bytes from the operating system, hex-encoded.
pub fn random_hex(len: usize) -> Result<String> {
    let mut buf = vec![0u8; len];
    getrandom::fill(&mut buf).map_err(Error::internal)?;
    Ok(hex::encode(buf))
}

/// RFC 3339 text (UTC, milliseconds: `2024-05-01T12:00:00.000Z`) of a store timestamp (ms
/// since the Unix epoch; out of chrono's range: the epoch). The digits are written directly:
/// chrono's formatter cost 3–5 % of a list read, which writes two or three per item. Years
/// outside 0–9999 are written by chrono.
pub fn rfc3339(ms: i64) -> String {
    use chrono::{Datelike, Timelike};
    let t = chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    let Ok(year @ 0..=9999) = u32::try_from(t.year()) else {
        return t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    };
    let mut text = *b"0000-00-00T00:00:00.000Z";
    let fields = [(0, 4, year), (5, 2, t.month()), (8, 2, t.day()), (11, 2, t.hour()), (14, 2, t.minute())];
    let fields = fields.into_iter().chain([(17, 2, t.second()), (20, 3, t.timestamp_subsec_millis())]);
    for (at, width, mut n) in fields {
        for digit in text[at..at + width].iter_mut().rev() {
            *digit = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }
    text.iter().map(|&b| char::from(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digits written directly agree with chrono's formatter, across centuries, both sides
    /// of the epoch, leap days and the ends of chrono's range.
    #[test]
    fn rfc3339_agrees_with_chrono() {
        let chrono_text = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        let mut ms: i64 = -62_167_219_200_000 - 5; // just before year 0
        while ms < 253_402_300_800_000 + 5 {
            assert_eq!(rfc3339(ms), chrono_text(ms), "{ms}");
            ms += 86_399_999 * 7 + 13;
        }
        for ms in [0, 1, 999, 951_782_400_000, 1_709_164_800_123, i64::MIN, i64::MAX, -1] {
            assert_eq!(rfc3339(ms), chrono_text(ms), "{ms}");
        }
        assert_eq!(rfc3339(1_714_564_800_007), "2024-05-01T12:00:00.007Z");
    }

    #[test]
    fn emails_are_checked_and_lowercased() {
        assert_eq!(normalize_email("e", " Ann@Example.ORG ").unwrap(), "ann@example.org");
        for bad in ["", "a", "a@b", "@b.c", "a@@b.c", "a b@c.d", "a@.c", "a@c."] {
            assert!(normalize_email("e", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lengths_count_characters() {
        assert!(check_len("n", "ééé", 1, 3).is_ok());
        assert!(check_len("n", "éééé", 1, 3).is_err());
        assert!(check_len("n", "", 1, 3).is_err());
        let nul = check_len("title", "a\0b", 1, 3).unwrap_err();
        assert_eq!(nul.message, "title: must not contain the NUL character (U+0000)");
    }
}
