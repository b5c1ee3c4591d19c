//! The compiled-policy cache: a root dispatcher's main job loads a policy file it has already
//! checked whole without reading or parsing it again: reading back what was checked costs a
//! small part of checking it again, and docs/PERFORMANCE.md ("The host policy") has the
//! figures that keep this path.
//!
//! **When.** Only for a dispatcher running as root, with a policy file owned by root in a
//! folder only root may write (so only root can change the file or the cache), and only in the
//! main job: `policy check` always checks everything. Anything else loads the file whole,
//! every time.
//!
//! **Where.** [`CACHE_DIR`], on `/run` (memory), a folder root owns with mode 0700: a
//! confined adapter never runs as root (SPEC §13.2) and cannot reach it; a folder of any other
//! owner or mode is not used. One file per policy path named (a digest of the path), holding
//! the [compiled](Compiled) policy (postcard) and what it was made for; each is replaced
//! atomically, and a store removes the entries too old to be read again.
//!
//! **What an entry is for**, compared as it is: the policy file's identity as `stat(2)` gives
//! it (device, inode, size, mode, owner, and the modification and change times to the
//! nanosecond: any write or `chmod` changes them), the path it was named by, the command
//! line's `--ledger`, `PATH`, and this dispatcher's own executable (another build, another
//! entry). A file changed less than [`SETTLE`] before it was loaded is not stored (two writes
//! within one tick of the file system's clock could keep its times), so it is loaded whole
//! until it settles. What the host's state adds — a grant path or the run-as user that
//! existed, an adapter program found on `PATH` — is checked whole again when the entry is
//! older than [`MAX_AGE`]; the deciding entry's confinement is always checked again for its
//! call (`Options::parse`), and its program found again when it starts.
//!
//! Any failure of the cache (no `/run`, a full disk, a damaged entry) only means a whole load:
//! nothing is ever refused because of it.

use crate::compiled::Compiled;
use crate::load::{check_read, read_policy, writers_problems, LoadContext};
use crate::problem::Problem;
use ptd_wire::envelope::canonical::sha256_hex;
use rustix::fs::Stat;
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The root dispatcher's policy cache folder.
pub const CACHE_DIR: &str = "/run/parent-tool-dispatch/policy";

/// How long a cached policy stands before the file is checked whole again.
pub const MAX_AGE: Duration = Duration::from_secs(60);

/// How long a policy file must have stood unchanged before its load is stored.
pub const SETTLE: Duration = Duration::from_secs(2);

/// The largest cache entry read back (a policy of at most 1 MiB never compiles to more).
const MAX_ENTRY_BYTES: u64 = 16 << 20;

/// The format of an entry.
const FORMAT: &str = "parent-tool-dispatch/policy-cache/v8";

/// A file's identity as far as a change to it shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FileId {
    dev: u64,
    ino: u64,
    size: i64,
    mode: u32,
    uid: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileId {
    fn of(st: &Stat) -> FileId {
        FileId {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            mode: st.st_mode,
            uid: st.st_uid,
            mtime: (st.st_mtime, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime, st.st_ctime_nsec as i64),
        }
    }

    /// When the file last changed (its change time), if that is a time.
    fn changed(&self) -> Option<SystemTime> {
        time_of(self.ctime.0, self.ctime.1)
    }
}

fn time_of(secs: i64, nanos: i64) -> Option<SystemTime> {
    let secs = u64::try_from(secs).ok()?;
    let nanos = u32::try_from(nanos).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

/// One cache entry (postcard-encoded: the fewest bytes to read back, docs/PERFORMANCE.md):
/// what the load depended on, compared as it is, and its result.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    format: String,
    /// The dispatcher's executable ([`executable`]).
    executable: String,
    /// The policy file's identity.
    file: FileId,
    /// The policy's path as named, `--ledger`, and `PATH`, as bytes.
    path: Vec<u8>,
    ledger: Vec<u8>,
    search_path: Vec<u8>,
    /// The policy; its encoded entries follow the entry in the file, as they are.
    policy: Compiled,
}

/// What a load depends on besides the file's identity.
struct Made<'a> {
    executable: String,
    path: &'a [u8],
    ledger: &'a [u8],
    search_path: &'a [u8],
}

impl<'a> Made<'a> {
    fn of(path: &'a Path, cx: &'a LoadContext) -> Made<'a> {
        Made {
            executable: executable(),
            path: path.as_os_str().as_bytes(),
            ledger: cx
                .ledger
                .as_deref()
                .map_or(b"", |l| l.as_os_str().as_bytes()),
            search_path: cx.path.as_deref().map_or(b"", OsStr::as_bytes),
        }
    }

    fn entry(&self, file: FileId, policy: Compiled) -> Entry {
        Entry {
            format: FORMAT.to_string(),
            executable: self.executable.clone(),
            file,
            path: self.path.to_vec(),
            ledger: self.ledger.to_vec(),
            search_path: self.search_path.to_vec(),
            policy,
        }
    }

    fn matches(&self, entry: &Entry, file: &FileId) -> bool {
        entry.format == FORMAT
            && entry.file == *file
            && entry.path == self.path
            && entry.ledger == self.ledger
            && entry.search_path == self.search_path
            && entry.executable == self.executable
    }
}

/// [`crate::load`] for the main job, [compiled](Compiled): the same policy, or the same
/// problems, read back from [`CACHE_DIR`] when the cache may be used and holds it. With
/// `cx.bridge_timeout_ms` set it is never used (the main job checks the bridge's timeout
/// afterwards, `Compiled::above_bridge`).
pub fn load_cached(path: &Path, cx: &LoadContext) -> Result<Compiled, Vec<Problem>> {
    let euid = rustix::process::geteuid().as_raw();
    load_cached_in(path, cx, Path::new(CACHE_DIR), euid, SETTLE)
}

/// Whether a policy file of this status may be cached for a dispatcher of `euid`.
fn cacheable(path: &Path, st: &Stat, cx: &LoadContext, euid: u32) -> bool {
    euid == 0
        && st.st_uid == 0
        && cx.bridge_timeout_ms.is_none()
        && rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
        && writers_problems(path, st, euid).is_empty()
}

/// [`load_cached`] with the folder, the user and [`SETTLE`] given (for the tests).
pub(crate) fn load_cached_in(
    path: &Path,
    cx: &LoadContext,
    dir: &Path,
    euid: u32,
    settle: Duration,
) -> Result<Compiled, Vec<Problem>> {
    let whole = || {
        let (bytes, status) = read_policy(path)?;
        check_read(path, &bytes, &status, cx, euid).map(|p| (p.compile(), status))
    };
    let looked = rustix::fs::stat(path).ok();
    let Some(st) = looked.filter(|st| cacheable(path, st, cx, euid)) else {
        return whole().map(|(policy, _)| policy);
    };
    let made = Made::of(path, cx);
    let file = FileId::of(&st);
    let name = entry_name(path);
    if let Some(policy) = read_entry(dir, &name, &made, &file) {
        return Ok(policy);
    }
    let (policy, status) = whole()?;
    // Stored only for the file that was read, once it has settled.
    let read = FileId::of(&status);
    let settled = read
        .changed()
        .and_then(|t| SystemTime::now().duration_since(t).ok());
    if read == file && settled.is_some_and(|age| age >= settle) {
        write_entry(dir, &name, &made.entry(file, policy.clone()));
    }
    Ok(policy)
}

/// This executable's identity: device, inode, size and modification time, or nothing.
fn executable() -> String {
    match rustix::fs::stat("/proc/self/exe") {
        Ok(st) => format!(
            "{}:{}:{}:{}.{}",
            st.st_dev, st.st_ino, st.st_size, st.st_mtime, st.st_mtime_nsec
        ),
        Err(_) => String::new(),
    }
}

/// The entry's file name for the policy named `path`.
fn entry_name(path: &Path) -> PathBuf {
    let digest = sha256_hex(path.as_os_str().as_bytes());
    PathBuf::from(format!("{}.policy", &digest[..32]))
}

/// The cached policy for the file `file`, when the folder and the entry are root's own, the
/// entry is younger than [`MAX_AGE`] and was made for this load.
fn read_entry(dir: &Path, name: &Path, made: &Made<'_>, file: &FileId) -> Option<Compiled> {
    if !own_folder(dir) {
        return None;
    }
    let (mut bytes, status) =
        ptd_sys::fs::read_file_with_status(&dir.join(name), MAX_ENTRY_BYTES).ok()?;
    if status.st_uid != 0 || status.st_mode & 0o077 != 0 {
        return None;
    }
    let stored = time_of(status.st_mtime, status.st_mtime_nsec as i64)?;
    let age = SystemTime::now().duration_since(stored).ok()?;
    if age > MAX_AGE {
        return None;
    }
    let (entry, rest): (Entry, &[u8]) = postcard::take_from_bytes(&bytes).ok()?;
    if !made.matches(&entry, file) {
        return None;
    }
    // The encoded entries follow: moved to the front of the same buffer, not copied.
    let header = bytes.len() - rest.len();
    bytes.drain(..header);
    entry.policy.with_entries(bytes)
}

/// Whether `dir` is a folder root owns, mode 0700 (no bit for anyone else).
fn own_folder(dir: &Path) -> bool {
    match rustix::fs::lstat(dir) {
        Ok(st) => {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
                && st.st_uid == 0
                && st.st_mode & 0o077 == 0
        }
        Err(_) => false,
    }
}

/// Store `entry`, best effort: the folder made 0700 when missing, the entry replaced
/// atomically (0600); then [`sweep`].
fn write_entry(dir: &Path, name: &Path, entry: &Entry) {
    if !dir.exists() {
        let _ = ptd_sys::fs::create_dir_all(dir, rustix::fs::Mode::from_raw_mode(0o700));
    }
    if !own_folder(dir) {
        return;
    }
    if let Ok(mut bytes) = postcard::to_allocvec(entry) {
        bytes.extend_from_slice(entry.policy.entries());
        let _ = ptd_sys::fs::write_atomic(&dir.join(name), &bytes);
    }
    sweep(dir);
}

/// The most entries one sweep looks at.
const SWEEP_MAX: usize = 4096;

/// Remove the entries older than [`MAX_AGE`] (never read again), so that the folder holds only
/// what the last minute's loads stored, however many policy paths were used.
fn sweep(dir: &Path) {
    use std::os::fd::AsFd;
    let Ok(fd) = ptd_sys::fs::open_dir_path(dir) else {
        return;
    };
    let Ok((entries, _)) = ptd_sys::fs::list_dir(fd.as_fd(), SWEEP_MAX) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries {
        let Ok(name) = ptd_sys::fs::cstring(&entry.name) else {
            continue;
        };
        let Ok(status) = ptd_sys::fs::lstat_at(fd.as_fd(), &name) else {
            continue;
        };
        let made = u64::try_from(status.st_mtime)
            .map(|secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let stale = now.duration_since(made).is_ok_and(|age| age > MAX_AGE);
        if stale && entry.name.ends_with(b".policy") {
            let _ = ptd_sys::fs::unlink_at(fd.as_fd(), &name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A root-owned cache folder (0700) and a policy file in a folder of its own.
    struct Setup {
        _root: tempfile::TempDir,
        cache: PathBuf,
        file: PathBuf,
    }

    fn setup(text: &str) -> Option<Setup> {
        if let Err(unmet) = ptd_sys::skip::root() {
            ptd_sys::skip::report(&unmet);
            return None;
        }
        let root = tempfile::tempdir().unwrap();
        let cache = root.path().join("cache");
        let file = root.path().join("policy.toml");
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        Some(Setup {
            _root: root,
            cache,
            file,
        })
    }

    fn cx() -> LoadContext {
        LoadContext {
            path: Some("/usr/bin:/bin".into()),
            ..LoadContext::default()
        }
    }

    fn entry_path(s: &Setup) -> PathBuf {
        s.cache.join(entry_name(&s.file))
    }

    /// Replace the stored entry by `policy` under the key it has, keeping its age.
    fn plant(s: &Setup, edit: impl FnOnce(&mut Compiled)) {
        let bytes = std::fs::read(entry_path(s)).unwrap();
        let (mut entry, rest): (Entry, &[u8]) = postcard::take_from_bytes(&bytes).unwrap();
        edit(&mut entry.policy);
        let mut out = postcard::to_allocvec(&entry).unwrap();
        out.extend_from_slice(rest);
        std::fs::write(entry_path(s), out).unwrap();
    }

    fn nine(p: &mut Compiled) {
        p.defaults.limit_pids = Some(9);
    }

    const TEXT: &str = "version = 1\n[defaults]\nlimit_pids = 8\n[[tool]]\nmatch = \"a.*\"\n";

    #[test]
    fn a_checked_policy_is_read_back_the_same_and_a_change_is_checked_again() {
        let Some(s) = setup(TEXT) else { return };
        let first = load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap();
        assert_eq!(first, crate::load(&s.file, &cx()).unwrap().compile());
        // Stored: the folder 0700, the entry 0600.
        let dir_mode = std::fs::metadata(&s.cache).unwrap().permissions().mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        let entry = std::fs::metadata(entry_path(&s)).unwrap();
        assert_eq!(entry.permissions().mode() & 0o777, 0o600);
        // Read back without parsing: the stored entry is edited to prove it is what is read.
        assert_eq!(
            load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap(),
            first
        );
        plant(&s, nine);
        let again = load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap();
        assert_eq!(again.defaults.limit_pids, Some(9));
        // The file changes: checked whole again, and stored again.
        std::fs::write(&s.file, TEXT.replace("= 8", "= 7")).unwrap();
        let changed = load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap();
        assert_eq!(changed.defaults.limit_pids, Some(7));
        assert_eq!(
            load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap(),
            changed
        );
    }

    #[test]
    fn problems_are_never_cached() {
        let Some(s) = setup("version = 1\n[defaults]\nlimit_pids = 0\n") else {
            return;
        };
        let want = crate::load(&s.file, &cx()).unwrap_err();
        for _ in 0..2 {
            assert_eq!(
                load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap_err(),
                want
            );
        }
        assert!(!entry_path(&s).exists());
        // A file others may write is refused whatever the cache holds.
        std::fs::write(&s.file, TEXT).unwrap();
        load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap();
        std::fs::set_permissions(&s.file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let refused = load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap_err();
        assert!(
            refused[0].message.contains("writable by others"),
            "{refused:?}"
        );
    }

    #[test]
    fn an_entry_for_another_key_or_too_old_or_not_roots_own_is_not_used() {
        let Some(s) = setup(TEXT) else { return };
        load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap();
        plant(&s, nine);
        let tampered = std::fs::read(entry_path(&s)).unwrap();
        let reads_nine = |s: &Setup| {
            load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO)
                .unwrap()
                .defaults
                .limit_pids
                == Some(9)
        };
        // Another context (here PATH) is another key.
        let other = LoadContext {
            path: Some("/bin".into()),
            ..cx()
        };
        assert_eq!(
            load_cached_in(&s.file, &other, &s.cache, 0, Duration::ZERO)
                .unwrap()
                .defaults
                .limit_pids,
            Some(8)
        );
        // Older than MAX_AGE: checked whole again.
        std::fs::write(entry_path(&s), &tampered).unwrap();
        assert!(reads_nine(&s));
        let old = SystemTime::now() - MAX_AGE - Duration::from_secs(5);
        let file = std::fs::File::options()
            .write(true)
            .open(entry_path(&s))
            .unwrap();
        file.set_modified(old).unwrap();
        assert!(!reads_nine(&s));
        // An entry others could have written, or in a folder others may enter: not used.
        std::fs::write(entry_path(&s), &tampered).unwrap();
        std::fs::set_permissions(entry_path(&s), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(!reads_nine(&s));
        std::fs::write(entry_path(&s), &tampered).unwrap();
        std::fs::set_permissions(entry_path(&s), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(reads_nine(&s));
        // Cut short, or with bytes after its entries: damaged, not used.
        let cut = &tampered[..tampered.len() - 3];
        std::fs::write(entry_path(&s), cut).unwrap();
        assert!(!reads_nine(&s));
        std::fs::write(entry_path(&s), [&tampered[..], b"xyz"].concat()).unwrap();
        assert!(!reads_nine(&s));
        std::fs::write(entry_path(&s), &tampered).unwrap();
        assert!(reads_nine(&s));
        std::fs::set_permissions(&s.cache, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(!reads_nine(&s));
    }

    #[test]
    fn a_store_sweeps_away_what_is_too_old_to_be_read() {
        let Some(s) = setup(TEXT) else { return };
        load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap();
        let old = SystemTime::now() - MAX_AGE - Duration::from_secs(5);
        for name in ["0123.policy", "4567.policy", "keep.txt"] {
            let path = s.cache.join(name);
            std::fs::write(&path, b"x").unwrap();
            if name != "4567.policy" {
                std::fs::File::options()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_modified(old)
                    .unwrap();
            }
        }
        // A change makes the next load store again, and sweep.
        std::fs::write(&s.file, TEXT.replace("= 8", "= 6")).unwrap();
        load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap();
        assert!(!s.cache.join("0123.policy").exists());
        assert!(s.cache.join("4567.policy").exists());
        assert!(s.cache.join("keep.txt").exists());
        assert!(entry_path(&s).exists());
    }

    #[test]
    fn a_file_that_changed_just_now_is_not_stored() {
        let Some(s) = setup(TEXT) else { return };
        load_cached_in(&s.file, &cx(), &s.cache, 0, SETTLE).unwrap();
        assert!(!entry_path(&s).exists());
        load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap();
        assert!(entry_path(&s).exists());
        // A chmod changes the file's identity too: the entry is not used.
        plant(&s, nine);
        std::fs::set_permissions(&s.file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let again = load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).unwrap();
        assert_eq!(again.defaults.limit_pids, Some(8));
    }

    #[test]
    fn only_root_with_roots_file_uses_the_cache() {
        let Some(s) = setup(TEXT) else { return };
        // A dispatcher of another user: root's file is trusted, loaded whole, not stored.
        load_cached_in(&s.file, &cx(), &s.cache, 1000, Duration::ZERO).unwrap();
        assert!(!s.cache.exists());
        // A file of another owner: loaded whole (and refused), nothing stored.
        rustix::fs::chown(
            &s.file,
            Some(rustix::fs::Uid::from_raw(65534)),
            Some(rustix::fs::Gid::from_raw(65534)),
        )
        .unwrap();
        assert!(load_cached_in(&s.file, &cx(), &s.cache, 0, Duration::ZERO).is_err());
        assert!(!s.cache.exists());
        // With the bridge's timeout in the context (`policy check`): never cached.
        rustix::fs::chown(
            &s.file,
            Some(rustix::fs::Uid::from_raw(0)),
            Some(rustix::fs::Gid::from_raw(0)),
        )
        .unwrap();
        let with_bridge = LoadContext {
            bridge_timeout_ms: Some(30_000),
            ..cx()
        };
        load_cached_in(&s.file, &with_bridge, &s.cache, 0, Duration::ZERO).unwrap();
        assert!(!s.cache.exists());
    }
}
