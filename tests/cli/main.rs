//! One integration binary for the whole CLI: a module per area; [`Cmd`] (in `support/`), the
//! one way to run the binary, which makes every test state its exit status, stdout and stderr;
//! and on top of it [`Dispatch`], the builder for the main job, so that every test reads like
//! a sentence and compares parsed JSON.

// All of this crate is test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test's notes may panic on a broken stderr: the test fails either way. A test reads files
// and starts and signals processes directly (the product goes through `fs/read.rs` and `exec/`).
#![allow(
    clippy::disallowed_macros,
    clippy::disallowed_methods,
    clippy::too_many_lines
)]

mod adapter_stderr;
mod approvals;
mod codes;
mod command_line;
mod completions;
mod confinement;
mod confinement_root;
mod core;
mod delegation;
mod delegation_docs;
mod doctor;
mod egress;
mod endpoint;
mod endpoint_trust;
mod envelopes;
mod file_transport;
mod fuzz_regressions;
mod generated;
mod git;
mod git_hostile;
mod happy;
mod host_reach;
mod hostile;
mod human;
mod launcher;
mod ledger;
mod ledger_durability;
mod ledger_hardened;
mod ledger_insight;
mod ledger_prune;
mod ledger_rules;
mod ledger_stress;
mod ledger_waits;
mod man_pages;
mod mcp;
mod mcp_list_tools;
mod named_files;
mod policy;
mod policy_docs;
mod postgres;
mod properties;
mod python_adapter;
mod readme;
mod redaction;
mod replay;
mod replay_confine;
mod resources;
mod robustness;
mod schema;
mod schema_policy;
mod serve;
mod serve_fleet;
mod serve_reload;
mod spec_refs;
mod stdout_lost;
mod subcommands;
mod support;
mod telemetry;
mod telemetry_mcp;
mod telemetry_serve;
mod transcripts;
mod whole_loop;
mod workspace;
mod workspace_patch;

pub use support::*;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn bin() -> PathBuf {
    runnable_by_anyone(env!("CARGO_BIN_EXE_parent-tool-dispatch"))
}

/// The test suite's scripted processes (the test kit, `crates/testkit`): `ptd-test adapter
/// STEP…` and `ptd-test mcp-server SCRIPT…`. Built next to the dispatcher by `cargo test` at the
/// workspace root (the test kit's own tests need it), never part of the binary under test.
pub fn test_bin() -> PathBuf {
    let built = Path::new(env!("CARGO_BIN_EXE_parent-tool-dispatch")).with_file_name("ptd-test");
    assert!(
        built.is_file(),
        "{} is not built: run `cargo test` at the workspace root, or `cargo build -p ptd-testkit` \
         before a narrower run",
        built.display()
    );
    runnable_by_anyone(&built.to_string_lossy())
}

/// `built`, or where a confined adapter can run it from. A root dispatcher's confined adapter
/// runs as `nobody` (SPEC §13.2), which must be able to enter every folder above the program;
/// a checkout in a 0700 folder (a clone in `mktemp -d`, a home directory) is not. Then the
/// binary is copied, once per build, into a folder of `/tmp` anyone may enter, and the copy is
/// used (kept for the next test process of the same build).
fn runnable_by_anyone(built: &str) -> PathBuf {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let built = PathBuf::from(built);
    let enterable = built
        .ancestors()
        .skip(1)
        .all(|dir| std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
    if enterable {
        return built;
    }
    // One copy at a time in this process (threads would share the partial name).
    static COPYING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = COPYING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // One folder for the build's binaries, so that they stay next to each other as cargo put
    // them (replay finds ptd-test beside the dispatcher); a copy older than its binary is made
    // again.
    let build = built.parent().unwrap();
    let folder = PathBuf::from(format!(
        "/tmp/ptd-test-bins-{}",
        std::fs::metadata(build).unwrap().ino()
    ));
    let copy = folder.join(built.file_name().unwrap());
    let meta = std::fs::metadata(&built).unwrap();
    let current = std::fs::metadata(&copy)
        .is_ok_and(|c| c.size() == meta.size() && c.mtime() >= meta.mtime());
    if current {
        return copy;
    }
    let _ = std::fs::create_dir(&folder);
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Made under a name of this process's, then moved into place whole.
    let partial = folder.join(format!(".partial-{}", std::process::id()));
    copy_program(&built, &partial);
    std::fs::rename(&partial, &copy).unwrap();
    copy
}

/// Copy the program `from` to `to` (mode 0755) without this process ever holding `to` open
/// for writing: `cp` writes it. A descriptor open for writing here would be inherited by any
/// child another test thread forks meanwhile, until that child's `execve`; an `execve` of
/// `to` in that window fails with `ETXTBSY` ("text file busy"), which made a fresh clone's
/// first `cargo test` fail.
pub fn copy_program(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let out = std::process::Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cp {} {}: {}",
        from.display(),
        to.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// argv running the test adapter with these steps.
pub fn test_adapter(steps: &[&str]) -> Value {
    let mut argv = vec![test_bin().display().to_string(), "adapter".to_string()];
    argv.extend(steps.iter().map(|s| s.to_string()));
    json!(argv)
}

/// A bridge allowing `workspace.read`, whose adapter is the test adapter with `steps`.
pub fn bridge(steps: &[&str]) -> Value {
    json!({
        "schema": "wp-codebox/parent-tool-bridge/v1",
        "version": 1,
        "allowed_tools": ["workspace.read"],
        "dispatcher": {
            "owner": "wp-codebox",
            "mode": "host_command",
            "command": {"argv": test_adapter(steps)},
            "request_schema": "wp-codebox/parent-tool-request/v1",
            "result_schema": "wp-codebox/parent-tool-result/v1",
            "timeout_ms": 20000
        },
        "sandbox_env": {"mode": "metadata-only", "secret_env": []},
        "authorization": {"mode": "allowlist", "failure_status": "denied"},
        "redaction": {"transcript_artifact_refs": []},
        "metadata": {}
    })
}

/// A valid request for `workspace.read`.
pub fn request() -> Value {
    json!({
        "schema": "wp-codebox/parent-tool-request/v1",
        "version": 1,
        "request_id": "ptr_123",
        "tool": "workspace.read",
        "operation": "call",
        "input": {"path": "README.md"},
        "sandbox_session": {"sandbox_session_id": "sandbox_123", "caller_session_id": "job_456"},
        "authorization": {"allowed_tools": ["workspace.read"], "capability": "read", "principal": {}},
        "metadata": {}
    })
}

/// One run of the main job, built up fluently.
pub struct Dispatch {
    bridge: Option<String>,
    stdin: Vec<u8>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<PathBuf>,
    data_limit: Option<u64>,
}

/// What a run produced. Its stdout was checked when it ran (nothing, or one JSON envelope
/// line); its exit status and stderr are stated by [`Run::expect`] or through [`Run::output`],
/// or else held to the strict defaults of [`Output`] (exit 0, nothing on stderr).
#[derive(Debug)]
pub struct Run {
    pub envelope: Value,
    pub stdout: String,
    pub stderr: String,
    pub exit: i32,
    pub elapsed: Duration,
    output: Output,
}

impl Dispatch {
    /// The test adapter running `steps`, with the default request on stdin.
    pub fn adapter(steps: &[&str]) -> Dispatch {
        Dispatch::with_bridge(bridge(steps))
    }

    /// A given bridge with the default request.
    pub fn with_bridge(bridge: Value) -> Dispatch {
        Dispatch {
            bridge: Some(bridge.to_string()),
            stdin: request().to_string().into_bytes(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            data_limit: None,
        }
    }

    /// Change the bridge.
    pub fn bridge(mut self, edit: impl FnOnce(&mut Value)) -> Dispatch {
        let mut b: Value = serde_json::from_str(self.bridge.as_deref().unwrap()).unwrap();
        edit(&mut b);
        self.bridge = Some(b.to_string());
        self
    }

    /// The bridge argument exactly as given (e.g. `@missing`), or none at all.
    pub fn raw_bridge(mut self, text: Option<&str>) -> Dispatch {
        self.bridge = text.map(str::to_string);
        self
    }

    /// Change the request.
    pub fn request(mut self, edit: impl FnOnce(&mut Value)) -> Dispatch {
        let mut r: Value = serde_json::from_slice(&self.stdin).unwrap();
        edit(&mut r);
        self.stdin = r.to_string().into_bytes();
        self
    }

    /// The request bytes exactly as given.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Dispatch {
        self.stdin = bytes.into();
        self
    }

    /// Extra command-line arguments.
    pub fn args(mut self, args: &[&str]) -> Dispatch {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    /// An environment variable for the dispatcher.
    pub fn env(mut self, name: &str, value: &str) -> Dispatch {
        self.env.push((name.into(), value.into()));
        self
    }

    /// The dispatcher's working directory.
    pub fn cwd(mut self, dir: &Path) -> Dispatch {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    /// Cap the dispatcher's data segment (`RLIMIT_DATA`, which its adapter inherits): a
    /// run that needs more memory fails instead of passing slowly.
    pub fn data_limit(mut self, bytes: u64) -> Dispatch {
        self.data_limit = Some(bytes);
        self
    }

    /// Run the dispatcher and parse its envelope.
    pub fn run(self) -> Run {
        let mut args = Vec::new();
        if let Some(bridge) = self.bridge {
            args.extend(["--parent-tool-bridge".to_string(), bridge]);
        }
        args.extend(self.args);
        let mut cmd = Cmd::new(args).stdin(self.stdin);
        for (name, value) in &self.env {
            cmd = cmd.env(name, value);
        }
        if let Some(dir) = &self.cwd {
            cmd = cmd.cwd(dir);
        }
        if let Some(limit) = self.data_limit {
            cmd = cmd.data_limit(limit);
        }
        let output = cmd.run();
        let (exit, stdout, stderr) = output.unchecked();
        // The main job prints one envelope line, or nothing at all (a usage error).
        let envelope = if stdout.is_empty() {
            Value::Null
        } else {
            json_line(stdout)
        };
        output.stated_elsewhere(false, true, false);
        Run {
            envelope,
            stdout: stdout.to_string(),
            stderr: stderr.to_string(),
            exit,
            elapsed: output.elapsed(),
            output,
        }
    }
}

impl Run {
    /// The envelope's status.
    pub fn status(&self) -> &str {
        self.envelope["status"].as_str().unwrap_or("")
    }

    /// The envelope's error code.
    pub fn code(&self) -> &str {
        self.envelope["error"]["code"].as_str().unwrap_or("")
    }

    /// `diagnostics.dispatch`.
    pub fn dispatch(&self) -> &Value {
        &self.envelope["diagnostics"]["dispatch"]
    }

    /// Assert status, code and exit together, with the whole envelope on failure; stderr must
    /// follow the envelope (see [`Run::stderr_problem`]). This states exit and stderr.
    #[track_caller]
    pub fn expect(&self, status: &str, code: Option<&str>, exit: i32) -> &Run {
        self.output.stated_elsewhere(true, false, true);
        assert_eq!(
            self.status(),
            status,
            "status; envelope: {:#}\nstderr: {}",
            self.envelope,
            self.stderr
        );
        if let Some(code) = code {
            assert_eq!(self.code(), code, "code; envelope: {:#}", self.envelope);
        }
        assert_eq!(
            self.exit, exit,
            "exit; envelope: {:#}\nstderr: {}",
            self.envelope, self.stderr
        );
        if let Some(problem) = self.stderr_problem() {
            panic!("{problem}");
        }
        self
    }

    /// The run's [`Output`], to state what [`Run::expect`] does not cover: a run that prints
    /// no envelope (`.exit(2)`), or a stderr that must say more than the envelope's code.
    pub fn output(&self) -> &Output {
        &self.output
    }

    /// Whether stderr follows the envelope: a failure has exactly one `error[<code>]: …` line
    /// naming the envelope's code; a success has none (`error[result_file]` aside). Other lines
    /// (warnings, hints, the adapter's forwarded notes) are allowed; every line is free of
    /// terminal control characters. `None` when it does, else what is wrong.
    pub fn stderr_problem(&self) -> Option<String> {
        // `--result-file` failing is reported on its own line whatever the status.
        let errors: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with("error[") && !l.starts_with("error[result_file]"))
            .collect();
        if self.status() == "succeeded" {
            if !errors.is_empty() {
                return Some(format!("a success with an error line: {}", self.stderr));
            }
        } else if !self.code().is_empty() {
            let want = format!("error[{}]: ", self.code());
            if !(errors.len() == 1 && errors[0].starts_with(&want)) {
                return Some(format!(
                    "want one line starting {want:?} on stderr, got: {}",
                    self.stderr
                ));
            }
        }
        if self.stderr.chars().any(|c| c.is_control() && c != '\n') {
            return Some(format!("control characters on stderr: {:?}", self.stderr));
        }
        None
    }

    /// The issue codes in `error.details.issues`.
    pub fn issue_codes(&self) -> Vec<String> {
        self.envelope["error"]["details"]["issues"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|i| i["code"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Whether a process is still running (a zombie counts as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next().map(str::to_string));
            !matches!(state.as_deref(), Some("Z") | Some("X") | None)
        }
    }
}

/// The pids a `pidfile:` step wrote.
pub fn pids(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Assert that no pid in the file is alive, allowing a moment for the kernel to finish kills.
pub fn assert_all_gone(path: &Path) {
    let pids = pids(path);
    let until = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<_> = pids.iter().filter(|&&p| alive(p)).collect();
    assert!(left.is_empty(), "processes left running: {left:?}");
}
