//! Text extraction in a child process, so that no document can take the server down.
//!
//! The parsers of PDF, DOCX, EPUB and HTML are libraries we do not control: a PDF whose form
//! draws itself made one recurse until the stack overflowed, a DOCX declaring a 1 TiB member
//! made one reserve that much, 100,000 nested `<span>`s overflowed the HTML parser's stack and
//! nested `<div>`s cost time quadratic in their depth. In the server's process each of these
//! aborted every tenant's requests. So the server never parses a document: it runs the same
//! binary as `replicad extract-sandboxed FORMAT` ([`child::run`]), writes the bytes to its
//! stdin and reads its [`child::Answer`] (as JSON) from its stdout. Fetching
//! stays in the server (it needs the network and the address checks of `super::fetch`);
//! parsing does not.
//!
//! The child runs under these limits:
//! - death with the server (`PR_SET_PDEATHSIG`), and rlimits, set between `fork` and `exec`:
//!   address space ([`Limits::memory_mib`], 1 GiB by
//!   default), CPU time ([`Limits::cpu_seconds`], 120 s: `SIGXCPU`, then `SIGKILL` a second
//!   later), main-thread stack (8 MiB, whatever the server's own limit), no core files, no
//!   files written, 16 descriptors;
//! - a wall-clock limit of the CPU limit plus [`WALL_MARGIN`], after which it is killed, and a
//!   cap on what it may write back ([`MAX_OUTPUT_BYTES`]);
//! - no environment, and, where the kernel has them, Landlock (no file may be opened, no TCP
//!   port bound or connected, no signal sent outside itself) and a seccomp filter (no sockets,
//!   no `exec`, no `ptrace`, no namespaces, no `io_uring`): see [`child`].
//!
//! Whatever happens to the child — a stack overflow, a failed allocation, a time limit, a
//! panic, a signal — [`Sandbox::extract`] answers a [`SandboxError`] whose text is for the
//! entry's `error.message` ("the file could not be read safely: …") and the server carries on.
//! Measured cost per file: see docs/knowledge-base.md.

pub mod child;

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::extract::{ExtractError, Extracted, MAX_TEXT_CHARS};
use super::formats::Format;

/// The hidden subcommand the child runs as.
pub const SUBCOMMAND: &str = "extract-sandboxed";
/// Time a child may take beyond its CPU limit (reading its input, writing its output).
pub const WALL_MARGIN: Duration = Duration::from_secs(10);
/// Most bytes a child may write back: the JSON of [`MAX_TEXT_CHARS`] characters of up to four
/// bytes each, with room for escapes. A child writing more is killed.
pub const MAX_OUTPUT_BYTES: usize = MAX_TEXT_CHARS * 8 + (64 << 10);
/// Stack of the child's main thread, in bytes.
const STACK_BYTES: u64 = 8 << 20;
/// What is kept of the child's stderr (its last words: a panic, "overflowed its stack").
const MAX_STDERR_BYTES: u64 = 16 << 10;

/// The resources one extraction may use (flags `--extract-memory-mib`, `--extract-cpu-seconds`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Address space of the child, in MiB.
    pub memory_mib: u64,
    /// CPU time of the child, in seconds.
    pub cpu_seconds: u64,
}

/// Runs extractions in child processes of `program` (the server's own binary).
#[derive(Debug, Clone)]
pub struct Sandbox {
    program: PathBuf,
    limits: Limits,
}

/// Why [`Sandbox::extract`] has no text; the text is for the entry's `error.message`.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The extractor's own refusal (corrupt, empty, too long, …).
    #[error(transparent)]
    Refused(ExtractError),
    /// The child could not be started or waited for.
    #[error("the {what} could not be read: the extractor did not start ({source})")]
    Start { what: &'static str, source: std::io::Error },
    /// The child stopped, or was stopped, without an answer.
    #[error("the {what} could not be read safely: {why}")]
    Unsafe { what: &'static str, why: Stopped },
}

/// Why a child gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// It ran past the wall-clock limit (in seconds) and was killed.
    #[error("reading it took longer than {0} s")]
    WallClock(u64),
    /// It wrote more than [`MAX_OUTPUT_BYTES`] and was killed.
    #[error("its text is longer than {MAX_TEXT_CHARS} characters")]
    TooLong,
    /// Its answer is not a whole [`child::Answer`].
    #[error("the extractor's answer was cut short")]
    CutShort,
    /// It overflowed its stack.
    #[error("its structure nests too deeply")]
    TooDeep,
    /// An allocation failed under the memory limit (in MiB).
    #[error("reading it needed more than {0} MiB of memory")]
    Memory(u64),
    /// It reached the CPU limit (in seconds).
    #[error("reading it took more than {0} s")]
    CpuTime(u64),
    /// It died of another signal.
    #[error("the extractor stopped on signal {0}")]
    Signal(i32),
    /// It exited with another code than 0.
    #[error("the extractor stopped with exit code {0}")]
    Exit(i32),
}

/// What the child did, as read by the parent.
struct Exit {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
}

impl Sandbox {
    /// A sandbox running this very binary: `/proc/self/exe` where there is one (it stays the
    /// running binary when a package upgrade replaces the file), else its path. Errors when
    /// neither can be found.
    pub fn new(limits: Limits) -> std::io::Result<Sandbox> {
        let own = PathBuf::from("/proc/self/exe");
        let program = match own.exists() {
            true => own,
            false => std::env::current_exe()?,
        };
        Ok(Sandbox::at(program, limits))
    }

    /// A sandbox running `program`, a replicad binary (benchmarks and tools that are not it).
    pub fn at(program: PathBuf, limits: Limits) -> Sandbox {
        Sandbox { program, limits }
    }

    /// Extracts the text of `bytes` in `format` in a child process. `what` names the document
    /// in messages (`file`, `page`). Errors: the extractor's own (corrupt, empty, too long, …)
    /// or why the child was stopped.
    pub async fn extract(&self, format: Format, bytes: Vec<u8>, what: &'static str) -> Result<Extracted, SandboxError> {
        let wall = Duration::from_secs(self.limits.cpu_seconds) + WALL_MARGIN;
        let exit = match tokio::time::timeout(wall, self.run(format, bytes)).await {
            Ok(Ok(exit)) => exit,
            Ok(Err(source)) => return Err(SandboxError::Start { what, source }),
            // The child is killed when its handle drops (`kill_on_drop`).
            Err(_) => return Err(SandboxError::Unsafe { what, why: Stopped::WallClock(wall.as_secs()) }),
        };
        self.verdict(exit, what)
    }

    async fn run(&self, format: Format, bytes: Vec<u8>) -> std::io::Result<Exit> {
        let mut child = self.command(format).spawn()?;
        let (mut stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let write = async move {
            if let Some(stdin) = stdin.as_mut() {
                // A child that stopped early closes the pipe: its exit status says why.
                let _ = stdin.write_all(&bytes).await;
            }
            drop(stdin);
        };
        let pid = child.id();
        let kill = move || {
            if let Some(pid) = pid {
                // SAFETY: a plain system call; the child is not reaped yet, so `pid` is still it.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        };
        let read_out = read_capped(stdout, MAX_OUTPUT_BYTES as u64 + 1, kill);
        let read_err = read_capped(stderr, MAX_STDERR_BYTES, || {});
        let ((), stdout, stderr) = tokio::join!(write, read_out, read_err);
        let status = child.wait().await?;
        Ok(Exit { status, stdout, stderr: String::from_utf8_lossy(&stderr).into_owned() })
    }

    fn command(&self, format: Format) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.arg(SUBCOMMAND).arg(format.info().name);
        cmd.env_clear().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let (limits, server) = (self.limits, std::process::id() as libc::pid_t);
        // SAFETY: the closure runs between fork and exec and calls only prctl, getppid and
        // setrlimit, which are async-signal-safe; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || prepare_child(limits, server));
        }
        cmd
    }

    /// Reads the child's exit: its JSON answer, or why it stopped.
    fn verdict(&self, exit: Exit, what: &'static str) -> Result<Extracted, SandboxError> {
        if exit.status.success() {
            return match serde_json::from_slice::<child::Answer>(&exit.stdout) {
                Ok(answer) => answer.map_err(SandboxError::Refused),
                Err(_) if exit.stdout.len() > MAX_OUTPUT_BYTES => {
                    Err(SandboxError::Unsafe { what, why: Stopped::TooLong })
                }
                Err(_) => Err(SandboxError::Unsafe { what, why: Stopped::CutShort }),
            };
        }
        tracing::warn!(status = %exit.status, stderr = %exit.stderr.trim_end(), "extraction child stopped");
        Err(SandboxError::Unsafe { what, why: self.reason(&exit) })
    }

    /// Why a child that did not exit cleanly stopped.
    fn reason(&self, exit: &Exit) -> Stopped {
        let Limits { memory_mib, cpu_seconds } = self.limits;
        if exit.stderr.contains("overflowed its stack") {
            return Stopped::TooDeep;
        }
        if exit.stderr.contains("memory allocation of") || exit.stderr.contains("capacity overflow") {
            return Stopped::Memory(memory_mib);
        }
        match exit.status.signal() {
            Some(libc::SIGXCPU) | Some(libc::SIGKILL) => Stopped::CpuTime(cpu_seconds),
            Some(signal) => Stopped::Signal(signal),
            None => Stopped::Exit(exit.status.code().unwrap_or(-1)),
        }
    }
}

/// Keeps the first `cap` bytes of `pipe`; when they are all read, calls `full` and reads the
/// rest into nothing until the child closes the pipe.
async fn read_capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>, cap: u64, full: impl FnOnce()) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = (&mut pipe).take(cap).read_to_end(&mut out).await;
        if out.len() as u64 == cap {
            full();
        }
        let _ = tokio::io::copy(&mut pipe, &mut tokio::io::sink()).await;
    }
    out
}

/// Runs in the child between fork and exec: it dies with the server (`PR_SET_PDEATHSIG`, so a
/// `kill -9` of the server leaves no extraction running), and gets its rlimits (see the
/// module doc).
fn prepare_child(limits: Limits, server: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: plain system calls.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() != server {
            // The server died between fork and prctl.
            libc::_exit(1);
        }
    }
    let memory = limits.memory_mib.saturating_mul(1 << 20);
    set(libc::RLIMIT_AS, memory, memory)?;
    set(libc::RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1)?;
    set(libc::RLIMIT_STACK, STACK_BYTES, STACK_BYTES)?;
    set(libc::RLIMIT_CORE, 0, 0)?;
    set(libc::RLIMIT_FSIZE, 0, 0)?;
    set(libc::RLIMIT_NOFILE, 16, 16)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type Resource = libc::c_int;

fn set(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
    let limit = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: a plain system call on a valid struct.
    match unsafe { libc::setrlimit(resource, &limit) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}
