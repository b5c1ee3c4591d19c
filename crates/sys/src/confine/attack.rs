//! The attacks behind `doctor`'s `adapter_*` rows (SPEC §13.2): what runs inside the
//! confinement, started by `doctor` through `exec` exactly as an adapter is
//! (`parent-tool-dispatch __doctor-probe ATTACK...`, whose entry point is the binary's
//! `doctor::attack::main`). Each attack tries one thing the first
//! version let a root adapter do and prints one line on stdout:
//!
//! - `NAME=ok` — it worked (the confinement did not hold);
//! - `NAME=refused(ERRNO)` — the kernel refused it;
//! - `NAME=error(ERRNO)` — it could not even be tried (nothing proven).
//!
//! The three `egress_*` attacks (the `egress` row, SPEC §17.3) speak HTTP to the proxy; a
//! proxy that answers with another status than `200` is written `refused(STATUS)` (the HTTP
//! status in place of an errno: `egress_refused=refused(403)`). Every socket operation they
//! make is bounded by [`EGRESS_TIMEOUT`], and their only target is `127.0.0.1`.
//!
//! An attack is `NAME` or `NAME:ARG`; one line per attack, in order. The words are
//! [`Attack::word`]'s. Product code, not a test tool: `doctor` ships it, and it does nothing
//! but the attempts listed (a chmod to the mode the file already has, a `prlimit64` that
//! writes back the limit it read, a device node removed at once if it was made).

use std::ffi::CString;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};

/// One attack of the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attack {
    /// Become uid 0 (`setuid(0)`), or already be it.
    SetuidRoot,
    /// Hold a capability in any set (effective, permitted, inheritable, bounding, ambient), or
    /// raise one with `capset`.
    Capabilities,
    /// `chmod` ARG (a host file outside the grants) to the mode it already has.
    Chmod,
    /// Make a character device node at ARG (`/dev/kmsg`'s numbers; removed if made).
    Mknod,
    /// Read `/proc/ARG/environ` (ARG a pid not the probe's own).
    Environ,
    /// Read `/proc/ARG/cmdline`.
    Cmdline,
    /// `prlimit64` on pid ARG: read its `RLIMIT_NOFILE` and write the same value back.
    Prlimit,
    /// Write `0` to ARG, the `cgroup.procs` of the parent of the adapter's cgroup.
    CgroupEscape,
    /// Connect to the host's pathname unix socket ARG.
    UnixConnect,
    /// Through the egress proxy (`127.0.0.1:`[`PROXY_PORT`]): `CONNECT 127.0.0.1:ARG`, then
    /// one byte written that the server there must echo back. The control of the `egress` row.
    EgressProxy,
    /// The same `CONNECT` to `127.0.0.1:ARG`, a port the allow list does not name: the proxy
    /// must answer `403` (`refused(403)`).
    EgressRefused,
    /// A direct TCP connect to `127.0.0.1:ARG`, ignoring the proxy: the namespace's own
    /// loopback has nothing there (`refused(ECONNREFUSED)`).
    EgressDirect,
}

/// The bound on every socket operation of the `egress_*` attacks.
pub const EGRESS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Attack {
    pub const ALL: [Attack; 12] = [
        Attack::SetuidRoot,
        Attack::Capabilities,
        Attack::Chmod,
        Attack::Mknod,
        Attack::Environ,
        Attack::Cmdline,
        Attack::Prlimit,
        Attack::CgroupEscape,
        Attack::UnixConnect,
        Attack::EgressProxy,
        Attack::EgressRefused,
        Attack::EgressDirect,
    ];

    /// The word on the probe's command line and at the start of its line.
    pub fn word(self) -> &'static str {
        match self {
            Attack::SetuidRoot => "setuid_root",
            Attack::Capabilities => "capabilities",
            Attack::Chmod => "chmod",
            Attack::Mknod => "mknod",
            Attack::Environ => "environ",
            Attack::Cmdline => "cmdline",
            Attack::Prlimit => "prlimit",
            Attack::CgroupEscape => "cgroup_escape",
            Attack::UnixConnect => "unix_connect",
            Attack::EgressProxy => "egress_proxy",
            Attack::EgressRefused => "egress_refused",
            Attack::EgressDirect => "egress_direct",
        }
    }

    pub fn from_word(word: &str) -> Option<Attack> {
        Attack::ALL.into_iter().find(|a| a.word() == word)
    }
}

/// What one attack's line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Worked,
    Refused(i32),
    NotTried(i32),
}

impl Answer {
    /// The answer as the probe's line writes it after `NAME=`.
    pub fn text(self) -> String {
        match self {
            Answer::Worked => "ok".into(),
            Answer::Refused(errno) => format!("refused({errno})"),
            Answer::NotTried(errno) => format!("error({errno})"),
        }
    }
}

/// Read one line of the probe's output: `NAME=ok|refused(N)|error(N)`.
pub fn parse_line(line: &str) -> Option<(Attack, Answer)> {
    let (name, answer) = line.split_once('=')?;
    let attack = Attack::from_word(name)?;
    let number = |prefix: &str| -> Option<i32> {
        answer.strip_prefix(prefix)?.strip_suffix(')')?.parse().ok()
    };
    let answer = if answer == "ok" {
        Answer::Worked
    } else if let Some(errno) = number("refused(") {
        Answer::Refused(errno)
    } else {
        Answer::NotTried(number("error(")?)
    };
    Some((attack, answer))
}

fn errno_of(err: &std::io::Error) -> i32 {
    err.raw_os_error().unwrap_or(libc::EIO)
}

fn from_io<T>(result: std::io::Result<T>) -> Answer {
    match result {
        Ok(_) => Answer::Worked,
        Err(e) => Answer::Refused(errno_of(&e)),
    }
}

fn from_rustix<T>(result: rustix::io::Result<T>) -> Answer {
    match result {
        Ok(_) => Answer::Worked,
        Err(e) => Answer::Refused(e.raw_os_error()),
    }
}

fn pid_arg(value: &str) -> Option<i32> {
    value.parse::<i32>().ok().filter(|&p| p > 0)
}

/// Try `attack` (with its argument `value`) once, from inside the confinement.
pub fn attempt(attack: Attack, value: &str) -> Answer {
    match attack {
        Attack::SetuidRoot => {
            if rustix::process::geteuid().is_root() || rustix::process::getuid().is_root() {
                return Answer::Worked;
            }
            // SAFETY: setuid(2) takes a number; on success this process is root (reported).
            let rc = unsafe { libc::setuid(0) };
            last(rc == 0)
        }
        Attack::Capabilities => capabilities(),
        Attack::Chmod => {
            use std::os::unix::fs::PermissionsExt;
            match std::fs::metadata(value) {
                Ok(meta) => from_io(std::fs::set_permissions(
                    value,
                    std::fs::Permissions::from_mode(meta.permissions().mode() & 0o7777),
                )),
                // The file is outside the grants: not even its mode can be read.
                Err(e) => Answer::Refused(errno_of(&e)),
            }
        }
        Attack::Mknod => {
            let Ok(path) = CString::new(value) else {
                return Answer::NotTried(libc::EINVAL);
            };
            // SAFETY: a NUL-terminated path and numbers.
            let rc =
                unsafe { libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 11)) };
            let answer = last(rc == 0);
            if rc == 0 {
                let _ = std::fs::remove_file(value);
            }
            answer
        }
        Attack::Environ | Attack::Cmdline => {
            let Some(pid) = pid_arg(value) else {
                return Answer::NotTried(libc::EINVAL);
            };
            if u32::try_from(pid).ok() == Some(std::process::id()) {
                // Its own files prove nothing.
                return Answer::NotTried(libc::EINVAL);
            }
            let file = if attack == Attack::Environ {
                "environ"
            } else {
                "cmdline"
            };
            // Reading any of it is the attack: the first bytes tell.
            let path = format!("/proc/{pid}/{file}");
            from_io(
                crate::fs::read_head(std::path::Path::new(&path), 4096)
                    .map_err(std::io::Error::from),
            )
        }
        Attack::Prlimit => {
            let Some(pid) = pid_arg(value) else {
                return Answer::NotTried(libc::EINVAL);
            };
            if u32::try_from(pid).ok() == Some(std::process::id()) {
                return Answer::NotTried(libc::EINVAL);
            }
            let mut old = libc::rlimit64 {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: prlimit64 writes one rlimit64 into a live local.
            let rc =
                unsafe { libc::prlimit64(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
            if rc != 0 {
                return last(false);
            }
            // Reading another process's limit already went too far; writing the same value
            // back proves the write too without changing anything.
            // SAFETY: prlimit64 reads one rlimit64 from a live local.
            let _ =
                unsafe { libc::prlimit64(pid, libc::RLIMIT_NOFILE, &old, std::ptr::null_mut()) };
            Answer::Worked
        }
        Attack::CgroupEscape => from_io(std::fs::write(value, "0\n")),
        Attack::UnixConnect => from_io(std::os::unix::net::UnixStream::connect(value)),
        Attack::EgressProxy | Attack::EgressRefused => {
            let Some(port) = port_arg(value) else {
                return Answer::NotTried(libc::EINVAL);
            };
            through_proxy(port)
        }
        Attack::EgressDirect => {
            let Some(port) = port_arg(value) else {
                return Answer::NotTried(libc::EINVAL);
            };
            let target = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            from_io(TcpStream::connect_timeout(&target, EGRESS_TIMEOUT))
        }
    }
}

fn port_arg(value: &str) -> Option<u16> {
    value.parse::<u16>().ok().filter(|&p| p > 0)
}

/// `CONNECT 127.0.0.1:PORT` through the proxy, then one byte there and back: `Worked` when
/// the byte came back, `Refused(STATUS)` when the proxy answered another status than `200`,
/// `Refused(ERRNO)` when the proxy itself cannot be reached, `NotTried` for anything else.
fn through_proxy(port: u16) -> Answer {
    use std::io::{Read, Write};
    let proxy = SocketAddr::from((Ipv4Addr::LOCALHOST, super::proxy::PROXY_PORT));
    let mut stream = match TcpStream::connect_timeout(&proxy, EGRESS_TIMEOUT) {
        Ok(stream) => stream,
        Err(e) => return Answer::Refused(errno_of(&e)),
    };
    let bounded = stream
        .set_read_timeout(Some(EGRESS_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(EGRESS_TIMEOUT)));
    if let Err(e) = bounded {
        return Answer::NotTried(errno_of(&e));
    }
    let request = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    if let Err(e) = stream.write_all(request.as_bytes()) {
        return Answer::NotTried(errno_of(&e));
    }
    // The head of the answer, one byte at a time so nothing past it is taken.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 {
            return Answer::NotTried(libc::EPROTO);
        }
        match stream.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => head.push(byte[0]),
            Err(e) => return Answer::NotTried(errno_of(&e)),
        }
    }
    let Some(status) = status_of(&head) else {
        return Answer::NotTried(libc::EPROTO);
    };
    if status != 200 {
        return Answer::Refused(i32::from(status));
    }
    if let Err(e) = stream.write_all(b"P") {
        return Answer::NotTried(errno_of(&e));
    }
    match stream.read(&mut byte) {
        Ok(1) if byte[0] == b'P' => Answer::Worked,
        Ok(_) => Answer::NotTried(libc::EPROTO),
        Err(e) => Answer::NotTried(errno_of(&e)),
    }
}

/// The status of an HTTP answer's head (`HTTP/1.1 403 Forbidden`).
fn status_of(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    if !words.next()?.starts_with("HTTP/") {
        return None;
    }
    words.next()?.parse().ok()
}

/// `Worked` when `ok`, else the errno the last call left.
fn last(ok: bool) -> Answer {
    if ok {
        Answer::Worked
    } else {
        Answer::Refused(errno_of(&std::io::Error::last_os_error()))
    }
}

/// Any capability held in any set, or one raised with `capset`.
fn capabilities() -> Answer {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    let sets = match rustix::thread::capabilities(None) {
        Ok(sets) => sets,
        Err(e) => return Answer::NotTried(e.raw_os_error()),
    };
    if !(sets.effective.is_empty() && sets.permitted.is_empty() && sets.inheritable.is_empty()) {
        return Answer::Worked;
    }
    for cap in 0..64 {
        // SAFETY: prctl with numbers only; -1 (EINVAL) past the last capability.
        let bounding = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) };
        if bounding < 0 {
            break;
        }
        // SAFETY: as above.
        let ambient =
            unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_IS_SET, cap, 0, 0) };
        if bounding == 1 || ambient == 1 {
            return Answer::Worked;
        }
    }
    // None held: try to raise every one.
    from_rustix(rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::all(),
            permitted: CapabilitySet::all(),
            inheritable: CapabilitySet::empty(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_back() {
        assert_eq!(
            parse_line("chmod=ok"),
            Some((Attack::Chmod, Answer::Worked))
        );
        assert_eq!(
            parse_line("environ=refused(2)"),
            Some((Attack::Environ, Answer::Refused(2)))
        );
        assert_eq!(
            parse_line("prlimit=error(22)"),
            Some((Attack::Prlimit, Answer::NotTried(22)))
        );
        assert_eq!(
            parse_line("egress_refused=refused(403)"),
            Some((Attack::EgressRefused, Answer::Refused(403)))
        );
        assert_eq!(
            parse_line("egress_direct=refused(111)"),
            Some((Attack::EgressDirect, Answer::Refused(libc::ECONNREFUSED)))
        );
        assert_eq!(
            parse_line("egress_proxy=ok"),
            Some((Attack::EgressProxy, Answer::Worked))
        );
        for bad in ["chmod", "chmod=maybe", "nope=ok", "mknod=refused(x)", ""] {
            assert_eq!(parse_line(bad), None, "{bad}");
        }
        for attack in Attack::ALL {
            assert_eq!(Attack::from_word(attack.word()), Some(attack));
            for answer in [Answer::Worked, Answer::Refused(1), Answer::NotTried(22)] {
                let line = format!("{}={}", attack.word(), answer.text());
                assert_eq!(parse_line(&line), Some((attack, answer)));
            }
        }
    }

    #[test]
    fn the_proxy_status_line_is_read() {
        assert_eq!(
            status_of(b"HTTP/1.1 200 Connection established\r\n\r\n"),
            Some(200)
        );
        assert_eq!(
            status_of(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n\r\n"),
            Some(403)
        );
        assert_eq!(status_of(b"SSH-2.0\r\n"), None);
        assert_eq!(status_of(b""), None);
        assert_eq!(port_arg("8080"), Some(8080));
        for bad in ["0", "", "65536", "x"] {
            assert_eq!(port_arg(bad), None, "{bad}");
        }
    }
}
