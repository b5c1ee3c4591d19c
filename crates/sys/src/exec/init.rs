//! The PID namespace's processes (SPEC §13.2): between the child `std` forked and the
//! adapter's `execve`, two more forks, system calls only.
//!
//! - The **outer** process (the one `std` forked, the dispatcher's child, leader of the
//!   adapter's session and process group) has entered the new namespaces; it forks the
//!   namespace's init, closes every descriptor but the status pipe's read end (so the
//!   dispatcher sees the adapter's stdout and the exec-error pipe close when the adapter's do),
//!   waits for the init, and ends the way the adapter ended: its exit status, or death by the
//!   same signal (without a core file) — so the dispatcher's exit status, `SIGXFSZ` limit and
//!   resource figures read as before.
//! - The **init** is PID 1 of the new namespace: it puts its own `/proc` in place, forks the
//!   adapter's process, and then only reaps and forwards: every signal the kill ladder sends the
//!   process group reaches the adapter directly; the init passes SIGTERM, SIGINT, SIGHUP,
//!   SIGQUIT, SIGUSR1 and SIGUSR2 on only when the adapter has left the group (a `setsid`), so
//!   the adapter gets each signal once. When the adapter ends, the init writes its wait status to
//!   the outer process and exits, and the kernel ends every process left in the namespace.
//! - The **adapter's** process (PID 2) gets back the signal mask it had and returns, to drop
//!   its privileges and `execve`.
//!
//! Outer and init block every signal (the kernel would drop a signal it has no handler for at a
//! namespace's init; a blocked one waits for `sigwaitinfo`). Each of them arms its parent-death
//! signal, so the dispatcher's death still ends the whole tree.
//!
//! Must not: allocate, take a lock, or return in the outer or the init process.

use std::io;

/// Fork the init and the adapter's process. Returns `Ok` in the adapter's process only;
/// `in_init` runs in the init before it forks the adapter (an error there returns in the init,
/// which then reports and exits like a failed set-up step).
// exec/ owns forking and signals (clippy.toml's disallowed-methods).
#[allow(clippy::disallowed_methods)]
pub(super) fn fork_init_and_adapter(
    in_init: &dyn Fn() -> Result<(), io::Error>,
) -> Result<(), io::Error> {
    // SAFETY: sigset_t is plain data; sigfillset/sigprocmask only write to the given locals.
    let (all, old) = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_SETMASK, &all, &mut old);
        (all, old)
    };
    let mut status_pipe = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into the local array.
    if unsafe { libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let [read_end, write_end] = status_pipe;
    // SAFETY: fork in a single-threaded process (the child of std's fork); both sides go on
    // with system calls only.
    let init = unsafe { libc::fork() };
    if init < 0 {
        return Err(io::Error::last_os_error());
    }
    if init > 0 {
        outer(init, read_end, write_end);
    }
    // The init: PID 1 of the new namespace.
    // SAFETY: prctl with integer arguments; close of our own descriptor.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        libc::close(read_end);
    }
    in_init()?;
    // Not dumpable: its `/proc` entries belong to root, so `hidepid` hides the init (the
    // dispatcher's image: its command line, its environment) from an adapter of the same user.
    // The adapter's process becomes dumpable again at its `execve`.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) };
    // SAFETY: as above.
    let adapter = unsafe { libc::fork() };
    if adapter < 0 {
        return Err(io::Error::last_os_error());
    }
    if adapter > 0 {
        init_loop(adapter, write_end, &all);
    }
    // The adapter's process.
    // SAFETY: close of our own descriptor; restore the mask std's child had.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        libc::close(write_end);
        libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    Ok(())
}

/// Close every descriptor but `keep`.
fn close_all_but(keep: libc::c_int) {
    // SAFETY: close_range takes numbers only.
    unsafe {
        if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
    }
}

/// The outer process: wait for the init, then end as the adapter ended. Never returns.
fn outer(init: libc::pid_t, read_end: libc::c_int, write_end: libc::c_int) -> ! {
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(write_end) };
    close_all_but(read_end);
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waitpid writes the status into the local.
        let r = unsafe { libc::waitpid(init, &mut status, 0) };
        if r == init {
            break;
        }
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: _exit ends the process.
            unsafe { libc::_exit(127) };
        }
    }
    let mut adapter = [0u8; 4];
    // SAFETY: read into a local buffer of its size.
    let n = unsafe { libc::read(read_end, adapter.as_mut_ptr().cast(), adapter.len()) };
    if n == 4 {
        status = libc::c_int::from_ne_bytes(adapter);
    }
    end_as(status)
}

/// End this process the way a wait status says a process ended.
// exec/ owns forking and signals (clippy.toml's disallowed-methods).
#[allow(clippy::disallowed_methods)]
fn end_as(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: plain system calls on locals: no core file, the default action for `sig`,
        // unblocked, raised.
        unsafe {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::kill(libc::getpid(), sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::_exit(128 + sig);
        }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        127
    };
    // SAFETY: _exit ends the process.
    unsafe { libc::_exit(code) }
}

/// The init: reap, forward, and report the adapter's end. Never returns.
// exec/ owns forking and signals (clippy.toml's disallowed-methods).
#[allow(clippy::disallowed_methods)]
fn init_loop(adapter: libc::pid_t, write_end: libc::c_int, all: &libc::sigset_t) -> ! {
    close_all_but(write_end);
    loop {
        // Reap everything that ended (orphans of the namespace are the init's).
        loop {
            let mut status: libc::c_int = 0;
            // SAFETY: waitpid writes the status into the local.
            let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if r == adapter {
                let bytes = status.to_ne_bytes();
                // SAFETY: write of a local buffer; then the namespace ends with the init.
                unsafe {
                    libc::write(write_end, bytes.as_ptr().cast(), bytes.len());
                    libc::_exit(0);
                }
            }
            if r <= 0 {
                break;
            }
        }
        // SAFETY: sigwaitinfo with a full set and a null info pointer.
        let sig = unsafe { libc::sigwaitinfo(all, std::ptr::null_mut()) };
        let forwarded = [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ];
        if forwarded.contains(&sig) {
            // SAFETY: getpgid and kill take numbers only. The adapter still in our group got
            // the signal from the kill ladder itself.
            unsafe {
                if libc::getpgid(adapter) != libc::getpgid(0) {
                    libc::kill(adapter, sig);
                }
            }
        }
    }
}
