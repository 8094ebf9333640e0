//! What `replicad --version` prints: the version, the git commit of the build (`build.rs`;
//! `unknown` when built outside a git checkout) and the store schema version this binary
//! writes (a store of a newer schema is refused at start).

use std::sync::LazyLock;

/// The git commit the binary was built from (12 hex digits), or `unknown`.
pub const GIT_COMMIT: &str = env!("REPLICAD_GIT_COMMIT");

/// `0.1.0 (commit 0123456789ab, store schema 2)`.
pub static TEXT: LazyLock<String> = LazyLock::new(|| {
    format!("{} (commit {GIT_COMMIT}, store schema {})", env!("CARGO_PKG_VERSION"), crate::store::SCHEMA_VERSION)
});

/// [`TEXT`] as the `&'static str` clap takes.
pub fn text() -> &'static str {
    LazyLock::force(&TEXT).as_str()
}
