//! What one run of [`super::run`] reports: how the adapter ended ([`Termination`]), what
//! stopped it ([`Stop`]), and what its process tree used ([`Resources`]).

use super::StdinError;
use crate::signal::Signal;
use std::time::Duration;

/// How the adapter ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It exited with this code.
    Exited(i32),
    /// It was killed by this signal.
    Signaled(Signal),
    /// It could not be reaped in time (stuck in the kernel after SIGKILL).
    Unreaped,
    /// It was never started: the dispatcher was interrupted first.
    NotStarted,
}

/// Why the dispatcher stopped the adapter, when it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The deadline passed.
    Timeout,
    /// stdout went past the cap.
    OutputCap,
    /// The dispatcher received this signal and forwarded it.
    Interrupted(Signal),
}

/// Everything observed about one run.
#[derive(Debug, Clone)]
pub struct Finished {
    pub termination: Termination,
    /// Set when the dispatcher stopped the adapter; the first reason wins.
    pub stopped: Option<Stop>,
    /// stdout, at most `max_stdout_bytes` of it.
    pub stdout: Vec<u8>,
    /// How many stdout bytes were read in all (more than the cap when it was hit).
    pub stdout_bytes: u64,
    /// The last [`STDERR_KEEP_BYTES`] of stderr, raw: redact all of it, then cut to
    /// [`STDERR_TAIL_BYTES`] (see [`tail_str`]).
    pub stderr_tail: Vec<u8>,
    /// More was written to stderr than `stderr_tail` holds.
    pub stderr_truncated: bool,
    /// How many bytes were written to stderr in all.
    pub stderr_bytes: u64,
    pub stdin_bytes_written: u64,
    /// Set when writing stdin failed: [`StdinError::BrokenPipe`] when the adapter closed it
    /// early (normal).
    pub stdin_error: Option<StdinError>,
    pub duration: Duration,
    /// Processes still alive after the adapter was gone (and the leak window), all killed.
    pub leaked_processes: usize,
    /// What the whole tree used (SPEC §13 "Reported"); zero when nothing was started
    /// ([`Finished::resources_used`]).
    pub resources: Resources,
}

/// What the adapter's whole process tree used, from `getrusage(RUSAGE_CHILDREN)` before the
/// spawn and after the sweep: the dispatcher is a child subreaper, so every process of the
/// tree is reaped by it or by a reaped ancestor, and the kernel folds each one's usage into
/// its reaper's children totals.
///
/// The times are the difference (summed over the tree). `max_rss_bytes` is the kernel's
/// maximum over every process reaped so far — the largest any single process of the tree
/// reached, not their sum — which is this run's because a process runs one adapter (see the
/// module's invariants), unless the dispatcher inherited a larger one across `execve`: then it
/// is the leader's own peak (its waited-for descendants included), from its reap. A process
/// that could not be reaped (`Termination::Unreaped`) is not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// The largest resident set size of any single process of the tree, in bytes.
    pub max_rss_bytes: u64,
    /// CPU time in user mode, summed over the tree, in milliseconds.
    pub user_ms: u64,
    /// CPU time in the kernel, summed over the tree, in milliseconds.
    pub system_ms: u64,
}

/// A resource usage's peak resident set, in bytes (`ru_maxrss` is in KiB on Linux).
pub(super) fn max_rss_bytes(usage: &libc::rusage) -> u64 {
    u64::try_from(usage.ru_maxrss)
        .unwrap_or(0)
        .saturating_mul(1024)
}

/// `getrusage(RUSAGE_CHILDREN)` as (max RSS in bytes, user µs, system µs).
pub(super) fn children_usage() -> (u64, u64, u64) {
    // SAFETY: `rusage` is plain old data, valid when zeroed; getrusage(2) writes into the one
    // we pass and reads nothing else. RUSAGE_CHILDREN cannot fail.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) != 0 {
            return (0, 0, 0);
        }
        usage
    };
    let micros = |t: libc::timeval| {
        u64::try_from(t.tv_sec)
            .unwrap_or(0)
            .saturating_mul(1_000_000)
            .saturating_add(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    (
        max_rss_bytes(&usage),
        micros(usage.ru_utime),
        micros(usage.ru_stime),
    )
}

impl Resources {
    /// The tree's usage since `before` (a [`children_usage`] taken before the spawn).
    /// `leader_max_rss` is the leader's own peak from its reap, for when the children's
    /// maximum did not move: a process that ran something larger before it `exec`ed the
    /// dispatcher (`sh -c 'big; exec parent-tool-dispatch …'`, `cargo run`) hands that peak on
    /// — `execve` keeps the children's totals — and it would stand for the adapter's.
    pub(super) fn since(before: (u64, u64, u64), leader_max_rss: u64) -> Resources {
        let (max_rss_bytes, user, system) = children_usage();
        let max_rss_bytes = if max_rss_bytes > before.0 {
            // A process of this run went past everything before it: the tree's peak.
            max_rss_bytes
        } else {
            leader_max_rss
        };
        Resources {
            max_rss_bytes,
            user_ms: user.saturating_sub(before.1) / 1000,
            system_ms: system.saturating_sub(before.2) / 1000,
        }
    }
}

impl Finished {
    /// What the tree used, when a process was started at all.
    pub fn resources_used(&self) -> Option<Resources> {
        (self.termination != Termination::NotStarted).then_some(self.resources)
    }
}
