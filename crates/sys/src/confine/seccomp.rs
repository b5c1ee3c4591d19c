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
//!   `AF_UNIX` unless the network is [`Network::None`] (pathname unix sockets are the host's);
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
pub const TIOCLINUX: u64 = 0x541C;

/// Every `CLONE_NEW*` flag: `clone` and `unshare` are allowed only without these.
pub const CLONE_NEW_FLAGS: u64 = (libc::CLONE_NEWNS
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
pub struct Ruled {
    /// The name without `SYS_`.
    pub name: &'static str,
    pub nr: i64,
    pub rule: Rule,
    /// The rule in words (docs/confinement.md has the same table).
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
pub const ALLOWED: &[Allowed] = allowed! {
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
pub const RULED: &[Ruled] = ruled! {
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
pub const HIGHEST_KNOWN: i64 = highest_known();

/// The families `socket` may open on its own (besides `AF_NETLINK` with `NETLINK_ROUTE`):
/// `AF_UNIX` only when the adapter may reach the host's network, for a pathname unix socket is
/// the host's too (`--network none` leaves the adapter `socketpair`).
pub fn socket_families(network: Network) -> &'static [u64] {
    const ANY: &[u64] = &[
        libc::AF_UNIX as u64,
        libc::AF_INET as u64,
        libc::AF_INET6 as u64,
    ];
    match network {
        Network::Any => ANY,
        Network::None => &ANY[1..],
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
pub const BPF_MAXINSNS: usize = 4096;

/// Build the filter (before the fork). `network` decides `socket(AF_UNIX)`: refused under
/// [`Network::None`], where a pathname unix socket would be a way out to the host.
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
/// the kernel runs it once for every call number to fill its per-call cache, so installing it
/// cost about 0.9 ms on every confined call (docs/PERFORMANCE.md, round four). The runs are a
/// few hundred instructions.
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
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

    /// Run `program` as the kernel would on one call (the opcodes `seccompiler` and the guard
    /// emit), with this architecture's value (the arch check's own constant) unless `arch`.
    fn decide_as(program: &[sock_filter], arch: Option<u32>, nr: i64, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as u32).to_ne_bytes());
        data[4..8].copy_from_slice(&arch.unwrap_or(program[1].k).to_ne_bytes());
        for (i, arg) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&arg.to_ne_bytes());
        }
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let ins = &program[pc];
            let jump = |taken: bool| usize::from(if taken { ins.jt } else { ins.jf });
            pc += 1 + match ins.code {
                BPF_LD_W_ABS => {
                    let k = ins.k as usize;
                    a = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                    0
                }
                0x54 => {
                    a &= ins.k; // ALU AND K
                    0
                }
                0x05 => ins.k as usize, // JA
                BPF_JMP_JEQ_K => jump(a == ins.k),
                BPF_JMP_JGT_K => jump(a > ins.k),
                BPF_JMP_JGE_K => jump(a >= ins.k),
                BPF_RET_K => return ins.k,
                code => panic!("opcode {code:#x} at {}", pc - 1),
            };
        }
    }

    fn decide(program: &[sock_filter], nr: i64, args: &[u64]) -> u32 {
        let mut all = [0u64; 6];
        all[..args.len()].copy_from_slice(args);
        decide_as(program, None, nr, all)
    }

    fn names<'a>(list: impl IntoIterator<Item = &'a str>) -> BTreeSet<&'a str> {
        list.into_iter().flat_map(str::split_whitespace).collect()
    }

    #[test]
    fn the_tables_have_no_duplicates_and_every_entry_says_why() {
        let all: Vec<(&str, i64, &str)> = ALLOWED
            .iter()
            .map(|a| (a.name, a.nr, a.group))
            .chain(RULED.iter().map(|r| (r.name, r.nr, r.why)))
            .chain(REFUSED.iter().map(|r| (r.name, r.nr, r.why)))
            .collect();
        let numbers: BTreeSet<i64> = all.iter().map(|e| e.1).collect();
        let names: BTreeSet<&str> = all.iter().map(|e| e.0).collect();
        assert_eq!(
            numbers.len(),
            all.len(),
            "a number is in two tables, or twice"
        );
        assert_eq!(names.len(), all.len(), "a name is in two tables, or twice");
        assert!(all
            .iter()
            .all(|(name, nr, why)| !why.is_empty() && !name.starts_with("SYS_") && *nr >= 0));
        assert_eq!(HIGHEST_KNOWN, *numbers.last().unwrap());
        // The pairs the brief names: never allowed whatever the arguments.
        let refused: BTreeSet<&str> = REFUSED.iter().map(|r| r.name).collect();
        for name in [
            "mount",
            "bpf",
            "ptrace",
            "kcmp",
            "pidfd_getfd",
            "process_madvise",
            "setns",
        ] {
            assert!(refused.contains(name), "{name}");
        }
    }

    /// The allow list, pinned: adding or removing a call is a conscious change here, in the
    /// table and in docs/confinement.md.
    const PINNED_ALLOWED: &[&str] = &[
        "accept accept4 access adjtimex alarm arch_prctl bind brk capget capset chdir ",
        "chmod chown clock_adjtime clock_getres clock_gettime clock_nanosleep close ",
        "close_range connect copy_file_range creat dup dup2 dup3 epoll_create ",
        "epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2 epoll_wait ",
        "epoll_wait_old eventfd eventfd2 execve execveat exit exit_group faccessat ",
        "faccessat2 fadvise64 fallocate fanotify_mark fchdir fchmod fchmodat fchmodat2 ",
        "fchown fchownat fcntl fdatasync fgetxattr flistxattr flock fork fremovexattr ",
        "fsetxattr fstat fstatfs fsync ftruncate futex futex_waitv futimesat ",
        "get_robust_list get_thread_area getcpu getcwd getdents getdents64 getegid geteuid ",
        "getgid getgroups getitimer getpeername getpgid getpgrp getpid getppid getpriority ",
        "getrandom getresgid getresuid getrlimit getrusage getsid getsockname getsockopt ",
        "gettid gettimeofday getuid getxattr inotify_add_watch inotify_init inotify_init1 ",
        "inotify_rm_watch io_cancel io_destroy io_getevents io_setup io_submit ioprio_get ",
        "kill landlock_add_rule landlock_create_ruleset landlock_restrict_self lchown ",
        "lgetxattr link linkat listen listxattr llistxattr lremovexattr lseek lsetxattr ",
        "lstat madvise membarrier memfd_create memfd_secret mincore mkdir mkdirat mknod ",
        "mknodat mlock mlock2 mlockall mmap mprotect mq_getsetattr mq_notify mq_open ",
        "mq_timedreceive mq_timedsend mq_unlink mremap mseal msgctl msgget msgrcv msgsnd ",
        "msync munlock munlockall munmap nanosleep newfstatat open openat openat2 pause ",
        "pidfd_open pidfd_send_signal pipe pipe2 pkey_alloc pkey_free pkey_mprotect poll ",
        "ppoll prctl pread64 preadv preadv2 process_mrelease pselect6 pwrite64 pwritev ",
        "pwritev2 read readahead readlink readlinkat readv recvfrom recvmmsg recvmsg ",
        "remap_file_pages removexattr rename renameat renameat2 restart_syscall rmdir rseq ",
        "rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn ",
        "rt_sigsuspend rt_sigtimedwait rt_tgsigqueueinfo sched_get_priority_max ",
        "sched_get_priority_min sched_getaffinity sched_getattr sched_getparam ",
        "sched_getscheduler sched_rr_get_interval sched_yield seccomp select semctl semget ",
        "semop semtimedop sendfile sendmmsg sendmsg sendto set_robust_list set_thread_area ",
        "set_tid_address setfsgid setfsuid setgid setgroups setitimer setpgid setregid ",
        "setresgid setresuid setreuid setrlimit setsid setsockopt setuid setxattr shmat ",
        "shmctl shmdt shmget shutdown sigaltstack signalfd signalfd4 splice stat statfs ",
        "statx symlink symlinkat sync sync_file_range syncfs sysinfo tee tgkill time ",
        "timer_create timer_delete timer_getoverrun timer_gettime timer_settime ",
        "timerfd_create timerfd_gettime timerfd_settime times tkill truncate umask uname ",
        "unlink unlinkat utime utimensat utimes vfork vmsplice wait4 waitid write writev ",
    ];

    /// The calls of [`PINNED_ALLOWED`] aarch64 does not have (the x86_64 legacy forms).
    const X86_64_ONLY: &[&str] = &[
        "access alarm arch_prctl chmod chown creat dup2 epoll_create epoll_ctl_old ",
        "epoll_wait epoll_wait_old eventfd fchmodat2 fork futimesat get_thread_area ",
        "getdents getpgrp inotify_init lchown link lstat mkdir mknod open pause pipe poll ",
        "readlink rename rmdir select set_thread_area signalfd stat symlink time unlink ",
        "utime utimes vfork ",
    ];

    /// aarch64 has these, but `libc`'s glibc constants for it lack them.
    const NOT_IN_LIBC_AARCH64_GNU: &str = "getrlimit renameat setrlimit sync_file_range";

    const PINNED_RULED: &str = "clone clone3 ioctl ioprio_set personality prlimit64 \
        sched_setaffinity sched_setattr sched_setparam sched_setscheduler setpriority socket \
        socketpair unshare";

    #[test]
    fn the_allow_list_is_pinned() {
        let mut expected = names(PINNED_ALLOWED.iter().copied());
        if cfg!(not(target_arch = "x86_64")) {
            let x86_64 = names(X86_64_ONLY.iter().copied());
            expected.retain(|n| !x86_64.contains(n));
            if cfg!(target_env = "gnu") {
                let lacking = names([NOT_IN_LIBC_AARCH64_GNU]);
                expected.retain(|n| !lacking.contains(n));
            }
        }
        let allowed: BTreeSet<&str> = ALLOWED.iter().map(|a| a.name).collect();
        assert_eq!(allowed, expected);
        let ruled: BTreeSet<&str> = RULED.iter().map(|r| r.name).collect();
        assert_eq!(ruled, names([PINNED_RULED]));
    }

    /// The part of docs/confinement.md about the filter.
    fn docs_section() -> &'static str {
        let docs = include_str!("../../../../docs/confinement.md");
        let section = docs.split("### The seccomp filter").nth(1).unwrap();
        section.split("\n## ").next().unwrap()
    }

    #[test]
    fn the_docs_list_every_allowed_call_and_every_argument_rule() {
        let section = docs_section();
        for name in PINNED_ALLOWED.iter().flat_map(|l| l.split_whitespace()) {
            assert!(
                section.contains(&format!("`{name}`")),
                "{name} is not in docs/confinement.md"
            );
        }
        for group in ALLOWED.iter().map(|a| a.group) {
            assert!(section.contains(group), "group {group}");
        }
        // The argument rules: one table row per call, with the rule in the code's words.
        for ruled in RULED {
            let row = format!("| `{}` | {} |", ruled.name, ruled.why);
            assert!(section.contains(&row), "no row {row}");
        }
        for refused in REFUSED {
            assert!(
                section.contains(&format!("`{}`", refused.name)),
                "{} is not in docs/confinement.md",
                refused.name
            );
        }
    }

    #[test]
    fn supported_agrees_with_the_status_file() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let listed = status.lines().any(|l| l.starts_with("Seccomp:"));
        assert_eq!(supported(), listed);
    }

    #[test]
    fn the_program_starts_with_the_arch_check_then_the_guard() {
        let filter = compile(Network::Any).unwrap();
        assert!(!filter.is_empty());
        let p = &filter.program;
        // LD arch; JEQ native; RET KILL_PROCESS.
        assert_eq!((p[0].code, p[0].k), (BPF_LD_W_ABS, 4));
        assert_eq!(p[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!((p[3].code, p[3].k), (BPF_LD_W_ABS, 0));
        let mut at = 4;
        if cfg!(target_arch = "x86_64") {
            assert_eq!(
                (p[4].code, p[4].k, p[4].jf),
                (BPF_JMP_JGE_K, 0x4000_0000, 1)
            );
            assert_eq!(p[5].k, RET_EPERM);
            at = 6;
        }
        assert_eq!(
            (p[at].code, p[at].jt, p[at].k),
            (BPF_JMP_JEQ_K, 1, libc::SYS_clone3 as u32)
        );
        assert_eq!(
            (p[at + 1].code, p[at + 1].jf, p[at + 1].k),
            (BPF_JMP_JGT_K, 1, HIGHEST_KNOWN as u32)
        );
        assert_eq!((p[at + 2].code, p[at + 2].k), (BPF_RET_K, RET_ENOSYS));
        // The runs of numbers allowed whatever the arguments, each ending in its own return.
        let mut at = at + 3;
        let ranges = allowed_ranges();
        assert!(ranges.len() < ALLOWED.len() / 2, "{} runs", ranges.len());
        for (low, high) in ranges {
            if low == high {
                assert_eq!((p[at].code, p[at].k), (BPF_JMP_JEQ_K, low));
                at += 1;
            } else {
                assert_eq!((p[at].code, p[at].k, p[at].jf), (BPF_JMP_JGE_K, low, 2));
                assert_eq!(
                    (p[at + 1].code, p[at + 1].k, p[at + 1].jt),
                    (BPF_JMP_JGT_K, high, 1)
                );
                at += 2;
            }
            assert_eq!((p[at].code, p[at].k), (BPF_RET_K, RET_ALLOW));
            at += 1;
        }
        // Then seccompiler's table of the argument rules, which loads the number itself.
        assert_eq!((p[at].code, p[at].k), (BPF_LD_W_ABS, 0));
    }

    #[test]
    fn the_program_is_well_under_the_kernel_limit() {
        for network in [Network::Any, Network::None] {
            let len = compile(network).unwrap().len();
            // About 370 instructions on x86_64 (1,522 when seccompiler tested every allowed
            // number one after another): the kernel runs the program for every call number
            // when the filter is installed, so its length is paid on every confined call.
            assert!(len < 600, "{len} instructions");
        }
    }

    #[test]
    fn the_program_answers_each_call_as_the_tables_say() {
        for network in [Network::Any, Network::None] {
            let program = compile(network).unwrap().program;
            for allowed in ALLOWED {
                assert_eq!(
                    decide(&program, allowed.nr, &[]),
                    RET_ALLOW,
                    "{}",
                    allowed.name
                );
            }
            for refused in REFUSED {
                assert_eq!(
                    decide(&program, refused.nr, &[]),
                    RET_EPERM,
                    "{}",
                    refused.name
                );
            }
            // Each ruled call has a refused form (clone3: every form is ENOSYS).
            let known: BTreeSet<i64> = ALLOWED
                .iter()
                .map(|a| a.nr)
                .chain(RULED.iter().map(|r| r.nr))
                .chain(REFUSED.iter().map(|r| r.nr))
                .collect();
            for nr in 0..=HIGHEST_KNOWN {
                if !known.contains(&nr) {
                    assert_eq!(decide(&program, nr, &[]), RET_EPERM, "unnamed {nr}");
                }
            }
            for nr in [HIGHEST_KNOWN + 1, 1000, 0x3fff_ffff] {
                assert_eq!(decide(&program, nr, &[]), RET_ENOSYS, "{nr}");
            }
            assert_eq!(decide(&program, libc::SYS_clone3, &[]), RET_ENOSYS);
            let foreign = decide_as(&program, Some(0x4000_0003), libc::SYS_getpid, [0; 6]);
            assert_eq!(foreign, libc::SECCOMP_RET_KILL_PROCESS);
            if cfg!(target_arch = "x86_64") {
                for nr in [
                    0x4000_0000 | libc::SYS_getpid,
                    0x4000_0000 | libc::SYS_mount,
                ] {
                    assert_eq!(decide(&program, nr, &[]), RET_EPERM, "x32 {nr:#x}");
                }
            }
        }
    }

    #[test]
    fn the_argument_rules_read_the_arguments() {
        let p = compile(Network::Any).unwrap().program;
        let high = 1u64 << 32;
        let other_pid = 4242;
        // The calls on another process: pid 0 only, on the low 32 bits.
        for nr in [
            libc::SYS_prlimit64,
            libc::SYS_sched_setscheduler,
            libc::SYS_sched_setparam,
            libc::SYS_sched_setattr,
            libc::SYS_sched_setaffinity,
        ] {
            assert_eq!(decide(&p, nr, &[0, 7]), RET_ALLOW, "{nr}");
            assert_eq!(decide(&p, nr, &[high, 7]), RET_ALLOW, "{nr} high bits");
            assert_eq!(decide(&p, nr, &[1, 7]), RET_EPERM, "{nr}");
            assert_eq!(decide(&p, nr, &[other_pid | high, 7]), RET_EPERM, "{nr}");
        }
        let (prio_process, prio_pgrp, prio_user) = (0, 1, 2);
        let setpriority = libc::SYS_setpriority;
        assert_eq!(decide(&p, setpriority, &[prio_process, 0, 10]), RET_ALLOW);
        assert_eq!(decide(&p, setpriority, &[prio_process, 1, 10]), RET_EPERM);
        assert_eq!(decide(&p, setpriority, &[prio_pgrp, 0, 10]), RET_EPERM);
        assert_eq!(decide(&p, setpriority, &[prio_user, 0, 10]), RET_EPERM);
        let (who_process, who_user) = (1, 3);
        assert_eq!(
            decide(&p, libc::SYS_ioprio_set, &[who_process, 0, 4]),
            RET_ALLOW
        );
        assert_eq!(
            decide(&p, libc::SYS_ioprio_set, &[who_process, 7, 4]),
            RET_EPERM
        );
        assert_eq!(
            decide(&p, libc::SYS_ioprio_set, &[who_user, 0, 4]),
            RET_EPERM
        );
        // personality: query or PER_LINUX.
        let personality = libc::SYS_personality;
        assert_eq!(decide(&p, personality, &[0xffff_ffff]), RET_ALLOW);
        assert_eq!(decide(&p, personality, &[0]), RET_ALLOW);
        for persona in [0x0040000, 0x0008, 0x0020000, 0x0400000] {
            assert_eq!(
                decide(&p, personality, &[persona]),
                RET_EPERM,
                "{persona:#x}"
            );
        }
        // clone and unshare: no CLONE_NEW* flag.
        let sigchld = libc::SIGCHLD as u64;
        let thread = (libc::CLONE_VM | libc::CLONE_FS | libc::CLONE_FILES | libc::CLONE_SIGHAND)
            as u64
            | (libc::CLONE_THREAD | libc::CLONE_SYSVSEM | libc::CLONE_SETTLS) as u64;
        assert_eq!(decide(&p, libc::SYS_clone, &[sigchld]), RET_ALLOW);
        assert_eq!(decide(&p, libc::SYS_clone, &[thread]), RET_ALLOW);
        assert_eq!(
            decide(&p, libc::SYS_unshare, &[libc::CLONE_FILES as u64]),
            RET_ALLOW
        );
        for bit in (0..32)
            .map(|b| 1u64 << b)
            .filter(|b| b & CLONE_NEW_FLAGS != 0)
        {
            assert_eq!(
                decide(&p, libc::SYS_clone, &[bit | sigchld]),
                RET_EPERM,
                "{bit:#x}"
            );
            assert_eq!(decide(&p, libc::SYS_unshare, &[bit]), RET_EPERM, "{bit:#x}");
        }
        assert_eq!(CLONE_NEW_FLAGS.count_ones(), 8);
        // ioctl: all but TIOCSTI and TIOCLINUX, however high bits are set.
        let ioctl = libc::SYS_ioctl;
        assert_eq!(decide(&p, ioctl, &[0, libc::TIOCGWINSZ]), RET_ALLOW);
        assert_eq!(decide(&p, ioctl, &[0, libc::FIONREAD]), RET_ALLOW);
        for request in [
            TIOCSTI,
            TIOCLINUX,
            TIOCSTI | high,
            TIOCLINUX | (0xdead << 32),
        ] {
            assert_eq!(decide(&p, ioctl, &[0, request]), RET_EPERM, "{request:#x}");
        }
    }

    #[test]
    fn the_socket_families_follow_the_network() {
        let (unix, inet, inet6) = (libc::AF_UNIX, libc::AF_INET, libc::AF_INET6);
        let (netlink, packet, vsock) = (libc::AF_NETLINK, libc::AF_PACKET, libc::AF_VSOCK);
        let stream = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
        let raw = libc::SOCK_RAW;
        let socket = |p: &[sock_filter], family: i32, kind: i32, protocol: i32| {
            decide(
                p,
                libc::SYS_socket,
                &[family as u64, kind as u64, protocol as u64],
            )
        };
        for network in [Network::Any, Network::None] {
            let p = compile(network).unwrap().program;
            let unix_answer = if network == Network::Any {
                RET_ALLOW
            } else {
                RET_EPERM
            };
            assert_eq!(socket(&p, unix, stream, 0), unix_answer);
            assert_eq!(socket(&p, inet, stream, 0), RET_ALLOW);
            assert_eq!(socket(&p, inet6, libc::SOCK_DGRAM, 0), RET_ALLOW);
            assert_eq!(socket(&p, netlink, raw, libc::NETLINK_ROUTE), RET_ALLOW);
            assert_eq!(socket(&p, netlink, raw, libc::NETLINK_AUDIT), RET_EPERM);
            assert_eq!(
                socket(&p, netlink, raw, libc::NETLINK_KOBJECT_UEVENT),
                RET_EPERM
            );
            for family in [
                packet,
                vsock,
                libc::AF_ALG,
                libc::AF_BLUETOOTH,
                libc::AF_KEY,
            ] {
                assert_eq!(socket(&p, family, stream, 0), RET_EPERM, "family {family}");
            }
            let pair = |family: i32| decide(&p, libc::SYS_socketpair, &[family as u64, 1, 0, 0]);
            assert_eq!(pair(unix), RET_ALLOW);
            assert_eq!(pair(inet), RET_EPERM);
        }
    }

    /// python3, preferring the system's own (a shim in `PATH` would run more under the filter).
    fn python3() -> std::path::PathBuf {
        let system = std::path::Path::new("/usr/bin/python3");
        if system.exists() {
            return system.to_path_buf();
        }
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
            .map(|dir| dir.join("python3"))
            .find(|p| p.exists())
            .expect("python3")
    }

    /// Run `python3 -c script args…` with `filter` installed just before `execve`, as the
    /// dispatcher's child does; its stdout.
    fn run_filtered(filter: Filter, script: &str, args: &[String]) -> String {
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new(python3());
        command.arg("-c").arg(script).args(args);
        // SAFETY: the closure runs in the forked child before `execve`: two system calls
        // (`prctl`, `seccomp`) on a program compiled before the fork, no allocation, no lock.
        unsafe {
            command.pre_exec(move || {
                rustix::thread::set_no_new_privs(true)?;
                filter.apply()?;
                Ok(())
            });
        }
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{:?}: {stderr}", out.status);
        String::from_utf8(out.stdout).unwrap()
    }

    /// Each argument `label:nr:arg:…` is one `syscall(nr, args…)` (`buf`: a zeroed 512-byte
    /// buffer); prints `label=ok` or `label=ERRNO`.
    const SYSCALLS: &str = r#"
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for spec in sys.argv[1:]:
    label, nr, *args = spec.split(":")
    args = [ctypes.create_string_buffer(512) if a == "buf" else ctypes.c_long(int(a, 0)) for a in args]
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(int(nr)), *args)
    e = ctypes.get_errno()
    print(label + "=" + ("ok" if rc >= 0 else errno.errorcode.get(e, str(e))))
"#;

    /// One call of [`a_child_under_the_filter_gets_these_answers_from_the_kernel`]: label,
    /// number, arguments (`OTHER`: a pid that does not exist, above `PID_MAX_LIMIT`), and the
    /// answer — `ANY/NONE` where it depends on the network.
    type Call = (&'static str, i64, &'static str, &'static str);

    #[test]
    fn a_child_under_the_filter_gets_these_answers_from_the_kernel() {
        #[rustfmt::skip]
        let mut calls: Vec<Call> = vec![
            ("getpid", libc::SYS_getpid, "", "ok"),
            ("prlimit64_self", libc::SYS_prlimit64, "0:7:0:buf", "ok"),
            ("prlimit64_init", libc::SYS_prlimit64, "1:7:0:buf", "EPERM"),
            ("personality_query", libc::SYS_personality, "0xffffffff", "ok"),
            ("personality_no_aslr", libc::SYS_personality, "0x0040000", "EPERM"),
            ("unshare_user", libc::SYS_unshare, "0x10000000", "EPERM"),
            ("unshare_files", libc::SYS_unshare, "0x400", "ok"),
            // CLONE_NEWUSER or CLONE_NEWNS with CLONE_FS: EINVAL from the kernel itself, so
            // nothing is cloned even without the filter.
            ("clone_user", libc::SYS_clone, "0x10000200:0:0:0:0", "EPERM"),
            ("clone_ns", libc::SYS_clone, "0x20200:0:0:0:0", "EPERM"),
            ("clone3", libc::SYS_clone3, "0:0", "ENOSYS"),
            ("number_1000", 1000, "", "ENOSYS"),
            ("above_highest", HIGHEST_KNOWN + 1, "", "ENOSYS"),
            ("mount", libc::SYS_mount, "0:0:0:0:0", "EPERM"),
            ("bpf", libc::SYS_bpf, "0:0:0", "EPERM"),
            ("ptrace", libc::SYS_ptrace, "2:OTHER:0:0", "EPERM"),
            ("kcmp", libc::SYS_kcmp, "0:0:0:0:0", "EPERM"),
            ("pidfd_getfd", libc::SYS_pidfd_getfd, "-1:0:0", "EPERM"),
            ("settimeofday", libc::SYS_settimeofday, "0:0", "EPERM"),
            ("clock_settime", libc::SYS_clock_settime, "0:0", "EPERM"),
            ("adjtimex_read", libc::SYS_adjtimex, "buf", "ok"),
            ("clock_adjtime_read", libc::SYS_clock_adjtime, "0:buf", "ok"),
            ("setpriority_other", libc::SYS_setpriority, "0:OTHER:0", "EPERM"),
            ("ioprio_set_other", libc::SYS_ioprio_set, "1:OTHER:0", "EPERM"),
            // The kernel refuses a zero-length mask: the filter let the call through.
            ("affinity_self", libc::SYS_sched_setaffinity, "0:0:0", "EINVAL"),
            ("affinity_other", libc::SYS_sched_setaffinity, "OTHER:0:0", "EPERM"),
            ("tiocsti", libc::SYS_ioctl, "-1:0x5412:0", "EPERM"),
            ("tiocsti_high", libc::SYS_ioctl, "-1:0x100005412:0", "EPERM"),
            ("tiocgwinsz", libc::SYS_ioctl, "-1:0x5413:0", "EBADF"),
            ("socket_packet", libc::SYS_socket, "17:3:0", "EPERM"),
            ("socket_vsock", libc::SYS_socket, "40:1:0", "EPERM"),
            ("socket_inet", libc::SYS_socket, "2:1:0", "ok"),
            ("socket_route", libc::SYS_socket, "16:3:0", "ok"),
            ("socket_audit", libc::SYS_socket, "16:3:9", "EPERM"),
            ("socket_unix", libc::SYS_socket, "1:1:0", "ok/EPERM"),
            ("socketpair_unix", libc::SYS_socketpair, "1:1:0:buf", "ok"),
            ("socketpair_inet", libc::SYS_socketpair, "2:1:0:buf", "EPERM"),
        ];
        #[cfg(target_arch = "x86_64")]
        calls.extend([
            ("modify_ldt", libc::SYS_modify_ldt, "0:buf:16", "EPERM"),
            ("x32_getpid", 0x4000_0000 | libc::SYS_getpid, "", "EPERM"),
        ]);
        let args: Vec<String> = calls
            .iter()
            .map(|(label, nr, args, _)| {
                let args = args.replace("OTHER", "0x7ffffff0");
                format!(
                    "{label}:{nr}{}{args}",
                    if args.is_empty() { "" } else { ":" }
                )
            })
            .collect();
        for network in [Network::Any, Network::None] {
            let out = run_filtered(compile(network).unwrap(), SYSCALLS, &args);
            let got: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once('=')).collect();
            for (label, _, _, answer) in &calls {
                let (any, none) = answer.split_once('/').unwrap_or((answer, answer));
                let expected = if network == Network::Any { any } else { none };
                assert_eq!(got.get(label), Some(&expected), "{label} under {network:?}");
            }
        }
    }

    #[test]
    fn an_ordinary_program_runs_under_the_filter() {
        // Threads and posix_spawn try clone3 first (glibc 2.34+) and fall back to clone on
        // ENOSYS; subprocess forks (vfork or clone); socketpair is allowed with either network.
        let script = r#"
import json, os, socket, subprocess, threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
pid = os.posix_spawn("/bin/true", ["/bin/true"], dict(os.environ))
spawned = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
a, b = socket.socketpair(); a.sendall(b"x")
print(subprocess.run(["/bin/true"]).returncode, spawned, b.recv(1).decode(), json.dumps([1]))
"#;
        for network in [Network::Any, Network::None] {
            let out = run_filtered(compile(network).unwrap(), script, &[]);
            assert_eq!(out, "0 0 x [1]\n", "{network:?}");
        }
    }
}
