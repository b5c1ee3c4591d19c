//! Live proofs that each mechanism holds on this kernel (SPEC §13 `doctor`): a child under
//! the mechanism tries the forbidden thing and must be refused.
//!
//! Each probe prepares what it needs in the parent (files, sockets, the mechanism itself),
//! forks, and the child — system calls only, as in the real set-up — applies the mechanism,
//! checks a *control* (something the mechanism must still allow, or the same call before the
//! mechanism, so a refusal for another reason does not pass), tries the forbidden thing and
//! sends back one fixed-size record through a pipe. The parent waits at most
//! [`PROBE_TIMEOUT`]. A probe returns a [`Probe`] with a structured [`Outcome`]; a probe that
//! cannot even be prepared returns the mechanism's `Unavailable`-style error instead.
//!
//! Must not: leave a child, a file or a cgroup behind (every probe cleans up on every path).

use crate::confine::cgroup::{CallCgroup, Counters, Host, Limits};
use crate::confine::landlock::{self, FsRequest, LandlockError};
use crate::confine::namespaces::PreparedNamespaces;
use crate::confine::rlimit::Rlimits;
use crate::confine::seccomp::{self, SeccompError, TIOCSTI};
use crate::confine::{set_no_new_privs, ChildError, Step};
use rustix::fd::AsFd;
use rustix::io::Errno;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// How long a probe's child may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How a probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The forbidden thing failed with this errno: the mechanism held.
    Refused { errno: i32 },
    /// The kernel ended the child with this signal while it tried (an OOM kill, `SIGXFSZ`):
    /// the mechanism held.
    Killed { signal: i32 },
    /// The forbidden thing worked (attempt number `attempt` of the probe): it did not hold.
    NotRefused { attempt: u8 },
    /// A step of the set-up, or the control, failed: nothing was proven.
    SetupFailed { step: Step, errno: i32 },
    /// The child ended without a record, or did not end in time.
    Lost,
}

/// One probe's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The mechanism (`landlock_fs`, `landlock_signal_scope`, `network`, `pids`, …).
    pub mechanism: &'static str,
    /// What the child tried.
    pub attempt: &'static str,
    pub outcome: Outcome,
    /// The mechanism's own counter afterwards, where it has one (`pids.events` `max`,
    /// `oom_kill`).
    pub counter: Option<u64>,
}

impl Probe {
    /// Whether the mechanism was shown to hold.
    pub fn held(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Refused { .. } | Outcome::Killed { .. }
        )
    }
}

/// What the child reports: `Ok(())` when every forbidden attempt was refused as expected,
/// else which attempt got through or which step failed.
pub(super) enum Record {
    Refused(Errno),
    NotRefused(u8),
    Failed(ChildError),
}

/// Fork (through `exec::fork_report`); run `child` in the child (system calls only!), carry
/// its record back.
///
/// `child` runs between `fork` and `_exit` of a possibly multi-threaded process: it must not
/// allocate, lock or panic. Everything it needs is prepared by the caller.
pub(super) fn fork_probe(child: impl FnOnce() -> Record) -> Outcome {
    let Some(forked) = crate::exec::fork_report(PROBE_TIMEOUT, || encode(child())) else {
        return Outcome::Lost;
    };
    match (forked.report, forked.status) {
        (Some(bytes), _) => decode(bytes),
        (None, Some(status)) => match status.terminating_signal() {
            Some(signal) => Outcome::Killed { signal },
            None => Outcome::Lost,
        },
        (None, None) => Outcome::Lost,
    }
}

fn encode(record: Record) -> [u8; 6] {
    let (kind, step, value) = match record {
        Record::Refused(errno) => (0u8, 0u8, errno.raw_os_error()),
        Record::NotRefused(attempt) => (1, attempt, 0),
        Record::Failed(e) => (2, e.step.index(), e.errno.raw_os_error()),
    };
    let v = value.to_le_bytes();
    [kind, step, v[0], v[1], v[2], v[3]]
}

fn decode(bytes: [u8; 6]) -> Outcome {
    let value = i32::from_le_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
    match bytes[0] {
        0 => Outcome::Refused { errno: value },
        1 => Outcome::NotRefused { attempt: bytes[1] },
        2 => Outcome::SetupFailed {
            step: Step::from_index(bytes[1]),
            errno: value,
        },
        _ => Outcome::Lost,
    }
}

fn failed(step: Step) -> impl Fn(Errno) -> Record {
    move |errno| Record::Failed(ChildError { step, errno })
}

fn cstring(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}

/// The outcome of one forbidden attempt, as a record: refused with any errno, or through.
/// A stream socket of `family` connecting to `target`: refused, or not (attempt 0). The
/// socket itself is the control: failing to make it is a set-up failure, not a refusal.
fn connect_stream(
    family: rustix::net::AddressFamily,
    target: &impl rustix::net::addr::SocketAddrArg,
) -> Record {
    use rustix::net::{SocketFlags, SocketType};
    match rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None) {
        Ok(socket) => refused_or(0, rustix::net::connect(&socket, target)),
        Err(errno) => failed(Step::Control)(errno),
    }
}

fn refused_or(attempt: u8, result: Result<(), Errno>) -> Record {
    match result {
        Ok(()) => Record::NotRefused(attempt),
        Err(errno) => Record::Refused(errno),
    }
}

fn tmp_parent() -> std::path::PathBuf {
    std::env::temp_dir()
}

/// Landlock: read a file outside the grants (a control reads one inside).
pub fn landlock_fs() -> Result<Probe, LandlockError> {
    let io = |e: std::io::Error| LandlockError::TmpDir {
        parent: tmp_parent(),
        error: e.to_string(),
    };
    let inside = tempfile::tempdir().map_err(io)?;
    let outside = tempfile::tempdir().map_err(io)?;
    std::fs::write(inside.path().join("allowed"), "ok").map_err(io)?;
    std::fs::write(outside.path().join("secret"), "no").map_err(io)?;
    let read = [std::fs::canonicalize(inside.path()).map_err(io)?];
    let tmp = tempfile::tempdir_in(tmp_parent()).map_err(io)?;
    let prepared = landlock::prepare(&FsRequest {
        read: &read,
        write: &[],
        program: Path::new("/bin/sh"),
        path_var: None,
        transport_dir: None,
        tmpdir: &std::fs::canonicalize(tmp.path()).map_err(io)?,
        handle_fs: true,
    })?
    .ok_or(LandlockError::Unsupported(Errno::NOSYS))?;
    let allowed = cstring(&inside.path().join("allowed"));
    let secret = cstring(&outside.path().join("secret"));
    let outcome = fork_probe(|| {
        if let Err(e) = set_no_new_privs() {
            return Record::Failed(e);
        }
        if let Err(errno) = prepared.enforce() {
            return failed(Step::Landlock)(errno);
        }
        let open = |p: &CString| {
            rustix::fs::open(
                p.as_c_str(),
                rustix::fs::OFlags::RDONLY,
                rustix::fs::Mode::empty(),
            )
            .map(drop)
        };
        if let Err(errno) = open(&allowed) {
            return failed(Step::Control)(errno);
        }
        refused_or(0, open(&secret))
    });
    Ok(Probe {
        mechanism: "landlock_fs",
        attempt: "read a file outside the grants",
        outcome,
        counter: None,
    })
}

fn scoped_landlock() -> Result<Option<landlock::PreparedLandlock>, LandlockError> {
    let prepared = landlock::prepare(&FsRequest {
        read: &[],
        write: &[],
        program: Path::new("/bin/sh"),
        path_var: None,
        transport_dir: None,
        tmpdir: &tmp_parent(),
        handle_fs: false,
    })?;
    Ok(prepared.filter(|p| p.scoped))
}

/// Landlock scopes (ABI 6+): signal the parent (signal 0: the permission check only); the
/// control signals itself. `Ok(None)` when the kernel has no scopes.
pub fn landlock_signal_scope() -> Result<Option<Probe>, LandlockError> {
    let Some(prepared) = scoped_landlock()? else {
        return Ok(None);
    };
    let outcome = fork_probe(|| {
        if let Err(e) = set_no_new_privs() {
            return Record::Failed(e);
        }
        if let Err(errno) = prepared.enforce() {
            return failed(Step::Landlock)(errno);
        }
        if let Err(errno) = rustix::process::test_kill_process(rustix::process::getpid()) {
            return failed(Step::Control)(errno);
        }
        match rustix::process::getppid() {
            Some(parent) => refused_or(0, rustix::process::test_kill_process(parent)),
            None => failed(Step::Control)(Errno::SRCH),
        }
    });
    Ok(Some(Probe {
        mechanism: "landlock_signal_scope",
        attempt: "signal the dispatcher",
        outcome,
        counter: None,
    }))
}

/// Landlock scopes (ABI 6+): connect to an abstract unix socket the parent listens on.
pub fn landlock_abstract_unix_scope() -> Result<Option<Probe>, LandlockError> {
    use std::os::linux::net::SocketAddrExt;
    let Some(prepared) = scoped_landlock()? else {
        return Ok(None);
    };
    let io = |e: std::io::Error| LandlockError::TmpDir {
        parent: tmp_parent(),
        error: e.to_string(),
    };
    let name = format!(
        "ptd-probe-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    );
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).map_err(io)?;
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).map_err(io)?;
    let target = rustix::net::SocketAddrUnix::new_abstract_name(name.as_bytes())
        .map_err(|e| io(e.into()))?;
    let outcome = fork_probe(|| {
        use rustix::net::AddressFamily;
        if let Err(e) = set_no_new_privs() {
            return Record::Failed(e);
        }
        if let Err(errno) = prepared.enforce() {
            return failed(Step::Landlock)(errno);
        }
        connect_stream(AddressFamily::UNIX, &target)
    });
    Ok(Some(Probe {
        mechanism: "landlock_abstract_unix_scope",
        attempt: "connect to an abstract unix socket outside",
        outcome,
        counter: None,
    }))
}

/// `--network none`: connect to a TCP socket listening on the host's loopback.
pub fn network(netns: &PreparedNamespaces) -> std::io::Result<Probe> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let target = std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);
    let outcome = fork_probe(|| {
        use rustix::net::AddressFamily;
        if let Err(errno) = netns.enter_user() {
            return failed(Step::UserNamespace)(errno);
        }
        if let Err(errno) = netns.enter_network() {
            return failed(Step::Namespaces)(errno);
        }
        connect_stream(AddressFamily::INET, &target)
    });
    Ok(Probe {
        mechanism: "network",
        attempt: "connect to a listening loopback TCP socket of the host",
        outcome,
        counter: None,
    })
}

/// `--limit-pids`: in a cgroup with `pids.max` 1, fork once more.
pub fn pids(host: &Host) -> Result<Probe, Vec<crate::confine::cgroup::CgroupError>> {
    let cgroup = CallCgroup::create(
        host,
        &Limits {
            memory_bytes: None,
            pids: Some(1),
        },
    )?;
    let outcome = fork_probe(|| {
        if let Err(errno) = cgroup.join() {
            return failed(Step::JoinCgroups)(errno);
        }
        match crate::exec::fork_and_reap() {
            Ok(()) => Record::NotRefused(0),
            Err(errno) => Record::Refused(errno),
        }
    });
    let Counters { pids_max_hits, .. } = cgroup.counters();
    Ok(Probe {
        mechanism: "pids",
        attempt: "fork past pids.max",
        outcome,
        counter: pids_max_hits,
    })
}

/// `--limit-memory`: in a cgroup limited to 16 MiB, touch 256 MiB.
pub fn memory(host: &Host) -> Result<Probe, Vec<crate::confine::cgroup::CgroupError>> {
    const LIMIT: u64 = 16 << 20;
    const TOUCH: usize = 256 << 20;
    let cgroup = CallCgroup::create(
        host,
        &Limits {
            memory_bytes: Some(LIMIT),
            pids: None,
        },
    )?;
    let outcome = fork_probe(|| {
        if let Err(errno) = cgroup.join() {
            return failed(Step::JoinCgroups)(errno);
        }
        // SAFETY: a fresh private anonymous mapping, not aliased by anything.
        let map = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                TOUCH,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        };
        let base = match map {
            Ok(p) => p.cast::<u8>(),
            Err(errno) => return failed(Step::Control)(errno),
        };
        for offset in (0..TOUCH).step_by(4096) {
            // SAFETY: `offset` is inside the TOUCH bytes mapped above.
            unsafe { base.add(offset).write_volatile(1) };
        }
        Record::NotRefused(0)
    });
    let Counters { oom_kills, .. } = cgroup.counters();
    Ok(Probe {
        mechanism: "memory",
        attempt: "use more memory than the limit",
        outcome,
        counter: oom_kills,
    })
}

/// `--limit-file-size`: write past `RLIMIT_FSIZE` (the kernel answers `SIGXFSZ`).
pub fn file_size() -> std::io::Result<Probe> {
    let file = tempfile::tempfile()?;
    let limits = Rlimits {
        open_files: None,
        file_size_bytes: Some(4096),
    };
    let block = [0u8; 8192];
    let outcome = fork_probe(|| {
        if let Err(errno) = limits.apply() {
            return failed(Step::Rlimits)(errno);
        }
        refused_or(
            0,
            rustix::io::write(file.as_fd(), &block).and_then(|n| {
                // A short write at the limit is the kernel refusing the rest; write again.
                if n < block.len() {
                    rustix::io::write(file.as_fd(), &block[n..]).map(drop)
                } else {
                    Ok(())
                }
            }),
        )
    });
    Ok(Probe {
        mechanism: "file_size",
        attempt: "write past RLIMIT_FSIZE",
        outcome,
        counter: None,
    })
}

/// `--limit-open-files`: ask for a descriptor at the limit.
pub fn open_files() -> std::io::Result<Probe> {
    const LIMIT: u64 = 64;
    let (fd, _other) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let limits = Rlimits {
        open_files: Some(LIMIT),
        file_size_bytes: None,
    };
    let outcome = fork_probe(|| {
        if let Err(errno) = limits.apply() {
            return failed(Step::Rlimits)(errno);
        }
        if let Err(errno) = rustix::io::fcntl_dupfd_cloexec(&fd, 3) {
            return failed(Step::Control)(errno);
        }
        refused_or(
            0,
            rustix::io::fcntl_dupfd_cloexec(&fd, LIMIT as i32).map(drop),
        )
    });
    Ok(Probe {
        mechanism: "open_files",
        attempt: "open a descriptor past RLIMIT_NOFILE",
        outcome,
        counter: None,
    })
}

/// `no_new_privs`: set it, then try to clear it again (the kernel answers `EINVAL`: the bit
/// is one-way, so nothing the adapter runs can regain privileges through a set-uid program).
/// The control: the bit reads back as set.
pub fn no_new_privs() -> Probe {
    let outcome = fork_probe(|| {
        if let Err(e) = set_no_new_privs() {
            return Record::Failed(e);
        }
        match rustix::thread::no_new_privs() {
            Ok(true) => {}
            Ok(false) => return failed(Step::Control)(Errno::INVAL),
            Err(errno) => return failed(Step::Control)(errno),
        }
        refused_or(0, rustix::thread::set_no_new_privs(false))
    });
    Probe {
        mechanism: "no_new_privs",
        attempt: "clear no_new_privs again",
        outcome,
        counter: None,
    }
}

/// One attempt of the seccomp probe: a system call the filter denies, with harmless
/// arguments (a bad descriptor, null pointers, an invalid request): without the filter each
/// fails with something other than `EPERM` (or does nothing), with it each is `EPERM`.
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    pub name: &'static str,
    nr: libc::c_long,
    args: [libc::c_long; 3],
}

impl Attempt {
    fn run(&self) -> Result<(), Errno> {
        let [a, b, c] = self.args;
        // SAFETY: every attempt passes a bad descriptor (-1), zero lengths or null pointers:
        // the kernel validates them and fails the call (or, for a zero-length
        // process_vm_readv, does nothing); no memory of ours is read or written.
        let rc = unsafe { libc::syscall(self.nr, a, b, c, 0 as libc::c_long, 0 as libc::c_long) };
        if rc < 0 {
            Err(crate::confine::landlock::last_errno())
        } else {
            Ok(())
        }
    }
}

const fn attempt(name: &'static str, nr: libc::c_long, args: [libc::c_long; 3]) -> Attempt {
    Attempt { name, nr, args }
}

/// The seccomp probe's attempts, in order (the attempt number of [`Outcome::NotRefused`]).
pub const SECCOMP_ATTEMPTS: &[Attempt] = &[
    attempt(
        "ioctl(TIOCSTI)",
        libc::SYS_ioctl,
        [-1, TIOCSTI as libc::c_long, 0],
    ),
    attempt(
        "ioctl(TIOCSTI) with high bits set",
        libc::SYS_ioctl,
        [-1, (TIOCSTI | (1 << 32)) as libc::c_long, 0],
    ),
    attempt(
        "ioctl(TIOCLINUX)",
        libc::SYS_ioctl,
        [-1, seccomp::TIOCLINUX as libc::c_long, 0],
    ),
    attempt("bpf", libc::SYS_bpf, [-1, 0, 0]),
    attempt("open_by_handle_at", libc::SYS_open_by_handle_at, [-1, 0, 0]),
    attempt("keyctl", libc::SYS_keyctl, [-1, 0, 0]),
    attempt("ptrace", libc::SYS_ptrace, [-1, 0, 0]),
    attempt("process_vm_readv", libc::SYS_process_vm_readv, [0, 0, 0]),
    attempt("mount", libc::SYS_mount, [0, 0, 0]),
    #[cfg(target_arch = "x86_64")]
    attempt(
        "getpid through the x32 ABI",
        0x4000_0000 | libc::SYS_getpid,
        [0, 0, 0],
    ),
];

/// seccomp: the filter installed, each of [`SECCOMP_ATTEMPTS`] must be `EPERM`. The control:
/// the same calls before the filter; one that was `EPERM` already (a non-root caller's
/// `mount`) proves nothing and is not counted, and the `ioctl`s on a bad descriptor are
/// `EBADF` for anyone, so the probe always proves something.
pub fn seccomp() -> Result<Probe, SeccompError> {
    const N: usize = SECCOMP_ATTEMPTS.len();
    let filter = seccomp::compile(crate::confine::Network::Any)?;
    let outcome = fork_probe(|| {
        let mut counted = [false; N];
        for (i, attempt) in SECCOMP_ATTEMPTS.iter().enumerate() {
            counted[i] = attempt.run() != Err(Errno::PERM);
        }
        if !counted[0] {
            return failed(Step::Control)(Errno::PERM);
        }
        if let Err(errno) = filter.apply() {
            return failed(Step::Seccomp)(errno);
        }
        for (i, attempt) in SECCOMP_ATTEMPTS.iter().enumerate() {
            if counted[i] && attempt.run() != Err(Errno::PERM) {
                return Record::NotRefused(i as u8);
            }
        }
        Record::Refused(Errno::PERM)
    });
    Ok(Probe {
        mechanism: "seccomp",
        attempt: "filtered system calls (TIOCSTI, bpf, ptrace, mount, x32, …)",
        outcome,
        counter: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forbidden_thing_that_works_is_reported_as_not_refused() {
        // What `doctor` must catch (exit 70): the attempt got through.
        assert_eq!(
            fork_probe(|| refused_or(3, Ok(()))),
            Outcome::NotRefused { attempt: 3 }
        );
        let held = Probe {
            mechanism: "m",
            attempt: "a",
            outcome: Outcome::NotRefused { attempt: 0 },
            counter: None,
        };
        assert!(!held.held());
    }

    #[test]
    fn a_failed_step_and_a_kill_come_back_as_such() {
        let outcome = fork_probe(|| failed(Step::Landlock)(Errno::NOSYS));
        assert_eq!(
            outcome,
            Outcome::SetupFailed {
                step: Step::Landlock,
                errno: libc::ENOSYS
            }
        );
        let killed = fork_probe(|| {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::TERM,
            );
            Record::NotRefused(0)
        });
        assert_eq!(
            killed,
            Outcome::Killed {
                signal: libc::SIGTERM
            }
        );
    }

    #[test]
    fn every_step_survives_the_record() {
        for i in 0..=6 {
            let step = Step::from_index(i);
            assert_eq!(step.index(), i);
            let bytes = encode(Record::Failed(ChildError {
                step,
                errno: Errno::ACCESS,
            }));
            assert_eq!(
                decode(bytes),
                Outcome::SetupFailed {
                    step,
                    errno: libc::EACCES
                }
            );
        }
    }
}

#[cfg(test)]
mod kernel_tests;
