//! Landlock for the adapter (SPEC §13 "File system"): the rules, built before the fork, and
//! the one system call the child makes to put them in force.
//!
//! [`prepare`] (parent, may allocate and fail) works out the grants — the base set, the
//! program and its interpreters, the private `TMPDIR`, the file transport's folder, the
//! `--fs-*` paths — opens each with `O_PATH`, creates the ruleset with the `landlock` crate
//! (which checks the rights against the kernel's ABI), adds each path's rule with one
//! `landlock_add_rule(2)` of its own ([`add_path_rule`]) and keeps only the descriptor. [`PreparedLandlock::enforce`] (child, after `no_new_privs`) is
//! `landlock_restrict_self(fd, 0)` and nothing else: no allocation, no lock, safe between
//! `fork` and `execve`. (The crate's own `RulesetCreated::restrict_self` does not allocate
//! either — 0.4.8: `prctl(PR_SET_NO_NEW_PRIVS)`, the system call, `io::Error::last_os_error`,
//! `close` — but it consumes the ruleset and sets `no_new_privs` itself, which SPEC §13.1
//! orders as a step of its own; so the child makes the call directly on the kept descriptor.)
//!
//! Fail closed: no Landlock, or an ABI older than [`MIN_ABI`], is an error naming what is
//! missing; rights the kernel knows are all handled (what is not granted is refused), and
//! the crate is told `HardRequirement`, so nothing is silently dropped. Scopes (signals and
//! abstract unix sockets, ABI 6) are added where the kernel has them and reported.
//!
//! Must not: grant a path it did not resolve itself (every grant is a canonical path opened
//! here), follow a symlink out of `/etc` to anything but the base, or grant `/etc` as a whole.

use super::interpreter::{self, InterpreterError};
use ::landlock::{
    Access, AccessFs, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, ABI,
};
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::fs::{FileType, OFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// The oldest Landlock ABI confinement accepts: 3 is the first that can refuse `truncate`;
/// below it a read-only grant (the whole base) could still be emptied by an adapter.
pub const MIN_ABI: u32 = 3;
/// The newest ABI whose rights this build knows (the `landlock` crate's).
const KNOWN_ABI: u32 = 9;
/// The ABI that brought scopes (signals, abstract unix sockets).
const SCOPE_ABI: u32 = 6;

/// Directories beside the `/lib*` entries of `/` that the adapter may read and execute.
const BASE_EXEC: [&str; 3] = ["/usr", "/bin", "/sbin"];
/// Devices the adapter may read and write.
const BASE_DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/urandom"];

/// What is withheld from `/etc`, relative to it: a component ending in `*` matches any name
/// with that prefix. Credential stores and secrets of the common distributions and daemons.
pub const ETC_WITHHELD: &[&str] = &[
    "shadow*",
    "gshadow*",
    "master.passwd",
    "security/opasswd",
    "sudoers*",
    "ssh",
    "ssl/private",
    "pki/tls/private",
    "pki/CA/private",
    "krb5.keytab",
    "ipsec.secrets",
    "ipsec.d/private",
    "wireguard",
    "openvpn",
    "letsencrypt",
    "NetworkManager/system-connections",
    "ppp/chap-secrets",
    "ppp/pap-secrets",
    "sssd",
    "credstore",
    "credstore.encrypted",
    "docker/key.json",
    "libvirt/secrets",
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
    /// What was withheld from `/etc` (present entries only).
    pub withheld: Vec<PathBuf>,
    /// Whether file-system rights are handled (else only the scopes are in force).
    pub handles_fs: bool,
}

impl PreparedLandlock {
    /// In the adapter's PID namespace, once its own procfs covers `/proc`: grant reading it
    /// (a rule made before the fork would name the host's procfs, which the new mount hides).
    /// Child side: two system calls. Nothing to do when file-system rights are not handled.
    pub fn grant_proc(&self) -> Result<(), Errno> {
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
    pub fn enforce(&self) -> Result<(), Errno> {
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
pub(super) fn last_errno() -> Errno {
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

fn access(grant: Grant, abi: ABI) -> BitFlags<AccessFs> {
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
    let created = ruleset.create().map_err(failed)?.no_new_privs(false);
    let ruleset = Option::<OwnedFd>::from(created)
        .ok_or_else(|| LandlockError::Ruleset("the kernel gave no ruleset descriptor".into()))?;
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
        // Landlock then grants the file-only rights of a directory, or the kernel refuses a
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
        add_path_rule(&ruleset, &fd, allowed).map_err(|errno| {
            LandlockError::Ruleset(format!(
                "the kernel refused the rule for {}: {errno}",
                path.display()
            ))
        })?;
    }
    Ok(ruleset)
}

/// `landlock_add_rule(2)` for one path, with exactly `allowed`. The crate's `add_rule` would
/// `fstat` the descriptor again to prune directory rights from a file, which [`build`] has
/// already done from what it knew (the listing, or its own `fstat`): one system call fewer
/// for each of ~150 rules. The rights are the crate's (`AccessFs` of the kernel's ABI, checked
/// when the ruleset was created with `HardRequirement`).
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

/// The base of SPEC §13: `/usr`, `/bin`, `/sbin` and the `/lib*` entries of `/` (read and
/// execute), `/etc` entry by entry less [`ETC_WITHHELD`] (read), `/proc` (read), the devices
/// (read and write). Missing entries are left out. Returns the grants and what `/etc` withheld.
pub fn base_grants() -> (Vec<(PathBuf, Grant)>, Vec<PathBuf>) {
    let (grants, withheld, _) = base_grants_and_kinds();
    (grants, withheld)
}

/// Whether each path is a directory, where the listing that found it already said (`/etc`'s
/// entries): [`build`] then needs no `fstat` of its own for them.
type Kinds = std::collections::HashMap<PathBuf, bool>;

/// [`base_grants`], and the kinds the `/etc` listing told.
fn base_grants_and_kinds() -> (Vec<(PathBuf, Grant)>, Vec<PathBuf>, Kinds) {
    let mut exec: Vec<PathBuf> = BASE_EXEC.iter().map(PathBuf::from).collect();
    if let Ok(root) = std::fs::read_dir("/") {
        let mut libs: Vec<PathBuf> = root
            .flatten()
            .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"lib"))
            .map(|e| e.path())
            .collect();
        libs.sort();
        exec.extend(libs);
    }
    let mut grants: Vec<(PathBuf, Grant)> = Vec::new();
    for dir in exec {
        if let Ok(canonical) = std::fs::canonicalize(&dir) {
            if canonical.is_dir() && !grants.iter().any(|(p, _)| *p == canonical) {
                grants.push((canonical, Grant::ReadExecute));
            }
        }
    }
    let exec_roots: Vec<PathBuf> = grants.iter().map(|(p, _)| p.clone()).collect();
    let mut withheld = Vec::new();
    let mut kinds = Kinds::new();
    etc_grants(
        Path::new("/etc"),
        &[],
        &exec_roots,
        (&mut grants, &mut kinds),
        &mut withheld,
    );
    grants.push((PathBuf::from("/proc"), Grant::Read));
    for device in BASE_DEVICES {
        if Path::new(device).exists() {
            grants.push((PathBuf::from(device), Grant::ReadWriteFile));
        }
    }
    (grants, withheld, kinds)
}

/// Whether `/etc/<rel>` is withheld (`Some(true)`), holds something withheld further down
/// (`Some(false)`: descend), or neither (`None`: grant whole).
fn withheld(rel: &[&OsStr]) -> Option<bool> {
    let mut descend = false;
    for pattern in ETC_WITHHELD {
        // Compared component by component as the pattern is walked: no allocation per entry.
        let mut parts = pattern.split('/');
        let mut names = rel.iter();
        let whole = loop {
            match (parts.next(), names.next()) {
                (Some(part), Some(name)) => {
                    let name = name.as_encoded_bytes();
                    let hit = match part.strip_suffix('*') {
                        Some(prefix) => name.starts_with(prefix.as_bytes()),
                        None => name == part.as_bytes(),
                    };
                    if !hit {
                        break None;
                    }
                }
                // The pattern is used up: `rel` is it or beneath it.
                (None, _) => break Some(true),
                // `rel` is used up first: it holds what the pattern names.
                (Some(_), None) => break Some(false),
            }
        };
        match whole {
            Some(true) => return Some(true),
            Some(false) => descend = true,
            None => {}
        }
    }
    descend.then_some(false)
}

fn etc_grants(
    dir: &Path,
    rel: &[&OsStr],
    exec_roots: &[PathBuf],
    (grants, kinds): (&mut Vec<(PathBuf, Grant)>, &mut Kinds),
    withheld_out: &mut Vec<PathBuf>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let mut here: Vec<&OsStr> = rel.to_vec();
        here.push(&name);
        let path = entry.path();
        match withheld(&here) {
            Some(true) => withheld_out.push(path),
            Some(false) if entry.file_type().is_ok_and(|t| t.is_dir()) => {
                etc_grants(&path, &here, exec_roots, (grants, kinds), withheld_out)
            }
            _ => {
                let kind = entry.file_type();
                let is_link = kind.as_ref().is_ok_and(|t| t.is_symlink());
                if !is_link {
                    if let Ok(kind) = kind {
                        kinds.insert(path.clone(), kind.is_dir());
                    }
                    grants.push((path, Grant::Read));
                } else if let Some(target) = link_target(&path, exec_roots) {
                    grants.push((target, Grant::Read));
                } else {
                    withheld_out.push(path);
                }
            }
        }
    }
}

/// The target of a symlink in `/etc`, when it may be granted: inside the base (the exec
/// roots, `/proc`, `/etc` less what is withheld), or a regular file under `/run` (a
/// `resolv.conf` kept by a resolver daemon).
fn link_target(link: &Path, exec_roots: &[PathBuf]) -> Option<PathBuf> {
    let target = std::fs::canonicalize(link).ok()?;
    if exec_roots.iter().any(|r| target.starts_with(r)) || target.starts_with("/proc") {
        return Some(target);
    }
    if let Ok(rel) = target.strip_prefix("/etc") {
        let parts: Vec<&OsStr> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        let clean = (1..=parts.len()).all(|n| withheld(&parts[..n]) != Some(true));
        return clean.then_some(target);
    }
    (target.starts_with("/run") && target.is_file()).then_some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(path: &str) -> Vec<&OsStr> {
        path.split('/').map(OsStr::new).collect()
    }

    #[test]
    fn credential_stores_are_withheld_and_their_folders_descended() {
        assert_eq!(withheld(&rel("shadow")), Some(true));
        assert_eq!(withheld(&rel("shadow-")), Some(true));
        assert_eq!(withheld(&rel("gshadow")), Some(true));
        assert_eq!(withheld(&rel("sudoers.d")), Some(true));
        assert_eq!(withheld(&rel("ssh")), Some(true));
        assert_eq!(withheld(&rel("ssl")), Some(false));
        assert_eq!(withheld(&rel("ssl/private")), Some(true));
        assert_eq!(withheld(&rel("ssl/certs")), None);
        assert_eq!(withheld(&rel("pki")), Some(false));
        assert_eq!(withheld(&rel("pki/tls")), Some(false));
        assert_eq!(withheld(&rel("passwd")), None);
        assert_eq!(withheld(&rel("hosts")), None);
    }

    #[test]
    fn the_base_grants_etc_entries_but_not_etc_or_its_secrets() {
        let (grants, withheld) = base_grants();
        let has = |p: &str| grants.iter().any(|(g, _)| g == Path::new(p));
        assert!(!has("/etc"), "/etc as a whole would grant shadow");
        assert!(has("/etc/passwd") && has("/proc") && has("/dev/null"));
        assert!(grants
            .iter()
            .any(|(g, k)| g.starts_with("/usr") && *k == Grant::ReadExecute));
        for secret in ["/etc/shadow", "/etc/gshadow"] {
            assert!(!has(secret), "{secret}");
            if Path::new(secret).exists() {
                assert!(withheld.iter().any(|w| w == Path::new(secret)), "{secret}");
            }
        }
        assert!(grants
            .iter()
            .all(|(g, _)| !g.starts_with("/etc/ssh") && !g.starts_with("/etc/ssl/private")));
        if Path::new("/etc/ssl/certs").exists() {
            assert!(has("/etc/ssl/certs"), "ssl/ is granted entry by entry");
        }
    }

    #[test]
    fn the_docs_list_everything_withheld_from_etc() {
        let readme = include_str!("../../docs/confinement.md");
        let section = readme.split("## The mechanisms").nth(1).unwrap();
        for pattern in ETC_WITHHELD {
            assert!(
                section.contains(&format!("`{pattern}")),
                "{pattern} is not in docs/confinement.md"
            );
        }
    }

    #[test]
    fn the_suggestion_is_the_installation() {
        assert_eq!(
            suggestion(Path::new("/root/.pyenv/shims/python3")),
            Path::new("/root/.pyenv")
        );
        assert_eq!(
            suggestion(Path::new("/opt/py/bin/python3")),
            Path::new("/opt/py")
        );
        assert_eq!(
            suggestion(Path::new("/opt/tools/run")),
            Path::new("/opt/tools")
        );
    }
}
