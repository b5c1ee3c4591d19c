//! The reference workspace adapter (SPEC §9): `parent-tool-dispatch adapter workspace`.
//!
//! It is a host adapter like any other: one `wp-codebox/parent-tool-request/v1` envelope on
//! stdin, exactly one `wp-codebox/parent-tool-result/v1` envelope (compact JSON and `\n`) on
//! stdout, exit 0 whenever that envelope was printed — whatever its status — 1 when stdin
//! could not be read and 74 when stdout could not be written. It serves `workspace.read`,
//! `.search`, `.write`, `.edit` (SPEC §9), `.ls` and `.apply_patch` (SPEC §15.1), and their
//! provider-safe spellings `workspace_read`, …, against one root directory.
//!
//! Owns: the protocol (reading, checking and echoing the request, building the result), tool
//! and operation dispatch, and the table of error codes ([`Code`]). Containment lives in
//! `path.rs`, the file tools in `files.rs`, search in `search.rs`, the listing in `ls.rs`,
//! patches in `patch/`, the refusal to write git's own directories (unless `--allow-git-dir`)
//! in `gitdir.rs`, and the Landlock restriction to the root the adapter puts on itself once it
//! has opened it in `confine.rs`.
//!
//! Invariants: the root comes from `--root` or the working directory (which the bridge's
//! `cwd_env` sets), never from the request; every path a tool touches is resolved beneath the
//! root's directory handle; no message carries a host path (only the request's relative path);
//! every size is bounded ([`limits`]); no input makes it panic, and if a bug did, the panic is
//! caught and still answered with an `internal_error` envelope.

pub mod confine;
mod files;
mod gitdir;
mod ls;
mod patch;
/// Containment of request paths beneath the root (public for the fuzz target in
/// `ptd_testkit::fuzzing`, which drives `RelPath::parse` and both resolvers with hostile paths).
#[doc(hidden)]
pub mod path;
mod search;

use ptd_wire::envelope::request::Echo;
use ptd_wire::envelope::result::{Audience, ErrorBody, ResultEnvelope};
use ptd_wire::error::{wire_table, Status};
use ptd_wire::json::{self, JsonIssue};
use ptd_wire::redact::Redactor;
use ptd_wire::validate::{codes, Checker, Issue};
use serde_json::{json, Map, Value};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The schema id of the request this adapter reads.
pub use ptd_wire::envelope::request::SCHEMA as REQUEST_SCHEMA;
/// The schema id of the result this adapter prints.
pub use ptd_wire::envelope::result::SCHEMA as RESULT_SCHEMA;

/// Every size the adapter bounds. Each limit is part of the documented behaviour.
pub mod limits {
    /// Bytes read from stdin; a larger request is `request_too_large`.
    pub(crate) const MAX_REQUEST_BYTES: usize = 64 << 20;
    /// Longest `request_id` accepted, in bytes (SPEC §2.2).
    pub const MAX_REQUEST_ID_BYTES: usize = 256;
    /// Longest request path, in bytes; longest path component.
    pub use super::path::{MAX_NAME_BYTES, MAX_PATH_BYTES, MAX_SYMLINKS};
    /// `read`: most bytes of `content` returned by one call (`truncated` says there is more).
    pub(crate) const MAX_READ_BYTES: usize = 1 << 20;
    /// `write`: largest `content`; `edit`: largest file before and after the edit.
    pub(crate) const MAX_WRITE_BYTES: usize = 16 << 20;
    /// `search`: longest `pattern`, in bytes.
    pub(crate) const MAX_PATTERN_BYTES: usize = 4096;
    /// `search`: compiled regex size cap (the `regex` crate's `size_limit`).
    pub(crate) const MAX_REGEX_BYTES: usize = 4 << 20;
    /// `search`: most globs in `glob`, and the longest one.
    pub(crate) const MAX_GLOBS: usize = 64;
    pub(crate) const MAX_GLOB_BYTES: usize = 1024;
    /// `search`: default and largest `max_results` (larger requests are clamped).
    pub(crate) const DEFAULT_MAX_RESULTS: u64 = 100;
    pub(crate) const MAX_RESULTS: u64 = 1000;
    /// `search`: files larger than this are skipped.
    pub(crate) const MAX_SEARCH_FILE_BYTES: u64 = 4 << 20;
    /// `search`: bytes of a matching line returned in `text` (cut at a character boundary).
    pub(crate) const MAX_LINE_TEXT_BYTES: usize = 1024;
    /// `search`: files searched, directory entries looked at, and directory depth below the
    /// start; reaching one stops the walk with `truncated: true`.
    pub(crate) const MAX_SEARCH_FILES: usize = 20_000;
    pub(crate) const MAX_SEARCH_ENTRIES: usize = 200_000;
    pub(crate) const MAX_SEARCH_DEPTH: usize = 64;
    /// `ls`: default and largest `depth`.
    pub(crate) const DEFAULT_LS_DEPTH: usize = 1;
    pub(crate) const MAX_LS_DEPTH: usize = 8;
    /// `ls`: default and largest `max_entries` (larger requests are clamped).
    pub(crate) const DEFAULT_LS_ENTRIES: usize = 1000;
    pub(crate) const MAX_LS_ENTRIES: usize = 10_000;
    /// `apply_patch`: largest `patch`, in bytes (as large as a write).
    pub(crate) const MAX_PATCH_BYTES: usize = MAX_WRITE_BYTES;
    /// `apply_patch`: most lines in one patch (what it holds in memory is a small multiple).
    pub(crate) const MAX_PATCH_LINES: usize = 1 << 20;
    /// `apply_patch`: most file diffs in one patch (each holds a few descriptors until the
    /// commit ends: 100 stays far below the usual limit of 1024 open files).
    pub(crate) const MAX_PATCH_FILES: usize = 100;
    /// `apply_patch`: the patched files' bytes together, held in memory until they are staged.
    pub(crate) const MAX_PATCH_RESULT_BYTES: usize = 64 << 20;
}

wire_table! {
    /// The adapter's error codes, in table order: each with the status of an envelope carrying
    /// it and whether the same call may succeed when retried unchanged.
    pub enum Code(status: Status) {
        /// The request is not a well-formed request envelope.
        RequestInvalid = ("request_invalid", Failed, false),
        /// The request is larger than [`limits::MAX_REQUEST_BYTES`].
        RequestTooLarge = ("request_too_large", Failed, false),
        /// The root cannot be opened as a directory, or the adapter could not restrict itself
        /// to it on a kernel that has Landlock.
        RootUnavailable = ("root_unavailable", Unavailable, false),
        /// `tool` is not one of the six workspace tools.
        UnknownTool = ("unknown_tool", Failed, false),
        /// `operation` is neither `call` nor the tool's verb.
        UnknownOperation = ("unknown_operation", Failed, false),
        /// `input` is not an object, a field is missing, mistyped, out of range or unknown.
        InvalidInput = ("invalid_input", Failed, false),
        /// Absolute path, `..` above the root, or a symlink resolving outside it.
        PathOutsideRoot = ("path_outside_root", Denied, false),
        /// `write`/`edit` inside a git directory (`.git` in any case, or what git would use as
        /// one), without `--allow-git-dir`.
        GitDirDenied = ("git_dir_denied", Denied, false),
        /// The path (or, for `write`, its parent directory) does not exist.
        NotFound = ("not_found", Failed, false),
        /// The path is a directory or a special file where a regular file is needed.
        NotAFile = ("not_a_file", Failed, false),
        /// A component on the way is a regular file, not a directory.
        NotADirectory = ("not_a_directory", Failed, false),
        /// Too many symlinks, or a symlink swapped in during the call.
        SymlinkLoop = ("symlink_loop", Failed, false),
        /// Content or file over the size limits.
        TooLarge = ("too_large", Failed, false),
        /// The file contains a NUL byte.
        BinaryFile = ("binary_file", Failed, false),
        /// The file is not valid UTF-8.
        NotUtf8 = ("not_utf8", Failed, false),
        /// `pattern` or `glob` does not compile.
        InvalidPattern = ("invalid_pattern", Failed, false),
        /// `edit`: `old` does not occur.
        NoMatch = ("no_match", Failed, false),
        /// `edit`: `old` occurs more than once.
        AmbiguousMatch = ("ambiguous_match", Failed, false),
        /// `apply_patch`: a file or hunk does not apply (context differs, a file to add exists,
        /// one to change or delete is missing); `details {path, hunk}`. Nothing was changed.
        PatchConflict = ("patch_conflict", Failed, false),
        /// `apply_patch`: the patch does not parse, has no file diff, names a file twice, or
        /// is a kind this adapter does not apply (binary, mode change, copy, symlink);
        /// `details {line}`. Nothing was changed.
        PatchInvalid = ("patch_invalid", Failed, false),
        /// The host file system refused access (EACCES, EPERM, EROFS).
        PermissionDenied = ("permission_denied", Failed, false),
        /// Any other operating-system error (EIO, ENOSPC, …).
        IoError = ("io_error", Failed, true),
        /// A bug: the adapter panicked.
        InternalError = ("internal_error", Failed, false),
    }
}

/// A failed call: a code, one human sentence (never a host path), optional details.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub code: Code,
    pub message: String,
    pub details: Option<Value>,
}

impl ToolError {
    /// An error without details.
    pub fn new(code: Code, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// Attach `error.details`.
    pub fn with_details(mut self, details: Value) -> ToolError {
        self.details = Some(details);
        self
    }

    /// An OS error while doing `what` to `shown` (a request-relative path).
    pub fn io(what: &str, shown: &str, err: &io::Error) -> ToolError {
        let code = match err.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => Code::PermissionDenied,
            Some(libc::EFBIG) => Code::TooLarge,
            _ => Code::IoError,
        };
        // io::Error's Display of an OS error is "<strerror> (os error N)": no path in it.
        ToolError::new(code, format!("could not {what} {}: {err}", quote(shown)))
    }
}

/// A path for a message: back-quoted, cut so a hostile path cannot flood the envelope, and
/// with control, bidi and line-separator characters escaped (`\x1b`, `\u{202e}`) so that it
/// cannot drive the terminal of whoever reads the message.
pub fn quote(path: &str) -> String {
    format!(
        "`{}`",
        ptd_wire::terminal::escape(cut_at_char_boundary(path, 200))
    )
}

pub(crate) use ptd_wire::terminal::cut_at_char_boundary;

/// Whether `write` and `edit` may change git's own directories (`--allow-git-dir`; see
/// `gitdir.rs` for what counts as one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GitDir {
    /// Refused with `git_dir_denied` (the default).
    #[default]
    Protected,
    /// Written like any other directory.
    Allowed,
}

/// The six tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Read,
    Search,
    Write,
    Edit,
    Ls,
    ApplyPatch,
}

impl Tool {
    /// The canonical id (`workspace.read`) or its provider-safe form (`workspace_read`).
    fn parse(id: &str) -> Option<Tool> {
        match id {
            "workspace.read" | "workspace_read" => Some(Tool::Read),
            "workspace.search" | "workspace_search" => Some(Tool::Search),
            "workspace.write" | "workspace_write" => Some(Tool::Write),
            "workspace.edit" | "workspace_edit" => Some(Tool::Edit),
            "workspace.ls" | "workspace_ls" => Some(Tool::Ls),
            "workspace.apply_patch" | "workspace_apply_patch" => Some(Tool::ApplyPatch),
            _ => None,
        }
    }

    /// The tool's own operation name.
    fn verb(self) -> &'static str {
        match self {
            Tool::Read => "read",
            Tool::Search => "search",
            Tool::Write => "write",
            Tool::Edit => "edit",
            Tool::Ls => "ls",
            Tool::ApplyPatch => "apply_patch",
        }
    }

    /// What the tool may do beneath the root once the adapter has confined itself.
    fn rights(self) -> confine::Rights {
        match self {
            Tool::Read | Tool::Search | Tool::Ls => confine::Rights::ReadOnly,
            Tool::Write | Tool::Edit | Tool::ApplyPatch => confine::Rights::ReadWrite,
        }
    }

    fn run(self, root: &path::Root, input: &Value, git: GitDir) -> Result<Value, ToolError> {
        match self {
            Tool::Read => files::read(root, input),
            Tool::Search => search::search(root, input),
            Tool::Write => files::write(root, input, git),
            Tool::Edit => files::edit(root, input, git),
            Tool::Ls => ls::ls(root, input),
            Tool::ApplyPatch => patch::apply_patch(root, input, git),
        }
    }
}

/// A tool's `input`: an object whose fields are read with type checks. Unknown fields are
/// refused, so a misspelt optional field (`ofset`) cannot be silently ignored.
pub struct Input<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Input<'a> {
    /// Check that `input` is an object holding only `known` fields.
    pub fn new(input: &'a Value, known: &[&str]) -> Result<Input<'a>, ToolError> {
        let Value::Object(map) = input else {
            return Err(ToolError::new(
                Code::InvalidInput,
                format!("input must be an object, not {}", json::kind_name(input)),
            ));
        };
        let mut unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !known.contains(k))
            .collect();
        if !unknown.is_empty() {
            unknown.truncate(8);
            let list: Vec<String> = unknown
                .iter()
                .map(|k| format!("{:?}", cut_at_char_boundary(k, 64)))
                .collect();
            return Err(ToolError::new(
                Code::InvalidInput,
                format!(
                    "unknown input field(s) {}; this tool accepts {}",
                    list.join(", "),
                    known.join(", ")
                ),
            ));
        }
        Ok(Input { map })
    }

    /// A field, with JSON `null` treated as absent.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn wrong_type(key: &str, want: &str, got: &Value) -> ToolError {
        ToolError::new(
            Code::InvalidInput,
            format!("input.{key} must be {want}, not {}", json::kind_name(got)),
        )
    }

    /// A required string.
    pub fn string(&self, key: &str) -> Result<&'a str, ToolError> {
        match self.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(Input::wrong_type(key, "a string", other)),
            None => Err(ToolError::new(
                Code::InvalidInput,
                format!("input.{key} is required"),
            )),
        }
    }

    /// An optional string.
    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<&'a str>, ToolError> {
        match self.get(key) {
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(Input::wrong_type(key, "a string", other)),
            None => Ok(None),
        }
    }

    /// An optional non-negative integer.
    pub(crate) fn opt_u64(&self, key: &str) -> Result<Option<u64>, ToolError> {
        match self.get(key) {
            Some(v @ Value::Number(n)) => n
                .as_u64()
                .map(Some)
                .ok_or_else(|| Input::wrong_type(key, "a non-negative integer", v)),
            Some(other) => Err(Input::wrong_type(key, "a non-negative integer", other)),
            None => Ok(None),
        }
    }

    /// An optional boolean.
    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, ToolError> {
        match self.get(key) {
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(Input::wrong_type(key, "a boolean", other)),
            None => Ok(None),
        }
    }

    /// An optional raw value.
    pub(crate) fn opt_value(&self, key: &str) -> Option<&'a Value> {
        self.get(key)
    }
}

/// Check the parts of the request envelope this adapter relies on, with the shared checker
/// and issue codes; the dispatcher checks the rest (sandbox_session, authorization, …) before
/// it ever runs an adapter.
fn check_request(map: &Map<String, Value>) -> Vec<Issue> {
    let mut c = Checker::new();
    c.constant(map, "", "schema", REQUEST_SCHEMA);
    c.version_one(map, "");
    if let Some(id) = c.non_empty_string(map, "", "request_id") {
        if id.len() > limits::MAX_REQUEST_ID_BYTES {
            c.push(
                codes::TOO_LONG,
                "/request_id",
                "request_id is longer than 256 bytes",
            );
        }
    }
    c.non_empty_string(map, "", "tool");
    c.non_empty_string(map, "", "operation");
    c.required(map, "", "input");
    c.into_issues()
}

/// The whole answer to one request (`bytes` as read from stdin) as a result envelope, without
/// the Landlock restriction `run` adds (this process goes on after the call: tests, fuzzing).
pub fn respond(bytes: &[u8], root: Option<&Path>, git: GitDir) -> String {
    answer(bytes, root, git, None)
}

/// [`respond`], restricting the process to the root once it is open when `confined` is given
/// (then it says how the restriction ended, when the call got that far).
fn answer(
    bytes: &[u8],
    root: Option<&Path>,
    git: GitDir,
    mut confined: Option<&mut Option<confine::Confined>>,
) -> String {
    let mut echo = Echo::default();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        serve(bytes, root, git, &mut echo, confined.as_deref_mut())
    }))
    .unwrap_or_else(|_| {
        Err(ToolError::new(
            Code::InternalError,
            "the workspace adapter hit an internal error (a bug); nothing is known to have changed",
        ))
    });
    envelope(&echo, outcome)
}

fn serve(
    bytes: &[u8],
    root: Option<&Path>,
    git: GitDir,
    echo: &mut Echo,
    confined: Option<&mut Option<confine::Confined>>,
) -> Result<Value, ToolError> {
    let map = json::parse_object(bytes, limits::MAX_REQUEST_BYTES).map_err(|e| match e {
        JsonIssue::TooLarge { .. } => ToolError::new(Code::RequestTooLarge, e.to_string()),
        _ => ToolError::new(
            Code::RequestInvalid,
            format!(
                "the request is not valid: {}",
                ptd_wire::terminal::escape(&e.to_string())
            ),
        )
        .with_details(json!({"issues": [Issue::from_json(&e)]})),
    })?;
    *echo = Echo::from_map(&map);
    let issues = check_request(&map);
    if let Some(first) = issues.first() {
        let first = ptd_wire::terminal::escape(&first.message).into_owned();
        return Err(ToolError::new(
            Code::RequestInvalid,
            format!("the request envelope is invalid: {first}"),
        )
        .with_details(json!({ "issues": issues })));
    }
    let Some(tool) = Tool::parse(&echo.tool) else {
        return Err(ToolError::new(
            Code::UnknownTool,
            format!(
                "unknown tool {:?}; this adapter serves workspace.read, workspace.search, \
                 workspace.write, workspace.edit, workspace.ls and workspace.apply_patch",
                cut_at_char_boundary(&echo.tool, 128)
            ),
        ));
    };
    if echo.operation != "call" && echo.operation != tool.verb() {
        return Err(ToolError::new(
            Code::UnknownOperation,
            format!(
                "unknown operation {:?} for {}; use \"call\" or {:?}",
                cut_at_char_boundary(&echo.operation, 128),
                cut_at_char_boundary(&echo.tool, 128),
                tool.verb()
            ),
        ));
    }
    let root = path::Root::open(root.unwrap_or(Path::new("."))).map_err(|err| {
        ToolError::new(
            Code::RootUnavailable,
            format!("the workspace root cannot be opened as a directory: {err}"),
        )
    })?;
    if let Some(confined) = confined {
        let how = confine::restrict_to_root(root.handle(), tool.rights()).map_err(|why| {
            ToolError::new(
                Code::RootUnavailable,
                format!("the workspace adapter could not confine itself to its root: {why}"),
            )
        })?;
        *confined = Some(how);
    }
    let input = map.get("input").unwrap_or(&Value::Null);
    tool.run(&root, input, git)
}

fn envelope(echo: &Echo, outcome: Result<Value, ToolError>) -> String {
    let envelope = match outcome {
        Ok(output) => ResultEnvelope::new(
            echo.clone(),
            Status::Succeeded,
            Some(output.to_string().into()),
            None,
        ),
        Err(err) => ResultEnvelope::failure(
            echo.clone(),
            err.code.status(),
            ErrorBody {
                code: err.code.as_str().to_string(),
                message: err.message,
                retryable: err.code.retryable(),
                details: err.details,
            },
        ),
    };
    // The dispatcher redacts what it passes on; an empty redactor here only normalises.
    envelope.render(&Redactor::new(), Audience::Caller)
}

/// Serve one request from stdin, print one result envelope on stdout; returns the exit status:
/// 0 when the envelope was printed (any status), 1 when stdin could not be read, 74 when
/// stdout could not be written (`ptd_wire::stdout`).
pub fn run(root: Option<PathBuf>, git: GitDir) -> u8 {
    let mut bytes = Vec::new();
    // One byte over the cap is enough to know the request is too large; the rest is not read.
    let cap = limits::MAX_REQUEST_BYTES as u64 + 1;
    if let Err(err) = io::stdin().lock().take(cap).read_to_end(&mut bytes) {
        stderr_line!("error[stdin]: could not read the request: {err}");
        return 1;
    }
    let mut confined = None;
    let mut line = answer(&bytes, root.as_deref(), git, Some(&mut confined)).into_bytes();
    line.push(b'\n');
    if let Some(confine::Confined::Unsupported(errno)) = confined {
        stderr_line!(
            "warning[landlock]: this kernel has no Landlock ({errno}); the workspace adapter \
             served the call with its path checks alone"
        );
    }
    ptd_wire::stdout::print(&line, "the result", 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn respond_json(bytes: &[u8], root: Option<&Path>) -> Value {
        serde_json::from_str(&respond(bytes, root, GitDir::Protected)).unwrap()
    }

    fn request(tool: &str, operation: &str, input: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "schema": REQUEST_SCHEMA, "version": 1, "request_id": "ptr_1",
            "tool": tool, "operation": operation, "input": input,
            "sandbox_session": {"sandbox_session_id": "s"},
            "authorization": {"allowed_tools": [tool]}, "metadata": {}
        }))
        .unwrap()
    }

    fn code_of(env: &Value) -> (&str, &str) {
        (
            env["status"].as_str().unwrap(),
            env["error"]["code"].as_str().unwrap_or(""),
        )
    }

    #[test]
    fn code_table_is_consistent() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {}", code.as_str());
            let expected = match code {
                Code::PathOutsideRoot | Code::GitDirDenied => Status::Denied,
                Code::RootUnavailable => Status::Unavailable,
                _ => Status::Failed,
            };
            assert_eq!(code.status(), expected, "{}", code.as_str());
        }
    }

    #[test]
    fn docs_workspace_md_lists_every_code_with_its_status() {
        let docs = include_str!("../../../../../docs/workspace.md");
        let table = docs.split("## Error codes").nth(1).unwrap();
        for code in Code::ALL {
            let row = table
                .lines()
                .find(|l| l.contains(&format!("`{}`", code.as_str())))
                .unwrap_or_else(|| panic!("{} is not in docs/workspace.md", code.as_str()));
            let status = row.rsplit('|').nth(1).unwrap().trim();
            assert!(
                status.starts_with(code.status().as_str()),
                "{}: {status}",
                code.as_str()
            );
            assert_eq!(
                status.contains("retryable"),
                code.retryable(),
                "{}",
                code.as_str()
            );
        }
    }

    #[test]
    fn unknown_tool_and_operation_are_failed_with_their_codes() {
        let tmp = tempfile::tempdir().unwrap();
        let env = respond_json(
            &request("workspace.delete", "call", json!({})),
            Some(tmp.path()),
        );
        assert_eq!(code_of(&env), ("failed", "unknown_tool"));
        assert_eq!(env["tool"], "workspace.delete");
        let env = respond_json(
            &request("workspace.read", "write", json!({"path": "x"})),
            Some(tmp.path()),
        );
        assert_eq!(code_of(&env), ("failed", "unknown_operation"));
        assert_eq!(env["operation"], "write");
    }

    #[test]
    fn provider_safe_ids_and_the_verb_are_accepted() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "hi").unwrap();
        for (tool, op) in [("workspace_read", "call"), ("workspace.read", "read")] {
            let env = respond_json(
                &request(tool, op, json!({"path": "a.txt"})),
                Some(tmp.path()),
            );
            assert_eq!(env["status"], "succeeded", "{env}");
            assert_eq!(env["tool"], tool);
            assert_eq!(env["output"]["content"], "hi");
        }
    }

    #[test]
    fn malformed_requests_echo_what_they_can() {
        let env = respond_json(b"{\"tool\": 1,", None);
        assert_eq!(code_of(&env), ("failed", "request_invalid"));
        assert_eq!(env["request_id"], "");
        assert_eq!(env["error"]["details"]["issues"][0]["code"], "json_syntax");
        let env = respond_json(
            br#"{"request_id":"r9","tool":"workspace.read","operation":"call"}"#,
            None,
        );
        assert_eq!(code_of(&env), ("failed", "request_invalid"));
        assert_eq!(env["request_id"], "r9");
        assert_eq!(env["tool"], "workspace.read");
        let issues = env["error"]["details"]["issues"].as_array().unwrap();
        assert_eq!(issues.len(), 3, "{issues:?}"); // schema, version, input
        let env = respond_json(br#"{"tool":"a","tool":"b"}"#, None);
        assert_eq!(code_of(&env), ("failed", "request_invalid"));
        assert_eq!(env["tool"], "");
    }

    #[test]
    fn a_missing_root_is_unavailable_without_its_path() {
        let tmp = tempfile::tempdir().unwrap();
        let gone = tmp.path().join("gone");
        let env = respond_json(
            &request("workspace.read", "call", json!({"path": "a"})),
            Some(&gone),
        );
        assert_eq!(code_of(&env), ("unavailable", "root_unavailable"));
        let message = env["error"]["message"].as_str().unwrap();
        assert!(!message.contains(tmp.path().to_str().unwrap()), "{message}");
    }

    #[test]
    fn input_fields_are_type_checked_and_unknown_ones_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let cases = [
            json!([]),
            json!({}),
            json!({"path": 3}),
            json!({"path": "a", "offset": -1}),
            json!({"path": "a", "offset": 1.5}),
            json!({"path": "a", "ofset": 1}),
        ];
        for input in cases {
            let env = respond_json(
                &request("workspace.read", "call", input.clone()),
                Some(tmp.path()),
            );
            assert_eq!(code_of(&env), ("failed", "invalid_input"), "{input}");
        }
    }

    #[test]
    fn an_oversized_request_is_request_too_large() {
        let big = vec![b' '; limits::MAX_REQUEST_BYTES + 1];
        let env = respond_json(&big, None);
        assert_eq!(code_of(&env), ("failed", "request_too_large"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Any bytes at all get one well-formed envelope, and never an internal error.
        #[test]
        fn any_bytes_get_an_envelope(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let env = respond_json(&bytes, Some(Path::new("/nonexistent-root")));
            proptest::prop_assert!(env["status"].is_string());
            proptest::prop_assert_ne!(env["error"]["code"].as_str(), Some("internal_error"));
        }

        /// Hostile paths for every tool never escape, never panic, never name the host root.
        #[test]
        fn hostile_paths_stay_inside(
            parts in proptest::collection::vec(
                proptest::sample::select(vec!["..", ".", "", "a", "link", "out", "passwd", "x.txt", "/"]),
                1..8,
            ),
            tool in proptest::sample::select(vec!["workspace.read", "workspace.search", "workspace.write", "workspace.edit"]),
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("root");
            std::fs::create_dir_all(root.join("a")).unwrap();
            std::fs::write(root.join("a/x.txt"), "x").unwrap();
            std::fs::create_dir(tmp.path().join("outside")).unwrap();
            std::os::unix::fs::symlink("a", root.join("link")).unwrap();
            std::os::unix::fs::symlink("../outside", root.join("out")).unwrap();
            std::os::unix::fs::symlink("/etc/passwd", root.join("passwd")).unwrap();
            let path = parts.concat();
            let input = json!({"path": path, "pattern": "x", "content": "pwned", "old": "x", "new": "y"});
            let mut input = input.as_object().unwrap().clone();
            let keep: &[&str] = match tool {
                "workspace.read" => &["path"],
                "workspace.search" => &["path", "pattern"],
                "workspace.write" => &["path", "content"],
                _ => &["path", "old", "new"],
            };
            input.retain(|k, _| keep.contains(&k.as_str()));
            if tool == "workspace.write" {
                input.insert("create_dirs".into(), true.into());
            }
            let env = respond_json(&request(tool, "call", Value::Object(input)), Some(&root));
            let text = env.to_string();
            proptest::prop_assert!(!text.contains(tmp.path().to_str().unwrap()), "{}", text);
            proptest::prop_assert_ne!(env["error"]["code"].as_str(), Some("internal_error"));
            proptest::prop_assert_eq!(std::fs::read_dir(tmp.path().join("outside")).unwrap().count(), 0);
        }
    }

    #[test]
    fn the_envelope_has_every_required_container() {
        let env = respond_json(b"", None);
        for key in [
            "schema",
            "version",
            "request_id",
            "tool",
            "operation",
            "status",
            "error",
            "artifacts",
            "diagnostics",
            "metadata",
        ] {
            assert!(env.get(key).is_some(), "missing {key}");
        }
        assert_eq!(env["artifacts"], json!({"transcripts": [], "evidence": []}));
        assert_eq!(env["error"]["retryable"], false);
    }
}
