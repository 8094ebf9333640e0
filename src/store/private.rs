//! Files at rest are the server's OS user's alone: every tenant's data, the
//! uploads and the key sealing channel tokens live in the data directory, so other local users
//! must not read them, whatever the umask the server was started with.
//!
//! - [`restrict_umask`]: the process creates every file `0600` and every directory `0700` (the
//!   store, uploads, the search index, backups, exports, restored directories): one setting
//!   instead of a mode at each of the places that create files, including those inside redb and
//!   tantivy.
//! - [`private_dir`]: the data directory is created `0700`; an existing one that group or others
//!   may enter is **tightened** to `0700`, with a warning in the log. The directory is the
//!   server's own (as `StateDirectoryMode=0700` of the systemd unit makes it), and a
//!   directory others can enter exposes every file below it, whatever the files' own modes
//!   (files written by older versions were `0644`). A directory the process cannot change (not
//!   its own) is left as it is, with a warning.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// Mode of the data directory.
pub const DIR_MODE: u32 = 0o700;

/// Sets the process's umask to `077`. Call it first thing in `main`, before any thread starts
/// (the umask is process-wide).
pub fn restrict_umask() {
    // SAFETY: umask has no preconditions; it only swaps the process's file-creation mask.
    unsafe {
        libc::umask(0o077);
    }
}

/// Creates `dir` (and missing parents) with mode `0700`, or takes group and other access away
/// from an existing `dir` (see the module documentation).
pub fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    let shown = dir.display().to_string();
    match std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & DIR_MODE)) {
        Ok(()) => {
            tracing::warn!(dir = %shown, "the data directory was open to other users (mode {mode:o}): it is now 0700")
        }
        Err(e) => tracing::warn!(
            dir = %shown,
            error = %e,
            "the data directory is open to other users (mode {mode:o}) and cannot be made 0700: other local users may read it"
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_data_directory_is_0700_and_an_open_one_is_tightened() {
        let root = tempfile::tempdir().unwrap();
        let fresh = root.path().join("a/b");
        private_dir(&fresh).unwrap();
        assert_eq!(mode(&fresh), 0o700);
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&open).unwrap();
        assert_eq!(mode(&open), 0o700);
    }
}
