//! The seccomp filter of SPEC §13 and §13.2: an allow list modelled on the container runtimes'
//! default profile (moby's `seccomp/default.json`: what an ordinary program needs), a few
//! calls allowed only with certain arguments, `EPERM` for everything else, and `ENOSYS` for
//! the calls this list does not know yet.
//!
//! Three tables say it all, and docs/confinement.md lists the same (a test compares):
//!
//! - [`ALLOWED`]: allowed whatever the arguments — the profile's unconditional list for x86_64
//!   and aarch64, less what an adapter has no business doing (the mount family, `bpf`,
//!   `ptrace`, `name_to_handle_at`, …: see [`REFUSED`]), plus `arch_prctl` on x86_64.
//! - [`RULED`]: allowed only when the arguments say so. The calls that act on another process
//!   (`prlimit64`, `setpriority`, `sched_setscheduler`/`setparam`/`setattr`/`setaffinity`,
//!   `ioprio_set`) only on the caller itself: pid 0 — glibc passes 0 for its own process, and a
//!   filter compiled before the fork cannot know the child's pid (nor a thread's id) — and for
//!   `setpriority`/`ioprio_set` only the one-process selector (`PRIO_PROCESS`,
//!   `IOPRIO_WHO_PROCESS`), since "user 0" there means every process of the caller's user.
//!   `personality` only to query or to keep `PER_LINUX`; `clone` and `unshare` with no
//!   `CLONE_NEW*` flag (no new user namespace, nor any other); `ioctl` except `TIOCSTI` and
//!   `TIOCLINUX`; `socket` only for `AF_INET`, `AF_INET6`, `AF_NETLINK` with `NETLINK_ROUTE`, and
//!   `AF_UNIX` unless the network is [`Network::None`] or [`Network::Allow`] (pathname unix
//!   sockets are the host's: under `allow:` one would be a way around the proxy);
//!   `socketpair` only for `AF_UNIX`. `clone3` is answered `ENOSYS`: its flags are in a struct
//!   seccomp cannot read, and glibc then falls back to `clone`, whose flags the rule reads.
//! - [`REFUSED`]: the calls the kernel headers (as `libc` knows them) have and the lists above
//!   leave out, each with the reason; `kcmp`, `pidfd_getfd` and `process_madvise` are among them
//!   since they have no form that names the caller by pid 0 (two pids, or a pidfd).
//!
//! `adjtimex` and `clock_adjtime` are allowed: the mode that would set the clock is inside a
//! struct seccomp cannot read, and a confined adapter holds no capability (`CAP_SYS_TIME`), so
//! the kernel refuses every mode but reading. `settimeofday` and `clock_settime` are refused.
//!
//! Every argument is compared on its low 32 bits, as the kernel reads these `int` (and, for
//! `clone`, `unshare` and the `ioctl` request, 32-bit) arguments, so high garbage bits slip
//! nothing by.
//!
//! [`compile`] (parent) builds the BPF program with `seccompiler` (match: allow; no match:
//! `EPERM`) and splices a guard in after its architecture check; [`Filter::apply`] (child,
//! after `no_new_privs`) installs it with one `seccomp(2)` call — `seccompiler::apply_filter`
//! makes exactly that call (and a `prctl(PR_SET_NO_NEW_PRIVS)`, idempotent), allocates nothing
//! and takes no lock, so it is safe between `fork` and `execve`.
//!
//! The program, in order: a foreign architecture (an i386 `int 0x80` call has other numbers)
//! kills the process (`seccompiler`'s check); then the guard — on x86_64 every x32 call
//! (number with bit 30 set, same architecture value) is `EPERM`, `clone3` is `ENOSYS`, and a
//! number above [`HIGHEST_KNOWN`] (the largest in the three tables) is `ENOSYS`, so a program
//! probing a call newer than this list falls back as on an older kernel; then the tables.
//! A number at or below [`HIGHEST_KNOWN`] that no table names (a call `libc` 0.2.191 has no
//! constant for, like `cachestat` or `listmount`) is `EPERM`.

use super::Network;
use rustix::io::Errno;
use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// `TIOCSTI`: push a byte into a terminal's input queue (type commands into the user's shell).
pub const TIOCSTI: u64 = 0x5412;
/// `TIOCLINUX`: the virtual console's multiplexer, whose selection paste is the same attack.
pub(crate) const TIOCLINUX: u64 = 0x541C;

/// Every `CLONE_NEW*` flag: `clone` and `unshare` are allowed only without these.
pub(crate) const CLONE_NEW_FLAGS: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWTIME) as u64;

/// `ioprio_set`'s selector for one process (`linux/ioprio.h`; `libc` has no constant).
const IOPRIO_WHO_PROCESS: u64 = 1;

/// A system call allowed whatever its arguments, and the group it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Allowed {
    /// The name without `SYS_`.
    pub name: &'static str,
    pub nr: i64,
    pub group: &'static str,
}

/// A system call allowed only when its arguments satisfy [`Rule`]; otherwise `EPERM`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ruled {
    /// The name without `SYS_` (read by the tests that hold the table to the docs).
    #[cfg_attr(not(test), allow(dead_code))]
    pub name: &'static str,
    pub nr: i64,
    pub rule: Rule,
    /// The rule in words (docs/confinement.md has the same table, which the tests compare).
    #[cfg_attr(not(test), allow(dead_code))]
    pub why: &'static str,
}

/// When a [`Ruled`] call is allowed. Every comparison reads the argument's low 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// When every `(argument, value)` pair holds: the forms that name the caller itself.
    Own(&'static [(u8, u64)]),
    /// When the argument is one of the values.
    OneOf(u8, &'static [u64]),
    /// Unless the argument is one of the values.
    NoneOf(u8, &'static [u64]),
    /// When the argument has none of these bits.
    NoBits(u8, u64),
    /// `socket`: a family of [`socket_families`], or `AF_NETLINK` with `NETLINK_ROUTE`.
    Socket,
    /// Never: answered `ENOSYS` (by the guard, before the tables), so callers fall back.
    Enosys,
}

/// A system call the filter answers `EPERM` to, and why an adapter never needs it.
#[derive(Debug, Clone, Copy)]
pub struct Refused {
    /// The name without `SYS_`.
    pub name: &'static str,
    pub nr: i64,
    pub why: &'static str,
}

/// `"SYS_read"` → `"read"`.
const fn bare(name: &'static str) -> &'static str {
    let (_, rest) = name.as_bytes().split_at(4);
    match std::str::from_utf8(rest) {
        Ok(rest) => rest,
        Err(_) => panic!("a system call name is ASCII"),
    }
}

macro_rules! allowed {
    (@acc [$($out:tt)*]) => { &[$($out)*] };
    (@acc [$($out:tt)*] #[$cfg:meta] $group:literal: [$($name:ident),* $(,)?], $($rest:tt)*) => {
        allowed!(@acc [$($out)* $(
            #[$cfg]
            Allowed { name: bare(stringify!($name)), nr: libc::$name as i64, group: $group },
        )*] $($rest)*)
    };
    (@acc [$($out:tt)*] $group:literal: [$($name:ident),* $(,)?], $($rest:tt)*) => {
        allowed!(@acc [$($out)* $(
            Allowed { name: bare(stringify!($name)), nr: libc::$name as i64, group: $group },
        )*] $($rest)*)
    };
    ($($body:tt)*) => { allowed!(@acc [] $($body)*) };
}

macro_rules! ruled {
    ($($name:ident: $rule:expr, $why:literal;)*) => {
        &[$(Ruled { name: bare(stringify!($name)), nr: libc::$name as i64, rule: $rule, why: $why },)*]
    };
}

macro_rules! refused {
    ($($(#[$cfg:meta])? $name:ident: $why:literal,)*) => {
        &[$($(#[$cfg])? Refused { name: bare(stringify!($name)), nr: libc::$name as i64, why: $why },)*]
    };
}

/// Every system call allowed whatever its arguments, by group: moby's default profile's
/// unconditional list (x86_64, aarch64) less [`REFUSED`]'s, plus `arch_prctl`. A group under
/// `cfg` holds the calls of one architecture only (the x86_64 forms aarch64 never had, and four
/// calls aarch64 has but glibc's `libc` constants lack).
pub(crate) const ALLOWED: &[Allowed] = allowed! {
    "file I/O": [
        SYS_read, SYS_write, SYS_readv, SYS_writev, SYS_pread64, SYS_pwrite64, SYS_preadv,
        SYS_pwritev, SYS_preadv2, SYS_pwritev2, SYS_lseek, SYS_sendfile, SYS_splice, SYS_tee,
        SYS_vmsplice, SYS_copy_file_range, SYS_fallocate, SYS_ftruncate, SYS_truncate, SYS_fsync,
        SYS_fdatasync, SYS_sync, SYS_syncfs, SYS_readahead, SYS_fadvise64, SYS_flock,
    ],
    #[cfg(any(target_arch = "x86_64", all(target_arch = "aarch64", target_env = "musl")))]
    "file I/O": [
        SYS_sync_file_range,
    ],
    "descriptors": [
        SYS_openat, SYS_openat2, SYS_close, SYS_close_range, SYS_dup, SYS_dup3, SYS_fcntl,
        SYS_pipe2,
    ],
    #[cfg(target_arch = "x86_64")]
    "descriptors": [
        SYS_open, SYS_creat, SYS_dup2, SYS_pipe,
    ],
    "file metadata": [
        SYS_fstat, SYS_newfstatat, SYS_statx, SYS_statfs, SYS_fstatfs, SYS_faccessat,
        SYS_faccessat2, SYS_fchmod, SYS_fchmodat, SYS_fchown, SYS_fchownat, SYS_umask,
        SYS_utimensat,
    ],
    #[cfg(target_arch = "x86_64")]
    "file metadata": [
        SYS_stat, SYS_lstat, SYS_access, SYS_chmod, SYS_fchmodat2, SYS_chown, SYS_lchown,
        SYS_utime, SYS_utimes, SYS_futimesat,
    ],
    "directories and links": [
        SYS_chdir, SYS_fchdir, SYS_getcwd, SYS_mkdirat, SYS_mknodat, SYS_linkat, SYS_symlinkat,
        SYS_unlinkat, SYS_renameat2, SYS_readlinkat, SYS_getdents64,
    ],
    #[cfg(target_arch = "x86_64")]
    "directories and links": [
        SYS_mkdir, SYS_mknod, SYS_rmdir, SYS_link, SYS_symlink, SYS_unlink, SYS_rename,
        SYS_readlink, SYS_getdents,
    ],
    #[cfg(any(target_arch = "x86_64", all(target_arch = "aarch64", target_env = "musl")))]
    "directories and links": [
        SYS_renameat,
    ],
    "extended attributes": [
        SYS_getxattr, SYS_lgetxattr, SYS_fgetxattr, SYS_setxattr, SYS_lsetxattr, SYS_fsetxattr,
        SYS_listxattr, SYS_llistxattr, SYS_flistxattr, SYS_removexattr, SYS_lremovexattr,
        SYS_fremovexattr,
    ],
    "waiting for events": [
        SYS_epoll_create1, SYS_epoll_ctl, SYS_epoll_pwait, SYS_epoll_pwait2, SYS_ppoll,
        SYS_pselect6, SYS_eventfd2, SYS_signalfd4, SYS_timerfd_create, SYS_timerfd_settime,
        SYS_timerfd_gettime, SYS_inotify_init1, SYS_inotify_add_watch, SYS_inotify_rm_watch,
        SYS_fanotify_mark,
    ],
    #[cfg(target_arch = "x86_64")]
    "waiting for events": [
        SYS_epoll_create, SYS_epoll_ctl_old, SYS_epoll_wait, SYS_epoll_wait_old, SYS_poll,
        SYS_select, SYS_eventfd, SYS_signalfd, SYS_inotify_init,
    ],
    "asynchronous I/O": [
        SYS_io_setup, SYS_io_destroy, SYS_io_submit, SYS_io_cancel, SYS_io_getevents,
    ],
    "memory": [
        SYS_brk, SYS_mmap, SYS_munmap, SYS_mremap, SYS_mprotect, SYS_madvise, SYS_mincore,
        SYS_mlock, SYS_mlock2, SYS_munlock, SYS_mlockall, SYS_munlockall, SYS_msync,
        SYS_remap_file_pages, SYS_membarrier, SYS_memfd_create, SYS_memfd_secret, SYS_mseal,
        SYS_pkey_alloc, SYS_pkey_free, SYS_pkey_mprotect,
    ],
    "processes and threads": [
        SYS_execve, SYS_execveat, SYS_exit, SYS_exit_group, SYS_wait4, SYS_waitid,
        SYS_set_tid_address, SYS_set_robust_list, SYS_get_robust_list, SYS_futex, SYS_futex_waitv,
        SYS_rseq, SYS_prctl, SYS_pidfd_open, SYS_process_mrelease, SYS_restart_syscall,
    ],
    #[cfg(target_arch = "x86_64")]
    "processes and threads": [
        SYS_fork, SYS_vfork, SYS_arch_prctl, SYS_get_thread_area, SYS_set_thread_area,
    ],
    "signals": [
        SYS_kill, SYS_tkill, SYS_tgkill, SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_rt_sigpending,
        SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo, SYS_rt_sigreturn, SYS_rt_sigsuspend,
        SYS_rt_sigtimedwait, SYS_sigaltstack, SYS_pidfd_send_signal,
    ],
    #[cfg(target_arch = "x86_64")]
    "signals": [
        SYS_pause,
    ],
    "time and timers": [
        SYS_clock_gettime, SYS_clock_getres, SYS_clock_nanosleep, SYS_nanosleep, SYS_gettimeofday,
        SYS_times, SYS_adjtimex, SYS_clock_adjtime, SYS_getitimer, SYS_setitimer, SYS_timer_create,
        SYS_timer_delete, SYS_timer_settime, SYS_timer_gettime, SYS_timer_getoverrun,
    ],
    #[cfg(target_arch = "x86_64")]
    "time and timers": [
        SYS_time, SYS_alarm,
    ],
    "scheduling (reading)": [
        SYS_sched_yield, SYS_sched_getaffinity, SYS_sched_getattr, SYS_sched_getparam,
        SYS_sched_getscheduler, SYS_sched_get_priority_max, SYS_sched_get_priority_min,
        SYS_sched_rr_get_interval, SYS_getpriority, SYS_ioprio_get, SYS_getcpu,
    ],
    "identity and sessions": [
        SYS_getpid, SYS_getppid, SYS_gettid, SYS_getuid, SYS_geteuid, SYS_getgid, SYS_getegid,
        SYS_getresuid, SYS_getresgid, SYS_getgroups, SYS_setuid, SYS_setgid, SYS_setreuid,
        SYS_setregid, SYS_setresuid, SYS_setresgid, SYS_setfsuid, SYS_setfsgid, SYS_setgroups,
        SYS_capget, SYS_capset, SYS_getpgid, SYS_setpgid, SYS_getsid, SYS_setsid,
    ],
    #[cfg(target_arch = "x86_64")]
    "identity and sessions": [
        SYS_getpgrp,
    ],
    "resource limits (own)": [
        SYS_getrusage,
    ],
    #[cfg(any(target_arch = "x86_64", all(target_arch = "aarch64", target_env = "musl")))]
    "resource limits (own)": [
        SYS_getrlimit, SYS_setrlimit,
    ],
    "system information": [
        SYS_uname, SYS_sysinfo, SYS_getrandom,
    ],
    "sockets": [
        SYS_accept, SYS_accept4, SYS_bind, SYS_connect, SYS_listen, SYS_shutdown, SYS_getsockname,
        SYS_getpeername, SYS_getsockopt, SYS_setsockopt, SYS_sendto, SYS_recvfrom, SYS_sendmsg,
        SYS_recvmsg, SYS_sendmmsg, SYS_recvmmsg,
    ],
    "System V and POSIX IPC": [
        SYS_msgget, SYS_msgsnd, SYS_msgrcv, SYS_msgctl, SYS_semget, SYS_semop, SYS_semtimedop,
        SYS_semctl, SYS_shmget, SYS_shmat, SYS_shmdt, SYS_shmctl, SYS_mq_open, SYS_mq_unlink,
        SYS_mq_timedsend, SYS_mq_timedreceive, SYS_mq_notify, SYS_mq_getsetattr,
    ],
    "sandboxing itself": [
        SYS_seccomp, SYS_landlock_create_ruleset, SYS_landlock_add_rule,
        SYS_landlock_restrict_self,
    ],
};

/// The calls allowed only with certain arguments (SPEC §13.2), and `clone3`.
pub(crate) const RULED: &[Ruled] = ruled! {
    SYS_prlimit64: Rule::Own(&[(0, 0)]), "pid 0 (the caller) only";
    SYS_setpriority: Rule::Own(&[(0, libc::PRIO_PROCESS as u64), (1, 0)]),
        "`PRIO_PROCESS` and pid 0 only (`PRIO_USER` 0 is every process of the user)";
    SYS_sched_setscheduler: Rule::Own(&[(0, 0)]), "pid 0 (the calling thread) only";
    SYS_sched_setparam: Rule::Own(&[(0, 0)]), "pid 0 (the calling thread) only";
    SYS_sched_setattr: Rule::Own(&[(0, 0)]), "pid 0 (the calling thread) only";
    SYS_sched_setaffinity: Rule::Own(&[(0, 0)]), "pid 0 (the calling thread) only";
    SYS_ioprio_set: Rule::Own(&[(0, IOPRIO_WHO_PROCESS), (1, 0)]),
        "`IOPRIO_WHO_PROCESS` and pid 0 only";
    SYS_personality: Rule::OneOf(0, &[0, 0xffff_ffff]),
        "`PER_LINUX` (0) or the query `0xffffffff` only: no `ADDR_NO_RANDOMIZE`, no other persona";
    SYS_clone: Rule::NoBits(0, CLONE_NEW_FLAGS), "no `CLONE_NEW*` flag (no new namespace)";
    SYS_unshare: Rule::NoBits(0, CLONE_NEW_FLAGS), "no `CLONE_NEW*` flag (no new namespace)";
    SYS_clone3: Rule::Enosys,
        "`ENOSYS` always: its flags are in a struct seccomp cannot read; callers fall back to `clone`";
    SYS_ioctl: Rule::NoneOf(1, &[TIOCSTI, TIOCLINUX]),
        "any request but `TIOCSTI` and `TIOCLINUX` (typing into a terminal)";
    SYS_socket: Rule::Socket,
        "`AF_INET`, `AF_INET6`, `AF_NETLINK` with `NETLINK_ROUTE`, and `AF_UNIX` unless `--network none`";
    SYS_socketpair: Rule::OneOf(0, &[libc::AF_UNIX as u64]), "`AF_UNIX` only";
};

/// Every other system call `libc` names for x86_64 or aarch64, with the reason it is refused
/// (`EPERM`). docs/confinement.md lists the same.
pub const REFUSED: &[Refused] = refused! {
    SYS_init_module: "load a kernel module",
    SYS_finit_module: "load a kernel module",
    SYS_delete_module: "unload a kernel module",
    SYS_kexec_load: "replace the running kernel",
    #[cfg(not(all(target_arch = "aarch64", target_env = "musl")))]
    SYS_kexec_file_load: "replace the running kernel",
    SYS_reboot: "reboot or halt the host",
    SYS_mount: "mount family: change what the file system shows",
    SYS_umount2: "mount family",
    SYS_pivot_root: "mount family: a new root",
    SYS_chroot: "mount family: a new root",
    SYS_move_mount: "mount family (new mount API)",
    SYS_open_tree: "mount family (new mount API)",
    SYS_fsopen: "mount family (new mount API)",
    SYS_fsconfig: "mount family (new mount API)",
    SYS_fsmount: "mount family (new mount API)",
    SYS_fspick: "mount family (new mount API)",
    SYS_mount_setattr: "mount family (new mount API)",
    SYS_setns: "join another process's namespace",
    SYS_bpf: "load BPF programs into the kernel",
    SYS_perf_event_open: "kernel and other processes' performance events",
    SYS_userfaultfd: "a classic kernel-exploit primitive",
    SYS_add_key: "kernel keyrings: other users' secrets",
    SYS_request_key: "kernel keyrings",
    SYS_keyctl: "kernel keyrings",
    SYS_ptrace: "trace or inject into other processes",
    SYS_process_vm_readv: "read another process's memory",
    SYS_process_vm_writev: "write another process's memory",
    SYS_kcmp: "compare two processes' kernel objects: names other processes, no pid-0 form",
    SYS_pidfd_getfd: "take a descriptor out of the process a pidfd names: no pid-0 form",
    SYS_process_madvise: "advise on the memory of the process a pidfd names: no pid-0 form",
    SYS_migrate_pages: "move another process's pages between NUMA nodes",
    SYS_move_pages: "move another process's pages between NUMA nodes",
    SYS_get_mempolicy: "NUMA memory policy (the runtimes' profile: CAP_SYS_NICE only)",
    SYS_set_mempolicy: "NUMA memory policy (the runtimes' profile: CAP_SYS_NICE only)",
    SYS_set_mempolicy_home_node: "NUMA memory policy (the runtimes' profile: CAP_SYS_NICE only)",
    SYS_mbind: "NUMA memory policy (the runtimes' profile: CAP_SYS_NICE only)",
    SYS_open_by_handle_at: "open a file by handle, past every path check",
    SYS_name_to_handle_at: "make handles for open_by_handle_at",
    SYS_swapon: "host swap",
    SYS_swapoff: "host swap",
    SYS_acct: "process accounting for the whole host",
    SYS_settimeofday: "set the host's clock",
    SYS_clock_settime: "set the host's clock",
    SYS_sethostname: "rename the host",
    SYS_setdomainname: "rename the host",
    SYS_syslog: "read or clear the kernel log",
    SYS_quotactl: "file system quotas",
    SYS_quotactl_fd: "file system quotas",
    SYS_vhangup: "hang up the terminal",
    SYS_fanotify_init: "watch (and read) the files of the whole host",
    SYS_io_uring_setup: "io_uring: a large kernel surface, its operations escape this filter",
    SYS_io_uring_enter: "io_uring",
    SYS_io_uring_register: "io_uring",
    SYS_lookup_dcookie: "obsolete profiling interface",
    SYS_nfsservctl: "obsolete NFS server control (not implemented)",
    #[cfg(target_arch = "x86_64")]
    SYS_modify_ldt: "x86 segment descriptors: old exploit surface, no ordinary use",
    #[cfg(target_arch = "x86_64")]
    SYS_iopl: "raw I/O port access",
    #[cfg(target_arch = "x86_64")]
    SYS_ioperm: "raw I/O port access",
    #[cfg(target_arch = "x86_64")]
    SYS_uselib: "obsolete library loading",
    #[cfg(target_arch = "x86_64")]
    SYS__sysctl: "obsolete sysctl interface",
    #[cfg(target_arch = "x86_64")]
    SYS_sysfs: "obsolete file system type query",
    #[cfg(target_arch = "x86_64")]
    SYS_ustat: "obsolete file system statistics",
    #[cfg(target_arch = "x86_64")]
    SYS_afs_syscall: "not implemented by Linux",
    #[cfg(target_arch = "x86_64")]
    SYS_getpmsg: "not implemented by Linux",
    #[cfg(target_arch = "x86_64")]
    SYS_putpmsg: "not implemented by Linux",
    #[cfg(target_arch = "x86_64")]
    SYS_security: "not implemented by Linux",
    #[cfg(target_arch = "x86_64")]
    SYS_tuxcall: "not implemented by Linux",
    #[cfg(target_arch = "x86_64")]
    SYS_vserver: "not implemented by Linux",
};

const fn highest_known() -> i64 {
    let mut max = 0;
    let mut i = 0;
    while i < ALLOWED.len() {
        if ALLOWED[i].nr > max {
            max = ALLOWED[i].nr;
        }
        i += 1;
    }
    i = 0;
    while i < RULED.len() {
        if RULED[i].nr > max {
            max = RULED[i].nr;
        }
        i += 1;
    }
    i = 0;
    while i < REFUSED.len() {
        if REFUSED[i].nr > max {
            max = REFUSED[i].nr;
        }
        i += 1;
    }
    max
}

/// The largest system call number the three tables name: every number above it is `ENOSYS`.
pub(crate) const HIGHEST_KNOWN: i64 = highest_known();

/// The families `socket` may open on its own (besides `AF_NETLINK` with `NETLINK_ROUTE`):
/// `AF_UNIX` only when the adapter may reach the host's network, for a pathname unix socket is
/// the host's too (`--network none` leaves the adapter `socketpair`); under `--network allow:`
/// it would be a way around the proxy, so it is refused there as well.
pub(crate) fn socket_families(network: Network) -> &'static [u64] {
    const ANY: &[u64] = &[
        libc::AF_UNIX as u64,
        libc::AF_INET as u64,
        libc::AF_INET6 as u64,
    ];
    match network {
        Network::Any => ANY,
        Network::None | Network::Allow => &ANY[1..],
    }
}

/// Why the filter could not be built or installed.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("this kernel has no seccomp filters")]
    Unsupported,
    #[error("the seccomp filter could not be built: {0}")]
    Build(String),
}

/// A compiled filter, ready for the child.
#[derive(Debug, Clone)]
pub struct Filter {
    program: BpfProgram,
}

impl Filter {
    /// A filter of no instruction, which the kernel refuses to install (`EINVAL`): tests of a
    /// step refused in the adapter's own process.
    #[cfg(test)]
    pub(crate) fn refused_by_the_kernel() -> Filter {
        Filter {
            program: Vec::new(),
        }
    }

    /// The BPF instructions (for tests and `doctor`'s report).
    pub fn len(&self) -> usize {
        self.program.len()
    }

    /// Never: a compiled filter has at least its architecture check.
    pub fn is_empty(&self) -> bool {
        self.program.is_empty()
    }

    /// Install the filter on the calling thread (child side; async-signal-safe). Sets
    /// `no_new_privs` too, which it needs.
    pub fn apply(&self) -> Result<(), Errno> {
        seccompiler::apply_filter(&self.program).map_err(|e| match e {
            seccompiler::Error::Prctl(io) | seccompiler::Error::Seccomp(io) => {
                Errno::from_io_error(&io).unwrap_or(Errno::IO)
            }
            _ => Errno::INVAL,
        })
    }
}

/// Whether the kernel has seccomp (`prctl(PR_GET_SECCOMP)` answers instead of `EINVAL`; the
/// same kernels show `Seccomp:` in `/proc/self/status`, which a test compares). One system call
/// where reading the status file took nine, on every confined call.
pub fn supported() -> bool {
    rustix::thread::secure_computing_mode().is_ok()
}

/// The kernel's limit on one filter's length (`BPF_MAXINSNS`).
pub(crate) const BPF_MAXINSNS: usize = 4096;

/// Build the filter (before the fork). `network` decides `socket(AF_UNIX)`: refused under
/// [`Network::None`] and [`Network::Allow`], where a pathname unix socket would be a way out
/// to the host (around the proxy).
pub fn compile(network: Network) -> Result<Filter, SeccompError> {
    if !supported() {
        return Err(SeccompError::Unsupported);
    }
    let build = |e: seccompiler::BackendError| SeccompError::Build(e.to_string());
    // The calls allowed whatever their arguments are answered by the guard's ranges
    // ([`allowed_ranges`]); `seccompiler` compiles the argument rules.
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for ruled in RULED {
        if let Some(chain) = chain(ruled.rule, network).map_err(build)? {
            rules.insert(ruled.nr, chain);
        }
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(build)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )
    .map_err(build)?;
    let mut program: BpfProgram = filter.try_into().map_err(build)?;
    let at = 3.min(program.len());
    program.splice(at..at, guard());
    if program.len() > BPF_MAXINSNS {
        return Err(SeccompError::Build(format!(
            "{} BPF instructions, more than the kernel's {BPF_MAXINSNS}",
            program.len()
        )));
    }
    Ok(Filter { program })
}

/// `seccompiler`'s rules for one [`Rule`] (any of them matching allows the call); `None` for
/// [`Rule::Enosys`], which the guard answers. Never an empty list: to `seccompiler` that means
/// "allowed whatever the arguments".
fn chain(
    rule: Rule,
    network: Network,
) -> Result<Option<Vec<SeccompRule>>, seccompiler::BackendError> {
    use SeccompCmpOp::{Eq, MaskedEq, Ne};
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
    };
    let one = |arg: u8, values: &[u64]| {
        values
            .iter()
            .map(|&value| SeccompRule::new(vec![cond(arg, Eq, value)?]))
            .collect::<Result<Vec<_>, _>>()
    };
    let chain = match rule {
        Rule::Own(pairs) => vec![SeccompRule::new(
            pairs
                .iter()
                .map(|&(arg, value)| cond(arg, Eq, value))
                .collect::<Result<_, _>>()?,
        )?],
        Rule::OneOf(arg, values) => one(arg, values)?,
        Rule::NoneOf(arg, values) => vec![SeccompRule::new(
            values
                .iter()
                .map(|&value| cond(arg, Ne, value))
                .collect::<Result<_, _>>()?,
        )?],
        Rule::NoBits(arg, mask) => vec![SeccompRule::new(vec![cond(arg, MaskedEq(mask), 0)?])?],
        Rule::Socket => {
            let mut chain = one(0, socket_families(network))?;
            chain.push(SeccompRule::new(vec![
                cond(0, Eq, libc::AF_NETLINK as u64)?,
                cond(2, Eq, libc::NETLINK_ROUTE as u64)?,
            ])?);
            chain
        }
        Rule::Enosys => return Ok(None),
    };
    if chain.is_empty() {
        return Err(seccompiler::BackendError::EmptyRule);
    }
    Ok(Some(chain))
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JEQ_K: u16 = 0x15;
const BPF_JMP_JGT_K: u16 = 0x25;
const BPF_JMP_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;

/// The instructions spliced in after `seccompiler`'s three-instruction architecture check:
/// load the number; on x86_64 an x32 number (bit 30) is `EPERM`; each [`Rule::Enosys`] call,
/// and every number above [`HIGHEST_KNOWN`], is `ENOSYS`. No jump crosses the insertion point
/// (the check's only jump skips its own kill instruction; later jumps are relative and stay
/// after it), and `seccompiler`'s table loads the number again itself.
fn guard() -> Vec<sock_filter> {
    let op = |code: u16, jt: u8, jf: u8, k: u32| sock_filter { code, jt, jf, k };
    let errno = |errno: i32| op(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | errno as u32);
    let mut guard = vec![op(BPF_LD_W_ABS, 0, 0, 0)];
    if cfg!(target_arch = "x86_64") {
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        guard.push(op(BPF_JMP_JGE_K, 0, 1, X32_SYSCALL_BIT));
        guard.push(errno(libc::EPERM));
    }
    let enosys: Vec<u32> = RULED
        .iter()
        .filter(|r| r.rule == Rule::Enosys)
        .map(|r| r.nr as u32)
        .collect();
    for (i, &nr) in enosys.iter().enumerate() {
        // Over the other calls' tests and the bound's, onto the ENOSYS return.
        guard.push(op(BPF_JMP_JEQ_K, (enosys.len() - i) as u8, 0, nr));
    }
    guard.push(op(BPF_JMP_JGT_K, 0, 1, HIGHEST_KNOWN as u32));
    guard.push(errno(libc::ENOSYS));
    // The calls allowed whatever the arguments, as runs of consecutive numbers: a run is two
    // tests and a return, a lone number one test and a return.
    for (low, high) in allowed_ranges() {
        if low == high {
            guard.push(op(BPF_JMP_JEQ_K, 0, 1, low));
        } else {
            guard.push(op(BPF_JMP_JGE_K, 0, 2, low));
            guard.push(op(BPF_JMP_JGT_K, 1, 0, high));
        }
        guard.push(op(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW));
    }
    guard
}

/// [`ALLOWED`]'s numbers as runs of consecutive numbers, `(first, last)`, in order.
///
/// Why not `seccompiler`'s table for them: it tests one number after another, about five
/// instructions each — some 1,400 instructions for this list — and when a filter is installed
/// the kernel runs it once for every call number to fill its per-call cache, so every confined
/// call pays for the program's length when it is installed (docs/PERFORMANCE.md, "Round
/// four"). The runs are a few hundred instructions.
fn allowed_ranges() -> Vec<(u32, u32)> {
    let mut numbers: Vec<u32> = ALLOWED.iter().map(|a| a.nr as u32).collect();
    numbers.sort_unstable();
    numbers.dedup();
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for nr in numbers {
        match ranges.last_mut() {
            Some((_, high)) if *high + 1 == nr => *high = nr,
            _ => ranges.push((nr, nr)),
        }
    }
    ranges
}

#[cfg(test)]
mod tests;
