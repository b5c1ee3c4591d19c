//! [`Watched`]: a child that is not an adapter run — replay's child dispatcher — started
//! through the one child-setup path (a session of its own, the parent-death signal, no
//! inherited descriptor, `execve`), stopped by the one ladder when it outlives its bound,
//! and reaped.
//!
//! Invariants:
//! - it is never swept: a process may hold many at once (replay runs cases in parallel), and
//!   what a child dispatcher starts is its own to sweep;
//! - it is signalled only while unreaped (through its pidfd, or its group by the number of
//!   its unreaped leader), so a recycled pid is never hit;
//! - dropping it unreaped kills its group (its adapters, in sessions of their own, then die
//!   of their parent-death signal).

use super::child::Setup;
use super::ladder::{walk, Rung, Target};
use super::{timespec, Pipes, SpawnError};
use crate::signal::Signal;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::OwnedFd;
use rustix::process::{kill_process_group, pidfd_open, pidfd_send_signal, Pid, PidfdFlags};
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How a [`Watched`] child ended.
#[derive(Debug)]
pub enum Watch {
    /// It exited by itself within its bound.
    Exited(ExitStatus),
    /// It outlived its bound and was stopped (SIGTERM, then SIGKILL); how it ended, when it
    /// could be reaped.
    Stopped(Option<ExitStatus>),
}

/// A child with piped stdin, stdout and stderr, under a bound.
#[derive(Debug)]
pub struct Watched {
    child: Child,
    pid: Pid,
    pidfd: OwnedFd,
    reaped: bool,
}

impl Watched {
    /// Start `program` with `argv` (its name first) and exactly `env`, in `cwd` (`None`: this
    /// process's working directory). Call it from a thread that waits for the child (the
    /// parent-death signal is tied to the forking thread).
    // exec/ owns forking and signals (clippy.toml's disallowed-methods).
    #[allow(clippy::disallowed_methods)]
    pub fn spawn<A, K, V>(
        program: &Path,
        argv: &[A],
        env: impl IntoIterator<Item = (K, V)>,
        cwd: Option<&Path>,
    ) -> Result<(Watched, Pipes), SpawnError>
    where
        A: AsRef<OsStr>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let setup = Setup::new(program, argv, env, cwd)?;
        let mut command = setup.into_command(cwd);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = super::child::spawn_unless_busy(&mut command, |_| true)
            .map_err(super::group::classify_spawn_error)?;
        let pid = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
        let pidfd = pid.and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
        let (Some(pid), Some(pidfd), Some(stdout), Some(stderr)) =
            (pid, pidfd, child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SpawnError::Other(std::io::ErrorKind::Other));
        };
        let pipes = Pipes {
            stdin: child.stdin.take(),
            stdout,
            stderr,
        };
        Ok((
            Watched {
                child,
                pid,
                pidfd,
                reaped: false,
            },
            pipes,
        ))
    }

    /// The child's pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Wait up to `bound` for the child to exit; past it, the ladder: SIGTERM (a dispatcher
    /// forwards it to its adapter and still prints an envelope), up to `grace`, SIGKILL.
    pub fn wait_within(&mut self, bound: Duration, grace: Duration) -> Watch {
        let rung = walk(self, bound, grace);
        let status = match rung {
            Rung::GaveUp => self.child.try_wait().ok().flatten(),
            _ => self.child.wait().ok(),
        };
        self.reaped = status.is_some();
        match (rung, status) {
            (Rung::Exited, Some(status)) => Watch::Exited(status),
            (_, status) => Watch::Stopped(status),
        }
    }
}

impl Target for Watched {
    fn wait_exit(&mut self, until: Instant) -> bool {
        let left = until.saturating_duration_since(Instant::now());
        let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
        matches!(poll(&mut fds, Some(&timespec(left))), Ok(n) if n > 0)
    }

    // exec/ owns signals (clippy.toml's disallowed-methods).
    #[allow(clippy::disallowed_methods)]
    fn signal(&mut self, sig: Signal) {
        if let Some(sig) = sig.to_rustix() {
            let _ = pidfd_send_signal(&self.pidfd, sig);
        }
    }

    // exec/ owns signals (clippy.toml's disallowed-methods).
    #[allow(clippy::disallowed_methods)]
    fn kill(&mut self) {
        // Unreaped, so its number still names it and the group it leads.
        let _ = kill_process_group(self.pid, rustix::process::Signal::KILL);
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill();
            self.wait_exit(Instant::now() + super::KILL_WAIT);
            let _ = self.child.try_wait();
        }
    }
}
