//! Secrets at rest (docs/decisions.md "Integrations"): channel tokens are stored sealed with
//! XChaCha20-Poly1305 under a 256-bit key read from `--secrets-key-file`.
//!
//! The key file holds the key as 64 hex characters (a trailing newline is allowed). When the
//! file is absent at start-up a fresh random key is written to it with permissions `0600`
//! (default place: `DATA_DIR/secrets.key`). Losing the key file makes the stored tokens
//! unreadable: the bots then report the error in their state and must be connected again.

use std::io::Write;
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use crate::error::{Error, Result};

/// File name of the generated key inside the data directory.
pub const DEFAULT_KEY_FILE: &str = "secrets.key";
const NONCE_LEN: usize = 24;

/// The sealing key; cheap to clone.
#[derive(Clone)]
pub struct Secrets {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(..)")
    }
}

impl Secrets {
    /// Reads the key at `file` (or `data_dir/secrets.key`), generating it (mode `0600`) when
    /// absent. Errors are start-up failures; their text names the file.
    pub fn load_or_create(file: Option<&Path>, data_dir: &Path) -> std::result::Result<Secrets, KeyFileError> {
        let path = key_path(file, data_dir);
        let key = match std::fs::read_to_string(&path) {
            Ok(text) => parse_key(&text).map_err(|e| KeyFileError::Invalid { path: path.clone(), why: e })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = generate(&path).map_err(|source| KeyFileError::Io { path: path.clone(), source })?;
                tracing::info!(path = %path.display(), "generated a new secrets key");
                key
            }
            Err(source) => return Err(KeyFileError::Io { path, source }),
        };
        warn_if_readable_by_others(&path);
        Ok(Secrets::from_key(&key))
    }

    /// A sealer with the given key (tests).
    pub fn from_key(key: &[u8; 32]) -> Secrets {
        Secrets { cipher: XChaCha20Poly1305::new(key.into()) }
    }

    /// `nonce ‖ ciphertext ‖ tag` of `plain`, bound to `context` (e.g. the replica id and the
    /// channel name): a sealed value copied to another context does not open.
    pub fn seal(&self, plain: &[u8], context: &[u8]) -> Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(Error::internal)?;
        let sealed = self
            .cipher
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: plain, aad: context })
            .map_err(|_| Error::internal("sealing a secret failed"))?;
        Ok([nonce.as_slice(), &sealed].concat())
    }

    /// The plain bytes of a value made by [`Secrets::seal`] with the same `context`. Errors
    /// (internal) when the key is another one or the bytes were altered.
    pub fn open(&self, sealed: &[u8], context: &[u8]) -> Result<Vec<u8>> {
        if sealed.len() < NONCE_LEN {
            return Err(Error::internal("sealed secret too short"));
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        self.cipher
            .decrypt(XNonce::from_slice(nonce), Payload { msg: body, aad: context })
            .map_err(|_| Error::internal("a stored secret does not open with the current --secrets-key-file"))
    }
}

/// Why the key file could not be read or made ([`Secrets::load_or_create`]); the text names it.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// The file cannot be read, or the new one cannot be written.
    #[error("--secrets-key-file {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// The file does not hold a key.
    #[error("--secrets-key-file {}: {why}", path.display())]
    Invalid { path: PathBuf, why: BadKey },
}

/// What is wrong with the text of a key file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadKey {
    /// Not hexadecimal.
    #[error("is not 64 hex characters")]
    NotHex,
    /// Hexadecimal of another length than 32 bytes.
    #[error("is not 64 hex characters (a 256-bit key)")]
    Length,
}

/// The key file in use: `file` (`--secrets-key-file`), or `DATA_DIR/secrets.key`.
pub fn key_path(file: Option<&Path>, data_dir: &Path) -> PathBuf {
    file.map_or_else(|| data_dir.join(DEFAULT_KEY_FILE), Path::to_path_buf)
}

fn parse_key(text: &str) -> std::result::Result<[u8; 32], BadKey> {
    let bytes = hex::decode(text.trim()).map_err(|_| BadKey::NotHex)?;
    bytes.try_into().map_err(|_| BadKey::Length)
}

fn generate(path: &Path) -> std::io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(std::io::Error::other)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options.open(path)?;
    f.write_all(format!("{}\n", hex::encode(key)).as_bytes())?;
    f.sync_all()?;
    Ok(key)
}

fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!(path = %path.display(), "the secrets key file is readable by other users; chmod 600 it");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_context() {
        let s = Secrets::from_key(&[7; 32]);
        let sealed = s.seal(b"123:abc", b"replica-1").unwrap();
        assert_eq!(s.open(&sealed, b"replica-1").unwrap(), b"123:abc");
        assert!(s.open(&sealed, b"replica-2").is_err());
        assert!(Secrets::from_key(&[8; 32]).open(&sealed, b"replica-1").is_err());
        assert!(!sealed.windows(7).any(|w| w == b"123:abc"));
    }

    #[test]
    fn the_key_file_is_generated_with_mode_600_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let a = Secrets::load_or_create(None, dir.path()).unwrap();
        let sealed = a.seal(b"t", b"c").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(DEFAULT_KEY_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let b = Secrets::load_or_create(None, dir.path()).unwrap();
        assert_eq!(b.open(&sealed, b"c").unwrap(), b"t");
        std::fs::write(dir.path().join("bad.key"), "not hex").unwrap();
        let bad = Secrets::load_or_create(Some(&dir.path().join("bad.key")), dir.path()).unwrap_err();
        assert!(matches!(bad, KeyFileError::Invalid { why: BadKey::NotHex, .. }), "{bad}");
    }
}
