//! The archive of a bundle: a gzip-compressed tar whose first member is `manifest.json`, then
//! the members it lists. Writing puts the manifest first with every member's size and
//! SHA-256; reading trusts nothing: sizes are counted while inflating (a decompression bomb
//! stops at the limit, as uploads do), paths must be plain relative paths (no `..`, no `/`
//! at the start, no links), every member must be listed with its size and hash and every
//! listed member present, and a newer format is refused before anything else is read.

use std::collections::HashMap;
use std::io::{Read, Write};

use sha2::{Digest, Sha256};

use super::format::{Manifest, Member};
use super::{BundleError, FORMAT, MANIFEST};
use crate::backup::{Counted, Progress, Step};

/// The hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The [`Member`] row of `bytes` at `path`.
pub fn member(path: &str, bytes: &[u8]) -> Member {
    Member { path: path.to_string(), size: bytes.len() as u64, sha256: sha256_hex(bytes) }
}

/// Writes `manifest` then `members` (`(path, bytes)`, in the manifest's order) as a gzip'd tar
/// to `out`; returns `out` once the gzip stream is finished. `progress` sees the bytes written
/// (step `archive`). Errors: the writer's.
pub fn write<W: Write>(
    out: W,
    manifest: &Manifest,
    members: &[(String, Vec<u8>)],
    progress: &mut dyn FnMut(Progress),
) -> std::io::Result<W> {
    let gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let json = serde_json::to_vec_pretty(manifest).map_err(std::io::Error::other)?;
    append(&mut tar, MANIFEST, &json)?;
    let total: u64 = members.iter().map(|(_, b)| b.len() as u64).sum();
    let (mut done, mut reported) = (0u64, 0u64);
    for (path, bytes) in members {
        append(&mut tar, path, bytes)?;
        done += bytes.len() as u64;
        if done - reported >= 8 << 20 || done == total {
            reported = done;
            progress(Progress { step: Step::Archive, done, total });
        }
    }
    tar.into_inner()?.finish()
}

fn append<W: Write>(tar: &mut tar::Builder<W>, path: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o600);
    header.set_mtime((crate::store::now_ms() / 1000).max(0) as u64);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, path, bytes)
}

/// A bundle read and checked: its manifest (migrated to [`FORMAT`]) and its members by path.
#[derive(Debug)]
pub struct Unpacked {
    pub manifest: Manifest,
    pub members: HashMap<String, Vec<u8>>,
}

impl Unpacked {
    /// The member at `path`. Errors: [`BundleError::Missing`].
    pub fn get(&self, path: &str) -> Result<&[u8], BundleError> {
        self.members.get(path).map(Vec::as_slice).ok_or_else(|| BundleError::Missing(path.to_string()))
    }

    /// The JSON member at `path` as a `T`. Errors: [`BundleError::Missing`],
    /// [`BundleError::Member`].
    pub fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, BundleError> {
        serde_json::from_slice(self.get(path)?)
            .map_err(|e| BundleError::Member { path: path.to_string(), why: e.to_string() })
    }
}

/// Reads the bundle in `input` (`size` bytes of gzip'd tar, for the progress), inflating at
/// most `max_inflated` bytes. Errors: every [`BundleError`] of a bad bundle (see the module
/// documentation); nothing is written anywhere.
pub fn read(
    input: impl Read,
    size: u64,
    max_inflated: u64,
    progress: &mut dyn FnMut(Progress),
) -> Result<Unpacked, BundleError> {
    // the compressed bytes read, every 8 MiB (step `unpack`)
    let counted = Counted::new(input, Step::Unpack, size, progress);
    let inflated = Limited { inner: flate2::read::GzDecoder::new(counted), left: max_inflated, limit: max_inflated };
    let mut tar = tar::Archive::new(inflated);
    let mut manifest: Option<Manifest> = None;
    let mut members = HashMap::new();
    for entry in tar.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let path = safe_path(&entry.path_bytes())?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(BundleError::NotAFile(path));
        }
        // the header's size is the archive's word: reserve at most 64 MiB on it
        let mut bytes = Vec::with_capacity(entry.size().min(max_inflated).min(64 << 20) as usize);
        entry.read_to_end(&mut bytes).map_err(corrupt)?;
        match &manifest {
            None if path == MANIFEST => manifest = Some(migrate(&bytes)?),
            None => return Err(BundleError::NoManifest),
            Some(_) if members.contains_key(&path) || path == MANIFEST => return Err(BundleError::Duplicate(path)),
            Some(_) => drop(members.insert(path, bytes)),
        }
    }
    let manifest = manifest.ok_or(BundleError::NoManifest)?;
    check_members(&manifest, &members)?;
    Ok(Unpacked { manifest, members })
}

/// Every member listed is present with its size and hash, and no other is.
fn check_members(manifest: &Manifest, members: &HashMap<String, Vec<u8>>) -> Result<(), BundleError> {
    for m in &manifest.members {
        let bytes = members.get(&m.path).ok_or_else(|| BundleError::Missing(m.path.clone()))?;
        if bytes.len() as u64 != m.size || sha256_hex(bytes) != m.sha256 {
            return Err(BundleError::Hash(m.path.clone()));
        }
    }
    match members.keys().find(|p| !manifest.members.iter().any(|m| &m.path == *p)) {
        Some(extra) => Err(BundleError::Unlisted(extra.clone())),
        None => Ok(()),
    }
}

/// The manifest in `bytes`, brought to [`FORMAT`]: a newer format is refused; each older
/// format is brought one step at a time (format 1 is the first: there is no older one yet).
pub fn migrate(bytes: &[u8]) -> Result<Manifest, BundleError> {
    #[derive(serde::Deserialize)]
    struct Head {
        format: u32,
    }
    let head: Head = serde_json::from_slice(bytes).map_err(|e| BundleError::Manifest(e.to_string()))?;
    if head.format > FORMAT {
        return Err(BundleError::NewerFormat(head.format));
    }
    if head.format == 0 {
        return Err(BundleError::Manifest("format 0 does not exist".into()));
    }
    // Format 1 is the current one; a format 2 will convert a format-1 manifest here.
    serde_json::from_slice(bytes).map_err(|e| BundleError::Manifest(e.to_string()))
}

/// `raw` as a member path: UTF-8, relative, `/`-separated normal components only. Errors:
/// [`BundleError::UnsafePath`].
fn safe_path(raw: &[u8]) -> Result<String, BundleError> {
    let unsafe_path = || BundleError::UnsafePath(String::from_utf8_lossy(raw).into_owned());
    let path = std::str::from_utf8(raw).map_err(|_| unsafe_path())?;
    let ok = !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && path.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && !c.chars().any(char::is_control));
    if ok {
        Ok(path.to_string())
    } else {
        Err(unsafe_path())
    }
}

/// A read error of the archive: a limit reached while inflating, or a truncated or corrupt
/// archive.
fn corrupt(e: std::io::Error) -> BundleError {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<TooLarge>()) {
        Some(TooLarge(limit)) => BundleError::TooLarge(*limit),
        None => BundleError::Corrupt(e.to_string()),
    }
}

/// The inflating limit was reached (the cause of the read error [`Limited`] returns).
#[derive(Debug, thiserror::Error)]
#[error("the bundle inflates to more than {0} bytes")]
struct TooLarge(u64);

/// A reader that fails once more than `limit` bytes came out of it.
struct Limited<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| std::io::Error::other(TooLarge(self.limit)))?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_paths_must_be_plain_relative_paths() {
        assert_eq!(safe_path(b"entries/00001/chunks.json").unwrap(), "entries/00001/chunks.json");
        for bad in [&b"../x"[..], b"/etc/passwd", b"a/../../b", b"a//b", b"./a", b"a\\b", b"", b"\xff"] {
            assert!(matches!(safe_path(bad), Err(BundleError::UnsafePath(_))), "{bad:?}");
        }
    }

    #[test]
    fn a_newer_format_is_refused_before_its_fields_are_read() {
        let newer = br#"{"format": 99, "whatever": true}"#;
        assert!(matches!(migrate(newer), Err(BundleError::NewerFormat(99))));
    }
}
