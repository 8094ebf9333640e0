//! The only place that names bincode: values are `[version: u8][bincode 2 bytes]`.
//!
//! Decoding never panics: a wrong version byte or malformed bytes give an internal error
//! (the store is corrupt or was written by a newer binary).

use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};

/// A record kept on disk: its current layout version.
pub trait Record: Serialize + DeserializeOwned {
    /// Layout version written as the first byte of every value.
    const VERSION: u8;

    /// Reads a value written with an older layout `version` (its bytes after the version
    /// byte). Records that changed layout override this with an upgrade from each older
    /// version (decode the old struct with [`decode_body`], convert); the default knows none.
    fn upgrade(version: u8, _body: &[u8]) -> Result<Self> {
        Err(Error::internal(format!(
            "record version {version} is not {} ({})",
            Self::VERSION,
            std::any::type_name::<Self>()
        )))
    }
}

/// Decodes the bincode bytes of a value (after its version byte) as `T` (an older layout).
pub fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    let (value, _) = bincode::serde::decode_from_slice(body, config()).map_err(Error::internal)?;
    Ok(value)
}

/// Decodes the first bincode value of `body` as `T` (the leading fields of an older layout);
/// answers it and the bytes after it.
pub fn decode_prefix<T: DeserializeOwned>(body: &[u8]) -> Result<(T, &[u8])> {
    let (value, used) = bincode::serde::decode_from_slice(body, config()).map_err(Error::internal)?;
    Ok((value, &body[used..]))
}

/// The bincode bytes of `value`, without a version byte (the leading fields of a layout being
/// rebuilt, see [`decode_prefix`]).
pub fn encode_body<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    bincode::serde::encode_to_vec(value, config()).map_err(Error::internal)
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encodes `value` as `[R::VERSION][bincode]`.
pub fn encode<R: Record>(value: &R) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    encode_into(value, &mut out)?;
    Ok(out)
}

/// Appends `[R::VERSION][bincode]` of `value` to `out`: the one place that writes the layout.
fn encode_into<R: Record>(value: &R, out: &mut Vec<u8>) -> Result<()> {
    out.push(R::VERSION);
    bincode::serde::encode_into_std_write(value, out, config()).map_err(Error::internal)?;
    Ok(())
}

/// Most bytes of the per-thread buffer [`with_encoded`] keeps between calls (a larger
/// encoding is made, then the buffer shrinks back).
const KEPT_BUFFER_BYTES: usize = 256 * 1024;

thread_local! {
    static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Calls `f` with the bytes of [`encode`]`(value)`, written into a buffer the thread keeps
/// (up to [`KEPT_BUFFER_BYTES`]): storing a record costs no allocation, and no regrowth of a
/// fresh vector for the large ones (that regrowth was 4 % of a completion's CPU in a profile
/// of the completions benchmark while history replies held their sources' texts). A nested
/// call (`f` encoding again) works, with a buffer of its own.
pub fn with_encoded<R: Record, T>(value: &R, f: impl FnOnce(&[u8]) -> Result<T>) -> Result<T> {
    BUFFER.with(|cell| {
        let mut out = cell.take();
        out.clear();
        let result = encode_into(value, &mut out).and_then(|()| f(&out));
        if out.capacity() <= KEPT_BUFFER_BYTES {
            cell.replace(out);
        }
        result
    })
}

/// Decodes bytes written by [`encode`] (older versions through [`Record::upgrade`]); errors on
/// an unknown or newer version or malformed bytes.
pub fn decode<R: Record>(bytes: &[u8]) -> Result<R> {
    match bytes.split_first() {
        Some((&v, rest)) if v == R::VERSION => decode_body(rest),
        Some((&v, rest)) if v < R::VERSION => R::upgrade(v, rest),
        Some((v, _)) => {
            Err(Error::internal(format!("record version {v} is not {} ({})", R::VERSION, std::any::type_name::<R>())))
        }
        None => Err(Error::internal("empty record")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Sample {
        a: u64,
        b: String,
    }
    impl Record for Sample {
        const VERSION: u8 = 3;
    }

    #[test]
    fn round_trips_and_rejects_other_versions() {
        let s = Sample { a: 7, b: "x".into() };
        let bytes = encode(&s).unwrap();
        assert_eq!(bytes[0], 3);
        assert_eq!(decode::<Sample>(&bytes).unwrap(), s);
        let mut wrong = bytes.clone();
        wrong[0] = 4;
        assert!(decode::<Sample>(&wrong).is_err());
        assert!(decode::<Sample>(&[]).is_err());
        assert!(decode::<Sample>(&[3, 0xff, 0xff]).is_err());
    }

    #[test]
    fn the_kept_buffer_gives_the_bytes_of_encode_and_shrinks_after_a_large_record() {
        let small = Sample { a: 1, b: "short".into() };
        let large = Sample { a: 2, b: "x".repeat(KEPT_BUFFER_BYTES * 2) };
        for s in [&small, &large, &small] {
            let bytes = with_encoded(s, |b| Ok(b.to_vec())).unwrap();
            assert_eq!(bytes, encode(s).unwrap());
        }
        assert!(BUFFER.with(|b| b.borrow().capacity()) <= KEPT_BUFFER_BYTES);
        let failed: Result<()> = with_encoded(&small, |_| Err(Error::internal("refused")));
        assert!(failed.is_err());
        assert_eq!(with_encoded(&small, |b| Ok(b.to_vec())).unwrap(), encode(&small).unwrap());
    }

    /// A message as version 2 wrote it, kept as the bytes its own struct encoded to: id 8,
    /// replica 1, user 2, an assistant's "hello" on `web` citing source 4 "Doc" (text "the
    /// text", score 1.5), channel data `{}`, created at 1, interrupted.
    const MESSAGE_V2: &str = "081000000000000000000000000000000001100000000000000000000000000000000209617373697374616e\
        740568656c6c6f0377656201040000c03f0403446f630874686520746578740001027b7d0201";
    /// Version 3 wrote the same fields, then `passages` (here `[77]`).
    const PASSAGES_V3: &str = "014d";

    fn record(version: u8, hex: &[&str]) -> Vec<u8> {
        let digits: String = hex.concat().split_whitespace().collect();
        let byte = |i: usize| u8::from_str_radix(&digits[i..i + 2], 16).unwrap();
        std::iter::once(version).chain((0..digits.len()).step_by(2).map(byte)).collect()
    }

    #[test]
    fn a_version_1_message_is_upgraded_to_not_interrupted() {
        use crate::store::records::Message;
        // Version 1 wrote version 2's fields but the last, `interrupted` (the last byte).
        let v2 = record(1, &[MESSAGE_V2]);
        let m: Message = decode(&v2[..v2.len() - 1]).unwrap();
        assert_eq!((m.id, m.content.as_str(), m.created_at, m.interrupted), (8, "hello", 1, false));
        assert_eq!((m.sources[0].name.as_str(), m.sources[0].url.as_deref()), ("Doc", None));
        assert!(m.passages.is_empty(), "its sources keep their texts inline");
        let again = encode(&m).unwrap();
        assert_eq!(again[0], Message::VERSION);
        assert_eq!(decode::<Message>(&again).unwrap().id, 8);
        assert!(decode::<Message>(&v2[..v2.len() - 2]).is_err(), "a version 1 message cut short");
    }

    #[test]
    fn a_version_2_message_keeps_its_sources_texts_inline() {
        use crate::store::records::Message;
        let m: Message = decode(&record(2, &[MESSAGE_V2])).unwrap();
        assert_eq!((m.id, m.replica, m.user), (8, uuid::Uuid::from_u128(1), uuid::Uuid::from_u128(2)));
        assert_eq!((m.content.as_str(), m.channel_data.as_deref(), m.created_at), ("hello", Some("{}"), 1));
        assert_eq!((m.interrupted, m.sources[0].id, m.sources[0].content.as_str()), (true, 4, "the text"));
        assert!(m.passages.is_empty());
    }

    #[test]
    fn a_version_3_message_and_a_version_1_chunk_read_back_without_a_place() {
        use crate::store::records::{Chunk, Message};
        let m: Message = decode(&record(3, &[MESSAGE_V2, PASSAGES_V3])).unwrap();
        assert_eq!((m.id, m.passages.as_slice(), m.sources[0].name.as_str()), (8, &[77][..], "Doc"));
        assert_eq!((m.sources[0].url.as_deref(), m.sources[0].page), (None, None));
        let chunk = [vec![1u8], bincode::serde::encode_to_vec(("Doc › Part", "Text."), config()).unwrap()].concat();
        let c: Chunk = decode(&chunk).unwrap();
        assert_eq!((c.title.as_str(), c.text.as_str(), c.page), ("Doc › Part", "Text.", None));
    }

    #[test]
    fn a_version_1_embed_settings_has_no_identity_secret() {
        use crate::store::records::EmbedSettings;
        #[derive(Serialize)]
        struct EmbedSettingsV1 {
            replica: uuid::Uuid,
            org: uuid::Uuid,
            allowed_origins: Vec<String>,
            updated_at: i64,
        }
        let v1 = EmbedSettingsV1 {
            replica: uuid::Uuid::from_u128(5),
            org: uuid::Uuid::nil(),
            allowed_origins: vec!["https://example.com".into()],
            updated_at: 9,
        };
        let bytes = [vec![1u8], bincode::serde::encode_to_vec(&v1, config()).unwrap()].concat();
        let s: EmbedSettings = decode(&bytes).unwrap();
        assert_eq!((s.replica, s.allowed_origins.len(), s.updated_at), (v1.replica, 1, 9));
        assert!(s.identity_secret.is_none());
    }

    /// An entry as version 1 wrote it, kept as the bytes its own struct (`KbEntryV1`, removed)
    /// encoded to: id 3, nil replica and org, `website`, status `VECTOR_CREATED`, title "t",
    /// auto refresh, summary "s", 2 chunks, revision 5, created at 1, updated at 2.
    const KB_ENTRY_V1: [&str; 3] = [
        "03 10 00000000000000000000000000000000 10 00000000000000000000000000000000 07 77656273697465",
        "0e 564543544f525f43524541544544",
        "01 01 74 00 00 01 01 73 02 05 00 02 04",
    ];
    /// The same entry with the status `DONE`, which no version wrote.
    const KB_ENTRY_V1_DONE: [&str; 3] = [KB_ENTRY_V1[0], "04 444f4e45", KB_ENTRY_V1[2]];

    #[test]
    fn a_version_1_kb_entry_gets_typed_kind_and_status() {
        use crate::store::records::{KbEntry, KbKind, KbStatus};
        let e: KbEntry = decode(&record(1, &KB_ENTRY_V1)).unwrap();
        assert_eq!(
            (e.id, e.kind, e.status, e.title.as_deref()),
            (3, KbKind::Website, KbStatus::VectorCreated, Some("t"))
        );
        assert_eq!((e.generated_title.as_deref(), e.language.as_deref(), e.auto_refresh), (None, None, true));
        assert_eq!(e.summary, "s");
        assert_eq!((e.chunk_count, e.revision, e.error.as_deref(), e.created_at, e.updated_at), (2, 5, None, 1, 2));
        assert_eq!(encode(&e).unwrap()[0], 2);
        assert!(decode::<KbEntry>(&record(1, &KB_ENTRY_V1_DONE)).is_err(), "an unknown status is an error");
    }

    #[test]
    fn a_version_1_user_keeps_its_linked_account_and_has_no_client_id() {
        use crate::store::records::{User, UserV1};
        let v1 = UserV1 {
            id: uuid::Uuid::from_u128(9),
            org: uuid::Uuid::nil(),
            name: "Bea".into(),
            email: None,
            profile_image: None,
            linked: Some(("embed".into(), "visitor-1".into())),
            created_at: 1,
            updated_at: 2,
        };
        let bytes = [vec![1u8], bincode::serde::encode_to_vec(&v1, config()).unwrap()].concat();
        let u: User = decode(&bytes).unwrap();
        assert_eq!(u.linked, vec![("embed".to_string(), "visitor-1".to_string())]);
        assert_eq!(u.public_id(), uuid::Uuid::from_u128(9).to_string());
        assert!(u.client_id.is_none());
        assert_eq!(encode(&u).unwrap()[0], 2);
    }

    #[test]
    fn a_version_1_quota_has_no_visitors_quota_of_its_own() {
        use crate::store::records::Quota;
        // Version 1: conversations per month, replicas, knowledge-base entries.
        let v1 = (Some(5u64), None::<u64>, Some(7u64));
        let bytes = [vec![1u8], bincode::serde::encode_to_vec(v1, config()).unwrap()].concat();
        let q: Quota = decode(&bytes).unwrap();
        let want = Quota { conversations_per_month: Some(5), knowledge_base_entries: Some(7), ..Quota::default() };
        assert_eq!(q, want);
        assert_eq!(encode(&q).unwrap()[0], 2);
    }
}
