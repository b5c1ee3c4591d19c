//! The one system-call layer for the file system, on `rustix`.
//!
//! It owns every `*at(2)` call the crate makes: opening relative to a directory handle (with
//! `openat2(RESOLVE_BENEATH)` where the kernel has it), `lstat`, `mkdir`, `rename` (with or
//! without replacing), `link`, `unlink`, `readlink`, `fsync`, `fchmod`, directory listings;
//! and three protocols built on them:
//!
//! - [`TempFile`]: a hidden temp file next to its final name, published either over an existing
//!   file ([`TempFile::replace`]) or never over one ([`TempFile::publish_noreplace`]); removed
//!   on drop unless published. [`write_atomic`] is that protocol for one host path
//!   (`--result-file`).
//! - [`PrivateDir`]: a fresh folder only this user can enter, the files in it, a bounded read
//!   that never blocks on whatever someone else left there ([`PrivateDir::read_regular`]), and a
//!   cleanup bounded in time and entries ([`PrivateDir::remove`]).
//! - The one reader of files read by name (`read.rs`): [`read_file`] and its relatives open
//!   without blocking, refuse what is not a regular file (FIFO, device, socket, directory) and
//!   bound the size; [`read_stream`] reads the request, which may be a pipe, in a `poll(2)`
//!   that a signal ends; [`read_text`] reads the kernel's files (`/proc`, `/sys`) the same
//!   way, and [`list_dir_path`] lists a directory by host path. Nothing else in the crate
//!   opens a file to read it: clippy refuses `std::fs::read*` and `File::open` outside
//!   `read.rs` (`disallowed-methods` in `clippy.toml`).
//! - [`create_dir_all`] / [`open_dir_path`] / [`read_file`] / [`read_head`] / [`read_text`] /
//!   [`list_dir_path`] / [`read_stream`]: the only functions that take a host path.
//!
//! Invariants:
//!
//! - **No path is resolved against the process's working directory** (or `/`) unless the
//!   function's doc says so: [`open_dir_path`], [`create_dir_all`], [`write_atomic`],
//!   [`read_file`], [`read_head`], [`read_text`], [`list_dir_path`], [`read_stream`] and
//!   [`PrivateDir::create_in`] take a host path the
//!   operator chose; everything else takes a directory handle and ONE name (or, for
//!   [`open_beneath`], a path the kernel keeps beneath the handle).
//! - **No symlink is followed where one is refused**: functions that take a name open it with
//!   `O_NOFOLLOW` or look at it with `AT_SYMLINK_NOFOLLOW` unless their doc says otherwise;
//!   [`open_at`] passes the caller's flags through, so the caller decides there.
//! - **Every descriptor is close-on-exec**: `O_CLOEXEC` is added to every open, so no adapter
//!   ever inherits a handle of the dispatcher's.
//! - **`EINTR` is retried** by one helper (`retry`) around every call; an `openat2` that
//!   reports a concurrent rename (`EAGAIN`) is retried a bounded number of times.
//! - Errors are `std::io::Error` carrying the errno, and never a host path.
//!
//! It must not decide policy: which paths a tool may touch (that is
//! `adapter::workspace::path`), what a transcript is called (`transcript`), what an adapter's
//! leftovers mean (`dispatch`). It must not print.

mod at;
mod private;
mod publish;
mod read;

#[cfg(target_os = "linux")]
pub use at::open_beneath;
pub use at::{
    create_dir_all, cstring, describe, fsync, kind, link_at, list_dir, lstat_at, mkdir_at, open_at,
    open_dir_at, open_dir_path, readlink_at, rename_at, rmdir_at, set_mode, unlink_at, DirEntry,
    EntryKind,
};
pub use private::{random_u64, Budget, CleanupError, PrivateDir, ReadRegular, MAX_CLEANUP_DEPTH};
pub use publish::{write_atomic, AtomicWriteError, TempFile};
pub use read::{
    list_dir_path, read_file, read_file_at, read_file_with_status, read_head, read_opened,
    read_stream, read_text, regular, ReadError,
};
pub use rustix::fs::{FileType, Mode, OFlags, Stat};

use std::io;

/// Run one system call until it does not fail with `EINTR`: the single retry rule of this
/// module. Only a signal can make it loop, and every loop is one more delivered signal.
pub(crate) fn retry<T>(call: impl FnMut() -> rustix::io::Result<T>) -> io::Result<T> {
    rustix::io::retry_on_intr(call).map_err(io::Error::from)
}

/// What the file-system tests of several modules look at: a folder's entries, a file's mode,
/// and that an error message names no host path. For the tests of the layers above too, with
/// the `test-support` feature (their dev-dependency turns it on).
#[cfg(any(test, feature = "test-support"))]
#[allow(clippy::unwrap_used, clippy::disallowed_methods)]
pub mod test_support {
    use std::collections::BTreeSet;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    /// Every entry of a directory, by name.
    pub fn entries(dir: &Path) -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// The permission bits of `path` itself (a symlink is not followed).
    pub fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    /// `err`'s message names neither `root` nor anything under `/tmp`.
    #[track_caller]
    pub fn assert_no_host_path(err: &dyn std::fmt::Display, root: &Path) {
        let message = err.to_string();
        assert!(
            !message.contains(root.to_str().unwrap()) && !message.contains("/tmp"),
            "{message}"
        );
    }
}
