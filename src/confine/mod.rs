//! Confinement of what the dispatcher starts (SPEC §13): the building blocks `exec/` puts in
//! the child's one ordered set-up (SPEC §13.1).
//!
//! Each mechanism has a file: [`options`] (the flags and variables, checked), [`landlock`]
//! (+ [`interpreter`], the program's `#!` chain), [`seccomp`], [`cgroup`], [`rlimit`],
//! [`netns`]; [`probe`] proves each on the running kernel (what `doctor` runs). [`Prepared`]
//! gathers them for one run.
//!
//! Invariants:
//! - two halves per mechanism: a *prepare* step in the parent, before the fork, that does
//!   everything that can allocate or fail for a reason other than the kernel refusing (open
//!   descriptors, build the Landlock ruleset, compile the BPF program, make and limit the
//!   cgroup, format the uid map); and a *child* step that makes system calls only — no
//!   allocation, no lock, no panic path — so it is safe between `fork` and `execve` in a
//!   multi-threaded parent;
//! - fail closed: a requested mechanism that cannot be put in place is an error naming what is
//!   missing ([`Unavailable::missing`]), before anything runs; a child step that fails is a
//!   [`ChildError`] naming the step, and the adapter must not be executed then;
//! - the child steps are called in SPEC §13.1's order: [`Prepared::join_cgroups`] →
//!   [`Prepared::set_rlimits`] → [`Prepared::enter_namespaces`] → (`close_range`, `exec/`'s) →
//!   [`set_no_new_privs`] → [`Prepared::restrict_landlock`] → [`Prepared::apply_seccomp`].
//!
//! Must not: spawn, wait for or signal the adapter (that is `exec/`), know JSON or envelopes.

pub mod cgroup;
pub mod interpreter;
pub mod landlock;
pub mod netns;
pub mod options;
pub mod probe;
pub mod rlimit;
pub mod seccomp;

pub use options::{Network, OptionError, OptionName, Options, RawOptions};

use cgroup::{CallCgroup, Host, Limits};
use landlock::{FsRequest, PreparedLandlock};
use netns::PreparedNetns;
use rlimit::Rlimits;
use rustix::io::Errno;
use seccomp::Filter;
use std::ffi::OsStr;
use std::fmt;
use std::path::Path;

/// A child-side step of SPEC §13.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    JoinCgroups,
    Rlimits,
    Namespaces,
    NoNewPrivs,
    Landlock,
    Seccomp,
    /// A probe's control: something the mechanism must still allow did not work.
    Control,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::JoinCgroups => "join_cgroups",
            Step::Rlimits => "rlimits",
            Step::Namespaces => "namespaces",
            Step::NoNewPrivs => "no_new_privs",
            Step::Landlock => "landlock",
            Step::Seccomp => "seccomp",
            Step::Control => "control",
        }
    }

    pub(crate) fn from_index(i: u8) -> Step {
        match i {
            0 => Step::JoinCgroups,
            1 => Step::Rlimits,
            2 => Step::Namespaces,
            3 => Step::NoNewPrivs,
            4 => Step::Landlock,
            5 => Step::Seccomp,
            _ => Step::Control,
        }
    }

    pub(crate) fn index(self) -> u8 {
        self as u8
    }

    /// What SPEC §13's `error.details.missing` names when the kernel refused this step in
    /// the child (the adapter was not started).
    pub fn missing(self) -> &'static str {
        match self {
            Step::JoinCgroups => "cgroup_join",
            Step::Rlimits => "rlimits",
            Step::Namespaces => "network_namespace",
            Step::NoNewPrivs => "no_new_privs",
            Step::Landlock => "landlock",
            Step::Seccomp => "seccomp",
            Step::Control => "control",
        }
    }

    /// The step a byte written by [`ChildError::code`] names.
    pub fn from_code(code: u8) -> Step {
        Step::from_index(code)
    }
}

/// A child-side step the kernel refused. Plain data (no allocation), so the child can carry it
/// to the exec-error pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildError {
    pub step: Step,
    pub errno: Errno,
}

impl ChildError {
    /// One byte naming the step, for a child to write to its parent (no allocation).
    pub fn code(&self) -> u8 {
        self.step.index()
    }
}

impl fmt::Display for ChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "confinement step {} failed: {}",
            self.step.as_str(),
            self.errno
        )
    }
}

impl std::error::Error for ChildError {}

impl From<ChildError> for std::io::Error {
    fn from(e: ChildError) -> std::io::Error {
        std::io::Error::from_raw_os_error(e.errno.raw_os_error())
    }
}

/// `no_new_privs` (child side: one `prctl`).
pub fn set_no_new_privs() -> Result<(), ChildError> {
    rustix::thread::set_no_new_privs(true).map_err(|errno| ChildError {
        step: Step::NoNewPrivs,
        errno,
    })
}

/// Requested confinement that this host cannot put in place: every missing piece, each with
/// its `error.details.missing` name and a sentence for the human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// `(missing, message)` pairs, in the order of the mechanisms.
    pub missing: Vec<(String, String)>,
}

impl Unavailable {
    /// The names for `error.details.missing`.
    pub fn missing(&self) -> Vec<&str> {
        self.missing.iter().map(|(m, _)| m.as_str()).collect()
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("confinement is unavailable: ")?;
        for (i, (_, message)) in self.missing.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(message)?;
        }
        Ok(())
    }
}

impl std::error::Error for Unavailable {}

/// What one run's child needs besides the options.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The program `execve` will run.
    pub program: &'a Path,
    /// The child's `PATH`.
    pub path_var: Option<&'a OsStr>,
    /// The file transport's private folder, if any.
    pub transport_dir: Option<&'a Path>,
    /// Where the private `TMPDIR` is made.
    pub tmp_parent: &'a Path,
}

/// Everything prepared for one confined run (before the fork). Dropping it removes the
/// private `TMPDIR` and the call's cgroup: keep it until the adapter's tree is reaped.
#[derive(Debug)]
pub struct Prepared {
    pub landlock: Option<PreparedLandlock>,
    pub seccomp: Filter,
    pub cgroup: Option<CallCgroup>,
    pub rlimits: Rlimits,
    pub netns: Option<PreparedNetns>,
}

/// The limit SPEC §13's `error.details.limit` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Memory,
    Pids,
    FileSize,
    /// Named by SPEC §13, never inferred here: a hit `RLIMIT_NOFILE` is only an `EMFILE`
    /// inside the adapter, which leaves no trace the dispatcher can read.
    OpenFiles,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Memory => "memory",
            Limit::Pids => "pids",
            Limit::FileSize => "file_size",
            Limit::OpenFiles => "open_files",
        }
    }
}

impl Prepared {
    /// Prepare every mechanism `options` asks for; `Ok(None)` when it asks for none. All
    /// missing pieces are collected, not only the first. `host` is asked for the cgroup
    /// mounts only when a cgroup limit is asked for (reading them parses `/proc/self/mountinfo`).
    pub fn prepare(
        options: &Options,
        run: &Run<'_>,
        host: impl FnOnce() -> Host,
    ) -> Result<Option<Prepared>, Unavailable> {
        if !options.is_requested() {
            return Ok(None);
        }
        let mut missing: Vec<(String, String)> = Vec::new();
        let landlock = if options.wants_landlock() {
            let request = FsRequest {
                read: &options.fs_read,
                write: &options.fs_write,
                program: run.program,
                path_var: run.path_var,
                transport_dir: run.transport_dir,
                tmp_parent: run.tmp_parent,
            };
            landlock::prepare(&request)
                .map_err(|e| missing.push((e.missing(), e.to_string())))
                .ok()
        } else {
            None
        };
        let seccomp = seccomp::compile(options.network)
            .map_err(|e| missing.push(("seccomp".into(), e.to_string())));
        let cgroup = if options.wants_cgroup() {
            let limits = Limits {
                memory_bytes: options.limit_memory_bytes,
                pids: options.limit_pids,
            };
            CallCgroup::create(&host(), &limits)
                .map_err(|errors| {
                    for e in errors {
                        missing.push((e.missing(), e.to_string()));
                    }
                })
                .ok()
        } else {
            None
        };
        let netns = (options.network == Network::None).then(PreparedNetns::prepare);
        match seccomp {
            Ok(seccomp) if missing.is_empty() => Ok(Some(Prepared {
                landlock,
                seccomp,
                cgroup,
                rlimits: Rlimits {
                    open_files: options.limit_open_files,
                    file_size_bytes: options.limit_file_size_bytes,
                },
                netns,
            })),
            _ => Err(Unavailable { missing }),
        }
    }

    /// Child step 1: join the call's cgroups.
    pub fn join_cgroups(&self) -> Result<(), ChildError> {
        match &self.cgroup {
            Some(c) => c.join().map_err(|errno| ChildError {
                step: Step::JoinCgroups,
                errno,
            }),
            None => Ok(()),
        }
    }

    /// Child step 2: the per-process limits.
    pub fn set_rlimits(&self) -> Result<(), ChildError> {
        self.rlimits.apply().map_err(|errno| ChildError {
            step: Step::Rlimits,
            errno,
        })
    }

    /// Child step 3: the new namespaces.
    pub fn enter_namespaces(&self) -> Result<(), ChildError> {
        match &self.netns {
            Some(n) => n.enter().map_err(|errno| ChildError {
                step: Step::Namespaces,
                errno,
            }),
            None => Ok(()),
        }
    }

    /// Child step 5 (after `close_range` and [`set_no_new_privs`]): Landlock.
    pub fn restrict_landlock(&self) -> Result<(), ChildError> {
        match &self.landlock {
            Some(l) => l.enforce().map_err(|errno| ChildError {
                step: Step::Landlock,
                errno,
            }),
            None => Ok(()),
        }
    }

    /// Child step 6, the last before `execve`: the seccomp filter.
    pub fn apply_seccomp(&self) -> Result<(), ChildError> {
        self.seccomp.apply().map_err(|errno| ChildError {
            step: Step::Seccomp,
            errno,
        })
    }

    /// Every child step, in SPEC §13.1's order, for callers without a `close_range` of their
    /// own to put between them (the tests, `doctor`'s probes).
    pub fn apply_all(&self) -> Result<(), ChildError> {
        self.join_cgroups()?;
        self.set_rlimits()?;
        self.enter_namespaces()?;
        set_no_new_privs()?;
        self.restrict_landlock()?;
        self.apply_seccomp()
    }

    /// Kill every process in the call's cgroup through `cgroup.kill` (SPEC §13: "in the kill
    /// ladder where available"): cgroup v2 only; `false` when there is no v2 cgroup to kill
    /// through (the ladder's own signals and sweep end the tree then).
    pub fn kill_cgroup(&self) -> bool {
        self.cgroup.as_ref().is_some_and(CallCgroup::kill)
    }

    /// The private `TMPDIR` (Landlock only): the adapter's `TMPDIR`, removed when this value
    /// is dropped.
    pub fn tmpdir(&self) -> Option<&Path> {
        self.landlock.as_ref().map(PreparedLandlock::tmpdir)
    }

    /// The mechanisms in force, in SPEC §13.1's order (for `diagnostics.dispatch.confinement`).
    pub fn mechanisms(&self) -> Vec<&'static str> {
        let mut in_force = Vec::new();
        if self.cgroup.is_some() {
            in_force.push("cgroup");
        }
        if !self.rlimits.is_empty() {
            in_force.push("rlimits");
        }
        if self.netns.is_some() {
            in_force.push("network_namespace");
        }
        in_force.push("no_new_privs");
        if self.landlock.is_some() {
            in_force.push("landlock");
        }
        in_force.push("seccomp");
        in_force
    }

    /// The limit that was hit, when the adapter failed (SPEC §13 "A limit that was hit"):
    /// the cgroup counters first, then death by `SIGXFSZ` under `--limit-file-size`.
    pub fn limit_hit(&self, killed_by_signal: Option<i32>) -> Option<Limit> {
        if let Some(hit) = self.cgroup.as_ref().and_then(|c| c.counters().limit_hit()) {
            return Some(match hit {
                cgroup::LimitHit::Memory => Limit::Memory,
                cgroup::LimitHit::Pids => Limit::Pids,
            });
        }
        let xfsz = killed_by_signal == Some(libc::SIGXFSZ);
        (xfsz && self.rlimits.file_size_bytes.is_some()).then_some(Limit::FileSize)
    }
}

#[cfg(test)]
mod tests;
