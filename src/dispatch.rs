//! The main job, in the order of SPEC §4.1: read → validate → authorize → run → check →
//! redact → write. Every path after argument parsing ends in exactly one printed envelope.
//!
//! This module sequences the steps and builds the adapter's environment; the steps themselves
//! live in their own modules. It must not print anything but the one envelope on stdout.

use crate::authorize::authorize;
use crate::cli::DispatchArgs;
use crate::envelope::bridge::{Bridge, CommandSpec, Mode, Transport};
use crate::envelope::json::{self, JsonIssue};
use crate::envelope::request::{Echo, Request};
use crate::envelope::result::Expect;
use crate::envelope::{request, result};
use crate::error::{exit, ErrorCode};
use crate::exec::{self, Finished, SpawnError, Spec};
use crate::interrupt::Interrupts;
use crate::outcome::{self, issues_json, Outcome};
use crate::redact::{is_sensitive_key, Redactor};
use crate::toolmap::ToolMap;
use crate::transcript::{self, safe_name, write_atomic, ArtifactDir, Call};
use crate::validate::Issue;
use serde_json::{json, Map, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// Variables copied from the host into the adapter's otherwise empty environment.
pub const BASE_ENV: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];
/// How much of stdout the file transport keeps as a diagnostic.
const STDOUT_HEAD_BYTES: usize = 64 * 1024;

/// Metadata variables the adapter receives.
pub mod vars {
    pub const REQUEST_ID: &str = "WP_CODEBOX_PARENT_TOOL_REQUEST_ID";
    pub const TOOL: &str = "WP_CODEBOX_PARENT_TOOL_TOOL";
    pub const OPERATION: &str = "WP_CODEBOX_PARENT_TOOL_OPERATION";
    pub const TIMEOUT_MS: &str = "WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS";
    pub const REQUEST_SCHEMA: &str = "WP_CODEBOX_PARENT_TOOL_REQUEST_SCHEMA";
    pub const RESULT_SCHEMA: &str = "WP_CODEBOX_PARENT_TOOL_RESULT_SCHEMA";
    pub const REQUEST_FILE: &str = "WP_CODEBOX_PARENT_TOOL_REQUEST_FILE";
    pub const RESULT_FILE: &str = "WP_CODEBOX_PARENT_TOOL_RESULT_FILE";
}

/// A usage error: no envelope, a message on stderr, exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Everything the later steps need to know about the run so far.
struct Job<'a> {
    args: &'a DispatchArgs,
    redactor: Redactor,
    tool_map: ToolMap,
    started: Instant,
    started_at: SystemTime,
    /// What `diagnostics.dispatch` will say.
    dispatch: Map<String, Value>,
    /// The prepared transcript folder, when `--artifact-dir` is given and usable.
    artifacts: Option<ArtifactDir>,
    /// The request as read, for the transcript's name and record.
    raw_request: Vec<u8>,
    request_doc: Option<Map<String, Value>>,
}

/// Run the main job; print the envelope; return the exit status.
pub fn main_job(args: &DispatchArgs, interrupts: &Interrupts) -> u8 {
    let mut job = match Job::new(args) {
        Ok(job) => job,
        Err(UsageError(message)) => {
            eprintln!("error[usage]: {message}");
            return exit::USAGE;
        }
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.decide(interrupts)))
        .unwrap_or_else(|_| {
            Outcome::failure(
                &Echo::default(),
                ErrorCode::InternalError,
                "the dispatcher hit an internal error; please report it",
                None,
            )
        });
    job.finish(outcome)
}

impl<'a> Job<'a> {
    fn new(args: &'a DispatchArgs) -> Result<Job<'a>, UsageError> {
        if args.bridge.parent_tool_bridge.is_none() {
            return Err(UsageError(format!(
                "no bridge: pass --parent-tool-bridge '<json>|@FILE' or set {}",
                crate::cli::BRIDGE_ENV
            )));
        }
        let tool_map = match &args.tool_map {
            Some(arg) => ToolMap::parse(arg).map_err(UsageError)?,
            None => ToolMap::Identity,
        };
        let mut redactor = Redactor::new();
        for name in &args.secret_env {
            if let Ok(value) = std::env::var(name) {
                redactor.add_secret(&value);
            }
        }
        for name in &args.pass_env {
            if is_sensitive_key(name) {
                if let Ok(value) = std::env::var(name) {
                    redactor.add_secret(&value);
                }
            }
        }
        if let Ok(cwd) = std::env::current_dir() {
            redactor.add_host_path(&cwd.to_string_lossy());
        }
        for name in ["HOME", "TMPDIR"] {
            if let Ok(value) = std::env::var(name) {
                redactor.add_host_path(&value);
            }
        }
        redactor.add_host_path(&std::env::temp_dir().to_string_lossy());
        if let Some(dir) = &args.artifact_dir {
            redactor.add_host_path(&absolute(dir).to_string_lossy());
        }
        let mut dispatch = Map::new();
        dispatch.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
        dispatch.insert("adapter_started".into(), json!(false));
        Ok(Job {
            args,
            redactor,
            tool_map,
            started: Instant::now(),
            started_at: SystemTime::now(),
            dispatch,
            artifacts: None,
            raw_request: Vec::new(),
            request_doc: None,
        })
    }

    /// Steps 1–5 of SPEC §4.1, up to the outcome.
    fn decide(&mut self, interrupts: &Interrupts) -> Outcome {
        // The request bytes first (I/O only), so that even a bridge failure can echo its ids.
        let raw_request = match read_request(self.args, interrupts) {
            Ok(bytes) => bytes,
            Err(outcome) => return outcome,
        };
        let max_request = usize::try_from(self.args.max_request_bytes).unwrap_or(usize::MAX);
        let parsed = json::parse_object(&raw_request, max_request);
        // What a failure envelope and the transcript can echo: the strict parse when it
        // succeeded, else whatever a lenient one finds.
        self.request_doc = match &parsed {
            Ok(map) => Some(map.clone()),
            Err(_) => json::parse_object(&raw_request, usize::MAX).ok(),
        };
        let echo = Echo::best_effort(self.request_doc.as_ref());
        self.raw_request = raw_request;

        // The transcript folder is checked before anything can run (SPEC §5).
        if let Some(dir) = &self.args.artifact_dir {
            match ArtifactDir::prepare(dir) {
                Ok(prepared) => self.artifacts = Some(prepared),
                Err(err) => {
                    return Outcome::failure(
                        &echo,
                        ErrorCode::ArtifactDirUnavailable,
                        &format!("the artifact directory cannot be used: {err}"),
                        None,
                    )
                }
            }
        }

        let bridge = match Bridge::load(
            self.args
                .bridge
                .parent_tool_bridge
                .as_deref()
                .unwrap_or_default(),
        ) {
            Ok(bridge) => bridge,
            Err(issues) => {
                return Outcome::failure(
                    &echo,
                    ErrorCode::BridgeInvalid,
                    "the parent-tool bridge is invalid",
                    Some(json!({"issues": issues_json(&issues)})),
                )
            }
        };
        self.learn_bridge_secrets(&bridge);
        self.dispatch
            .insert("timeout_ms".into(), json!(bridge.timeout_ms));

        let request = match parsed {
            Err(issue @ JsonIssue::TooLarge { .. }) => {
                return Outcome::failure(
                    &echo,
                    ErrorCode::RequestTooLarge,
                    &format!("the request is larger than {max_request} bytes"),
                    Some(json!({"issues": issues_json(&[Issue::from_json(&issue)])})),
                )
            }
            Err(issue) => Err(vec![Issue::from_json(&issue)]),
            Ok(map) => Request::from_json(map),
        };
        let request = match request {
            Ok(request) => request,
            Err(issues) => {
                return Outcome::failure(
                    &echo,
                    ErrorCode::RequestInvalid,
                    "the request envelope is invalid",
                    Some(json!({"issues": issues_json(&issues)})),
                )
            }
        };

        if let Err(denial) = authorize(&bridge, &request, &bridge.bridge_ref()) {
            return Outcome::failure_as(
                &request.echo,
                bridge.failure_status,
                denial.code(),
                &denial.message(&request.echo.tool),
                Some(denial.details()),
            );
        }
        let command = match (bridge.mode, &bridge.command) {
            (Mode::HostCommand, Some(command)) => command,
            _ => {
                return Outcome::failure(
                    &request.echo,
                    ErrorCode::DispatchModeUnsupported,
                    &format!(
                        "dispatch mode {:?} is not supported by this dispatcher",
                        bridge.mode.as_str()
                    ),
                    None,
                )
            }
        };
        let cwd = match &command.cwd_env {
            None => None,
            Some(name) => match std::env::var_os(name).map(PathBuf::from) {
                Some(dir) if dir.is_dir() => {
                    self.redactor.add_host_path(&dir.to_string_lossy());
                    Some(dir)
                }
                _ => {
                    return Outcome::failure(
                        &request.echo,
                        ErrorCode::CwdUnavailable,
                        &format!("the working directory named by {name} is not set or is not an existing directory"),
                        None,
                    )
                }
            },
        };
        self.run_adapter(&bridge, command, &request, cwd, interrupts)
    }

    fn learn_bridge_secrets(&mut self, bridge: &Bridge) {
        if let Some(command) = &bridge.command {
            for (name, value) in &command.env {
                if is_sensitive_key(name) {
                    self.redactor.add_secret(value);
                }
            }
        }
        if let Some(name) = &bridge.token_env {
            if let Ok(value) = std::env::var(name) {
                self.redactor.add_secret(&value);
            }
        }
    }

    fn run_adapter(
        &mut self,
        bridge: &Bridge,
        command: &CommandSpec,
        request: &Request,
        cwd: Option<PathBuf>,
        interrupts: &Interrupts,
    ) -> Outcome {
        let canonical = request.echo.tool.clone();
        let sent = Echo {
            tool: self.tool_map.external(&canonical),
            ..request.echo.clone()
        };
        let mut outgoing = request.raw.clone();
        outgoing.insert("tool".into(), Value::String(sent.tool.clone()));
        let mut request_bytes = serde_json::to_vec(&outgoing).unwrap_or_default();
        request_bytes.push(b'\n');

        let mut env = self.adapter_env(bridge, &sent);
        let program = resolve_program(&command.argv[0]);
        if let Some(found) = find_in_path(&program) {
            self.redactor.add_host_path(&found.to_string_lossy());
        }
        let files = match command.transport {
            Transport::Stdin => None,
            Transport::File => match FileTransport::create(&request_bytes) {
                Ok(files) => {
                    env.push((
                        vars::REQUEST_FILE.into(),
                        files.request.to_string_lossy().into(),
                    ));
                    env.push((
                        vars::RESULT_FILE.into(),
                        files.result.to_string_lossy().into(),
                    ));
                    Some(files)
                }
                Err(err) => {
                    return Outcome::failure(
                        &request.echo,
                        ErrorCode::InternalError,
                        &format!(
                            "the private request file could not be created: {}",
                            err.kind()
                        ),
                        None,
                    )
                }
            },
        };
        let spec = Spec {
            program,
            argv: command.argv.clone(),
            env,
            cwd,
            stdin: files.is_none().then_some(request_bytes),
            timeout: Duration::from_millis(bridge.timeout_ms),
            kill_grace: Duration::from_millis(self.args.kill_grace_ms),
            max_stdout_bytes: self.args.max_output_bytes,
        };
        let transport = match command.transport {
            Transport::Stdin => "stdin",
            Transport::File => "file",
        };
        self.dispatch.insert("transport".into(), json!(transport));
        let finished = match exec::run(spec, interrupts) {
            Ok(finished) => finished,
            Err(err) => {
                let code = match err {
                    SpawnError::NotFound => ErrorCode::AdapterNotFound,
                    SpawnError::NotExecutable | SpawnError::Other(_) => {
                        ErrorCode::AdapterNotExecutable
                    }
                };
                return Outcome::failure(&request.echo, code, &err.to_string(), None);
            }
        };
        self.record_run(&finished);
        if files.is_some() {
            // In the file transport stdout is only a diagnostic: keep its start, redacted.
            let head = &finished.stdout[..finished.stdout.len().min(STDOUT_HEAD_BYTES)];
            let head = self.redactor.redact_str(&String::from_utf8_lossy(head));
            self.dispatch.insert("stdout_head".into(), json!(head));
        }
        let max_bytes = usize::try_from(self.args.max_output_bytes).unwrap_or(usize::MAX);
        let expect = Expect {
            sent: &sent,
            canonical_tool: &canonical,
        };
        let answer = match &files {
            None => Some(finished.stdout.clone()),
            Some(files) => match files.read_result(max_bytes) {
                Ok(bytes) => bytes,
                Err(()) if finished.stopped.is_none() => {
                    let mut outcome = Outcome::failure(
                        &request.echo,
                        ErrorCode::ResultTooLarge,
                        &format!("the adapter's result file is larger than {max_bytes} bytes"),
                        None,
                    );
                    outcome.envelope.insert("tool".into(), json!(canonical));
                    return outcome;
                }
                Err(()) => None,
            },
        };
        let mut outcome = outcome::interpret(
            &finished,
            answer.as_deref(),
            expect,
            bridge.timeout_ms,
            max_bytes,
        );
        // Whoever made the envelope, it reports the canonical id and the request's own echo.
        outcome.envelope.insert("tool".into(), json!(canonical));
        outcome
    }

    fn adapter_env(&self, bridge: &Bridge, sent: &Echo) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = Vec::new();
        let mut set = |name: &str, value: String| {
            env.retain(|(k, _)| k != name);
            env.push((name.to_string(), value));
        };
        for name in BASE_ENV {
            if let Ok(value) = std::env::var(name) {
                set(name, value);
            }
        }
        if let Some(command) = &bridge.command {
            for (name, value) in &command.env {
                set(name, value.clone());
            }
        }
        for name in self.args.pass_env.iter().chain(&self.args.secret_env) {
            if let Ok(value) = std::env::var(name) {
                set(name, value);
            }
        }
        set(vars::REQUEST_ID, sent.request_id.clone());
        set(vars::TOOL, sent.tool.clone());
        set(vars::OPERATION, sent.operation.clone());
        set(vars::TIMEOUT_MS, bridge.timeout_ms.to_string());
        set(vars::REQUEST_SCHEMA, request::SCHEMA.to_string());
        set(vars::RESULT_SCHEMA, result::SCHEMA.to_string());
        env
    }

    fn record_run(&mut self, finished: &Finished) {
        let (exit_code, signal) = match finished.termination {
            exec::Termination::Exited(code) => (json!(code), Value::Null),
            exec::Termination::Signaled(sig) => (Value::Null, json!(outcome::signal_name(sig))),
            exec::Termination::Unreaped | exec::Termination::NotStarted => {
                (Value::Null, Value::Null)
            }
        };
        // Redact the whole kept tail, then cut: a secret across the cut is never half-shown.
        let redacted = self
            .redactor
            .redact_str(&String::from_utf8_lossy(&finished.stderr_tail));
        let stderr_tail = exec::tail_str(&redacted, exec::STDERR_TAIL_BYTES);
        let d = &mut self.dispatch;
        d.insert(
            "adapter_started".into(),
            json!(finished.termination != exec::Termination::NotStarted),
        );
        d.insert("exit_code".into(), exit_code);
        d.insert("signal".into(), signal);
        d.insert("stdout_bytes".into(), json!(finished.stdout_bytes));
        d.insert(
            "stdin_bytes_written".into(),
            json!(finished.stdin_bytes_written),
        );
        d.insert("stdin_error".into(), json!(finished.stdin_error));
        d.insert("stderr_tail".into(), json!(stderr_tail));
        let stderr_truncated = finished.stderr_truncated || stderr_tail.len() < redacted.len();
        d.insert("stderr_truncated".into(), json!(stderr_truncated));
        d.insert("leaked_processes".into(), json!(finished.leaked_processes));
    }

    /// Attach diagnostics, redact, print; return the exit status.
    fn finish(mut self, mut outcome: Outcome) -> u8 {
        self.dispatch.insert(
            "duration_ms".into(),
            json!(self.started.elapsed().as_millis() as u64),
        );
        let dispatch = std::mem::take(&mut self.dispatch);
        outcome
            .diagnostics_mut()
            .insert("dispatch".into(), Value::Object(dispatch));
        self.redact(&mut outcome);
        self.write_transcript(&mut outcome);

        let render = |envelope: &Map<String, Value>| {
            if self.args.pretty {
                serde_json::to_string_pretty(envelope)
            } else {
                serde_json::to_string(envelope)
            }
            .unwrap_or_default()
        };
        let mut text = render(&outcome.envelope);
        if let Some(path) = &self.args.result_file {
            if let Err(err) = write_atomic(path, format!("{text}\n").as_bytes()) {
                let message = self.redactor.redact_str(&err.to_string());
                eprintln!("error[result_file]: the result file was not written: {message}");
                if let Some(Value::Object(d)) = outcome.diagnostics_mut().get_mut("dispatch") {
                    d.insert("result_file_error".into(), json!(message));
                }
                text = render(&outcome.envelope);
            }
        }
        if let Some(error) = outcome.envelope.get("error") {
            let code = error.get("code").and_then(Value::as_str).unwrap_or("");
            let message = error.get("message").and_then(Value::as_str).unwrap_or("");
            eprintln!("error[{code}]: {message}");
        }
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{text}");
        let _ = stdout.flush();
        outcome.exit_code()
    }

    /// One redacted transcript, its ref added to the envelope; a failure is reported in
    /// `diagnostics.dispatch.transcript_error` and does not change the status (SPEC §5).
    fn write_transcript(&self, outcome: &mut Outcome) {
        let Some(dir) = &self.artifacts else { return };
        let echo = Echo::best_effort(self.request_doc.as_ref());
        let id = (!echo.request_id.is_empty()).then_some(echo.request_id.as_str());
        let name = safe_name(id, &self.raw_request);
        let mut request = self
            .request_doc
            .clone()
            .map(Value::Object)
            .unwrap_or(Value::Null);
        self.redactor.redact_value(&mut request);
        let mut result = Value::Object(outcome.envelope.clone());
        self.redactor.redact_value(&mut result);
        let dispatch = result["diagnostics"]["dispatch"].clone();
        let call_id = if echo.request_id.is_empty() {
            name.clone()
        } else {
            echo.request_id.clone()
        };
        let doc = transcript::build(&Call {
            call_id: &call_id,
            tool: outcome
                .envelope
                .get("tool")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            operation: &echo.operation,
            status: outcome.status.as_str(),
            started_at: self.started_at,
            finished_at: SystemTime::now(),
            request: &request,
            result: &result,
            dispatch: &dispatch,
        });
        match dir.write(&name, &doc) {
            Ok(reference) => {
                if let Some(list) = outcome
                    .envelope
                    .get_mut("artifacts")
                    .and_then(|a| a.get_mut("transcripts"))
                    .and_then(Value::as_array_mut)
                {
                    list.push(reference.to_json());
                }
            }
            Err(err) => {
                let message = self.redactor.redact_str(&err.to_string());
                if let Some(Value::Object(d)) = outcome.diagnostics_mut().get_mut("dispatch") {
                    d.insert("transcript_error".into(), json!(message));
                }
            }
        }
    }

    /// SPEC §5: exact secrets everywhere; the full rules on everything but `output`.
    fn redact(&self, outcome: &mut Outcome) {
        for key in ["error", "diagnostics", "metadata", "artifacts"] {
            if let Some(value) = outcome.envelope.get_mut(key) {
                self.redactor.redact_value(value);
            }
        }
        let mut whole = Value::Object(std::mem::take(&mut outcome.envelope));
        self.redactor.scrub_secrets_value(&mut whole);
        if let Value::Object(map) = whole {
            outcome.envelope = map;
        }
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// argv[0] with a slash is a path, taken relative to the dispatcher's working directory (not
/// the adapter's); a bare name is looked up in `PATH` at spawn.
fn resolve_program(argv0: &str) -> PathBuf {
    if argv0.contains('/') {
        absolute(Path::new(argv0))
    } else {
        PathBuf::from(argv0)
    }
}

/// Where the kernel will find `program` (for redacting its path, not for running it): the path
/// itself when it has a slash, else the first executable match in `PATH`.
fn find_in_path(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.is_absolute() {
        return Some(program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Read the request (file, or stdin for none / `-`), at most cap + 1 bytes, giving up when
/// the dispatcher is interrupted while waiting for a writer that never closes.
fn read_request(args: &DispatchArgs, interrupts: &Interrupts) -> Result<Vec<u8>, Outcome> {
    let max_bytes = args.max_request_bytes;
    let unreadable = |kind: std::io::ErrorKind| {
        Outcome::failure(
            &Echo::default(),
            ErrorCode::RequestInvalid,
            &format!("the request could not be read: {kind}"),
            None,
        )
    };
    let path = args.request.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(crate::envelope::read_input(path.as_deref(), max_bytes));
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Ok(bytes)) => return Ok(bytes),
            Ok(Err(err)) => return Err(unreadable(err.kind())),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(unreadable(std::io::ErrorKind::Other))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Some(sig) = interrupts.received() {
                    return Err(Outcome::failure(
                        &Echo::default(),
                        ErrorCode::Interrupted,
                        &format!(
                            "the dispatcher received {} while reading the request",
                            outcome::signal_name(sig)
                        ),
                        None,
                    ));
                }
            }
        }
    }
}

/// The file transport's private folder: the request file (0600) and the result path.
struct FileTransport {
    _dir: tempfile::TempDir,
    request: PathBuf,
    result: PathBuf,
}

impl FileTransport {
    fn create(request_bytes: &[u8]) -> std::io::Result<FileTransport> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let dir = tempfile::Builder::new()
            .prefix("parent-tool-dispatch-")
            .tempdir()?;
        let request = dir.path().join("request.json");
        let result = dir.path().join("result.json");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&request)?;
        file.write_all(request_bytes)?;
        file.sync_all()?;
        Ok(FileTransport {
            _dir: dir,
            request,
            result,
        })
    }

    /// The result file's bytes; `Ok(None)` when the adapter wrote none, `Err` when too large.
    fn read_result(&self, max_bytes: usize) -> Result<Option<Vec<u8>>, ()> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.result);
        let Ok(file) = file else { return Ok(None) };
        let mut bytes = Vec::new();
        if file
            .take(max_bytes as u64 + 1)
            .read_to_end(&mut bytes)
            .is_err()
        {
            return Ok(None);
        }
        if bytes.len() > max_bytes {
            return Err(());
        }
        Ok(Some(bytes))
    }
}
