//! Self-confinement (SPEC §13, last bullet): once the adapter has opened its root, it restricts
//! itself with Landlock to that root — read-only for `read`, `search` and `ls`, read-write for
//! `write`, `edit` and `apply_patch` — so that even a bug in the path checks of `path.rs`
//! cannot reach a file outside the root: the kernel refuses the open with `EACCES`.
//!
//! The ruleset (built with the `landlock` crate, as `ptd_sys::confine::landlock` builds the
//! dispatcher's) handles every file-system right the kernel's ABI knows and grants, beneath the
//! root's directory handle only, what the tool needs: `ReadFile` and `ReadDir`; for the writing
//! tools also `WriteFile`, `Truncate`, `MakeReg`, `MakeDir`, `RemoveFile`, `RemoveDir` and
//! `Refer`. Never execute, never a symlink, FIFO, socket or device node. Where the ABI has them
//! it also handles TCP bind and connect (ABI 4: refused, the adapter never uses the network) and
//! scopes signals and abstract unix sockets to the adapter itself (ABI 6). It sets
//! `no_new_privs` (the adapter executes nothing).
//!
//! Descriptors already open are not affected: stdin was read before, stdout is written after.
//!
//! **A kernel without Landlock** (`ENOSYS`: not built in; `EOPNOTSUPP`: disabled at boot) is
//! documented best effort: the call is served with the path checks alone, and `run` says so
//! with one `warning[landlock]` line on stderr. This restriction is the adapter's own defence
//! in depth, not a host's requirement (a host that requires confinement asks the dispatcher
//! for it with `--fs-read`/`--fs-write`, which fails closed). **Any other failure** — the
//! kernel has Landlock but the ruleset cannot be built or enforced — fails closed: the call
//! is refused with `root_unavailable` and nothing is touched.
//!
//! Must not: grant anything outside the root, or run in a process that serves more than one
//! call (the restriction is for the life of the process: `respond` for tests leaves it off).

use ::landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use ptd_sys::confine::landlock::Grant;
use rustix::io::Errno;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

/// What a tool may do beneath the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rights {
    /// Read files and list directories.
    ReadOnly,
    /// Also write, truncate, create and remove files and directories.
    ReadWrite,
}

/// How the restriction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confined {
    /// In force, with the kernel's Landlock ABI.
    Enforced { abi: u32 },
    /// The kernel has no Landlock (the errno of the ABI query): the path checks alone hold.
    Unsupported(Errno),
}

/// Restrict the calling process, for the rest of its life, to `root` with `access`.
/// `Err` is a sentence for the `root_unavailable` message (no host path in it).
pub(crate) fn restrict_to_root(root: BorrowedFd<'_>, access: Rights) -> Result<Confined, String> {
    restrict_to_root_and(root, access, &[])
}

/// [`restrict_to_root`], with `extra` paths granted beside the root, each with what its
/// [`Grant`] allows (a file's rule keeps only the file rights of it). The git adapter grants
/// this way what git needs to run: its program, its exec path, the base of SPEC §13.2.
pub(crate) fn restrict_to_root_and(
    root: BorrowedFd<'_>,
    access: Rights,
    extra: &[(PathBuf, Grant)],
) -> Result<Confined, String> {
    let version = match ptd_sys::confine::landlock::kernel_abi() {
        Ok(version) => version,
        Err(errno) if errno == Errno::NOSYS || errno == Errno::OPNOTSUPP => {
            return Ok(Confined::Unsupported(errno))
        }
        Err(errno) => return Err(format!("the Landlock ABI query failed ({errno})")),
    };
    let abi = ABI::from(i32::try_from(version).unwrap_or(i32::MAX));
    let failed = |e: ::landlock::RulesetError| format!("Landlock refused the ruleset ({e})");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(failed)?;
    if abi >= ABI::V4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(failed)?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(failed)?;
    }
    let mut created = ruleset
        .create()
        .map_err(failed)?
        .add_rule(PathBeneath::new(root, allowed(access, abi)))
        .map_err(failed)?;
    for (path, grant) in extra {
        let fd =
            PathFd::new(path).map_err(|e| format!("a path to grant cannot be opened ({e})"))?;
        let mut rights = ptd_sys::confine::landlock::access(*grant, abi);
        if !std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            rights &= AccessFs::from_file(abi);
        }
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(failed)?;
    }
    let status = created.restrict_self().map_err(failed)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(Confined::Enforced { abi: version }),
        other => Err(format!("Landlock enforced the ruleset only as {other:?}")),
    }
}

/// The rights granted beneath the root (only those the ABI knows).
fn allowed(access: Rights, abi: ABI) -> BitFlags<AccessFs> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let wanted = match access {
        Rights::ReadOnly => read,
        Rights::ReadWrite => {
            read | AccessFs::WriteFile
                | AccessFs::Truncate
                | AccessFs::MakeReg
                | AccessFs::MakeDir
                | AccessFs::RemoveFile
                | AccessFs::RemoveDir
                | AccessFs::Refer
        }
    };
    wanted & AccessFs::from_all(abi)
}

#[cfg(test)]
mod tests {
    //! The restriction is for the life of a process, so each case runs in a fresh copy of this
    //! test binary (the re-exec below), never in the test harness's own process.
    use super::*;
    use std::fs;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::fs::symlink;
    use std::path::Path;
    use std::process::Command;

    /// Set in the child copy: which case to run, and where.
    const CASE_ENV: &str = "PTD_WORKSPACE_LANDLOCK_CASE";
    const DIR_ENV: &str = "PTD_WORKSPACE_LANDLOCK_DIR";

    /// A root at `dir/root` holding `inside.txt` and `escape` (a symlink to
    /// `dir/outside/secret.txt`), and that secret beside it.
    fn fixture(dir: &Path) {
        fs::create_dir_all(dir.join("root/sub")).unwrap();
        fs::create_dir_all(dir.join("outside")).unwrap();
        fs::write(dir.join("root/inside.txt"), "inside\n").unwrap();
        fs::create_dir_all(dir.join("root/moving")).unwrap();
        fs::write(dir.join("root/moving/file.txt"), "was inside\n").unwrap();
        fs::write(dir.join("outside/secret.txt"), "secret\n").unwrap();
        symlink(dir.join("outside/secret.txt"), dir.join("root/escape")).unwrap();
    }

    /// Run `case` in a fresh copy of this binary; it prints one line per probe.
    fn in_child(case: &str, test: &str) -> String {
        let tmp = tempfile::tempdir().unwrap();
        fixture(tmp.path());
        let out = Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(CASE_ENV, case)
            .env(DIR_ENV, tmp.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "child failed: {out:?}");
        // The probes are still the files as they were, whatever the child did.
        assert_eq!(
            fs::read_to_string(tmp.path().join("outside/secret.txt")).unwrap(),
            "secret\n"
        );
        stdout
    }

    /// In the child: restrict to the root, then try what the path checks would stop and what
    /// they would let through, with plain `std::fs` calls that follow symlinks and climb `..`
    /// — only the kernel stands in the way.
    fn probe(access: Rights) {
        let dir = std::path::PathBuf::from(std::env::var_os(DIR_ENV).unwrap());
        let root = fs::File::open(dir.join("root")).unwrap();
        // A directory handle taken inside the root, whose directory then moves out of it: every
        // check relative to that handle (as `openat2(RESOLVE_BENEATH)` makes them) still passes;
        // the kernel's Landlock looks at where the file is now.
        let moving = fs::File::open(dir.join("root/moving")).unwrap();
        fs::rename(dir.join("root/moving"), dir.join("outside/moved")).unwrap();
        let outcome = restrict_to_root(root.as_fd(), access).unwrap();
        assert!(
            matches!(outcome, Confined::Enforced { abi } if abi >= 1),
            "{outcome:?}"
        );
        let report = |what: &str, result: std::io::Result<()>| {
            let shown = match result {
                Ok(()) => "ok".to_owned(),
                Err(e) => format!("errno {}", e.raw_os_error().unwrap_or(0)),
            };
            println!("PROBE {what}: {shown}");
        };
        let read = |p: &Path| {
            fs::File::open(p)
                .and_then(|mut f| f.read_to_string(&mut String::new()))
                .map(|_| ())
        };
        report("read inside", read(&dir.join("root/inside.txt")));
        report("read outside", read(&dir.join("outside/secret.txt")));
        report("read through symlink", read(&dir.join("root/escape")));
        report(
            "read via dotdot",
            read(&dir.join("root/sub/../../outside/secret.txt")),
        );
        report("read /etc/passwd", read(Path::new("/etc/passwd")));
        report(
            "read beneath a handle moved out",
            rustix::fs::openat(
                &moving,
                "file.txt",
                rustix::fs::OFlags::RDONLY,
                rustix::fs::Mode::empty(),
            )
            .map(drop)
            .map_err(std::io::Error::from),
        );
        let write = |p: &Path| {
            fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(p)
                .and_then(|mut f| f.write_all(b"pwned\n"))
        };
        report("write inside", write(&dir.join("root/new.txt")));
        report("write outside", write(&dir.join("outside/new.txt")));
        report("write through symlink", write(&dir.join("root/escape")));
        report("mkdir inside", fs::create_dir(dir.join("root/made")));
    }

    fn probes(stdout: &str) -> Vec<&str> {
        stdout
            .lines()
            // libtest's "test NAME ... " may start the first line.
            .filter_map(|l| l.split_once("PROBE ").map(|(_, probe)| probe))
            .collect()
    }

    #[test]
    fn read_only_confinement_refuses_everything_but_reading_the_root() {
        if std::env::var(CASE_ENV).as_deref() == Ok("read-only") {
            return probe(Rights::ReadOnly);
        }
        let out = in_child(
            "read-only",
            "adapter::workspace::confine::tests::read_only_confinement_refuses_everything_but_reading_the_root",
        );
        assert_eq!(
            probes(&out),
            [
                "read inside: ok",
                "read outside: errno 13",
                "read through symlink: errno 13",
                "read via dotdot: errno 13",
                "read /etc/passwd: errno 13",
                "read beneath a handle moved out: errno 13",
                "write inside: errno 13",
                "write outside: errno 13",
                "write through symlink: errno 13",
                "mkdir inside: errno 13",
            ],
            "{out}"
        );
    }

    #[test]
    fn read_write_confinement_writes_only_beneath_the_root() {
        if std::env::var(CASE_ENV).as_deref() == Ok("read-write") {
            return probe(Rights::ReadWrite);
        }
        let out = in_child(
            "read-write",
            "adapter::workspace::confine::tests::read_write_confinement_writes_only_beneath_the_root",
        );
        assert_eq!(
            probes(&out),
            [
                "read inside: ok",
                "read outside: errno 13",
                "read through symlink: errno 13",
                "read via dotdot: errno 13",
                "read /etc/passwd: errno 13",
                "read beneath a handle moved out: errno 13",
                "write inside: ok",
                "write outside: errno 13",
                "write through symlink: errno 13",
                "mkdir inside: ok",
            ],
            "{out}"
        );
    }

    #[test]
    fn only_rights_the_abi_knows_are_granted() {
        assert!(!allowed(Rights::ReadWrite, ABI::V1).contains(AccessFs::Refer));
        assert!(allowed(Rights::ReadWrite, ABI::V3).contains(AccessFs::Truncate));
        let rw = allowed(Rights::ReadWrite, ABI::V6);
        for never in [
            AccessFs::Execute,
            AccessFs::MakeSym,
            AccessFs::MakeFifo,
            AccessFs::MakeSock,
            AccessFs::MakeChar,
            AccessFs::MakeBlock,
        ] {
            assert!(!rw.contains(never), "{never:?}");
        }
        assert_eq!(
            allowed(Rights::ReadOnly, ABI::V6),
            AccessFs::ReadFile | AccessFs::ReadDir
        );
    }
}
