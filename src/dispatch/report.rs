//! The end of every main job: diagnostics, the transcript, redaction, the one envelope on
//! stdout, `--result-file`, the stderr line, the exit status.
//!
//! The report is built once, by [`Report::build`], from what the steps learned ([`Learned`])
//! and how the job ended ([`Outcome`]). `Learned` is filled by the sequencer in `dispatch/`,
//! from each step's return value as it returns, so that a failure at any step — a panic
//! included — is reported with everything known up to that point. The envelope is rendered
//! once ([`Report::text`], when the ledger or `--result-file` needs it as text; otherwise
//! [`Report::print`] streams it): the ledger stores that text and stdout gets it. Only a
//! failure to record it or to write the result file, which the envelope then reports, renders
//! it again. Everything that leaves goes through the redactor here; nothing else in the main
//! job prints.

use super::DispatchError;
use crate::cli::DispatchArgs;
use crate::plan;
use ptd_sys::exec::{self, Finished, Termination};
use ptd_sys::hostenv::HostEnv;
use ptd_sys::signal::signal_name;
use ptd_wire::envelope::bridge::Bridge;
use ptd_wire::envelope::canonical;
use ptd_wire::envelope::request::Echo;
use ptd_wire::envelope::result::{
    self, ArtifactRef, Audience, DispatchDiagnostics, LedgerDiagnostics, Resources, ResultEnvelope,
    RunDiagnostics, StdinError,
};
use ptd_wire::error::{ErrorCode, Status};
use ptd_wire::json::raw::{self, Fields};
use ptd_wire::json::Document;
use ptd_wire::redact::{is_sensitive_key, Redactor};
use ptd_wire::terminal::{error_line, stderr_line, stderr_tail_lines, TAIL_LINES, TAIL_LINE_BYTES};
use ptd_wire::transcript::{self, safe_name, ArtifactDir, Call};
use std::io::Write;
use std::rc::Rc;
use std::time::{Instant, SystemTime};

/// How much of stdout is kept as a diagnostic when it is not (or not validly) the answer.
const STDOUT_HEAD_BYTES: usize = 64 * 1024;

/// What the steps of one main job returned, as far as the report and the ledger's record
/// need it. The sequencer in `dispatch/` records each part when its step returns; no step
/// sees this.
pub struct Learned {
    /// Every secret and host path known so far: the host's from the start, then the bridge's,
    /// the plan's and the endpoint's as their steps return them.
    pub(super) redactor: Redactor,
    pub(super) started: Instant,
    pub(super) started_at: SystemTime,
    /// `diagnostics.dispatch` so far (its duration is set by the report).
    pub(super) dispatch: DispatchDiagnostics,
    /// The prepared transcript folder, when `--artifact-dir` is given and usable.
    pub(super) artifacts: Option<ArtifactDir>,
    /// The request as read, when it was a JSON object.
    pub(super) request: Option<Rc<Document>>,
    /// The transcript name of a request without a usable id (from its bytes' digest).
    pub(super) fallback_name: Option<String>,
    /// What a failure envelope echoes.
    pub(super) echo: Echo,
    /// Warning lines for stderr, printed before the envelope.
    pub(super) warnings: Vec<String>,
    /// `diagnostics.ledger`, when the job runs with `--ledger` (SPEC §14).
    pub(super) ledger: Option<LedgerDiagnostics>,
    /// The bridge ref, once the bridge loaded.
    pub(super) bridge_ref: Option<String>,
    /// Lines that explain a failure, printed after its `error[..]` line (a CRLF `#!` line
    /// behind an exit status of 127).
    pub(super) notes: Vec<String>,
    /// What the ledger step left to record once the report is built (with `--ledger`).
    pub(super) gate: Option<super::gate::Gate>,
    /// The call's trace, with telemetry on (SPEC §20): the step spans so far.
    pub(super) trace: Option<ptd_telemetry::Trace>,
}

impl Learned {
    /// What is known before anything is read: the host's secrets and paths (those of
    /// `--artifact-dir` included) and the start time.
    pub fn new(args: &DispatchArgs, env: &HostEnv) -> Learned {
        let mut redactor = plan::host_redactor(&args.run, env);
        if let Some(dir) = &args.artifact_dir {
            redactor.add_host_path(&plan::absolute(dir).to_string_lossy());
        }
        Learned {
            redactor,
            started: Instant::now(),
            started_at: SystemTime::now(),
            dispatch: DispatchDiagnostics::default(),
            artifacts: None,
            request: None,
            fallback_name: None,
            echo: Echo::default(),
            warnings: Vec::new(),
            ledger: None,
            bridge_ref: None,
            notes: Vec::new(),
            gate: None,
            trace: None,
        }
    }

    /// What the host policy reveals (SPEC §16): its file's path (a host path), and the
    /// values of every variable any of its entries passes as a secret or under a sensitive
    /// name, whichever entry will decide the call.
    pub fn policy(&mut self, usage: &super::Usage, env: &HostEnv) {
        let Some(Ok(policy)) = &usage.policy else {
            return;
        };
        self.redactor
            .add_host_path(&plan::absolute(&policy.file).to_string_lossy());
        for name in &policy.secret_names {
            if let Some(value) = env.var(name) {
                self.redactor.add_secret(&value);
            }
        }
    }

    /// The request, parsed (not yet validated): its ids are echoed from now on.
    pub fn parsed(&mut self, doc: Rc<Document>) {
        self.echo = Echo::best_effort(Some(&doc));
        self.request = Some(doc);
    }

    /// What the loaded bridge reveals: secrets (sensitive `command.env` values, the endpoint
    /// token) and the timeout in force.
    pub fn bridge(&mut self, bridge: &Bridge, env: &HostEnv) {
        if let Some(command) = &bridge.command {
            for (name, value) in &command.env {
                if is_sensitive_key(name) {
                    self.redactor.add_secret(value);
                }
            }
        }
        if let Some(value) = bridge.token_env.as_deref().and_then(|name| env.var(name)) {
            self.redactor.add_secret(&value);
        }
        self.dispatch.timeout_ms = Some(bridge.timeout_ms);
    }
}

/// `diagnostics.dispatch.confinement` (SPEC §13 "Reported"): what `prepared` put in force
/// for `options`. Paths are host paths: redaction turns them into placeholders.
pub(super) fn confinement_diagnostics(
    options: &ptd_sys::confine::Options,
    prepared: &ptd_sys::confine::Prepared,
) -> result::ConfinementDiagnostics {
    use ptd_sys::confine::cgroup::Version;
    let paths = |list: &[std::path::PathBuf]| {
        list.iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect()
    };
    let landlock = prepared
        .landlock
        .as_ref()
        .map(|l| result::LandlockDiagnostics {
            abi: l.abi,
            scoped: l.scoped,
            fs_read: paths(&options.fs_read),
            fs_write: paths(&options.fs_write),
        });
    let cgroup = prepared
        .cgroup
        .iter()
        .flat_map(|c| c.versions())
        .map(|(controller, version)| {
            let version = match version {
                Version::V1 => "v1",
                Version::V2 => "v2",
            };
            (controller.as_str(), version)
        })
        .collect();
    result::ConfinementDiagnostics {
        mechanisms: prepared.mechanisms(),
        run_as: result::RunAsDiagnostics {
            uid: prepared.credentials.uid,
            gid: prepared.credentials.gid,
        },
        landlock,
        network: options.network.as_str(),
        limits: result::LimitDiagnostics {
            memory_bytes: options.limit_memory_bytes,
            pids: options.limit_pids,
            open_files: prepared.rlimits.open_files,
            file_size_bytes: prepared.rlimits.file_size_bytes,
        },
        cgroup,
    }
}

/// What the process runner observed, for `diagnostics.dispatch` (the stderr tail redacted with
/// `redactor`).
pub(super) fn run_diagnostics(finished: &Finished, redactor: &Redactor) -> RunDiagnostics {
    let (exit_code, signal) = match finished.termination {
        Termination::Exited(code) => (Some(code), None),
        Termination::Signaled(sig) => (None, Some(signal_name(sig))),
        Termination::Unreaped | Termination::NotStarted => (None, None),
    };
    let (stderr_tail, tail_cut) = stderr_tail(&finished.stderr_tail, redactor);
    RunDiagnostics {
        exit_code,
        signal,
        stdout_bytes: finished.stdout_bytes,
        stdin_bytes_written: finished.stdin_bytes_written,
        stdin_error: finished.stdin_error.map(stdin_error),
        stderr_truncated: finished.stderr_truncated || tail_cut,
        stderr_tail,
        stderr_bytes: finished.stderr_bytes,
        leaked_processes: finished.leaked_processes,
        resources: finished.resources_used().map(resources),
    }
}

/// The envelope's form of what the tree used.
pub(crate) fn resources(r: exec::Resources) -> Resources {
    Resources {
        max_rss_bytes: r.max_rss_bytes,
        user_ms: r.user_ms,
        system_ms: r.system_ms,
    }
}

/// The envelope's form of a stdin write error: an unexpected one by the wire name of its
/// `io::ErrorKind` (`"permissiondenied"`, see `envelope::result::io_kind_name`).
fn stdin_error(error: exec::StdinError) -> StdinError {
    match error {
        exec::StdinError::BrokenPipe => StdinError::BrokenPipe,
        exec::StdinError::Other(kind) => StdinError::other(kind),
    }
}

/// What a recorded answer says about its run (`replay`): nothing was started and nothing
/// written to a stdin; the recorded exit code, stdout size and stderr are reported as a live
/// run's would be (the stderr tail bounded and redacted the same way).
pub(super) fn replayed_diagnostics(
    exit_code: i32,
    stdout_bytes: u64,
    stderr: &[u8],
    redactor: &Redactor,
) -> RunDiagnostics {
    let (stderr_tail, tail_cut) = stderr_tail(stderr, redactor);
    RunDiagnostics {
        exit_code: Some(exit_code),
        signal: None,
        stdout_bytes,
        stdin_bytes_written: 0,
        stdin_error: None,
        stderr_tail,
        stderr_truncated: tail_cut,
        stderr_bytes: stderr.len() as u64,
        leaked_processes: 0,
        resources: None,
    }
}

/// The last [`exec::STDERR_TAIL_BYTES`] of stderr, redacted, and whether anything was cut.
/// All of what was kept (twice that) is redacted first, then cut: a secret across the cut is
/// never half-shown.
fn stderr_tail(stderr: &[u8], redactor: &Redactor) -> (String, bool) {
    let kept = &stderr[stderr.len().saturating_sub(exec::STDERR_KEEP_BYTES)..];
    let (tail, cut) = redactor.redact_tail(kept, exec::STDERR_TAIL_BYTES);
    (tail, cut || kept.len() < stderr.len())
}

/// `--verbose`: the adapter's stderr on this process's stderr as it arrives, a line at a time,
/// each redacted with the rules of `diagnostics.dispatch.stderr_tail` and escaped, after
/// `  | `. A line longer than [`LIVE_LINE_BYTES`] is shown in pieces of that size, so memory
/// stays bounded whatever the adapter writes.
pub(super) struct LiveStderr {
    redactor: Redactor,
    /// stderr is a terminal: the operator's own view, where only the exact secrets are
    /// scrubbed (host paths shown: a traceback names the operator's own files). Anywhere else
    /// (a log, CI) the full rules apply, as for everything that leaves.
    terminal: bool,
    held: std::cell::RefCell<ptd_wire::terminal::HeldLines>,
}

/// The longest piece of one stderr line `--verbose` holds before showing it.
const LIVE_LINE_BYTES: usize = 4096;

impl LiveStderr {
    /// Redacting with what is known when the adapter starts (`learned.redactor` then).
    pub(super) fn new(redactor: &Redactor) -> LiveStderr {
        use std::io::IsTerminal;
        LiveStderr {
            redactor: redactor.clone(),
            terminal: std::io::stderr().is_terminal(),
            held: std::cell::RefCell::default(),
        }
    }

    fn show(&self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let scrubbed = if self.terminal {
            self.redactor.scrub_secrets_str(&text)
        } else {
            self.redactor.redact_str(&text)
        };
        let shown = stderr_line(&scrubbed, usize::MAX);
        // A closed stderr loses the line, and nothing else: the envelope is what matters.
        let _ = writeln!(std::io::stderr().lock(), "{shown}");
    }
}

impl exec::StderrTap for LiveStderr {
    fn chunk(&self, bytes: &[u8]) {
        let mut held = self.held.borrow_mut();
        held.push(bytes, LIVE_LINE_BYTES, |line, _| self.show(line));
    }

    fn finish(&self) {
        let rest = self.held.borrow_mut().take();
        if !rest.is_empty() {
            self.show(&rest);
        }
    }
}

/// How a main job ended: the answer's envelope or the failure, and the stdout to keep as a
/// diagnostic (the judge step decides: see [`super::judge_answer`]).
pub struct Outcome<'o> {
    pub verdict: Result<ResultEnvelope<'o>, DispatchError>,
    /// Kept, redacted, in `diagnostics.dispatch.stdout_head`.
    pub stdout_kept: Option<&'o [u8]>,
    /// The ledger's recorded envelope, when the verdict is one printed again (SPEC §14.1).
    pub replayed: Option<Replayed<'o>>,
}

/// A recorded envelope printed again: its text exactly as stored, and its exit status.
#[derive(Debug, Clone, Copy)]
pub struct Replayed<'o> {
    pub text: &'o str,
    pub exit: u8,
}

impl From<DispatchError> for Outcome<'_> {
    fn from(err: DispatchError) -> Self {
        Outcome {
            verdict: Err(err),
            stdout_kept: None,
            replayed: None,
        }
    }
}

/// The concluded main job: the envelope with its diagnostics and transcript ref, the stderr
/// lines, the exit status, and the envelope's one rendering when the ledger or
/// `--result-file` needed it as text (without one, [`Report::print`] streams it).
pub struct Report<'a> {
    envelope: ResultEnvelope<'a>,
    /// The dispatcher's own code when the job ended in a [`DispatchError`], kept typed.
    failure: Option<ErrorCode>,
    exit: u8,
    stderr: Vec<String>,
    /// The envelope rendered: what the ledger stores, `--result-file` holds and stdout gets.
    rendered: Option<Rendered>,
    redactor: &'a Redactor,
    pretty: bool,
    /// A replayed envelope's recorded text: printed again with only `diagnostics.ledger` set
    /// from `envelope.ledger`.
    replay_source: Option<&'a str>,
}

impl<'a> Report<'a> {
    /// Build the report of a job that learned `learned` and ended in `outcome`: attach
    /// diagnostics, write the transcript, write `--result-file`, compose the stderr lines.
    /// Nothing is printed: [`Report::print`] prints, [`Report::into_concluded`] hands it over.
    pub fn build(args: &DispatchArgs, learned: &'a Learned, outcome: Outcome<'a>) -> Report<'a> {
        if let (Some(replayed), Ok(envelope)) = (outcome.replayed, &outcome.verdict) {
            return Report::replayed(args, learned, replayed, envelope.clone());
        }
        let redactor = &learned.redactor;
        let mut dispatch = learned.dispatch.clone();
        if let Some(stdout) = outcome.stdout_kept {
            dispatch.stdout_head = Some(stdout_head(stdout, redactor));
        }
        let failure = outcome.verdict.as_ref().err().map(DispatchError::code);
        let (mut envelope, exit, human) = match outcome.verdict {
            Ok(envelope) => {
                let exit = envelope.status.exit_code();
                (envelope, exit, None)
            }
            Err(err) => {
                let mut human = err.human();
                if let Some(found) = stdout_found(&dispatch, &err) {
                    human.push_str(&found);
                }
                (err.envelope(&learned.echo), err.exit_code(), Some(human))
            }
        };
        dispatch.duration_ms = learned.started.elapsed().as_millis() as u64;
        envelope.dispatch = Some(dispatch);
        envelope.ledger.clone_from(&learned.ledger);
        write_transcript(learned, &mut envelope);
        let mut report = Report {
            envelope,
            failure,
            exit,
            stderr: learned.warnings.clone(),
            rendered: None,
            redactor,
            pretty: args.pretty,
            replay_source: None,
        };
        // With a ledger, only once the outcome is recorded ([`Report::write_pending`]).
        if learned.ledger.is_none() {
            report.write_pending(args);
        }
        if let Some(code) = report.envelope.error_code() {
            let message = match human {
                // The dispatcher's own account may name host files: it is for the host's eyes,
                // so only secrets are scrubbed from it.
                Some(human) => redactor.scrub_secrets_str(&human),
                None => redactor.redact_str(&report.envelope.error_message().unwrap_or_default()),
            };
            let line = error_line(&redactor.redact_str(&code), &message);
            report.stderr.push(line);
            report.stderr.extend(learned.notes.iter().cloned());
            // The adapter's own account, unless --verbose already showed all of it.
            let tail = report
                .envelope
                .dispatch
                .as_ref()
                .and_then(|d| d.run.as_ref());
            if let (Some(run), false) = (tail, args.messages.verbose) {
                report.stderr.extend(stderr_tail_lines(
                    &run.stderr_tail,
                    TAIL_LINES,
                    TAIL_LINE_BYTES,
                ));
            }
        }
        if args.messages.quiet {
            report.stderr.clear();
        }
        report
    }

    /// The report of a recorded envelope printed again (SPEC §14.1): its text as stored but for
    /// `diagnostics.ledger`, its exit status, no transcript and no new diagnostics; stderr gets
    /// the warnings and, for a failure, the recorded code and message.
    fn replayed(
        args: &DispatchArgs,
        learned: &'a Learned,
        replayed: Replayed<'a>,
        mut envelope: ResultEnvelope<'a>,
    ) -> Report<'a> {
        let redactor = &learned.redactor;
        envelope.ledger.clone_from(&learned.ledger);
        let mut report = Report {
            envelope,
            failure: None,
            exit: replayed.exit,
            stderr: learned.warnings.clone(),
            rendered: None,
            redactor,
            pretty: args.pretty,
            replay_source: Some(replayed.text),
        };
        report.text();
        if let Some(code) = report.envelope.error_code() {
            let message = report.envelope.error_message().unwrap_or_default();
            let line = error_line(&redactor.redact_str(&code), &redactor.redact_str(&message));
            report.stderr.push(line);
        }
        report
    }

    /// The envelope's status.
    pub fn status(&self) -> Status {
        self.envelope.status
    }

    /// The envelope's `error.code` as written, if any (an adapter's own code included).
    pub fn error_code(&self) -> Option<String> {
        self.envelope.error_code().map(|c| c.into_owned())
    }

    /// The envelope's `error.code` as one of the dispatcher's codes: the failure's own, or
    /// what an answer (or a recorded envelope) wrote when it is one of them.
    pub fn code(&self) -> Option<ErrorCode> {
        self.failure
            .or_else(|| ErrorCode::parse(&self.envelope.error_code()?))
    }

    /// The exit status the job will have.
    pub fn exit(&self) -> u8 {
        self.exit
    }

    /// The path of the dispatcher's transcript ref, when one was written (for a replayed
    /// envelope: the recorded one's).
    pub fn transcript_ref(&self) -> Option<String> {
        if let Some(reference) = self.envelope.transcript_refs.first() {
            return Some(reference.path.clone());
        }
        let source = self.replay_source?;
        let transcripts = Fields::parse(source)?
            .get("artifacts")
            .and_then(Fields::parse)?
            .get("transcripts")?;
        let mut found = None;
        raw::for_each_item(transcripts, |_, item| {
            let Some(fields) = Fields::parse(item) else {
                return;
            };
            let kind = fields.get("kind").and_then(raw::string);
            if kind.as_deref() == Some("tool-call-transcript") {
                found = fields
                    .get("path")
                    .and_then(raw::string)
                    .map(|p| p.into_owned());
            }
        });
        found
    }

    /// The envelope's `error.retryable` (false for a success): such an outcome is not final.
    pub fn retryable(&self) -> bool {
        match &self.envelope.error {
            None => false,
            Some(result::ErrorPart::Dispatcher(body)) => body.retryable,
            Some(result::ErrorPart::Answer(text)) => Fields::parse(text)
                .and_then(|f| f.get("retryable").and_then(raw::boolean))
                .unwrap_or(false),
        }
    }

    /// The envelope's compact text, rendered the first time it is asked for: what the
    /// ledger stores is exactly what stdout then gets (pretty-printed with `--pretty`).
    pub fn text(&mut self) -> &str {
        let rendered = match self.rendered.take() {
            Some(rendered) => rendered,
            None => self.render(),
        };
        &self.rendered.insert(rendered).compact
    }

    /// The envelope changed after it was rendered (a failure to record it or to write the
    /// result file is reported in it): render it again.
    fn changed(&mut self) {
        self.rendered = None;
        self.text();
    }

    /// The call's outcome could not be recorded (SPEC §14.3): the real envelope is printed
    /// (and written to `--result-file`) with `diagnostics.ledger.error`, and a
    /// `warning[ledger_unavailable]` line on stderr (the envelope's own code keeps the one
    /// `error[…]` line).
    pub(crate) fn ledger_failed(&mut self, message: &str) {
        let message = self.redactor.redact_str(message);
        self.envelope
            .ledger
            .get_or_insert_with(LedgerDiagnostics::default)
            .error = Some(message.clone());
        self.stderr.push(format!(
            "warning[ledger_unavailable]: the call's outcome was not recorded in the ledger: {}",
            ptd_wire::terminal::escape(&message)
        ));
        self.changed();
    }

    /// Write `--result-file`, when it is asked for. With a ledger the sequencer calls this
    /// after the outcome is recorded (or failed to be), so that no file holds an envelope the
    /// ledger does not know, and the file holds exactly what stdout gets.
    pub(crate) fn write_pending(&mut self, args: &DispatchArgs) {
        if let Some(path) = &args.result_file {
            self.write_result_file(path);
        }
    }

    /// Write `--result-file` (atomically) with the envelope as stdout gets it; a failure is
    /// reported on stderr and in `diagnostics.dispatch.result_file_error`, and stdout's
    /// envelope says so too.
    fn write_result_file(&mut self, path: &std::path::Path) {
        self.text();
        let written = match self.rendered.as_mut() {
            Some(rendered) => {
                let printed = rendered.printed_mut();
                printed.push('\n');
                let written = ptd_sys::fs::write_atomic(path, printed.as_bytes());
                printed.pop();
                written
            }
            None => Ok(()),
        };
        if let Err(err) = written {
            let message = self.redactor.redact_str(&err.to_string());
            self.stderr.push(format!(
                "error[result_file]: the result file {} was not written: {err}",
                path.display()
            ));
            if let Some(dispatch) = self.envelope.dispatch.as_mut() {
                dispatch.result_file_error = Some(message);
            }
            self.changed();
        }
    }

    /// The report as text: what [`print`](Self::print) would print.
    pub(crate) fn into_concluded(self) -> Concluded {
        let envelope = match self.rendered {
            Some(rendered) => rendered.into_printed(),
            None => self.render().into_printed(),
        };
        Concluded {
            envelope,
            status: self.envelope.status,
            exit: self.exit,
            stderr: self.stderr,
        }
    }

    /// Print: the stderr lines, then the envelope and a newline on stdout. Returns the exit
    /// status.
    ///
    /// The envelope is written to stdout as it is rendered (see
    /// [`ResultEnvelope::write_to`]), so a large `output` is held once — in the answer it
    /// came in — instead of twice; with `--result-file` it is rendered once into the text
    /// both get.
    ///
    /// `wrote` turns true once a byte of the envelope is on stdout: after that, a panic cannot
    /// be answered with another envelope.
    pub fn print(self, wrote: &std::cell::Cell<bool>) -> u8 {
        for line in &self.stderr {
            stderr_line!("{line}");
        }
        let stdout = std::io::stdout().lock();
        let mut out = std::io::BufWriter::with_capacity(
            STDOUT_BUFFER_BYTES,
            FdWriter {
                fd: &stdout,
                wrote,
                written: 0,
            },
        );
        // A closed or full stdout loses the envelope: `error[stdout]` and exit 74 say so.
        let written = match &self.rendered {
            Some(rendered) => out.write_all(rendered.printed().as_bytes()),
            None if self.pretty => {
                let mut pretty = raw::Pretty::new(&mut out);
                self.envelope
                    .write_to(self.redactor, Audience::Caller, &mut pretty)
                    .and_then(|()| pretty.finish())
            }
            None => self
                .envelope
                .write_to(self.redactor, Audience::Caller, &mut out),
        }
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
        match written {
            Ok(()) => self.exit,
            Err(err) => ptd_wire::stdout::failed("the envelope", &err),
        }
    }

    /// The envelope as compact text: rendered, or the replayed text with its ledger member.
    fn compact(&self) -> String {
        match self.replay_source {
            Some(source) => {
                let ledger = self.envelope.ledger.clone().unwrap_or_default();
                result::with_ledger_diagnostics(source, &ledger)
                    .unwrap_or_else(|| source.to_string())
            }
            None => self.envelope.render(self.redactor, Audience::Caller),
        }
    }

    fn render(&self) -> Rendered {
        let compact = self.compact();
        Rendered {
            pretty: self.pretty.then(|| raw::pretty(&compact)),
            compact,
        }
    }
}

/// An envelope rendered once: its compact text, and the pretty-printed form of that text
/// with `--pretty`. Neither holds the final newline.
struct Rendered {
    compact: String,
    pretty: Option<String>,
}

impl Rendered {
    /// What stdout and `--result-file` get.
    fn printed(&self) -> &str {
        self.pretty.as_deref().unwrap_or(&self.compact)
    }

    fn printed_mut(&mut self) -> &mut String {
        self.pretty.as_mut().unwrap_or(&mut self.compact)
    }

    fn into_printed(self) -> String {
        self.pretty.unwrap_or(self.compact)
    }
}

/// The start of stdout, redacted, for `diagnostics.dispatch.stdout_head`: twice what is shown
/// is redacted whole, then cut, so no half secret stands at the cut.
fn stdout_head(stdout: &[u8], redactor: &Redactor) -> String {
    let kept = &stdout[..stdout.len().min(2 * STDOUT_HEAD_BYTES)];
    redactor.redact_head(kept, STDOUT_HEAD_BYTES).0
}

/// For an answer on stdout that is not a valid envelope: where the cause usually is, the
/// start of stdout (already redacted), for the stderr line.
fn stdout_found(dispatch: &DispatchDiagnostics, err: &DispatchError) -> Option<String> {
    let answer_on_stdout = dispatch.transport == Some(result::Transport::Stdin);
    let head = dispatch.stdout_head.as_deref()?;
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

/// One redacted transcript, its ref added to the envelope; a failure is reported in
/// `diagnostics.dispatch.transcript_error` and does not change the status (SPEC §5).
fn write_transcript(learned: &Learned, envelope: &mut ResultEnvelope) {
    let Some(dir) = &learned.artifacts else {
        return;
    };
    // Names are redacted like everything else: a secret in the request id must reach
    // neither the file name nor the ref nor the record.
    let call_id = learned.redactor.redact_str(&learned.echo.request_id);
    let name = match (&call_id, &learned.fallback_name) {
        (id, _) if !id.is_empty() => safe_name(Some(id), b""),
        (_, Some(fallback)) => fallback.clone(),
        (_, None) => safe_name(None, b""),
    };
    let mut request = String::new();
    match &learned.request {
        Some(doc) => result::redact_raw(
            &learned.redactor,
            doc.text(),
            ptd_wire::redact::Scope::Full {
                envelope_root: true,
            },
            &mut request,
        ),
        None => request.push_str("null"),
    }
    // The request's `input`, redacted on its own: `input` is not a sensitive key, so this is
    // the member as it stands in `request`.
    let mut input = String::new();
    match learned.request.as_ref().and_then(|doc| doc.get("input")) {
        Some(raw) => result::redact_raw(
            &learned.redactor,
            raw,
            ptd_wire::redact::Scope::Full {
                envelope_root: false,
            },
            &mut input,
        ),
        None => input.push_str("null"),
    }
    let result = envelope.render_for_transcript(&learned.redactor);
    let doc = transcript::build(&Call {
        call_id: if call_id.is_empty() { &name } else { &call_id },
        tool: &learned.redactor.redact_str(&envelope.echo.tool),
        operation: &learned.redactor.redact_str(&learned.echo.operation),
        status: envelope.status.as_str(),
        started_at: learned.started_at,
        finished_at: SystemTime::now(),
        request: &request,
        result: &result.text,
        dispatch: result.dispatch(),
        input_digest: &canonical::sha256_hex(input.as_bytes()),
        output_digest: &canonical::sha256_hex(result.output().as_bytes()),
    });
    match dir.write(&name, &doc) {
        Ok(written) => envelope.transcript_refs.push(ArtifactRef {
            kind: "tool-call-transcript",
            path: written.path,
            sha256: written.sha256,
        }),
        Err(err) => {
            let message = learned.redactor.redact_str(&err.to_string());
            if let Some(dispatch) = envelope.dispatch.as_mut() {
                dispatch.transcript_error = Some(message);
            }
        }
    }
}

/// How much of the envelope is gathered before a write to stdout.
const STDOUT_BUFFER_BYTES: usize = 64 * 1024;

/// `write(2)` on a descriptor, nothing else. std's stdout is line-buffered: every write larger
/// than its buffer is searched from the end for a newline (`memrchr`), which on a 64 MiB
/// `output` without one is a second full pass over it. The envelope is one line that ends
/// with the only newline, and [`Report::print`] buffers and flushes it itself.
/// `wrote` turns true at the first byte written; the write that takes the envelope past
/// [`ptd_wire::stdout::PIPE_BYTES`] makes room for the rest in a pipe
/// ([`ptd_wire::stdout::make_room`]), once.
struct FdWriter<'f, F: rustix::fd::AsFd> {
    fd: &'f F,
    wrote: &'f std::cell::Cell<bool>,
    /// Bytes asked to be written so far.
    written: usize,
}

impl<F: rustix::fd::AsFd> Write for FdWriter<'_, F> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let before = self.written;
        self.written = before.saturating_add(bytes.len());
        if before < ptd_wire::stdout::PIPE_BYTES && self.written >= ptd_wire::stdout::PIPE_BYTES {
            ptd_wire::stdout::make_room(self.written);
        }
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
            stderr_line!("{line}");
        }
        let mut line = self.envelope.into_bytes();
        line.push(b'\n');
        ptd_wire::stdout::print(&line, "the envelope", self.exit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_errors_keep_their_envelope_spelling() {
        let json = |e| serde_json::to_value(stdin_error(e)).unwrap();
        assert_eq!(json(exec::StdinError::BrokenPipe), "broken_pipe");
        assert_eq!(
            json(exec::StdinError::Other(
                std::io::ErrorKind::PermissionDenied
            )),
            "permissiondenied"
        );
    }
}
