//! The primitives: one function per system call, a directory handle and one name each.

use super::retry;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat, CWD};
use rustix::io::Errno;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// Linux `PATH_MAX`: a symlink target this long or longer is refused.
const PATH_MAX: usize = 4096;

/// `name` as a C string; a NUL byte inside it is an `InvalidInput` error without an errno (so a
/// caller can tell it from a real `EINVAL`).
pub fn cstring(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in name"))
}

/// `openat(dir, name, flags | O_CLOEXEC, mode)`. The caller's flags decide whether a symlink is
/// followed (pass `O_NOFOLLOW` to refuse one) and whether a FIFO can block (`O_NONBLOCK`).
pub fn open_at(dir: BorrowedFd<'_>, name: &CStr, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    retry(|| rustix::fs::openat(dir, name, flags | OFlags::CLOEXEC, mode))
}

/// The directory `name` in `dir`, never through a symlink: `O_RDONLY | O_DIRECTORY |
/// O_NOFOLLOW`. Linux reports a symlink here as `ENOTDIR` (the directory check comes first).
pub fn open_dir_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
    open_at(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW,
        Mode::empty(),
    )
}

/// `openat2(dir, path, {flags | O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS})`: the
/// kernel resolves `path` (symlinks included) and fails with `EXDEV` when any step would leave
/// the tree under `dir`. `ENOSYS` means the kernel predates 5.6; the caller falls back.
#[cfg(target_os = "linux")]
pub fn open_beneath(dir: BorrowedFd<'_>, path: &CStr, flags: OFlags) -> io::Result<OwnedFd> {
    use rustix::fs::ResolveFlags;
    /// `EAGAIN` retries: RESOLVE_BENEATH saw a concurrent rename or mount during `..` and asks
    /// for a retry rather than risk a wrong answer; an adversary renaming in a loop must not
    /// keep us here forever.
    const MAX_AGAIN: usize = 64;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    for _ in 0..MAX_AGAIN {
        match retry(|| {
            rustix::fs::openat2(dir, path, flags | OFlags::CLOEXEC, Mode::empty(), resolve)
        }) {
            Err(err) if err.raw_os_error() == Some(Errno::AGAIN.raw_os_error()) => continue,
            other => return other,
        }
    }
    Err(Errno::AGAIN.into())
}

/// Open a directory by host path — relative paths against the process's working directory,
/// symlinks followed. Only for a path the operator chose (`--root`, the temp dir, the result
/// file's folder), never for one an adapter or a request chose.
pub fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    retry(|| {
        rustix::fs::openat(
            CWD,
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
    })
}

/// `mkdir -p` for a host path (relative to the working directory, existing symlinks followed:
/// the operator's path). Every directory it creates ends up exactly `mode`, umask or not; one
/// that a concurrent caller made first is accepted. Something on the way that is not a
/// directory is `ENOTDIR`.
pub fn create_dir_all(path: &Path, mode: Mode) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut cursor = Some(path);
    while let Some(dir) = cursor {
        if dir.as_os_str().is_empty() {
            break;
        }
        match retry(|| rustix::fs::statat(CWD, dir, AtFlags::empty())) {
            Ok(st) if kind(&st) == FileType::Directory => break,
            Ok(_) => return Err(Errno::NOTDIR.into()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(dir),
            Err(e) => return Err(e),
        }
        cursor = dir.parent();
    }
    for dir in missing.into_iter().rev() {
        match retry(|| rustix::fs::mkdirat(CWD, dir, mode)) {
            Ok(()) => {
                // Opened without following, so a symlink swapped in since cannot redirect the
                // chmod that undoes the umask.
                let fd = retry(|| {
                    rustix::fs::openat(
                        CWD,
                        dir,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                })?;
                set_mode(fd.as_fd(), mode)?;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`: the entry itself, never what it points to.
pub fn lstat_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Stat> {
    retry(|| rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW))
}

/// The file type of a `stat`.
pub fn kind(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode as _)
}

/// A file type in words, with its article: "a FIFO", "a directory", ….
pub fn describe(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "a file of unknown type",
    }
}

/// `readlinkat(dir, name)`. A target of `PATH_MAX` bytes or more is `ENAMETOOLONG`.
pub fn readlink_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Vec<u8>> {
    let target = retry(|| rustix::fs::readlinkat(dir, name, Vec::new()))?.into_bytes();
    if target.len() >= PATH_MAX {
        return Err(Errno::NAMETOOLONG.into());
    }
    Ok(target)
}

/// `mkdirat(dir, name, mode)`; the umask applies.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &CStr, mode: Mode) -> io::Result<()> {
    retry(|| rustix::fs::mkdirat(dir, name, mode))
}

/// `renameat(dir, from, dir, to)`, replacing `to`: both names in the same directory handle, so
/// the directory cannot be swapped between the two lookups.
pub fn rename_at(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    retry(|| rustix::fs::renameat(dir, from, dir, to))
}

/// `linkat(dir, from, dir, to, 0)`: a second name for the file `from` (never through a
/// symlink: `from` itself is linked), in the same directory handle; fails if `to` exists.
pub fn link_at(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    retry(|| rustix::fs::linkat(dir, from, dir, to, AtFlags::empty()))
}

/// `unlinkat(dir, name, 0)`: removes a non-directory (a symlink itself, never its target).
pub fn unlink_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    retry(|| rustix::fs::unlinkat(dir, name, AtFlags::empty()))
}

/// `unlinkat(dir, name, AT_REMOVEDIR)`: removes an empty directory.
pub fn rmdir_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    retry(|| rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR))
}

/// `fsync(fd)`.
pub fn fsync(fd: BorrowedFd<'_>) -> io::Result<()> {
    retry(|| rustix::fs::fsync(fd))
}

/// `fchmod(fd, mode)`: exactly `mode`, whatever the umask did at creation.
pub fn set_mode(fd: BorrowedFd<'_>, mode: Mode) -> io::Result<()> {
    retry(|| rustix::fs::fchmod(fd, mode))
}

/// What a directory entry is, as far as the listing knows without a `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File,
    Symlink,
    /// A FIFO, socket or device.
    Other,
    /// The file system does not fill in `d_type`; the caller must look.
    Unknown,
}

impl From<FileType> for EntryKind {
    fn from(kind: FileType) -> EntryKind {
        match kind {
            FileType::Directory => EntryKind::Dir,
            FileType::RegularFile => EntryKind::File,
            FileType::Symlink => EntryKind::Symlink,
            FileType::Unknown => EntryKind::Unknown,
            FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice => EntryKind::Other,
        }
    }
}

/// One name in a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub kind: EntryKind,
}

/// The names in `dir` (without `.` and `..`), at most `max` of them; the flag is true when more
/// were left unread. The listing reads through a fresh open file description (not a dup), so
/// it has its own offset and never disturbs whoever else holds `dir`.
pub fn list_dir(dir: BorrowedFd<'_>, max: usize) -> io::Result<(Vec<DirEntry>, bool)> {
    let stream = retry(|| rustix::fs::Dir::read_from(dir))?;
    let mut entries = Vec::new();
    for entry in stream {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if entries.len() >= max {
            return Ok((entries, true));
        }
        entries.push(DirEntry {
            name: name.to_vec(),
            kind: entry.file_type().into(),
        });
    }
    Ok((entries, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    fn dir(path: &Path) -> OwnedFd {
        open_dir_path(path).unwrap()
    }

    #[test]
    fn open_dir_at_refuses_a_symlink_to_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("real")).unwrap();
        symlink("real", tmp.path().join("link")).unwrap();
        let d = dir(tmp.path());
        assert!(open_dir_at(d.as_fd(), c"real").is_ok());
        let err = open_dir_at(d.as_fd(), c"link").unwrap_err();
        assert!(
            matches!(err.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)),
            "{err}"
        );
    }

    #[test]
    fn lstat_at_sees_the_link_not_its_target() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("file"), "x").unwrap();
        symlink("file", tmp.path().join("link")).unwrap();
        let d = dir(tmp.path());
        assert_eq!(
            kind(&lstat_at(d.as_fd(), c"link").unwrap()),
            FileType::Symlink
        );
        assert_eq!(
            kind(&lstat_at(d.as_fd(), c"file").unwrap()),
            FileType::RegularFile
        );
        assert_eq!(readlink_at(d.as_fd(), c"link").unwrap(), b"file");
    }

    #[test]
    fn every_descriptor_is_close_on_exec() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("file"), "x").unwrap();
        let d = dir(tmp.path());
        let file = open_at(d.as_fd(), c"file", OFlags::RDONLY, Mode::empty()).unwrap();
        for fd in [d.as_fd(), file.as_fd()] {
            let flags = rustix::io::fcntl_getfd(fd).unwrap();
            assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
        }
    }

    #[test]
    fn open_beneath_refuses_an_escape_and_follows_inside() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("root")).unwrap();
        std::fs::write(tmp.path().join("root/in"), "in").unwrap();
        std::fs::write(tmp.path().join("out"), "out").unwrap();
        symlink("../out", tmp.path().join("root/escape")).unwrap();
        symlink("in", tmp.path().join("root/inside")).unwrap();
        let root = dir(&tmp.path().join("root"));
        assert!(open_beneath(root.as_fd(), c"inside", OFlags::RDONLY).is_ok());
        let err = open_beneath(root.as_fd(), c"escape", OFlags::RDONLY).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EXDEV));
    }

    #[test]
    fn create_dir_all_makes_exact_modes_and_reports_a_file_on_the_way() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a/b/c");
        create_dir_all(&deep, Mode::from_raw_mode(0o700)).unwrap();
        for d in [tmp.path().join("a"), tmp.path().join("a/b"), deep.clone()] {
            assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o7777, 0o700);
        }
        create_dir_all(&deep, Mode::from_raw_mode(0o700)).unwrap();
        std::fs::write(tmp.path().join("file"), "x").unwrap();
        let err =
            create_dir_all(&tmp.path().join("file/below"), Mode::from_raw_mode(0o700)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
    }

    #[test]
    fn list_dir_is_bounded_and_reports_kinds() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), "x").unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        symlink("f", tmp.path().join("l")).unwrap();
        let d = dir(tmp.path());
        let (mut all, more) = list_dir(d.as_fd(), 10).unwrap();
        assert!(!more);
        all.sort_by(|a, b| a.name.cmp(&b.name));
        let kinds: Vec<_> = all.iter().map(|e| (e.name.as_slice(), e.kind)).collect();
        assert_eq!(
            kinds,
            [
                (&b"d"[..], EntryKind::Dir),
                (&b"f"[..], EntryKind::File),
                (&b"l"[..], EntryKind::Symlink)
            ]
        );
        let (two, more) = list_dir(d.as_fd(), 2).unwrap();
        assert_eq!((two.len(), more), (2, true));
    }

    #[test]
    fn a_nul_byte_is_invalid_input_without_an_errno() {
        let err = cstring(b"a\0b").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(err.raw_os_error(), None);
    }
}
