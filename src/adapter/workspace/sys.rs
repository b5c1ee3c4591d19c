//! Thin, safe wrappers over the `*at(2)` system calls the resolver and the tools need.
//!
//! Every wrapper takes a directory handle and ONE name (or, for [`openat2_beneath`], a path the
//! kernel resolves beneath the handle). Nothing here resolves a path against the process's
//! working directory or `/`, and nothing here decides policy: that is `path.rs`'s job.
//! `EINTR` is retried; every descriptor is opened close-on-exec.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};

/// How often a call interrupted by a signal (or, for `openat2`, by a concurrent rename) is
/// retried before its error is reported.
const MAX_RETRIES: usize = 64;

/// `name` as a C string; a NUL byte inside it is an `InvalidInput` error.
pub fn cstring(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in name"))
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// Run `call` until it does not fail with `EINTR`.
fn retry<T: PartialOrd + Default + Copy>(mut call: impl FnMut() -> T) -> io::Result<T> {
    for _ in 0..MAX_RETRIES {
        let ret = call();
        if ret >= T::default() {
            return Ok(ret);
        }
        let err = last_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Err(io::Error::from_raw_os_error(libc::EINTR))
}

/// `openat(dir, name, flags | O_CLOEXEC, mode)`.
pub fn open_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let fd = retry(|| unsafe {
        // SAFETY: `name` is a valid NUL-terminated string and `dir` a live descriptor.
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    })?;
    // SAFETY: a non-negative return of openat is a fresh descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat2(dir, path, {flags | O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS})`: the
/// kernel resolves `path` (symlinks included) and fails with `EXDEV` when any step would leave
/// the tree under `dir`. `ENOSYS` means the kernel predates 5.6; the caller falls back.
#[cfg(target_os = "linux")]
pub fn openat2_beneath(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: libc::c_int,
) -> io::Result<OwnedFd> {
    // open_how is non-exhaustive in libc; zeroing it is what the kernel expects for unused
    // fields anyway (a non-zero `mode` without O_CREAT is EINVAL).
    // SAFETY: open_how is plain old data; all-zero is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = u64::from((flags | libc::O_CLOEXEC) as u32);
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    for _ in 0..MAX_RETRIES {
        // SAFETY: `path` is NUL-terminated, `how` lives across the call and its size is passed.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if ret >= 0 {
            let fd = libc::c_int::try_from(ret)
                .map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))?;
            // SAFETY: a non-negative return of openat2 is a fresh descriptor we now own.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let err = last_error();
        // EAGAIN: RESOLVE_BENEATH saw a concurrent rename or mount during `..` and asks for a
        // retry rather than risk a wrong answer.
        match err.raw_os_error() {
            Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
            _ => return Err(err),
        }
    }
    Err(io::Error::from_raw_os_error(libc::EAGAIN))
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`: the entry itself, never what it points to.
pub fn lstat_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: stat is plain old data; fstatat fills it in.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    retry(|| unsafe {
        // SAFETY: valid descriptor, NUL-terminated name, `st` is writable.
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(st)
}

/// The type bits of a `st_mode`.
pub fn file_type(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

/// `readlinkat(dir, name)`. A target of `PATH_MAX` bytes or more is `ENAMETOOLONG`.
pub fn readlink_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    let len = retry(|| unsafe {
        // SAFETY: `buf` is writable for `buf.len()` bytes.
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast::<libc::c_char>(),
            buf.len(),
        )
    })?;
    let len = usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    if len >= buf.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    buf.truncate(len);
    Ok(buf)
}

/// `mkdirat(dir, name, mode)`.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    retry(|| unsafe {
        // SAFETY: valid descriptor and NUL-terminated name.
        libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode)
    })
    .map(drop)
}

/// `renameat(dir, from, dir, to)`: both names in the same directory handle, so the directory
/// cannot be swapped between the two lookups.
pub fn rename_at(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    retry(|| unsafe {
        // SAFETY: valid descriptor and NUL-terminated names.
        libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr())
    })
    .map(drop)
}

/// `unlinkat(dir, name, 0)`.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    retry(|| unsafe {
        // SAFETY: valid descriptor and NUL-terminated name.
        libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0)
    })
    .map(drop)
}

/// `fsync(fd)`.
pub fn fsync(fd: BorrowedFd<'_>) -> io::Result<()> {
    retry(|| unsafe {
        // SAFETY: valid descriptor.
        libc::fsync(fd.as_raw_fd())
    })
    .map(drop)
}

/// What a directory entry is, as far as `readdir` knows without a `stat`.
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

/// One name in a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub kind: EntryKind,
}

fn entry_kind(d_type: u8) -> EntryKind {
    match d_type {
        libc::DT_DIR => EntryKind::Dir,
        libc::DT_REG => EntryKind::File,
        libc::DT_LNK => EntryKind::Symlink,
        libc::DT_UNKNOWN => EntryKind::Unknown,
        _ => EntryKind::Other,
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn clear_errno() {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = 0 }
}

#[cfg(any(
    target_vendor = "apple",
    target_os = "freebsd",
    target_os = "dragonfly"
))]
fn clear_errno() {
    // SAFETY: __error returns the calling thread's errno slot.
    unsafe { *libc::__error() = 0 }
}

#[cfg(any(target_os = "netbsd", target_os = "openbsd"))]
fn clear_errno() {
    // SAFETY: __errno returns the calling thread's errno slot.
    unsafe { *libc::__errno() = 0 }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
use libc::{dirent as dirent_t, readdir as readdir_fn};
#[cfg(any(target_os = "linux", target_os = "android"))]
use libc::{dirent64 as dirent_t, readdir64 as readdir_fn};

/// Closes a `DIR*` on every exit path.
struct DirStream(*mut libc::DIR);

impl Drop for DirStream {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a successful fdopendir and is closed exactly once.
        unsafe { libc::closedir(self.0) };
    }
}

/// The names in `dir` (without `.` and `..`), at most `max` of them; the flag is true when
/// more were left unread.
pub fn list_dir(dir: BorrowedFd<'_>, max: usize) -> io::Result<(Vec<DirEntry>, bool)> {
    // A fresh open file description (not a dup) so the listing has its own offset and never
    // disturbs whoever else holds `dir`.
    let own = open_at(dir, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    let raw = own.into_raw_fd();
    // SAFETY: `raw` is an open directory descriptor; on success fdopendir owns it.
    let stream = unsafe { libc::fdopendir(raw) };
    if stream.is_null() {
        let err = last_error();
        // SAFETY: fdopendir failed, so we still own `raw`.
        unsafe { libc::close(raw) };
        return Err(err);
    }
    let stream = DirStream(stream);
    let mut entries = Vec::new();
    loop {
        clear_errno();
        // SAFETY: `stream.0` is a live DIR*.
        let ent: *mut dirent_t = unsafe { readdir_fn(stream.0) };
        if ent.is_null() {
            let err = last_error();
            return match err.raw_os_error() {
                Some(0) | None => Ok((entries, false)),
                Some(_) => Err(err),
            };
        }
        // SAFETY: readdir returned a valid entry whose d_name is NUL-terminated; we copy it
        // before the next readdir call may overwrite it.
        let (name, d_type) = unsafe {
            (
                CStr::from_ptr((*ent).d_name.as_ptr()).to_bytes().to_vec(),
                (*ent).d_type,
            )
        };
        if name == b"." || name == b".." {
            continue;
        }
        if entries.len() >= max {
            return Ok((entries, true));
        }
        entries.push(DirEntry {
            name,
            kind: entry_kind(d_type),
        });
    }
}
