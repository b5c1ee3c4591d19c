//! No privilege under confinement (SPEC §13.2): who the adapter runs as, and the child step
//! that makes it so.
//!
//! [`RunAs`] is `--run-as USER[:GROUP]` resolved (names through the host's user database,
//! numbers as they are) before anything runs; [`Credentials::for_dispatcher`] decides, before
//! the fork, what the adapter becomes: a root dispatcher's adapter becomes the run-as user
//! (default `nobody` and its primary group); any other dispatcher's adapter stays the
//! dispatcher's own user, in a user namespace of its own whose capabilities it then gives up.
//!
//! [`Credentials::drop_all`] is the child side, system calls only (no allocation, no lock,
//! raw system calls rather than glibc's wrappers, which would try to change every thread's
//! credentials through its set-xid machinery): securebits locked first (`NOROOT`,
//! `NO_SETUID_FIXUP`, `KEEP_CAPS` off, `NO_CAP_AMBIENT_RAISE`, each with its lock), the
//! bounding set emptied, the ambient set cleared, supplementary groups cleared (root only:
//! an unprivileged user namespace may not call `setgroups`), the group and user ids set, and
//! last every capability set emptied with `capset`. After it the process holds no capability
//! in any namespace and cannot get one back: `execve` of a set-uid or file-capability program
//! gives it nothing (`NOROOT`, and `no_new_privs` after this step).
//!
//! Must not: allocate or take a lock in [`Credentials::drop_all`]; resolve names after the
//! fork.

use rustix::io::Errno;
use std::ffi::{CStr, CString};
use std::fmt;

/// The user a root dispatcher runs a confined adapter as when `--run-as` is not given.
pub const DEFAULT_USER: &str = "nobody";

/// `--run-as`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
    /// As given (for messages and `to_flags`).
    pub spec: String,
}

/// Why a `--run-as` value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunAsProblem {
    /// Empty, or an empty user or group part.
    Malformed,
    NoSuchUser(String),
    NoSuchGroup(String),
    /// The value names uid 0: a confined adapter never runs as root.
    Root,
    /// A dispatcher that is not root can only run the adapter as itself.
    NotPermitted {
        uid: u32,
    },
}

impl fmt::Display for RunAsProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunAsProblem::Malformed => {
                f.write_str("expected USER or USER:GROUP (names or numbers)")
            }
            RunAsProblem::NoSuchUser(u) => write!(f, "there is no user `{u}` on this host"),
            RunAsProblem::NoSuchGroup(g) => write!(f, "there is no group `{g}` on this host"),
            RunAsProblem::Root => f.write_str(
                "a confined adapter never runs as root (uid 0); name an unprivileged user",
            ),
            RunAsProblem::NotPermitted { uid } => write!(
                f,
                "the dispatcher runs as uid {uid}, not root: it can run the adapter only as itself \
                 (leave --run-as out, or run the dispatcher as root)"
            ),
        }
    }
}

impl RunAs {
    /// Resolve `USER[:GROUP]` (each a name or a number); without a group, the user's primary
    /// group. `dispatcher_uid` is the dispatcher's effective uid: any uid but 0 may only name
    /// itself.
    pub fn parse(value: &str, dispatcher_uid: u32) -> Result<RunAs, RunAsProblem> {
        let (user, group) = match value.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (value, None),
        };
        if user.is_empty() || group.is_some_and(str::is_empty) {
            return Err(RunAsProblem::Malformed);
        }
        let (uid, primary) = match lookup_user(user) {
            Some(found) => found,
            None => match user.parse::<u32>() {
                // A number names a uid even when the user database does not list it; its group
                // is then the same number unless one is given.
                Ok(uid) if user.bytes().all(|b| b.is_ascii_digit()) => (uid, uid),
                _ => return Err(RunAsProblem::NoSuchUser(user.to_owned())),
            },
        };
        let gid = match group {
            None => primary,
            Some(g) => match lookup_group(g) {
                Some(gid) => gid,
                None if g.bytes().all(|b| b.is_ascii_digit()) => g
                    .parse::<u32>()
                    .map_err(|_| RunAsProblem::NoSuchGroup(g.to_owned()))?,
                None => return Err(RunAsProblem::NoSuchGroup(g.to_owned())),
            },
        };
        if uid == 0 || gid == 0 {
            return Err(RunAsProblem::Root);
        }
        if dispatcher_uid != 0 && uid != dispatcher_uid {
            return Err(RunAsProblem::NotPermitted {
                uid: dispatcher_uid,
            });
        }
        Ok(RunAs {
            uid,
            gid,
            spec: value.to_owned(),
        })
    }

    /// The default for a root dispatcher: [`DEFAULT_USER`] and its primary group.
    pub fn default_user() -> Result<RunAs, RunAsProblem> {
        RunAs::parse(DEFAULT_USER, 0)
    }
}

/// Call one of the `get*_r` look-ups of the user database with a buffer, growing it while the
/// call answers `ERANGE` (up to 1 MiB). `call` returns the call's result code and what it found
/// (read while the buffer is alive).
fn with_buffer<T>(call: impl Fn(&mut [u8]) -> (libc::c_int, Option<T>)) -> Option<T> {
    let mut buf = vec![0u8; 4096];
    loop {
        let (rc, found) = call(&mut buf);
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        return if rc == 0 { found } else { None };
    }
}

/// `getpwnam_r`: the uid and primary gid of `name`.
fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let name = CString::new(name).ok()?;
    with_buffer(|buf| {
        // SAFETY: a zeroed `passwd` is a valid out-parameter (pointers null, numbers 0).
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is to a live local or buffer of the size passed; the call fills
        // `pwd` with pointers into `buf` and sets `result` to `&pwd` or null.
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        (rc, (!result.is_null()).then_some((pwd.pw_uid, pwd.pw_gid)))
    })
}

/// `getgrnam_r`: the gid of `name`.
fn lookup_group(name: &str) -> Option<u32> {
    let name = CString::new(name).ok()?;
    with_buffer(|buf| {
        // SAFETY: a zeroed `group` is a valid out-parameter.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        // SAFETY: as in `lookup_user`.
        let rc = unsafe {
            libc::getgrnam_r(
                name.as_ptr(),
                &mut grp,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        (rc, (!result.is_null()).then_some(grp.gr_gid))
    })
}

/// What the adapter's process becomes, decided before the fork.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// Change ids and clear the supplementary groups (a root dispatcher, outside any user
    /// namespace). `false`: the adapter stays the dispatcher's user, inside a user namespace
    /// of its own (ids unchanged, groups as the dispatcher's user has them).
    pub change_ids: bool,
}

/// Why a dispatcher cannot confine without privilege.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CredentialsError {
    /// Root, but without the capabilities that changing users needs (`CAP_SETUID`,
    /// `CAP_SETGID`, `CAP_SETPCAP`, `CAP_SYS_ADMIN` for the namespaces): a user namespace
    /// would leave the adapter uid 0 on the host.
    RootWithoutCapabilities,
}

impl fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialsError::RootWithoutCapabilities => f.write_str(
                "the dispatcher runs as root without CAP_SETUID, CAP_SETGID, CAP_SETPCAP and \
                 CAP_SYS_ADMIN, so it cannot run the adapter as another user, and a confined \
                 adapter never runs as root",
            ),
        }
    }
}

/// The capabilities a root dispatcher needs to run an adapter as another user.
fn can_change_users() -> bool {
    use rustix::thread::CapabilitySet as C;
    rustix::thread::capabilities(None).is_ok_and(|sets| {
        sets.effective
            .contains(C::SETUID | C::SETGID | C::SETPCAP | C::SYS_ADMIN)
    })
}

/// Whether this process has `CAP_SYS_ADMIN` in effect (`capget`; a test compares it with
/// `CapEff` in `/proc/self/status`).
pub fn has_cap_sys_admin() -> bool {
    rustix::thread::capabilities(None).is_ok_and(|sets| {
        sets.effective
            .contains(rustix::thread::CapabilitySet::SYS_ADMIN)
    })
}

impl Credentials {
    /// What a dispatcher of effective uid `euid` runs the adapter as, given `--run-as`
    /// (already checked against `euid` by [`RunAs::parse`]).
    pub(crate) fn for_dispatcher(run_as: Option<&RunAs>) -> Result<Credentials, CredentialsError> {
        let euid = rustix::process::geteuid().as_raw();
        let egid = rustix::process::getegid().as_raw();
        if euid != 0 {
            return Ok(Credentials {
                uid: euid,
                gid: egid,
                change_ids: false,
            });
        }
        if !can_change_users() {
            return Err(CredentialsError::RootWithoutCapabilities);
        }
        let target = match run_as {
            Some(r) => r.clone(),
            // `nobody` missing from the user database: its customary number.
            None => RunAs::default_user().unwrap_or(RunAs {
                uid: 65534,
                gid: 65534,
                spec: DEFAULT_USER.into(),
            }),
        };
        Ok(Credentials {
            uid: target.uid,
            gid: target.gid,
            change_ids: true,
        })
    }

    /// Whether the adapter needs a user namespace of its own for the mount, PID and network
    /// namespaces (the dispatcher is not root).
    pub(crate) fn needs_user_namespace(&self) -> bool {
        !self.change_ids
    }

    /// Child step: give up every privilege (see the module's documentation for the order).
    /// System calls only.
    pub(crate) fn drop_all(&self) -> Result<(), Errno> {
        const SECBIT_NOROOT: u64 = 1 << 0;
        const SECBIT_NOROOT_LOCKED: u64 = 1 << 1;
        const SECBIT_NO_SETUID_FIXUP: u64 = 1 << 2;
        const SECBIT_NO_SETUID_FIXUP_LOCKED: u64 = 1 << 3;
        const SECBIT_KEEP_CAPS_LOCKED: u64 = 1 << 5;
        const SECBIT_NO_CAP_AMBIENT_RAISE: u64 = 1 << 6;
        const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: u64 = 1 << 7;
        const LOCKED_BITS: u64 = SECBIT_NOROOT
            | SECBIT_NOROOT_LOCKED
            | SECBIT_NO_SETUID_FIXUP
            | SECBIT_NO_SETUID_FIXUP_LOCKED
            | SECBIT_KEEP_CAPS_LOCKED
            | SECBIT_NO_CAP_AMBIENT_RAISE
            | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        prctl(libc::PR_SET_SECUREBITS, LOCKED_BITS)?;
        // The bounding set: every capability the kernel knows (it answers EINVAL past the
        // last one).
        for cap in 0..64u64 {
            match prctl(libc::PR_CAPBSET_DROP, cap) {
                Ok(()) => {}
                Err(Errno::INVAL) => break,
                Err(e) => return Err(e),
            }
        }
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
        if rc != 0 {
            return Err(super::landlock::last_errno());
        }
        if self.change_ids {
            // SAFETY: setgroups(0, NULL) reads no memory.
            syscall_ok(unsafe {
                libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<u32>())
            })?;
            let (g, u) = (self.gid as libc::c_long, self.uid as libc::c_long);
            // SAFETY: integer arguments only; raw calls change this thread alone, which is
            // all there is of the child.
            syscall_ok(unsafe { libc::syscall(libc::SYS_setresgid, g, g, g) })?;
            // SAFETY: as above.
            syscall_ok(unsafe { libc::syscall(libc::SYS_setresuid, u, u, u) })?;
        }
        clear_capabilities()
    }
}

fn prctl(option: libc::c_int, arg: u64) -> Result<(), Errno> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe {
        libc::prctl(
            option,
            arg as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(super::landlock::last_errno())
    }
}

fn syscall_ok(rc: libc::c_long) -> Result<(), Errno> {
    if rc == 0 {
        Ok(())
    } else {
        Err(super::landlock::last_errno())
    }
}

/// `capset` with every set empty (version 3: two 32-bit words per set).
fn clear_capabilities() -> Result<(), Errno> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads one header and two data words from live locals of the kernel's
    // layout (`struct __user_cap_header_struct`, `struct __user_cap_data_struct[2]`).
    syscall_ok(unsafe {
        libc::syscall(libc::SYS_capset, std::ptr::from_ref(&header), data.as_ptr())
    })
}

/// The user's name for a uid, for messages (`nobody`), or the number.
pub fn user_name(uid: u32) -> String {
    let found = with_buffer(|buf| {
        // SAFETY: a zeroed `passwd` is a valid out-parameter.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: as in `lookup_user`.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        let name = (!result.is_null() && !pwd.pw_name.is_null()).then(|| {
            // SAFETY: `pw_name` points at a NUL-terminated string inside `buf`, alive here.
            unsafe { CStr::from_ptr(pwd.pw_name) }
                .to_string_lossy()
                .into_owned()
        });
        (rc, name)
    });
    found.unwrap_or_else(|| uid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_resolve() {
        let nobody = RunAs::parse("nobody", 0).unwrap();
        assert_eq!(nobody.uid, 65534);
        let numeric = RunAs::parse("65534:65534", 0).unwrap();
        assert_eq!((numeric.uid, numeric.gid), (65534, 65534));
        // A number the database does not list still names that uid, with the same gid.
        let unlisted = RunAs::parse("54321", 0).unwrap();
        assert_eq!((unlisted.uid, unlisted.gid), (54321, 54321));
        assert_eq!(user_name(65534), "nobody");
        assert_eq!(user_name(4_000_000_000), "4000000000");
    }

    #[test]
    fn bad_values_are_refused_with_the_reason() {
        assert_eq!(RunAs::parse("", 0), Err(RunAsProblem::Malformed));
        assert_eq!(RunAs::parse("nobody:", 0), Err(RunAsProblem::Malformed));
        assert_eq!(RunAs::parse(":nogroup", 0), Err(RunAsProblem::Malformed));
        assert_eq!(
            RunAs::parse("no-such-user-ptd", 0),
            Err(RunAsProblem::NoSuchUser("no-such-user-ptd".into()))
        );
        assert_eq!(
            RunAs::parse("nobody:no-such-group-ptd", 0),
            Err(RunAsProblem::NoSuchGroup("no-such-group-ptd".into()))
        );
        assert_eq!(RunAs::parse("root", 0), Err(RunAsProblem::Root));
        assert_eq!(RunAs::parse("0", 0), Err(RunAsProblem::Root));
        assert_eq!(RunAs::parse("nobody:0", 0), Err(RunAsProblem::Root));
        // Not root: only itself.
        assert_eq!(
            RunAs::parse("nobody", 1000),
            Err(RunAsProblem::NotPermitted { uid: 1000 })
        );
        assert!(RunAs::parse("65534", 65534).is_ok());
        for problem in [
            RunAsProblem::Malformed,
            RunAsProblem::Root,
            RunAsProblem::NotPermitted { uid: 7 },
        ] {
            assert!(!problem.to_string().is_empty());
        }
    }

    #[test]
    fn the_capability_agrees_with_the_status_file() {
        const CAP_SYS_ADMIN: u32 = 21;
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("CapEff:")).unwrap();
        let caps = u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).unwrap();
        assert_eq!(has_cap_sys_admin(), caps & (1 << CAP_SYS_ADMIN) != 0);
    }
}
