//! `workspace.read`, `workspace.write`, `workspace.edit`, and the atomic replace they share.
//!
//! Owns: the input shapes and outputs of the three file tools, text checks (no NUL byte, valid
//! UTF-8), and [`write_atomic`]. Paths are resolved only through [`Root`]; this file never
//! builds a host path.
//!
//! `read` pages by **lines**: `offset` is how many lines to skip (0 = from the start) and
//! `limit` how many lines to return at most; `content` holds at most
//! [`limits::MAX_READ_BYTES`] bytes and `truncated` is true exactly when the file has bytes after
//! the returned range. `bytes` is the byte length of `content`. A search hit on line `L` is read
//! with `offset: L - 1`.
//!
//! `write` and `edit` replace the file atomically: temp file in the same directory (by handle;
//! mode 0600 while it fills when it replaces a file), data, then the old file's owner (best
//! effort) and permission bits, `fsync`, `renameat`, then a best-effort `fsync` of the
//! directory. Readers see the old file or the new one, never a mix; a failure
//! before the rename removes the temp file and leaves the old content untouched.

use super::path::{parse_path, path_error, Located, PathError, RelPath, Root};
use super::{cut_at_char_boundary, gitdir, limits, quote, Code, GitDir, Input, ToolError};
use ptd_sys::fs::{self, FileType, Mode, OFlags, TempFile};
use serde_json::{json, Value};
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// Read buffer size.
const CHUNK_BYTES: usize = 64 << 10;
/// Flags for opening a file to read: never block on a FIFO, never acquire a terminal.
pub(super) const READ_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK).union(OFlags::NOCTTY);
/// Mode of a newly created file (the umask applies); a replaced file keeps its permission bits.
pub(super) const NEW_FILE_MODE: Mode = Mode::from_raw_mode(0o666);
/// Mode of the temp file while it fills when it replaces an existing file: nobody else may
/// read the new content of a private file before its real mode is restored.
const TEMP_FILE_MODE: Mode = Mode::from_raw_mode(0o600);

/// What a replacement keeps of the file it replaces: permission bits (not setuid/setgid/sticky)
/// and, where the process may set it, the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Keep {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Keep {
    // mode_t is u32 on Linux but u16 on macOS: the conversion is only useless on some targets.
    #[allow(clippy::useless_conversion)]
    fn of_stat(st: &fs::Stat) -> Keep {
        Keep {
            mode: u32::from(st.st_mode) & 0o777,
            uid: st.st_uid,
            gid: st.st_gid,
        }
    }

    pub(super) fn of_metadata(meta: &std::fs::Metadata) -> Keep {
        Keep {
            mode: meta.mode() & 0o777,
            uid: meta.uid(),
            gid: meta.gid(),
        }
    }
}

/// Refuse anything but a regular file behind `fd` (the one reader's check, which also clears
/// `O_NONBLOCK`): the file and its metadata.
fn require_regular(fd: OwnedFd, shown: &str) -> Result<(File, std::fs::Metadata), ToolError> {
    let file = match fs::regular(fd) {
        Ok((file, _)) => file,
        Err(fs::ReadError::NotRegular(FileType::Directory)) => {
            return Err(ToolError::new(
                Code::NotAFile,
                format!(
                    "{} is a directory, not a file; use workspace.search to look inside it",
                    quote(shown)
                ),
            ))
        }
        Err(fs::ReadError::NotRegular(_)) => {
            return Err(ToolError::new(
                Code::NotAFile,
                format!(
                    "{} is not a regular file (a FIFO, socket or device)",
                    quote(shown)
                ),
            ))
        }
        Err(e) => return Err(ToolError::io("inspect", shown, &e.into())),
    };
    let meta = file
        .metadata()
        .map_err(|e| ToolError::io("inspect", shown, &e))?;
    Ok((file, meta))
}

/// `workspace.read {path, offset?, limit?}` → `{path, content, bytes, truncated}`.
pub(super) fn read(root: &Root, input: &Value) -> Result<Value, ToolError> {
    let input = Input::new(input, &["path", "offset", "limit"])?;
    let rel = parse_path(input.string("path")?)?;
    let shown = rel.display();
    let offset = input.opt_u64("offset")?.unwrap_or(0);
    let limit = input.opt_u64("limit")?;
    let fd = root
        .open_beneath(&rel, READ_FLAGS)
        .map_err(|e| path_error(e, &shown))?;
    let (file, _) = require_regular(fd, &shown)?;
    let page = read_lines(&file, offset, limit, limits::MAX_READ_BYTES)
        .map_err(|e| ToolError::io("read", &shown, &e))?;
    if page.saw_nul {
        return Err(binary(&shown));
    }
    let content = match String::from_utf8(page.bytes) {
        Ok(text) => text,
        Err(err) => {
            let utf8 = err.utf8_error();
            // Only the byte cap may cut a character in half; then the page ends before it.
            if page.capped && utf8.error_len().is_none() {
                let mut bytes = err.into_bytes();
                bytes.truncate(utf8.valid_up_to());
                String::from_utf8(bytes).map_err(|_| not_utf8(&shown))?
            } else {
                return Err(not_utf8(&shown));
            }
        }
    };
    let bytes = content.len();
    Ok(json!({
        "path": shown,
        "content": content,
        "bytes": bytes,
        "truncated": page.truncated,
    }))
}

pub(super) fn binary(shown: &str) -> ToolError {
    ToolError::new(
        Code::BinaryFile,
        format!(
            "{} looks like a binary file (it contains a NUL byte); only text files are served",
            quote(shown)
        ),
    )
}

fn not_utf8(shown: &str) -> ToolError {
    ToolError::new(
        Code::NotUtf8,
        format!("{} is not valid UTF-8 text", quote(shown)),
    )
}

/// One page of a file.
#[derive(Debug, Default, PartialEq, Eq)]
struct Page {
    bytes: Vec<u8>,
    /// The file has bytes after `bytes`.
    truncated: bool,
    /// The page stopped because it reached the byte cap (possibly mid-character).
    capped: bool,
    /// A NUL byte was seen in what was read (skipped lines included).
    saw_nul: bool,
}

/// Skip `offset` lines, then take up to `limit` lines and at most `cap` bytes. Memory stays
/// within `cap` plus one buffer, whatever the line lengths.
fn read_lines(
    mut file: impl Read,
    offset: u64,
    limit: Option<u64>,
    cap: usize,
) -> io::Result<Page> {
    let mut page = Page::default();
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut skipped = 0u64;
    let mut taken = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => return Ok(page),
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        let chunk = &buf[..n];
        if chunk.contains(&0) {
            page.saw_nul = true;
            return Ok(page);
        }
        let mut i = 0;
        while skipped < offset && i < n {
            match chunk[i..].iter().position(|&b| b == b'\n') {
                Some(p) => {
                    i += p + 1;
                    skipped += 1;
                }
                None => i = n,
            }
        }
        while i < n {
            if limit == Some(taken) || page.bytes.len() >= cap {
                // There is at least chunk[i], so the file goes on past the page.
                page.capped = page.bytes.len() >= cap && limit != Some(taken);
                page.truncated = true;
                return Ok(page);
            }
            let room = cap - page.bytes.len();
            let line_end = match chunk[i..].iter().position(|&b| b == b'\n') {
                Some(p) => i + p + 1,
                None => n,
            };
            let end = line_end.min(i + room);
            page.bytes.extend_from_slice(&chunk[i..end]);
            if end == line_end && chunk[end - 1] == b'\n' {
                taken += 1;
            }
            i = end;
        }
    }
}

/// `workspace.write {path, content, create_dirs?}` → `{path, bytes}`.
pub(super) fn write(root: &Root, input: &Value, git: GitDir) -> Result<Value, ToolError> {
    let input = Input::new(input, &["path", "content", "create_dirs"])?;
    let rel = parse_path(input.string("path")?)?;
    let shown = rel.display();
    let content = input.string("content")?;
    let create_dirs = input.opt_bool("create_dirs")?.unwrap_or(false);
    if content.len() > limits::MAX_WRITE_BYTES {
        return Err(too_large_content(content.len()));
    }
    let (located, name) = locate_file(root, &rel, &shown, create_dirs, git)?;
    let keep = match fs::lstat_at(located.parent.as_fd(), &name) {
        Ok(st) if fs::kind(&st) == FileType::RegularFile => Some(Keep::of_stat(&st)),
        Ok(st) if fs::kind(&st) == FileType::Directory => return Err(is_directory(&shown)),
        Ok(_) => {
            return Err(ToolError::new(
                Code::NotAFile,
                format!(
                    "{} exists and is not a regular file; it is not replaced",
                    quote(&shown)
                ),
            ))
        }
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => None,
        Err(err) => return Err(ToolError::io("inspect", &shown, &err)),
    };
    write_atomic(
        located.parent.as_fd(),
        &name,
        content.as_bytes(),
        keep,
        &mut || Ok(()),
    )
    .map_err(|e| ToolError::io("write", &shown, &e))?;
    Ok(json!({"path": shown, "bytes": content.len()}))
}

fn too_large_content(len: usize) -> ToolError {
    ToolError::new(
        Code::TooLarge,
        format!(
            "the new content is {len} bytes, over the {}-byte limit",
            limits::MAX_WRITE_BYTES
        ),
    )
}

fn is_directory(shown: &str) -> ToolError {
    ToolError::new(
        Code::NotAFile,
        format!("{} is a directory, not a file", quote(shown)),
    )
}

/// Resolve `rel` for writing: its parent directory handle and its final name. Unless `git`
/// allows it, a target inside a git directory is refused (`gitdir.rs`).
pub(super) fn locate_file(
    root: &Root,
    rel: &RelPath,
    shown: &str,
    create_dirs: bool,
    git: GitDir,
) -> Result<(Located, CString), ToolError> {
    if rel.is_root() {
        return Err(is_directory(shown));
    }
    let guard: Option<super::path::Guard<'_>> = match git {
        GitDir::Protected => Some(&gitdir::check),
        GitDir::Allowed => None,
    };
    // Named in the request itself: refused before anything is looked up (the guard sees the
    // names symlinks lead to).
    if guard.is_some() && rel.components().any(|c| gitdir::is_dot_git(c.as_bytes())) {
        return Err(gitdir::denied(shown, gitdir::IN_DOT_GIT));
    }
    let mut located = root.locate(rel, create_dirs, guard).map_err(|e| match e {
        PathError::NotFound if !create_dirs => ToolError::new(
            Code::NotFound,
            format!(
                "the parent directory of {} does not exist; set create_dirs: true to create it",
                quote(shown)
            ),
        ),
        other => path_error(other, shown),
    })?;
    match located.name.take() {
        Some(name) => Ok((located, name)),
        None => Err(is_directory(shown)),
    }
}

/// `workspace.edit {path, old, new}` → `{path, bytes}`: replace the one occurrence of `old`.
pub(super) fn edit(root: &Root, input: &Value, git: GitDir) -> Result<Value, ToolError> {
    let input = Input::new(input, &["path", "old", "new"])?;
    let rel = parse_path(input.string("path")?)?;
    let shown = rel.display();
    let old = input.string("old")?;
    let new = input.string("new")?;
    if old.is_empty() {
        return Err(ToolError::new(
            Code::InvalidInput,
            "input.old is empty; it must be the exact text to replace",
        ));
    }
    let (located, name) = locate_file(root, &rel, &shown, false, git)?;
    let (bytes, meta) = read_for_change(located.parent.as_fd(), &name, &shown)?;
    let text = String::from_utf8(bytes).map_err(|_| not_utf8(&shown))?;
    let at = find_exactly_one(&text, old).map_err(|count| {
        let snippet = cut_at_char_boundary(old, 80);
        match count {
            0 => ToolError::new(
                Code::NoMatch,
                format!("input.old does not occur in {}", quote(&shown)),
            )
            .with_details(json!({"occurrences": 0, "old_prefix": snippet})),
            n => ToolError::new(
                Code::AmbiguousMatch,
                format!(
                    "input.old occurs {}{n} times in {}; include more surrounding text so it occurs exactly once",
                    if n >= MAX_COUNTED { "at least " } else { "" },
                    quote(&shown)
                ),
            )
            .with_details(json!({"occurrences": n, "old_prefix": snippet})),
        }
    })?;
    let new_len = text.len() - old.len() + new.len();
    if new_len > limits::MAX_WRITE_BYTES {
        return Err(too_large_content(new_len));
    }
    let mut edited = String::with_capacity(new_len);
    edited.push_str(&text[..at]);
    edited.push_str(new);
    edited.push_str(&text[at + old.len()..]);
    write_atomic(
        located.parent.as_fd(),
        &name,
        edited.as_bytes(),
        Some(Keep::of_metadata(&meta)),
        &mut || Ok(()),
    )
    .map_err(|e| ToolError::io("write", &shown, &e))?;
    Ok(json!({"path": shown, "bytes": edited.len()}))
}

/// The whole of the regular file `name` in `dir` (not through a symlink), to change it: at most
/// [`limits::MAX_WRITE_BYTES`], without a NUL byte; and its metadata.
pub(super) fn read_for_change(
    dir: BorrowedFd<'_>,
    name: &CStr,
    shown: &str,
) -> Result<(Vec<u8>, std::fs::Metadata), ToolError> {
    let fd = fs::open_at(dir, name, READ_FLAGS | OFlags::NOFOLLOW, Mode::empty())
        .map_err(|e| path_error(e.into(), shown))?;
    let (file, meta) = require_regular(fd, shown)?;
    let max = limits::MAX_WRITE_BYTES as u64;
    if meta.len() > max {
        return Err(ToolError::new(
            Code::TooLarge,
            format!(
                "{} is {} bytes, over the {max}-byte limit for changes",
                quote(shown),
                meta.len()
            ),
        ));
    }
    let mut bytes = Vec::new();
    (&file)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::io("read", shown, &e))?;
    if bytes.len() as u64 > max {
        return Err(ToolError::new(
            Code::TooLarge,
            format!(
                "{} grew over the {max}-byte limit while being read",
                quote(shown)
            ),
        ));
    }
    if bytes.contains(&0) {
        return Err(binary(shown));
    }
    Ok((bytes, meta))
}

/// Occurrences counted before an edit is called ambiguous without counting further.
const MAX_COUNTED: usize = 1000;

/// The byte offset of the only occurrence of `needle` (overlapping occurrences count: `aa`
/// occurs twice in `aaa`), or how many there are (capped at [`MAX_COUNTED`]).
fn find_exactly_one(haystack: &str, needle: &str) -> Result<usize, usize> {
    let step = needle.chars().next().map_or(1, char::len_utf8);
    let mut found = Vec::new();
    let mut from = 0;
    while found.len() < MAX_COUNTED {
        match haystack[from..].find(needle) {
            Some(p) => {
                found.push(from + p);
                from += p + step;
            }
            None => break,
        }
    }
    match found.as_slice() {
        [only] => Ok(*only),
        many => Err(many.len()),
    }
}

/// Replace `name` in `dir` with `data` atomically. `keep` is what to carry over from the file
/// being replaced (`None`: a new file; the umask decides its mode). `before_rename` runs after
/// the data is durable and before the rename; an error from it (or from any step) removes the
/// temp file, leaves `name` untouched, and is returned. Production passes a no-op; tests
/// inject failures.
pub(super) fn write_atomic(
    dir: BorrowedFd<'_>,
    name: &CStr,
    data: &[u8],
    keep: Option<Keep>,
    before_rename: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<()> {
    let temp = stage(dir, name, data, keep, NEW_FILE_MODE)?;
    before_rename()?;
    temp.replace(name)?;
    // The rename is in place; making the directory entry durable is best effort (some file
    // systems refuse fsync on a directory) and never turns a completed write into a failure.
    let _ = fs::fsync(dir);
    Ok(())
}

/// The first half of [`write_atomic`]: a temp file beside `name` in `dir` holding `data`,
/// durable, with `keep`'s owner and mode (or, for a new file, `new_mode` less the umask). Dropped
/// unpublished, it is removed.
pub(super) fn stage<'d>(
    dir: BorrowedFd<'d>,
    name: &CStr,
    data: &[u8],
    keep: Option<Keep>,
    new_mode: Mode,
) -> io::Result<TempFile<'d>> {
    let create_mode = if keep.is_some() {
        TEMP_FILE_MODE
    } else {
        new_mode
    };
    // A hidden sibling named after `name`; dropped before it is published, it is removed.
    let temp = TempFile::create(dir, name.to_bytes(), create_mode)?;
    let mut file = temp.file();
    file.write_all(data)?;
    if let Some(keep) = keep {
        // Owner first (chown may clear mode bits); refused unless privileged, and then the
        // file simply belongs to us, as any new file would.
        let _ = std::os::unix::fs::fchown(file, Some(keep.uid), Some(keep.gid));
        file.set_permissions(std::fs::Permissions::from_mode(keep.mode))?;
    }
    file.sync_all()?;
    Ok(temp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::workspace::path::Resolver;
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    fn roots(path: &Path) -> [Root; 2] {
        [
            Root::open_with(path, Resolver::Openat2).unwrap(),
            Root::open_with(path, Resolver::Walk).unwrap(),
        ]
    }

    fn code(result: Result<Value, ToolError>) -> &'static str {
        match result {
            Ok(v) => panic!("expected an error, got {v}"),
            Err(e) => {
                assert!(!e.message.contains("/tmp/"), "host path in {:?}", e.message);
                e.code.as_str()
            }
        }
    }

    #[test]
    fn read_returns_the_whole_small_file() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        for root in roots(tmp.path()) {
            let out = read(&root, &json!({"path": "./a.txt"})).unwrap();
            assert_eq!(
                out,
                json!({"path": "a.txt", "bytes": 14, "content": "one\ntwo\nthree\n", "truncated": false})
            );
        }
    }

    #[test]
    fn read_pages_by_lines() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("a.txt"), "one\ntwo\nthree\nfour").unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let page = |o: u64, l: Option<u64>| {
            let mut input = json!({"path": "a.txt", "offset": o});
            if let Some(l) = l {
                input["limit"] = l.into();
            }
            let out = read(&root, &input).unwrap();
            (
                out["content"].as_str().unwrap().to_owned(),
                out["truncated"].as_bool().unwrap(),
            )
        };
        assert_eq!(page(1, Some(2)), ("two\nthree\n".into(), true));
        assert_eq!(page(2, None), ("three\nfour".into(), false));
        assert_eq!(page(3, Some(1)), ("four".into(), false));
        assert_eq!(page(9, None), (String::new(), false));
        assert_eq!(page(0, Some(0)), (String::new(), true));
    }

    #[test]
    fn read_lines_caps_bytes_and_reports_the_cut() {
        let data = "αβγδ\n".repeat(10);
        let page = read_lines(data.as_bytes(), 0, None, 7).unwrap();
        assert_eq!(page.bytes.len(), 7);
        assert!(page.capped && page.truncated);
        // A cut exactly at the end of the file is not truncation.
        let page = read_lines(&b"abc"[..], 0, None, 3).unwrap();
        assert!(!page.truncated);
    }

    #[test]
    fn read_cuts_at_a_character_boundary_when_capped() {
        let tmp = tempfile::tempdir().unwrap();
        // One line of 3-byte characters, longer than the read cap; the cap is not a multiple of 3.
        let line = "€".repeat(limits::MAX_READ_BYTES / 3 + 10);
        fs::write(tmp.path().join("wide.txt"), &line).unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let out = read(&root, &json!({"path": "wide.txt"})).unwrap();
        let content = out["content"].as_str().unwrap();
        assert!(content.len() <= limits::MAX_READ_BYTES && content.len().is_multiple_of(3));
        assert_eq!(out["truncated"], true);
        assert_eq!(out["bytes"], content.len());
    }

    #[test]
    fn read_refuses_binary_non_utf8_directories_and_fifos() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("bin"), b"abc\0def").unwrap();
        fs::write(tmp.path().join("latin1"), b"caf\xe9\n").unwrap();
        fs::create_dir(tmp.path().join("dir")).unwrap();
        let fifo = tmp.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let root = Root::open(tmp.path()).unwrap();
        assert_eq!(code(read(&root, &json!({"path": "bin"}))), "binary_file");
        assert_eq!(code(read(&root, &json!({"path": "latin1"}))), "not_utf8");
        assert_eq!(code(read(&root, &json!({"path": "dir"}))), "not_a_file");
        assert_eq!(code(read(&root, &json!({"path": "."}))), "not_a_file");
        // A FIFO must not block the adapter waiting for a writer.
        assert_eq!(code(read(&root, &json!({"path": "fifo"}))), "not_a_file");
        assert_eq!(code(read(&root, &json!({"path": "nope"}))), "not_found");
    }

    #[test]
    fn read_escapes_are_denied_with_both_resolvers() {
        let tmp = tempfile::tempdir().unwrap();
        let root_dir = tmp.path().join("root");
        fs::create_dir_all(root_dir.join("sub")).unwrap();
        fs::create_dir(tmp.path().join("outside")).unwrap();
        fs::write(tmp.path().join("outside/secret"), "s").unwrap();
        symlink("/etc/passwd", root_dir.join("passwd")).unwrap();
        symlink(tmp.path().join("outside"), root_dir.join("sub/out")).unwrap();
        for root in roots(&root_dir) {
            for path in [
                "passwd",
                "sub/out/secret",
                "../outside/secret",
                "/etc/passwd",
            ] {
                let err = read(&root, &json!({ "path": path })).unwrap_err();
                assert_eq!(err.code, Code::PathOutsideRoot, "{path}");
                assert_eq!(err.code.status().as_str(), "denied");
                assert!(!err.message.contains(tmp.path().to_str().unwrap()));
            }
        }
    }

    #[test]
    fn write_creates_replaces_and_keeps_the_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let out = write(
            &root,
            &json!({"path": "a.txt", "content": "v1"}),
            GitDir::Protected,
        )
        .unwrap();
        assert_eq!(out, json!({"path": "a.txt", "bytes": 2}));
        fs::set_permissions(tmp.path().join("a.txt"), fs::Permissions::from_mode(0o640)).unwrap();
        // Giving the file away needs root; another user checks the mode only.
        let as_root = ptd_sys::skip::root();
        if let Err(unmet) = &as_root {
            ptd_sys::skip::report(&ptd_sys::skip::Unmet {
                reason: format!("the owner's part: {}", unmet.reason),
                ..unmet.clone()
            });
        } else {
            std::os::unix::fs::chown(tmp.path().join("a.txt"), Some(1234), Some(5678)).unwrap();
        }
        write(
            &root,
            &json!({"path": "a.txt", "content": "version 2"}),
            GitDir::Protected,
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(tmp.path().join("a.txt")).unwrap(),
            "version 2"
        );
        let meta = fs::metadata(tmp.path().join("a.txt")).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o640);
        // As root the owner is carried over too.
        if as_root.is_ok() {
            assert_eq!((meta.uid(), meta.gid()), (1234, 5678));
        }
        let leftovers: Vec<_> = fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "temp files left behind");
    }

    #[test]
    fn write_creates_parents_only_when_asked() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let input = json!({"path": "x/y/z.txt", "content": "deep"});
        assert_eq!(code(write(&root, &input, GitDir::Protected)), "not_found");
        assert!(!tmp.path().join("x").exists());
        let mut input = input;
        input["create_dirs"] = true.into();
        write(&root, &input, GitDir::Protected).unwrap();
        assert_eq!(
            fs::read_to_string(tmp.path().join("x/y/z.txt")).unwrap(),
            "deep"
        );
    }

    #[test]
    fn write_through_links_stays_inside() {
        let tmp = tempfile::tempdir().unwrap();
        let root_dir = tmp.path().join("root");
        fs::create_dir_all(root_dir.join("real")).unwrap();
        fs::create_dir(tmp.path().join("outside")).unwrap();
        fs::write(root_dir.join("real/target.md"), "old").unwrap();
        symlink("real/target.md", root_dir.join("alias.md")).unwrap();
        symlink("../outside", root_dir.join("out")).unwrap();
        symlink("/etc/passwd", root_dir.join("passwd")).unwrap();
        let root = Root::open(&root_dir).unwrap();
        // An inside link is written through: the link survives, its target changes.
        write(
            &root,
            &json!({"path": "alias.md", "content": "new"}),
            GitDir::Protected,
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(root_dir.join("real/target.md")).unwrap(),
            "new"
        );
        assert!(fs::symlink_metadata(root_dir.join("alias.md"))
            .unwrap()
            .is_symlink());
        for path in ["out/x.txt", "passwd", "../escape.txt", "/tmp/abs.txt"] {
            let input = json!({"path": path, "content": "pwned", "create_dirs": true});
            assert_eq!(
                code(write(&root, &input, GitDir::Protected)),
                "path_outside_root",
                "{path}"
            );
        }
        assert_eq!(fs::read_dir(tmp.path().join("outside")).unwrap().count(), 0);
    }

    #[test]
    fn write_refuses_directories_and_oversized_content() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("dir")).unwrap();
        let root = Root::open(tmp.path()).unwrap();
        assert_eq!(
            code(write(
                &root,
                &json!({"path": "dir", "content": ""}),
                GitDir::Protected
            )),
            "not_a_file"
        );
        assert_eq!(
            code(write(
                &root,
                &json!({"path": ".", "content": ""}),
                GitDir::Protected
            )),
            "not_a_file"
        );
        let big = "x".repeat(limits::MAX_WRITE_BYTES + 1);
        assert_eq!(
            code(write(
                &root,
                &json!({"path": "big", "content": big}),
                GitDir::Protected
            )),
            "too_large"
        );
        assert_eq!(
            code(write(&root, &json!({"path": "a"}), GitDir::Protected)),
            "invalid_input"
        );
    }

    #[test]
    fn an_interrupted_write_leaves_the_old_file_and_no_temp_file() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("keep.txt"), "old content").unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let rel = RelPath::parse("keep.txt").unwrap();
        let located = root.locate(&rel, false, None).unwrap();
        let name = located.name.clone().unwrap();
        let mut ran = false;
        let err = write_atomic(
            located.parent.as_fd(),
            &name,
            b"new content that must never be seen",
            None,
            &mut || {
                ran = true;
                Err(io::Error::other("simulated crash before rename"))
            },
        )
        .unwrap_err();
        assert!(ran);
        assert_eq!(err.to_string(), "simulated crash before rename");
        assert_eq!(
            fs::read_to_string(tmp.path().join("keep.txt")).unwrap(),
            "old content"
        );
        let names: Vec<_> = fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("keep.txt")]);
    }

    #[test]
    fn edit_replaces_exactly_one_occurrence() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("a.rs"), "fn main() {\n    old();\n}\n").unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let out = edit(
            &root,
            &json!({"path": "a.rs", "old": "old();", "new": "new_call();"}),
            GitDir::Protected,
        )
        .unwrap();
        let text = fs::read_to_string(tmp.path().join("a.rs")).unwrap();
        assert_eq!(text, "fn main() {\n    new_call();\n}\n");
        assert_eq!(out, json!({"path": "a.rs", "bytes": text.len()}));
    }

    #[test]
    fn edit_with_zero_or_two_occurrences_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("a.txt"), "x = 1\nx = 1\n").unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let zero = edit(
            &root,
            &json!({"path": "a.txt", "old": "y", "new": "z"}),
            GitDir::Protected,
        )
        .unwrap_err();
        assert_eq!(zero.code, Code::NoMatch);
        let two = edit(
            &root,
            &json!({"path": "a.txt", "old": "x = 1", "new": "x = 2"}),
            GitDir::Protected,
        )
        .unwrap_err();
        assert_eq!(two.code, Code::AmbiguousMatch);
        assert_eq!(two.details.unwrap()["occurrences"], 2);
        assert_eq!(
            fs::read_to_string(tmp.path().join("a.txt")).unwrap(),
            "x = 1\nx = 1\n"
        );
        // Overlapping occurrences are ambiguous too.
        fs::write(tmp.path().join("b.txt"), "aaa").unwrap();
        let overlap = edit(
            &root,
            &json!({"path": "b.txt", "old": "aa", "new": "b"}),
            GitDir::Protected,
        )
        .unwrap_err();
        assert_eq!(overlap.code, Code::AmbiguousMatch);
        assert_eq!(
            code(edit(
                &root,
                &json!({"path": "a.txt", "old": "", "new": "z"}),
                GitDir::Protected,
            )),
            "invalid_input"
        );
    }

    #[test]
    fn edit_escapes_and_bad_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root_dir = tmp.path().join("root");
        fs::create_dir(&root_dir).unwrap();
        fs::write(tmp.path().join("secret"), "k=v").unwrap();
        symlink("../secret", root_dir.join("rel")).unwrap();
        symlink("/etc/passwd", root_dir.join("passwd")).unwrap();
        fs::write(root_dir.join("bin"), b"a\0b").unwrap();
        let root = Root::open(&root_dir).unwrap();
        for path in ["rel", "passwd", "../secret"] {
            let input = json!({"path": path, "old": "k", "new": "K"});
            assert_eq!(
                code(edit(&root, &input, GitDir::Protected)),
                "path_outside_root",
                "{path}"
            );
        }
        assert_eq!(
            fs::read_to_string(tmp.path().join("secret")).unwrap(),
            "k=v"
        );
        let input = json!({"path": "bin", "old": "a", "new": "b"});
        assert_eq!(code(edit(&root, &input, GitDir::Protected)), "binary_file");
        let input = json!({"path": "missing", "old": "a", "new": "b"});
        assert_eq!(code(edit(&root, &input, GitDir::Protected)), "not_found");
    }

    #[test]
    fn find_exactly_one_counts_overlaps_and_multibyte_needles() {
        assert_eq!(find_exactly_one("abc", "b"), Ok(1));
        assert_eq!(find_exactly_one("abc", "x"), Err(0));
        assert_eq!(find_exactly_one("ééé", "éé"), Err(2));
        assert_eq!(find_exactly_one("aXbXc", "X"), Err(2));
    }
}
