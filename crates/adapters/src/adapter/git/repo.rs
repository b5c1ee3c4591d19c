//! Finding the repository: the root must hold it (SPEC §15.2, "the root is the repository").
//!
//! The root needs a `.git` (a directory, or a `gitdir:` file); git finds the repository from
//! the root and never above it (`GIT_CEILING_DIRECTORIES`); and the git directory and the
//! common directory it names must both lie beneath the root. So a `.git` file (or symlink)
//! that a checkout brings cannot turn the adapter onto another repository of the host — its
//! history, its index, its branches. From then on every git gets the checked directory as
//! `GIT_DIR` and the root as `GIT_WORK_TREE`, so a `core.worktree` in the checkout's config
//! does not move the work tree either.

use super::command::{Git, MIN_VERSION};
use super::{limits, Code, Failure};
use ptd_sys::fs::EntryKind;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The most of a file naming other directories (`objects/info/alternates`, `commondir`,
/// `gitdir`) that is read.
const MAX_POINTER_FILE_BYTES: u64 = 64 * 1024;

/// Check the host's git and locate the repository of `git`'s root; on success every later
/// run of `git` uses it.
pub(super) fn locate(git: &mut Git<'_>) -> Result<(), Failure> {
    let dot_git = git.root().join(".git");
    if std::fs::symlink_metadata(&dot_git).is_err() {
        return Err(Failure::new(
            Code::NotARepository,
            "the workspace root is not a git repository (it has no .git)",
        ));
    }
    // A `.git` link or `gitdir:` file is followed here first: git would name its target (a
    // host path) in its refusal, the kernel refusing the read once the adapter is confined.
    if let Ok(target) = std::fs::canonicalize(&dot_git) {
        let target = match ptd_sys::fs::read_file(&target, MAX_POINTER_FILE_BYTES) {
            Ok(text) => {
                let text = String::from_utf8_lossy(&text);
                let named = text.strip_prefix("gitdir: ").unwrap_or("").trim_end();
                git.root().join(named)
            }
            _ => target,
        };
        beneath(git.root(), &target, "git directory")?;
    }
    check_version(git)?;
    let out = git.run(
        &[
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
        ],
        super::command::RunOptions::read(64 * 1024),
    )?;
    if out.exit != 0 {
        let failure = out.failure("rev-parse");
        return Err(Failure {
            code: Code::NotARepository,
            message: format!(
                "the workspace root is not a usable git repository: {}",
                failure.message
            ),
            details: failure.details,
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let (Some(git_dir), Some(common_dir)) = (lines.next(), lines.next()) else {
        return Err(Failure::new(
            Code::GitFailed,
            "git rev-parse did not name the git directory",
        ));
    };
    let git_dir = beneath(git.root(), Path::new(git_dir), "git directory")?;
    let common_dir = beneath(git.root(), Path::new(common_dir), "common git directory")?;
    let mut walk = Walk::new(git.root());
    walk.dir(&git_dir, true)?;
    walk.dir(&common_dir, true)?;
    git.set_git_dir(git_dir);
    Ok(())
}

/// The check of every part of the git directory (and the common directory): each symlink in
/// it, followed, and each file in it that names another directory (`objects/info/alternates`,
/// `commondir`, `worktrees/*/gitdir`) must stay inside the root. A symlinked `objects` or
/// `refs/heads` would otherwise show another repository's history and move its branches, an
/// alternate would lend it its objects. Symlinked directories that stay inside are walked too;
/// each directory once.
struct Walk<'r> {
    root: &'r Path,
    seen: std::collections::HashSet<PathBuf>,
    entries: usize,
}

impl<'r> Walk<'r> {
    fn new(root: &'r Path) -> Walk<'r> {
        Walk {
            root,
            seen: Default::default(),
            entries: 0,
        }
    }

    /// `not_a_repository` naming `part` (shown relative to the root) and what it is.
    fn outside(&self, part: &Path, what: &str) -> Failure {
        let shown = part.strip_prefix(self.root).unwrap_or(Path::new("?"));
        Failure::new(
            Code::NotARepository,
            format!(
                "the repository's git directory is not wholly inside the workspace root: {} \
                 is {what} that resolves outside it (or cannot be resolved); the adapter \
                 serves only a repository whose every part the root holds",
                ptd_wire::terminal::escape(&format!("{:?}", shown.to_string_lossy()))
            ),
        )
    }

    /// `path` (a file or directory, after symlinks) lies inside the root (or is the root).
    fn inside(&self, path: &Path) -> Option<PathBuf> {
        let resolved = std::fs::canonicalize(path).ok()?;
        resolved.starts_with(self.root).then_some(resolved)
    }

    /// Walk the directory `dir` (canonical, inside the root); `top`: a git directory itself.
    fn dir(&mut self, dir: &Path, top: bool) -> Result<(), Failure> {
        if !self.seen.insert(dir.to_path_buf()) {
            return Ok(());
        }
        let unreadable = || {
            Failure::new(
                Code::NotARepository,
                "the repository's git directory cannot be read whole",
            )
        };
        let mut subdirs = Vec::new();
        // One more than what is left of the bound: the count below still sees it exceeded.
        let left = limits::MAX_GIT_DIR_ENTRIES.saturating_sub(self.entries);
        let (listing, _) = ptd_sys::fs::list_dir_path(dir, left + 1).map_err(|_| unreadable())?;
        for entry in listing {
            self.entries += 1;
            if self.entries > limits::MAX_GIT_DIR_ENTRIES {
                return Err(Failure::new(
                    Code::NotARepository,
                    format!(
                        "the repository's git directory holds more than {} entries; the \
                         adapter checks each of them and stops there (`git gc` packs loose \
                         objects)",
                        limits::MAX_GIT_DIR_ENTRIES
                    ),
                ));
            }
            let name = OsStr::from_bytes(&entry.name);
            let path = dir.join(name);
            // No git the adapter runs looks at `hooks/` (`core.hooksPath=/dev/null`), and a
            // hook linked to a script elsewhere is common: it is not part of the repository.
            if top && name == "hooks" {
                continue;
            }
            let kind = entry.kind;
            if kind == EntryKind::Unknown {
                return Err(unreadable());
            }
            if kind == EntryKind::Symlink {
                let target = self
                    .inside(&path)
                    .ok_or_else(|| self.outside(&path, "a link"))?;
                if target.is_dir() {
                    subdirs.push(target);
                } else {
                    self.file(&path, &target)?;
                }
            } else if kind == EntryKind::Dir {
                subdirs.push(path);
            } else if kind == EntryKind::File {
                self.file(&path, &path)?;
            }
        }
        for sub in subdirs {
            self.dir(&sub, false)?;
        }
        Ok(())
    }

    /// A file of the git directory at `path` (its content at `target`): the ones that name
    /// another directory are read, and each directory they name must be inside the root.
    fn file(&self, path: &Path, target: &Path) -> Result<(), Failure> {
        let name = path.file_name().unwrap_or_default();
        let parent = path.parent().unwrap_or(self.root);
        let in_dir = |dir: &str| parent.file_name() == Some(std::ffi::OsStr::new(dir));
        let (base, what) = if name == "alternates" && in_dir("info") {
            // Relative alternates are relative to the objects directory.
            (
                parent.parent().unwrap_or(parent),
                "an alternate object store",
            )
        } else if name == "commondir" {
            (parent, "the common directory a commondir file names")
        } else if name == "gitdir"
            && parent.parent().and_then(Path::file_name) == Some("worktrees".as_ref())
        {
            (parent, "the linked worktree a gitdir file names")
        } else {
            return Ok(());
        };
        let text = ptd_sys::fs::read_head(target, MAX_POINTER_FILE_BYTES)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| self.outside(path, what))?;
        for line in text.lines() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // A quoted alternate (C-style) is refused unread: it cannot be checked simply.
            let named = base.join(line);
            if line.starts_with('"') || self.inside(&named).is_none() {
                return Err(self.outside(path, what));
            }
        }
        Ok(())
    }
}

/// `path`, resolved, when it lies strictly beneath `root` (canonical).
fn beneath(root: &Path, path: &Path, what: &str) -> Result<PathBuf, Failure> {
    let outside = || {
        Failure::new(
            Code::NotARepository,
            format!(
                "the repository's {what} is not inside the workspace root (a .git file or \
                 link pointing elsewhere, a linked worktree or a submodule checkout); the \
                 adapter serves only a repository that the root holds"
            ),
        )
    };
    let resolved = std::fs::canonicalize(path).map_err(|_| outside())?;
    if resolved != root && resolved.starts_with(root) {
        Ok(resolved)
    } else {
        Err(outside())
    }
}

/// `git_unavailable` unless `git --version` names at least [`MIN_VERSION`].
fn check_version(git: &Git<'_>) -> Result<(), Failure> {
    let out = git.run_small(&["--version"]).map_err(|f| match f.code {
        Code::GitFailed => Failure::new(
            Code::GitUnavailable,
            format!("`git --version` failed: {}", f.message),
        ),
        _ => f,
    })?;
    let text = String::from_utf8_lossy(&out);
    match parse_version(&text) {
        Some(v) if v >= MIN_VERSION => Ok(()),
        Some((major, minor)) => Err(Failure::new(
            Code::GitUnavailable,
            format!(
                "git {major}.{minor} is too old; the adapter needs git {}.{} or later",
                MIN_VERSION.0, MIN_VERSION.1
            ),
        )),
        None => Err(Failure::new(
            Code::GitUnavailable,
            format!(
                "`git --version` said {:?}, which names no version",
                ptd_wire::terminal::cut_at_char_boundary(text.trim(), 100)
            ),
        )),
    }
}

/// `(major, minor)` of `git version 2.47.3` (vendors add suffixes: `2.39.5 (Apple Git-154)`).
pub(super) fn parse_version(text: &str) -> Option<(u32, u32)> {
    let rest = text.trim().strip_prefix("git version ")?;
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_with_vendor_suffixes() {
        assert_eq!(parse_version("git version 2.47.3\n"), Some((2, 47)));
        assert_eq!(
            parse_version("git version 2.39.5 (Apple Git-154)"),
            Some((2, 39))
        );
        assert_eq!(parse_version("git version 2.45.windows.1"), Some((2, 45)));
        assert_eq!(parse_version("hub version 2.1"), None);
        assert_eq!(parse_version("git version x"), None);
        assert!(parse_version("git version 2.31.0").unwrap() < MIN_VERSION);
    }

    #[test]
    fn only_paths_strictly_beneath_the_root_are_taken() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap().join("root");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(tmp.path().join("other")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("other"), root.join("away")).unwrap();
        assert!(beneath(&root, &root.join(".git"), "git directory").is_ok());
        for bad in [root.clone(), root.join("away"), tmp.path().join("other")] {
            let err = beneath(&root, &bad, "git directory").unwrap_err();
            assert_eq!(err.code, Code::NotARepository, "{bad:?}");
        }
    }
}
