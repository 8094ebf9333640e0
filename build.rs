//! Records the git commit the binary is built from (`replicad --version`) in the environment
//! variable `REPLICAD_GIT_COMMIT` of the build. Tolerates a missing `.git` or `git` (a source
//! tarball): the commit is then `unknown`, or the value of `REPLICAD_GIT_COMMIT` when set.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok().filter(|o| o.status.success())?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=REPLICAD_GIT_COMMIT");
    let commit = std::env::var("REPLICAD_GIT_COMMIT").ok().filter(|c| !c.is_empty());
    let commit = commit.or_else(|| {
        // Rebuild when the checked-out commit moves (HEAD, the branch it names, packed refs).
        let head = git(&["rev-parse", "--git-path", "HEAD"])?;
        let mut watched = vec![head];
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.extend(git(&["rev-parse", "--git-path", &branch]));
        }
        watched.extend(git(&["rev-parse", "--git-path", "packed-refs"]));
        for path in watched.iter().filter(|p| Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
        git(&["rev-parse", "--short=12", "HEAD"])
    });
    println!("cargo:rustc-env=REPLICAD_GIT_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
}
