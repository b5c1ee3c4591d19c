//! The end of every main job: diagnostics, the transcript, redaction, the one envelope on
//! stdout, `--result-file`, the stderr line, the exit status.
//!
//! [`Report`] also collects, as the job learns them, what redaction needs (secret values,
//! host paths) and what a failure envelope must echo, so that a failure at any step — a panic
//! included — is reported with everything known up to that point. Everything that leaves goes
//! through the redactor here; nothing else in the main job prints.

use super::{DispatchError, UsageError};
use crate::cli::DispatchArgs;
use crate::envelope::bridge::Bridge;
use crate::envelope::request::Echo;
use crate::envelope::result::{
    self, ArtifactRef, Audience, DispatchDiagnostics, ResultEnvelope, RunDiagnostics, StdinError,
    Transport,
};
use crate::envelope::{bridge, canonical};
use crate::error::Status;
use crate::exec::{self, Finished, Termination};
use crate::hostenv::HostEnv;
use crate::json::raw::{self, Fields};
use crate::json::Document;
use crate::plan::{self, Plan};
use crate::redact::{is_sensitive_key, Redactor};
use crate::signal::signal_name;
use crate::terminal::error_line;
use crate::toolmap::ToolMap;
use crate::transcript::{self, safe_name, ArtifactDir, Call};
use crate::validate::Issue;
use std::io::Write;
use std::rc::Rc;
use std::time::{Instant, SystemTime};

/// How much of stdout is kept as a diagnostic when it is not (or not validly) the answer.
const STDOUT_HEAD_BYTES: usize = 64 * 1024;

/// What the end of the main job needs, gathered as the job goes.
pub struct Report<'a> {
    args: &'a DispatchArgs,
    env: HostEnv,
    redactor: Redactor,
    tool_map: ToolMap,
    started: Instant,
    started_at: SystemTime,
    dispatch: DispatchDiagnostics,
    /// The prepared transcript folder, when `--artifact-dir` is given and usable.
    artifacts: Option<ArtifactDir>,
    /// The request as read, when it was a JSON object.
    request: Option<Rc<Document>>,
    /// The transcript name of a request without a usable id (from its bytes' digest).
    fallback_name: Option<String>,
    /// What a failure envelope echoes.
    echo: Echo,
    /// Warning lines for stderr, printed before the envelope.
    warnings: Vec<String>,
}

impl<'a> Report<'a> {
    /// Start a report: parse `--tool-map`, register every secret and host path known before
    /// anything is read.
    pub fn new(args: &'a DispatchArgs, env: &HostEnv) -> Result<Report<'a>, UsageError> {
        if args.bridge.parent_tool_bridge.is_none() {
            return Err(UsageError(format!(
                "no bridge: pass --parent-tool-bridge '<json>|@FILE' or set {}",
                crate::cli::BRIDGE_ENV
            )));
        }
        let tool_map = match &args.tool_map {
            // The error's own message already names its cause (and the file): printed once.
            Some(arg) => ToolMap::parse(arg)
                .map_err(|err| UsageError(format!("the --tool-map value cannot be used: {err}")))?,
            None => ToolMap::Identity,
        };
        let mut redactor = Redactor::new();
        for name in &args.secret_env {
            if let Some(value) = env.var(name) {
                redactor.add_secret(&value);
            }
        }
        for name in &args.pass_env {
            if is_sensitive_key(name) {
                if let Some(value) = env.var(name) {
                    redactor.add_secret(&value);
                }
            }
        }
        if let Ok(cwd) = std::env::current_dir() {
            redactor.add_host_path(&cwd.to_string_lossy());
        }
        for name in ["HOME", "TMPDIR"] {
            if let Some(value) = env.var(name) {
                redactor.add_host_path(&value);
            }
        }
        redactor.add_host_path(&std::env::temp_dir().to_string_lossy());
        if let Some(dir) = &args.artifact_dir {
            redactor.add_host_path(&plan::absolute(dir).to_string_lossy());
        }
        Ok(Report {
            args,
            env: env.clone(),
            redactor,
            tool_map,
            started: Instant::now(),
            started_at: SystemTime::now(),
            dispatch: DispatchDiagnostics::default(),
            artifacts: None,
            request: None,
            fallback_name: None,
            echo: Echo::default(),
            warnings: Vec::new(),
        })
    }

    /// Warnings for stderr (escaped there), e.g. unknown keys in the bridge.
    pub fn warn(&mut self, warnings: &[Issue]) {
        self.warnings
            .extend(warnings.iter().map(crate::terminal::warning_line));
    }

    /// What a failure envelope echoes, as learned so far.
    pub fn echo(&self) -> &Echo {
        &self.echo
    }

    /// The redactor, with every secret and host path learned so far.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The `--tool-map` in force.
    pub fn tool_map(&self) -> &ToolMap {
        &self.tool_map
    }

    /// The request's bytes as read: a transcript of a request without a usable id is named
    /// after their digest.
    pub fn learn_request_bytes(&mut self, bytes: &[u8]) {
        if self.args.artifact_dir.is_some() {
            self.fallback_name = Some(safe_name(None, bytes));
        }
    }

    /// The request, parsed (not yet validated): its ids are echoed from now on.
    pub fn learn_request(&mut self, doc: Rc<Document>) {
        self.echo = Echo::best_effort(Some(&doc));
        self.request = Some(doc);
    }

    /// Check the transcript folder before anything can run (SPEC §5).
    pub fn prepare_artifacts(&mut self) -> Result<(), DispatchError> {
        if let Some(dir) = &self.args.artifact_dir {
            let prepared =
                ArtifactDir::prepare(dir).map_err(|source| DispatchError::ArtifactDir {
                    dir: dir.clone(),
                    source,
                })?;
            self.artifacts = Some(prepared);
        }
        Ok(())
    }

    /// Secrets the bridge reveals (sensitive `command.env` values, the endpoint token) and
    /// the timeout in force.
    pub fn learn_bridge(&mut self, bridge: &Bridge) {
        if let Some(command) = &bridge.command {
            for (name, value) in &command.env {
                if is_sensitive_key(name) {
                    self.redactor.add_secret(value);
                }
            }
        }
        if let Some(name) = &bridge.token_env {
            if let Some(value) = self.env.var(name) {
                self.redactor.add_secret(&value);
            }
        }
        self.dispatch.timeout_ms = Some(bridge.timeout_ms);
    }

    /// Host paths the plan revealed, and the transport.
    pub fn learn_plan(&mut self, plan: &Plan, transport: bridge::Transport) {
        for path in &plan.host_paths {
            self.redactor.add_host_path(&path.to_string_lossy());
        }
        self.dispatch.transport = Some(super::transport_of(transport));
    }

    /// The endpoint about to be called: its origin for diagnostics, and the URL as a secret
    /// when it carries more than its origin (a path or query may hold a credential).
    pub fn learn_endpoint(&mut self, target: &crate::endpoint::Target) {
        if let Some(url) = target.secret_url() {
            self.redactor.add_secret(url);
        }
        self.dispatch.transport = Some(result::Transport::Http);
        self.dispatch.endpoint = Some(target.origin().to_string());
    }

    /// What the HTTP exchange observed, also when it ended early.
    pub fn record_exchange(&mut self, http_status: Option<u16>, response_bytes: u64) {
        self.dispatch.http_status = http_status;
        self.dispatch.response_bytes = Some(response_bytes);
    }

    /// What the process runner observed.
    pub fn record_run(&mut self, finished: &Finished) {
        let (exit_code, signal) = match finished.termination {
            Termination::Exited(code) => (Some(code), None),
            Termination::Signaled(sig) => (None, Some(signal_name(sig))),
            Termination::Unreaped | Termination::NotStarted => (None, None),
        };
        self.dispatch.adapter_started = finished.termination != Termination::NotStarted;
        let (stderr_tail, tail_cut) = self.stderr_tail(&finished.stderr_tail);
        self.dispatch.run = Some(RunDiagnostics {
            exit_code,
            signal,
            stdout_bytes: finished.stdout_bytes,
            stdin_bytes_written: finished.stdin_bytes_written,
            stdin_error: finished.stdin_error.as_ref().map(|e| match e.as_str() {
                "broken_pipe" => StdinError::BrokenPipe,
                other => StdinError::Other(other.to_string()),
            }),
            stderr_truncated: finished.stderr_truncated || tail_cut,
            stderr_tail,
            leaked_processes: finished.leaked_processes,
        });
    }

    /// What a recorded answer says about its run (`replay`): nothing was started and nothing
    /// written to a stdin, so `adapter_started` stays false and `transport` is `replay`; the
    /// recorded exit code, stdout size and stderr are reported as a live run's would be (the
    /// stderr tail bounded and redacted the same way).
    pub fn record_replayed(&mut self, exit_code: i32, stdout_bytes: u64, stderr: &[u8]) {
        self.dispatch.transport = Some(Transport::Replay);
        let (stderr_tail, tail_cut) = self.stderr_tail(stderr);
        self.dispatch.run = Some(RunDiagnostics {
            exit_code: Some(exit_code),
            signal: None,
            stdout_bytes,
            stdin_bytes_written: 0,
            stdin_error: None,
            stderr_tail,
            stderr_truncated: tail_cut,
            leaked_processes: 0,
        });
    }

    /// The last [`exec::STDERR_TAIL_BYTES`] of stderr, redacted, and whether anything was cut.
    /// All of what was kept (twice that) is redacted first, then cut: a secret across the cut
    /// is never half-shown.
    fn stderr_tail(&self, stderr: &[u8]) -> (String, bool) {
        let kept = &stderr[stderr.len().saturating_sub(exec::STDERR_KEEP_BYTES)..];
        let (tail, cut) = self.redactor.redact_tail(kept, exec::STDERR_TAIL_BYTES);
        (tail, cut || kept.len() < stderr.len())
    }

    /// Keep the start of stdout, redacted, in `diagnostics.dispatch.stdout_head`.
    pub fn keep_stdout_head(&mut self, stdout: &[u8]) {
        // Twice what is shown, redacted whole, then cut: no half secret at the cut.
        let kept = &stdout[..stdout.len().min(2 * STDOUT_HEAD_BYTES)];
        let (head, _) = self.redactor.redact_head(kept, STDOUT_HEAD_BYTES);
        self.dispatch.stdout_head = Some(head);
    }

    /// For an answer on stdout that is not a valid envelope: where the cause usually is, the
    /// start of stdout (already redacted), for the stderr line.
    fn stdout_found(&self, err: &DispatchError) -> Option<String> {
        let answer_on_stdout = self.dispatch.transport == Some(result::Transport::Stdin);
        let head = self.dispatch.stdout_head.as_deref()?;
        let judged = matches!(
            err,
            DispatchError::ResultInvalid { .. } | DispatchError::AdapterExitNonzero { .. }
        );
        if !(answer_on_stdout && judged) {
            return None;
        }
        if head.is_empty() {
            return Some("; stdout was empty".to_string());
        }
        let first_line = head.lines().next().unwrap_or_default();
        let shown: String = first_line.chars().take(80).collect();
        let cut = if shown.len() < first_line.len() {
            "\u{2026}"
        } else {
            ""
        };
        Some(format!("; stdout begins with {shown:?}{cut}"))
    }

    /// Attach diagnostics, write the transcript, redact, write `--result-file`: everything but
    /// printing. [`Concluded::print`] prints. (The main job uses [`Report::finish`], which
    /// never holds the envelope as one text unless `--result-file` needs it.)
    pub fn conclude(mut self, outcome: Result<ResultEnvelope<'_>, DispatchError>) -> Concluded {
        let settled = self.settle(outcome);
        let envelope = match settled.text {
            Some(text) => text,
            None => self.render(&settled.envelope),
        };
        Concluded {
            envelope,
            status: settled.envelope.status,
            exit: settled.exit,
            stderr: settled.stderr,
        }
    }

    /// Conclude as [`conclude`](Self::conclude) does, then print: the stderr lines, then the
    /// envelope and a newline on stdout. Returns the exit status.
    ///
    /// The envelope is written to stdout as it is rendered (see
    /// [`ResultEnvelope::write_to`]), so a large `output` is held once — in the answer it
    /// came in — instead of twice; with `--result-file` it is rendered once into the text
    /// both get.
    ///
    /// `wrote` turns true once a byte of the envelope is on stdout: after that, a panic cannot
    /// be answered with another envelope.
    pub fn finish(
        mut self,
        outcome: Result<ResultEnvelope<'_>, DispatchError>,
        wrote: &std::cell::Cell<bool>,
    ) -> u8 {
        let settled = self.settle(outcome);
        for line in &settled.stderr {
            eprintln!("{line}");
        }
        let stdout = std::io::stdout().lock();
        let mut out =
            std::io::BufWriter::with_capacity(STDOUT_BUFFER_BYTES, FdWriter { fd: &stdout, wrote });
        // A closed or full stdout cannot be reported anywhere: the exit status still is.
        let _ = match &settled.text {
            Some(text) => out.write_all(text.as_bytes()),
            None if self.args.pretty => {
                let mut pretty = raw::Pretty::new(&mut out);
                settled
                    .envelope
                    .write_to(&self.redactor, Audience::Caller, &mut pretty)
                    .and_then(|()| pretty.finish())
            }
            None => settled
                .envelope
                .write_to(&self.redactor, Audience::Caller, &mut out),
        }
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
        settled.exit
    }

    /// Everything [`conclude`](Self::conclude) and [`finish`](Self::finish) share: the
    /// envelope with its diagnostics and transcript ref, the exit status, the stderr lines,
    /// and the rendered text when `--result-file` needed it.
    fn settle<'e>(&mut self, outcome: Result<ResultEnvelope<'e>, DispatchError>) -> Settled<'e> {
        let (mut envelope, exit, human) = match outcome {
            Ok(envelope) => {
                let exit = envelope.status.exit_code();
                (envelope, exit, None)
            }
            Err(err) => {
                let mut human = err.human();
                if let Some(found) = self.stdout_found(&err) {
                    human.push_str(&found);
                }
                (err.envelope(&self.echo), err.exit_code(), Some(human))
            }
        };
        self.dispatch.duration_ms = self.started.elapsed().as_millis() as u64;
        envelope.dispatch = Some(self.dispatch.clone());
        self.write_transcript(&mut envelope);

        let mut stderr = std::mem::take(&mut self.warnings);
        let mut text = None;
        if let Some(path) = &self.args.result_file {
            let mut rendered = self.render(&envelope);
            rendered.push('\n');
            let written = crate::fs::write_atomic(path, rendered.as_bytes());
            rendered.pop();
            text = Some(rendered);
            if let Err(err) = written {
                let message = self.redactor.redact_str(&err.to_string());
                stderr.push(format!(
                    "error[result_file]: the result file {} was not written: {err}",
                    path.display()
                ));
                if let Some(dispatch) = envelope.dispatch.as_mut() {
                    dispatch.result_file_error = Some(message);
                }
                text = Some(self.render(&envelope));
            }
        }
        if let Some(code) = envelope.error_code() {
            let message = match human {
                // The dispatcher's own account may name host files: it is for the host's eyes,
                // so only secrets are scrubbed from it.
                Some(human) => self.redactor.scrub_secrets_str(&human),
                None => self
                    .redactor
                    .redact_str(&envelope.error_message().unwrap_or_default()),
            };
            stderr.push(error_line(&self.redactor.redact_str(&code), &message));
        }
        Settled {
            envelope,
            exit,
            stderr,
            text,
        }
    }

    fn render(&self, envelope: &ResultEnvelope) -> String {
        let compact = envelope.render(&self.redactor, Audience::Caller);
        if self.args.pretty {
            raw::pretty(&compact)
        } else {
            compact
        }
    }

    /// One redacted transcript, its ref added to the envelope; a failure is reported in
    /// `diagnostics.dispatch.transcript_error` and does not change the status (SPEC §5).
    fn write_transcript(&self, envelope: &mut ResultEnvelope) {
        let Some(dir) = &self.artifacts else { return };
        // Names are redacted like everything else: a secret in the request id must reach
        // neither the file name nor the ref nor the record.
        let call_id = self.redactor.redact_str(&self.echo.request_id);
        let name = match (&call_id, &self.fallback_name) {
            (id, _) if !id.is_empty() => safe_name(Some(id), b""),
            (_, Some(fallback)) => fallback.clone(),
            (_, None) => safe_name(None, b""),
        };
        let mut request = String::new();
        match &self.request {
            Some(doc) => result::redact_raw(
                &self.redactor,
                doc.text(),
                crate::redact::Scope::Full {
                    envelope_root: true,
                },
                &mut request,
            ),
            None => request.push_str("null"),
        }
        let result = envelope.render(&self.redactor, Audience::Transcript);
        let member = |text: &str, key: &str| -> String {
            Fields::parse(text)
                .and_then(|f| f.get(key).map(str::to_string))
                .unwrap_or_else(|| "null".into())
        };
        let dispatch = Fields::parse(&result)
            .and_then(|f| f.get("diagnostics").and_then(Fields::parse))
            .and_then(|d| d.get("dispatch").map(str::to_string))
            .unwrap_or_else(|| "null".into());
        let doc = transcript::build(&Call {
            call_id: if call_id.is_empty() { &name } else { &call_id },
            tool: &self.redactor.redact_str(&envelope.echo.tool),
            operation: &self.redactor.redact_str(&self.echo.operation),
            status: envelope.status.as_str(),
            started_at: self.started_at,
            finished_at: SystemTime::now(),
            request: &request,
            result: &result,
            dispatch: &dispatch,
            input_digest: &canonical::sha256_hex(member(&request, "input").as_bytes()),
            output_digest: &canonical::sha256_hex(member(&result, "output").as_bytes()),
        });
        match dir.write(&name, &doc) {
            Ok(written) => envelope.transcript_refs.push(ArtifactRef {
                kind: "tool-call-transcript",
                path: written.path,
                sha256: written.sha256,
            }),
            Err(err) => {
                let message = self.redactor.redact_str(&err.to_string());
                if let Some(dispatch) = envelope.dispatch.as_mut() {
                    dispatch.transcript_error = Some(message);
                }
            }
        }
    }
}

/// What [`Report::settle`] leaves to print.
struct Settled<'e> {
    envelope: ResultEnvelope<'e>,
    exit: u8,
    stderr: Vec<String>,
    /// The rendered envelope, when `--result-file` needed it (without the final newline).
    text: Option<String>,
}

/// How much of the envelope is gathered before a write to stdout.
const STDOUT_BUFFER_BYTES: usize = 64 * 1024;

/// `write(2)` on a descriptor, nothing else. std's stdout is line-buffered: every write larger
/// than its buffer is searched from the end for a newline (`memrchr`), which on a 64 MiB
/// `output` without one is a second full pass over it. The envelope is one line that ends
/// with the only newline, and [`Report::finish`] buffers and flushes it itself.
/// `wrote` turns true at the first byte written.
struct FdWriter<'f, F: rustix::fd::AsFd> {
    fd: &'f F,
    wrote: &'f std::cell::Cell<bool>,
}

impl<F: rustix::fd::AsFd> Write for FdWriter<'_, F> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        loop {
            match rustix::io::write(self.fd, bytes) {
                Err(rustix::io::Errno::INTR) => {}
                Ok(n) => {
                    if n > 0 {
                        self.wrote.set(true);
                    }
                    return Ok(n);
                }
                Err(err) => return Err(err.into()),
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A finished main job: the envelope as text, what stderr says, the exit status.
#[derive(Debug, Clone)]
pub struct Concluded {
    /// The envelope, compact (or pretty with `--pretty`), without the final newline.
    pub envelope: String,
    pub status: Status,
    pub exit: u8,
    /// Lines for stderr.
    pub stderr: Vec<String>,
}

impl Concluded {
    /// stderr lines, then the envelope and a newline on stdout; returns the exit status.
    pub fn print(self) -> u8 {
        for line in &self.stderr {
            eprintln!("{line}");
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout
            .write_all(self.envelope.as_bytes())
            .and_then(|()| stdout.write_all(b"\n"))
            .and_then(|()| stdout.flush());
        self.exit
    }
}
