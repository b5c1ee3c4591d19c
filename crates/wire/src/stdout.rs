//! Writing what a command prints on stdout, and saying so when that fails.
//!
//! Owns the one rule for a failed write to stdout (full, closed, a broken pipe — Rust ignores
//! `SIGPIPE`, so a reader that went away is an `EPIPE` here): one `error[stdout]: could not
//! write <what>: <OS error>` line on stderr and exit status [`exit::IO_ERROR`] (74), whatever
//! the status of what was lost. Every subcommand that prints goes through it, so none exits 0
//! with its output gone and none panics (`println!` would). It must not decide what is
//! printed, and never writes anything but the caller's bytes to stdout.

use crate::error::exit;
use std::io::{self, Write};
use std::os::fd::AsFd;

/// The pipe buffer a large write to stdout asks for: Linux's default limit for an
/// unprivileged process (`/proc/sys/fs/pipe-max-size`).
pub const PIPE_BYTES: usize = 1 << 20;

/// Before `len` bytes go to stdout: when `len` is at least [`PIPE_BYTES`] and stdout is a pipe
/// whose buffer is smaller, ask the kernel for a buffer of [`PIPE_BYTES`]. A 64 MiB envelope
/// then crosses in 64 fills of the pipe instead of 1,024 — each fill a wake-up of the reader
/// and of this process (docs/PERFORMANCE.md has what that saves). The reader sees the same
/// bytes in fewer, larger reads. The buffer is never shrunk, and a refusal (the user's pipe
/// quota, `pipe-max-size` lowered, not a pipe) is not an error: the write goes ahead as it is.
pub fn make_room(len: usize) {
    if len < PIPE_BYTES {
        return;
    }
    let out = io::stdout();
    if rustix::pipe::fcntl_getpipe_size(out.as_fd()).is_ok_and(|size| size < PIPE_BYTES) {
        let _ = rustix::pipe::fcntl_setpipe_size(out.as_fd(), PIPE_BYTES);
    }
}

/// Write `bytes` to stdout and flush. `Err` is the exit status after a failure, already
/// reported on stderr ([`failed`]); `what` names the output in that report ("the report").
pub fn write(bytes: &[u8], what: &str) -> Result<(), u8> {
    make_room(bytes.len());
    let mut out = io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|err| failed(what, &err))
}

/// [`write`], for a command's last step: `status` when the write worked, else the failure's.
pub fn print(bytes: &[u8], what: &str, status: u8) -> u8 {
    match write(bytes, what) {
        Ok(()) => status,
        Err(failure) => failure,
    }
}

/// Report a failed write to stdout on stderr; returns [`exit::IO_ERROR`]. For a caller that
/// streams to stdout itself. A stderr that fails too is not reported anywhere (and does not
/// panic, as `eprintln!` would): the exit status still says it.
pub fn failed(what: &str, err: &io::Error) -> u8 {
    let line = crate::terminal::error_line("stdout", &format!("could not write {what}: {err}"));
    let _ = writeln!(io::stderr(), "{line}");
    exit::IO_ERROR
}

/// After everything was printed: put `/dev/null` in place of stdout, so that its reader sees
/// the end of it now, while this process still has work that must not delay the answer (an
/// approval's notifier, SPEC §18). Best effort: stdout stays as it was when that fails.
pub fn close() {
    let _ = io::stdout().lock().flush();
    if let Ok(null) = rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) {
        let _ = rustix::stdio::dup2_stdout(&null);
    }
}
