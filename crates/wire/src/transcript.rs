//! Transcript files (SPEC §5).
//!
//! It owns the `files/parent-tools` folder of the artifact directory, the safe file names in
//! it, and the `wp-codebox/tool-call-transcript/v1` document. Every system call goes through
//! `ptd_sys::fs` (which also holds `--result-file`'s atomic write). Invariants of every file it
//! publishes:
//!
//! - complete or absent: bytes go to a temp file in the same directory, are fsynced, and appear
//!   under their final name in one step (`renameat2(RENAME_NOREPLACE)`, or `link(2)` where the
//!   filesystem lacks that flag); the directory is fsynced afterwards;
//! - mode 0600 whatever the umask (directories it creates: 0700);
//! - a transcript never replaces an existing file: the next free `-2`, `-3`, … suffix is taken,
//!   so concurrent writers, threads or processes, each get their own file;
//! - `files` and `files/parent-tools` are opened with `O_NOFOLLOW`, once when the directory is
//!   prepared and again at every write, so a symlink there is refused, never followed;
//! - no temp file is left behind when a call returns, on success or on error.
//!
//! It must not redact (callers pass envelopes that `redact.rs` already scrubbed), and its error
//! messages must never name a host path: they travel into `diagnostics` and onto stderr.

use crate::envelope::canonical;
use crate::json::raw::ObjectWriter;
use ptd_sys::fs::{self, FileType, Mode, TempFile};
#[cfg(test)]
use serde_json::{json, Value};
use std::ffi::{CStr, CString};
use std::fmt::{self, Write as _};
use std::io::{self, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The schema id of a transcript document.
pub const SCHEMA: &str = "wp-codebox/tool-call-transcript/v1";
/// Where transcripts live, relative to the artifact directory.
pub(crate) const SUBDIR: &str = "files/parent-tools";
/// The longest name [`safe_name`] returns, in bytes (before any `-N` suffix and `.json`).
pub const MAX_NAME_BYTES: usize = 100;
/// How many suffixes a transcript name may take before [`TranscriptError::NoFreeName`].
pub(crate) const MAX_SUFFIX: u32 = 100_000;

/// Mode of every file published here.
const FILE_MODE: Mode = Mode::from_raw_mode(0o600);
/// Mode of every directory created here.
const DIR_MODE: Mode = Mode::from_raw_mode(0o700);
/// How a temp file's name starts, so a leftover says whose it was.
const TEMP_HINT: &[u8] = b"parent-tool-dispatch";

const ROOT_LABEL: &str = "the artifact directory";

/// Why a transcript could not be written. Messages name places by their role
/// ("the artifact directory", "files/parent-tools"), never by host path.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// Something on the way exists and is not a directory.
    #[error("{0} is not a directory")]
    NotADirectory(&'static str),
    /// `files` or `files/parent-tools` is a symbolic link.
    #[error("{0} is a symbolic link; refusing to follow it")]
    Symlink(&'static str),
    /// A name handed to [`ArtifactDir::write`] that [`safe_name`] would not have produced.
    #[error("the transcript name is not a safe file name")]
    UnsafeName,
    /// Every suffix up to [`MAX_SUFFIX`] is taken.
    #[error("no free transcript name in files/parent-tools: every suffix is taken")]
    NoFreeName,
    /// The document could not be serialized.
    #[error("cannot serialize the transcript: {0}")]
    Serialize(#[source] serde_json::Error),
    /// A system call failed; `action` says which step, in host-path-free words.
    #[error("{action}: {source}")]
    Io {
        action: &'static str,
        #[source]
        source: io::Error,
    },
}

fn io_err(action: &'static str) -> impl FnOnce(io::Error) -> TranscriptError {
    move |source| TranscriptError::Io { action, source }
}

/// One directory below the artifact directory, with its error wording.
struct Level {
    name: &'static CStr,
    label: &'static str,
    create: &'static str,
    open: &'static str,
}

const FILES: Level = Level {
    name: c"files",
    label: "files in the artifact directory",
    create: "cannot create files in the artifact directory",
    open: "cannot open files in the artifact directory",
};

const PARENT_TOOLS: Level = Level {
    name: c"parent-tools",
    label: "files/parent-tools in the artifact directory",
    create: "cannot create files/parent-tools in the artifact directory",
    open: "cannot open files/parent-tools in the artifact directory",
};

/// A prepared artifact directory: `DIR/files/parent-tools` exists, is no symlink, is writable.
pub struct ArtifactDir {
    root: PathBuf,
}

impl fmt::Debug for ArtifactDir {
    // No host path in anything printable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArtifactDir").finish_non_exhaustive()
    }
}

impl ArtifactDir {
    /// Create `DIR/files/parent-tools` (like `mkdir -p`; directories it creates get 0700),
    /// refuse a `DIR` that is not a directory and a symlinked `files` or `parent-tools`, and
    /// prove the folder writable with a probe temp file. Call it before the adapter runs.
    pub fn prepare(root: &Path) -> Result<ArtifactDir, TranscriptError> {
        // Absolute, so a later chdir cannot move the transcripts; symlinks in DIR itself and its
        // ancestors are the operator's business and stay unresolved.
        let root =
            std::path::absolute(root).map_err(io_err("cannot resolve the artifact directory"))?;
        match std::fs::metadata(&root) {
            Ok(meta) if !meta.is_dir() => return Err(TranscriptError::NotADirectory(ROOT_LABEL)),
            Ok(_) => {}
            // An ancestor is a file.
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                return Err(TranscriptError::NotADirectory(ROOT_LABEL))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(&root, DIR_MODE).map_err(|e| match e.raw_os_error() {
                    Some(libc::ENOTDIR) => TranscriptError::NotADirectory(ROOT_LABEL),
                    _ => TranscriptError::Io {
                        action: "cannot create the artifact directory",
                        source: e,
                    },
                })?;
            }
            Err(e) => {
                return Err(TranscriptError::Io {
                    action: "cannot inspect the artifact directory",
                    source: e,
                })
            }
        }
        let dir = open_parent_tools(&root, true)?;
        let probe = create_temp(dir.as_fd()).map_err(io_err(
            "files/parent-tools in the artifact directory is not writable",
        ))?;
        probe.remove().map_err(io_err(
            "cannot remove the probe file from files/parent-tools",
        ))?;
        Ok(ArtifactDir { root })
    }

    /// Write `doc` as compact JSON plus a newline to `files/parent-tools/<name>.json`, or to the
    /// first free `<name>-2.json`, `<name>-3.json`, …; never overwrites, never tears. `name`
    /// must be what [`safe_name`] returns. Returns the ref for `artifacts.transcripts`.
    pub fn write(&self, name: &str, doc: &str) -> Result<ArtifactRef, TranscriptError> {
        self.write_with_limit(name, doc, MAX_SUFFIX)
    }

    fn write_with_limit(
        &self,
        name: &str,
        doc: &str,
        max_suffix: u32,
    ) -> Result<ArtifactRef, TranscriptError> {
        if !is_safe_name(name) {
            return Err(TranscriptError::UnsafeName);
        }
        let mut bytes = Vec::with_capacity(doc.len() + 1);
        bytes.extend_from_slice(doc.as_bytes());
        bytes.push(b'\n');
        let sha256 = canonical::sha256_hex(&bytes);

        // Opened afresh, with O_NOFOLLOW at each level: a symlink swapped in since prepare() is
        // refused here, and everything below goes through this one descriptor.
        let dir = open_parent_tools(&self.root, false)?;
        let mut temp = create_temp(dir.as_fd())
            .map_err(io_err("cannot create a temp file in files/parent-tools"))?;
        temp.file()
            .write_all(&bytes)
            .map_err(io_err("cannot write the transcript"))?;
        temp.file()
            .sync_all()
            .map_err(io_err("cannot sync the transcript"))?;

        for n in 1..=max_suffix {
            let file_name = if n == 1 {
                format!("{name}.json")
            } else {
                format!("{name}-{n}.json")
            };
            let c_name =
                CString::new(file_name.as_str()).map_err(|_| TranscriptError::UnsafeName)?;
            if temp
                .publish_noreplace(&c_name)
                .map_err(io_err("cannot publish the transcript"))?
            {
                fs::fsync(dir.as_fd()).map_err(io_err("cannot sync files/parent-tools"))?;
                return Ok(ArtifactRef {
                    path: format!("{SUBDIR}/{file_name}"),
                    sha256,
                });
            }
        }
        Err(TranscriptError::NoFreeName)
    }
}

/// Where a transcript went: the entry of the result's `artifacts.transcripts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRef {
    /// `files/parent-tools/<file>.json`, relative to the artifact directory.
    pub path: String,
    /// Lowercase hex SHA-256 of the file's bytes.
    pub sha256: String,
}

impl ArtifactRef {
    #[cfg(test)] // only the tests call it
    /// `{"kind":"tool-call-transcript","path":…,"sha256":…}`.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "kind": "tool-call-transcript",
            "path": self.path,
            "sha256": self.sha256,
        })
    }
}

/// The transcript name for a request (SPEC §5): the id with every character outside
/// `[A-Za-z0-9._-]` replaced by `_`, cut to [`MAX_NAME_BYTES`], a leading `.` made `_` (so never
/// `.`, `..` or a hidden file); a missing or empty id gives `invalid-<first 16 hex of the
/// SHA-256 of the raw request bytes>`.
pub fn safe_name(request_id: Option<&str>, raw_request: &[u8]) -> String {
    let mut name: String = request_id
        .unwrap_or("")
        .chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .take(MAX_NAME_BYTES) // every char is ASCII by now: chars are bytes
        .collect();
    if name.is_empty() {
        let hex: String = canonical::sha256_hex(raw_request)
            .chars()
            .take(16)
            .collect();
        return format!("invalid-{hex}");
    }
    if name.starts_with('.') {
        name.replace_range(..1, "_");
    }
    name
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// What [`safe_name`] can return: a single, visible file name.
fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.starts_with('.')
        && name.chars().all(is_name_char)
}

/// One call as the transcript records it. Every text is already redacted JSON.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// `call_id` of the entry (the request id, or the dispatcher's stand-in for a missing one).
    pub call_id: &'a str,
    /// `tool_name`: the tool id as requested.
    pub tool: &'a str,
    /// The request's `operation`.
    pub operation: &'a str,
    /// The result's status; recorded as `status` and `metadata.parent_tool_status`.
    pub status: &'a str,
    /// When the dispatch started.
    pub started_at: SystemTime,
    /// When the result was final.
    pub finished_at: SystemTime,
    /// The redacted request envelope (JSON text, or `null`).
    pub request: &'a str,
    /// The redacted result envelope (JSON text).
    pub result: &'a str,
    /// `diagnostics.dispatch` of the result (JSON text).
    pub dispatch: &'a str,
    /// Hex SHA-256 of the compact JSON text of `request.input` as recorded here.
    pub input_digest: &'a str,
    /// Hex SHA-256 of the compact JSON text of `result.output` as recorded here (of `null`
    /// when absent).
    pub output_digest: &'a str,
}

/// The `wp-codebox/tool-call-transcript/v1` document for one call, as compact JSON text. The
/// request and result are embedded as given (already redacted), never re-parsed, so every
/// number in them stays as written.
pub fn build(call: &Call) -> String {
    let digest = |o: &mut String, value: &str| {
        let mut w = ObjectWriter::new(o);
        w.str("algorithm", "sha256").str("value", value);
        w.finish();
    };
    let redaction = |o: &mut String| {
        let mut w = ObjectWriter::new(o);
        w.str("policy", "applied");
        w.finish();
    };
    let mut out = String::with_capacity(call.request.len() + call.result.len() + 1024);
    let mut doc = ObjectWriter::new(&mut out);
    doc.str("schema", SCHEMA).with("tool_calls", |o| {
        o.push('[');
        let mut entry = ObjectWriter::new(o);
        entry
            .str("call_id", call.call_id)
            .str("tool_name", call.tool)
            .str("tool_type", "parent-tool")
            .str("phase", "execution")
            .str("status", call.status)
            .str("started_at", &timestamp(call.started_at))
            .str("finished_at", &timestamp(call.finished_at))
            .with("input_digest", |o| digest(o, call.input_digest))
            .with("output_digest", |o| digest(o, call.output_digest))
            .with("redaction", redaction)
            .with("metadata", |o| {
                let mut m = ObjectWriter::new(o);
                m.str("operation", call.operation)
                    .str("parent_tool_status", call.status)
                    .raw("request", call.request)
                    .raw("result", call.result)
                    .raw("dispatch", call.dispatch);
                m.finish();
            });
        entry.finish();
        o.push(']');
    });
    doc.with("redaction", redaction).with("metadata", |o| {
        let mut m = ObjectWriter::new(o);
        m.str("generator", "parent-tool-dispatch")
            .str("version", env!("CARGO_PKG_VERSION"));
        m.finish();
    });
    doc.finish();
    out
}

/// RFC 3339 UTC with milliseconds. humantime panics before 1970 and fails after year 9999, so
/// the clock is clamped into that range first: a skewed clock must not crash a dispatch.
pub fn timestamp(time: SystemTime) -> String {
    let latest = UNIX_EPOCH
        .checked_add(Duration::new(253_402_300_799, 999_000_000))
        .unwrap_or(UNIX_EPOCH);
    let mut out = String::new();
    if write!(
        out,
        "{}",
        humantime::format_rfc3339_millis(time.clamp(UNIX_EPOCH, latest))
    )
    .is_err()
    {
        out = "1970-01-01T00:00:00.000Z".to_string();
    }
    out
}

// ---- on the fs layer -------------------------------------------------------------------------

/// Open `root/files/parent-tools`, creating the two levels when asked, refusing symlinks.
fn open_parent_tools(root: &Path, create: bool) -> Result<OwnedFd, TranscriptError> {
    let root_dir = fs::open_dir_path(root).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTDIR) => TranscriptError::NotADirectory(ROOT_LABEL),
        _ => TranscriptError::Io {
            action: "cannot open the artifact directory",
            source: e,
        },
    })?;
    let files = open_level(root_dir.as_fd(), &FILES, create)?;
    open_level(files.as_fd(), &PARENT_TOOLS, create)
}

fn open_level(
    parent: BorrowedFd<'_>,
    level: &Level,
    create: bool,
) -> Result<OwnedFd, TranscriptError> {
    let mut created = false;
    if create {
        match fs::mkdir_at(parent, level.name, DIR_MODE) {
            Ok(()) => created = true,
            // An existing entry, whatever it is, is judged by the open below.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(TranscriptError::Io {
                    action: level.create,
                    source: e,
                })
            }
        }
    }
    let dir =
        fs::open_dir_at(parent, level.name).map_err(|e| classify_open_error(parent, level, e))?;
    if created {
        fs::set_mode(dir.as_fd(), DIR_MODE).map_err(io_err(level.create))?;
    }
    Ok(dir)
}

/// Linux reports a symlink opened with `O_DIRECTORY | O_NOFOLLOW` as ENOTDIR (the directory
/// check runs before the symlink check), so look at the entry itself to say which it is.
fn classify_open_error(parent: BorrowedFd<'_>, level: &Level, e: io::Error) -> TranscriptError {
    match e.raw_os_error() {
        Some(libc::ELOOP) => TranscriptError::Symlink(level.label),
        Some(libc::ENOTDIR) => match fs::lstat_at(parent, level.name) {
            Ok(st) if fs::kind(&st) == FileType::Symlink => TranscriptError::Symlink(level.label),
            _ => TranscriptError::NotADirectory(level.label),
        },
        _ => TranscriptError::Io {
            action: level.open,
            source: e,
        },
    }
}

/// A fresh temp file (`O_EXCL`, `O_NOFOLLOW`, exactly 0600) in `dir`.
fn create_temp(dir: BorrowedFd<'_>) -> io::Result<TempFile<'_>> {
    let temp = TempFile::create(dir, TEMP_HINT, FILE_MODE)?;
    // The umask may have taken bits away; the contract is exactly 0600.
    fs::set_mode(temp.file().as_fd(), FILE_MODE)?;
    Ok(temp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptd_sys::fs::test_support::{assert_no_host_path, entries, mode};
    use std::collections::BTreeSet;
    use std::os::unix::fs::symlink;
    use std::process::Command;
    use std::sync::Arc;

    const HOSTILE_UMASK: u32 = 0o277;

    fn prepared() -> (tempfile::TempDir, ArtifactDir) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ArtifactDir::prepare(tmp.path()).unwrap();
        (tmp, dir)
    }

    fn parent_tools(root: &Path) -> PathBuf {
        root.join(SUBDIR)
    }

    // ---- names ----

    #[test]
    fn plain_ids_keep_their_spelling() {
        assert_eq!(safe_name(Some("req-1_a.B"), b"{}"), "req-1_a.B");
    }

    #[test]
    fn traversal_and_separators_become_one_file_name() {
        assert_eq!(safe_name(Some("../../etc/passwd"), b""), "_._.._etc_passwd");
        assert_eq!(safe_name(Some("a/b"), b""), "a_b");
        assert_eq!(safe_name(Some(".."), b""), "_.");
        assert_eq!(safe_name(Some("."), b""), "_");
        assert_eq!(safe_name(Some(".hidden"), b""), "_hidden");
        assert_eq!(safe_name(Some("a\\b\0c d"), b""), "a_b_c_d");
    }

    #[test]
    fn unicode_becomes_one_underscore_per_character() {
        assert_eq!(safe_name(Some("héllo wörld"), b""), "h_llo_w_rld");
        assert_eq!(safe_name(Some("🦀"), b""), "_");
    }

    #[test]
    fn long_ids_are_cut_to_100_bytes() {
        assert_eq!(safe_name(Some(&"a".repeat(300)), b""), "a".repeat(100));
        assert_eq!(safe_name(Some(&"é".repeat(300)), b""), "_".repeat(100));
    }

    #[test]
    fn missing_or_empty_ids_are_named_after_the_raw_request() {
        let raw = b"{\"not\": \"valid\"";
        let expected = format!("invalid-{}", &canonical::sha256_hex(raw)[..16]);
        assert_eq!(safe_name(None, raw), expected);
        assert_eq!(safe_name(Some(""), raw), expected);
        assert_ne!(safe_name(None, b"other"), expected);
    }

    proptest::proptest! {
        #[test]
        fn every_id_becomes_a_safe_single_file_name(id in proptest::prelude::any::<String>()) {
            let name = safe_name(Some(&id), id.as_bytes());
            proptest::prop_assert!(is_safe_name(&name), "{name:?}");
            proptest::prop_assert!(name != "." && name != ".." && !name.contains('/'));
        }
    }

    // ---- prepare ----

    #[test]
    fn prepare_creates_private_directories_and_leaves_no_probe() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("new/artifacts");
        ArtifactDir::prepare(&root).unwrap();
        for dir in [
            tmp.path().join("new"),
            root.clone(),
            root.join("files"),
            parent_tools(&root),
        ] {
            assert!(dir.is_dir());
            assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        }
        assert!(entries(&parent_tools(&root)).is_empty());
        // Again on the existing tree: fine.
        ArtifactDir::prepare(&root).unwrap();
    }

    #[test]
    fn prepare_refuses_a_root_that_is_a_regular_file() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("artifacts");
        std::fs::write(&root, "x").unwrap();
        let err = ArtifactDir::prepare(&root).unwrap_err();
        assert!(
            matches!(err, TranscriptError::NotADirectory(ROOT_LABEL)),
            "{err}"
        );
        assert_no_host_path(&err, tmp.path());
        let below = ArtifactDir::prepare(&root.join("deeper")).unwrap_err();
        assert!(
            matches!(below, TranscriptError::NotADirectory(_)),
            "{below}"
        );
    }

    #[test]
    fn prepare_refuses_a_symlinked_files_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        symlink(elsewhere.path(), tmp.path().join("files")).unwrap();
        let err = ArtifactDir::prepare(tmp.path()).unwrap_err();
        assert!(
            matches!(err, TranscriptError::Symlink(l) if l == FILES.label),
            "{err}"
        );
        assert_no_host_path(&err, tmp.path());
        assert!(
            entries(elsewhere.path()).is_empty(),
            "nothing created through the link"
        );
    }

    #[test]
    fn prepare_refuses_a_symlinked_parent_tools_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("files")).unwrap();
        symlink(elsewhere.path(), parent_tools(tmp.path())).unwrap();
        let err = ArtifactDir::prepare(tmp.path()).unwrap_err();
        assert!(
            matches!(err, TranscriptError::Symlink(l) if l == PARENT_TOOLS.label),
            "{err}"
        );
        assert!(
            entries(elsewhere.path()).is_empty(),
            "no probe through the link"
        );
    }

    #[test]
    fn prepare_refuses_a_dangling_symlink_too() {
        let tmp = tempfile::tempdir().unwrap();
        symlink(tmp.path().join("nowhere"), tmp.path().join("files")).unwrap();
        let err = ArtifactDir::prepare(tmp.path()).unwrap_err();
        assert!(matches!(err, TranscriptError::Symlink(_)), "{err}");
        assert!(!tmp.path().join("nowhere").exists());
    }

    #[test]
    fn prepare_refuses_a_files_entry_that_is_a_regular_file() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("files"), "x").unwrap();
        let err = ArtifactDir::prepare(tmp.path()).unwrap_err();
        assert!(
            matches!(err, TranscriptError::NotADirectory(l) if l == FILES.label),
            "{err}"
        );
    }

    #[test]
    fn a_symlinked_root_is_followed() {
        let real = tempfile::tempdir().unwrap();
        let links = tempfile::tempdir().unwrap();
        let root = links.path().join("artifacts");
        symlink(real.path(), &root).unwrap();
        let dir = ArtifactDir::prepare(&root).unwrap();
        dir.write("a", &json!({}).to_string()).unwrap();
        assert!(parent_tools(real.path()).join("a.json").is_file());
    }

    // ---- write ----

    #[test]
    fn write_publishes_compact_json_with_a_matching_sha256() {
        let (tmp, dir) = prepared();
        let doc = json!({"b": 1, "a": [true, null, "x y"]});
        let artifact = dir.write("req-1", &doc.to_string()).unwrap();
        assert_eq!(artifact.path, "files/parent-tools/req-1.json");
        let bytes = std::fs::read(tmp.path().join(&artifact.path)).unwrap();
        assert_eq!(bytes, b"{\"b\":1,\"a\":[true,null,\"x y\"]}\n");
        assert_eq!(artifact.sha256, canonical::sha256_hex(&bytes));
        assert_eq!(
            artifact.to_json(),
            json!({"kind": "tool-call-transcript", "path": artifact.path, "sha256": artifact.sha256})
        );
    }

    #[test]
    fn write_makes_files_0600_whatever_the_umask_allows() {
        let (tmp, dir) = prepared();
        let artifact = dir.write("m", &json!({}).to_string()).unwrap();
        assert_eq!(mode(&tmp.path().join(artifact.path)), 0o600);
    }

    #[test]
    fn write_never_overwrites_and_takes_the_next_free_suffix() {
        let (tmp, dir) = prepared();
        let pt = parent_tools(tmp.path());
        std::fs::write(pt.join("x-3.json"), "someone else's").unwrap();
        let paths: Vec<String> = (0..4)
            .map(|i| dir.write("x", &json!({"i": i}).to_string()).unwrap().path)
            .collect();
        assert_eq!(
            paths,
            [
                "files/parent-tools/x.json",
                "files/parent-tools/x-2.json",
                "files/parent-tools/x-4.json",
                "files/parent-tools/x-5.json"
            ]
        );
        assert_eq!(
            std::fs::read_to_string(pt.join("x.json")).unwrap(),
            "{\"i\":0}\n"
        );
        assert_eq!(
            std::fs::read_to_string(pt.join("x-3.json")).unwrap(),
            "someone else's"
        );
    }

    #[test]
    fn write_refuses_names_safe_name_would_not_produce() {
        let (tmp, dir) = prepared();
        for name in ["", ".", "..", ".x", "../x", "a/b", "é", &"a".repeat(101)] {
            let err = dir.write(name, &json!({}).to_string()).unwrap_err();
            assert!(
                matches!(err, TranscriptError::UnsafeName),
                "{name:?}: {err}"
            );
        }
        assert!(entries(&parent_tools(tmp.path())).is_empty());
        assert!(entries(tmp.path()).iter().eq(["files"]));
    }

    #[test]
    fn write_refuses_a_files_directory_swapped_for_a_symlink() {
        let (tmp, dir) = prepared();
        let moved = tmp.path().join("moved");
        std::fs::rename(tmp.path().join("files"), &moved).unwrap();
        symlink(&moved, tmp.path().join("files")).unwrap();
        let err = dir.write("a", &json!({}).to_string()).unwrap_err();
        assert!(
            matches!(err, TranscriptError::Symlink(l) if l == FILES.label),
            "{err}"
        );
        assert_no_host_path(&err, tmp.path());
        assert!(entries(&moved.join("parent-tools")).is_empty());
    }

    #[test]
    fn write_refuses_a_parent_tools_directory_swapped_for_a_symlink() {
        let (tmp, dir) = prepared();
        let moved = tmp.path().join("moved");
        std::fs::rename(parent_tools(tmp.path()), &moved).unwrap();
        symlink(&moved, parent_tools(tmp.path())).unwrap();
        let err = dir.write("a", &json!({}).to_string()).unwrap_err();
        assert!(
            matches!(err, TranscriptError::Symlink(l) if l == PARENT_TOOLS.label),
            "{err}"
        );
        assert!(entries(&moved).is_empty());
    }

    #[test]
    fn write_reports_a_vanished_directory_without_its_path() {
        let (tmp, dir) = prepared();
        std::fs::remove_dir_all(tmp.path().join("files")).unwrap();
        let err = dir.write("a", &json!({}).to_string()).unwrap_err();
        assert!(matches!(err, TranscriptError::Io { .. }), "{err}");
        assert_no_host_path(&err, tmp.path());
    }

    #[test]
    fn a_failed_write_leaves_no_temp_file() {
        let (tmp, dir) = prepared();
        let pt = parent_tools(tmp.path());
        for file in ["x.json", "x-2.json", "x-3.json"] {
            std::fs::write(pt.join(file), "taken").unwrap();
        }
        let err = dir
            .write_with_limit("x", &json!({}).to_string(), 3)
            .unwrap_err();
        assert!(matches!(err, TranscriptError::NoFreeName), "{err}");
        assert_eq!(entries(&pt).len(), 3);
    }

    /// One writer's documents, recognisable after the race.
    fn race_doc(writer: &str, seq: usize) -> Value {
        json!({"writer": writer, "seq": seq, "padding": "p".repeat(64 * 1024)})
    }

    /// Every file is complete JSON from one writer, every document arrived, no temp is left.
    fn assert_race_complete(pt: &Path, expected: &BTreeSet<(String, u64)>) {
        let names = entries(pt);
        assert_eq!(names.len(), expected.len(), "{names:?}");
        let mut seen = BTreeSet::new();
        for name in &names {
            assert!(
                name.starts_with("same") && name.ends_with(".json"),
                "stray {name}"
            );
            let path = pt.join(name);
            assert_eq!(mode(&path), 0o600, "{name}");
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes.last(), Some(&b'\n'), "{name} is torn");
            let doc: Value = serde_json::from_slice(&bytes).unwrap();
            let writer = doc["writer"].as_str().unwrap().to_string();
            let seq = doc["seq"].as_u64().unwrap();
            assert_eq!(doc, race_doc(&writer, seq as usize));
            assert!(seen.insert((writer, seq)), "{name} duplicates a document");
        }
        assert_eq!(&seen, expected);
    }

    #[test]
    fn concurrent_threads_with_one_name_each_get_their_own_complete_file() {
        let (tmp, dir) = prepared();
        let dir = Arc::new(dir);
        let handles: Vec<_> = (0..16)
            .map(|t| {
                let dir = Arc::clone(&dir);
                std::thread::spawn(move || {
                    (0..8)
                        .map(|seq| {
                            dir.write("same", &race_doc(&format!("t{t}"), seq).to_string())
                                .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let refs: Vec<ArtifactRef> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let paths: BTreeSet<&str> = refs.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths.len(), 128);
        for r in &refs {
            let bytes = std::fs::read(tmp.path().join(&r.path)).unwrap();
            assert_eq!(r.sha256, canonical::sha256_hex(&bytes));
        }
        let expected = (0..16)
            .flat_map(|t| (0..8).map(move |s| (format!("t{t}"), s)))
            .collect();
        assert_race_complete(&parent_tools(tmp.path()), &expected);
    }

    const CHILD_ROOT: &str = "PTD_TRANSCRIPT_TEST_ROOT";
    const CHILD_WRITER: &str = "PTD_TRANSCRIPT_TEST_WRITER";

    /// The body of the child processes spawned below; does nothing when run on its own.
    #[test]
    #[ignore = "helper: a writer process spawned by the concurrency test"]
    fn writer_process() {
        let (Some(root), Some(writer)) = (
            std::env::var_os(CHILD_ROOT),
            std::env::var(CHILD_WRITER).ok(),
        ) else {
            return;
        };
        let root = PathBuf::from(root);
        // Process-wide, which is why this runs in a process of its own.
        rustix::process::umask(Mode::from_raw_mode(HOSTILE_UMASK));
        let dir = Arc::new(ArtifactDir::prepare(&root).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let dir = Arc::clone(&dir);
                let writer = format!("{writer}.{t}");
                std::thread::spawn(move || {
                    for seq in 0..8 {
                        dir.write("same", &race_doc(&writer, seq).to_string())
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        fs::write_atomic(&root.join(format!("result-{writer}.json")), b"{}\n").unwrap();
    }

    #[test]
    fn concurrent_processes_under_a_hostile_umask_lose_and_tear_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("artifacts");
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..4)
            .map(|p| {
                Command::new(&exe)
                    .args(["--exact", "transcript::tests::writer_process", "--ignored"])
                    .args(["--test-threads=1", "--quiet"])
                    .env(CHILD_ROOT, &root)
                    .env(CHILD_WRITER, format!("p{p}"))
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success());
        }
        // Every directory was created by a child with umask 0277, and is still exactly 0700.
        for dir in [root.clone(), root.join("files"), parent_tools(&root)] {
            assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        }
        for p in 0..4 {
            assert_eq!(mode(&root.join(format!("result-p{p}.json"))), 0o600);
        }
        let expected = (0..4)
            .flat_map(|p| (0..4).flat_map(move |t| (0..8).map(move |s| (format!("p{p}.{t}"), s))))
            .collect();
        assert_race_complete(&parent_tools(&root), &expected);
    }

    // ---- build ----

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn build_has_the_upstream_shape_in_order() {
        let request = r#"{"request_id":"r1","input":{"b":2,"a":12345678901234567890123}}"#;
        let result = r#"{"status":"succeeded","output":[1,"two",1e400]}"#;
        let dispatch = r#"{"duration_ms":5}"#;
        let text = build(&Call {
            call_id: "r1",
            tool: "workspace.read",
            operation: "read",
            status: "succeeded",
            started_at: at(1_700_000_000_123),
            finished_at: at(1_700_000_001_456),
            request,
            result,
            dispatch,
            input_digest: "11",
            output_digest: "22",
        });
        // Embedded as written: the numbers are not rounded.
        assert!(text.contains(request) && text.contains(result), "{text}");
        let expected = format!(
            concat!(
                r#"{{"schema":"wp-codebox/tool-call-transcript/v1","tool_calls":[{{"call_id":"r1","#,
                r#""tool_name":"workspace.read","tool_type":"parent-tool","phase":"execution","#,
                r#""status":"succeeded","started_at":"2023-11-14T22:13:20.123Z","#,
                r#""finished_at":"2023-11-14T22:13:21.456Z","#,
                r#""input_digest":{{"algorithm":"sha256","value":"11"}},"#,
                r#""output_digest":{{"algorithm":"sha256","value":"22"}},"#,
                r#""redaction":{{"policy":"applied"}},"metadata":{{"operation":"read","#,
                r#""parent_tool_status":"succeeded","request":{},"result":{},"dispatch":{}}}}}],"#,
                r#""redaction":{{"policy":"applied"}},"metadata":{{"generator":"parent-tool-dispatch","version":"{}"}}}}"#
            ),
            request,
            result,
            dispatch,
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn build_clamps_the_clock_and_keeps_empty_names() {
        let text = build(&Call {
            call_id: "",
            tool: "",
            operation: "",
            status: "failed",
            started_at: at(0),
            finished_at: at(0),
            request: "null",
            result: "{}",
            dispatch: "null",
            input_digest: "",
            output_digest: "",
        });
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            doc["tool_calls"][0]["started_at"],
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(doc["tool_calls"][0]["metadata"]["request"], Value::Null);
    }

    #[test]
    fn build_survives_clocks_outside_what_rfc3339_can_spell() {
        let before_epoch = UNIX_EPOCH - Duration::from_secs(86_400);
        let far_future = UNIX_EPOCH + Duration::from_secs(400_000_000_000);
        let doc = build(&Call {
            call_id: "c",
            tool: "t",
            operation: "o",
            status: "succeeded",
            started_at: before_epoch,
            finished_at: far_future,
            request: "null",
            result: "null",
            dispatch: "null",
            input_digest: "",
            output_digest: "",
        });
        let doc: Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(
            doc["tool_calls"][0]["started_at"],
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(
            doc["tool_calls"][0]["finished_at"],
            "9999-12-31T23:59:59.999Z"
        );
    }
}
