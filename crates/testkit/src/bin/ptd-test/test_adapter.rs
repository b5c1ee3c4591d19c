//! `ptd-test adapter STEP…`: a scriptable adapter for the test suite and the docs, so that no
//! runtime beyond the Rust toolchain is needed to exercise every misbehaviour.
//!
//! Part of the test-only `ptd-test` binary, never of the product's. Steps run in order:
//!
//! | step | effect |
//! |---|---|
//! | `read-stdin` | read stdin to EOF (the request) |
//! | `big-echo:N` | before reading stdin, print a succeeded envelope (ids from the metadata variables) whose `output` is a string of N bytes |
//! | `--` | stop: the remaining arguments are data |
//! | `echo[:STATUS[:CODE]]` | print a result envelope echoing the request; `output` reports what the adapter received: `stdin`, `argv`, `env`, `cwd` |
//! | `print:TEXT` / `eprint:TEXT` | write TEXT (no newline added) to stdout / stderr |
//! | `flood:N` / `flood-stderr:N` | write N bytes to stdout / stderr |
//! | `sleep:MS` / `busy:MS` | sleep / spin |
//! | `alloc:MIB` | allocate MIB MiB and touch every page (resident), then free it |
//! | `ignore-term` | ignore SIGTERM, SIGINT and SIGHUP |
//! | `exit:N` | exit with N |
//! | `raise:SIG` | kill itself with signal number SIG |
//! | `spawn:STEPS` / `spawn-setsid:STEPS` | start a copy of itself running STEPS (separated by `+`), sharing stdout/stderr, without waiting; `-setsid` puts it in a new session |
//! | `pidfile:PATH` | append its pid and a newline to PATH |
//! | `fork-chain:MS:PATH` | fork a child that calls `setsid()`, appends its pid (= the chain's session and group id) to PATH, then for MS ms forks and exits, so a new process carries on at every hop; the adapter goes on at once |
//! | `session-chain:MS:NAME` | fork a child named NAME (`PR_SET_NAME`, at most 15 bytes) that for MS ms forks and exits, each new process calling `setsid()` first: a new session at every hop, so no group signal reaches the next one; the adapter goes on at once |
//! | `named:NAME` | report on stderr how many live processes named NAME it sees in its `/proc`, looking again for up to 2 s while it sees none (a chain's live process may be gone before a scan reaches it) (`host-reach: named=N`) |
//! | `close-stdin` | close stdin without reading it |
//! | `file-echo[:STATUS]` | file transport: read the request file, write the envelope to the result file (created 0600; `output.request_file_mode` and `output.folder_mode` report the request file's and its folder's modes) |
//! | `result-as:KIND[:TARGET]` | file transport: make the result path a `fifo`, a `dir`, a `socket`, or a `symlink` to TARGET, instead of a file |
//! | `litter:N` | file transport: leave N hard links to the request file in the private folder |
//! | `delegation-echo[:STATUS]` | host delegation: read the request on stdin and answer it (`status` default `completed`, its `request_id`, `sandbox_session_id` and `source_digest` echoed, `provider: "test-adapter"`); `result` reports `request` (as parsed), `newline` (whether stdin ended with one), `argv` and `env`; a failure status adds an `error` |
//! | `probe-tty:TEXT` | open `/dev/tty`, write TEXT to it and push TEXT into its input (`TIOCSTI`), and try `TIOCSTI` on stdin, stdout and stderr; report on stderr (`host-reach: dev-tty=…`, `tiocsti=…`) |
//! | `list-fds` | report its open descriptors on stderr (`host-reach: fds=0,1,2`) |
//! | `parent-environ:NAME` | read `/proc/<ppid>/environ` and report whether NAME is in it (`host-reach: parent-environ=refused\|found\|absent`) |
//! | `parent-stdout:TEXT` | open `/proc/<ppid>/fd/1` and write TEXT and a newline to it (`host-reach: parent-stdout=refused\|written`) |
//! | `litter-tree:OUTSIDE` | file transport: leave nested folders, a folder without write permission, and symlinks to OUTSIDE in the private folder |
//! | `read-file:PATH` / `write-file:PATH` | open PATH and read it / create it and write a line (`host-reach: read-file=ok\|refused(ERRNO)`, `write-file=…`) |
//! | `connect:ADDR` | connect a TCP socket to ADDR, e.g. `127.0.0.1:8080` (`host-reach: connect=ok\|refused(ERRNO)`) |
//! | `abstract-connect:NAME` | connect to the abstract unix socket `@NAME` (`host-reach: abstract-connect=…`) |
//! | `signal-parent:SIG` | send signal number SIG to its parent, the dispatcher (`host-reach: signal-parent=…`) |
//! | `keyctl` | call `keyctl(KEYCTL_GET_KEYRING_ID, session keyring)`, a system call the seccomp filter refuses (`host-reach: keyctl=…`) |
//! | `fork-many:N` | fork N children that sleep 30 s, stopping at the first refused fork (`host-reach: fork-many=ok\|refused(ERRNO)`) |
//! | `allocate:MIB` | allocate MIB MiB and touch every page (`host-reach: allocate=ok`) |
//! | `write-tmp:BYTES` | write BYTES bytes to `$TMPDIR/big` (`host-reach: write-tmp=ok\|refused(ERRNO)`) |
//! | `tmpdir:PATH` | write its `TMPDIR` to PATH and report its mode (`host-reach: tmpdir-mode=700`) |

use ptd_wire::json;
use serde_json::{json, Map, Value};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

/// The number a step needs; a step with a missing or malformed number is a mistake in the
/// test, reported (exit 2) instead of silently doing nothing.
fn number<T: std::str::FromStr>(step: &str, arg: &str) -> Option<T> {
    let n = arg.parse().ok();
    if n.is_none() {
        eprintln!("ptd-test adapter: step {step:?} needs a number, not {arg:?}");
    }
    n
}

/// Run the steps; returns the exit status.
pub(crate) fn run(steps: &[String]) -> u8 {
    let mut stdin: Option<Vec<u8>> = None;
    for step in steps {
        let (name, arg) = step.split_once(':').unwrap_or((step.as_str(), ""));
        match name {
            "--" => return 0,
            "big-echo" => {
                let Some(size) = number::<usize>(step, arg) else {
                    return 2;
                };
                // Answer before reading the request: the ids come from the metadata variables.
                let var = |k: &str| std::env::var(k).unwrap_or_default();
                let envelope = json!({
                    "schema": "wp-codebox/parent-tool-result/v1", "version": 1,
                    "request_id": var("WP_CODEBOX_PARENT_TOOL_REQUEST_ID"),
                    "tool": var("WP_CODEBOX_PARENT_TOOL_TOOL"),
                    "operation": var("WP_CODEBOX_PARENT_TOOL_OPERATION"),
                    "status": "succeeded",
                    "output": "x".repeat(size),
                });
                write_out(format!("{envelope}\n").as_bytes());
            }
            "read-stdin" => {
                stdin.get_or_insert_with(read_stdin);
            }
            "echo" => {
                let bytes = stdin.get_or_insert_with(read_stdin).clone();
                let envelope = respond(&bytes, arg);
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{envelope}");
                let _ = out.flush();
            }
            "file-echo" => {
                let request_path =
                    std::env::var("WP_CODEBOX_PARENT_TOOL_REQUEST_FILE").unwrap_or_default();
                let result_path =
                    std::env::var("WP_CODEBOX_PARENT_TOOL_RESULT_FILE").unwrap_or_default();
                let bytes = std::fs::read(&request_path).unwrap_or_default();
                let mut envelope = respond(&bytes, arg);
                let mode = |path: &std::path::Path| {
                    use std::os::unix::fs::PermissionsExt;
                    let mode = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o777);
                    json!(format!("{:o}", mode.unwrap_or(0)))
                };
                let request_path = std::path::Path::new(&request_path);
                envelope["output"]["request_file_mode"] = mode(request_path);
                envelope["output"]["folder_mode"] =
                    mode(request_path.parent().unwrap_or(request_path));
                if write_private(&result_path, format!("{envelope}\n").as_bytes()).is_err() {
                    return 3;
                }
            }
            "result-as" => {
                if make_result_as(arg).is_err() {
                    return 3;
                }
            }
            "litter" => {
                let Some(count) = number(step, arg) else {
                    return 2;
                };
                if litter(count).is_err() {
                    return 3;
                }
            }
            "litter-tree" => {
                if litter_tree(arg).is_err() {
                    return 3;
                }
            }
            "delegation-echo" => {
                let bytes = stdin.get_or_insert_with(read_stdin).clone();
                write_out(format!("{}\n", delegation_answer(&bytes, arg)).as_bytes());
            }
            "print" => write_out(arg.as_bytes()),
            "eprint" => {
                let _ = std::io::stderr().write_all(arg.as_bytes());
            }
            "flood" | "flood-stderr" => {
                let Some(n) = number(step, arg) else {
                    return 2;
                };
                if name == "flood" {
                    flood(&mut std::io::stdout().lock(), n);
                } else {
                    flood(&mut std::io::stderr().lock(), n);
                }
            }
            "sleep" => {
                let Some(ms) = number(step, arg) else {
                    return 2;
                };
                std::thread::sleep(Duration::from_millis(ms));
            }
            "busy" => {
                let Some(ms) = number(step, arg) else {
                    return 2;
                };
                let until = Instant::now() + Duration::from_millis(ms);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
            }
            "alloc" => {
                let Some(mib) = number::<usize>(step, arg) else {
                    return 2;
                };
                let mut block = vec![0u8; mib << 20];
                for page in block.chunks_mut(4096) {
                    page[0] = 1;
                }
                std::hint::black_box(&block);
            }
            "ignore-term" => {
                for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
                    // SAFETY: installing SIG_IGN touches no Rust state.
                    unsafe {
                        libc::signal(sig, libc::SIG_IGN);
                    }
                }
            }
            "exit" => return number(step, arg).unwrap_or(2),
            "raise" => {
                let Some(signal) = number(step, arg) else {
                    return 2;
                };
                // SAFETY: signalling ourselves.
                unsafe {
                    libc::kill(libc::getpid(), signal);
                }
                std::thread::sleep(Duration::from_secs(5));
            }
            "spawn" | "spawn-setsid" => spawn_copy(arg, name == "spawn-setsid"),
            "fork-chain" => fork_chain(arg),
            "session-chain" => session_chain(arg),
            "pidfile" => {
                let line = format!("{}\n", std::process::id());
                let _ = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(arg)
                    .and_then(|mut f| f.write_all(line.as_bytes()));
            }
            "probe-tty" => reach(&probe_tty(arg.as_bytes())),
            "read-file" => reach(&format!("read-file={}", outcome(std::fs::read(arg)))),
            "write-file" => reach(&format!(
                "write-file={}",
                outcome(std::fs::write(arg, "written by the adapter\n"))
            )),
            "connect" => reach(&format!(
                "connect={}",
                outcome(std::net::TcpStream::connect(arg))
            )),
            "abstract-connect" => reach(&format!("abstract-connect={}", abstract_connect(arg))),
            "signal-parent" => {
                let Some(signal) = number(step, arg) else {
                    return 2;
                };
                // SAFETY: kill(2) on the parent's pid; a refusal is the finding.
                let sent = unsafe { libc::kill(libc::getppid(), signal) } == 0;
                reach(&format!("signal-parent={}", last_os(sent)));
            }
            "keyctl" => {
                const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
                const KEY_SPEC_SESSION_KEYRING: libc::c_long = -3;
                // SAFETY: keyctl(2) with two numbers only reads a keyring id.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_keyctl,
                        KEYCTL_GET_KEYRING_ID,
                        KEY_SPEC_SESSION_KEYRING,
                        0 as libc::c_long,
                    )
                };
                reach(&format!("keyctl={}", last_os(rc >= 0)));
            }
            "fork-many" => {
                let Some(n) = number(step, arg) else {
                    return 2;
                };
                reach(&format!("fork-many={}", fork_many(n)));
            }
            "allocate" => {
                let Some(mib) = number::<usize>(step, arg) else {
                    return 2;
                };
                let mut kept = Vec::with_capacity(mib);
                for _ in 0..mib {
                    // Every page written, so the memory is really charged.
                    let mut block = vec![0u8; 1 << 20];
                    for page in block.iter_mut().step_by(4096) {
                        *page = 1;
                    }
                    kept.push(block);
                }
                reach(&format!("allocate=ok({})", kept.len()));
            }
            "write-tmp" => {
                let Some(bytes) = number::<usize>(step, arg) else {
                    return 2;
                };
                let path = std::env::temp_dir().join("big");
                let result = std::fs::File::create(&path).and_then(|mut f| {
                    let chunk = vec![b'x'; 1 << 16];
                    let mut left = bytes;
                    while left > 0 {
                        let n = left.min(chunk.len());
                        f.write_all(&chunk[..n])?;
                        left -= n;
                    }
                    Ok(())
                });
                reach(&format!("write-tmp={}", outcome(result)));
            }
            "tmpdir" => {
                use std::os::unix::fs::PermissionsExt;
                let tmp = std::env::var("TMPDIR").unwrap_or_default();
                let _ = std::fs::write(arg, &tmp);
                let mode = std::fs::metadata(&tmp).map(|m| m.permissions().mode() & 0o777);
                reach(&format!("tmpdir-mode={:o}", mode.unwrap_or(0)));
            }
            "list-fds" => reach(&format!("fds={}", open_fds().join(","))),
            "named" => {
                let until = Instant::now() + Duration::from_secs(2);
                let mut seen = ptd_testkit::procs::live_named(arg).len();
                while seen == 0 && Instant::now() < until {
                    seen = ptd_testkit::procs::live_named(arg).len();
                }
                reach(&format!("named={seen}"));
            }
            // SPEC §13.2's attacks: each reports `NAME=ok` or `NAME=refused(ERRNO)`.
            "chmod" => {
                use std::os::unix::fs::PermissionsExt;
                let done = std::fs::set_permissions(arg, std::fs::Permissions::from_mode(0o777));
                reach(&format!("chmod={}", outcome(done)));
            }
            "chown" => reach(&format!(
                "chown={}",
                outcome(std::os::unix::fs::lchown(arg, Some(0), Some(0)))
            )),
            "setxattr" => {
                let path = std::ffi::CString::new(arg).unwrap_or_default();
                // SAFETY: NUL-terminated path and name, a value buffer of the length given.
                let rc = unsafe {
                    libc::lsetxattr(
                        path.as_ptr(),
                        c"user.ptd".as_ptr(),
                        b"x".as_ptr().cast(),
                        1,
                        0,
                    )
                };
                reach(&format!("setxattr={}", last_os(rc == 0)));
            }
            "mknod" => {
                let path = std::ffi::CString::new(arg).unwrap_or_default();
                // /dev/kmsg's numbers (char 1:11).
                // SAFETY: a NUL-terminated path and numbers.
                let rc = unsafe {
                    libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 11))
                };
                reach(&format!("mknod={}", last_os(rc == 0)));
            }
            "prlimit" => {
                let Some(pid) = number::<i32>(step, arg) else {
                    return 2;
                };
                let limit = libc::rlimit64 {
                    rlim_cur: 1,
                    rlim_max: 1,
                };
                // SAFETY: prlimit64 reads one rlimit64 from a live local.
                let rc = unsafe {
                    libc::prlimit64(pid, libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut())
                };
                reach(&format!("prlimit={}", last_os(rc == 0)));
            }
            "signal-pid" => {
                let Some(pid) = number::<i32>(step, arg) else {
                    return 2;
                };
                // SAFETY: kill(2) with signal 0: the permission check only.
                let rc = unsafe { libc::kill(pid, 0) };
                reach(&format!("signal-pid={}", last_os(rc == 0)));
            }
            "adjtimex-set" => {
                // SAFETY: a zeroed timex is valid; ADJ_OFFSET asks to change the clock.
                let mut timex: libc::timex = unsafe { std::mem::zeroed() };
                timex.modes = libc::ADJ_OFFSET;
                timex.offset = 1;
                // SAFETY: adjtimex reads and writes the local.
                let rc = unsafe { libc::adjtimex(&mut timex) };
                reach(&format!("adjtimex-set={}", last_os(rc >= 0)));
            }
            "unix-connect" => reach(&format!(
                "unix-connect={}",
                outcome(std::os::unix::net::UnixStream::connect(arg))
            )),
            "packet-socket" => {
                // SAFETY: socket(2) with numbers; the descriptor is closed below.
                let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
                reach(&format!("packet-socket={}", last_os(fd >= 0)));
                if fd >= 0 {
                    // SAFETY: our own descriptor.
                    unsafe { libc::close(fd) };
                }
            }
            "proc-pids" => {
                let mut pids: Vec<u32> = std::fs::read_dir("/proc")
                    .map(|d| {
                        d.flatten()
                            .filter_map(|e| e.file_name().to_str()?.parse().ok())
                            .collect()
                    })
                    .unwrap_or_default();
                pids.sort_unstable();
                let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
                reach(&format!("proc-pids={}", pids.join(",")));
            }
            "creds" => {
                let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
                let wanted = [
                    "Uid",
                    "Gid",
                    "Groups",
                    "CapInh",
                    "CapPrm",
                    "CapEff",
                    "CapBnd",
                    "CapAmb",
                    "NoNewPrivs",
                ];
                for line in status.lines() {
                    if let Some((key, value)) = line.split_once(':') {
                        if wanted.contains(&key) {
                            let value: Vec<&str> = value.split_whitespace().collect();
                            reach(&format!("{key}={}", value.join(" ")));
                        }
                    }
                }
            }
            "cgroup-escape" => {
                // Move into the parent of the memory cgroup this process is in.
                let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
                let target = own.lines().find_map(|line| {
                    let mut parts = line.splitn(3, ':');
                    let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                    let v1 = controllers.split(',').any(|c| c == "memory");
                    let base = if v1 {
                        "/sys/fs/cgroup/memory"
                    } else if controllers.is_empty() {
                        "/sys/fs/cgroup/unified"
                    } else {
                        return None;
                    };
                    let parent = std::path::Path::new(path).parent()?;
                    Some(
                        std::path::Path::new(base)
                            .join(parent.strip_prefix("/").ok()?)
                            .join("cgroup.procs"),
                    )
                });
                let done = match target {
                    Some(procs) => std::fs::write(procs, "0\n"),
                    None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
                };
                reach(&format!("cgroup-escape={}", outcome(done)));
            }
            "setsid" => {
                // Leave the dispatcher's process group (a SIGTERM to the group misses it).
                // SAFETY: setsid(2) takes no argument.
                let rc = unsafe { libc::setsid() };
                reach(&format!("setsid={}", last_os(rc >= 0)));
            }
            "on-term" => {
                // Write ARG when SIGTERM arrives, then exit 0 (proof the ladder's SIGTERM
                // reached this process).
                ON_TERM.get_or_init(|| arg.to_owned());
                // SAFETY: installing a handler that only makes async-signal-safe calls.
                unsafe { libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t) };
            }
            "parent-environ" => reach(&parent_environ(arg)),
            "parent-stdout" => reach(&parent_stdout(arg)),
            "close-stdin" => {
                // The pipe's read end is closed by putting /dev/null in its place: fd 0 stays a
                // valid descriptor for std's stdin, and the dispatcher's writes get EPIPE.
                let null = std::fs::File::open("/dev/null");
                if null
                    .and_then(|f| Ok(rustix::stdio::dup2_stdin(f)?))
                    .is_err()
                {
                    return 3;
                }
            }
            _ => {
                eprintln!("ptd-test adapter: unknown step {step:?}");
                return 2;
            }
        }
    }
    0
}

/// Where `on-term` writes, read by its handler.
static ON_TERM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

extern "C" fn on_term(_: libc::c_int) {
    if let Some(path) = ON_TERM.get() {
        let _ = std::fs::write(path, "term\n");
    }
    // SAFETY: _exit ends the process.
    unsafe { libc::_exit(0) };
}

fn read_stdin() -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut buf);
    buf
}

/// One `host-reach:` line on stderr: what a reach into the host got.
fn reach(finding: &str) {
    let _ = writeln!(std::io::stderr(), "host-reach: {finding}");
}

/// How an attempt ended: `refused(ERRNO)` or what the caller says it did.
fn refused(err: &std::io::Error) -> String {
    format!("refused({})", err.raw_os_error().unwrap_or(0))
}

/// `ok`, or `refused(ERRNO)`.
fn outcome<T>(result: std::io::Result<T>) -> String {
    match result {
        Ok(_) => "ok".to_string(),
        Err(err) => refused(&err),
    }
}

/// `ok` when the call succeeded, else `refused(errno)` of the last system call.
fn last_os(succeeded: bool) -> String {
    if succeeded {
        "ok".to_string()
    } else {
        refused(&std::io::Error::last_os_error())
    }
}

/// `abstract-connect:NAME`: a stream connection to the abstract unix socket `@NAME`.
fn abstract_connect(name: &str) -> String {
    use std::os::linux::net::SocketAddrExt;
    let connected = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
        .and_then(|addr| std::os::unix::net::UnixStream::connect_addr(&addr));
    outcome(connected)
}

/// `fork-many:N`: N sleeping children, or the errno of the first fork refused.
fn fork_many(n: usize) -> String {
    for _ in 0..n {
        // SAFETY: the test adapter is single-threaded; the child only sleeps and leaves
        // through `_exit`, running none of the parent's state.
        match unsafe { libc::fork() } {
            0 => {
                // SAFETY: sleep(3) and _exit(2) take no pointer; the child ends here.
                unsafe {
                    libc::sleep(30);
                    libc::_exit(0)
                }
            }
            -1 => return refused(&std::io::Error::last_os_error()),
            _ => {}
        }
    }
    "ok".to_string()
}

/// `probe-tty`: reach the operator's terminal through `/dev/tty` (writing, and pushing
/// keystrokes), then through any standard descriptor that is a terminal.
fn probe_tty(text: &[u8]) -> String {
    use std::os::fd::AsRawFd;
    let push = |fd: i32| -> bool {
        text.iter().all(|byte| {
            // SAFETY: TIOCSTI reads one byte through the pointer, which is valid for the call.
            unsafe { libc::ioctl(fd, libc::TIOCSTI, std::ptr::from_ref(byte)) == 0 }
        })
    };
    let mut found = Vec::new();
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    {
        Ok(mut tty) => {
            let wrote = tty.write_all(text).is_ok();
            found.push(format!("dev-tty=opened(wrote={wrote})"));
            let pushed = push(tty.as_raw_fd());
            found.push(format!(
                "tiocsti={}",
                if pushed { "pushed" } else { "refused" }
            ));
        }
        Err(err) => found.push(format!("dev-tty={}", refused(&err))),
    }
    for fd in 0..3 {
        // SAFETY: isatty on a number only asks.
        if unsafe { libc::isatty(fd) } == 1 {
            found.push(format!(
                "fd{fd}-tiocsti={}",
                if push(fd) { "pushed" } else { "refused" }
            ));
        }
    }
    found.join(" ")
}

/// The descriptors this process has open (the listing's own one left out).
fn open_fds() -> Vec<String> {
    let listed: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    listed
        .into_iter()
        // SAFETY: F_GETFD on a number only asks; the listing's descriptor is closed by now.
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0)
        .map(|fd| fd.to_string())
        .collect()
}

/// `parent-environ:NAME`: read the dispatcher's environment through `/proc`.
fn parent_environ(name: &str) -> String {
    let path = format!("/proc/{}/environ", std::os::unix::process::parent_id());
    match std::fs::read(path) {
        Err(err) => format!("parent-environ={}", refused(&err)),
        Ok(bytes) => {
            let prefix = format!("{name}=");
            let found = bytes
                .split(|&b| b == 0)
                .any(|var| var.starts_with(prefix.as_bytes()));
            format!("parent-environ={}", if found { "found" } else { "absent" })
        }
    }
}

/// `parent-stdout:TEXT`: write a line to the dispatcher's own stdout through `/proc`.
fn parent_stdout(text: &str) -> String {
    let path = format!("/proc/{}/fd/1", std::os::unix::process::parent_id());
    match std::fs::OpenOptions::new().write(true).open(path) {
        Err(err) => format!("parent-stdout={}", refused(&err)),
        Ok(mut out) => match out.write_all(format!("{text}\n").as_bytes()) {
            Ok(()) => "parent-stdout=written".to_string(),
            Err(err) => format!("parent-stdout={}", refused(&err)),
        },
    }
}

fn write_out(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
}

fn flood(out: &mut dyn Write, mut n: usize) {
    let chunk = [b'x'; 65536];
    while n > 0 {
        let k = n.min(chunk.len());
        if out.write_all(&chunk[..k]).is_err() {
            return;
        }
        n -= k;
    }
    let _ = out.flush();
}

fn spawn_copy(steps: &str, setsid: bool) {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("adapter")
        .args(steps.split('+'))
        .stdin(std::process::Stdio::null());
    if setsid {
        // SAFETY: setsid is async-signal-safe and is all that runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
    }
    let _ = cmd.spawn();
}

/// `fork-chain:MS:PATH`: a process that outruns a sweep that stops on one empty `/proc` scan.
/// It never returns in the chain's processes; the adapter returns at once.
fn fork_chain(arg: &str) {
    let (ms, path) = arg.split_once(':').unwrap_or((arg, ""));
    let Some(ms) = number(arg, ms) else {
        return;
    };
    let until = Instant::now() + Duration::from_millis(ms);
    // SAFETY: the test adapter is single-threaded, so the child may go on running Rust code;
    // the parent only looks at the return value.
    if unsafe { libc::fork() } != 0 {
        return;
    }
    // SAFETY: setsid has no memory effects; it fails only for a group leader, which a fresh
    // child is not.
    unsafe {
        libc::setsid();
    }
    let line = format!("{}\n", std::process::id());
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    hop_until(until, false)
}

/// `session-chain:MS:NAME`: a process that outruns a sweep killing one process at a time, in a
/// new session at every hop. It never returns in the chain's processes; the adapter returns
/// at once.
fn session_chain(arg: &str) {
    let (ms, name) = arg.split_once(':').unwrap_or((arg, "ptd-chain"));
    let Some(ms) = number(arg, ms) else {
        return;
    };
    let Ok(name) = std::ffi::CString::new(name) else {
        return;
    };
    let until = Instant::now() + Duration::from_millis(ms);
    // SAFETY: the test adapter is single-threaded, so the child may go on running Rust code;
    // the parent only looks at the return value.
    if unsafe { libc::fork() } != 0 {
        return;
    }
    // SAFETY: PR_SET_NAME reads a NUL-terminated string that outlives the call (the kernel
    // copies at most 16 bytes of it); the name is inherited by every fork below.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
    }
    hop_until(until, true)
}

/// The chain's loop, in its first process: until `until`, fork and exit, so a new process
/// carries on at every hop (each in a new session of its own with `new_session`). Never
/// returns.
fn hop_until(until: Instant, new_session: bool) -> ! {
    while Instant::now() < until {
        // SAFETY: the test adapter is single-threaded, so the child may go on running Rust
        // code. The parent leaves through `_exit`, which runs no destructor and no atexit
        // handler of the parent's copy of the state.
        match unsafe { libc::fork() } {
            0 if new_session => {
                // SAFETY: setsid has no memory effects; a fresh child is never a group leader.
                unsafe {
                    libc::setsid();
                }
            }
            0 => {}
            -1 => std::thread::sleep(Duration::from_millis(1)),
            // SAFETY: _exit(2) takes no pointer and ends this process at once.
            _ => unsafe { libc::_exit(0) },
        }
    }
    // SAFETY: as above.
    unsafe { libc::_exit(0) }
}

/// The envelope for `echo`: echoes the request, reports what was received.
fn respond(stdin: &[u8], arg: &str) -> Value {
    // Read the ids with the product's own reader: a request may hold numbers a tree cannot
    // (1e400), and the echo must still work.
    let request = json::Document::parse(stdin.to_vec(), usize::MAX).ok();
    let field = |k: &str| {
        Value::String(
            request
                .as_ref()
                .and_then(|d| d.get(k))
                .and_then(json::raw::string)
                .map(|s| s.into_owned())
                .unwrap_or_default(),
        )
    };
    let (status, code) = arg.split_once(':').unwrap_or((arg, "adapter_failure"));
    let status = if status.is_empty() {
        "succeeded"
    } else {
        status
    };
    let env: Map<String, Value> = std::env::vars()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut envelope = json!({
        "schema": "wp-codebox/parent-tool-result/v1",
        "version": 1,
        "request_id": field("request_id"),
        "tool": field("tool"),
        "operation": field("operation"),
        "status": status,
        "output": {
            "stdin": String::from_utf8_lossy(stdin),
            "argv": std::env::args().collect::<Vec<_>>(),
            "env": env,
            "cwd": cwd,
        },
        "diagnostics": {"adapter": "test"},
    });
    if status != "succeeded" {
        envelope["error"] = json!({"code": code, "message": "the test adapter was told to fail", "retryable": false});
    }
    envelope
}

/// The answer for `delegation-echo`: echoes the request's scope, reports what was received.
fn delegation_answer(stdin: &[u8], status: &str) -> Value {
    let request: Map<String, Value> = serde_json::from_slice(stdin).unwrap_or_default();
    let status = if status.is_empty() {
        "completed"
    } else {
        status
    };
    let env: Map<String, Value> = std::env::vars()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let mut answer = json!({
        "schema": "wp-codebox/host-delegation-result/v1",
        "status": status,
        "provider": "test-adapter",
        "result": {
            "request": request,
            "newline": stdin.ends_with(b"\n"),
            "argv": std::env::args().collect::<Vec<_>>(),
            "env": env,
        },
    });
    for key in ["request_id", "sandbox_session_id", "source_digest"] {
        if let Some(value) = request.get(key) {
            answer[key] = value.clone();
        }
    }
    if !matches!(status, "accepted" | "completed") {
        answer["error"] =
            json!({"code": "test_failure", "message": "the test adapter was told to fail"});
    }
    answer
}

/// Create `path` with mode 0600 (what the README asks of an adapter) and write `bytes`.
fn write_private(path: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(bytes)
}

/// The file transport's paths, from the variables the dispatcher set.
fn transport_paths() -> (std::path::PathBuf, std::path::PathBuf) {
    let var = |k: &str| std::path::PathBuf::from(std::env::var_os(k).unwrap_or_default());
    (
        var("WP_CODEBOX_PARENT_TOOL_REQUEST_FILE"),
        var("WP_CODEBOX_PARENT_TOOL_RESULT_FILE"),
    )
}

/// `result-as:KIND[:TARGET]`: something other than a regular file where the result belongs.
fn make_result_as(arg: &str) -> std::io::Result<()> {
    let (_, result) = transport_paths();
    let (kind, target) = arg.split_once(':').unwrap_or((arg, ""));
    match kind {
        "fifo" => {
            use rustix::fs::{mknodat, FileType, Mode, CWD};
            mknodat(CWD, &result, FileType::Fifo, Mode::from_raw_mode(0o600), 0)?;
        }
        "dir" => std::fs::create_dir(&result)?,
        // The listener is dropped at exit; the socket file stays.
        "socket" => drop(std::os::unix::net::UnixListener::bind(&result)?),
        "symlink" => std::os::unix::fs::symlink(target, &result)?,
        _ => return Err(std::io::Error::other("unknown kind")),
    }
    Ok(())
}

/// `litter:N`: N hard links to the request file next to it.
fn litter(n: usize) -> std::io::Result<()> {
    let (request, _) = transport_paths();
    let folder = request.parent().unwrap_or(&request).to_path_buf();
    for i in 0..n {
        std::fs::hard_link(&request, folder.join(format!("litter-{i}")))?;
    }
    Ok(())
}

/// `litter-tree:OUTSIDE`: what a careless or hostile adapter may leave in the folder.
fn litter_tree(outside: &str) -> std::io::Result<()> {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let (request, _) = transport_paths();
    let folder = request.parent().unwrap_or(&request).to_path_buf();
    std::fs::create_dir_all(folder.join("tree/a/b/c"))?;
    std::fs::write(folder.join("tree/a/b/c/file"), "x")?;
    symlink(outside, folder.join("tree/a/outside"))?;
    symlink(outside, folder.join("outside"))?;
    std::fs::create_dir(folder.join("locked"))?;
    std::fs::write(folder.join("locked/file"), "x")?;
    std::fs::set_permissions(
        folder.join("locked"),
        std::fs::Permissions::from_mode(0o500),
    )?;
    Ok(())
}
