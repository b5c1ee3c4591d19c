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
    let docs = include_str!("../../../../../docs/confinement.md");
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
    for network in [Network::Any, Network::None, Network::Allow] {
        let len = compile(network).unwrap().len();
        // About 370 instructions on x86_64 (1,522 when seccompiler tested every allowed
        // number one after another): the kernel runs the program for every call number
        // when the filter is installed, so its length is paid on every confined call.
        assert!(len < 600, "{len} instructions");
    }
}

#[test]
fn the_program_answers_each_call_as_the_tables_say() {
    for network in [Network::Any, Network::None, Network::Allow] {
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
    let thread = (libc::CLONE_VM | libc::CLONE_FS | libc::CLONE_FILES | libc::CLONE_SIGHAND) as u64
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
    for network in [Network::Any, Network::None, Network::Allow] {
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
    for network in [Network::Any, Network::None, Network::Allow] {
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
    for network in [Network::Any, Network::None, Network::Allow] {
        let out = run_filtered(compile(network).unwrap(), script, &[]);
        assert_eq!(out, "0 0 x [1]\n", "{network:?}");
    }
}
