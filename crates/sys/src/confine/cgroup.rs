//! A cgroup for one call (SPEC §13 "Limits on the tree"): found where each controller lives,
//! made and limited before the fork, joined by the child, read and removed afterwards.
//!
//! Where: per controller, cgroup v2 when the controller is listed in the dispatcher's own v2
//! cgroup's `cgroup.controllers` and enabled (or enableable) in its `cgroup.subtree_control`;
//! else the cgroup v1 hierarchy that has it mounted. A cgroup2 mount without the controller
//! does not count. The call's cgroup is a child of the dispatcher's own cgroup there, so it
//! is nested under whatever limits the host already put on the dispatcher.
//!
//! Before the fork: [`CallCgroup::create`] makes the folders, writes the limits and opens each
//! folder's join file for writing ([`join_file`]). In the child: [`CallCgroup::join`]
//! `write`s `"0"` to each descriptor (the writing process moves itself, with everything it
//! starts later) — one system call per hierarchy, async-signal-safe.
//!
//! The join file is `cgroup.procs` on v2 and `tasks` on v1. Moving a whole thread group takes
//! the kernel's global `cgroup_threadgroup_rwsem` for writing, which waits for an RCU grace
//! period (what that costs a call: docs/PERFORMANCE.md). Moving the calling thread alone
//! through v1's `tasks` skips that lock (Linux 5.19 and later), and the child is one thread (a
//! `fork` copies only the thread that called it), so it is the whole process that moves. v2 has
//! no such file for a domain cgroup (`cgroup.threads` is for threaded ones); `clone3` with
//! `CLONE_INTO_CGROUP` would start the child inside it instead. Afterwards:
//! [`CallCgroup::counters`] reads the limit counters (v2 `memory.events` `oom_kill`, v1
//! `memory.oom_control` `oom_kill`, `pids.events` `max`), [`CallCgroup::kill`] uses `cgroup.kill` where the kernel has it, and
//! `Drop` removes the folders (bounded retries while the last members are being reaped).
//!
//! Interface files are opened with `O_CREAT | O_TRUNC`, as a shell's `>` does: cgroupfs
//! refuses to create a file it does not have (`EACCES`), so on the kernel this only opens,
//! and the same code runs unchanged on a fake root of plain folders in the tests.

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A controller confinement uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Memory,
    Pids,
}

impl Controller {
    pub fn as_str(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
        }
    }
}

/// Which cgroup interface a controller is used through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// One cgroup mount, from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub version: Version,
    /// The mount's root inside the hierarchy (not `/` under a cgroup namespace's bind mount).
    pub root: PathBuf,
    pub mount_point: PathBuf,
    /// v1: the controllers in the super options; v2: empty (read `cgroup.controllers`).
    pub controllers: Vec<String>,
}

/// One line of `/proc/self/cgroup`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// Empty for the v2 line (`0::/path`).
    pub controllers: Vec<String>,
    pub path: PathBuf,
}

/// What the host has: the cgroup mounts and where the dispatcher is in each hierarchy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Host {
    pub mounts: Vec<Mount>,
    pub memberships: Vec<Membership>,
}

/// Where one controller can be used, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub version: Version,
    /// The dispatcher's own cgroup folder in that hierarchy: the call's cgroup goes under it.
    pub parent: PathBuf,
}

/// Why a controller cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CgroupError {
    #[error(
        "no cgroup hierarchy has the {0} controller (a cgroup2 mount without it does not count)"
    )]
    NoController(&'static str),
    #[error(
        "the {controller} controller is in cgroup v2 but cannot be enabled below {parent}: {error}"
    )]
    NotDelegated {
        controller: &'static str,
        parent: PathBuf,
        error: Errno,
    },
    #[error("cannot make the call's cgroup in {parent}: {error}")]
    Create { parent: PathBuf, error: Errno },
    #[error("cannot write {file}: {error}")]
    Write { file: PathBuf, error: Errno },
}

impl CgroupError {
    /// What SPEC §13's `error.details.missing` says.
    pub fn missing(&self) -> String {
        match self {
            CgroupError::NoController(c) | CgroupError::NotDelegated { controller: c, .. } => {
                format!("cgroup_{c}")
            }
            CgroupError::Create { .. } | CgroupError::Write { .. } => "cgroup_writable".into(),
        }
    }
}

impl Host {
    /// Read `/proc/self/mountinfo` and `/proc/self/cgroup`.
    pub fn read() -> Host {
        let read = |file: &str| crate::fs::read_text(Path::new(file), MAX_PROC_FILE_BYTES);
        let mountinfo = read("/proc/self/mountinfo").unwrap_or_default();
        let cgroup = read("/proc/self/cgroup").unwrap_or_default();
        Host::parse(&mountinfo, &cgroup)
    }

    /// Parse the two files' text (anything unreadable is skipped).
    pub fn parse(mountinfo: &str, cgroup: &str) -> Host {
        let mut host = Host::default();
        for line in mountinfo.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let (Some(root), Some(point), Some(fstype)) = (left.get(3), left.get(4), right.first())
            else {
                continue;
            };
            let version = match *fstype {
                "cgroup" => Version::V1,
                "cgroup2" => Version::V2,
                _ => continue,
            };
            let controllers = match version {
                Version::V1 => right
                    .get(2)
                    .map(|o| o.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
                Version::V2 => Vec::new(),
            };
            host.mounts.push(Mount {
                version,
                root: PathBuf::from(unescape(root)),
                mount_point: PathBuf::from(unescape(point)),
                controllers,
            });
        }
        for line in cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_id), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            host.memberships.push(Membership {
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path: PathBuf::from(path),
            });
        }
        host
    }

    /// Where `controller` can be used, v2 first (SPEC §13).
    pub fn locate(&self, controller: Controller) -> Result<Location, CgroupError> {
        let name = controller.as_str();
        let mut v2_error = None;
        if let (Some(mount), Some(member)) = (
            self.mounts.iter().find(|m| m.version == Version::V2),
            self.memberships.iter().find(|m| m.controllers.is_empty()),
        ) {
            let dir = folder(mount, &member.path);
            if has_word(&dir.join("cgroup.controllers"), name) {
                match enable(&dir, name) {
                    Ok(()) => {
                        return Ok(Location {
                            version: Version::V2,
                            parent: dir,
                        })
                    }
                    Err(error) => {
                        v2_error = Some(CgroupError::NotDelegated {
                            controller: name,
                            parent: dir,
                            error,
                        })
                    }
                }
            }
        }
        let v1 = self
            .mounts
            .iter()
            .find(|m| m.version == Version::V1 && m.controllers.iter().any(|c| c == name));
        let member = self
            .memberships
            .iter()
            .find(|m| m.controllers.iter().any(|c| c == name));
        match (v1, member) {
            (Some(mount), Some(member)) => Ok(Location {
                version: Version::V1,
                parent: folder(mount, &member.path),
            }),
            _ => Err(v2_error.unwrap_or(CgroupError::NoController(name))),
        }
    }
}

/// The folder of cgroup `path` (as `/proc/self/cgroup` names it) under `mount`.
fn folder(mount: &Mount, path: &Path) -> PathBuf {
    let inside = path.strip_prefix(&mount.root).unwrap_or(path);
    let inside = inside.strip_prefix("/").unwrap_or(inside);
    mount.mount_point.join(inside)
}

/// mountinfo escapes blanks, tabs, newlines and backslashes as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let text = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The most read of one file of `/proc` (a host with thousands of mounts still fits).
const MAX_PROC_FILE_BYTES: u64 = 16 << 20;
/// The most read of one cgroup file: a list of controllers, a few `key value` lines.
const MAX_CGROUP_FILE_BYTES: u64 = 64 << 10;

fn has_word(file: &Path, word: &str) -> bool {
    crate::fs::read_text(file, MAX_CGROUP_FILE_BYTES)
        .map(|s| s.split_whitespace().any(|w| w == word))
        .unwrap_or(false)
}

/// Make sure `controller` is enabled for the children of `dir` (v2). Writing `+memory` fails
/// with `EBUSY` when `dir` itself has processes (the "no internal processes" rule): then the
/// host did not delegate a subtree to the dispatcher.
fn enable(dir: &Path, controller: &str) -> Result<(), Errno> {
    let control = dir.join("cgroup.subtree_control");
    if has_word(&control, controller) {
        return Ok(());
    }
    write_file(&control, format!("+{controller}").as_bytes())
}

fn write_file(path: &Path, value: &[u8]) -> Result<(), Errno> {
    let fd = open_write(path)?;
    rustix::io::write(&fd, value).map(|_| ())
}

fn open_write(path: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::open(
        path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o644),
    )
}

/// The limits to put on the tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
}

/// One folder of the call's cgroup (one per hierarchy used).
#[derive(Debug)]
struct Part {
    version: Version,
    controllers: Vec<Controller>,
    dir: PathBuf,
    procs: OwnedFd,
}

/// What the counters say after the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Processes the memory controller's OOM killer killed in the call's cgroup.
    pub oom_kills: Option<u64>,
    /// Times a fork was refused because the tree was at `pids.max`.
    pub pids_max_hits: Option<u64>,
}

/// The limit SPEC §13's `error.details.limit` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    Memory,
    Pids,
}

impl LimitHit {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitHit::Memory => "memory",
            LimitHit::Pids => "pids",
        }
    }
}

impl Counters {
    /// The limit that was reached, memory first (an OOM kill ends a process; a refused fork
    /// may only have been retried).
    pub fn limit_hit(&self) -> Option<LimitHit> {
        if self.oom_kills.unwrap_or(0) > 0 {
            Some(LimitHit::Memory)
        } else if self.pids_max_hits.unwrap_or(0) > 0 {
            Some(LimitHit::Pids)
        } else {
            None
        }
    }
}

/// The call's cgroup: its folders, limited, with a descriptor per folder for the child to
/// join through. Dropping it removes the folders.
#[derive(Debug)]
pub struct CallCgroup {
    parts: Vec<Part>,
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

impl CallCgroup {
    /// Locate the controllers `limits` needs on `host`, make the call's folders and write the
    /// limits (before the fork). Every controller that cannot be used is reported.
    pub fn create(host: &Host, limits: &Limits) -> Result<CallCgroup, Vec<CgroupError>> {
        let mut wanted = Vec::new();
        if limits.memory_bytes.is_some() {
            wanted.push(Controller::Memory);
        }
        if limits.pids.is_some() {
            wanted.push(Controller::Pids);
        }
        let mut errors = Vec::new();
        let mut places: Vec<(Location, Vec<Controller>)> = Vec::new();
        for controller in wanted {
            match host.locate(controller) {
                Ok(location) => match places.iter_mut().find(|(l, _)| *l == location) {
                    Some((_, list)) => list.push(controller),
                    None => places.push((location, vec![controller])),
                },
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        // Whatever was made is removed on every way out: `call` owns it from the start.
        let mut call = CallCgroup { parts: Vec::new() };
        for (location, controllers) in places {
            call.parts
                .push(make_part(&location, controllers).map_err(|e| vec![e])?);
            if let Some(part) = call.parts.last() {
                write_limits(part, limits).map_err(|e| vec![e])?;
            }
        }
        Ok(call)
    }

    /// The folders made (for diagnostics and tests).
    pub fn dirs(&self) -> Vec<&Path> {
        self.parts.iter().map(|p| p.dir.as_path()).collect()
    }

    /// Which interface each controller is used through.
    pub fn versions(&self) -> Vec<(Controller, Version)> {
        self.parts
            .iter()
            .flat_map(|p| p.controllers.iter().map(move |c| (*c, p.version)))
            .collect()
    }

    /// Move the calling process into every folder (child side: one `write` each,
    /// async-signal-safe).
    pub fn join(&self) -> Result<(), Errno> {
        for part in &self.parts {
            rustix::io::write(part.procs.as_fd(), b"0")?;
        }
        Ok(())
    }

    /// Read the limit counters (after the run).
    pub(crate) fn counters(&self) -> Counters {
        let mut counters = Counters::default();
        for part in &self.parts {
            for controller in &part.controllers {
                match (controller, part.version) {
                    (Controller::Memory, Version::V2) => {
                        counters.oom_kills = key_value(&part.dir.join("memory.events"), "oom_kill")
                    }
                    (Controller::Memory, Version::V1) => {
                        counters.oom_kills =
                            key_value(&part.dir.join("memory.oom_control"), "oom_kill")
                    }
                    (Controller::Pids, _) => {
                        counters.pids_max_hits = key_value(&part.dir.join("pids.events"), "max")
                    }
                }
            }
        }
        counters
    }

    /// Kill every process in the call's cgroup with `cgroup.kill` (cgroup v2, Linux 5.14+).
    /// Returns whether every folder had it; where one did not (cgroup v1), the kill ladder's
    /// own sweep is what ends the tree.
    pub fn kill(&self) -> bool {
        let mut all = true;
        for part in &self.parts {
            let file = part.dir.join("cgroup.kill");
            let done =
                part.version == Version::V2 && file.exists() && write_file(&file, b"1").is_ok();
            all &= done;
        }
        all
    }
}

/// The file a child writes `"0"` to, to join a folder of the call's cgroup (see the module
/// docs for why v1 uses `tasks`).
pub(crate) fn join_file(version: Version) -> &'static str {
    match version {
        Version::V1 => "tasks",
        Version::V2 => "cgroup.procs",
    }
}

/// Make one folder of the call's cgroup and open its join file; the caller owns it (and
/// removes it) from the moment this returns.
fn make_part(location: &Location, controllers: Vec<Controller>) -> Result<Part, CgroupError> {
    let dir = make_dir(&location.parent)?;
    let file = dir.join(join_file(location.version));
    match open_write(&file) {
        Ok(procs) => Ok(Part {
            version: location.version,
            controllers,
            dir,
            procs,
        }),
        Err(error) => {
            remove(&dir);
            Err(CgroupError::Write { file, error })
        }
    }
}

fn write_limits(part: &Part, limits: &Limits) -> Result<(), CgroupError> {
    let write = |name: &str, value: u64| {
        let file = part.dir.join(name);
        write_file(&file, value.to_string().as_bytes())
            .map_err(|error| CgroupError::Write { file, error })
    };
    for controller in &part.controllers {
        match (controller, part.version, limits) {
            (
                Controller::Memory,
                Version::V2,
                Limits {
                    memory_bytes: Some(b),
                    ..
                },
            ) => {
                write("memory.max", *b)?;
                // Swap would let the tree hold more than SIZE: none for the call.
                if part.dir.join("memory.swap.max").exists() {
                    write("memory.swap.max", 0)?;
                }
            }
            (
                Controller::Memory,
                Version::V1,
                Limits {
                    memory_bytes: Some(b),
                    ..
                },
            ) => {
                write("memory.limit_in_bytes", *b)?;
                // memsw (memory + swap) must not be below the memory limit: set after it.
                if part.dir.join("memory.memsw.limit_in_bytes").exists() {
                    write("memory.memsw.limit_in_bytes", *b)?;
                }
            }
            (Controller::Pids, _, Limits { pids: Some(n), .. }) => write("pids.max", *n)?,
            _ => {}
        }
    }
    Ok(())
}

fn make_dir(parent: &Path) -> Result<PathBuf, CgroupError> {
    let pid = std::process::id();
    let mut last = Errno::EXIST;
    for _ in 0..16 {
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("ptd-{pid}-{n}"));
        match rustix::fs::mkdir(&dir, Mode::from_raw_mode(0o755)) {
            Ok(()) => return Ok(dir),
            // A folder left by a dispatcher that had this pid and crashed: take the next name.
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(error) => {
                return Err(CgroupError::Create {
                    parent: parent.to_path_buf(),
                    error,
                })
            }
        }
    }
    Err(CgroupError::Create {
        parent: parent.to_path_buf(),
        error: last,
    })
}

/// `rmdir`, retried for up to 100 ms while the kernel still counts exiting members (`EBUSY`).
fn remove(dir: &Path) {
    let deadline = Instant::now() + Duration::from_millis(100);
    loop {
        match rustix::fs::rmdir(dir) {
            Err(Errno::BUSY) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => return,
        }
    }
}

impl Drop for CallCgroup {
    fn drop(&mut self) {
        for part in &self.parts {
            remove(&part.dir);
        }
    }
}

/// The number after `key` in a `key value` per line file.
fn key_value(file: &Path, key: &str) -> Option<u64> {
    let text = crate::fs::read_text(file, MAX_CGROUP_FILE_BYTES).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(char::is_whitespace)?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
30 25 0:26 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
35 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 30 0:34 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 30 0:36 /inner /sys/fs/cgroup/with\\040space rw - cgroup cgroup rw,cpu
";
    const CGROUP: &str = "\
8:pids:/
4:memory:/process_api/abc
1:cpu:/inner/x
0::/
";

    #[test]
    fn mountinfo_and_membership_are_read() {
        let host = Host::parse(MOUNTINFO, CGROUP);
        assert_eq!(host.mounts.len(), 4);
        assert_eq!(host.mounts[0].version, Version::V2);
        assert_eq!(host.mounts[1].controllers, vec!["rw", "memory"]);
        assert_eq!(
            host.mounts[3].mount_point,
            Path::new("/sys/fs/cgroup/with space")
        );
        assert_eq!(
            folder(&host.mounts[3], Path::new("/inner/x")),
            Path::new("/sys/fs/cgroup/with space/x")
        );
        assert_eq!(host.memberships[1].path, Path::new("/process_api/abc"));
        assert!(host.memberships[3].controllers.is_empty());
    }

    fn fake_v2(controllers: &str, subtree: &str) -> (tempfile::TempDir, Host) {
        let root = tempfile::tempdir().unwrap();
        let own = root.path().join("svc");
        std::fs::create_dir(&own).unwrap();
        std::fs::write(own.join("cgroup.controllers"), controllers).unwrap();
        std::fs::write(own.join("cgroup.subtree_control"), subtree).unwrap();
        let mountinfo = format!(
            "31 25 0:27 / {} rw - cgroup2 cgroup2 rw\n",
            root.path().display()
        );
        let host = Host::parse(&mountinfo, "0::/svc\n");
        (root, host)
    }

    #[test]
    fn a_cgroup2_mount_without_the_controller_does_not_count() {
        let (_root, host) = fake_v2("hugetlb", "");
        assert_eq!(
            host.locate(Controller::Memory),
            Err(CgroupError::NoController("memory"))
        );
        assert_eq!(
            CgroupError::NoController("memory").missing(),
            "cgroup_memory"
        );
    }

    #[test]
    fn v2_on_a_fake_root_writes_the_limits_and_joins_through_cgroup_procs() {
        let (root, host) = fake_v2("cpu memory pids", "memory");
        let own = root.path().join("svc");
        let limits = Limits {
            memory_bytes: Some(64 << 20),
            pids: Some(32),
        };
        let call = CallCgroup::create(&host, &limits).unwrap();
        // pids was enableable: the dispatcher wrote `+pids` to its subtree_control.
        assert_eq!(
            std::fs::read_to_string(own.join("cgroup.subtree_control")).unwrap(),
            "+pids"
        );
        assert_eq!(
            call.versions(),
            vec![
                (Controller::Memory, Version::V2),
                (Controller::Pids, Version::V2)
            ]
        );
        let dir = call.dirs()[0].to_path_buf();
        assert_eq!(dir.parent(), Some(own.as_path()));
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.max")).unwrap(),
            "67108864"
        );
        assert_eq!(std::fs::read_to_string(dir.join("pids.max")).unwrap(), "32");
        assert!(
            !dir.join("memory.swap.max").exists(),
            "absent files are not made up"
        );
        call.join().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("cgroup.procs")).unwrap(),
            "0"
        );
        // The counters the kernel would keep.
        assert_eq!(call.counters().limit_hit(), None);
        std::fs::write(
            dir.join("memory.events"),
            "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
        )
        .unwrap();
        std::fs::write(dir.join("pids.events"), "max 0\n").unwrap();
        assert_eq!(
            call.counters(),
            Counters {
                oom_kills: Some(1),
                pids_max_hits: Some(0)
            }
        );
        assert_eq!(call.counters().limit_hit(), Some(LimitHit::Memory));
        assert!(!call.kill(), "no cgroup.kill file: not killed through it");
        std::fs::write(dir.join("cgroup.kill"), "").unwrap();
        assert!(call.kill());
        assert_eq!(
            std::fs::read_to_string(dir.join("cgroup.kill")).unwrap(),
            "1"
        );
    }

    #[test]
    fn key_value_reads_one_counter() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.oom_control");
        std::fs::write(&file, "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n").unwrap();
        assert_eq!(key_value(&file, "oom_kill"), Some(7));
        assert_eq!(key_value(&file, "missing"), None);
    }
}
