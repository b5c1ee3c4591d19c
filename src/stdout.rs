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

/// Write `bytes` to stdout and flush. `Err` is the exit status after a failure, already
/// reported on stderr ([`failed`]); `what` names the output in that report ("the report").
pub fn write(bytes: &[u8], what: &str) -> Result<(), u8> {
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
