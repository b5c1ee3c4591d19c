//! The one path from `fork` to `execve` (SPEC §13.1) for every process the dispatcher starts
//! for a call: the `host_command` adapter (main job, `delegation run`), the MCP adapter's
//! server (through [`ProcessGroup`](super::ProcessGroup)) and replay's child dispatchers
//! (through [`Watched`](super::Watched)).
//!
//! In the child, in this order: `setsid` → parent-death signal (SIGKILL), then a check that
//! the parent did not die before it was armed → *confinement, first half* (join the cgroups,
//! rlimits, new namespaces — under `--network allow:` with the proxy's listener made in the
//! new network namespace and sent to the dispatcher —, the PID namespace's init and the
//! adapter's own process forked
//! ([`super::init`]), no privilege left) → `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)` →
//! *confinement, second half* (`no_new_privs`, Landlock, seccomp — with TIOCSTI/TIOCLINUX
//! refused) → `execve`. The confinement steps are the slots of [`Confinement`], filled from
//! `confine::Prepared` when the run is confined; nothing else may be added to the child
//! anywhere else.
//!
//! Invariants:
//! - everything that can fail or allocate happens before the fork ([`Setup::new`]): the
//!   program resolved and checked, argv and envp as C strings with their pointer arrays; the
//!   child only makes system calls on them, which is async-signal-safe (the parent may have
//!   other threads);
//! - the program is started with `execve`, never `execvp`: glibc's `execvp` runs a file
//!   without `#!` through `/bin/sh`; here that file fails with `ENOEXEC` (not executable);
//! - a new session: the child has no controlling terminal (`/dev/tty` cannot be opened, no
//!   `TIOCSTI` into the operator's terminal) and leads its own process group, whose id is its
//!   pid — what the kill ladder and the sweep signal;
//! - the child keeps exactly stdin, stdout and stderr: every other descriptor becomes
//!   close-on-exec (std's own exec-error pipe already is, so it still reports a failed
//!   `execve`, and it closes at a successful one);
//! - a failure of any step reaches the parent as the error of `spawn()` (its errno), and the
//!   child exits without running anything; a confinement step also writes its `Step` code to
//!   a report pipe first, so the parent tells `SpawnError::Confinement` (SPEC §13 "Fail
//!   closed") from a failed `execve`.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked exits, not the process: the caller
//! spawns from a thread that outlives the child (every caller waits for it on the same thread).
//! It covers the child only: what the child starts itself is not killed by it when the
//! dispatcher dies hard, but stays in the child's session and group (see docs/guide.md).

use super::{SpawnError, Why};
use crate::confine::{ChildError, Prepared, Step};
use rustix::fd::OwnedFd;
use rustix::process::{Pid, Signal};
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

/// glibc's search path when the environment has no `PATH` (`confstr(_CS_PATH)`), as `execvp`
/// used it before the dispatcher resolved programs itself.
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// NUL-terminated strings and the NULL-terminated pointer array `execve` takes.
struct CStrings {
    _owned: Vec<CString>,
    ptrs: Vec<*const libc::c_char>,
}

// SAFETY: the pointers point into the heap buffers of `_owned`, which live as long as the
// value and are never changed after construction; nothing is shared mutably.
unsafe impl Send for CStrings {}
// SAFETY: as above; the value is read-only after construction.
unsafe impl Sync for CStrings {}

impl CStrings {
    fn new(items: impl IntoIterator<Item = Vec<u8>>) -> Result<CStrings, SpawnError> {
        let owned = items
            .into_iter()
            .map(CString::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| SpawnError::Other(io::ErrorKind::InvalidInput))?;
        let mut ptrs: Vec<*const libc::c_char> = owned.iter().map(|s| s.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        Ok(CStrings {
            _owned: owned,
            ptrs,
        })
    }
}

/// The confinement steps (SPEC §13), built before the fork ([`Prepared`]) and applied in the
/// child in SPEC §13.1's order, in the two slots below and nowhere else. Empty (no step) when
/// the run is not confined. A step the kernel refuses writes its [`Step`] code to the report
/// pipe before the child gives up, so the parent can tell a confinement step that failed
/// (`confinement_unavailable`) from an `execve` that failed (`adapter_not_found`, …): both
/// reach `spawn()` as nothing but an errno.
#[derive(Debug, Default)]
pub(crate) struct Confinement {
    prepared: Option<Arc<Prepared>>,
    /// The write end of the report pipe (close-on-exec: it closes at a successful `execve`).
    report: Option<OwnedFd>,
}

impl Confinement {
    /// Slot between the parent-death signal and `close_range`: join the cgroups, set the
    /// rlimits, enter new namespaces (and hand the proxy's listener over, under `--network
    /// allow:`), fork the PID namespace's init (which puts its own `/proc`
    /// in place) and the adapter's process ([`super::init`]), and there drop every privilege.
    /// Returns in the adapter's process only. Runs in the child: system calls only.
    fn before_close(&self) -> Result<(), io::Error> {
        if let Some(prepared) = &self.prepared {
            let refused = |err| self.refused(err);
            prepared.join_cgroups().map_err(refused)?;
            prepared.set_rlimits().map_err(refused)?;
            prepared.enter_namespaces().map_err(refused)?;
            let in_init = || prepared.in_pid_namespace().map_err(refused);
            super::init::fork_init_and_adapter(&in_init).inspect_err(|err| {
                // A fork that failed: the PID namespace's step.
                let errno =
                    rustix::io::Errno::from_io_error(err).unwrap_or(rustix::io::Errno::AGAIN);
                let _ = self.refused(ChildError {
                    step: Step::PidNamespace,
                    errno,
                });
            })?;
            prepared.drop_privileges().map_err(refused)?;
        }
        Ok(())
    }

    /// Slot between `close_range` and `execve`: `no_new_privs`, Landlock, seccomp (which also
    /// refuses `TIOCSTI` and `TIOCLINUX`). Runs in the child: system calls only.
    fn before_exec(&self) -> Result<(), ChildError> {
        if let Some(prepared) = &self.prepared {
            crate::confine::set_no_new_privs()?;
            prepared.restrict_landlock()?;
            prepared.apply_seccomp()?;
        }
        Ok(())
    }

    /// Tell the parent which step failed (one byte; a failed write changes nothing: the
    /// child gives up either way), and give `spawn()` its errno. System calls only.
    fn refused(&self, err: ChildError) -> io::Error {
        if let Some(report) = &self.report {
            let _ = rustix::io::write(report, &[err.code()]);
        }
        io::Error::from_raw_os_error(err.errno.raw_os_error())
    }
}

/// The parent's end of a confined child's report pipe: which confinement step the kernel
/// refused, when `spawn()` failed.
#[derive(Debug)]
pub(crate) struct StepReport(OwnedFd);

impl StepReport {
    /// The refused step, with `errno` (the one `spawn()` returned); `None` when no step was
    /// refused (the `execve` or an earlier set-up step failed). Non-blocking: the child wrote
    /// before it failed, and `spawn()` returns only after that.
    pub(crate) fn refused(&self, errno: Option<i32>) -> Option<ChildError> {
        let mut byte = [0u8; 1];
        match rustix::io::read(&self.0, &mut byte) {
            Ok(1) => Some(ChildError {
                step: Step::from_code(byte[0]),
                errno: rustix::io::Errno::from_raw_os_error(errno.unwrap_or(libc::EPERM)),
            }),
            _ => None,
        }
    }
}

/// Everything the child needs between `fork` and `execve`, built before the fork.
pub(crate) struct Setup {
    program: CString,
    argv: CStrings,
    envp: CStrings,
    /// The process that forks: the child checks it is still its parent once the parent-death
    /// signal is armed.
    parent: Pid,
    /// Descriptors open before the fork, for kernels without `CLOSE_RANGE_CLOEXEC` (5.11).
    fallback_fds: Vec<RawFd>,
    confinement: Confinement,
}

impl Setup {
    /// Resolve `program` (through the `PATH` of `env` when it has no `/`, as `execvp` would,
    /// relative entries against `cwd`) and build argv and envp. `env` is the child's whole
    /// environment.
    pub(crate) fn new<A, K, V>(
        program: &Path,
        argv: &[A],
        env: impl IntoIterator<Item = (K, V)>,
        cwd: Option<&Path>,
    ) -> Result<Setup, SpawnError>
    where
        A: AsRef<OsStr>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let env: Vec<(K, V)> = env.into_iter().collect();
        let resolved = resolve(program, path_var(&env).map(AsRef::as_ref), cwd)?;
        let env: Vec<Vec<u8>> = env
            .iter()
            .map(|(k, v)| {
                let mut entry = k.as_ref().as_bytes().to_vec();
                entry.push(b'=');
                entry.extend_from_slice(v.as_ref().as_bytes());
                entry
            })
            .collect();
        // An empty argv still gives the program a name: the program as given.
        let argv = match argv {
            [] => CStrings::new([program.as_os_str().as_bytes().to_vec()])?,
            _ => CStrings::new(argv.iter().map(|a| a.as_ref().as_bytes().to_vec()))?,
        };
        let program = CString::new(resolved.into_os_string().into_vec())
            .map_err(|_| SpawnError::Other(io::ErrorKind::InvalidInput))?;
        let fallback_fds = if close_range_cloexec_works() {
            Vec::new()
        } else {
            open_fds()
        };
        Ok(Setup {
            program,
            argv,
            envp: CStrings::new(env)?,
            parent: rustix::process::getpid(),
            fallback_fds,
            confinement: Confinement::default(),
        })
    }

    /// Confine the child with `prepared` (its steps run in the two slots of [`Confinement`]).
    /// Returns the parent's end of the report pipe, to ask which step failed when `spawn()`
    /// does.
    pub(crate) fn confine(&mut self, prepared: Arc<Prepared>) -> Result<StepReport, SpawnError> {
        let (read, write) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )
        .map_err(|err| SpawnError::Other(io::Error::from(err).kind()))?;
        self.confinement = Confinement {
            prepared: Some(prepared),
            report: Some(write),
        };
        Ok(StepReport(read))
    }

    /// The resolved program.
    pub(crate) fn program(&self) -> &Path {
        Path::new(OsStr::from_bytes(self.program.as_bytes()))
    }

    /// A `Command` that runs this setup in the child and `execve`s the program with exactly
    /// this argv and environment, in `cwd`. The caller sets stdin, stdout and stderr; std
    /// puts them in place (and changes to `cwd`) before the setup runs.
    // exec/ owns spawning (clippy.toml's disallowed-methods).
    #[allow(clippy::disallowed_methods)]
    pub(crate) fn into_command(self, cwd: Option<&Path>) -> Command {
        let mut command = Command::new(self.program());
        command.env_clear();
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        // SAFETY: the closure runs in the child between fork and exec; `enter` makes only
        // async-signal-safe system calls on memory built before the fork, and allocates
        // nothing.
        unsafe {
            command.pre_exec(move || Err(self.enter()));
        }
        command
    }

    /// The child's side, in SPEC §13.1's order; returns only when a step failed.
    fn enter(&self) -> io::Error {
        if let Err(err) = rustix::process::setsid() {
            return err.into();
        }
        if let Err(err) = rustix::process::set_parent_process_death_signal(Some(Signal::KILL)) {
            return err.into();
        }
        // The parent may have died between the fork and the line above: then no signal comes.
        if rustix::process::getppid() != Some(self.parent) {
            return io::Error::from_raw_os_error(libc::ESRCH);
        }
        if let Err(err) = self.confinement.before_close() {
            return err;
        }
        if let Err(err) = close_inherited(&self.fallback_fds) {
            return err;
        }
        if let Err(err) = self.confinement.before_exec() {
            return self.confinement.refused(err);
        }
        // SAFETY: three NUL-terminated strings / NULL-terminated arrays of them, built before
        // the fork and alive for the call.
        unsafe {
            libc::execve(
                self.program.as_ptr(),
                self.argv.ptrs.as_ptr(),
                self.envp.ptrs.as_ptr(),
            );
        }
        io::Error::last_os_error()
    }
}

/// The pauses before each new try of a spawn whose `execve` answered `ETXTBSY` (150 ms in
/// all). `ETXTBSY` says the program file is open for writing: a copy still being finished, or
/// — the usual case — a descriptor to it that another thread's `fork` inherited for the
/// instant before that child's own `execve` closed it. That passes; the adapter was never
/// started, so trying again runs nothing twice. Still busy after the last pause, the failure
/// is reported (`adapter_not_executable`, reason `file_busy`).
pub(crate) const BUSY_PAUSES_MS: [u64; 4] = [10, 20, 40, 80];

/// `command.spawn()`, tried again after each of [`BUSY_PAUSES_MS`] while it fails with
/// `ETXTBSY` and `again` agrees (a confined child's refused step is not retried).
pub(crate) fn spawn_unless_busy(
    command: &mut Command,
    mut again: impl FnMut(&io::Error) -> bool,
) -> io::Result<std::process::Child> {
    let mut pauses = BUSY_PAUSES_MS.iter();
    loop {
        match command.spawn() {
            Err(err) if err.raw_os_error() == Some(libc::ETXTBSY) && again(&err) => {
                match pauses.next() {
                    Some(ms) => std::thread::sleep(std::time::Duration::from_millis(*ms)),
                    None => return Err(err),
                }
            }
            other => return other,
        }
    }
}

/// Where the child started with `env` in `cwd` finds `program` (see [`resolve`]), made
/// absolute (against `cwd`, else the dispatcher's own working directory): the file Landlock's
/// rules must grant.
pub fn locate<K, V>(
    program: &Path,
    env: &[(K, V)],
    cwd: Option<&Path>,
) -> Result<PathBuf, SpawnError>
where
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let found = resolve(program, path_var(env).map(AsRef::as_ref), cwd)?;
    Ok(match cwd {
        Some(cwd) if found.is_relative() => cwd.join(found),
        _ => std::path::absolute(&found).unwrap_or(found),
    })
}

/// The value of `PATH` in the environment list `env` (its last entry, when it is there more
/// than once): the one place a program's search path is taken from an environment.
pub fn path_var<K: AsRef<OsStr>, V>(env: &[(K, V)]) -> Option<&V> {
    env.iter()
        .rev()
        .find(|(k, _)| k.as_ref() == "PATH")
        .map(|(_, v)| v)
}

/// Where `execvp` would find `program`: itself when it has a `/`; else the first entry of
/// `path_var` (default [`DEFAULT_PATH`]) holding a regular file this process may execute.
/// Entries that hold something that is not (a directory, a file without execute permission)
/// make the answer "not executable" instead of "not found", as `execvp`'s `EACCES` does.
fn resolve(
    program: &Path,
    path_var: Option<&OsStr>,
    cwd: Option<&Path>,
) -> Result<PathBuf, SpawnError> {
    let name = program.as_os_str().as_bytes();
    if name.is_empty() {
        return Err(SpawnError::NotFound(None));
    }
    if name.contains(&b'/') {
        // The kernel's own answer (ENOENT, EACCES, ENOEXEC) classifies it at execve.
        return Ok(program.to_path_buf());
    }
    let path_var = path_var.unwrap_or(OsStr::new(DEFAULT_PATH));
    let mut denied = None;
    for dir in path_var.as_bytes().split(|&b| b == b':') {
        // An empty entry is the working directory, as for execvp.
        let candidate = Path::new(OsStr::from_bytes(dir)).join(program);
        let at = match cwd {
            Some(cwd) if candidate.is_relative() => cwd.join(&candidate),
            _ => candidate.clone(),
        };
        match std::fs::metadata(&at) {
            Ok(meta)
                if meta.is_file()
                    && rustix::fs::access(&at, rustix::fs::Access::EXEC_OK).is_ok() =>
            {
                return Ok(candidate);
            }
            // The first entry that held something says why (as execvp's EACCES would).
            Ok(meta) if meta.is_dir() => {
                denied.get_or_insert(Some(Why::Directory));
            }
            Ok(_) => {
                denied.get_or_insert(Some(Why::NoExecutePermission));
            }
            Err(err) if err.raw_os_error() == Some(libc::EACCES) => {
                denied.get_or_insert(None);
            }
            Err(_) => {}
        }
    }
    Err(match denied {
        Some(why) => SpawnError::NotExecutable(why),
        None => SpawnError::NotFound(None),
    })
}

/// How much of a program the kernel reads to decide how to run it (`BINPRM_BUF_SIZE`).
const HEAD_BYTES: u64 = 256;

/// What the start of a program file says about how it runs.
enum Head {
    /// `#!`: the interpreter as the kernel reads it (blanks trimmed, a `\r` kept), the rest
    /// of the line, and whether the line ends in `\r`.
    Script {
        interpreter: Vec<u8>,
        argument: Vec<u8>,
        crlf: bool,
    },
    /// An ELF binary.
    Elf,
    /// Anything else.
    Other,
}

fn head_of(program: &Path) -> Option<Head> {
    let head = crate::fs::read_head(program, HEAD_BYTES).ok()?;
    if head.starts_with(b"\x7fELF") {
        return Some(Head::Elf);
    }
    let Some(rest) = head.strip_prefix(b"#!") else {
        return Some(Head::Other);
    };
    let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
    let crlf = line.ends_with(b"\r");
    // As the kernel: leading blanks skipped, trailing blanks (not `\r`) trimmed; the
    // interpreter ends at the first blank, the rest is its one argument.
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = line.iter().position(|b| !blank(b)).unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !blank(b))
        .map_or(start, |i| i + 1);
    let line = &line[start..end.max(start)];
    let split = line.iter().position(blank).unwrap_or(line.len());
    let (interpreter, argument) = line.split_at(split);
    let argument = argument
        .iter()
        .position(|b| !blank(b))
        .map_or(&[][..], |i| &argument[i..]);
    Some(Head::Script {
        interpreter: interpreter.to_vec(),
        argument: argument.to_vec(),
        crlf,
    })
}

/// `program` as the child's `execve` saw it: relative to the child's working directory.
fn as_seen(program: &Path, cwd: Option<&Path>) -> PathBuf {
    match cwd {
        Some(cwd) if program.is_relative() => cwd.join(program),
        _ => program.to_path_buf(),
    }
}

/// Why `execve` of the resolved `program` failed with `errno`, as far as the file shows more
/// than the errno (SPEC §4.2's resolution is unchanged: this only reads the file after the
/// failure, for the message). `None` when it shows nothing more.
pub(crate) fn diagnose(program: &Path, cwd: Option<&Path>, errno: i32) -> Option<Why> {
    let program = as_seen(program, cwd);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match errno {
        libc::ENOENT => match head_of(&program)? {
            Head::Script {
                interpreter, crlf, ..
            } if crlf && interpreter.ends_with(b"\r") => Some(Why::CrlfShebang(text(&interpreter))),
            Head::Script { interpreter, .. } if interpreter.is_empty() => Some(Why::EmptyShebang),
            Head::Script { interpreter, .. } => Some(Why::MissingInterpreter(text(&interpreter))),
            Head::Elf => Some(Why::MissingLoader),
            Head::Other => None,
        },
        libc::EACCES | libc::EPERM | libc::EISDIR => {
            let meta = std::fs::metadata(&program).ok()?;
            if meta.is_dir() {
                return Some(Why::Directory);
            }
            if rustix::fs::access(&program, rustix::fs::Access::EXEC_OK).is_err() {
                return Some(Why::NoExecutePermission);
            }
            match head_of(&program)? {
                Head::Script { interpreter, .. } if !interpreter.is_empty() => {
                    Some(Why::InterpreterNotExecutable(text(&interpreter)))
                }
                _ => None,
            }
        }
        libc::ETXTBSY => Some(Why::FileBusy),
        libc::ENOEXEC => match head_of(&program)? {
            Head::Script { interpreter, .. } if interpreter.is_empty() => Some(Why::EmptyShebang),
            Head::Script { interpreter, .. } => {
                Some(Why::InterpreterNotExecutable(text(&interpreter)))
            }
            Head::Elf => Some(Why::ForeignBinary),
            Head::Other => Some(Why::NoShebang),
        },
        _ => None,
    }
}

/// Whether a folder above `program` is not searchable by `uid` (by its owner bits when it
/// owns the folder, else by the others' bits: the run-as user is given no group of the
/// folder's by the dispatcher).
pub(crate) fn unreachable_for(program: &Path, uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    program.ancestors().skip(1).any(|dir| {
        std::fs::metadata(dir).is_ok_and(|m| {
            let search = if m.uid() == uid { 0o100 } else { 0o001 };
            m.mode() & search == 0
        })
    })
}

/// For a program that started and exited 126 or 127 (what `env` and shells exit with when a
/// program cannot be run or found): a `#!` line ending in `\r`, whose `env` then looked for a
/// program named with the `\r` (`/usr/bin/env: 'python3\r': No such file or directory`).
/// `program` is resolved through `path_var` like [`Setup::new`] does.
pub fn crlf_shebang(program: &Path, path_var: Option<&OsStr>, cwd: Option<&Path>) -> Option<Why> {
    let resolved = resolve(program, path_var, cwd).ok()?;
    match head_of(&as_seen(&resolved, cwd))? {
        Head::Script {
            interpreter,
            argument,
            crlf: true,
        } if interpreter.ends_with(b"\r") || !argument.is_empty() => {
            let named = if argument.is_empty() {
                interpreter
            } else {
                // `env`'s program: the last word, which carries the `\r`.
                argument
                    .rsplit(|b| *b == b' ' || *b == b'\t')
                    .next()
                    .unwrap_or_default()
                    .to_vec()
            };
            Some(Why::CrlfShebang(
                String::from_utf8_lossy(&named).into_owned(),
            ))
        }
        _ => None,
    }
}

/// Whether this kernel has `close_range(2)` with `CLOSE_RANGE_CLOEXEC` (Linux 5.11), asked
/// once with an empty range.
fn close_range_cloexec_works() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        // SAFETY: close_range on a range holding no descriptor only reports support.
        unsafe {
            libc::syscall(
                libc::SYS_close_range,
                libc::c_uint::MAX,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) == 0
        }
    })
}

/// The descriptors from 3 up that this process has open now (`/proc/self/fd`).
fn open_fds() -> Vec<RawFd> {
    // Unbounded: every descriptor must be found (their number is bounded by RLIMIT_NOFILE).
    let Ok((entries, _)) = crate::fs::list_dir_path(Path::new("/proc/self/fd"), usize::MAX) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| std::str::from_utf8(&entry.name).ok()?.parse::<RawFd>().ok())
        .filter(|&fd| fd > 2)
        .collect()
}

/// Make every descriptor from 3 up close-on-exec: `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`,
/// or on an older kernel each one of `fallback` (listed before the fork; the process opens
/// its own descriptors close-on-exec, so only inherited ones can lack the flag). Runs in the
/// child: system calls only.
fn close_inherited(fallback: &[RawFd]) -> io::Result<()> {
    // SAFETY: close_range takes two numbers and a flag word; CLOEXEC closes nothing now.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if done == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if !matches!(err.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL)) {
        return Err(err);
    }
    mark_cloexec(fallback)
}

/// Set `FD_CLOEXEC` on each of `fds` that is still open.
fn mark_cloexec(fds: &[RawFd]) -> io::Result<()> {
    for &fd in fds {
        // SAFETY: fcntl F_GETFD/F_SETFD on a number: at worst EBADF for one closed since.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags < 0 {
            continue;
        }
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::PermissionsExt;

    fn file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn bare_names_are_found_through_the_child_s_path_as_execvp_would() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        // Not executable in the first entry, a directory of that name in the second: both
        // are skipped for the executable file in the third.
        file(&a, "tool", "#!/bin/sh\n", 0o644);
        std::fs::create_dir(b.join("tool")).unwrap();
        let c = dir.path().join("c");
        std::fs::create_dir(&c).unwrap();
        file(&c, "tool", "#!/bin/sh\n", 0o755);
        let path = std::env::join_paths([&a, &b, &c]).unwrap();
        let found = resolve(Path::new("tool"), Some(&path), None).unwrap();
        assert_eq!(found, c.join("tool"));
        // Without the third entry: something was there but none of it executable.
        let path = std::env::join_paths([&a, &b]).unwrap();
        assert!(matches!(
            resolve(Path::new("tool"), Some(&path), None),
            Err(SpawnError::NotExecutable(Some(Why::NoExecutePermission)))
        ));
        assert!(matches!(
            resolve(Path::new("no-such-tool"), Some(&path), None),
            Err(SpawnError::NotFound(None))
        ));
        assert!(matches!(
            resolve(Path::new(""), Some(&path), None),
            Err(SpawnError::NotFound(None))
        ));
        // An empty entry is the child's working directory.
        let found = resolve(
            Path::new("tool"),
            Some(OsStr::new(":/nonexistent")),
            Some(&c),
        );
        assert_eq!(found.unwrap(), Path::new("tool"));
        // A path is left to the kernel.
        assert_eq!(
            resolve(Path::new("./x/y"), None, None).unwrap(),
            Path::new("./x/y")
        );
    }

    #[test]
    fn path_var_is_the_last_entry_named_exactly_path() {
        let env = [
            ("PATH", "/first"),
            ("PATHX", "/x"),
            ("path", "/lower"),
            ("PATH", "/last"),
            ("XPATH", "/y"),
        ];
        assert_eq!(path_var(&env), Some(&"/last"));
        assert_eq!(path_var(&env[1..3]), None);
        assert_eq!(path_var::<&str, &str>(&[]), None);
        let owned = vec![(OsString::from("PATH"), OsString::from("/o"))];
        assert_eq!(
            path_var(&owned).map(|v| v.as_os_str()),
            Some(OsStr::new("/o"))
        );
    }

    #[test]
    fn setup_and_locate_search_the_env_s_path() {
        let dir = tempfile::tempdir().unwrap();
        file(dir.path(), "tool", "#!/bin/sh\n", 0o755);
        let dirs = dir.path().display().to_string();
        let env = [("PATH", "/nonexistent"), ("PATH", dirs.as_str())];
        let setup = Setup::new(Path::new("tool"), &["tool"], env, None).unwrap();
        assert_eq!(
            setup.program.as_bytes(),
            dir.path().join("tool").as_os_str().as_bytes()
        );
        assert_eq!(
            locate(Path::new("tool"), &env, None).unwrap(),
            dir.path().join("tool")
        );
        assert!(matches!(
            Setup::new(
                Path::new("tool"),
                &["tool"],
                [("PATH", "/nonexistent")],
                None
            ),
            Err(SpawnError::NotFound(_))
        ));
    }

    #[test]
    fn no_path_means_glibc_s_default() {
        // `sh` is in /bin or /usr/bin on every system this runs on.
        let found = resolve(Path::new("sh"), None, None).unwrap();
        assert!(
            found == Path::new("/bin/sh") || found == Path::new("/usr/bin/sh"),
            "{found:?}"
        );
    }

    #[test]
    fn a_nul_byte_is_refused_before_the_fork() {
        let err = Setup::new(
            Path::new("/bin/true"),
            &["true", "a\0b"],
            [("PATH", "/bin")],
            None,
        )
        .err();
        assert!(matches!(
            err,
            Some(SpawnError::Other(io::ErrorKind::InvalidInput))
        ));
        let err = Setup::new(Path::new("/bin/true"), &["true"], [("A", "b\0")], None).err();
        assert!(matches!(
            err,
            Some(SpawnError::Other(io::ErrorKind::InvalidInput))
        ));
    }

    #[test]
    fn the_fallback_marks_open_descriptors_close_on_exec() {
        assert!(close_range_cloexec_works(), "this kernel has close_range");
        let file = std::fs::File::open("/dev/null").unwrap();
        // A duplicate without FD_CLOEXEC, as a descriptor the host left open would be.
        // SAFETY: dup of a descriptor we own; the new one is closed below.
        let fd = unsafe { libc::dup(file.as_raw_fd()) };
        assert!(fd > 2);
        // SAFETY: reading the flags of our own descriptor.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, 0);
        assert!(open_fds().contains(&fd));
        mark_cloexec(&[fd, 1 << 20]).unwrap();
        // SAFETY: as above; then closing our own duplicate.
        unsafe {
            assert_ne!(libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC, 0);
            libc::close(fd);
        }
    }
}
