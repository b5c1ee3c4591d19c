//! `workspace.search {pattern, path?, glob?, max_results?}` → `{matches: [{path, line, text}],
//! truncated}`: a small `rg`.
//!
//! Owns the walk and the matching. Rules, chosen to be `rg`-like and bounded:
//!
//! - `pattern` is a `regex` crate regular expression matched against each line (without its
//!   `\n` / `\r\n`); `line` is 1-based; `text` is the line, cut to
//!   [`limits::MAX_LINE_TEXT_BYTES`] at a character boundary. Invalid UTF-8 is shown lossily.
//! - `path` (default: the root) may name a directory or a single file; it is resolved like every
//!   other path (symlinks followed only while they stay inside the root). During the walk
//!   **symlinks are never followed** (like `rg` without `-L`) and every entry is opened with
//!   `O_NOFOLLOW` relative to its directory handle, so nothing outside the root is ever read.
//! - `glob` is one glob or an array of them. A glob containing `/` is matched against the
//!   root-relative path, otherwise against the file name (`*.rs` matches at any depth). A glob
//!   starting with `!` excludes (files, and directories whose subtrees are then skipped).
//!   With only exclusions, every other file is searched. Globs do not filter a `path` that
//!   names a file.
//! - Skipped silently: `.git` directories met during the walk, files over
//!   [`limits::MAX_SEARCH_FILE_BYTES`], binary files (a NUL byte), special files, and entries
//!   that cannot be opened. Entries are visited in byte order of their names, so output is
//!   deterministic.
//! - `truncated` is true when more than `max_results` matches exist, or when a walk bound
//!   (files, entries, depth) stopped the search early.

use super::path::{parse_path, path_error};
use super::path::{RelPath, Root};
use super::{cut_at_char_boundary, limits, Code, Input, ToolError};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use ptd_sys::fs::{self, EntryKind, Mode, OFlags};
use regex::{Regex, RegexBuilder};
use serde_json::{json, Value};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};

const OPEN_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::NOFOLLOW);

/// `workspace.search`.
pub(super) fn search(root: &Root, input: &Value) -> Result<Value, ToolError> {
    let input = Input::new(input, &["pattern", "path", "glob", "max_results"])?;
    let regex = compile(input.string("pattern")?)?;
    let rel = match input.opt_string("path")? {
        None | Some("") => RelPath::root(),
        Some(raw) => parse_path(raw)?,
    };
    let filter = GlobFilter::new(input.opt_value("glob"))?;
    let max_results = match input.opt_u64("max_results")? {
        None => limits::DEFAULT_MAX_RESULTS,
        Some(0) => {
            return Err(ToolError::new(
                Code::InvalidInput,
                "input.max_results must be at least 1",
            ))
        }
        Some(n) => n.min(limits::MAX_RESULTS),
    };
    let shown = rel.display();
    let fd = root
        .open_beneath(&rel, OPEN_FLAGS.difference(OFlags::NOFOLLOW))
        .map_err(|e| path_error(e, &shown))?;
    let file = File::from(fd);
    let meta = file
        .metadata()
        .map_err(|e| ToolError::io("inspect", &shown, &e))?;
    let mut walk = Walk {
        regex,
        filter,
        max_results: usize::try_from(max_results).unwrap_or(usize::MAX),
        matches: Vec::new(),
        truncated: false,
        files: 0,
        entries: 0,
    };
    if meta.is_dir() {
        let prefix = if rel.is_root() { String::new() } else { shown };
        walk.dir(OwnedFd::from(file), &prefix, 0);
    } else if meta.is_file() {
        walk.file(OwnedFd::from(file), &shown);
    } else {
        return Err(ToolError::new(
            Code::NotAFile,
            format!(
                "{} is neither a directory nor a regular file",
                super::quote(&shown)
            ),
        ));
    }
    Ok(json!({"matches": walk.matches, "truncated": walk.truncated}))
}

fn compile(pattern: &str) -> Result<Regex, ToolError> {
    if pattern.len() > limits::MAX_PATTERN_BYTES {
        return Err(ToolError::new(
            Code::InvalidPattern,
            format!(
                "input.pattern is longer than {} bytes",
                limits::MAX_PATTERN_BYTES
            ),
        ));
    }
    RegexBuilder::new(pattern)
        .size_limit(limits::MAX_REGEX_BYTES)
        .dfa_size_limit(limits::MAX_REGEX_BYTES)
        .build()
        .map_err(|err| {
            // The regex crate's message is several lines (pattern, caret, reason); the last
            // line is the reason, the whole text goes to details.
            let full = err.to_string();
            let reason = full.lines().last().unwrap_or("").trim();
            let reason = reason.strip_prefix("error: ").unwrap_or(reason);
            ToolError::new(
                Code::InvalidPattern,
                format!("input.pattern is not a valid regular expression: {reason}"),
            )
            .with_details(json!({ "regex_error": full }))
        })
}

/// Include and exclude globs, each split into those matched on the path and on the name.
struct GlobFilter {
    include_path: GlobSet,
    include_name: GlobSet,
    has_include: bool,
    exclude_path: GlobSet,
    exclude_name: GlobSet,
}

impl GlobFilter {
    fn new(glob: Option<&Value>) -> Result<GlobFilter, ToolError> {
        let wrong = || {
            ToolError::new(
                Code::InvalidInput,
                "input.glob must be a string or an array of strings",
            )
        };
        let globs: Vec<&str> = match glob {
            None => Vec::new(),
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().ok_or_else(wrong))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(wrong()),
        };
        if globs.len() > limits::MAX_GLOBS {
            return Err(ToolError::new(
                Code::InvalidInput,
                format!("input.glob has more than {} globs", limits::MAX_GLOBS),
            ));
        }
        let mut sets: [GlobSetBuilder; 4] = std::array::from_fn(|_| GlobSetBuilder::new());
        let mut has_include = false;
        for raw in globs {
            if raw.len() > limits::MAX_GLOB_BYTES {
                return Err(ToolError::new(
                    Code::InvalidPattern,
                    format!("a glob is longer than {} bytes", limits::MAX_GLOB_BYTES),
                ));
            }
            let (exclude, text) = match raw.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, raw),
            };
            if text.is_empty() {
                return Err(ToolError::new(Code::InvalidPattern, "a glob is empty"));
            }
            let glob = GlobBuilder::new(text)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|err| {
                    ToolError::new(
                        Code::InvalidPattern,
                        format!(
                            "input.glob {:?} is not a valid glob: {}",
                            cut_at_char_boundary(raw, 128),
                            err.kind()
                        ),
                    )
                })?;
            let on_path = text.contains('/');
            has_include |= !exclude;
            sets[usize::from(exclude) * 2 + usize::from(on_path)].add(glob);
        }
        let build = |b: &GlobSetBuilder| {
            b.build().map_err(|err| {
                // The error quotes the glob as the request wrote it.
                let err = err.to_string();
                ToolError::new(
                    Code::InvalidPattern,
                    format!("input.glob: {}", ptd_wire::terminal::escape(&err)),
                )
            })
        };
        Ok(GlobFilter {
            include_name: build(&sets[0])?,
            include_path: build(&sets[1])?,
            exclude_name: build(&sets[2])?,
            exclude_path: build(&sets[3])?,
            has_include,
        })
    }

    fn excluded(&self, path: &str, name: &str) -> bool {
        self.exclude_path.is_match(path) || self.exclude_name.is_match(name)
    }

    fn wants_file(&self, path: &str, name: &str) -> bool {
        let included = !self.has_include
            || self.include_path.is_match(path)
            || self.include_name.is_match(name);
        included && !self.excluded(path, name)
    }
}

struct Walk {
    regex: Regex,
    filter: GlobFilter,
    max_results: usize,
    matches: Vec<Value>,
    truncated: bool,
    files: usize,
    entries: usize,
}

impl Walk {
    /// True once nothing more may be added.
    fn done(&self) -> bool {
        self.truncated
    }

    /// Search the directory `dir`, whose root-relative path is `prefix` ("" for the root).
    fn dir(&mut self, dir: OwnedFd, prefix: &str, depth: usize) {
        if depth > limits::MAX_SEARCH_DEPTH {
            self.truncated = true;
            return;
        }
        let room = limits::MAX_SEARCH_ENTRIES.saturating_sub(self.entries);
        let Ok((mut entries, more)) = fs::list_dir(dir.as_fd(), room) else {
            return;
        };
        if more {
            self.truncated = true;
        }
        self.entries += entries.len();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            if self.done() {
                return;
            }
            let name = String::from_utf8_lossy(&entry.name).into_owned();
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(cname) = fs::cstring(&entry.name) else {
                continue;
            };
            match entry.kind {
                EntryKind::Symlink | EntryKind::Other => {}
                EntryKind::Dir => {
                    if entry.name == b".git" || self.filter.excluded(&path, &name) {
                        continue;
                    }
                    if let Ok(fd) = fs::open_dir_at(dir.as_fd(), &cname) {
                        self.dir(fd, &path, depth + 1);
                    }
                }
                EntryKind::File | EntryKind::Unknown => {
                    if entry.kind == EntryKind::File && !self.filter.wants_file(&path, &name) {
                        continue;
                    }
                    // O_NOFOLLOW: an entry swapped for a symlink since the listing is skipped.
                    let Ok(fd) = fs::open_at(dir.as_fd(), &cname, OPEN_FLAGS, Mode::empty()) else {
                        continue;
                    };
                    let file = File::from(fd);
                    let Ok(meta) = file.metadata() else { continue };
                    if meta.is_dir() {
                        if entry.name != b".git" && !self.filter.excluded(&path, &name) {
                            self.dir(OwnedFd::from(file), &path, depth + 1);
                        }
                    } else if meta.is_file() && self.filter.wants_file(&path, &name) {
                        self.file(OwnedFd::from(file), &path);
                    }
                }
            }
        }
    }

    /// Search one regular file, shown as `path` (read by the one reader: what is not a
    /// regular file, or is over the cap, is skipped).
    fn file(&mut self, fd: OwnedFd, path: &str) {
        if self.files >= limits::MAX_SEARCH_FILES {
            self.truncated = true;
            return;
        }
        self.files += 1;
        let Ok(bytes) = fs::read_opened(fd, limits::MAX_SEARCH_FILE_BYTES) else {
            return;
        };
        if bytes.contains(&0) {
            return;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (index, line) in text.lines().enumerate() {
            if !self.regex.is_match(line) {
                continue;
            }
            if self.matches.len() >= self.max_results {
                self.truncated = true;
                return;
            }
            self.matches.push(json!({
                "path": path,
                "line": index + 1,
                "text": cut_at_char_boundary(line, limits::MAX_LINE_TEXT_BYTES),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::workspace::path::Resolver;
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    fn tree() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        fs::create_dir_all(root.join("src/nested")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(tmp.path().join("outside")).unwrap();
        fs::write(root.join("README.md"), "# needle in readme\n").unwrap();
        fs::write(root.join("src/main.rs"), "fn main() {\n    needle();\n}\n").unwrap();
        fs::write(
            root.join("src/nested/lib.rs"),
            "// needle\r\nno\nneedle again\n",
        )
        .unwrap();
        fs::write(root.join("src/blob.bin"), b"needle\0binary").unwrap();
        fs::write(root.join(".git/config"), "needle in git\n").unwrap();
        fs::write(tmp.path().join("outside/secret.rs"), "needle outside\n").unwrap();
        tmp
    }

    fn run(root: &Path, input: Value) -> Result<Value, ToolError> {
        search(&Root::open(root).unwrap(), &input)
    }

    fn paths(out: &Value) -> Vec<String> {
        out["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| format!("{}:{}", m["path"].as_str().unwrap(), m["line"]))
            .collect()
    }

    #[test]
    fn finds_lines_in_order_skipping_binary_and_git() {
        let tmp = tree();
        let out = run(&tmp.path().join("root"), json!({"pattern": "needle"})).unwrap();
        assert_eq!(
            paths(&out),
            [
                "README.md:1",
                "src/main.rs:2",
                "src/nested/lib.rs:1",
                "src/nested/lib.rs:3"
            ]
        );
        assert_eq!(out["truncated"], false);
        assert_eq!(out["matches"][2]["text"], "// needle");
    }

    #[test]
    fn sub_path_glob_and_cap() {
        let tmp = tree();
        let root = tmp.path().join("root");
        let out = run(&root, json!({"pattern": "needle", "path": "src/nested"})).unwrap();
        assert_eq!(paths(&out), ["src/nested/lib.rs:1", "src/nested/lib.rs:3"]);
        let out = run(&root, json!({"pattern": "needle", "glob": "*.rs"})).unwrap();
        assert_eq!(paths(&out).len(), 3);
        let out = run(&root, json!({"pattern": "needle", "glob": "src/*.rs"})).unwrap();
        assert_eq!(paths(&out), ["src/main.rs:2"]);
        let out = run(
            &root,
            json!({"pattern": "needle", "glob": ["!nested", "!*.md"]}),
        )
        .unwrap();
        assert_eq!(paths(&out), ["src/main.rs:2"]);
        let out = run(&root, json!({"pattern": "needle", "max_results": 2})).unwrap();
        assert_eq!(paths(&out).len(), 2);
        assert_eq!(out["truncated"], true);
        let out = run(&root, json!({"pattern": "needle", "path": "src/main.rs"})).unwrap();
        assert_eq!(paths(&out), ["src/main.rs:2"]);
    }

    #[test]
    fn never_follows_symlinks_out_of_the_root() {
        let tmp = tree();
        let root = tmp.path().join("root");
        symlink(tmp.path().join("outside"), root.join("src/out-abs")).unwrap();
        symlink("../../outside", root.join("src/out-rel")).unwrap();
        symlink("/etc/passwd", root.join("passwd")).unwrap();
        symlink("nested", root.join("src/inside-link")).unwrap();
        for resolver in [Resolver::Openat2, Resolver::Walk] {
            let r = Root::open_with(&root, resolver).unwrap();
            let out = search(&r, &json!({"pattern": "needle|root"})).unwrap();
            let text = out.to_string();
            assert!(
                !text.contains("outside") && !text.contains("root:"),
                "{text}"
            );
            // Inside links are not walked either (no duplicates), like rg without -L.
            assert_eq!(paths(&out).len(), 4);
            for path in ["src/out-abs", "src/out-rel", "passwd", "/etc", "../outside"] {
                let err = search(&r, &json!({"pattern": "x", "path": path})).unwrap_err();
                assert_eq!(err.code, Code::PathOutsideRoot, "{path}");
            }
            // A sub-path that is an inside link is followed.
            let out = search(&r, &json!({"pattern": "needle", "path": "src/inside-link"})).unwrap();
            assert_eq!(
                paths(&out),
                ["src/inside-link/lib.rs:1", "src/inside-link/lib.rs:3"]
            );
        }
    }

    #[test]
    fn bad_patterns_and_inputs_have_clear_codes() {
        let tmp = tree();
        let root = tmp.path().join("root");
        let err = run(&root, json!({"pattern": "("})).unwrap_err();
        assert_eq!(err.code, Code::InvalidPattern);
        assert!(!err.message.contains('\n'), "{}", err.message);
        let err = run(&root, json!({"pattern": "a", "glob": "[z-a"})).unwrap_err();
        assert_eq!(err.code, Code::InvalidPattern);
        let err = run(&root, json!({"pattern": "a", "glob": 3})).unwrap_err();
        assert_eq!(err.code, Code::InvalidInput);
        let err = run(&root, json!({"pattern": "a", "max_results": 0})).unwrap_err();
        assert_eq!(err.code, Code::InvalidInput);
        let err = run(&root, json!({"path": "src"})).unwrap_err();
        assert_eq!(err.code, Code::InvalidInput);
        let err = run(&root, json!({"pattern": "a", "path": "nope"})).unwrap_err();
        assert_eq!(err.code, Code::NotFound);
        let huge = "a".repeat(limits::MAX_PATTERN_BYTES + 1);
        let err = run(&root, json!({ "pattern": huge })).unwrap_err();
        assert_eq!(err.code, Code::InvalidPattern);
    }

    #[test]
    fn long_lines_are_cut_at_a_character_boundary() {
        let tmp = tempfile::tempdir().unwrap();
        let line = format!("needle {}", "é".repeat(2000));
        fs::write(tmp.path().join("long.txt"), &line).unwrap();
        let out = run(tmp.path(), json!({"pattern": "needle"})).unwrap();
        let text = out["matches"][0]["text"].as_str().unwrap();
        assert!(text.len() <= limits::MAX_LINE_TEXT_BYTES && text.starts_with("needle "));
    }

    #[test]
    fn oversized_files_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let big = vec![b'n'; limits::MAX_SEARCH_FILE_BYTES as usize + 1];
        fs::write(tmp.path().join("big.txt"), big).unwrap();
        fs::write(tmp.path().join("small.txt"), "n\n").unwrap();
        let out = run(tmp.path(), json!({"pattern": "^n"})).unwrap();
        assert_eq!(paths(&out), ["small.txt:1"]);
    }
}
