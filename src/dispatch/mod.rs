//! The main job, in the order of SPEC §4.1: read → validate → authorize → obtain an answer
//! (plan and run the adapter, or POST to the endpoint) → judge → report. Every path after
//! argument parsing ends in exactly one printed envelope.
//!
//! This module only sequences the steps — each is a function of its own module that takes
//! what it needs and returns `Result<_, DispatchError>` — and keeps what the report needs as
//! it is learned (the request's echo, secrets to scrub, host paths). It prints nothing itself:
//! [`report::Report::finish`] prints the one envelope.

mod error;
mod report;

pub use error::DispatchError;
pub use report::{Concluded, Report};

use crate::authorize::authorize;
use crate::cli::DispatchArgs;
use crate::endpoint::{self, Exchanged, Failure};
use crate::envelope::bridge::{Bridge, CommandSpec, Mode};
use crate::envelope::request::{Echo, Request};
use crate::envelope::result::{Expect, ResultEnvelope, Transport};
use crate::exec::{self, Finished, Termination};
use crate::hostenv::HostEnv;
use crate::interrupt::Interrupts;
use crate::json::{Document, JsonIssue};
use crate::judge::{self, Answer, Body, Ending, Limits};
use crate::plan::{self, FileTransport, ResultFile};
use crate::validate::Issue;
use rustix::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::rc::Rc;

/// A usage error: no envelope, a message on stderr, exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Run the main job; print the envelope; return the exit status.
///
/// Panic safety: a panic in any step — reading, admitting, running the adapter (whose
/// process group `exec`'s guard kills and sweeps while unwinding), judging, concluding — is
/// caught and still ends in exactly one `internal_error` envelope echoing the request's ids,
/// one `error[internal_error]` line on stderr saying where it panicked, and exit 70.
pub fn main_job(args: &DispatchArgs, interrupts: &Interrupts) -> u8 {
    let env = HostEnv::process();
    panic_point::arm(&env);
    let mut report = match Report::new(args, &env) {
        Ok(report) => report,
        Err(UsageError(message)) => {
            eprintln!("error[usage]: {message}");
            return crate::error::exit::USAGE;
        }
    };
    let panics = PanicNote::install();
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let bytes = read_request(args, interrupts)?;
        let admitted = admit(args, bytes, &mut report)?;
        obtain(admitted, args, &env, interrupts, &mut report)
    }))
    .unwrap_or_else(|_| Err(panics.error()));
    let (obtained, failure) = match ran {
        Ok(obtained) => (Some(obtained), None),
        Err(err) => (None, Some(err)),
    };
    let outcome = match (&obtained, failure) {
        (_, Some(err)) => Err(err),
        (Some(obtained), None) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            panic_point::reach(PanicPoint::Judging);
            obtained.judge(&mut report)
        }))
        .unwrap_or_else(|_| Err(panics.error())),
        (None, None) => Err(DispatchError::Internal("no outcome".into())),
    };
    // What a failure envelope needs if concluding itself fails.
    let echo = report.echo().clone();
    let redactor = report.redactor().clone();
    // The envelope is written to stdout as it is rendered (a large output is not held twice).
    let wrote = std::cell::Cell::new(false);
    let printed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        panic_point::reach(PanicPoint::Concluding);
        report.finish(outcome, &wrote)
    }));
    let exit = match printed {
        Ok(exit) => exit,
        // Nothing on stdout yet: the last resort is the one envelope.
        Err(_) if !wrote.get() => {
            last_resort(&echo, &redactor, &panics.error(), args.pretty).print()
        }
        // A panic while the envelope was being written: stdout is cut short and no second
        // envelope may follow it; stderr and the exit status still say what happened.
        Err(_) => {
            let failed = last_resort(&echo, &redactor, &panics.error(), args.pretty);
            for line in &failed.stderr {
                eprintln!("{line}");
            }
            failed.exit
        }
    };
    // Only now: the cleanup is bounded, but nothing may delay the envelope.
    if let Some(obtained) = obtained {
        let cleaned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            obtained.clean_up();
        }));
        if cleaned.is_err() {
            eprintln!(
                "warning[internal_error]: cleaning up after the run: {}",
                panics.take()
            );
        }
    }
    exit
}

/// The envelope of a failure when [`Report::conclude`] itself panicked: no transcript and no
/// result file, the ids and the redaction known so far. Should rendering panic too, a fixed
/// envelope without ids is printed: one valid envelope, always.
pub fn last_resort(
    echo: &Echo,
    redactor: &crate::redact::Redactor,
    err: &DispatchError,
    pretty: bool,
) -> Concluded {
    let rendered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        err.envelope(echo)
            .render(redactor, crate::envelope::result::Audience::Caller)
    }));
    let compact = rendered.unwrap_or_else(|_| LAST_RESORT_ENVELOPE.to_string());
    let human = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        redactor.scrub_secrets_str(&err.human())
    }))
    .unwrap_or_else(|_| "the dispatcher hit an internal error; please report it".into());
    Concluded {
        envelope: if pretty {
            crate::json::raw::pretty(&compact)
        } else {
            compact
        },
        status: err.status(),
        exit: err.exit_code(),
        stderr: vec![crate::terminal::error_line(err.code().as_str(), &human)],
    }
}

/// The envelope printed when nothing else can be rendered.
const LAST_RESORT_ENVELOPE: &str = concat!(
    r#"{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"","tool":"","#,
    r#""operation":"","status":"failed","error":{"code":"internal_error","message":"the "#,
    r#"dispatcher hit an internal error; please report it","retryable":false},"artifacts":"#,
    r#"{"transcripts":[],"evidence":[]},"diagnostics":{},"metadata":{}}"#
);

/// What the panics of the main job said. While the main job runs, a panic is recorded here
/// instead of printed by the default hook: it is reported once, on the `error[internal_error]`
/// line (scrubbed of secrets like every stderr line), not as loose text around it.
struct PanicNote {
    note: &'static std::sync::Mutex<Option<String>>,
}

impl PanicNote {
    fn install() -> PanicNote {
        static NOTE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
        std::panic::set_hook(Box::new(|info| {
            let payload = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_default();
            let thread = std::thread::current();
            let text = format!(
                "thread '{}' panicked{at}: {payload}",
                thread.name().unwrap_or("unnamed")
            );
            if let Ok(mut note) = NOTE.lock() {
                // The first panic is the cause; later ones are its consequences.
                note.get_or_insert(text);
            }
        }));
        PanicNote { note: &NOTE }
    }

    /// What the first panic said (taking it).
    fn take(&self) -> String {
        self.note
            .lock()
            .ok()
            .and_then(|mut note| note.take())
            .unwrap_or_else(|| "a panic".into())
    }

    /// The failure a caught panic becomes.
    fn error(&self) -> DispatchError {
        DispatchError::Panicked { what: self.take() }
    }
}

/// Where a test may provoke a panic in the main job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanicPoint {
    /// In `exec::run`, right after the adapter's process group was spawned: the adapter runs.
    AdapterStarted,
    /// After the adapter ended, before its answer is judged.
    Judging,
    /// Before the report concludes (diagnostics, transcript, rendering).
    Concluding,
}

/// A test-only hook to prove panic safety end to end (README, "Robustness"): with
/// `PARENT_TOOL_DISPATCH_TEST_PANIC=adapter_started[:MS]|judging|concluding` in a **debug**
/// build, the main job panics at that point (after MS milliseconds at `adapter_started`, so
/// the adapter is well under way). Release builds never read the variable.
pub mod panic_point {
    use super::PanicPoint;
    use crate::hostenv::HostEnv;
    use std::sync::OnceLock;
    use std::time::Duration;

    /// The variable naming the point.
    pub const ENV: &str = "PARENT_TOOL_DISPATCH_TEST_PANIC";

    static ARMED: OnceLock<(PanicPoint, Duration)> = OnceLock::new();

    /// Read [`ENV`] (debug builds only); an unknown value arms nothing.
    pub fn arm(env: &HostEnv) {
        if !cfg!(debug_assertions) {
            return;
        }
        let Some(value) = env.var(ENV) else { return };
        let (name, ms) = value.split_once(':').unwrap_or((&value, "0"));
        let point = match name {
            "adapter_started" => PanicPoint::AdapterStarted,
            "judging" => PanicPoint::Judging,
            "concluding" => PanicPoint::Concluding,
            _ => return,
        };
        let delay = Duration::from_millis(ms.parse().unwrap_or(0));
        let _ = ARMED.set((point, delay));
    }

    /// Panic here when a test armed this point (the panic names the caller's location).
    #[track_caller]
    pub fn reach(point: PanicPoint) {
        if !cfg!(debug_assertions) {
            return;
        }
        if let Some(&(armed, delay)) = ARMED.get() {
            if armed == point {
                std::thread::sleep(delay);
                panic!("{ENV}: a panic provoked at {point:?}");
            }
        }
    }
}

/// A request that passed every check before anything runs (SPEC §4.1 steps 1–3).
pub struct Admitted {
    pub bridge: Bridge,
    pub request: Request,
    /// The request as the adapter (or endpoint) sees it: the tool id mapped (§4.4).
    pub sent: Echo,
    /// The tool id as requested, which the printed envelope carries.
    pub canonical_tool: String,
}

impl Admitted {
    /// What an answer to this request must echo.
    pub fn expect(&self) -> Expect<'_> {
        Expect {
            sent: &self.sent,
            canonical_tool: &self.canonical_tool,
        }
    }
}

/// Steps 1–3 of SPEC §4.1 on the request bytes as read: parse, prepare the transcript folder,
/// load the bridge, validate the request, authorize. Nothing runs before this returns `Ok`.
pub fn admit(
    args: &DispatchArgs,
    bytes: Vec<u8>,
    report: &mut Report,
) -> Result<Admitted, DispatchError> {
    report.learn_request_bytes(&bytes);
    let max_request = usize::try_from(args.max_request_bytes).unwrap_or(usize::MAX);
    let parsed = Document::parse(bytes, max_request).map(Rc::new);
    if let Ok(doc) = &parsed {
        report.learn_request(Rc::clone(doc));
    }
    report.prepare_artifacts()?;
    let bridge = load_bridge(args, report)?;
    report.learn_bridge(&bridge);
    let request = validate_request(parsed, max_request)?;
    authorize(&bridge, &request, &bridge.bridge_ref()).map_err(|denial| DispatchError::Denied {
        denial,
        tool: request.echo.tool.clone(),
        status: bridge.failure_status,
    })?;
    let canonical_tool = request.echo.tool.clone();
    let sent = Echo {
        tool: report.tool_map().external(&canonical_tool),
        ..request.echo.clone()
    };
    Ok(Admitted {
        bridge,
        request,
        sent,
        canonical_tool,
    })
}

/// Step 4–5 up to the answer, by the bridge's mode: run the adapter (`host_command`), or
/// POST to the endpoint (`host_endpoint`).
fn obtain(
    admitted: Admitted,
    args: &DispatchArgs,
    env: &HostEnv,
    interrupts: &Interrupts,
    report: &mut Report,
) -> Result<Obtained, DispatchError> {
    match admitted.bridge.mode {
        Mode::HostCommand => {
            run_adapter(admitted, args, env, interrupts, report).map(Obtained::Ran)
        }
        Mode::HostEndpoint => {
            call_endpoint(admitted, args, env, interrupts, report).map(Obtained::Answered)
        }
    }
}

/// What came back, to judge.
enum Obtained {
    Ran(Ran),
    Answered(Answered),
}

impl Obtained {
    fn judge(&self, report: &mut Report) -> Result<ResultEnvelope<'_>, DispatchError> {
        match self {
            Obtained::Ran(ran) => ran.judge(report),
            Obtained::Answered(answered) => answered.judge(),
        }
    }

    fn clean_up(self) {
        match self {
            Obtained::Ran(ran) => ran.clean_up(),
            Obtained::Answered(_) => {}
        }
    }
}

/// The `host_endpoint` mode (SPEC §11): check the endpoint as configured on the host, POST
/// the request, and keep the complete answer for the judge.
fn call_endpoint(
    admitted: Admitted,
    args: &DispatchArgs,
    env: &HostEnv,
    interrupts: &Interrupts,
    report: &mut Report,
) -> Result<Answered, DispatchError> {
    let Admitted {
        bridge,
        request,
        sent,
        canonical_tool,
    } = admitted;
    // A valid `host_endpoint` bridge always has one.
    let spec = bridge
        .endpoint
        .as_ref()
        .ok_or(DispatchError::ModeUnsupported { mode: bridge.mode })?;
    let target = endpoint::target(
        spec,
        bridge.token_env.as_deref(),
        args.ca_cert.as_deref(),
        env,
    )
    .map_err(DispatchError::EndpointUnconfigured)?;
    report.learn_endpoint(&target);
    let body = request.for_adapter(&sent.tool);
    drop(request);
    let max_bytes = usize::try_from(args.max_output_bytes).unwrap_or(usize::MAX);
    let limits = endpoint::Limits {
        timeout_ms: bridge.timeout_ms,
        max_bytes,
    };
    let Exchanged {
        outcome,
        http_status,
        response_bytes,
    } = endpoint::exchange(&target, body, &sent.request_id, limits, interrupts);
    report.record_exchange(http_status, response_bytes);
    let response = outcome.map_err(|failure| match failure {
        Failure::Timeout => DispatchError::EndpointTimeout {
            timeout_ms: bridge.timeout_ms,
        },
        Failure::Interrupted(signal) => DispatchError::EndpointInterrupted { signal },
        Failure::TooLarge => DispatchError::EndpointTooLarge { max_bytes },
        Failure::Unreachable(cause) => DispatchError::EndpointUnreachable {
            origin: target.origin().to_string(),
            cause,
        },
        Failure::Internal(what) => DispatchError::Internal(what),
    })?;
    Ok(Answered {
        response,
        sent,
        canonical_tool,
        limits: Limits {
            timeout_ms: bridge.timeout_ms,
            max_bytes,
        },
    })
}

/// A complete answer of the endpoint.
struct Answered {
    response: endpoint::Response,
    sent: Echo,
    canonical_tool: String,
    limits: Limits,
}

impl Answered {
    /// Judge the body like an adapter's stdout, the HTTP status playing the exit status.
    fn judge(&self) -> Result<ResultEnvelope<'_>, DispatchError> {
        let status = self.response.status;
        let ending = if (200..300).contains(&status) {
            Ending::Exited(0)
        } else {
            Ending::HttpStatus(status)
        };
        let expect = Expect {
            sent: &self.sent,
            canonical_tool: &self.canonical_tool,
        };
        let body = Body::Bytes(&self.response.body);
        judge::judge(Answer { ending, body }, expect, self.limits)
    }
}

/// The `host_command` mode: plan and run the adapter.
fn run_adapter(
    admitted: Admitted,
    args: &DispatchArgs,
    env: &HostEnv,
    interrupts: &Interrupts,
    report: &mut Report,
) -> Result<Ran, DispatchError> {
    let Admitted {
        bridge,
        request,
        sent,
        canonical_tool,
    } = admitted;
    let command = command_of(&bridge)?;
    let request_bytes = request.for_adapter(&sent.tool);
    drop(request);
    let plan = plan::plan(&bridge, command, &sent, request_bytes, args, env)?;
    report.learn_plan(&plan, command.transport);
    let program = command.argv[0].clone();
    let finished = exec::run(plan.spec, interrupts)
        .map_err(|error| DispatchError::Spawn { program, error })?;
    report.record_run(&finished);
    let max_bytes = usize::try_from(args.max_output_bytes).unwrap_or(usize::MAX);
    let result_file = match &plan.files {
        None => None,
        // Only read what an adapter that ran to its end left behind.
        Some(files) if finished.stopped.is_none() => Some(files.read_result(max_bytes)),
        Some(_) => Some(ResultFile::Missing),
    };
    Ok(Ran {
        finished,
        files: plan.files,
        result_file,
        sent,
        canonical_tool,
        limits: Limits {
            timeout_ms: bridge.timeout_ms,
            max_bytes,
        },
    })
}

/// What a finished adapter run left to judge.
struct Ran {
    finished: Finished,
    files: Option<FileTransport>,
    /// The result file's contents (file transport).
    result_file: Option<ResultFile>,
    /// The request as the adapter saw it.
    sent: Echo,
    canonical_tool: String,
    limits: Limits,
}

impl Ran {
    /// Judge the answer (SPEC §4.5), and tell the report what stdout held when it matters.
    fn judge(&self, report: &mut Report) -> Result<ResultEnvelope<'_>, DispatchError> {
        // Over the cap is over the cap, whether the adapter exited before or after the
        // dispatcher noticed (SPEC §4.3).
        let overflowed =
            self.files.is_none() && self.finished.stdout_bytes > self.limits.max_bytes as u64;
        let ending = match (self.finished.stopped, self.finished.termination) {
            (Some(stop), _) => Ending::Stopped(stop),
            (None, _) if overflowed => Ending::Stopped(crate::exec::Stop::OutputCap),
            (None, Termination::Exited(code)) => Ending::Exited(code),
            (None, Termination::Signaled(signal)) => Ending::Signaled(signal),
            (None, Termination::Unreaped | Termination::NotStarted) => Ending::Unobserved,
        };
        let body = match &self.result_file {
            None => Body::Bytes(&self.finished.stdout),
            Some(ResultFile::Read(bytes)) => Body::Bytes(bytes),
            Some(ResultFile::Missing) => Body::Missing,
            Some(ResultFile::TooLarge) => Body::TooLarge,
            Some(ResultFile::NotRegular(kind)) => Body::NotRegular(crate::fs::describe(*kind)),
            Some(ResultFile::Unreadable(kind)) => Body::Unreadable(*kind),
        };
        let expect = Expect {
            sent: &self.sent,
            canonical_tool: &self.canonical_tool,
        };
        judge_answer(
            Answer { ending, body },
            &self.finished.stdout,
            self.files.is_none(),
            expect,
            self.limits,
            report,
        )
    }
}

/// Judge an answer (SPEC §4.5) and keep the start of stdout as a diagnostic when it is not the
/// answer (`stdout_is_the_answer` false: file transport), and when it should have been and was
/// not (the cause is then usually in its first bytes). The live run and `replay` both end
/// here, so a recorded answer is judged and reported exactly like a live one.
pub fn judge_answer<'a>(
    answer: Answer<'a>,
    stdout: &[u8],
    stdout_is_the_answer: bool,
    expect: Expect,
    limits: Limits,
    report: &mut Report,
) -> Result<crate::envelope::result::ResultEnvelope<'a>, DispatchError> {
    let verdict = judge::judge(answer, expect, limits);
    let stdout_unusable = matches!(
        &verdict,
        Err(DispatchError::ResultInvalid { .. } | DispatchError::AdapterExitNonzero { .. })
    );
    if !stdout_is_the_answer || stdout_unusable {
        report.keep_stdout_head(stdout);
    }
    verdict
}

impl Ran {
    /// Remove the file transport's folder, within its budget; say so when something stays.
    fn clean_up(self) {
        if let Some(files) = self.files {
            let folder = files.folder().display().to_string();
            if let Err(err) = files.cleanup(crate::fs::Budget::default()) {
                eprintln!(
                    "warning[file_transport]: the private folder {folder} was not fully removed: \
                     {err}; what is left stays"
                );
            }
        }
    }
}

/// Read the request (file, or stdin for none / `-`), at most cap + 1 bytes, giving up when
/// the dispatcher is interrupted while waiting for a writer that never closes.
fn read_request(args: &DispatchArgs, interrupts: &Interrupts) -> Result<Vec<u8>, DispatchError> {
    let path = args.request.clone().filter(|p| p.as_os_str() != "-");
    if path.is_none() {
        if let Some(hint) = crate::terminal::stdin_hint() {
            eprintln!("{hint}");
        }
    }
    read_interruptibly(path.clone(), args.max_request_bytes, interrupts).map_err(
        |stop| match stop {
            ReadStop::Failed(source) => DispatchError::RequestUnreadable { path, source },
            ReadStop::Interrupted(signal) => DispatchError::Interrupted {
                signal,
                adapter_started: false,
            },
        },
    )
}

/// Why [`read_interruptibly`] returned no bytes.
#[derive(Debug)]
pub enum ReadStop {
    /// The file or stdin could not be read.
    Failed(std::io::Error),
    /// This signal arrived first.
    Interrupted(crate::signal::Signal),
}

/// Read an envelope's bytes (`path`, or stdin for `None`), at most `max_bytes + 1` of them,
/// waiting in `poll(2)` on the input and the signal wake-up together, so that a signal still
/// ends the wait when a writer never closes (the signal handlers keep SIGINT from ending the
/// process). No thread: the input is read only once `poll` says it is readable, so no read
/// blocks. A named file is opened non-blocking, so a FIFO without a writer waits here, in the
/// same `poll`, instead of in `open(2)`; stdin keeps its flags (its file description is the
/// caller's).
pub fn read_interruptibly(
    path: Option<PathBuf>,
    max_bytes: u64,
    interrupts: &Interrupts,
) -> Result<Vec<u8>, ReadStop> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = match path.as_deref().filter(|p| p.as_os_str() != "-") {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(ReadStop::Failed)?,
        ),
        None => None,
    };
    let input = match &opened {
        Some(file) => file.as_fd(),
        None => rustix::stdio::stdin(),
    };
    read_bounded(input, max_bytes.saturating_add(1), interrupts)
}

/// Read `input` to its end or to `limit` bytes, whichever comes first (see
/// [`read_interruptibly`]).
fn read_bounded(
    input: BorrowedFd<'_>,
    limit: u64,
    interrupts: &Interrupts,
) -> Result<Vec<u8>, ReadStop> {
    use rustix::event::{poll, PollFd, PollFlags};
    use rustix::io::Errno;
    const CHUNK: usize = 64 * 1024;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    while bytes.len() < limit {
        let mut fds = vec![PollFd::from_borrowed_fd(input, PollFlags::IN)];
        if let Some(wake) = interrupts.wake_fd() {
            fds.push(PollFd::from_borrowed_fd(wake, PollFlags::IN));
        }
        match poll(&mut fds, None) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(err) => return Err(ReadStop::Failed(err.into())),
        }
        if let Some(signal) = interrupts.received() {
            return Err(ReadStop::Interrupted(signal));
        }
        if fds[0].revents().is_empty() {
            continue;
        }
        let want = CHUNK.min(limit - bytes.len());
        match rustix::io::read(input, &mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(Errno::INTR) | Err(Errno::AGAIN) => {}
            Err(err) => return Err(ReadStop::Failed(err.into())),
        }
    }
    bytes.truncate(limit);
    Ok(bytes)
}

/// The bridge from `--parent-tool-bridge` (or the environment); its unknown-key warnings go to
/// stderr whether or not it is valid.
fn load_bridge(args: &DispatchArgs, report: &mut Report) -> Result<Bridge, DispatchError> {
    let text = args
        .bridge
        .parent_tool_bridge
        .as_deref()
        .unwrap_or_default();
    match Bridge::load(text) {
        Ok(bridge) => {
            report.warn(&bridge.warnings);
            Ok(bridge)
        }
        Err(err) => {
            report.warn(err.warnings());
            Err(DispatchError::BridgeInvalid {
                issues: err.issues().to_vec(),
                human: Some(err.to_string()),
            })
        }
    }
}

fn validate_request(
    parsed: Result<Rc<Document>, JsonIssue>,
    max_request: usize,
) -> Result<Request, DispatchError> {
    match parsed {
        Err(JsonIssue::TooLarge { .. }) => {
            Err(DispatchError::RequestTooLarge { limit: max_request })
        }
        Err(issue) => Err(DispatchError::RequestInvalid {
            issues: vec![Issue::from_json(&issue)],
        }),
        Ok(doc) => {
            Request::from_document(doc).map_err(|issues| DispatchError::RequestInvalid { issues })
        }
    }
}

/// The bridge's command, when its mode is one that runs a command (`host_command`); every
/// other mode is `dispatch_mode_unsupported` here. `replay` asks the same question before it
/// stands a recorded answer in for the adapter's.
pub fn command_of(bridge: &Bridge) -> Result<&CommandSpec, DispatchError> {
    match (bridge.mode, &bridge.command) {
        (Mode::HostCommand, Some(command)) => Ok(command),
        (mode, _) => Err(DispatchError::ModeUnsupported { mode }),
    }
}

/// The transport as `diagnostics.dispatch` names it.
fn transport_of(t: crate::envelope::bridge::Transport) -> Transport {
    match t {
        crate::envelope::bridge::Transport::Stdin => Transport::Stdin,
        crate::envelope::bridge::Transport::File => Transport::File,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fd::AsFd;

    /// A pipe holding `bytes`, its write end closed.
    fn pipe_with(bytes: &[u8]) -> rustix::fd::OwnedFd {
        let (reader, writer) = rustix::pipe::pipe().unwrap();
        rustix::io::write(&writer, bytes).unwrap();
        reader
    }

    #[test]
    fn reading_stops_at_the_limit_or_at_the_end() {
        let reader = pipe_with(&[b'a'; 100]);
        let got = read_bounded(reader.as_fd(), 10, &Interrupts::none()).ok();
        assert_eq!(got, Some(vec![b'a'; 10]));
        let reader = pipe_with(&[b'b'; 100]);
        let got = read_bounded(reader.as_fd(), 1000, &Interrupts::none()).ok();
        assert_eq!(got, Some(vec![b'b'; 100]));
        let reader = pipe_with(b"");
        let got = read_bounded(reader.as_fd(), 1000, &Interrupts::none()).ok();
        assert_eq!(got, Some(Vec::new()));
    }

    #[test]
    fn a_missing_file_is_a_failure_not_a_wait() {
        let got = read_interruptibly(
            Some(PathBuf::from("/nonexistent/request.json")),
            100,
            &Interrupts::none(),
        );
        assert!(
            matches!(got, Err(ReadStop::Failed(e)) if e.kind() == std::io::ErrorKind::NotFound)
        );
    }
}
