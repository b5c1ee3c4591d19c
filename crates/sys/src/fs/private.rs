//! A private folder: created 0700, filled with 0600 files, read without trusting what someone
//! else (an adapter of the same uid) left in it, and removed within a budget.

use super::at::{
    cstring, kind, lstat_at, mkdir_at, open_at, open_dir_at, open_dir_path, rmdir_at, set_mode,
    unlink_at,
};
use super::{retry, ReadError};
use rustix::fs::{FileType, Mode, OFlags};
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Mode of the folder, whatever the umask.
const DIR_MODE: Mode = Mode::from_raw_mode(0o700);
/// Mode of the files [`PrivateDir::write_file`] creates, whatever the umask.
const FILE_MODE: Mode = Mode::from_raw_mode(0o600);
/// Names tried before giving up; a clash means a leftover or a name someone planted.
const CREATE_ATTEMPTS: u32 = 64;
/// Directories below the folder that [`PrivateDir::remove`] enters; deeper ones are left.
pub const MAX_CLEANUP_DEPTH: usize = 32;

/// How much work removing a folder may take. Whatever is left when it runs out stays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Wall-clock time for the whole removal.
    pub time: Duration,
    /// Directory entries looked at (each file, link and directory counts once per attempt).
    pub entries: usize,
}

impl Default for Budget {
    /// 2 s and 10 000 entries: far more than a well-behaved user of the folder leaves, and
    /// little enough that a hostile one cannot hold the process (~490 000 hard links took 4 s).
    fn default() -> Budget {
        Budget {
            time: Duration::from_secs(2),
            entries: 10_000,
        }
    }
}

/// Why [`PrivateDir::remove`] left something behind. Messages never name a host path: the
/// caller, who knows which folder it was, says so.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    /// The time budget ran out.
    #[error("the cleanup's time budget of {budget_ms} ms ran out after {removed} entries")]
    OutOfTime { budget_ms: u128, removed: usize },
    /// The entry budget ran out.
    #[error("the cleanup's budget of {limit} entries ran out")]
    TooManyEntries { limit: usize },
    /// A directory is nested deeper than [`MAX_CLEANUP_DEPTH`].
    #[error("it holds directories nested deeper than {0} levels")]
    TooDeep(usize),
    /// The folder's name no longer names the folder (it was renamed or replaced).
    #[error("the folder was moved or replaced; it is left where it is")]
    Moved,
    /// A system call failed.
    #[error("{action}: {source}")]
    Io {
        action: &'static str,
        #[source]
        source: io::Error,
    },
}

fn io_err(action: &'static str) -> impl FnOnce(io::Error) -> CleanupError {
    move |source| CleanupError::Io { action, source }
}

/// What [`PrivateDir::read_regular`] found under a name.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadRegular {
    /// Nothing by that name.
    Missing,
    /// Something that is not a regular file (a symlink is reported as one, not followed).
    NotRegular(FileType),
    /// A regular file longer than the cap.
    TooLarge,
    /// A regular file's bytes, at most the cap.
    Bytes(Vec<u8>),
}

/// A fresh folder only this user can enter. Dropped without [`PrivateDir::remove`], it removes
/// itself within [`Budget::default`] and stays silent about what it could not remove.
#[derive(Debug)]
pub struct PrivateDir {
    /// Absolute host path, to hand to someone who needs one (an adapter) and to name in a
    /// warning; never used to reach the folder.
    path: PathBuf,
    parent: OwnedFd,
    name: CString,
    dir: OwnedFd,
    /// `(st_dev, st_ino)`: the final `rmdir` by name removes this folder and no other.
    id: (u64, u64),
    removed: bool,
}

impl PrivateDir {
    /// Create `<prefix><16 hex>` in the host directory `parent` (the operator's temp dir: a
    /// relative path is taken against the working directory, symlinks in it are followed),
    /// mode exactly 0700 whatever the umask, checked to be a directory owned by this process's
    /// effective uid.
    pub fn create_in(parent: &Path, prefix: &str) -> io::Result<PrivateDir> {
        let parent_path = std::path::absolute(parent)?;
        let parent_fd = open_dir_path(&parent_path)?;
        for _ in 0..CREATE_ATTEMPTS {
            let name = format!("{prefix}{:016x}", random_u64());
            let cname = cstring(name.as_bytes())?;
            match mkdir_at(parent_fd.as_fd(), &cname, DIR_MODE) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            let made = open_dir_at(parent_fd.as_fd(), &cname).and_then(|dir| {
                // mkdir's mode went through the umask, which may have taken owner bits away.
                set_mode(dir.as_fd(), DIR_MODE)?;
                let st = retry(|| rustix::fs::fstat(&dir))?;
                let owner = rustix::process::geteuid().as_raw();
                if kind(&st) != FileType::Directory || st.st_uid != owner {
                    return Err(io::Error::from(rustix::io::Errno::PERM));
                }
                Ok((dir, identity(&st)))
            });
            return match made {
                Ok((dir, id)) => Ok(PrivateDir {
                    path: parent_path.join(&name),
                    parent: parent_fd,
                    name: cname,
                    dir,
                    id,
                    removed: false,
                }),
                Err(e) => {
                    let _ = rmdir_at(parent_fd.as_fd(), &cname);
                    Err(e)
                }
            };
        }
        Err(rustix::io::Errno::EXIST.into())
    }

    /// The folder's absolute host path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder's handle.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// Create the file `name` (`O_EXCL | O_NOFOLLOW`: never an existing one, never through a
    /// link) with exactly mode 0600, write `bytes` and fsync it.
    pub fn write_file(&self, name: &CStr, bytes: &[u8]) -> io::Result<()> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        let file = File::from(open_at(self.fd(), name, flags, FILE_MODE)?);
        set_mode(file.as_fd(), FILE_MODE)?;
        (&file).write_all(bytes)?;
        file.sync_all()
    }

    /// Read the file `name` if it is a regular file, at most `max_bytes` of it. Never blocks on
    /// what was left there: the entry is looked at first (`AT_SYMLINK_NOFOLLOW`), and only a
    /// regular file is opened, with `O_NONBLOCK | O_NOFOLLOW | O_NOCTTY` so that whatever is
    /// swapped in meanwhile can neither block the open, nor be followed, nor become a
    /// terminal; what was opened is checked again with `fstat`. At most `max_bytes + 1` bytes
    /// are read. The file's mode is not looked at.
    pub fn read_regular(&self, name: &CStr, max_bytes: usize) -> io::Result<ReadRegular> {
        match lstat_at(self.fd(), name) {
            Ok(st) if kind(&st) != FileType::RegularFile => {
                return Ok(ReadRegular::NotRegular(kind(&st)))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ReadRegular::Missing),
            Err(e) => return Err(e),
        }
        let cap = u64::try_from(max_bytes).unwrap_or(u64::MAX);
        match super::read_file_at(self.fd(), name, OFlags::NOFOLLOW, cap) {
            Ok(bytes) => Ok(ReadRegular::Bytes(bytes)),
            Err(ReadError::NotRegular(found)) => Ok(ReadRegular::NotRegular(found)),
            Err(ReadError::TooLarge { .. }) => Ok(ReadRegular::TooLarge),
            Err(ReadError::Io(e)) => {
                // Swapped since the look: say what is there now, if it is not a regular file.
                match lstat_at(self.fd(), name) {
                    Ok(st) if kind(&st) != FileType::RegularFile => {
                        Ok(ReadRegular::NotRegular(kind(&st)))
                    }
                    Err(now) if now.kind() == io::ErrorKind::NotFound => Ok(ReadRegular::Missing),
                    _ => Err(e),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Remove the folder and everything in it — subdirectories included, symlinks removed and
    /// never followed, directories left without write permission made writable first — within
    /// `budget`. When the budget runs out, what is left stays and the error says why.
    pub fn remove(mut self, budget: Budget) -> Result<(), CleanupError> {
        self.remove_within(budget)
    }

    fn remove_within(&mut self, budget: Budget) -> Result<(), CleanupError> {
        self.removed = true;
        // The folder's user may have taken away the bits its entries' removal needs.
        let _ = set_mode(self.dir.as_fd(), DIR_MODE);
        let mut sweep = Sweep {
            deadline: Instant::now() + budget.time,
            budget,
            left: budget.entries,
            removed: 0,
        };
        sweep.clear(self.dir.as_fd(), 0)?;
        match lstat_at(self.parent.as_fd(), &self.name) {
            Ok(st) if identity(&st) == self.id => rmdir_at(self.parent.as_fd(), &self.name)
                .map_err(io_err("cannot remove the folder")),
            Ok(_) => Err(CleanupError::Moved),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(CleanupError::Moved),
            Err(e) => Err(CleanupError::Io {
                action: "cannot inspect the folder",
                source: e,
            }),
        }
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if !self.removed {
            let _ = self.remove_within(Budget::default());
        }
    }
}

/// A removal in progress: what is left of the budget.
struct Sweep {
    deadline: Instant,
    budget: Budget,
    left: usize,
    removed: usize,
}

impl Sweep {
    /// Pay for looking at one more entry, or stop.
    fn charge(&mut self) -> Result<(), CleanupError> {
        if self.left == 0 {
            return Err(CleanupError::TooManyEntries {
                limit: self.budget.entries,
            });
        }
        if Instant::now() >= self.deadline {
            return Err(CleanupError::OutOfTime {
                budget_ms: self.budget.time.as_millis(),
                removed: self.removed,
            });
        }
        self.left -= 1;
        Ok(())
    }

    /// Empty `dir`. Removing entries while reading the listing is fine (entries present
    /// throughout are listed once); a pass that finds nothing proves the directory empty, and
    /// every entry a pass finds is paid for, so the loop ends within the budget.
    fn clear(&mut self, dir: BorrowedFd<'_>, depth: usize) -> Result<(), CleanupError> {
        loop {
            let stream = retry(|| rustix::fs::Dir::read_from(dir))
                .map_err(io_err("cannot list a folder"))?;
            let mut seen = false;
            for entry in stream {
                let entry = entry
                    .map_err(io::Error::from)
                    .map_err(io_err("cannot list a folder"))?;
                let name = entry.file_name();
                if name == c"." || name == c".." {
                    continue;
                }
                seen = true;
                self.charge()?;
                self.remove_entry(dir, name, entry.file_type(), depth)?;
            }
            if !seen {
                return Ok(());
            }
        }
    }

    fn remove_entry(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &CStr,
        kind: FileType,
        depth: usize,
    ) -> Result<(), CleanupError> {
        if kind != FileType::Directory {
            match unlink_at(dir, name) {
                Ok(()) => {
                    self.removed += 1;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                // A directory after all (no d_type, or swapped in since the listing); Linux
                // says EISDIR, POSIX allows EPERM.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EISDIR | libc::EPERM)) => {}
                Err(e) => return Err(io_err("cannot remove an entry")(e)),
            }
        }
        if depth >= MAX_CLEANUP_DEPTH {
            return Err(CleanupError::TooDeep(MAX_CLEANUP_DEPTH));
        }
        let sub = match open_dir_at(dir, name) {
            Ok(sub) => sub,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            // No longer a directory (a symlink swapped in, say): removed, never entered.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
                return match unlink_at(dir, name) {
                    Ok(()) => {
                        self.removed += 1;
                        Ok(())
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(io_err("cannot remove an entry")(e)),
                };
            }
            Err(e) => return Err(io_err("cannot open a subfolder")(e)),
        };
        // Ours (same uid): a 0500 or 0000 directory gets back the bits emptying it needs.
        let _ = set_mode(sub.as_fd(), DIR_MODE);
        self.clear(sub.as_fd(), depth + 1)?;
        drop(sub);
        match rmdir_at(dir, name) {
            Ok(()) => {
                self.removed += 1;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("cannot remove a subfolder")(e)),
        }
    }
}

/// `(st_dev, st_ino)`: which file this is, whatever its name.
// The fields' types differ between platforms (u64 here, i32/u32 on others).
#[allow(clippy::unnecessary_cast)]
fn identity(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// 64 bits nobody can guess in advance: `RandomState` is seeded from the OS, and the keyed hash
/// of a clock and a counter varies per call. For names nobody should plant first (the `mkdir`
/// of a private folder is exclusive either way) and a DNS query's id.
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::test_support::{entries, mode};
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn private() -> (tempfile::TempDir, PrivateDir) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = PrivateDir::create_in(tmp.path(), "ptd-test-").unwrap();
        (tmp, dir)
    }

    #[test]
    fn create_in_makes_a_fresh_0700_folder_and_write_file_a_0600_file() {
        let (tmp, dir) = private();
        let other = PrivateDir::create_in(tmp.path(), "ptd-test-").unwrap();
        assert_ne!(dir.path(), other.path());
        assert!(dir.path().starts_with(tmp.path()));
        assert!(dir
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("ptd-test-"));
        assert_eq!(mode(dir.path()), 0o700);
        dir.write_file(c"request.json", b"{}").unwrap();
        assert_eq!(mode(&dir.path().join("request.json")), 0o600);
        assert_eq!(
            std::fs::read(dir.path().join("request.json")).unwrap(),
            b"{}"
        );
        // Never over an existing file.
        let err = dir.write_file(c"request.json", b"again").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    }

    #[test]
    fn write_file_never_writes_through_a_symlink() {
        let (tmp, dir) = private();
        let target = tmp.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        symlink(&target, dir.path().join("request.json")).unwrap();
        assert!(dir.write_file(c"request.json", b"evil").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    }

    #[test]
    fn read_regular_reads_up_to_the_cap() {
        let (_tmp, dir) = private();
        assert_eq!(dir.read_regular(c"r", 10).unwrap(), ReadRegular::Missing);
        std::fs::write(dir.path().join("r"), "0123456789").unwrap();
        assert_eq!(
            dir.read_regular(c"r", 10).unwrap(),
            ReadRegular::Bytes(b"0123456789".to_vec())
        );
        assert_eq!(dir.read_regular(c"r", 9).unwrap(), ReadRegular::TooLarge);
        // The mode is not the dispatcher's business: a 0644 or 0400 file reads the same.
        std::fs::set_permissions(dir.path().join("r"), std::fs::Permissions::from_mode(0o444))
            .unwrap();
        assert!(matches!(
            dir.read_regular(c"r", 10).unwrap(),
            ReadRegular::Bytes(_)
        ));
    }

    #[test]
    fn read_regular_refuses_a_fifo_without_blocking() {
        let (_tmp, dir) = private();
        rustix::fs::mknodat(
            dir.fd(),
            c"r",
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let started = Instant::now();
        assert_eq!(
            dir.read_regular(c"r", 10).unwrap(),
            ReadRegular::NotRegular(FileType::Fifo)
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn read_regular_refuses_symlinks_directories_and_sockets() {
        let (tmp, dir) = private();
        let target = tmp.path().join("target");
        std::fs::write(&target, "{}").unwrap();
        symlink(&target, dir.path().join("link")).unwrap();
        symlink("/dev/zero", dir.path().join("zero")).unwrap();
        std::fs::create_dir(dir.path().join("dir")).unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
        for (name, kind) in [
            (c"link", FileType::Symlink),
            (c"zero", FileType::Symlink),
            (c"dir", FileType::Directory),
            (c"sock", FileType::Socket),
        ] {
            assert_eq!(
                dir.read_regular(name, 10).unwrap(),
                ReadRegular::NotRegular(kind),
                "{name:?}"
            );
        }
    }

    #[test]
    fn remove_takes_subfolders_and_never_follows_a_symlink() {
        let (tmp, dir) = private();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "keep").unwrap();
        let p = dir.path().to_path_buf();
        std::fs::create_dir_all(p.join("a/b/c")).unwrap();
        std::fs::write(p.join("a/b/c/f"), "x").unwrap();
        symlink(&outside, p.join("a/link")).unwrap();
        symlink(&outside, p.join("top-link")).unwrap();
        std::fs::create_dir(p.join("locked")).unwrap();
        std::fs::write(p.join("locked/f"), "x").unwrap();
        std::fs::set_permissions(p.join("locked"), std::fs::Permissions::from_mode(0o500)).unwrap();
        rustix::fs::mknodat(
            dir.fd(),
            c"fifo",
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        // The folder itself made unwritable by its user.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o500)).unwrap();
        dir.remove(Budget::default()).unwrap();
        assert!(!p.exists());
        assert!(entries(&outside).iter().eq(["keep"]));
        assert!(entries(tmp.path()).iter().eq(["outside"]));
    }

    #[test]
    fn remove_stops_when_the_entry_budget_runs_out_and_leaves_the_rest() {
        let (_tmp, dir) = private();
        let p = dir.path().to_path_buf();
        for i in 0..50 {
            std::fs::write(p.join(format!("f{i}")), "x").unwrap();
        }
        let budget = Budget {
            time: Duration::from_secs(60),
            entries: 20,
        };
        let err = dir.remove(budget).unwrap_err();
        assert!(
            matches!(err, CleanupError::TooManyEntries { limit: 20 }),
            "{err}"
        );
        assert_eq!(entries(&p).len(), 30);
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn remove_stops_when_the_time_budget_runs_out() {
        let (_tmp, dir) = private();
        let p = dir.path().to_path_buf();
        std::fs::write(p.join("f"), "x").unwrap();
        let budget = Budget {
            time: Duration::ZERO,
            entries: 1000,
        };
        let err = dir.remove(budget).unwrap_err();
        assert!(
            matches!(err, CleanupError::OutOfTime { removed: 0, .. }),
            "{err}"
        );
        assert!(p.join("f").exists());
        assert!(!err.to_string().contains(p.to_str().unwrap()));
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn remove_leaves_directories_nested_too_deep() {
        let (_tmp, dir) = private();
        let p = dir.path().to_path_buf();
        let deep: PathBuf = (0..=MAX_CLEANUP_DEPTH).map(|_| "d").collect();
        std::fs::create_dir_all(p.join(&deep)).unwrap();
        let err = dir.remove(Budget::default()).unwrap_err();
        assert!(
            matches!(err, CleanupError::TooDeep(MAX_CLEANUP_DEPTH)),
            "{err}"
        );
        assert!(p.exists());
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn remove_does_not_take_a_folder_that_replaced_it() {
        let (tmp, dir) = private();
        let p = dir.path().to_path_buf();
        std::fs::rename(&p, tmp.path().join("moved")).unwrap();
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("theirs"), "x").unwrap();
        let err = dir.remove(Budget::default()).unwrap_err();
        assert!(matches!(err, CleanupError::Moved), "{err}");
        assert!(p.join("theirs").exists());
    }

    #[test]
    fn dropping_removes_the_folder() {
        let (tmp, dir) = private();
        dir.write_file(c"request.json", b"{}").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        drop(dir);
        assert!(entries(tmp.path()).is_empty());
    }
}
