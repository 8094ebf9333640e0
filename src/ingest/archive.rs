//! The size of a zip archive (DOCX, EPUB) as it really inflates, measured before a library
//! parses it.
//!
//! The DOCX and EPUB libraries trust the sizes a zip's directory declares: a 1 KB DOCX whose
//! zip64 entry declares 1 TiB made one reserve that much up front. [`check_inflated`] inflates
//! every member into nothing, counting the bytes, and refuses the archive when the members
//! together inflate past [`MAX_INFLATED_BYTES`] or when a member's content is not the size its
//! directory entry declares (a lying size is how such bombs work, and no honest writer makes
//! one). It stops reading as soon as a limit is passed, so a bomb costs at most that many
//! bytes of inflation and no memory.

use std::io::{Cursor, Read};

/// Most bytes the members of one archive may inflate to, together (256 MiB: a DOCX or EPUB
/// whose text fills a whole entry, 2,000,000 characters, is a few tens of MiB of XML).
pub const MAX_INFLATED_BYTES: u64 = 256 << 20;

/// Why an archive is refused; its text is for the entry's `error.message`.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Not a zip archive, or a member that cannot be inflated.
    #[error("the archive could not be read: {0}")]
    Zip(#[from] zip::result::ZipError),
    /// A member whose inflation failed midway.
    #[error("the archive could not be read: {0}")]
    Inflate(#[from] std::io::Error),
    /// The members together inflate past the limit (`mib` MiB).
    #[error("the archive inflates to more than {mib} MiB")]
    TooLarge { mib: u64 },
    /// A member holds another number of bytes than its directory entry declares.
    #[error("the archive is inconsistent: member {name:?} declares {declared} bytes but holds {inflated}")]
    Inconsistent { name: String, declared: u64, inflated: u64 },
}

/// Inflates every member of the zip archive `bytes` and checks the sizes (see the module doc).
/// Errors: not a zip archive, a member that cannot be inflated, more than
/// [`MAX_INFLATED_BYTES`] in all, or a member of another size than declared.
pub fn check_inflated(bytes: &[u8]) -> Result<(), ArchiveError> {
    check_with_limit(bytes, MAX_INFLATED_BYTES)
}

fn check_with_limit(bytes: &[u8], limit: u64) -> Result<(), ArchiveError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))?;
    let mut total = 0u64;
    for i in 0..zip.len() {
        let mut member = zip.by_index(i)?;
        let (declared, name) = (member.size(), member.name().map(|n| n.into_owned()).unwrap_or_default());
        let left = limit - total;
        let inflated = std::io::copy(&mut (&mut member).take(left + 1), &mut std::io::sink())?;
        if inflated > left {
            return Err(ArchiveError::TooLarge { mib: limit >> 20 });
        }
        if inflated != declared {
            return Err(ArchiveError::Inconsistent { name, declared, inflated });
        }
        total += inflated;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zip_of(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, body) in members {
            w.start_file(*name, options).unwrap();
            w.write_all(body).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn an_honest_archive_passes() {
        let bytes = zip_of(&[("a.xml", b"<a>hello</a>"), ("b.xml", &[b'x'; 10_000])]);
        assert!(check_with_limit(&bytes, 1 << 20).is_ok());
    }

    #[test]
    fn members_inflating_past_the_limit_are_refused_without_reading_on() {
        let zeros = vec![0u8; 3 << 20];
        let bytes = zip_of(&[("a.xml", &zeros[..2 << 20]), ("b.xml", &zeros)]);
        assert!(bytes.len() < 64 << 10, "the bomb compresses well: {} bytes", bytes.len());
        let err = check_with_limit(&bytes, 4 << 20).unwrap_err();
        assert!(matches!(err, ArchiveError::TooLarge { mib: 4 }));
        assert_eq!(err.to_string(), "the archive inflates to more than 4 MiB");
    }

    #[test]
    fn a_member_declaring_another_size_than_it_holds_is_refused() {
        let mut bytes = zip_of(&[("word/document.xml", b"<w:document>text</w:document>")]);
        // The central directory's uncompressed size (offset 24 of its record) now lies.
        let central = bytes.windows(4).rposition(|w| w == b"PK\x01\x02").unwrap();
        bytes[central + 24..central + 28].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = check_with_limit(&bytes, u64::MAX / 2).unwrap_err();
        assert!(!matches!(err, ArchiveError::TooLarge { .. }), "{err}");
    }

    #[test]
    fn what_is_not_a_zip_is_an_error() {
        let err = check_inflated(b"PK\x03\x04 garbage").unwrap_err();
        assert!(matches!(err, ArchiveError::Zip(_)));
        assert!(err.to_string().starts_with("the archive could not be read"));
    }
}
