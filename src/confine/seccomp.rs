//! The seccomp filter of SPEC §13 ("Always with confinement"): `EPERM` for the system calls an
//! adapter never needs, everything else allowed.
//!
//! [`compile`] (parent) turns [`DENIED`] into a BPF program with `seccompiler`;
//! [`Filter::apply`] (child, after `no_new_privs`) installs it with one `seccomp(2)` call —
//! `seccompiler::apply_filter` makes exactly that call (and a `prctl(PR_SET_NO_NEW_PRIVS)`,
//! idempotent), allocates nothing and takes no lock, so it is safe between `fork` and
//! `execve`.
//!
//! Two holes a deny list has are closed here: the architecture is checked first (an i386
//! `int 0x80` call has other numbers; `seccompiler` kills the process on a foreign
//! architecture), and on x86_64 every x32 call (number with bit 30 set, same architecture
//! value) is answered `EPERM` by an instruction spliced in after that check — without it
//! `mount | 0x40000000` would pass a list of x86_64 numbers. `ioctl`'s request is compared
//! on its low 32 bits, as the kernel reads it, so high garbage bits do not slip `TIOCSTI` by.

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

/// One denied system call and why an adapter never needs it.
#[derive(Debug, Clone, Copy)]
pub struct Denied {
    pub name: &'static str,
    pub nr: i64,
    pub why: &'static str,
}

macro_rules! denied {
    ($($(#[$cfg:meta])? $name:ident: $why:literal,)*) => {
        &[$($(#[$cfg])? Denied { name: stringify!($name), nr: libc::$name as i64, why: $why },)*]
    };
}

/// Every system call the filter answers `EPERM` to (besides the `ioctl`s [`TIOCSTI`] and
/// [`TIOCLINUX`]), with the reason. docs/confinement.md lists the same.
pub const DENIED: &[Denied] = denied! {
    SYS_init_module: "load a kernel module",
    SYS_finit_module: "load a kernel module",
    SYS_delete_module: "unload a kernel module",
    SYS_kexec_load: "replace the running kernel",
    SYS_kexec_file_load: "replace the running kernel",
    SYS_reboot: "reboot or halt the host",
    SYS_mount: "mount family: change what the file system shows",
    SYS_umount2: "mount family",
    SYS_pivot_root: "mount family",
    SYS_chroot: "mount family: a new root",
    SYS_move_mount: "mount family (new mount API)",
    SYS_open_tree: "mount family (new mount API)",
    SYS_fsopen: "mount family (new mount API)",
    SYS_fsconfig: "mount family (new mount API)",
    SYS_fsmount: "mount family (new mount API)",
    SYS_fspick: "mount family (new mount API)",
    SYS_mount_setattr: "mount family (new mount API)",
    SYS_bpf: "load BPF programs into the kernel",
    SYS_perf_event_open: "kernel and other processes' performance events",
    SYS_userfaultfd: "a classic kernel-exploit primitive",
    SYS_add_key: "kernel keyrings: other users' secrets",
    SYS_request_key: "kernel keyrings",
    SYS_keyctl: "kernel keyrings",
    SYS_ptrace: "trace or inject into other processes",
    SYS_process_vm_readv: "read another process's memory",
    SYS_process_vm_writev: "write another process's memory",
    SYS_pidfd_getfd: "take a descriptor out of another process",
    SYS_kcmp: "compare other processes' kernel objects",
    SYS_open_by_handle_at: "open a file by handle, past every path check",
    SYS_name_to_handle_at: "make handles for open_by_handle_at",
    SYS_swapon: "host swap",
    SYS_swapoff: "host swap",
    SYS_acct: "process accounting for the whole host",
    SYS_settimeofday: "set the host's clock",
    SYS_clock_settime: "set the host's clock",
    SYS_clock_adjtime: "adjust the host's clock",
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
    #[cfg(target_arch = "x86_64")]
    SYS_iopl: "raw I/O port access",
    #[cfg(target_arch = "x86_64")]
    SYS_ioperm: "raw I/O port access",
    #[cfg(target_arch = "x86_64")]
    SYS_uselib: "obsolete library loading",
    #[cfg(target_arch = "x86_64")]
    SYS__sysctl: "obsolete sysctl interface",
    #[cfg(target_arch = "x86_64")]
    SYS_nfsservctl: "obsolete NFS server control",
    SYS_lookup_dcookie: "obsolete profiling interface",
};

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

/// Build the filter (before the fork).
pub fn compile(_network: super::Network) -> Result<Filter, SeccompError> {
    if !supported() {
        return Err(SeccompError::Unsupported);
    }
    let build = |e: seccompiler::BackendError| SeccompError::Build(e.to_string());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|d| (d.nr, Vec::new())).collect();
    let ioctl = [TIOCSTI, TIOCLINUX]
        .into_iter()
        .map(|request| {
            let cond =
                SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)?;
            SeccompRule::new(vec![cond])
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(build)?;
    rules.insert(libc::SYS_ioctl, ioctl);
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(build)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(build)?;
    let mut program: BpfProgram = filter.try_into().map_err(build)?;
    splice_x32_guard(&mut program);
    Ok(Filter { program })
}

/// After `seccompiler`'s three-instruction architecture check, answer `EPERM` to every
/// system call number with the x32 bit. No jump crosses the insertion point (the check's
/// only jump skips its own kill instruction; later jumps are relative and stay after it).
#[cfg(target_arch = "x86_64")]
fn splice_x32_guard(program: &mut BpfProgram) {
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JGE_K: u16 = 0x35;
    const BPF_RET_K: u16 = 0x06;
    let ret_eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let guard = [
        sock_filter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        sock_filter {
            code: BPF_JMP_JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: ret_eperm,
        },
    ];
    let at = 3.min(program.len());
    program.splice(at..at, guard);
}

#[cfg(not(target_arch = "x86_64"))]
fn splice_x32_guard(_program: &mut BpfProgram) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_has_no_duplicates_and_every_entry_says_why() {
        let mut numbers: Vec<i64> = DENIED.iter().map(|d| d.nr).collect();
        numbers.sort();
        numbers.dedup();
        assert_eq!(numbers.len(), DENIED.len());
        assert!(DENIED
            .iter()
            .all(|d| !d.why.is_empty() && d.name.starts_with("SYS_")));
        assert!(
            !numbers.contains(&libc::SYS_ioctl),
            "ioctl is filtered by request only"
        );
    }

    #[test]
    fn the_docs_list_every_denied_call() {
        let readme = include_str!("../../docs/confinement.md");
        let section = readme.split("## The mechanisms").nth(1).unwrap();
        for denied in DENIED {
            let name = denied.name.trim_start_matches("SYS_");
            assert!(
                section.contains(&format!("`{name}`")),
                "{name} is not in docs/confinement.md"
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
    fn the_program_starts_with_the_arch_check_then_the_x32_guard() {
        let filter = compile(crate::confine::Network::Any).unwrap();
        assert!(!filter.is_empty());
        let p = &filter.program;
        // LD arch; JEQ native; RET KILL_PROCESS.
        assert_eq!((p[0].code, p[0].k), (0x20, 4));
        assert_eq!(p[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!((p[3].code, p[3].k), (0x20, 0));
            assert_eq!((p[4].code, p[4].k, p[4].jf), (0x35, 0x4000_0000, 1));
            assert_eq!(p[5].k, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);
        }
    }
}
