//! Git's own directories are not the sandbox's to write (SPEC §13's last bullet).
//!
//! A sandbox that could write `.git/config` could set `core.fsmonitor`, `core.hooksPath` or an
//! alias, and the host would run that command the next time anyone runs `git status` in the
//! workspace. So `write` and `edit` refuse a target when, on the path as *resolved* (after
//! symlinks, by [`Root::locate`](super::path::Root::locate)):
//!
//! 1. any directory on the way, or the final name, is `.git` in any case spelling (`.GIT`,
//!    `.Git`: a case-insensitive file system or a casefolded directory makes them the same
//!    entry, and nobody needs to write such a name). On Linux a trailing dot or space makes a
//!    different name (`.git.` is not `.git` to the kernel or to git on Linux), so those are
//!    ordinary names;
//! 2. any directory on the way, the root included, *is* a git directory by git's own test
//!    (`HEAD` beside `objects` and `refs`, or beside `commondir` for a worktree's git dir) —
//!    a bare repository, or a git dir moved out with `--separate-git-dir` or `git worktree`;
//! 3. a `.git` *file* (`gitdir: PATH`, as a worktree or a submodule has) in the root or in any
//!    directory on the way names a directory on the way: writing into the git dir it points at.
//!
//! The host can opt out with `adapter workspace --allow-git-dir`. Reading is not affected
//! (search skips `.git` on its own). What is out of reach: a `.git` file elsewhere in the tree
//! that names a directory which does not look like a git dir yet — git would not use it either
//! until it holds `HEAD`, `objects` and `refs`, and once it does rule 2 applies.
//!
//! This module only looks (`lstat`, `O_PATH` opens, reading a `.git` file of at most
//! [`MAX_GITFILE_BYTES`]); it never writes.

use super::{quote, Code, ToolError};
use ptd_sys::fs::{self, FileType, Mode, OFlags};
use std::ffi::CStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The name git keeps its directory (or its `gitdir:` file) under.
const DOT_GIT: &[u8] = b".git";
/// Longest `.git` file read; git's own are one short line.
const MAX_GITFILE_BYTES: u64 = 4096;

/// Why a path named `.git` (in any case) on its way is refused.
pub(super) const IN_DOT_GIT: &str = "a .git directory (or is a .git file)";

/// Whether `name` is `.git` in any case spelling.
pub(super) fn is_dot_git(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(DOT_GIT)
}

/// Why writing `name` in the last of `dirs` (the directories below `root` the resolution went
/// through) would write inside a git directory, if it would (see the module docs). Used as the
/// [`Guard`](super::path::Guard) of a resolution for `write` and `edit`, so that it is asked before any directory is
/// created on the way, too.
pub(super) fn check(
    root: BorrowedFd<'_>,
    dirs: &[(Vec<u8>, OwnedFd)],
    name: &[u8],
) -> Option<&'static str> {
    if is_dot_git(name) || dirs.iter().any(|(n, _)| is_dot_git(n)) {
        return Some(IN_DOT_GIT);
    }
    let chain: Vec<BorrowedFd<'_>> = std::iter::once(root)
        .chain(dirs.iter().map(|(_, fd)| fd.as_fd()))
        .collect();
    if chain.iter().any(|dir| is_git_dir(*dir)) {
        return Some("a git directory");
    }
    let ids: Vec<(u64, u64)> = chain.iter().filter_map(|dir| id_of(*dir)).collect();
    chain
        .iter()
        .filter_map(|dir| gitfile_target(*dir))
        .any(|target| ids.contains(&target))
        .then_some("the git directory a .git file points at")
}

/// The `git_dir_denied` error for `shown`, saying `why`.
pub(super) fn denied(shown: &str, why: &str) -> ToolError {
    ToolError::new(
        Code::GitDirDenied,
        format!(
            "{} is inside {why}; the workspace adapter does not write there unless the host \
             starts it with --allow-git-dir",
            quote(shown)
        ),
    )
}

/// Git's test for a git directory (`is_git_directory` in git's `setup.c`), by presence only:
/// `HEAD` with `objects` and `refs`, or `HEAD` with `commondir` (a linked worktree's git dir).
fn is_git_dir(dir: BorrowedFd<'_>) -> bool {
    let has = |name: &CStr| fs::lstat_at(dir, name).is_ok();
    has(c"HEAD") && ((has(c"objects") && has(c"refs")) || has(c"commondir"))
}

/// The device and inode of the directory `dir`.
fn id_of(dir: BorrowedFd<'_>) -> Option<(u64, u64)> {
    let st = fs::lstat_at(dir, c".").ok()?;
    // dev_t and ino_t differ in width between targets: the conversion is not always useless.
    #[allow(clippy::useless_conversion)]
    Some((u64::from(st.st_dev), u64::from(st.st_ino)))
}

/// The identity of the directory that a `.git` file in `dir` points at (`gitdir: PATH`, the
/// path relative to `dir` or absolute, as git reads it); `None` when there is no such file or it
/// names nothing that exists.
fn gitfile_target(dir: BorrowedFd<'_>) -> Option<(u64, u64)> {
    let st = fs::lstat_at(dir, c".git").ok()?;
    if fs::kind(&st) != FileType::RegularFile {
        return None;
    }
    let fd = fs::open_at(
        dir,
        c".git",
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )
    .ok()?;
    let mut text = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_GITFILE_BYTES)
        .read_to_end(&mut text)
        .ok()?;
    let path = parse_gitfile(&text)?;
    // O_PATH: nothing is read; the target is only identified. It may lie outside the root
    // (a worktree's git dir normally does): then no directory on the way can be it.
    let target = fs::open_at(
        dir,
        &fs::cstring(path).ok()?,
        OFlags::PATH | OFlags::DIRECTORY,
        Mode::empty(),
    )
    .ok()?;
    id_of(target.as_fd())
}

/// The path of a `.git` file's `gitdir: PATH` line, as git reads it (`read_gitfile_gently`:
/// the `gitdir: ` prefix, then the rest of the text less trailing whitespace).
fn parse_gitfile(text: &[u8]) -> Option<&[u8]> {
    let rest = text.strip_prefix(b"gitdir: ")?;
    let end = rest
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    let path = &rest[..end];
    (!path.is_empty()).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_spelling_of_dot_git_and_nothing_else() {
        for name in [".git", ".GIT", ".Git", ".gIT"] {
            assert!(is_dot_git(name.as_bytes()), "{name}");
        }
        for name in [".git.", ".git ", "git", ".gitignore", ".git2", "x.git", ""] {
            assert!(!is_dot_git(name.as_bytes()), "{name:?}");
        }
    }

    #[test]
    fn gitfiles_are_read_as_git_reads_them() {
        assert_eq!(
            parse_gitfile(b"gitdir: ../.git/worktrees/x\n"),
            Some(&b"../.git/worktrees/x"[..])
        );
        assert_eq!(parse_gitfile(b"gitdir: /abs/g \r\n"), Some(&b"/abs/g"[..]));
        assert_eq!(parse_gitfile(b"gitdir: \n"), None);
        assert_eq!(parse_gitfile(b"ref: refs/heads/main\n"), None);
        assert_eq!(parse_gitfile(b""), None);
    }
}
