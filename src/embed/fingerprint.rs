//! The fingerprint of an in-process model: what tells two servers that they compute the same
//! vectors for the same text (a replica bundle's vectors are reused only then, see
//! `service::bundle`).
//!
//! It is `sha256:` and the hex SHA-256 over the model directory's files, taken in the order of
//! their paths relative to the directory (each as its path, a NUL byte, its length as a
//! little-endian `u64`, then its bytes), followed by the name of the arithmetic the encoder
//! runs in (the kernel, [`super::encoder::Kernel::arithmetic`]: `f32` and 8-bit weights give
//! vectors that differ in their last digits; the 8-bit kernel's AVX2 and VNNI paths do not; and
//! attention's products in `bf16` where a 4-bit model runs them so,
//! [`super::encoder::Encoder::arithmetic`]).
//! Hidden files (`.…`) are left out.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The fingerprint of the model directory `dir` run with `kernel` (see the module
/// documentation). Blocking: it reads every file (~90 MB for all-MiniLM-L6-v2). Errors: the
/// directory or one of its files cannot be read.
pub fn of_dir(dir: &Path, kernel: &str) -> std::io::Result<String> {
    let mut files = Vec::new();
    walk(dir, dir, &mut files)?;
    files.sort();
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for rel in files {
        let mut file = std::fs::File::open(dir.join(&rel))?;
        let len = file.metadata()?.len();
        hash.update(rel.to_string_lossy().as_bytes());
        hash.update([0u8]);
        hash.update(len.to_le_bytes());
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hash.update(&buf[..n]);
        }
    }
    hash.update(kernel.as_bytes());
    Ok(format!("sha256:{}", hex::encode(hash.finalize())))
}

/// The files under `at`, as paths relative to `root`.
fn walk(root: &Path, at: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(at)? {
        let path = entry?.path();
        if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
            continue;
        }
        if path.is_dir() {
            walk(root, &path, out)?;
        } else {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_follows_the_files_and_the_kernel() {
        let dir = std::env::temp_dir().join(format!("replicad-fingerprint-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a.json"), b"{}").unwrap();
        std::fs::write(dir.join("sub/w.bin"), b"weights").unwrap();
        let first = of_dir(&dir, "f32").unwrap();
        assert!(first.starts_with("sha256:") && first.len() == 7 + 64);
        assert_eq!(of_dir(&dir, "f32").unwrap(), first, "the same files give the same fingerprint");
        assert_ne!(of_dir(&dir, "int8").unwrap(), first, "the kernel counts");
        std::fs::write(dir.join("sub/w.bin"), b"weightz").unwrap();
        assert_ne!(of_dir(&dir, "f32").unwrap(), first, "a changed file counts");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
