//! The adapter's namespaces (SPEC §13, §13.2): mount and PID always under confinement, network
//! with `--network none` and `--network allow:` (SPEC §17), and a user namespace when the
//! dispatcher is not root.
//!
//! Child side, after the rlimits (SPEC §13.1), in the process `exec/` forked:
//! [`PreparedNamespaces::enter_user`] (not root: `unshare(CLONE_NEWUSER)`, then the child maps
//! its own uid and gid to themselves — a non-dumpable process, and one that changed
//! credentials is, cannot have its `uid_map` written from outside, nor open its own, so it
//! first becomes dumpable again inside its new user namespace), then
//! [`PreparedNamespaces::enter_pid_and_mount`] (`unshare(CLONE_NEWNS | CLONE_NEWPID)`: the
//! caller stays where it is, its next child is PID 1 of the new namespace), then
//! [`PreparedNamespaces::enter_network`] (`unshare(CLONE_NEWNET)`: a new, empty network
//! namespace whose only interface is a loopback that is down — no route to any host, the
//! host's loopback services included). Three calls, so a refusal names the namespace. Under
//! `--network allow:` the child then hands the proxy's listener to the dispatcher
//! ([`ProxyChildEnd::hand_over`](super::proxy::ProxyChildEnd::hand_over), `confine/proxy.rs`:
//! loopback up, a listener on `127.0.0.1:3128`, sent over a socket pair), still before the PID
//! namespace's init is forked.
//!
//! [`mount_proc`] runs in the new PID namespace's first process (the init of `exec/`'s
//! [`pidns`](super::pidns)): mounts stop propagating to the host (`/` recursively private),
//! and a fresh procfs of the new PID namespace covers `/proc`, showing only the adapter's own
//! processes (`subset=pid`: no `/proc/kmsg`, `/proc/sys`, `/proc/kcore` …; `hidepid=invisible`).
//!
//! Everything that allocates (the map lines) is made before the fork.

use super::proxy::ProxyChildEnd;
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::process::{set_dumpable_behavior, DumpableBehavior};
use rustix::thread::UnshareFlags;
use std::ffi::{CStr, CString};

/// The namespaces the child enters.
#[derive(Debug)]
pub struct PreparedNamespaces {
    /// A user namespace of its own and the map lines (`None`: the dispatcher is root).
    pub user: Option<UserMaps>,
    /// A new, empty network namespace (`--network none`, `--network allow:`).
    pub network: bool,
    /// `--network allow:`: the child's end of the proxy's handoff (SPEC §17), used right after
    /// the network namespace is entered.
    pub proxy: Option<ProxyChildEnd>,
}

/// The uid and gid map lines of a new user namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserMaps {
    uid_map: CString,
    gid_map: CString,
}

impl UserMaps {
    /// Map `uid` and `gid` to themselves.
    pub fn identity(uid: u32, gid: u32) -> UserMaps {
        let line = |id: u32| CString::new(format!("{id} {id} 1\n")).unwrap_or_default();
        UserMaps {
            uid_map: line(uid),
            gid_map: line(gid),
        }
    }
}

impl PreparedNamespaces {
    /// Child step: the user namespace, when there is one. System calls only.
    pub(crate) fn enter_user(&self) -> Result<(), Errno> {
        let Some(maps) = &self.user else {
            return Ok(());
        };
        // SAFETY: called in the single-threaded child before execve: no other thread can
        // observe the unshared state; CLONE_NEWUSER needs a single-threaded caller, which
        // the child is.
        unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER)? };
        set_dumpable_behavior(DumpableBehavior::Dumpable)?;
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", maps.uid_map.as_bytes())?;
        write_proc(c"/proc/self/gid_map", maps.gid_map.as_bytes())
    }

    /// Child step: new mount and PID namespaces (the caller's next child is PID 1).
    pub(crate) fn enter_pid_and_mount(&self) -> Result<(), Errno> {
        // SAFETY: as in `enter_user`.
        unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS | UnshareFlags::NEWPID) }
    }

    /// Child step: the new network namespace, with `--network none` or `allow:`.
    pub(crate) fn enter_network(&self) -> Result<(), Errno> {
        if !self.network {
            return Ok(());
        }
        // SAFETY: as in `enter_user`.
        unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }
    }

    /// Child step, right after [`PreparedNamespaces::enter_network`], with `--network allow:`:
    /// the proxy's listener made in the new namespace and sent to the dispatcher. System calls
    /// only.
    pub(crate) fn hand_over_proxy(&self) -> Result<(), Errno> {
        match &self.proxy {
            Some(end) => end.hand_over(),
            None => Ok(()),
        }
    }
}

/// In the new PID namespace's first process: stop mount propagation to the host and cover
/// `/proc` with a procfs of this PID namespace. System calls only.
pub(crate) fn mount_proc() -> Result<(), Errno> {
    const PROC_OPTIONS: &CStr = c"subset=pid,hidepid=invisible";
    // SAFETY: mount(2) with NUL-terminated strings (literals) and null pointers where the
    // call allows them; it writes no memory of ours.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(super::landlock::last_errno());
    }
    // SAFETY: as above.
    let rc = unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            PROC_OPTIONS.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(super::landlock::last_errno());
    }
    Ok(())
}

fn write_proc(path: &CStr, value: &[u8]) -> Result<(), Errno> {
    let fd: OwnedFd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, value).map(|_| ())
}
