//! The child side of the extraction sandbox: `replicad extract-sandboxed FORMAT`.
//!
//! It confines itself first (the rlimits were set by the parent before `exec`):
//! - **Landlock** (Linux 5.13+; best effort on older ABIs): every filesystem access right is
//!   handled and none granted, so no file can be opened, created or executed; TCP bind and
//!   connect are handled and none granted (ABI 4+); signals and abstract unix sockets are
//!   scoped to itself (ABI 6+), so it cannot signal the server.
//! - **seccomp** (x86_64 and aarch64): sockets, `exec`, `ptrace`, other processes' memory,
//!   namespaces, mounts, `bpf`, `perf_event_open`, `io_uring` and `userfaultfd` fail with
//!   `EPERM`. `PR_SET_NO_NEW_PRIVS` is set by both.
//!
//! Then it reads the document from stdin, extracts it with `super::super::extract::extract`
//! and writes the JSON of its [`Answer`] on stdout. It exits 0 whenever it
//! could write an answer; any other end (a signal, an abort) is read by the parent as the
//! document being unsafe to read.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::ExitCode;

use super::super::extract::{self, ExtractError, Extracted};
use super::super::formats::{Format, FORMATS};

/// The child's answer: the document's text, or why it has none (its message is the entry's
/// `error.message`).
pub type Answer = Result<Extracted, ExtractError>;

/// Runs the child: confine, read stdin, extract `format_name` (a `formats` short name), answer
/// on stdout. Exit code 2 for a format name no row of `formats::FORMATS` has.
pub fn run(format_name: &str) -> ExitCode {
    let Some(format) = FORMATS.iter().find(|f| f.name == format_name).map(|f| f.format) else {
        eprintln!("replicad extract-sandboxed: unknown format {format_name:?}");
        return ExitCode::from(2);
    };
    let confined = confine();
    let answer = match read_input() {
        Ok(bytes) => extract_logged(format, &bytes, &confined),
        Err(e) => Err(ExtractError::NotReceived(e.to_string())),
    };
    let mut out = std::io::stdout().lock();
    match serde_json::to_writer(&mut out, &answer).map_err(std::io::Error::from).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("replicad extract-sandboxed: cannot answer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn read_input() -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::stdin().lock().read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn extract_logged(format: Format, bytes: &[u8], confined: &str) -> Answer {
    let result = extract::extract(format, bytes);
    if let Err(e) = &result {
        eprintln!("replicad extract-sandboxed ({confined}): {e}");
    }
    result
}

/// Applies Landlock and seccomp as far as the kernel has them; says which took effect.
fn confine() -> String {
    let landlock = match landlock_restrict() {
        Ok(status) => format!("landlock {status:?}"),
        Err(e) => format!("landlock unavailable ({e})"),
    };
    let seccomp = match seccomp_restrict() {
        Ok(()) => "seccomp".to_string(),
        Err(e) => format!("seccomp unavailable ({e})"),
    };
    format!("{landlock}, {seccomp}")
}

fn landlock_restrict() -> Result<landlock::RulesetStatus, landlock::RulesetError> {
    use landlock::{Access, AccessFs, AccessNet, Ruleset, RulesetAttr, Scope, ABI};
    let abi = ABI::V6;
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))?
        .handle_access(AccessNet::from_all(abi))?
        .scope(Scope::from_all(abi))?
        .create()?
        .restrict_self()?;
    Ok(status.ruleset)
}

/// The system calls the child never needs.
fn denied() -> Vec<i64> {
    use libc::*;
    let mut calls = vec![
        SYS_socket,
        SYS_socketpair,
        SYS_connect,
        SYS_bind,
        SYS_listen,
        SYS_accept,
        SYS_accept4,
        SYS_execve,
        SYS_execveat,
        SYS_ptrace,
        SYS_process_vm_readv,
        SYS_process_vm_writev,
        SYS_unshare,
        SYS_setns,
        SYS_mount,
        SYS_bpf,
        SYS_perf_event_open,
        SYS_io_uring_setup,
        SYS_userfaultfd,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([SYS_fork, SYS_vfork]);
    calls
}

fn seccomp_restrict() -> Result<(), seccompiler::Error> {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = denied().into_iter().map(|c| (c, vec![])).collect();
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)?;
    let program: BpfProgram = filter.try_into()?;
    seccompiler::apply_filter(&program)
}
