//! `workspace.ls {path?, depth?, max_entries?}` → `{path, entries: [{path, type, bytes?}],
//! truncated}` (SPEC §15.1).
//!
//! Owns the listing. Rules:
//!
//! - `path` (default: the root) must resolve, like every path, beneath the root (symlinks on
//!   the way followed only while they stay inside) and must be a directory.
//! - `depth` (default 1, at most [`limits::MAX_LS_DEPTH`]) is how many levels below `path` are
//!   listed: 1 is its own entries, 2 adds theirs, and so on.
//! - Each entry's `path` is root-relative and `/`-separated, without a trailing slash; `type`
//!   is `file`, `dir`, `symlink` or `other` (FIFO, socket, device), from `lstat`; `bytes` is
//!   given for files only. A **symlink is listed, never followed**: neither its target's type
//!   nor a directory behind it is looked at. Entries named `.git` (directory or file) are left
//!   out, as `search` leaves them out.
//! - Entries come in tree order: a directory is followed by its own entries, siblings in byte
//!   order of their names — the order of sorting the paths component by component.
//! - `truncated` is true when `max_entries` (default [`limits::DEFAULT_LS_ENTRIES`], larger
//!   values clamped to [`limits::MAX_LS_ENTRIES`]) cut the listing, or when a directory had more
//!   names than [`limits::MAX_SEARCH_ENTRIES`] looked at in one call. A directory that cannot be
//!   opened or read below `path` is listed without its entries.
//!
//! Must not: follow a symlink met in the listing, open anything but directories (a file's size
//! comes from `lstat`), or name a host path.

use super::path::{parse_path, path_error, RelPath, Root};
use super::{limits, quote, Code, Input, ToolError};
use ptd_sys::fs::{self, FileType, OFlags};
use serde_json::{json, Map, Value};
use std::os::fd::{AsFd, OwnedFd};

/// `workspace.ls`.
pub(super) fn ls(root: &Root, input: &Value) -> Result<Value, ToolError> {
    let input = Input::new(input, &["path", "depth", "max_entries"])?;
    let rel = match input.opt_string("path")? {
        None | Some("") => RelPath::root(),
        Some(raw) => parse_path(raw)?,
    };
    let depth = match input.opt_u64("depth")? {
        None => limits::DEFAULT_LS_DEPTH,
        Some(0) => {
            return Err(ToolError::new(
                Code::InvalidInput,
                "input.depth must be at least 1",
            ))
        }
        Some(n) if n > limits::MAX_LS_DEPTH as u64 => {
            return Err(ToolError::new(
                Code::InvalidInput,
                format!("input.depth must be at most {}", limits::MAX_LS_DEPTH),
            ))
        }
        Some(n) => n as usize,
    };
    let max_entries = match input.opt_u64("max_entries")? {
        None => limits::DEFAULT_LS_ENTRIES,
        Some(0) => {
            return Err(ToolError::new(
                Code::InvalidInput,
                "input.max_entries must be at least 1",
            ))
        }
        Some(n) => usize::try_from(n)
            .unwrap_or(usize::MAX)
            .min(limits::MAX_LS_ENTRIES),
    };
    let shown = rel.display();
    let fd = root
        .open_beneath(&rel, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY)
        .map_err(|e| path_error(e, &shown))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| ToolError::io("inspect", &shown, &e.into()))?;
    if fs::kind(&st) != FileType::Directory {
        return Err(ToolError::new(
            Code::NotADirectory,
            format!(
                "{} is not a directory; use workspace.read for a file",
                quote(&shown)
            ),
        ));
    }
    let mut listing = Listing {
        entries: Vec::new(),
        max_entries,
        names_seen: 0,
        truncated: false,
    };
    let prefix = if rel.is_root() {
        String::new()
    } else {
        shown.clone()
    };
    listing.dir(fd, &prefix, depth);
    Ok(json!({"path": shown, "entries": listing.entries, "truncated": listing.truncated}))
}

struct Listing {
    entries: Vec<Value>,
    max_entries: usize,
    /// Directory names read so far, against [`limits::MAX_SEARCH_ENTRIES`].
    names_seen: usize,
    truncated: bool,
}

impl Listing {
    /// List `dir` (root-relative `prefix`, "" for the root) and, while `levels` remain, the
    /// directories in it.
    fn dir(&mut self, dir: OwnedFd, prefix: &str, levels: usize) {
        let room = limits::MAX_SEARCH_ENTRIES.saturating_sub(self.names_seen);
        let Ok((mut names, more)) = fs::list_dir(dir.as_fd(), room) else {
            return;
        };
        self.names_seen += names.len();
        if more {
            self.truncated = true;
        }
        names.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in names {
            if entry.name == b".git" {
                continue;
            }
            if self.entries.len() >= self.max_entries {
                self.truncated = true;
                return;
            }
            let name = String::from_utf8_lossy(&entry.name);
            let path = if prefix.is_empty() {
                name.into_owned()
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(cname) = fs::cstring(&entry.name) else {
                continue;
            };
            let mut item = Map::new();
            item.insert("path".into(), Value::String(path.clone()));
            // Gone since the listing: not listed.
            let Ok(st) = fs::lstat_at(dir.as_fd(), &cname) else {
                continue;
            };
            let kind = fs::kind(&st);
            item.insert("type".into(), Value::String(type_name(kind).into()));
            if kind == FileType::RegularFile {
                item.insert("bytes".into(), st.st_size.into());
            }
            self.entries.push(Value::Object(item));
            if kind == FileType::Directory && levels > 1 {
                // Never through a symlink: one swapped in since the lstat is not descended into.
                if let Ok(sub) = fs::open_dir_at(dir.as_fd(), &cname) {
                    self.dir(sub, &path, levels - 1);
                }
            }
            if self.truncated {
                return;
            }
        }
    }
}

fn type_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "file",
        FileType::Directory => "dir",
        FileType::Symlink => "symlink",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::workspace::path::Resolver;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn tree() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        fs::create_dir_all(root.join("sub/deeper/deepest")).unwrap();
        fs::create_dir_all(root.join(".git/objects")).unwrap();
        fs::create_dir_all(tmp.path().join("outside/inner")).unwrap();
        fs::write(root.join("b.txt"), "bee\n").unwrap();
        fs::write(root.join("sub/c.txt"), "sea").unwrap();
        fs::write(root.join("sub-x"), "").unwrap();
        fs::write(root.join("sub/deeper/d.txt"), "d").unwrap();
        symlink(tmp.path().join("outside"), root.join("out")).unwrap();
        tmp
    }

    fn paths(out: &Value) -> Vec<String> {
        out["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{}:{}",
                    e["path"].as_str().unwrap(),
                    e["type"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn lists_one_level_sorted_without_git_and_with_sizes() {
        let tmp = tree();
        let root = Root::open(&tmp.path().join("root")).unwrap();
        let out = ls(&root, &json!({})).unwrap();
        assert_eq!(
            out,
            json!({"path": ".", "truncated": false, "entries": [
                {"path": "b.txt", "type": "file", "bytes": 4},
                {"path": "out", "type": "symlink"},
                {"path": "sub", "type": "dir"},
                {"path": "sub-x", "type": "file", "bytes": 0},
            ]})
        );
    }

    #[test]
    fn depth_walks_in_tree_order_and_never_through_symlinks() {
        let tmp = tree();
        for resolver in [Resolver::Openat2, Resolver::Walk] {
            let root = Root::open_with(&tmp.path().join("root"), resolver).unwrap();
            let out = ls(&root, &json!({"depth": 8})).unwrap();
            assert_eq!(
                paths(&out),
                [
                    "b.txt:file",
                    "out:symlink",
                    "sub:dir",
                    "sub/c.txt:file",
                    "sub/deeper:dir",
                    "sub/deeper/d.txt:file",
                    "sub/deeper/deepest:dir",
                    "sub-x:file"
                ]
            );
            let out = ls(&root, &json!({"path": "sub", "depth": 2})).unwrap();
            assert_eq!(out["path"], "sub");
            assert_eq!(
                paths(&out),
                [
                    "sub/c.txt:file",
                    "sub/deeper:dir",
                    "sub/deeper/d.txt:file",
                    "sub/deeper/deepest:dir"
                ]
            );
            let err = ls(&root, &json!({"path": "out"})).unwrap_err();
            assert_eq!(err.code, Code::PathOutsideRoot);
        }
    }

    #[test]
    fn max_entries_truncates_and_bad_inputs_are_refused() {
        let tmp = tree();
        let root = Root::open(&tmp.path().join("root")).unwrap();
        let out = ls(&root, &json!({"depth": 3, "max_entries": 3})).unwrap();
        assert_eq!(paths(&out), ["b.txt:file", "out:symlink", "sub:dir"]);
        assert_eq!(out["truncated"], true);
        let exact = ls(&root, &json!({"max_entries": 4})).unwrap();
        assert_eq!(exact["truncated"], false);
        for (input, code) in [
            (json!({"depth": 0}), Code::InvalidInput),
            (json!({"depth": 9}), Code::InvalidInput),
            (json!({"max_entries": 0}), Code::InvalidInput),
            (json!({"depht": 2}), Code::InvalidInput),
            (json!({"path": "b.txt"}), Code::NotADirectory),
            (json!({"path": "nope"}), Code::NotFound),
            (json!({"path": "../outside"}), Code::PathOutsideRoot),
            (json!({"path": "/etc"}), Code::PathOutsideRoot),
        ] {
            assert_eq!(ls(&root, &input).unwrap_err().code, code, "{input}");
        }
    }
}
