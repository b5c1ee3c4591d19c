//! Landlock for the adapter (SPEC §13 "File system"): the rules, built before the fork, and
//! the one system call the child makes to put them in force.
//!
//! [`prepare`] (parent, may allocate and fail) works out the grants — the base set, the
//! program and its interpreters, the private `TMPDIR`, the file transport's folder, the
//! `--fs-*` paths — opens each with `O_PATH`, creates the ruleset with the `landlock` crate
//! (which checks the rights against the kernel's ABI), adds each path's rule through the crate
//! and keeps only the descriptor. The child's two Landlock calls are made directly on that
//! descriptor, which every process of the run shares: [`PreparedLandlock::grant_proc`]'s rule
//! for the run's own `/proc` ([`add_path_rule`]), and [`PreparedLandlock::enforce`] (after
//! `no_new_privs`): `landlock_restrict_self(fd, 0)` and nothing else: no allocation, no lock,
//! safe between `fork` and `execve`. (The crate's own `RulesetCreated::restrict_self` does not allocate
//! either — 0.4.8: `prctl(PR_SET_NO_NEW_PRIVS)`, the system call, `io::Error::last_os_error`,
//! `close` — but it consumes the ruleset and sets `no_new_privs` itself, which SPEC §13.1
//! orders as a step of its own; so the child makes the call directly on the kept descriptor.)
//!
//! Fail closed: no Landlock, or an ABI older than [`MIN_ABI`], is an error naming what is
//! missing; rights the kernel knows are all handled (what is not granted is refused), and
//! the crate is told `HardRequirement`, so nothing is silently dropped. Scopes (signals and
//! abstract unix sockets, ABI 6) are added where the kernel has them and reported.
//!
//! The base's `/etc` is an allow list (SPEC §13.2): [`ETC_ALLOWED`], one table of the entries
//! programs need to start and resolve names, each with why; docs/confinement.md shows the same
//! table. Only those entries are granted (read-only), so a file an administrator drops into
//! `/etc` — a token in `npmrc`, a password in `mysql/debian.cnf` — stays out of reach without
//! anyone having to know its name, and the base is a couple of dozen rules, not one per entry
//! of `/etc`. An entry that is a symlink grants its target only when that is safe
//! ([`link_target`]): in the base already (no rule), an entry of the table itself, or a regular
//! file under `/run` (a resolver's `resolv.conf`).
//!
//! Must not: grant a path it did not resolve itself (every grant is a canonical path opened
//! here), grant `/etc` as a whole or anything of it the table does not name, or follow a
//! symlink of `/etc` anywhere else.

use super::interpreter::{self, InterpreterError};
use crate::fs::EntryKind;
use ::landlock::{
    Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::fs::{FileType, OFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// The oldest Landlock ABI confinement accepts: 3 is the first that can refuse `truncate`;
/// below it a read-only grant (the whole base) could still be emptied by an adapter.
pub(crate) const MIN_ABI: u32 = 3;
/// The newest ABI whose rights this build knows (the `landlock` crate's).
const KNOWN_ABI: u32 = 9;
/// The ABI that brought scopes (signals, abstract unix sockets).
const SCOPE_ABI: u32 = 6;

/// Directories beside the `/lib*` entries of `/` that the adapter may read and execute.
const BASE_EXEC: [&str; 3] = ["/usr", "/bin", "/sbin"];
/// Devices the adapter may read and write.
const BASE_DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/urandom"];

/// The base's part of `/etc` (SPEC §13.2): an allow list, relative to `/etc`, each entry with
/// why a program needs it — to start, to name users and groups, to resolve host names, to tell
/// the time, to verify TLS certificates. A trailing `/` is a folder, granted with everything
/// beneath it; a `*` at the end of the last name matches every name with that prefix (a file
/// or a folder, or only folders before a `/`); anything else is one regular file. Nothing else
/// of `/etc` is granted: `environment`, `profile`, the configurations of tools that keep tokens
/// (`npmrc`, `gitconfig`, `pip.conf`), the credential stores — all need `--fs-read`. An entry
/// that is a symlink is granted by its target only when that target is safe
/// ([`link_target`]). docs/confinement.md lists the same table (a test compares).
pub(crate) const ETC_ALLOWED: &[(&str, &str)] = &[
    (
        "ld.so.cache",
        "the dynamic loader's index of libraries: every dynamically linked program reads it to start",
    ),
    (
        "ld.so.conf",
        "the library search path, read by `ldconfig -p` (Python's `ctypes.util.find_library`) and by the linker",
    ),
    ("ld.so.conf.d/", "the files `ld.so.conf` includes"),
    (
        "ld.so.preload",
        "libraries the host's loader adds to every program; ld.so reads it at each start when it exists. A list of library paths, no secret; withheld, every program would silently run without what the host preloads (an auditing library)",
    ),
    (
        "passwd",
        "user names and home folders: `id`, `whoami`, `ls -l`, `~`, `getpwuid` (git, ssh, Python's `getpass`); the password hashes are in `shadow`, not here",
    ),
    ("group", "group names: `id`, `ls -l`, `getgrgid`"),
    (
        "nsswitch.conf",
        "where the C library looks users, groups and host names up",
    ),
    ("host.conf", "the C library's resolver options"),
    ("hosts", "static host names, `localhost` among them"),
    (
        "resolv.conf",
        "the DNS servers and search domains (often a link to a file under `/run`, granted as its target)",
    ),
    (
        "gai.conf",
        "how `getaddrinfo` orders the addresses of a name (IPv6 or IPv4 first)",
    ),
    (
        "services",
        "port names and numbers (`getservbyname`: `https` is 443)",
    ),
    (
        "protocols",
        "protocol names and numbers (`getprotobyname`, Python's `socket`)",
    ),
    (
        "localtime",
        "the host's time zone (a link into `/usr/share/zoneinfo`, which the base has)",
    ),
    (
        "timezone",
        "the time zone's name (Debian; read by Java and Python's `tzlocal`)",
    ),
    (
        "locale.alias",
        "the C library's locale name aliases (`setlocale`)",
    ),
    (
        "os-release",
        "which distribution this is: build tools, package managers, `platform.freedesktop_os_release()`",
    ),
    (
        "mime.types",
        "file types by extension (Python's `mimetypes`, web servers and clients)",
    ),
    (
        "magic",
        "libmagic's local additions, read beside its database by `file`",
    ),
    ("magic.mime", "the same for `file --mime` (older libmagic)"),
    (
        "mtab",
        "the mounted file systems (a link to `/proc`'s list, which the base has): `df`, `getmntent`",
    ),
    (
        "alternatives/",
        "Debian's links through which commands resolve (`awk`, `editor`, `java`); what they name is in the base",
    ),
    (
        "python3*/",
        "Debian's Python runs its `sitecustomize.py` from here (through a link in `/usr/lib/python3.X`); withheld, a Python that finds no up-to-date compiled copy of it prints an error at every start",
    ),
    (
        "ssl/certs/",
        "the CA certificates TLS clients verify servers with (OpenSSL's folder on Debian, Ubuntu, Alpine, Arch)",
    ),
    (
        "ssl/cert.pem",
        "the CA bundle OpenSSL and LibreSSL read by default on Alpine",
    ),
    (
        "ssl/openssl.cnf",
        "OpenSSL's configuration, read by every program that uses it",
    ),
    (
        "ca-certificates*",
        "Arch's extracted CA bundles (`ca-certificates/extracted/`, which `ssl/certs/` links to); Debian's `ca-certificates.conf` beside them is only the list of trusted CAs, no secret",
    ),
    (
        "pki/tls/certs/",
        "the CA bundles of Fedora and RHEL",
    ),
    (
        "pki/tls/cert.pem",
        "OpenSSL's default CA bundle on Fedora and RHEL",
    ),
    (
        "pki/tls/openssl.cnf",
        "OpenSSL's configuration on Fedora and RHEL",
    ),
    (
        "pki/ca-trust/extracted/",
        "where Fedora's and RHEL's CA bundles are (the two entries above link there)",
    ),
    (
        "crypto-policies/back-ends/",
        "the system-wide crypto policy that Fedora's and RHEL's `openssl.cnf` and GnuTLS include",
    ),
];

/// What one rule allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Grant {
    /// Read (files and directory listings), no execute: `/etc`, `/proc`.
    Read,
    /// Read and execute: the base, `--fs-read`.
    ReadExecute,
    /// Read and open for writing (truncation included), no execute, creation or removal:
    /// the devices.
    ReadWriteFile,
    /// Everything: `--fs-write`, the private `TMPDIR`, the transport folder.
    Full,
}

/// Why Landlock cannot be put in place.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("Landlock is not available in this kernel ({0})")]
    Unsupported(Errno),
    #[error("Landlock ABI {found} is too old: {MIN_ABI} or later is needed (to refuse truncate)")]
    AbiTooOld { found: u32 },
    #[error(transparent)]
    Interpreter(#[from] InterpreterError),
    #[error("the adapter's interpreter {interpreter} (run for {program}) is outside the base; allow it and its libraries with --fs-read {suggestion}")]
    InterpreterOutsideBase {
        program: PathBuf,
        interpreter: PathBuf,
        suggestion: PathBuf,
    },
    #[error("cannot open {path} for a Landlock rule: {error}")]
    Open { path: PathBuf, error: Errno },
    #[error("cannot create the private TMPDIR in {parent}: {error}")]
    TmpDir { parent: PathBuf, error: String },
    #[error("the Landlock ruleset could not be built: {0}")]
    Ruleset(String),
}

impl LandlockError {
    /// What SPEC §13's `error.details.missing` says.
    pub fn missing(&self) -> String {
        match self {
            LandlockError::Unsupported(_) => "landlock".into(),
            LandlockError::AbiTooOld { .. } => format!("landlock_abi_{MIN_ABI}"),
            // The path is in the message (stderr), never in the envelope's names.
            LandlockError::InterpreterOutsideBase { .. } => "fs_read_interpreter".into(),
            LandlockError::Interpreter(_) => "landlock_program".into(),
            LandlockError::Open { .. } | LandlockError::TmpDir { .. } => "landlock_path".into(),
            LandlockError::Ruleset(_) => "landlock".into(),
        }
    }
}

/// What the adapter gets beside the base.
#[derive(Debug, Clone, Copy)]
pub struct FsRequest<'a> {
    /// `--fs-read`, canonical.
    pub read: &'a [PathBuf],
    /// `--fs-write`, canonical.
    pub write: &'a [PathBuf],
    /// The program `execve` will run (resolved by the caller).
    pub program: &'a Path,
    /// The child's `PATH`, for `#!/usr/bin/env NAME`.
    pub path_var: Option<&'a OsStr>,
    /// The file transport's private folder, when the run has one.
    pub transport_dir: Option<&'a Path>,
    /// The private `TMPDIR` (canonical), made by the caller.
    pub tmpdir: &'a Path,
    /// Whether file-system rights are handled (a `--fs-*` option was given). Without, the
    /// ruleset holds only the scopes (SPEC §13.2 "Landlock always").
    pub handle_fs: bool,
}

/// A ruleset ready for the child, and what it grants.
#[derive(Debug)]
pub struct PreparedLandlock {
    ruleset: OwnedFd,
    /// The kernel's Landlock ABI.
    pub abi: u32,
    /// Whether signals and abstract unix sockets are scoped to the adapter's domain.
    pub scoped: bool,
    /// Every rule, canonical path and what it allows (for diagnostics, through redaction).
    pub grants: Vec<(PathBuf, Grant)>,
    /// What [`ETC_ALLOWED`] names and exists but was not granted: an entry of the wrong kind (a
    /// folder where the table says a file), a link whose target is not safe, a link on the way
    /// to an entry. Everything `/etc` holds beyond the table is not granted either, and not
    /// listed here.
    pub withheld: Vec<PathBuf>,
    /// Whether file-system rights are handled (else only the scopes are in force).
    pub handles_fs: bool,
}

impl PreparedLandlock {
    /// In the adapter's PID namespace, once its own procfs covers `/proc`: grant reading it
    /// (a rule made before the fork would name the host's procfs, which the new mount hides).
    /// Child side: two system calls. Nothing to do when file-system rights are not handled.
    pub(crate) fn grant_proc(&self) -> Result<(), Errno> {
        if !self.handles_fs {
            return Ok(());
        }
        let proc = rustix::fs::open(
            "/proc",
            OFlags::PATH | OFlags::CLOEXEC | OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )?;
        add_path_rule(&self.ruleset, &proc, AccessFs::ReadFile | AccessFs::ReadDir)
    }

    /// Put the rules in force on the calling process and all it starts. Child side: one
    /// system call, async-signal-safe. Needs `no_new_privs` (or `CAP_SYS_ADMIN`) first.
    pub(crate) fn enforce(&self) -> Result<(), Errno> {
        // SAFETY: landlock_restrict_self(2) takes a ruleset descriptor (owned by `self`, so
        // open) and a flags word; it reads no memory of ours.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0u32,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(last_errno())
        }
    }
}

/// The errno of the last failed libc call (no allocation: `io::Error`'s OS variant).
pub(crate) fn last_errno() -> Errno {
    Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO)
}

/// The kernel's Landlock ABI version, or why there is none (`ENOSYS`: not built in;
/// `EOPNOTSUPP`: disabled at boot).
pub fn kernel_abi() -> Result<u32, Errno> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag, the call only
    // returns the ABI version; it reads and writes no memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 0 {
        Err(last_errno())
    } else {
        Ok(u32::try_from(rc).unwrap_or(0))
    }
}

/// The rights of `grant` (directory rights included: a file's rule keeps its file rights).
pub fn access(grant: Grant, abi: ABI) -> BitFlags<AccessFs> {
    match grant {
        Grant::Read => AccessFs::ReadFile | AccessFs::ReadDir,
        Grant::ReadExecute => AccessFs::from_read(abi),
        Grant::ReadWriteFile => AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate,
        Grant::Full => AccessFs::from_all(abi),
    }
}

/// Build the ruleset for `request` (before the fork). `Ok(None)`: nothing to enforce — no
/// file-system rights asked for and a kernel without scopes (ABI < 6), or without Landlock.
pub fn prepare(request: &FsRequest<'_>) -> Result<Option<PreparedLandlock>, LandlockError> {
    if !request.handle_fs {
        // Scopes only: where the kernel has none, there is nothing to put in force (SPEC
        // §13.2's other mechanisms still hold).
        let abi = match kernel_abi() {
            Ok(abi) if abi >= SCOPE_ABI => abi,
            _ => return Ok(None),
        };
        let effective = ABI::from(abi.min(KNOWN_ABI) as i32);
        let ruleset = build(&[], &Kinds::new(), effective, true, false)?;
        return Ok(Some(PreparedLandlock {
            ruleset,
            abi,
            scoped: true,
            grants: Vec::new(),
            withheld: Vec::new(),
            handles_fs: false,
        }));
    }
    let abi = kernel_abi().map_err(LandlockError::Unsupported)?;
    if abi < MIN_ABI {
        return Err(LandlockError::AbiTooOld { found: abi });
    }
    let (mut grants, withheld, kinds) = base_grants_and_kinds();
    let exec_roots: Vec<PathBuf> = grants
        .iter()
        .filter(|(_, g)| *g == Grant::ReadExecute)
        .map(|(p, _)| p.clone())
        .chain(request.read.iter().cloned())
        .chain(request.write.iter().cloned())
        .collect();
    let chain = interpreter::chain(request.program, request.path_var)?;
    for interpreter in chain.iter().skip(1) {
        if !exec_roots.iter().any(|root| interpreter.starts_with(root)) {
            return Err(LandlockError::InterpreterOutsideBase {
                program: request.program.to_path_buf(),
                interpreter: interpreter.clone(),
                suggestion: suggestion(interpreter),
            });
        }
    }
    for program in chain {
        grants.push((program, Grant::ReadExecute));
    }
    let tmp = request.tmpdir.to_path_buf();
    grants.push((tmp, Grant::Full));
    if let Some(dir) = request.transport_dir {
        grants.push((dir.to_path_buf(), Grant::Full));
    }
    grants.extend(request.read.iter().map(|p| (p.clone(), Grant::ReadExecute)));
    grants.extend(request.write.iter().map(|p| (p.clone(), Grant::Full)));

    // The host's procfs is hidden by the adapter's own (SPEC §13.2): its rule is added in the
    // PID namespace ([`PreparedLandlock::grant_proc`]).
    grants.retain(|(p, _)| p != Path::new("/proc"));
    let effective = ABI::from(abi.min(KNOWN_ABI) as i32);
    let scoped = abi >= SCOPE_ABI;
    let ruleset = build(&grants, &kinds, effective, scoped, true)?;
    Ok(Some(PreparedLandlock {
        ruleset,
        abi,
        scoped,
        grants,
        withheld,
        handles_fs: true,
    }))
}

/// Where the error suggests to allow: the installation above a `bin`/`shims` folder (a pyenv
/// shim `~/.pyenv/shims/python3` → `~/.pyenv`), else the interpreter's folder.
fn suggestion(interpreter: &Path) -> PathBuf {
    let parent = interpreter.parent().unwrap_or(interpreter);
    match parent.file_name().and_then(OsStr::to_str) {
        Some("bin" | "shims" | "sbin") => parent.parent().unwrap_or(parent).to_path_buf(),
        _ => parent.to_path_buf(),
    }
}

fn build(
    grants: &[(PathBuf, Grant)],
    kinds: &Kinds,
    abi: ABI,
    scoped: bool,
    handle_fs: bool,
) -> Result<OwnedFd, LandlockError> {
    let failed = |e: ::landlock::RulesetError| LandlockError::Ruleset(e.to_string());
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    if handle_fs {
        ruleset = ruleset
            .handle_access(AccessFs::from_all(abi))
            .map_err(failed)?;
    }
    if scoped {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(failed)?;
    }
    let mut created = ruleset.create().map_err(failed)?.no_new_privs(false);
    for (path, grant) in grants {
        let opened = |error| LandlockError::Open {
            path: path.clone(),
            error,
        };
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(opened)?;
        // A rename between the listing and this open could change what the path names:
        // Landlock then grants the file-only rights of a directory, or the crate refuses a
        // directory's rights on a file (an error here, the adapter not started).
        let is_dir = match kinds.get(path) {
            Some(&is_dir) => is_dir,
            None => rustix::fs::fstat(&fd)
                .map(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
                .map_err(opened)?,
        };
        let mut allowed = access(*grant, abi);
        if !is_dir {
            allowed &= AccessFs::from_file(abi);
        }
        created = created
            .add_rule(PathBeneath::new(fd, allowed))
            .map_err(|e| {
                LandlockError::Ruleset(format!(
                    "the kernel refused the rule for {}: {e}",
                    path.display()
                ))
            })?;
    }
    Option::<OwnedFd>::from(created)
        .ok_or_else(|| LandlockError::Ruleset("the kernel gave no ruleset descriptor".into()))
}

/// `landlock_add_rule(2)` for one path, with exactly `allowed`: the child's one rule, added
/// in the PID namespace to the descriptor every process of the run shares
/// ([`PreparedLandlock::grant_proc`]) — the crate's `add_rule` takes the ruleset by value,
/// which a forked child cannot give. The rights are the crate's (`AccessFs` of the kernel's
/// ABI, checked when the ruleset was created with `HardRequirement`).
fn add_path_rule(
    ruleset: &OwnedFd,
    parent: &OwnedFd,
    allowed: BitFlags<AccessFs>,
) -> Result<(), Errno> {
    /// `struct landlock_path_beneath_attr` (packed, as the kernel's UAPI declares it).
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let attr = PathBeneathAttr {
        allowed_access: allowed.bits(),
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: landlock_add_rule(2) reads one `landlock_path_beneath_attr` from the pointer
    // (a live local of exactly that layout) and takes two open descriptors (borrowed from the
    // caller for the call); flags must be 0. It writes no memory of ours.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            std::ptr::from_ref(&attr),
            0u32,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

/// The base of SPEC §13 and §13.2: `/usr`, `/bin`, `/sbin` and the `/lib*` entries of `/`
/// (read and execute), the entries of [`ETC_ALLOWED`] that exist (read), `/proc` (read), the
/// devices (read and write). Missing entries are left out. Returns the grants and what the
/// table names but was withheld (see [`PreparedLandlock::withheld`]).
pub fn base_grants() -> (Vec<(PathBuf, Grant)>, Vec<PathBuf>) {
    let (grants, withheld, _) = base_grants_and_kinds();
    (grants, withheld)
}

/// The most entries read of one directory listed for the base grants (`/`, `/etc`, a folder of
/// it).
const MAX_LISTED: usize = 1 << 16;

/// What an `lstat` says, as a listing's kind.
fn entry_kind(kind: std::fs::FileType) -> EntryKind {
    if kind.is_dir() {
        EntryKind::Dir
    } else if kind.is_file() {
        EntryKind::File
    } else if kind.is_symlink() {
        EntryKind::Symlink
    } else {
        EntryKind::Other
    }
}

/// Whether each path is a directory, where a listing or `lstat` of ours already said (`/etc`'s
/// entries): [`build`] then needs no `fstat` of its own for them.
type Kinds = std::collections::HashMap<PathBuf, bool>;

/// [`base_grants`], and the kinds the `/etc` look-ups told.
fn base_grants_and_kinds() -> (Vec<(PathBuf, Grant)>, Vec<PathBuf>, Kinds) {
    let mut exec: Vec<PathBuf> = BASE_EXEC.iter().map(PathBuf::from).collect();
    if let Ok((root, _)) = crate::fs::list_dir_path(Path::new("/"), MAX_LISTED) {
        let mut libs: Vec<PathBuf> = root
            .iter()
            .filter(|e| e.name.starts_with(b"lib"))
            .map(|e| Path::new("/").join(OsStr::from_bytes(&e.name)))
            .collect();
        libs.sort();
        exec.extend(libs);
    }
    let mut grants: Vec<(PathBuf, Grant)> = Vec::new();
    for dir in exec {
        if let Ok(canonical) = std::fs::canonicalize(&dir) {
            // With a merged `/usr`, `/bin` is `/usr/bin`: already beneath `/usr`, no rule.
            if canonical.is_dir() && !grants.iter().any(|(p, _)| canonical.starts_with(p)) {
                grants.push((canonical, Grant::ReadExecute));
            }
        }
    }
    let exec_roots: Vec<PathBuf> = grants.iter().map(|(p, _)| p.clone()).collect();
    let mut etc = EtcScan {
        exec_roots: &exec_roots,
        grants: Vec::new(),
        targets: Vec::new(),
        withheld: Vec::new(),
        kinds: Kinds::new(),
    };
    etc.scan(Path::new("/etc"));
    let EtcScan {
        withheld, kinds, ..
    } = etc.finish(&mut grants);
    grants.push((PathBuf::from("/proc"), Grant::Read));
    for device in BASE_DEVICES {
        if Path::new(device).exists() {
            grants.push((PathBuf::from(device), Grant::ReadWriteFile));
        }
    }
    (grants, withheld, kinds)
}

/// One entry of [`ETC_ALLOWED`] taken apart: its names without the marks, whether it is a
/// folder (`/`) and whether its last name is a prefix (`*`).
fn entry_shape(entry: &str) -> (&str, bool, bool) {
    let (path, folder) = match entry.strip_suffix('/') {
        Some(path) => (path, true),
        None => (entry, false),
    };
    match path.strip_suffix('*') {
        Some(path) => (path, folder, true),
        None => (path, folder, false),
    }
}

/// Whether `name` is the entry's name `part` (or starts with it, for a prefix).
fn name_matches(part: &str, name: &OsStr, prefix: bool) -> bool {
    let name = name.as_encoded_bytes();
    if prefix {
        name.starts_with(part.as_bytes())
    } else {
        name == part.as_bytes()
    }
}

/// Whether `/etc/<rel>` is an entry of [`ETC_ALLOWED`] or lies beneath one (its names compared
/// one by one as the entry is walked: no allocation per entry).
fn etc_allows(rel: &[&OsStr]) -> bool {
    ETC_ALLOWED.iter().any(|(entry, _)| {
        let (path, _, prefix) = entry_shape(entry);
        let count = path.split('/').count();
        count <= rel.len()
            && path
                .split('/')
                .zip(rel)
                .enumerate()
                .all(|(i, (part, name))| name_matches(part, name, prefix && i + 1 == count))
    })
}

/// What one look-up of `/etc` found: the grants of the entries themselves, the targets of the
/// entries that are links, and what was withheld.
struct EtcScan<'a> {
    exec_roots: &'a [PathBuf],
    grants: Vec<PathBuf>,
    targets: Vec<PathBuf>,
    withheld: Vec<PathBuf>,
    kinds: Kinds,
}

impl EtcScan<'_> {
    /// Look every entry of [`ETC_ALLOWED`] up under `etc`: one listing of `etc` (whose kinds
    /// need no `stat`), one `lstat` per name below it.
    fn scan(&mut self, etc: &Path) {
        let Ok((listing, _)) = crate::fs::list_dir_path(etc, MAX_LISTED) else {
            return;
        };
        let mut top: Vec<(std::ffi::OsString, EntryKind)> = listing
            .into_iter()
            .filter(|e| e.kind != EntryKind::Unknown)
            .map(|e| (std::ffi::OsString::from_vec(e.name), e.kind))
            .collect();
        top.sort_by(|a, b| a.0.cmp(&b.0));
        for (entry, _) in ETC_ALLOWED {
            let (path, folder, prefix) = entry_shape(entry);
            let (first, rest) = match path.split_once('/') {
                Some((first, rest)) => (first, Some(rest)),
                None => (path, None),
            };
            for (name, kind) in &top {
                if !name_matches(first, name, prefix && rest.is_none()) {
                    continue;
                }
                let here = etc.join(name);
                match rest {
                    None => self.consider(here, *kind, folder, prefix),
                    Some(rest) if *kind == EntryKind::Dir => {
                        self.beneath(&here, rest, folder, prefix)
                    }
                    // A link on the way to an entry: where it leads is not looked into.
                    Some(_) if *kind == EntryKind::Symlink => self.withhold(here),
                    Some(_) => {}
                }
            }
        }
    }

    /// Look `rest` (an entry's names below `dir`, a folder reached without a link) up.
    fn beneath(&mut self, dir: &Path, rest: &str, folder: bool, prefix: bool) {
        match rest.split_once('/') {
            Some((name, rest)) => {
                let here = dir.join(name);
                match std::fs::symlink_metadata(&here).map(|m| m.file_type()) {
                    Ok(kind) if kind.is_dir() => self.beneath(&here, rest, folder, prefix),
                    Ok(kind) if kind.is_symlink() => self.withhold(here),
                    _ => {}
                }
            }
            None if prefix => {
                let Ok((listing, _)) = crate::fs::list_dir_path(dir, MAX_LISTED) else {
                    return;
                };
                let mut found: Vec<(PathBuf, EntryKind)> = listing
                    .iter()
                    .filter(|e| name_matches(rest, OsStr::from_bytes(&e.name), true))
                    .filter(|e| e.kind != EntryKind::Unknown)
                    .map(|e| (dir.join(OsStr::from_bytes(&e.name)), e.kind))
                    .collect();
                found.sort_by(|a, b| a.0.cmp(&b.0));
                for (here, kind) in found {
                    self.consider(here, kind, folder, prefix);
                }
            }
            None => {
                let here = dir.join(rest);
                if let Ok(meta) = std::fs::symlink_metadata(&here) {
                    self.consider(here, entry_kind(meta.file_type()), folder, prefix);
                }
            }
        }
    }

    /// Grant an entry found at `here`: itself when it is of the kind the table says (a folder
    /// for `/`, a regular file otherwise, either for a prefix), its target when it is a link
    /// to somewhere safe; else it is withheld.
    fn consider(&mut self, here: PathBuf, kind: EntryKind, folder: bool, prefix: bool) {
        if kind == EntryKind::Symlink {
            match link_target(&here, self.exec_roots) {
                Target::Covered => {}
                Target::Grant(target) => self.targets.push(target),
                Target::Refused => self.withhold(here),
            }
            return;
        }
        let fits = if folder {
            kind == EntryKind::Dir
        } else if prefix {
            matches!(kind, EntryKind::Dir | EntryKind::File)
        } else {
            kind == EntryKind::File
        };
        if !fits {
            self.withhold(here);
        } else if !self.grants.contains(&here) {
            self.kinds.insert(here.clone(), kind == EntryKind::Dir);
            self.grants.push(here);
        }
    }

    fn withhold(&mut self, path: PathBuf) {
        if !self.withheld.contains(&path) {
            self.withheld.push(path);
        }
    }

    /// Add the grants to `out`: the entries, then each link's target that no granted folder
    /// holds already (one rule fewer each).
    fn finish(mut self, out: &mut Vec<(PathBuf, Grant)>) -> Self {
        let mut granted: Vec<PathBuf> = std::mem::take(&mut self.grants);
        for target in std::mem::take(&mut self.targets) {
            let held = granted.iter().any(|g| {
                target.starts_with(g) && (*g == target || self.kinds.get(g) == Some(&true))
            });
            if !held {
                granted.push(target);
            }
        }
        out.extend(granted.into_iter().map(|p| (p, Grant::Read)));
        self
    }
}

/// What an entry of `/etc` that is a symlink grants.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// Its target lies in the base already (`/usr`, the `/lib*` entries, `/proc`): no rule.
    Covered,
    /// Its target, granted read-only: an entry of [`ETC_ALLOWED`] (or beneath one), or a
    /// regular file under `/run` (a `resolv.conf` kept by a resolver daemon).
    Grant(PathBuf),
    /// Nothing: the target is anywhere else, or the link leads nowhere.
    Refused,
}

/// Where the symlink `link` of `/etc` leads, and whether that may be granted ([`Target`]).
fn link_target(link: &Path, exec_roots: &[PathBuf]) -> Target {
    let Ok(target) = std::fs::canonicalize(link) else {
        return Target::Refused;
    };
    if exec_roots.iter().any(|r| target.starts_with(r)) || target.starts_with("/proc") {
        return Target::Covered;
    }
    if let Ok(rel) = target.strip_prefix("/etc") {
        let parts: Vec<&OsStr> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        return if !parts.is_empty() && etc_allows(&parts) {
            Target::Grant(target)
        } else {
            Target::Refused
        };
    }
    if target.starts_with("/run") && target.is_file() {
        Target::Grant(target)
    } else {
        Target::Refused
    }
}

#[cfg(test)]
mod tests;
