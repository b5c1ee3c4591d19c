//! From `replay`'s arguments to the list of files to read: explicit files as given, folders
//! searched for `*.case.json`.
//!
//! Invariants:
//! - Bounded: folders deeper than [`MAX_DEPTH`] are not entered, a folder lists at most
//!   [`MAX_ENTRIES`] names, a walk yields at most [`MAX_FILES`] files; whatever a bound cuts
//!   off becomes a [`Source`] with a problem, so the suite fails instead of silently shrinking.
//! - No loops: symlinked folders are never entered (subfolders are opened with `O_NOFOLLOW`),
//!   and a folder seen before (a bind mount of an ancestor) is not entered twice.
//! - Deterministic: each argument's files come out sorted by path bytes; arguments keep their
//!   order; a path given twice is read once.
//!
//! It must not open the files it lists (that is `cases`), so a FIFO named `x.case.json` costs
//! nothing here.

use ptd_sys::fs::{self, EntryKind, FileType};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How a case file's name ends.
pub(crate) const CASE_SUFFIX: &str = ".case.json";
/// Deepest folder entered below an argument.
pub const MAX_DEPTH: usize = 32;
/// Most names read from one folder.
pub(crate) const MAX_ENTRIES: usize = 100_000;
/// Most files one folder argument yields.
pub(crate) const MAX_FILES: usize = 100_000;

/// One file to read, or a place that could not be searched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub path: PathBuf,
    /// Why this path yields a failed case instead of cases (unreadable folder, a bound hit).
    pub problem: Option<String>,
}

impl Source {
    fn file(path: PathBuf) -> Source {
        Source {
            path,
            problem: None,
        }
    }

    fn problem(path: PathBuf, problem: String) -> Source {
        Source {
            path,
            problem: Some(problem),
        }
    }
}

/// The files named by `args`, in order: a folder's case files sorted, anything else as given
/// (reading it decides whether it is a case, a transcript, or a failure). Notes about what was
/// deliberately not followed go to `warnings`.
pub fn collect(args: &[PathBuf], warnings: &mut Vec<String>) -> Vec<Source> {
    let mut out: Vec<Source> = Vec::new();
    let mut seen_paths = HashSet::new();
    for arg in args {
        let found = match std::fs::metadata(arg) {
            Ok(meta) if meta.is_dir() => walk(arg, warnings),
            // Missing, unreadable, a regular file, a FIFO: `cases` says which, when it reads.
            _ => vec![Source::file(arg.clone())],
        };
        for source in found {
            if seen_paths.insert(source.path.clone()) {
                out.push(source);
            }
        }
    }
    out
}

/// Every `*.case.json` below `root`, sorted by path bytes.
fn walk(root: &Path, warnings: &mut Vec<String>) -> Vec<Source> {
    let mut out = Vec::new();
    let dir = match fs::open_dir_path(root) {
        Ok(dir) => dir,
        Err(e) => {
            return vec![Source::problem(
                root.to_path_buf(),
                format!("the folder cannot be read: {e}"),
            )]
        }
    };
    let mut seen = HashSet::new();
    let mut stack: Vec<(PathBuf, OwnedFd, usize)> = vec![(root.to_path_buf(), dir, 0)];
    let mut files = 0usize;
    while let Some((path, dir, depth)) = stack.pop() {
        if let Ok(st) = rustix::fs::fstat(&dir) {
            if !seen.insert((st.st_dev, st.st_ino)) {
                warnings.push(format!(
                    "not entering {} again: it is a folder already searched (a bind mount?)",
                    show(&path)
                ));
                continue;
            }
        }
        let (entries, more) = match fs::list_dir(dir.as_fd(), MAX_ENTRIES) {
            Ok(listing) => listing,
            Err(e) => {
                out.push(Source::problem(
                    path,
                    format!("the folder cannot be listed: {e}"),
                ));
                continue;
            }
        };
        if more {
            out.push(Source::problem(
                path.clone(),
                format!(
                    "the folder has more than {MAX_ENTRIES} entries; the rest were not searched"
                ),
            ));
        }
        for entry in entries {
            let name = OsStr::from_bytes(&entry.name);
            let child = path.join(name);
            let kind = match entry.kind {
                EntryKind::Unknown => fs::cstring(&entry.name)
                    .and_then(|c| fs::lstat_at(dir.as_fd(), &c))
                    .map(|st| EntryKind::from(fs::kind(&st)))
                    .unwrap_or(EntryKind::Other),
                known => known,
            };
            let is_case = entry.name.ends_with(CASE_SUFFIX.as_bytes());
            match kind {
                EntryKind::Dir if depth + 1 > MAX_DEPTH => out.push(Source::problem(
                    child,
                    format!("the folder is more than {MAX_DEPTH} levels deep; it was not searched"),
                )),
                EntryKind::Dir => {
                    match fs::cstring(&entry.name).and_then(|c| fs::open_dir_at(dir.as_fd(), &c)) {
                        Ok(sub) => stack.push((child, sub, depth + 1)),
                        Err(e) => out.push(Source::problem(
                            child,
                            format!("the folder cannot be read: {e}"),
                        )),
                    }
                }
                // A symlink named like a case is read like one (it may point at a file); a
                // symlinked folder is never entered.
                EntryKind::Symlink
                    if !is_case && std::fs::metadata(&child).is_ok_and(|m| m.is_dir()) =>
                {
                    warnings.push(format!(
                        "not following the symbolic link {} to a folder",
                        show(&child)
                    ));
                }
                _ if is_case => {
                    files += 1;
                    if files > MAX_FILES {
                        out.push(Source::problem(
                            root.to_path_buf(),
                            format!("more than {MAX_FILES} case files; the rest were not read"),
                        ));
                        return sorted(out);
                    }
                    out.push(Source::file(child));
                }
                _ => {}
            }
        }
    }
    sorted(out)
}

fn sorted(mut sources: Vec<Source>) -> Vec<Source> {
    sources.sort_by(|a, b| {
        a.path
            .as_os_str()
            .as_bytes()
            .cmp(b.path.as_os_str().as_bytes())
    });
    sources
}

/// A path as printed: lossy UTF-8, control characters escaped.
pub fn show(path: &Path) -> String {
    super::escape_controls(&path.to_string_lossy())
}

/// What a file type is called in messages.
pub fn describe(kind: FileType) -> &'static str {
    fs::describe(kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn names(sources: &[Source], root: &Path) -> Vec<String> {
        sources
            .iter()
            .map(|s| {
                let rel = s.path.strip_prefix(root).unwrap_or(&s.path);
                match &s.problem {
                    None => rel.display().to_string(),
                    Some(p) => format!("{} ! {p}", rel.display()),
                }
            })
            .collect()
    }

    #[test]
    fn folders_yield_sorted_case_files_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for f in [
            "b.case.json",
            "a/z.case.json",
            "a/y.json",
            "a-b.case.json",
            "c/d/e.case.json",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "{}").unwrap();
        }
        let mut warnings = Vec::new();
        let got = collect(&[root.to_path_buf()], &mut warnings);
        assert_eq!(
            names(&got, root),
            [
                "a-b.case.json",
                "a/z.case.json",
                "b.case.json",
                "c/d/e.case.json"
            ]
        );
        assert!(warnings.is_empty());
    }

    #[test]
    fn symlinked_folders_are_not_entered_even_in_a_loop() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/x.case.json"), "{}").unwrap();
        symlink("..", root.join("d/up")).unwrap();
        symlink("d", root.join("again")).unwrap();
        let mut warnings = Vec::new();
        let got = collect(&[root.to_path_buf()], &mut warnings);
        assert_eq!(names(&got, root), ["d/x.case.json"]);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings.iter().all(|w| w.contains("not following")));
    }

    #[test]
    fn a_too_deep_tree_is_a_problem_not_a_silent_cut() {
        let tmp = tempfile::tempdir().unwrap();
        let mut deep = tmp.path().to_path_buf();
        for _ in 0..=MAX_DEPTH {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("x.case.json"), "{}").unwrap();
        let got = collect(&[tmp.path().to_path_buf()], &mut Vec::new());
        assert_eq!(got.len(), 1);
        assert!(
            got[0].problem.as_deref().unwrap().contains("levels deep"),
            "{got:?}"
        );
    }

    #[test]
    fn explicit_paths_are_kept_as_given_and_read_once() {
        let a = PathBuf::from("/nonexistent/a.json");
        let got = collect(&[a.clone(), a.clone()], &mut Vec::new());
        assert_eq!(got, [Source::file(a)]);
    }
}
