//! Reading replay files: case files (`parent-tool-dispatch/fixture/v1`) and transcripts
//! (`wp-codebox/tool-call-transcript/v1`), into [`Case`]s.
//!
//! Invariants:
//! - Every file is read through the strict reader (`json`): bounded in size
//!   ([`MAX_FILE_BYTES`]), valid UTF-8, one JSON object, no duplicate key at any depth, at
//!   most 128 levels deep. It is opened without blocking (a FIFO named like a case is refused,
//!   not waited on) and must be a regular file.
//! - A file that cannot be read, or is not a valid case or transcript, becomes a
//!   [`Loaded::Broken`] that says why, with every issue and its JSON Pointer: it fails, it is
//!   never skipped.
//! - The request and a `result` answer stay the text they were written in (numbers exact,
//!   nothing re-serialized); only the small members (adapter argv, env, options, expect) are
//!   read as trees.
//!
//! It must not run anything or judge anything.

use super::walk::{self, show};
use crate::schema::FIXTURE_SCHEMA;
use ptd_sys::fs;
use ptd_wire::error::Status;
use ptd_wire::json::raw::{self, Fields};
use ptd_wire::json::{self, Document, Kind};
use ptd_wire::transcript;
use ptd_wire::validate::{codes, join, Checker, Issue};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Largest file read (a case or a transcript).
pub const MAX_FILE_BYTES: usize = 64 * 1024 * 1024;

/// The members a case file may have.
const CASE_KEYS: [&str; 9] = [
    "schema",
    "name",
    "description",
    "bridge",
    "request",
    "adapter",
    "env",
    "options",
    "expect",
];

/// Issue code of a member the fixture format does not know (a typo must not be ignored).
pub const UNKNOWN_KEY: &str = "unknown_key";

/// How the adapter answers in a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adapter {
    /// Run this argv (it becomes the bridge's `dispatcher.command.argv`).
    Argv(Vec<String>),
    /// What an adapter wrote and how it exited; no process runs.
    Recorded {
        stdout: String,
        exit_code: i32,
        stderr: String,
    },
    /// An envelope the adapter printed (raw JSON text), exit 0; no process runs.
    Result(String),
}

/// What the dispatcher must make of a case.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    pub status: Status,
    pub error_code: Option<String>,
    pub exit_code: Option<i32>,
    /// A subset of the printed envelope.
    pub result: Option<Value>,
}

/// Where a case comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A case file (the only kind `--bless` rewrites).
    CaseFile,
    /// Entry `index` of a transcript's `tool_calls`.
    Transcript { index: usize },
}

/// One case, ready to run.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub file: PathBuf,
    pub origin: Origin,
    /// The text given to `--parent-tool-bridge` (JSON, or `@FILE`).
    pub bridge: String,
    /// The bridge as a tree, when it is an object (an `argv` case needs one to set the argv).
    pub bridge_tree: Option<Map<String, Value>>,
    /// The request bytes, exactly as the dispatcher reads them.
    pub request: Vec<u8>,
    pub adapter: Adapter,
    pub env: Vec<(String, String)>,
    pub options: Vec<String>,
    /// `None` when the case file has none yet (it fails; `--bless` writes one).
    pub expect: Option<Expectation>,
    /// The `expect` member as written, in its key order (for `--bless`).
    pub expect_tree: Option<Map<String, Value>>,
}

/// A case, or why a file yields none.
#[derive(Debug, Clone)]
pub enum Loaded {
    Case(Box<Case>),
    Broken {
        /// The case's name when it could be read, else the file's path.
        name: String,
        file: PathBuf,
        /// What is wrong, one line each.
        reasons: Vec<String>,
    },
}

impl Loaded {
    fn broken(file: &Path, name: Option<String>, reasons: Vec<String>) -> Loaded {
        Loaded::Broken {
            name: name.unwrap_or_else(|| show(file)),
            file: file.to_path_buf(),
            reasons,
        }
    }
}

/// Read `path` and return its cases: one for a case file, one per tool call for a transcript
/// (replayed against `transcript_bridge`), or one broken entry saying why there are none.
pub fn load(path: &Path, transcript_bridge: Option<&str>) -> Vec<Loaded> {
    let bytes = match read_file(path) {
        Ok(bytes) => bytes,
        Err(reason) => return vec![Loaded::broken(path, None, vec![reason.to_string()])],
    };
    let doc = match Document::parse(bytes, MAX_FILE_BYTES) {
        Ok(doc) => doc,
        Err(issue) => {
            return vec![Loaded::broken(
                path,
                None,
                vec![format!("the file is not valid JSON: {issue}")],
            )]
        }
    };
    match doc.get("schema").and_then(raw::string).as_deref() {
        Some(FIXTURE_SCHEMA) => vec![parse_case(&doc, path)],
        Some(transcript::SCHEMA) => parse_transcript(&doc, path, transcript_bridge),
        found => vec![Loaded::broken(
            path,
            None,
            vec![format!(
                "the file is not a replay case or transcript: its \"schema\" is {}, expected \
                 {FIXTURE_SCHEMA:?} or {:?}",
                found.map_or_else(|| "missing".to_string(), |s| format!("{s:?}")),
                transcript::SCHEMA
            )],
        )],
    }
}

/// Why a case file could not be read. Messages name the problem, not the path (the caller
/// prints the path).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The path ends in `..` or `/`.
    #[error("the path does not name a file")]
    NoFileName,
    /// Opening, inspecting or reading it failed.
    #[error("the file cannot be read: {0}")]
    Io(#[from] std::io::Error),
    /// A FIFO, a directory, a device, …: never opened for reading.
    #[error("the path is {0}, not a regular file")]
    NotRegular(&'static str),
    /// Over [`MAX_FILE_BYTES`].
    #[error("the file is over the {} limit", json::human_bytes(MAX_FILE_BYTES))]
    TooLarge,
}

/// Read a file without ever blocking on it: it must be a regular file of at most
/// [`MAX_FILE_BYTES`] (through the one reader, `fs::read_file`).
pub fn read_file(path: &Path) -> Result<Vec<u8>, ReadError> {
    fs::read_file(path, MAX_FILE_BYTES as u64).map_err(|e| match e {
        fs::ReadError::NotRegular(kind) => ReadError::NotRegular(walk::describe(kind)),
        fs::ReadError::TooLarge { .. } => ReadError::TooLarge,
        e => ReadError::Io(e.into()),
    })
}

/// A small member as a tree (the strict reader already accepted its text).
fn tree(raw: &str) -> Option<Value> {
    let mut de = serde_json::Deserializer::from_str(raw);
    de.disable_recursion_limit();
    serde::Deserialize::deserialize(&mut de).ok()
}

fn parse_case(doc: &Document, path: &Path) -> Loaded {
    let mut c = Checker::new();
    let top = Fields::parse(doc.text()).unwrap_or_default();
    for (key, _) in top.iter() {
        if !CASE_KEYS.contains(&key) {
            c.push(
                UNKNOWN_KEY,
                join("", key),
                format!(
                    "{key:?} is not a member of a case (expected one of {})",
                    CASE_KEYS.join(", ")
                ),
            );
        }
    }
    let name = c.non_empty_string(&top, "", "name").map(|n| n.into_owned());
    if let Some(description) = top.get("description") {
        c.as_str(description, "/description");
    }
    let (bridge, bridge_tree) = match c.required(&top, "", "bridge") {
        None => (None, None),
        Some(raw) => bridge_of(&mut c, raw, path),
    };
    let request = c
        .required(&top, "", "request")
        .and_then(|raw| match Kind::of(raw) {
            Kind::Object => Some(raw.as_bytes().to_vec()),
            Kind::String => raw::string(raw).map(|s| s.into_owned().into_bytes()),
            _ => {
                c.push(
                    codes::WRONG_TYPE,
                    "/request",
                    "expected an object (the request) or a string (its exact text)",
                );
                None
            }
        });
    let adapter = c
        .required(&top, "", "adapter")
        .and_then(|raw| adapter_of(&mut c, raw));
    // An argv case's bridge text or `@FILE` is read when it runs (`runner::bridge_tree`).
    let env = top
        .get("env")
        .map(|raw| env_of(&mut c, raw))
        .unwrap_or_default();
    let options = top
        .get("options")
        .map(|raw| options_of(&mut c, raw))
        .map(|options| relative_to_case(options, path))
        .unwrap_or_default();
    let (expect, expect_tree) = match top.get("expect") {
        None => (None, None),
        Some(raw) => expect_of(&mut c, raw),
    };
    let (Some(bridge), Some(request), Some(adapter)) = (bridge, request, adapter) else {
        return broken_by_issues(path, name, c.into_issues());
    };
    if !c.is_clean() {
        return broken_by_issues(path, name, c.into_issues());
    }
    Loaded::Case(Box::new(Case {
        name: name.unwrap_or_else(|| show(path)),
        file: path.to_path_buf(),
        origin: Origin::CaseFile,
        bridge,
        bridge_tree,
        request,
        adapter,
        env,
        options,
        expect,
        expect_tree,
    }))
}

fn broken_by_issues(path: &Path, name: Option<String>, issues: Vec<Issue>) -> Loaded {
    let mut reasons = vec!["the file is not a valid case:".to_string()];
    reasons.extend(issues.iter().map(|i| {
        let at = if i.path.is_empty() { "(top)" } else { &i.path };
        format!("  {at}: {} [{}]", i.message, i.code)
    }));
    Loaded::broken(path, name, reasons)
}

/// The bridge as `--parent-tool-bridge` text, and as a tree when it is an object. `@FILE` is
/// relative to the case file's folder, so a suite can be run from anywhere.
fn bridge_of(
    c: &mut Checker,
    raw: &str,
    case_file: &Path,
) -> (Option<String>, Option<Map<String, Value>>) {
    match Kind::of(raw) {
        Kind::Object => match tree(raw) {
            Some(Value::Object(map)) => (Some(raw.to_string()), Some(map)),
            _ => {
                c.push(
                    codes::WRONG_VALUE,
                    "/bridge",
                    "the bridge holds a number out of the range a bridge can use",
                );
                (None, None)
            }
        },
        Kind::String => {
            let text = raw::string(raw).map(|s| s.into_owned()).unwrap_or_default();
            let text = match text.strip_prefix('@') {
                Some(file) if !Path::new(file).is_absolute() => {
                    let folder = case_file.parent().unwrap_or(Path::new(""));
                    format!("@{}", folder.join(file).display())
                }
                _ => text,
            };
            (Some(text), None)
        }
        _ => {
            c.push(
                codes::WRONG_TYPE,
                "/bridge",
                "expected an object (the bridge) or a string (JSON text, or @FILE)",
            );
            (None, None)
        }
    }
}

fn adapter_of(c: &mut Checker, raw: &str) -> Option<Adapter> {
    let fields = c.as_object(raw, "/adapter")?;
    let forms: Vec<(&str, &str)> = fields.iter().collect();
    let [(form, value)] = forms.as_slice() else {
        c.push(
            codes::WRONG_VALUE,
            "/adapter",
            format!(
                "expected exactly one of \"argv\", \"recorded\", \"result\"; found {} members",
                forms.len()
            ),
        );
        return None;
    };
    match *form {
        "argv" => {
            let value = tree(value).unwrap_or(Value::Null);
            let argv = c.as_string_array(&value, "/adapter/argv")?;
            match argv.first() {
                None => c.push(codes::EMPTY, "/adapter/argv", "argv must not be empty"),
                Some(first) if first.is_empty() => {
                    c.push(codes::EMPTY, "/adapter/argv/0", "argv[0] must not be empty")
                }
                Some(_) => {}
            }
            for (i, arg) in argv.iter().enumerate() {
                if arg.contains('\0') {
                    c.push(
                        codes::CONTAINS_NUL,
                        format!("/adapter/argv/{i}"),
                        "argv elements must not contain NUL",
                    );
                }
            }
            Some(Adapter::Argv(argv))
        }
        "recorded" => {
            let value = tree(value).unwrap_or(Value::Null);
            let map = c.as_object(&value, "/adapter/recorded")?;
            for key in map.keys() {
                if !["stdout", "exit_code", "stderr"].contains(&key.as_str()) {
                    c.push(
                        UNKNOWN_KEY,
                        join("/adapter/recorded", key),
                        format!("{key:?} is not a member of recorded (stdout, exit_code, stderr)"),
                    );
                }
            }
            let stdout = c
                .string(map, "/adapter/recorded", "stdout")
                .map(str::to_string);
            let exit_code = exit_code_of(c, map, "/adapter/recorded", true);
            let stderr = c
                .optional_string(map, "/adapter/recorded", "stderr")
                .unwrap_or_default()
                .to_string();
            Some(Adapter::Recorded {
                stdout: stdout?,
                exit_code: exit_code?,
                stderr,
            })
        }
        "result" => {
            if Kind::of(value) != Kind::Object {
                c.push(
                    codes::WRONG_TYPE,
                    "/adapter/result",
                    format!(
                        "expected an object (a result envelope), found {}",
                        Kind::of(value).name()
                    ),
                );
                return None;
            }
            Some(Adapter::Result(value.to_string()))
        }
        other => {
            c.push(
                codes::WRONG_VALUE,
                join("/adapter", other),
                format!("{other:?} is not an adapter form (argv, recorded, result)"),
            );
            None
        }
    }
}

/// An exit status: an integer from 0 to 255.
fn exit_code_of(
    c: &mut Checker,
    map: &Map<String, Value>,
    base: &str,
    required: bool,
) -> Option<i32> {
    let value = if required {
        c.required(map, base, "exit_code")?
    } else {
        map.get("exit_code")?
    };
    match value.as_u64() {
        Some(code) if code <= 255 => Some(code as i32),
        _ => {
            c.push(
                codes::OUT_OF_RANGE,
                join(base, "exit_code"),
                "an exit status is an integer from 0 to 255",
            );
            None
        }
    }
}

fn env_of(c: &mut Checker, raw: &str) -> Vec<(String, String)> {
    let value = tree(raw).unwrap_or(Value::Null);
    let Some(map) = c.as_object(&value, "/env") else {
        return Vec::new();
    };
    c.env_vars(map, "/env", codes::CONTAINS_NUL)
}

/// The main job's options that name a file or folder, and whether only an `@` value does.
const FILE_OPTIONS: [(&str, bool); 5] = [
    ("--artifact-dir", false),
    ("--result-file", false),
    ("--ca-cert", false),
    ("--tool-map", true),
    ("--policy", false),
];

/// The one rule for relative paths in a case file: every path it names — the bridge's
/// `@FILE`, the files its options name, an `argv` case's working directory — is relative to
/// the case file's folder. Here: the options' paths, made so (`--opt VALUE` and
/// `--opt=VALUE`), for recorded cases judged in this process as for argv cases in a child.
fn relative_to_case(options: Vec<String>, case_file: &Path) -> Vec<String> {
    let folder = case_file.parent().unwrap_or(Path::new(""));
    let rewrite = |value: &str, at_only: bool| -> String {
        let (prefix, file) = match value.strip_prefix('@') {
            Some(file) => ("@", file),
            None if at_only => return value.to_string(),
            None => ("", value),
        };
        if file.is_empty() || Path::new(file).is_absolute() {
            return value.to_string();
        }
        format!("{prefix}{}", folder.join(file).display())
    };
    let mut out = Vec::with_capacity(options.len());
    let mut pending: Option<bool> = None;
    for option in options {
        if let Some(at_only) = pending.take() {
            out.push(rewrite(&option, at_only));
            continue;
        }
        let named = FILE_OPTIONS.iter().find_map(|&(name, at_only)| {
            if option == name {
                Some((None, at_only))
            } else {
                option
                    .strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('='))
                    .map(|value| (Some((name, value.to_string())), at_only))
            }
        });
        match named {
            Some((None, at_only)) => {
                pending = Some(at_only);
                out.push(option);
            }
            Some((Some((name, value)), at_only)) => {
                out.push(format!("{name}={}", rewrite(&value, at_only)));
            }
            None => out.push(option),
        }
    }
    out
}

fn options_of(c: &mut Checker, raw: &str) -> Vec<String> {
    let value = tree(raw).unwrap_or(Value::Null);
    let options = c.as_string_array(&value, "/options").unwrap_or_default();
    for (i, option) in options.iter().enumerate() {
        let path = format!("/options/{i}");
        if option.contains('\0') {
            c.push(codes::CONTAINS_NUL, path, "options must not contain NUL");
        } else if option == "--parent-tool-bridge" || option.starts_with("--parent-tool-bridge=") {
            c.push(
                codes::WRONG_VALUE,
                path,
                "the bridge is the case's \"bridge\", not an option",
            );
        }
    }
    options
}

fn expect_of(c: &mut Checker, raw: &str) -> (Option<Expectation>, Option<Map<String, Value>>) {
    const BASE: &str = "/expect";
    let value = tree(raw).unwrap_or(Value::Null);
    let Some(map) = c.as_object(&value, BASE) else {
        return (None, None);
    };
    for key in map.keys() {
        if !["status", "error_code", "exit_code", "result"].contains(&key.as_str()) {
            c.push(
                UNKNOWN_KEY,
                join(BASE, key),
                format!(
                    "{key:?} is not a member of expect (status, error_code, exit_code, result)"
                ),
            );
        }
    }
    let status = c.string(map, BASE, "status").and_then(|s| {
        let status = Status::parse(s);
        if status.is_none() {
            c.push(
                codes::WRONG_VALUE,
                "/expect/status",
                format!("\"status\" must be one of succeeded, denied, unavailable, timeout, failed; found {s:?}"),
            );
        }
        status
    });
    let error_code = match map.get("error_code") {
        None => None,
        Some(_) => c
            .non_empty_string(map, BASE, "error_code")
            .map(str::to_string),
    };
    let exit_code = exit_code_of(c, map, BASE, false);
    let result = match map.get("result") {
        None => None,
        Some(v) => c.as_object(v, "/expect/result").map(|_| v.clone()),
    };
    let expectation = status.map(|status| Expectation {
        status,
        error_code,
        exit_code,
        result,
    });
    (expectation, Some(map.clone()))
}

/// One case per tool call: its redacted request against `bridge`, its recorded result as the
/// adapter's answer (exit 0), its recorded status (and error code) as the expectation.
fn parse_transcript(doc: &Document, path: &Path, bridge: Option<&str>) -> Vec<Loaded> {
    let Some(bridge) = bridge else {
        return vec![Loaded::broken(
            path,
            None,
            vec![format!(
                "replaying a transcript needs the bridge it was recorded against: pass \
                 --parent-tool-bridge (or set {})",
                crate::cli::BRIDGE_ENV
            )],
        )];
    };
    let mut calls = Vec::new();
    let listed = doc
        .get("tool_calls")
        .is_some_and(|raw| raw::for_each_item(raw, |_, item| calls.push(item)));
    if !listed || calls.is_empty() {
        return vec![Loaded::broken(
            path,
            None,
            vec!["the transcript has no tool_calls to replay".into()],
        )];
    }
    let many = calls.len() > 1;
    calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            let name = if many {
                format!("{}#{}", show(path), index + 1)
            } else {
                show(path)
            };
            transcript_case(call, index, path, bridge)
                .unwrap_or_else(|reason| Loaded::broken(path, Some(name.clone()), vec![reason]))
                .named(name)
        })
        .collect()
}

impl Loaded {
    fn named(self, name: String) -> Loaded {
        match self {
            Loaded::Case(mut case) => {
                case.name = name;
                Loaded::Case(case)
            }
            broken => broken,
        }
    }
}

fn transcript_case(call: &str, index: usize, path: &Path, bridge: &str) -> Result<Loaded, String> {
    let at = format!("/tool_calls/{index}");
    let call = Fields::parse(call).ok_or(format!("{at} is not an object"))?;
    let status = call
        .get("status")
        .and_then(raw::string)
        .and_then(|s| Status::parse(&s))
        .ok_or(format!("{at}/status is not one of the five statuses"))?;
    let metadata = call
        .get("metadata")
        .and_then(Fields::parse)
        .ok_or(format!("{at}/metadata is not an object"))?;
    let request = match metadata.get("request") {
        Some(raw) if Kind::of(raw) == Kind::Object => raw.as_bytes().to_vec(),
        // The request was not a JSON object when it was recorded: replay those bytes' verdict.
        Some(raw) if Kind::of(raw) == Kind::Null => b"null".to_vec(),
        _ => return Err(format!("{at}/metadata/request is not an object or null")),
    };
    let result = metadata
        .get("result")
        .filter(|raw| Kind::of(raw) == Kind::Object)
        .ok_or(format!("{at}/metadata/result is not an object"))?;
    let error_code = Fields::parse(result)
        .and_then(|r| r.get("error").and_then(Fields::parse))
        .and_then(|e| e.get("code").and_then(raw::string).map(|s| s.into_owned()));
    Ok(Loaded::Case(Box::new(Case {
        name: String::new(),
        file: path.to_path_buf(),
        origin: Origin::Transcript { index },
        bridge: bridge.to_string(),
        bridge_tree: None,
        request,
        adapter: Adapter::Result(result.to_string()),
        env: Vec::new(),
        options: Vec::new(),
        expect: Some(Expectation {
            status,
            error_code,
            exit_code: None,
            result: None,
        }),
        expect_tree: None,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn one_case(loaded: Vec<Loaded>) -> Box<Case> {
        match <[Loaded; 1]>::try_from(loaded) {
            Ok([Loaded::Case(case)]) => case,
            other => panic!("expected one case, got {other:?}"),
        }
    }

    fn reasons(loaded: &[Loaded]) -> String {
        match loaded {
            [Loaded::Broken { reasons, .. }] => reasons.join("\n"),
            other => panic!("expected one broken entry, got {other:?}"),
        }
    }

    const MINIMAL: &str = r#"{"schema": "parent-tool-dispatch/fixture/v1", "name": "n",
        "bridge": {"b": 1}, "request": "raw {",
        "adapter": {"recorded": {"stdout": "x", "exit_code": 3}},
        "expect": {"status": "failed", "exit_code": 1}}"#;

    #[test]
    fn a_minimal_case_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(tmp.path(), "a.case.json", MINIMAL);
        let case = one_case(load(&path, None));
        assert_eq!(case.name, "n");
        assert_eq!(case.bridge, r#"{"b": 1}"#);
        assert_eq!(case.request, b"raw {");
        assert_eq!(
            case.adapter,
            Adapter::Recorded {
                stdout: "x".into(),
                exit_code: 3,
                stderr: String::new()
            }
        );
        let expect = case.expect.unwrap();
        assert_eq!((expect.status, expect.exit_code), (Status::Failed, Some(1)));
    }

    #[test]
    fn every_issue_of_a_bad_case_is_listed_with_its_pointer() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(
            tmp.path(),
            "a.case.json",
            r#"{"schema": "parent-tool-dispatch/fixture/v1", "name": "",
                "bridge": 3, "request": {}, "expects": {},
                "adapter": {"argv": ["x"], "result": {}},
                "env": {"1BAD": "v"}, "options": ["--parent-tool-bridge"],
                "expect": {"status": "fine", "exit_code": 300}}"#,
        );
        let text = reasons(&load(&path, None));
        for want in [
            "/expects:",
            "/name:",
            "/bridge:",
            "/adapter:",
            "/env/1BAD:",
            "/options/0:",
            "/expect/status:",
            "/expect/exit_code:",
        ] {
            assert!(text.contains(want), "{want} not in:\n{text}");
        }
    }

    #[test]
    fn hostile_files_fail_with_a_reason_and_never_block() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let cases = [
            ("utf8", b"{\"a\": \"\xff\"}".to_vec(), "not valid UTF-8"),
            (
                "deep",
                format!("{{\"a\": {deep}}}").into_bytes(),
                "deeper than 128",
            ),
            (
                "dup",
                br#"{"schema": 1, "schema": 2}"#.to_vec(),
                "duplicate key",
            ),
            ("other", br#"{"schema": "x"}"#.to_vec(), "not a replay case"),
        ];
        for (name, bytes, want) in cases {
            let path = tmp.path().join(format!("{name}.case.json"));
            std::fs::write(&path, bytes).unwrap();
            let text = reasons(&load(&path, None));
            assert!(text.contains(want), "{name}: {text}");
        }
        let fifo = tmp.path().join("fifo.case.json");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, fs::Mode::from_raw_mode(0o600)).unwrap();
        assert!(reasons(&load(&fifo, None)).contains("FIFO"));
        assert!(reasons(&load(tmp.path(), None)).contains("directory"));
        let missing = tmp.path().join("missing.case.json");
        assert!(reasons(&load(&missing, None)).contains("cannot be read"));
        let huge = tmp.path().join("huge.case.json");
        let file = std::fs::File::create(&huge).unwrap();
        file.set_len(MAX_FILE_BYTES as u64 + 1).unwrap();
        assert!(reasons(&load(&huge, None)).contains("over the 64 MiB limit"));
    }

    #[test]
    fn the_paths_options_name_are_relative_to_the_case_s_folder() {
        let case = Path::new("/suite/cases/a.case.json");
        let options = [
            "--artifact-dir",
            "out",
            "--result-file=r.json",
            "--tool-map",
            "@map.json",
            "--tool-map=provider-safe",
            "--ca-cert",
            "/etc/ca.pem",
            "--max-output-bytes",
            "128",
            "--tool-map",
            "{\"a\":\"b\"}",
            "--policy",
            "policy.toml",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            relative_to_case(options, case),
            [
                "--artifact-dir",
                "/suite/cases/out",
                "--result-file=/suite/cases/r.json",
                "--tool-map",
                "@/suite/cases/map.json",
                "--tool-map=provider-safe",
                "--ca-cert",
                "/etc/ca.pem",
                "--max-output-bytes",
                "128",
                "--tool-map",
                "{\"a\":\"b\"}",
                "--policy",
                "/suite/cases/policy.toml",
            ]
        );
    }

    #[test]
    fn a_relative_bridge_file_is_found_next_to_the_case() {
        let tmp = tempfile::tempdir().unwrap();
        let text = MINIMAL.replace(r#"{"b": 1}"#, r#""@bridges/b.json""#);
        let path = write(tmp.path(), "a.case.json", &text);
        let case = one_case(load(&path, None));
        assert_eq!(
            case.bridge,
            format!("@{}", tmp.path().join("bridges/b.json").display())
        );
    }

    #[test]
    fn a_transcript_needs_a_bridge_and_yields_its_calls() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(
            tmp.path(),
            "t.json",
            r#"{"schema": "wp-codebox/tool-call-transcript/v1", "tool_calls": [
                {"status": "denied", "metadata": {"request": {"r": 1},
                 "result": {"error": {"code": "tool_not_allowed"}}}}]}"#,
        );
        assert!(reasons(&load(&path, None)).contains("--parent-tool-bridge"));
        let case = one_case(load(&path, Some("{}")));
        assert_eq!(case.request, br#"{"r": 1}"#);
        let expect = case.expect.unwrap();
        assert_eq!(expect.status, Status::Denied);
        assert_eq!(expect.error_code.as_deref(), Some("tool_not_allowed"));
        assert_eq!(case.origin, Origin::Transcript { index: 0 });
    }
}
