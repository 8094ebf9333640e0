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
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encodes `value` as `[R::VERSION][bincode]`.
pub fn encode<R: Record>(value: &R) -> Result<Vec<u8>> {
    let mut out = vec![R::VERSION];
    bincode::serde::encode_into_std_write(value, &mut out, config()).map_err(Error::internal)?;
    Ok(out)
}

/// Decodes bytes written by [`encode`]; errors on an unknown version or malformed bytes.
pub fn decode<R: Record>(bytes: &[u8]) -> Result<R> {
    match bytes.split_first() {
        Some((&v, rest)) if v == R::VERSION => {
            let (value, _) = bincode::serde::decode_from_slice(rest, config()).map_err(Error::internal)?;
            Ok(value)
        }
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
}
