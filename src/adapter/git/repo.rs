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
use super::{Code, Failure};
use std::path::{Path, PathBuf};

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
    beneath(git.root(), Path::new(common_dir), "common git directory")?;
    git.set_git_dir(git_dir);
    Ok(())
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
                crate::terminal::cut_at_char_boundary(text.trim(), 100)
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
