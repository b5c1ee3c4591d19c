//! Temp files and the two ways to publish one: over an existing name, or never over one.

use super::at::{fsync, kind, lstat_at, open_at, open_dir_path, set_mode, unlink_at};
use super::retry;
use rustix::fs::{FileType, Mode, OFlags};
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Temp names are unique per process; retries only cover leftovers of a dead process and names
/// someone else planted.
const TEMP_ATTEMPTS: u32 = 64;
/// Bytes of the hint kept in a temp name, so the name stays far below `NAME_MAX`.
const HINT_BYTES: usize = 100;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// `.<hint>.<pid>.<n>.<nanos>.ptd-tmp`: hidden (a transcript's published name never starts with
/// `.`), recognisable as ours, unique within the process by the counter.
fn temp_name(hint: &[u8]) -> io::Result<CString> {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut name = Vec::with_capacity(HINT_BYTES + 48);
    name.push(b'.');
    name.extend(
        hint.iter()
            .take(HINT_BYTES)
            .map(|&b| if b == b'/' { b'_' } else { b }),
    );
    name.extend_from_slice(format!(".{}.{n}.{nanos:x}.ptd-tmp", std::process::id()).as_bytes());
    super::at::cstring(&name)
}

/// A temp file in a directory, open for writing. Dropped unpublished, its name is removed
/// (best effort: an error being reported matters more than its cleanup).
#[derive(Debug)]
pub struct TempFile<'d> {
    dir: BorrowedFd<'d>,
    name: CString,
    file: File,
    armed: bool,
}

impl<'d> TempFile<'d> {
    /// Create a fresh temp file in `dir` with `O_EXCL | O_NOFOLLOW`, mode `mode` (the umask
    /// applies; use [`super::set_mode`] on [`TempFile::file`] when the bits must be exact).
    /// `hint` (a file name) starts the temp name, so a leftover says what it was for.
    pub fn create(dir: BorrowedFd<'d>, hint: &[u8], mode: Mode) -> io::Result<TempFile<'d>> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        for _ in 0..TEMP_ATTEMPTS {
            let name = temp_name(hint)?;
            match open_at(dir, &name, flags, mode) {
                Ok(fd) => {
                    return Ok(TempFile {
                        dir,
                        name,
                        file: File::from(fd),
                        armed: true,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(rustix::io::Errno::EXIST.into())
    }

    /// The open file, to write, sync and chmod.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The temp file's name in its directory.
    pub fn name(&self) -> &CStr {
        &self.name
    }

    /// Rename the temp file to `dest` in the same directory, replacing whatever file is there
    /// (`rename(2)` replaces a symlink itself, never writes through it). On error the temp
    /// file is removed.
    pub fn replace(mut self, dest: &CStr) -> io::Result<()> {
        super::at::rename_at(self.dir, &self.name, dest)?;
        self.armed = false;
        Ok(())
    }

    /// Give the temp file the name `dest` unless `dest` exists: `renameat2(RENAME_NOREPLACE)`,
    /// or `link(2)` + `unlink(2)` where the kernel or file system lacks that flag (just as
    /// exclusive). `Ok(false)`: `dest` is taken, try another name.
    pub fn publish_noreplace(&mut self, dest: &CStr) -> io::Result<bool> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use rustix::fs::RenameFlags;
            let dir = self.dir;
            let renamed = retry(|| {
                rustix::fs::renameat_with(dir, &*self.name, dir, dest, RenameFlags::NOREPLACE)
            });
            match renamed {
                Ok(()) => {
                    self.armed = false;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL)) => {}
                Err(e) => return Err(e),
            }
        }
        self.publish_by_link(dest)
    }

    fn publish_by_link(&mut self, dest: &CStr) -> io::Result<bool> {
        let dir = self.dir;
        match retry(|| {
            rustix::fs::linkat(dir, &*self.name, dir, dest, rustix::fs::AtFlags::empty())
        }) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e),
        }
        // Published: the file is complete under `dest` whatever happens to the temp name. A
        // failed unlink leaves it armed, so the drop tries once more.
        if unlink_at(self.dir, &self.name).is_ok() {
            self.armed = false;
        }
        Ok(true)
    }

    /// Remove the temp file now, reporting an error the drop would swallow.
    pub fn remove(mut self) -> io::Result<()> {
        self.armed = false;
        unlink_at(self.dir, &self.name)
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = unlink_at(self.dir, &self.name);
        }
    }
}

/// Why [`write_atomic`] did not write. Messages never name a host path.
#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError {
    /// The path is a symbolic link.
    #[error("the result file is a symbolic link; refusing to replace it")]
    Symlink,
    /// The path exists and is a directory, a FIFO, a device, ….
    #[error("the result file exists and is not a regular file")]
    NotRegular,
    /// The path has no file name (`/`, `..`, …).
    #[error("the result file path does not name a file")]
    NoName,
    /// A system call failed; `action` says which step, in host-path-free words.
    #[error("{action}: {source}")]
    Io {
        action: &'static str,
        #[source]
        source: io::Error,
    },
}

fn io_err(action: &'static str) -> impl FnOnce(io::Error) -> AtomicWriteError {
    move |source| AtomicWriteError::Io { action, source }
}

/// Mode of the file [`write_atomic`] publishes.
const RESULT_MODE: Mode = Mode::from_raw_mode(0o600);

/// Write `bytes` to the host path `path` (the operator's `--result-file`; its directory is
/// opened relative to the working directory, following symlinks) atomically: a temp file
/// (0600) in the same directory, fsync, `rename(2)` over `path`, fsync the directory. A regular
/// file at `path` is replaced; a symlink, directory or other special file is refused. Final
/// mode exactly 0600.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    let file_name = path.file_name().ok_or(AtomicWriteError::NoName)?;
    let target = CString::new(file_name.as_bytes()).map_err(|_| AtomicWriteError::NoName)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = open_dir_path(parent).map_err(io_err("cannot open the result file's directory"))?;
    let dir = dir.as_fd();
    check_target(dir, &target)?;

    let temp = TempFile::create(dir, b"parent-tool-dispatch", RESULT_MODE)
        .map_err(io_err("cannot create a temp file next to the result file"))?;
    set_mode(temp.file().as_fd(), RESULT_MODE)
        .map_err(io_err("cannot create a temp file next to the result file"))?;
    temp.file()
        .write_all(bytes)
        .map_err(io_err("cannot write the result file"))?;
    temp.file()
        .sync_all()
        .map_err(io_err("cannot sync the result file"))?;

    // Again, right before the rename: rename(2) replaces a symlink rather than writing through
    // it, so the window between this check and the rename can only cost the link itself.
    check_target(dir, &target)?;
    temp.replace(&target)
        .map_err(io_err("cannot replace the result file"))?;
    fsync(dir).map_err(io_err("cannot sync the result file's directory"))
}

fn check_target(dir: BorrowedFd<'_>, target: &CStr) -> Result<(), AtomicWriteError> {
    match lstat_at(dir, target) {
        Ok(st) if kind(&st) == FileType::Symlink => Err(AtomicWriteError::Symlink),
        Ok(st) if kind(&st) != FileType::RegularFile => Err(AtomicWriteError::NotRegular),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(AtomicWriteError::Io {
            action: "cannot inspect the result file",
            source: e,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::test_support::{assert_no_host_path, entries, mode};
    use std::collections::BTreeSet;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::sync::{Arc, Barrier};

    // ---- TempFile ----

    #[test]
    fn the_link_fallback_is_exclusive_and_removes_the_temp() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("taken"), "old").unwrap();
        let dir = open_dir_path(tmp.path()).unwrap();
        let mut temp = TempFile::create(dir.as_fd(), b"x", RESULT_MODE).unwrap();
        temp.file().write_all(b"new").unwrap();
        assert!(!temp.publish_by_link(c"taken").unwrap());
        assert!(temp.publish_by_link(c"free").unwrap());
        drop(temp);
        assert!(entries(tmp.path()).iter().eq(["free", "taken"]));
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("taken")).unwrap(),
            "old"
        );
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("free")).unwrap(),
            "new"
        );
    }

    #[test]
    fn a_temp_file_dropped_unpublished_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = open_dir_path(tmp.path()).unwrap();
        let temp = TempFile::create(dir.as_fd(), b"name", RESULT_MODE).unwrap();
        temp.file().write_all(b"half").unwrap();
        let name = temp.name().to_str().unwrap().to_string();
        assert!(
            name.starts_with(".name.") && name.ends_with(".ptd-tmp"),
            "{name}"
        );
        assert_eq!(entries(tmp.path()).len(), 1);
        drop(temp);
        assert!(entries(tmp.path()).is_empty());
        // A failed replace (the destination is a non-empty directory) leaves nothing either.
        std::fs::create_dir(tmp.path().join("dir")).unwrap();
        std::fs::write(tmp.path().join("dir/inside"), "x").unwrap();
        let temp = TempFile::create(dir.as_fd(), b"dir", RESULT_MODE).unwrap();
        assert!(temp.replace(c"dir").is_err());
        assert!(entries(tmp.path()).iter().eq(["dir"]));
    }

    #[test]
    fn temp_names_never_leave_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        let dir = open_dir_path(&tmp.path().join("d")).unwrap();
        let temp = TempFile::create(dir.as_fd(), b"../../escape", RESULT_MODE).unwrap();
        assert!(!temp.name().to_bytes().contains(&b'/'));
        assert_eq!(entries(&tmp.path().join("d")).len(), 1);
        assert!(entries(tmp.path()).iter().eq(["d"]));
    }

    #[test]
    fn publish_noreplace_takes_the_next_suffix_on_eexist() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("x.json"), "theirs").unwrap();
        let dir = open_dir_path(tmp.path()).unwrap();
        let mut temp = TempFile::create(dir.as_fd(), b"x", RESULT_MODE).unwrap();
        temp.file().write_all(b"ours").unwrap();
        let mut published = None;
        for dest in [c"x.json", c"x-2.json"] {
            if temp.publish_noreplace(dest).unwrap() {
                published = Some(dest);
                break;
            }
        }
        assert_eq!(published, Some(c"x-2.json"));
        drop(temp);
        assert!(entries(tmp.path()).iter().eq(["x-2.json", "x.json"]));
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("x.json")).unwrap(),
            "theirs"
        );
    }

    #[test]
    fn publish_noreplace_under_contention_gives_one_winner_per_name() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Arc::new(tmp.path().to_path_buf());
        let threads = 16;
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (root, barrier) = (Arc::clone(&root), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    let dir = open_dir_path(&root).unwrap();
                    let mut temp = TempFile::create(dir.as_fd(), b"race", RESULT_MODE).unwrap();
                    temp.file().write_all(format!("{t}").as_bytes()).unwrap();
                    barrier.wait();
                    for n in 1.. {
                        let dest = CString::new(format!("race-{n}")).unwrap();
                        if temp.publish_noreplace(&dest).unwrap() {
                            return (n, t);
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        let results: Vec<(usize, usize)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let names: BTreeSet<usize> = results.iter().map(|&(n, _)| n).collect();
        assert_eq!(
            names,
            (1..=threads).collect(),
            "every name won exactly once"
        );
        for (n, t) in results {
            let text = std::fs::read_to_string(tmp.path().join(format!("race-{n}"))).unwrap();
            assert_eq!(
                text,
                t.to_string(),
                "nothing replaced another writer's file"
            );
        }
        assert_eq!(entries(tmp.path()).len(), threads, "no temp file left");
    }

    // ---- write_atomic ----

    #[test]
    fn write_atomic_creates_then_replaces_with_mode_0600_and_no_temp() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("result.json");
        write_atomic(&path, b"first").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(mode(&path), 0o600);
        assert!(entries(tmp.path()).iter().eq(["result.json"]));
    }

    #[test]
    fn write_atomic_refuses_a_path_without_a_file_name() {
        let err = write_atomic(Path::new("."), b"x").unwrap_err();
        assert!(matches!(err, AtomicWriteError::NoName), "{err}");
        assert!(matches!(
            write_atomic(Path::new("/"), b"x").unwrap_err(),
            AtomicWriteError::NoName
        ));
    }

    #[test]
    fn write_atomic_refuses_a_symlink_and_leaves_its_target_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        let link = tmp.path().join("result.json");
        symlink(&target, &link).unwrap();
        let err = write_atomic(&link, b"evil").unwrap_err();
        assert!(matches!(err, AtomicWriteError::Symlink), "{err}");
        assert_no_host_path(&err, tmp.path());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(entries(tmp.path()).iter().eq(["result.json", "target"]));
    }

    #[test]
    fn write_atomic_refuses_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("result.json")).unwrap();
        let err = write_atomic(&tmp.path().join("result.json"), b"x").unwrap_err();
        assert!(matches!(err, AtomicWriteError::NotRegular), "{err}");
        assert!(entries(tmp.path()).iter().eq(["result.json"]));
    }

    #[test]
    fn write_atomic_reports_a_missing_directory_without_its_path() {
        let tmp = tempfile::tempdir().unwrap();
        let err = write_atomic(&tmp.path().join("no/such/result.json"), b"x").unwrap_err();
        assert!(matches!(err, AtomicWriteError::Io { .. }), "{err}");
        assert_no_host_path(&err, tmp.path());
    }
}
