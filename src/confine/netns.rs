//! `--network none` (SPEC §13): the adapter in a new, empty network namespace. Its only
//! interface is a loopback that is down: no route to any host, the host's loopback services
//! included (and no loopback of its own either).
//!
//! Child side, after the rlimits (SPEC §13.1). With `CAP_SYS_ADMIN` (the dispatcher running as
//! root) it is `unshare(CLONE_NEWNET)`. Without it, `unshare(CLONE_NEWUSER | CLONE_NEWNET)`,
//! and the child maps its own uid and gid into the new user namespace (each to itself): a
//! non-dumpable process — and one that changed credentials is — cannot have its `uid_map`
//! written from outside, nor open its own, so the child first becomes dumpable again inside
//! its new user namespace. Everything that allocates (the map lines) is made before the fork.

use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::process::{set_dumpable_behavior, DumpableBehavior};
use rustix::thread::UnshareFlags;
use std::ffi::CString;

/// How the child makes its network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreparedNetns {
    /// `unshare(CLONE_NEWNET)`: the dispatcher has `CAP_SYS_ADMIN`.
    Privileged,
    /// `unshare(CLONE_NEWUSER | CLONE_NEWNET)` and these map lines.
    UserNamespace { uid_map: CString, gid_map: CString },
}

/// Whether the effective capability set has `CAP_SYS_ADMIN` (`capget`, one system call; the
/// same set is `CapEff` in `/proc/self/status`, which a test compares).
pub fn has_cap_sys_admin() -> bool {
    rustix::thread::capabilities(None).is_ok_and(|sets| {
        sets.effective
            .contains(rustix::thread::CapabilitySet::SYS_ADMIN)
    })
}

impl PreparedNetns {
    /// Decide how (before the fork).
    pub fn prepare() -> PreparedNetns {
        if has_cap_sys_admin() {
            PreparedNetns::Privileged
        } else {
            PreparedNetns::user_namespace(
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            )
        }
    }

    /// The user-namespace way, mapping `uid` and `gid` to themselves.
    pub fn user_namespace(uid: u32, gid: u32) -> PreparedNetns {
        let line = |id: u32| CString::new(format!("{id} {id} 1\n")).unwrap_or_default();
        PreparedNetns::UserNamespace {
            uid_map: line(uid),
            gid_map: line(gid),
        }
    }

    /// Whether this needs a user namespace (for the report).
    pub fn uses_user_namespace(&self) -> bool {
        matches!(self, PreparedNetns::UserNamespace { .. })
    }

    /// Enter the new namespace (child side, async-signal-safe: system calls only).
    pub fn enter(&self) -> Result<(), Errno> {
        match self {
            // SAFETY: called in the single-threaded child before execve: no other thread can
            // observe the unshared state (the function's only hazard is CLONE_FILES, not used).
            PreparedNetns::Privileged => unsafe {
                rustix::thread::unshare_unsafe(UnshareFlags::NEWNET)
            },
            PreparedNetns::UserNamespace { uid_map, gid_map } => {
                // SAFETY: as above; CLONE_NEWUSER needs a single-threaded caller, which the
                // child is.
                unsafe {
                    rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNET)?
                };
                set_dumpable_behavior(DumpableBehavior::Dumpable)?;
                write_proc(c"/proc/self/setgroups", b"deny")?;
                write_proc(c"/proc/self/uid_map", uid_map.as_bytes())?;
                write_proc(c"/proc/self/gid_map", gid_map.as_bytes())
            }
        }
    }
}

fn write_proc(path: &std::ffi::CStr, value: &[u8]) -> Result<(), Errno> {
    let fd: OwnedFd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, value).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capability_agrees_with_the_status_file() {
        const CAP_SYS_ADMIN: u32 = 21;
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("CapEff:")).unwrap();
        let caps = u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).unwrap();
        assert_eq!(has_cap_sys_admin(), caps & (1 << CAP_SYS_ADMIN) != 0);
    }
}
