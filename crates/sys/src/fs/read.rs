//! The one reader of files the product reads by name: the bridge's and the tool map's `@FILE`,
//! `--ca-cert`, replay's case files and transcripts, the request file (and `validate`'s,
//! `delegation`'s), the file transport's result file, the workspace adapter's files.
//!
//! Every file is opened with `O_NONBLOCK | O_NOCTTY | O_CLOEXEC`, so that `open(2)` never
//! waits for a FIFO's writer and a terminal never becomes the dispatcher's; then `fstat` says
//! what was opened:
//!
//! - [`read_file`] / [`read_opened`] accept a **regular file only**: a FIFO, a character or
//!   block device (`/dev/zero`), a socket or a directory is [`ReadError::NotRegular`] at once,
//!   without one byte read. `O_NONBLOCK` is cleared on what was accepted (it means nothing
//!   for a regular file, and a reader must not see `EAGAIN`). At most `max_bytes` are read; a
//!   larger file is [`ReadError::TooLarge`] (by its size, before reading, or when it grew
//!   while being read). Nothing can block, so no signal has anything to end.
//! - [`read_stream`] is for the request, which may also come through a pipe (`-`, stdin, a
//!   FIFO, `<(…)`): it waits in `poll(2)` on the input and the signal wake-up together, so a
//!   writer that never comes or never closes cannot outlast SIGINT/SIGTERM/SIGHUP
//!   ([`ReadError::Interrupted`]). It returns at most `limit` bytes; the caller passes its cap
//!   plus one and lets the strict reader refuse the excess.
//!
//! Errors carry the errno or the file type, never a path (the caller names the file).

use super::{
    cstring, describe, kind, list_dir, lstat_at, open_dir_path, retry, DirEntry, EntryKind,
    FileType, Mode, OFlags, Stat,
};
use crate::interrupt::Interrupts;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ffi::CStr;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Flags of every open here: never wait in `open(2)`, never acquire a controlling terminal.
const OPEN_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// One read of a stream.
const CHUNK: usize = 64 * 1024;
/// The first read of a stream: most requests are smaller.
const FIRST_READ: usize = 4 * 1024;

/// Why a named file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Opening or reading failed (missing, permission, …): the OS error, which names no path.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// What the name leads to is not a regular file (and was never read).
    #[error("it is {}, not a regular file", describe(*.0))]
    NotRegular(FileType),
    /// The file holds more than the limit.
    #[error("it is larger than {limit} bytes")]
    TooLarge { limit: u64 },
    /// This signal arrived while [`read_stream`] waited.
    #[error("interrupted by {}", .0.name())]
    Interrupted(crate::signal::Signal),
}

impl From<ReadError> for io::Error {
    fn from(err: ReadError) -> io::Error {
        match err {
            ReadError::Io(err) => err,
            ReadError::NotRegular(_) => {
                io::Error::new(io::ErrorKind::InvalidInput, err.to_string())
            }
            ReadError::TooLarge { .. } => {
                io::Error::new(io::ErrorKind::FileTooLarge, err.to_string())
            }
            ReadError::Interrupted(_) => {
                io::Error::new(io::ErrorKind::Interrupted, err.to_string())
            }
        }
    }
}

/// The regular file at the host path `path` (relative to the working directory; symlinks
/// followed: the operator named it), at most `max_bytes` of it.
pub fn read_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    read_opened(open_path(path)?, max_bytes)
}

/// The text of the regular file at the host path `path`, at most `max_bytes` of it: for the
/// files the kernel keeps (`/proc`, `/sys`, cgroup files: regular files of size 0, read to
/// their end, the bound still holding). Text that is not UTF-8 is an `InvalidData` error.
pub fn read_text(path: &Path, max_bytes: u64) -> Result<String, ReadError> {
    String::from_utf8(read_file(path, max_bytes)?)
        .map_err(|err| ReadError::Io(io::Error::new(io::ErrorKind::InvalidData, err)))
}

/// The entries of the directory at the host path `path` (relative to the working directory,
/// symlinks followed: a path the dispatcher chose, `/proc/self/fd`, `/etc`), without `.` and
/// `..`, at most `max` of them; the flag is true when more were left unread. Every entry's
/// kind is known: where the file system gives none, the entry is looked at with `lstat`
/// (without following it).
pub fn list_dir_path(path: &Path, max: usize) -> io::Result<(Vec<DirEntry>, bool)> {
    let dir = open_dir_path(path)?;
    let (mut entries, more) = list_dir(dir.as_fd(), max)?;
    for entry in entries.iter_mut().filter(|e| e.kind == EntryKind::Unknown) {
        if let Ok(st) = cstring(&entry.name).and_then(|name| lstat_at(dir.as_fd(), &name)) {
            entry.kind = kind(&st).into();
        }
    }
    Ok((entries, more))
}

/// The first `max_bytes` of the regular file at the host path `path` (however large it is):
/// what the kernel reads of a program to decide how to run it (its `#!` line), for explaining
/// why a program could not be started.
pub fn read_head(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let (file, _) = regular(open_path(path)?)?;
    let mut bytes = Vec::new();
    (&file).take(max_bytes).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The regular file `name` in `dir`, opened with `OPEN_FLAGS` plus `extra` (`O_NOFOLLOW` to
/// refuse a symlink), at most `max_bytes` of it.
pub fn read_file_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    extra: OFlags,
    max_bytes: u64,
) -> Result<Vec<u8>, ReadError> {
    let fd = retry(|| rustix::fs::openat(dir, name, OPEN_FLAGS | extra, Mode::empty()))?;
    read_opened(fd, max_bytes)
}

/// [`read_file`] with the status of what was read, from the same open: for a file whose owner
/// and permissions matter as much as its bytes (the host policy, SPEC §16).
pub fn read_file_with_status(path: &Path, max_bytes: u64) -> Result<(Vec<u8>, Stat), ReadError> {
    read_opened_with_status(open_path(path)?, max_bytes)
}

/// `fd` (opened non-blocking by its caller), when it is a regular file: at most `max_bytes`.
pub fn read_opened(fd: OwnedFd, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    read_opened_with_status(fd, max_bytes).map(|(bytes, _)| bytes)
}

fn read_opened_with_status(fd: OwnedFd, max_bytes: u64) -> Result<(Vec<u8>, Stat), ReadError> {
    let (file, st) = regular(fd)?;
    let too_large = ReadError::TooLarge { limit: max_bytes };
    if u64::try_from(st.st_size).unwrap_or(0) > max_bytes {
        return Err(too_large);
    }
    let mut bytes = Vec::new();
    (&file)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large);
    }
    Ok((bytes, st))
}

/// `fd` as a [`File`] with its status, when it is a regular file, with `O_NONBLOCK` cleared;
/// anything else is [`ReadError::NotRegular`]. For a caller that reads the file its own way
/// (a page of lines).
pub fn regular(fd: OwnedFd) -> Result<(File, Stat), ReadError> {
    let st = retry(|| rustix::fs::fstat(&fd))?;
    let found = kind(&st);
    if found != FileType::RegularFile {
        return Err(ReadError::NotRegular(found));
    }
    let flags = retry(|| rustix::fs::fcntl_getfl(&fd))?;
    if flags.contains(OFlags::NONBLOCK) {
        retry(|| rustix::fs::fcntl_setfl(&fd, flags.difference(OFlags::NONBLOCK)))?;
    }
    Ok((File::from(fd), st))
}

/// The request's bytes: the file at `path` (whatever it is: a regular file, a FIFO, a
/// terminal, `/dev/stdin`), or stdin for `None`; at most `limit` of them. Reads only once
/// `poll(2)` says the input is readable, and `poll` also watches `interrupts`' wake-up, so no
/// wait outlasts a signal. Stdin keeps its flags (its file description is the caller's).
pub fn read_stream(
    path: Option<&Path>,
    limit: u64,
    interrupts: &Interrupts,
) -> Result<Vec<u8>, ReadError> {
    let opened = path.map(open_path).transpose()?;
    let input = match &opened {
        Some(fd) => fd.as_fd(),
        None => rustix::stdio::stdin(),
    };
    read_polled(input, limit, interrupts)
}

fn open_path(path: &Path) -> Result<OwnedFd, ReadError> {
    Ok(retry(|| {
        rustix::fs::openat(rustix::fs::CWD, path, OPEN_FLAGS, Mode::empty())
    })?)
}

/// Read `input` to its end or to `limit` bytes, whichever comes first (see [`read_stream`]).
pub(crate) fn read_polled(
    input: BorrowedFd<'_>,
    limit: u64,
    interrupts: &Interrupts,
) -> Result<Vec<u8>, ReadError> {
    use rustix::event::{poll, PollFd, PollFlags};
    use rustix::io::Errno;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut bytes: Vec<u8> = Vec::new();
    while bytes.len() < limit {
        let mut fds = vec![PollFd::from_borrowed_fd(input, PollFlags::IN)];
        if let Some(wake) = interrupts.wake_fd() {
            fds.push(PollFd::from_borrowed_fd(wake, PollFlags::IN));
        }
        match poll(&mut fds, None) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(err) => return Err(io::Error::from(err).into()),
        }
        if let Some(signal) = interrupts.received() {
            return Err(ReadError::Interrupted(signal));
        }
        if fds[0].revents().is_empty() {
            continue;
        }
        // Straight into the bytes, a read at most the size of what came so far (4 KiB at
        // first, a chunk at most): a small request zeroes a small buffer, not a whole chunk.
        let want = CHUNK
            .min(limit - bytes.len())
            .min(bytes.len().max(FIRST_READ));
        let start = bytes.len();
        bytes.resize(start + want, 0);
        let read = rustix::io::read(input, &mut bytes[start..]);
        bytes.truncate(start + *read.as_ref().unwrap_or(&0));
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(Errno::INTR) | Err(Errno::AGAIN) => {}
            Err(err) => return Err(io::Error::from(err).into()),
        }
    }
    bytes.truncate(limit);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn fifo(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("f.fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &path, Mode::from_raw_mode(0o600)).unwrap();
        path
    }

    #[test]
    fn a_regular_file_is_read_up_to_its_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_file(&path, 10).unwrap(), b"0123456789");
        assert!(matches!(
            read_file(&path, 9),
            Err(ReadError::TooLarge { limit: 9 })
        ));
        let err = read_file(&tmp.path().join("missing"), 9).unwrap_err();
        assert!(
            matches!(&err, ReadError::Io(e) if e.kind() == io::ErrorKind::NotFound),
            "{err}"
        );
    }

    #[test]
    fn what_is_not_a_regular_file_is_refused_at_once_without_a_read() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = fifo(tmp.path());
        let started = Instant::now();
        for (path, found) in [
            (fifo.as_path(), FileType::Fifo),
            (Path::new("/dev/zero"), FileType::CharacterDevice),
            (Path::new("/dev/null"), FileType::CharacterDevice),
            (tmp.path(), FileType::Directory),
        ] {
            match read_file(path, 1 << 20) {
                Err(ReadError::NotRegular(kind)) => assert_eq!(kind, found, "{path:?}"),
                other => panic!("{path:?}: {other:?}"),
            }
        }
        assert!(started.elapsed() < Duration::from_secs(5), "nothing waits");
        assert_eq!(
            read_file(&fifo, 1).unwrap_err().to_string(),
            "it is a FIFO, not a regular file"
        );
        let socket = tmp.path().join("s");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        // A socket cannot be opened at all (ENXIO): still an error, still at once.
        assert!(read_file(&socket, 1).is_err());
    }

    #[test]
    fn read_at_refuses_a_symlink_when_asked_and_clears_o_nonblock() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("t"), b"x").unwrap();
        std::os::unix::fs::symlink("t", tmp.path().join("l")).unwrap();
        let dir = super::super::open_dir_path(tmp.path()).unwrap();
        assert_eq!(
            read_file_at(dir.as_fd(), c"l", OFlags::empty(), 4).unwrap(),
            b"x"
        );
        let err = read_file_at(dir.as_fd(), c"l", OFlags::NOFOLLOW, 4).unwrap_err();
        assert!(
            matches!(&err, ReadError::Io(e) if e.raw_os_error() == Some(libc::ELOOP)),
            "{err}"
        );
        let fd =
            retry(|| rustix::fs::openat(dir.as_fd(), c"t", OPEN_FLAGS, Mode::empty())).unwrap();
        let (file, _) = regular(fd).unwrap();
        let flags = rustix::fs::fcntl_getfl(&file).unwrap();
        assert!(!flags.contains(OFlags::NONBLOCK));
    }

    #[test]
    fn kernel_files_are_read_as_text_within_their_bound() {
        // /proc files say size 0 and are read to their end.
        let stat = read_text(Path::new("/proc/self/stat"), 4096).unwrap();
        assert!(
            stat.starts_with(&format!("{} (", std::process::id())),
            "{stat}"
        );
        assert!(matches!(
            read_text(Path::new("/proc/self/stat"), 8),
            Err(ReadError::TooLarge { limit: 8 })
        ));
        // Still the one reader: a FIFO or a device is refused at once.
        let tmp = tempfile::tempdir().unwrap();
        let fifo = fifo(tmp.path());
        assert!(matches!(
            read_text(&fifo, 10),
            Err(ReadError::NotRegular(FileType::Fifo))
        ));
        assert!(matches!(
            read_text(Path::new("/dev/zero"), 10),
            Err(ReadError::NotRegular(FileType::CharacterDevice))
        ));
        let bytes = tmp.path().join("bytes");
        std::fs::write(&bytes, b"\xff\xfe").unwrap();
        assert!(
            matches!(read_text(&bytes, 10), Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::InvalidData)
        );
    }

    #[test]
    fn a_listing_by_path_knows_every_kind_and_stops_at_its_bound() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::write(tmp.path().join("f"), b"").unwrap();
        std::os::unix::fs::symlink("f", tmp.path().join("l")).unwrap();
        let _ = fifo(tmp.path());
        let (mut entries, more) = list_dir_path(tmp.path(), 10).unwrap();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let found: Vec<(&[u8], EntryKind)> = entries
            .iter()
            .map(|e| (e.name.as_slice(), e.kind))
            .collect();
        assert_eq!(
            found,
            [
                (&b"d"[..], EntryKind::Dir),
                (b"f", EntryKind::File),
                (b"f.fifo", EntryKind::Other),
                (b"l", EntryKind::Symlink),
            ]
        );
        assert!(!more);
        let (entries, more) = list_dir_path(tmp.path(), 2).unwrap();
        assert_eq!((entries.len(), more), (2, true));
        assert!(list_dir_path(&tmp.path().join("f"), 10).is_err());
    }

    /// A pipe holding `bytes`, its write end closed.
    fn pipe_with(bytes: &[u8]) -> OwnedFd {
        let (reader, writer) = rustix::pipe::pipe().unwrap();
        rustix::io::write(&writer, bytes).unwrap();
        reader
    }

    #[test]
    fn a_pipe_is_read_to_the_limit_or_to_its_end() {
        let none = Interrupts::none();
        let reader = pipe_with(&[b'a'; 100]);
        assert_eq!(read_polled(reader.as_fd(), 10, &none).unwrap(), [b'a'; 10]);
        let reader = pipe_with(&[b'b'; 100]);
        assert_eq!(
            read_polled(reader.as_fd(), 1000, &none).unwrap(),
            [b'b'; 100]
        );
        let reader = pipe_with(b"");
        assert!(read_polled(reader.as_fd(), 1000, &none).unwrap().is_empty());
    }

    #[test]
    fn a_stream_is_cut_at_its_limit_and_a_writerless_fifo_waits_for_a_signal_only() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a");
        std::fs::write(&path, b"0123456789").unwrap();
        let none = Interrupts::none();
        assert_eq!(read_stream(Some(&path), 4, &none).unwrap(), b"0123");
        assert_eq!(read_stream(Some(&path), 100, &none).unwrap(), b"0123456789");
        // A FIFO with a late writer is read whole.
        let fifo = fifo(tmp.path());
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                std::fs::write(fifo, b"late").unwrap();
            })
        };
        assert_eq!(read_stream(Some(&fifo), 100, &none).unwrap(), b"late");
        writer.join().unwrap();
    }
}
