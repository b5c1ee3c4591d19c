//! The git adapter (SPEC §15.2): `parent-tool-dispatch adapter git [--root DIR]
//! [--allow-commit] [--author "Name <email>"]`.
//!
//! A host adapter like the others — one `wp-codebox/parent-tool-request/v1` on stdin, exactly
//! one `wp-codebox/parent-tool-result/v1` (compact JSON and `\n`) on stdout, exit 0 whenever it
//! printed one — that runs the host's `git` on the repository at the root: `git.status`,
//! `git.diff`, `git.log`, and with `--allow-commit` `git.add` and `git.commit` (also as
//! `git_status`, …). No remote operation exists here.
//!
//! Owns: the protocol, the tools' inputs and outputs, the table of error codes ([`Code`]).
//! How git is run — its environment and the configuration that neutralises what a checkout
//! could make it run — is `command.rs`; finding the repository (and refusing one the root does
//! not hold) `repo.rs`; reading git's output `parse.rs`.
//!
//! Invariants:
//! - a checkout is untrusted input: no git the adapter runs starts a hook, an fsmonitor, a
//!   pager, an editor, an external diff, a textconv, a filter driver or a signing program, or
//!   reads the system or global configuration (`command.rs`); a neutralised filter leaves the
//!   file's bytes as they are;
//! - the request never chooses the root; request paths follow §9's rules (relative, inside the
//!   root after symlinks) and reach git as literal pathspecs after `--`;
//! - writing tools are refused without `--allow-commit` before anything is looked at;
//! - before git runs on the repository the process is confined to the root and what git needs
//!   (SPEC §15.3, [`confine`]); every part of the git directory is inside the root (`repo.rs`);
//!   no git enters a submodule; paths never go to git in one command line it could not take;
//! - every output is bounded ([`limits`]); the adapter answers before the dispatcher's deadline
//!   (the MCP adapter's [`Budget`](crate::adapter::mcp::Budget)); no input makes it panic,
//!   and if a bug did, the panic is answered `internal_error`.

mod command;
mod parse;
mod repo;

use crate::adapter::workspace::confine::{restrict_to_root_and, Confined, Rights};
use crate::adapter::workspace::path::{PathError, RelPath, Root};
use crate::adapter::workspace::{cut_at_char_boundary, Input};
use command::{Git, RunOptions};
use ptd_sys::fs::OFlags;
use ptd_sys::interrupt::Interrupts;
use ptd_wire::envelope::request::{Echo, Request};
use ptd_wire::error::{wire_table, Status};
use serde_json::{json, Value};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Every bound the adapter keeps. Each is part of the documented behaviour.
pub mod limits {
    /// Bytes read from stdin; a larger request is `request_too_large`.
    pub(crate) const MAX_REQUEST_BYTES: usize = 64 << 20;
    /// `git.status`: most entries returned (then `truncated`), and most of git's output read.
    pub(crate) const MAX_STATUS_ENTRIES: usize = 10_000;
    pub(crate) const MAX_STATUS_BYTES: u64 = 8 << 20;
    /// `git.diff`: most bytes of `diff` (then `truncated`).
    pub(crate) const MAX_DIFF_BYTES: usize = 1 << 20;
    /// `git.log`: default and largest `max`; most of git's output read (then `truncated`).
    pub(crate) const DEFAULT_LOG_MAX: u64 = 20;
    pub(crate) const MAX_LOG_MAX: u64 = 100;
    pub(crate) const MAX_LOG_BYTES: u64 = 4 << 20;
    /// `git.add` and `git.diff`: most paths in one call.
    pub(crate) const MAX_PATHS: usize = 1000;
    /// `git.commit`: longest message, in bytes.
    pub(crate) const MAX_COMMIT_MESSAGE_BYTES: usize = 1 << 20;
    /// The end of git's stderr kept in `error.details.stderr` (redacted).
    pub const STDERR_TAIL_BYTES: usize = 4096;
    /// git's own words in an `error.message`, in bytes.
    pub(crate) const MAX_MESSAGE_TEXT_BYTES: usize = 512;
    /// The most filter drivers and configured hooks a repository's configuration may name
    /// (each is switched off by name), and the most output read while listing them.
    pub(crate) const MAX_DRIVER_NAMES: usize = 256;
    pub(crate) const MAX_CONFIG_NAMES_BYTES: usize = 256 * 1024;
    /// The most entries of the git directory checked (each must stay inside the root); a
    /// larger one is `not_a_repository`.
    pub(crate) const MAX_GIT_DIR_ENTRIES: usize = 1_000_000;
    /// `git.add`: most of `git ls-files --stage` read to find the index's submodules.
    pub(crate) const MAX_INDEX_LISTING_BYTES: u64 = 64 << 20;
    pub use crate::adapter::workspace::limits::MAX_PATH_BYTES;
}

wire_table! {
    /// The adapter's error codes, in table order: each with the status of an envelope carrying
    /// it and whether the same call may succeed when retried unchanged.
    pub enum Code(status: Status) {
        /// The request is not a well-formed request envelope.
        RequestInvalid = ("request_invalid", Failed, false),
        /// The request is larger than [`limits::MAX_REQUEST_BYTES`].
        RequestTooLarge = ("request_too_large", Failed, false),
        /// `tool` is not one of the five git tools.
        UnknownTool = ("unknown_tool", Failed, false),
        /// `operation` is neither `call` nor the tool's verb.
        UnknownOperation = ("unknown_operation", Failed, false),
        /// `input` is not an object, a field is missing, mistyped, out of range or unknown; a
        /// commit message with a NUL or nothing but whitespace.
        InvalidInput = ("invalid_input", Failed, false),
        /// `git.add` or `git.commit` without `--allow-commit`.
        OperationNotPermitted = ("operation_not_permitted", Denied, false),
        /// Absolute path, `..` above the root, or a symlink resolving outside it.
        PathOutsideRoot = ("path_outside_root", Denied, false),
        /// The root cannot be opened as a directory.
        RootUnavailable = ("root_unavailable", Unavailable, false),
        /// The root holds no git repository, or its git directory lies outside the root.
        NotARepository = ("not_a_repository", Failed, false),
        /// No `git` on the adapter's PATH, or one too old (before 2.32).
        GitUnavailable = ("git_unavailable", Unavailable, false),
        /// git ran and failed; its stderr (redacted, bounded) is in `details`.
        GitFailed = ("git_failed", Failed, false),
        /// git did not finish within the adapter's time.
        GitTimeout = ("git_timeout", Timeout, true),
        /// The adapter received SIGINT, SIGTERM or SIGHUP.
        Interrupted = ("interrupted", Failed, true),
        /// A bug: the adapter panicked.
        InternalError = ("internal_error", Failed, false),
    }
}

/// The `after_help` of `adapter git`: its codes, from [`Code::ALL`].
pub fn after_help() -> String {
    super::codes_help(
        "Exit status: 0 whenever an envelope was printed (whatever its status), 1 when stdin \
         could not be read, 74 when stdout could not be written, 2 usage error.",
        Code::ALL
            .into_iter()
            .map(|c| (c.as_str(), c.status().as_str(), c.retryable())),
    )
}

/// A failed call: a code, one human sentence (no host path of the adapter's making),
/// optional details.
pub type Failure = super::Failure<Code>;
super::wire_code!(Code);

/// `--author "Name <email>"`: who `git.commit` records as author and committer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author {
    pub name: String,
    pub email: String,
}

impl Author {
    /// Parse `Name <email>` (clap's value parser): a non-empty name without `<`, `>` or a
    /// control character, then an email in angle brackets without them either.
    pub fn parse(text: &str) -> Result<Author, String> {
        let bad = |s: &str| s.chars().any(|c| c == '<' || c == '>' || c.is_control());
        let shape = "expected \"Name <email>\"";
        let (name, rest) = text.split_once('<').ok_or(shape)?;
        let email = rest.strip_suffix('>').ok_or(shape)?;
        if bad(name) || bad(email) || name.trim().is_empty() || email.trim().is_empty() {
            return Err(format!(
                "{shape}, with a name and an email without <, > or control characters"
            ));
        }
        Ok(Author {
            name: name.trim().to_string(),
            email: email.trim().to_string(),
        })
    }
}

/// What `adapter git` was given on its command line.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--root`: the repository; else the working directory.
    pub root: Option<PathBuf>,
    /// `--allow-commit`: serve `git.add` and `git.commit`.
    pub allow_commit: bool,
    /// `--author`.
    pub author: Option<Author>,
}

/// Everything one run needs besides the request.
pub struct Context<'a> {
    pub options: &'a Options,
    /// When the adapter must have its answer (the start plus the budget's exchange).
    pub deadline: Instant,
    /// The adapter's own environment (git gets only `PATH` and `TZ` of it, and for an
    /// identity lookup `HOME` and `XDG_CONFIG_HOME`).
    pub env: Vec<(String, String)>,
    pub interrupts: &'a Interrupts,
}

/// The five tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Status,
    Diff,
    Log,
    Add,
    Commit,
}

impl Tool {
    /// The canonical id (`git.status`) or its provider-safe form (`git_status`).
    fn parse(id: &str) -> Option<Tool> {
        match id {
            "git.status" | "git_status" => Some(Tool::Status),
            "git.diff" | "git_diff" => Some(Tool::Diff),
            "git.log" | "git_log" => Some(Tool::Log),
            "git.add" | "git_add" => Some(Tool::Add),
            "git.commit" | "git_commit" => Some(Tool::Commit),
            _ => None,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Tool::Status => "status",
            Tool::Diff => "diff",
            Tool::Log => "log",
            Tool::Add => "add",
            Tool::Commit => "commit",
        }
    }

    fn writes(self) -> bool {
        matches!(self, Tool::Add | Tool::Commit)
    }
}

/// A tool's input, checked before anything runs.
enum Call {
    Status,
    Diff { staged: bool, paths: Vec<String> },
    Log { max: u64 },
    Add { paths: Vec<String> },
    Commit { message: String },
}

/// The whole answer to one request (`bytes` as read from stdin) as a result envelope, the
/// process left unconfined (for tests: the restriction is for the life of the process).
pub fn respond(bytes: Vec<u8>, cx: &Context<'_>) -> String {
    answer(bytes, cx, None)
}

/// [`respond`], confining the process to the root before git runs when `confined` is given
/// (SPEC §15.3); it says how the confinement ended.
fn answer(bytes: Vec<u8>, cx: &Context<'_>, confined: Option<&mut Option<Confined>>) -> String {
    let mut echo = Echo::default();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        serve(bytes, cx, &mut echo, confined)
    }))
    .unwrap_or_else(|_| {
        Err(Failure::new(
            Code::InternalError,
            "the git adapter hit an internal error (a bug); git was stopped",
        ))
    });
    super::render(echo, outcome.map(|output| output.to_string()))
}

fn serve(
    bytes: Vec<u8>,
    cx: &Context<'_>,
    echo: &mut Echo,
    confined: Option<&mut Option<Confined>>,
) -> Result<Value, Failure> {
    let request = parse_request(bytes, echo)?;
    let tool = Tool::parse(&request.echo.tool).ok_or_else(|| {
        Failure::new(
            Code::UnknownTool,
            format!(
                "unknown tool {}; this adapter serves git.status, git.diff, git.log, git.add \
                 and git.commit",
                quoted(&request.echo.tool)
            ),
        )
    })?;
    if request.echo.operation != "call" && request.echo.operation != tool.verb() {
        return Err(Failure::new(
            Code::UnknownOperation,
            format!(
                "unknown operation {} for {}; use \"call\" or {:?}",
                quoted(&request.echo.operation),
                quoted(&request.echo.tool),
                tool.verb()
            ),
        ));
    }
    if tool.writes() && !cx.options.allow_commit {
        return Err(Failure::new(
            Code::OperationNotPermitted,
            format!(
                "git.{} changes the repository, and this adapter was started without \
                 --allow-commit",
                tool.verb()
            ),
        ));
    }
    let input: Value = request
        .document()
        .get("input")
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null);
    let call = read_input(tool, &input)?;
    let root = open_root(cx.options.root.as_deref())?;
    if let Call::Diff { paths, .. } | Call::Add { paths } = &call {
        let handle = Root::open(&root).map_err(|err| root_unavailable(&err))?;
        for path in paths {
            check_resolved(&handle, path)?;
        }
    }
    let mut git = Git::new(&root, &cx.env, cx.deadline, cx.interrupts);
    if let Some(confined) = confined {
        *confined = Some(confine(&mut git, cx, &call)?);
    }
    repo::locate(&mut git)?;
    git.neutralise()?;
    match call {
        Call::Status => status(&git),
        Call::Diff { staged, paths } => diff(&git, staged, &paths),
        Call::Log { max } => log(&git, max),
        Call::Add { paths } => add(&git, &paths),
        Call::Commit { message } => commit(&git, cx, &message),
    }
}

/// Restrict the adapter, and every git it starts, to the root (SPEC §15.3) with the workspace
/// adapter's Landlock self-confinement: read-only for the reading tools, read-write for
/// `git.add` and `git.commit`; beside it what git needs to run ([`Git::needs`]), and for a
/// commit without `--author` the host's global configuration files (read, for an identity).
/// A kernel without Landlock: best effort (`run` warns); any other failure: `root_unavailable`.
fn confine(git: &mut Git<'_>, cx: &Context<'_>, call: &Call) -> Result<Confined, Failure> {
    let rights = match call {
        Call::Add { .. } | Call::Commit { .. } => Rights::ReadWrite,
        _ => Rights::ReadOnly,
    };
    let mut host_files = Vec::new();
    if matches!(call, Call::Commit { .. }) && cx.options.author.is_none() {
        let var = |name: &str| {
            cx.env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| PathBuf::from(v))
        };
        if let Some(home) = var("HOME") {
            host_files.push(home.join(".gitconfig"));
            host_files.push(home.join(".config/git/config"));
        }
        if let Some(xdg) = var("XDG_CONFIG_HOME") {
            host_files.push(xdg.join("git/config"));
        }
    }
    let grants = git.needs(&host_files)?;
    let root = ptd_sys::fs::open_dir_path(git.root()).map_err(|err| root_unavailable(&err))?;
    restrict_to_root_and(root.as_fd(), rights, &grants).map_err(|why| {
        Failure::new(
            Code::RootUnavailable,
            format!("the git adapter could not confine itself to its root: {why}"),
        )
    })
}

/// The request envelope, or `request_invalid` / `request_too_large`.
fn parse_request(bytes: Vec<u8>, echo: &mut Echo) -> Result<Request, Failure> {
    super::read_request(bytes, limits::MAX_REQUEST_BYTES, echo).map_err(|unread| match unread {
        super::Unread::TooLarge(message) => Failure::new(Code::RequestTooLarge, message),
        super::Unread::Invalid(message, details) => {
            Failure::new(Code::RequestInvalid, message).with_details(details)
        }
    })
}

/// The tool's input, type-checked, with its paths checked lexically (§9).
fn read_input(tool: Tool, input: &Value) -> Result<Call, Failure> {
    let invalid =
        |err: crate::adapter::workspace::ToolError| Failure::new(Code::InvalidInput, err.message);
    match tool {
        Tool::Status => match input {
            Value::Object(map) if !map.is_empty() => Err(Failure::new(
                Code::InvalidInput,
                "git.status takes no input fields (unknown input field(s) given); send {}",
            )),
            _ => {
                Input::new(input, &[]).map_err(invalid)?;
                Ok(Call::Status)
            }
        },
        Tool::Diff => {
            let fields = Input::new(input, &["staged", "path", "paths"]).map_err(invalid)?;
            let staged = fields.opt_bool("staged").map_err(invalid)?.unwrap_or(false);
            let mut paths = match fields.opt_string("path").map_err(invalid)? {
                Some(path) => vec![path.to_string()],
                None => Vec::new(),
            };
            if let Some(list) = fields.opt_value("paths") {
                if !paths.is_empty() {
                    return Err(Failure::new(
                        Code::InvalidInput,
                        "give input.path or input.paths, not both",
                    ));
                }
                paths = string_list(list, "paths")?;
            }
            Ok(Call::Diff {
                staged,
                paths: lexical_paths(&paths, "path")?,
            })
        }
        Tool::Log => {
            let fields = Input::new(input, &["max"]).map_err(invalid)?;
            let max = fields
                .opt_u64("max")
                .map_err(invalid)?
                .unwrap_or(limits::DEFAULT_LOG_MAX);
            if max == 0 || max > limits::MAX_LOG_MAX {
                return Err(Failure::new(
                    Code::InvalidInput,
                    format!("input.max must be between 1 and {}", limits::MAX_LOG_MAX),
                ));
            }
            Ok(Call::Log { max })
        }
        Tool::Add => {
            let fields = Input::new(input, &["paths"]).map_err(invalid)?;
            let list = fields
                .opt_value("paths")
                .ok_or_else(|| Failure::new(Code::InvalidInput, "input.paths is required"))?;
            let paths = string_list(list, "paths")?;
            if paths.is_empty() {
                return Err(Failure::new(
                    Code::InvalidInput,
                    "input.paths must name at least one path",
                ));
            }
            Ok(Call::Add {
                paths: lexical_paths(&paths, "paths")?,
            })
        }
        Tool::Commit => {
            let fields = Input::new(input, &["message"]).map_err(invalid)?;
            let message = fields.string("message").map_err(invalid)?;
            check_message(message)?;
            Ok(Call::Commit {
                message: message.to_string(),
            })
        }
    }
}

/// A JSON array of at most [`limits::MAX_PATHS`] strings.
fn string_list(value: &Value, key: &str) -> Result<Vec<String>, Failure> {
    let Value::Array(items) = value else {
        return Err(Failure::new(
            Code::InvalidInput,
            format!(
                "input.{key} must be an array of strings, not {}",
                ptd_wire::json::kind_name(value)
            ),
        ));
    };
    if items.len() > limits::MAX_PATHS {
        return Err(Failure::new(
            Code::InvalidInput,
            format!("input.{key} names more than {} paths", limits::MAX_PATHS),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.clone()),
            other => Err(Failure::new(
                Code::InvalidInput,
                format!(
                    "input.{key}[{i}] must be a string, not {}",
                    ptd_wire::json::kind_name(other)
                ),
            )),
        })
        .collect()
}

/// Each path checked by §9's lexical rules and normalised (`./a//b` → `a/b`, the root `.`).
fn lexical_paths(paths: &[String], key: &str) -> Result<Vec<String>, Failure> {
    paths
        .iter()
        .map(|raw| {
            RelPath::parse(raw)
                .map(|rel| rel.display())
                .map_err(|err| path_failure(err, raw, key))
        })
        .collect()
}

/// §9's resolved rule: following symlinks from the root's handle, the path stays inside. A
/// path that does not exist (a deleted file to stage) is git's to judge.
fn check_resolved(root: &Root, path: &str) -> Result<(), Failure> {
    let rel = RelPath::parse(path).map_err(|err| path_failure(err, path, "paths"))?;
    match root.open_beneath(&rel, OFlags::PATH | OFlags::CLOEXEC) {
        Ok(_) | Err(PathError::NotFound | PathError::NotADirectory | PathError::Io(_)) => Ok(()),
        Err(err) => Err(path_failure(err, path, "paths")),
    }
}

fn path_failure(err: PathError, raw: &str, key: &str) -> Failure {
    match err {
        PathError::OutsideRoot if raw.starts_with('/') => Failure::new(
            Code::PathOutsideRoot,
            "absolute paths are refused; paths are relative to the repository root",
        ),
        PathError::OutsideRoot => Failure::new(
            Code::PathOutsideRoot,
            format!(
                "{} is outside the repository root; paths must be relative and stay inside it",
                quoted(raw)
            ),
        ),
        PathError::Invalid(why) => Failure::new(
            Code::InvalidInput,
            format!("input.{key}: {why} ({})", quoted(raw)),
        ),
        PathError::SymlinkLoop | PathError::Refused(_) => Failure::new(
            Code::InvalidInput,
            format!(
                "{} has too many levels of symbolic links, or one changed during the call",
                quoted(raw)
            ),
        ),
        PathError::NotFound | PathError::NotADirectory | PathError::Io(_) => Failure::new(
            Code::InvalidInput,
            format!("{} cannot be resolved", quoted(raw)),
        ),
    }
}

/// A commit message: at most [`limits::MAX_COMMIT_MESSAGE_BYTES`], no NUL (git would cut
/// the message there), not only whitespace.
fn check_message(message: &str) -> Result<(), Failure> {
    if message.len() > limits::MAX_COMMIT_MESSAGE_BYTES {
        return Err(Failure::new(
            Code::InvalidInput,
            format!(
                "input.message is longer than {} bytes",
                limits::MAX_COMMIT_MESSAGE_BYTES
            ),
        ));
    }
    if message.contains('\0') {
        return Err(Failure::new(
            Code::InvalidInput,
            "input.message contains a NUL character",
        ));
    }
    if message.trim().is_empty() {
        return Err(Failure::new(
            Code::InvalidInput,
            "input.message is empty or only whitespace",
        ));
    }
    Ok(())
}

/// The root (`--root` or the working directory), canonical: git's cwd and work tree.
fn open_root(root: Option<&Path>) -> Result<PathBuf, Failure> {
    let root = std::fs::canonicalize(root.unwrap_or(Path::new(".")))
        .map_err(|err| root_unavailable(&err))?;
    if root.to_str().is_none() {
        // git gets the root in environment variables, which the adapter writes as UTF-8.
        return Err(Failure::new(
            Code::RootUnavailable,
            "the repository root's path is not valid UTF-8",
        ));
    }
    if !root.is_dir() {
        return Err(Failure::new(
            Code::RootUnavailable,
            "the repository root is not a directory",
        ));
    }
    Ok(root)
}

fn root_unavailable(err: &std::io::Error) -> Failure {
    // io::Error's Display of an OS error is "<strerror> (os error N)": no path in it.
    Failure::new(
        Code::RootUnavailable,
        format!("the repository root cannot be opened as a directory: {err}"),
    )
}

/// `git.status {}` → `{branch, head?, upstream?, ahead?, behind?, entries, truncated}`.
fn status(git: &Git<'_>) -> Result<Value, Failure> {
    let ran = git.run(
        &[
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=normal",
            "--ignored=no",
            "--ignore-submodules=all",
            "--renames",
        ],
        RunOptions::read(limits::MAX_STATUS_BYTES),
    )?;
    let truncated = ran.truncated;
    let stdout = ran.success("status")?;
    Ok(parse::status(
        &stdout,
        truncated,
        limits::MAX_STATUS_ENTRIES,
    ))
}

/// `git.diff {staged?, path?|paths?}` → `{diff, bytes, truncated}`: git's unified diff with
/// `a/` and `b/` prefixes (whatever `diff.noprefix` or `diff.mnemonicPrefix` say).
fn diff(git: &Git<'_>, staged: bool, paths: &[String]) -> Result<Value, Failure> {
    let mut args = vec![
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=all",
        "--submodule=short",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        // Three lines of context whatever `diff.context` says: what `git apply` and
        // `workspace.apply_patch` expect.
        "--unified=3",
    ];
    if staged {
        args.push("--cached");
    }
    args.push("--");
    // No path: one run of the whole tree; else one run a batch, their diffs joined.
    let batches = if paths.is_empty() {
        vec![Vec::new()]
    } else {
        diff_batches(paths)
    };
    let mut stdout = Vec::new();
    let mut truncated = false;
    for batch in batches {
        let left = limits::MAX_DIFF_BYTES - stdout.len();
        if left == 0 {
            // Full, and another batch to diff: whatever it shows is cut.
            truncated = true;
            break;
        }
        let mut argv = args.clone();
        argv.extend(batch);
        let ran = git.run(&argv, RunOptions::read(left as u64))?;
        truncated = ran.truncated;
        stdout.extend(ran.success("diff")?);
        if truncated {
            break;
        }
    }
    if truncated {
        // Cut at a character boundary: an incomplete last character is not the diff's.
        let valid = match std::str::from_utf8(&stdout) {
            Ok(_) => stdout.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => stdout.len(),
        };
        stdout.truncate(valid);
    }
    let text = String::from_utf8_lossy(&stdout).into_owned();
    Ok(json!({"bytes": text.len(), "diff": text, "truncated": truncated}))
}

/// `git.log {max?}` → `{commits: [{commit, author_name, author_email, author_date, subject}],
/// truncated}`; an unborn branch has no commits.
fn log(git: &Git<'_>, max: u64) -> Result<Value, Failure> {
    let head = git.run(
        &["rev-parse", "--verify", "-q", "HEAD"],
        RunOptions::read(4096),
    )?;
    if head.exit != 0 {
        return Ok(json!({"commits": [], "truncated": false}));
    }
    let max = format!("--max-count={max}");
    let ran = git.run(
        &[
            "log",
            "-z",
            "--no-color",
            "--no-show-signature",
            "--no-notes",
            "--no-mailmap",
            parse::LOG_FORMAT,
            &max,
            "HEAD",
            "--",
        ],
        RunOptions::read(limits::MAX_LOG_BYTES),
    )?;
    let truncated = ran.truncated;
    let stdout = ran.success("log")?;
    Ok(parse::log(&stdout, truncated))
}

/// `git.add {paths}` → `{added: [paths as normalised]}`.
///
/// The paths reach git on its stdin, NUL-separated (`--pathspec-from-file=-
/// --pathspec-file-nul`), never on its command line: 1000 paths of 4 KB would pass the
/// kernel's limit on the size of a command line (`E2BIG`).
///
/// Submodules are never entered: `git add` of a directory holding one runs `git status` in
/// it, with the submodule's own configuration (its filters, which the superproject does not
/// name), whatever `diff.ignoreSubmodules` or `submodule.<name>.ignore` say. So a path that is
/// or lies inside a submodule (or another repository nested in the tree) is refused, and
/// every submodule of the index is excluded from the paths given (`:(exclude,literal)`).
fn add(git: &Git<'_>, paths: &[String]) -> Result<Value, Failure> {
    let gitlinks = gitlinks(git)?;
    for path in paths {
        if let Some(repo) = nested_repository(git.root(), &gitlinks, path) {
            return Err(Failure::new(
                Code::PathOutsideRoot,
                format!(
                    "{} is {}; the adapter never enters a submodule or a repository nested \
                     in the root",
                    quoted(path),
                    if repo == *path {
                        "a submodule".to_string()
                    } else {
                        format!("inside the submodule {}", quoted(&repo))
                    }
                ),
            ));
        }
    }
    let mut pathspecs: Vec<String> = paths.iter().map(|p| format!(":(literal){p}")).collect();
    pathspecs.extend(gitlinks.iter().map(|g| format!(":(exclude,literal){g}")));
    let mut opts = RunOptions::write(64 * 1024);
    opts.stdin = Some(nul_separated(&pathspecs));
    opts.pathspec_magic = true;
    git.run(
        &["add", "--pathspec-from-file=-", "--pathspec-file-nul"],
        opts,
    )?
    .success("add")?;
    Ok(json!({"added": paths}))
}

/// The paths of the index's submodules (gitlinks, mode 160000), from `git ls-files -s -z`.
fn gitlinks(git: &Git<'_>) -> Result<Vec<String>, Failure> {
    let ran = git.run(
        &["ls-files", "--stage", "-z"],
        RunOptions::read(limits::MAX_INDEX_LISTING_BYTES),
    )?;
    if ran.truncated {
        return Err(Failure::new(
            Code::GitFailed,
            format!(
                "the index lists more than {} bytes of entries; the adapter reads it whole \
                 to find its submodules",
                limits::MAX_INDEX_LISTING_BYTES
            ),
        ));
    }
    Ok(parse::gitlinks(&ran.success("ls-files")?))
}

/// The submodule or nested repository that `path` is or lies inside, if any: a gitlink of the
/// index, or a directory on the way (below the root) that holds a `.git`.
fn nested_repository(root: &Path, gitlinks: &[String], path: &str) -> Option<String> {
    if path == "." {
        return None;
    }
    let inside = |repo: &str| {
        path == repo
            || path
                .strip_prefix(repo)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    if let Some(link) = gitlinks.iter().find(|g| inside(g)) {
        return Some(link.clone());
    }
    let mut prefix = String::new();
    for part in path.split('/') {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if std::fs::symlink_metadata(root.join(&prefix).join(".git")).is_ok() {
            return Some(prefix);
        }
    }
    None
}

/// Each path followed by a NUL (git's `--pathspec-file-nul` form: no quoting).
fn nul_separated(paths: &[String]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(paths.iter().map(|p| p.len() + 1).sum());
    for path in paths {
        bytes.extend_from_slice(path.as_bytes());
        bytes.push(0);
    }
    bytes
}

/// The paths of a `git.diff` in the batches git is given them (`git diff` takes no
/// `--pathspec-from-file`): sorted, without repeats or a path beneath another of the list
/// (`.` covers all), which would show the same change twice; each batch at most
/// [`DIFF_BATCH_BYTES`] of paths.
fn diff_batches(paths: &[String]) -> Vec<Vec<&str>> {
    let mut sorted: Vec<&str> = paths.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.contains(&".") {
        return vec![vec!["."]];
    }
    let mut kept: Vec<&str> = Vec::with_capacity(sorted.len());
    for path in sorted {
        // Sorted, an ancestor `a` comes before `a/b`, though not always just before it
        // (`a-b` sorts between): look at every kept path that is a prefix.
        let covered = kept.iter().any(|k| {
            path.strip_prefix(k)
                .is_some_and(|rest| rest.starts_with('/'))
        });
        if !covered {
            kept.push(path);
        }
    }
    let mut batches: Vec<Vec<&str>> = Vec::new();
    let mut bytes = 0;
    for path in kept {
        match batches.last_mut() {
            Some(batch) if bytes + path.len() < DIFF_BATCH_BYTES => batch.push(path),
            _ => {
                batches.push(vec![path]);
                bytes = 0;
            }
        }
        bytes += path.len() + 1;
    }
    batches
}

/// The most bytes of paths on one `git diff` command line: well under the kernel's limit on
/// a command line and its environment (`ARG_MAX`, 2 MiB at the least on Linux).
const DIFF_BATCH_BYTES: usize = 256 * 1024;

/// `git.commit {message}` → `{commit}`: what is staged, with the message exactly as given
/// (surrounding blank lines and trailing spaces dropped, `#` lines kept), unsigned, no hook.
fn commit(git: &Git<'_>, cx: &Context<'_>, message: &str) -> Result<Value, Failure> {
    let identity = identity(git, cx)?;
    let mut opts = RunOptions::write(64 * 1024);
    opts.stdin = Some(message.as_bytes().to_vec());
    opts.env = &identity;
    git.run(
        &[
            "commit",
            "--no-verify",
            "--no-gpg-sign",
            "--quiet",
            "--cleanup=whitespace",
            "--no-edit",
            "--file=-",
        ],
        opts,
    )?
    .success("commit")?;
    let head = git.run_small(&["rev-parse", "--verify", "HEAD"])?;
    let commit = String::from_utf8_lossy(&head).trim().to_string();
    Ok(json!({ "commit": commit }))
}

/// Who commits: `--author` for author and committer; else the `user.name` and `user.email`
/// that the repository's configuration or the host's global one gives (read, nothing else
/// of the global configuration is used). None of them: git refuses with a clear message.
fn identity(git: &Git<'_>, cx: &Context<'_>) -> Result<Vec<(String, String)>, Failure> {
    let (name, email) = match &cx.options.author {
        Some(author) => (Some(author.name.clone()), Some(author.email.clone())),
        None => {
            let host: Vec<(String, String)> = cx
                .env
                .iter()
                .filter(|(k, _)| k == "HOME" || k == "XDG_CONFIG_HOME")
                .cloned()
                .collect();
            let mut opts = RunOptions::read(64 * 1024);
            opts.host_global_config = true;
            opts.env = &host;
            let ran = git.run(
                &["config", "-z", "--get-regexp", r"^user\.(name|email)$"],
                opts,
            )?;
            let (mut name, mut email) = (None, None);
            // `key\nvalue\0` each, in increasing precedence: the last one wins.
            for entry in ran.stdout.split(|&b| b == 0) {
                let entry = String::from_utf8_lossy(entry);
                match entry.split_once('\n') {
                    Some(("user.name", v)) => name = Some(v.to_string()),
                    Some(("user.email", v)) => email = Some(v.to_string()),
                    _ => {}
                }
            }
            (name, email)
        }
    };
    let mut env = Vec::new();
    for (role, value) in [("NAME", name), ("EMAIL", email)] {
        if let Some(value) = value {
            env.push((format!("GIT_AUTHOR_{role}"), value.clone()));
            env.push((format!("GIT_COMMITTER_{role}"), value));
        }
    }
    Ok(env)
}

/// A name from the request for a message: quoted, escaped, cut.
fn quoted(s: &str) -> String {
    let shown = cut_at_char_boundary(s, 128);
    ptd_wire::terminal::escape(&format!("{shown:?}")).into_owned()
}

/// Serve one request from stdin, print one result envelope on stdout; returns the exit
/// status: 0 when the envelope was printed (any status), 1 when stdin could not be read, 74
/// when stdout could not be written (`ptd_wire::stdout`).
pub fn run(options: Options) -> u8 {
    let start = Instant::now();
    let interrupts = Interrupts::install();
    let budget = super::mcp::Budget::from_timeout_ms(
        std::env::var(ptd_wire::envelope::vars::TIMEOUT_MS)
            .ok()
            .as_deref(),
    );
    let bytes = match super::read_stdin(limits::MAX_REQUEST_BYTES) {
        Ok(bytes) => bytes,
        Err(status) => return status,
    };
    let cx = Context {
        options: &options,
        deadline: start + budget.exchange,
        env: std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect(),
        interrupts: &interrupts,
    };
    let mut confined = None;
    let mut line = answer(bytes, &cx, Some(&mut confined)).into_bytes();
    line.push(b'\n');
    if let Some(Confined::Unsupported(errno)) = confined {
        stderr_line!(
            "warning[landlock]: this kernel has no Landlock ({errno}); the git adapter served \
             the call without confining itself to its root"
        );
    }
    ptd_wire::stdout::print(&line, "the result", 0)
}

#[cfg(test)]
mod tests;
