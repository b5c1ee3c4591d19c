//! The main job, in the order of SPEC §4.1: read → validate → authorize → obtain an answer
//! (plan and run the adapter, POST to the endpoint, or take a recorded one) → judge → report.
//! Every path after argument parsing ends in exactly one printed envelope.
//!
//! This module only sequences the steps. Each step is a plain function of its own module that
//! takes what it needs and returns `Result<_, DispatchError>`; the sequencer keeps what each
//! returned in [`Learned`] (the request's echo, secrets to scrub, host paths, diagnostics), and
//! the report is built once from that and the [`Outcome`] ([`Report::build`]). It prints
//! nothing itself: [`Report::print`] prints the one envelope. [`main_job`] holds the one panic
//! boundary.

mod error;
mod gate;
mod panics;
mod report;

pub use error::{limit_option, DispatchError};
pub(crate) use report::resources;
pub use report::{Concluded, Learned, Outcome, Replayed, Report};

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
use crate::toolmap::ToolMap;
use crate::transcript::{safe_name, ArtifactDir};
use crate::validate::Issue;
pub use panics::panic_point;
use panics::PanicNote;
pub use panics::PanicPoint;
use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;

/// A usage error: no envelope, a message on stderr, exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// How far a main job got: what a panic becomes depends on it alone.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// Reading, admitting, obtaining, judging.
    Steps,
    /// Building and printing the report.
    Concluding,
    /// The envelope is out, with this exit status; the file transport's folder is removed.
    CleaningUp(u8),
}

/// Run the main job; print the envelope; return the exit status.
///
/// The one panic boundary: a panic is caught here and what it becomes depends on the
/// [`Stage`] the job reached. In a step — reading, admitting, running the adapter (whose
/// process group `exec`'s guard kills and sweeps while unwinding), judging — it is a failure
/// like any other: the report is built from what was learned with an `internal_error` outcome
/// (transcript included). While concluding, before the envelope's first byte: the last-resort
/// envelope ([`last_resort`]); after it, only the stderr line and exit 70, since no second
/// envelope may follow a cut one. While cleaning up: a warning, and the envelope's exit status.
/// Every panic is reported once, on an `error[internal_error]` line saying where it panicked.
pub fn main_job(args: &DispatchArgs, interrupts: &Interrupts) -> u8 {
    let env = HostEnv::process();
    panic_point::arm(&env);
    let usage = match check_usage(args, &env) {
        Ok(usage) => usage,
        Err(UsageError(message)) => {
            // Like clap's own usage errors: a pointer to the help (also for no arguments at
            // all, which is this error).
            stderr_line!("error[usage]: {message}\n\nFor more information, try '--help'.");
            return crate::error::exit::USAGE;
        }
    };
    // Checked by `check_usage` already.
    let ledger = gate::options(&args.ledger).ok().flatten();
    let panics = PanicNote::install();
    let mut learned = Learned::new(args, &env);
    // What was obtained outlives a panic in judging: it is cleaned up after the envelope.
    let mut obtained = None;
    // The ledger's part of the job, recorded after the report is built.
    let mut gated = None;
    let stage = Cell::new(Stage::Steps);
    let wrote = Cell::new(false);
    let mut failure = None;
    loop {
        let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let outcome = match failure.take() {
                None => steps(
                    args,
                    &env,
                    &usage,
                    interrupts,
                    &mut learned,
                    (ledger.as_ref(), &mut gated),
                    &mut obtained,
                )
                .unwrap_or_else(Outcome::from),
                Some(err) => Outcome::from(err),
            };
            stage.set(Stage::Concluding);
            panic_point::reach(PanicPoint::Concluding);
            let mut report = Report::build(args, &learned, outcome);
            // Durable before a byte is printed (SPEC §14.1).
            if let Some(gated) = gated.as_mut() {
                gate::conclude(gated, &mut report, &learned);
            }
            if learned.ledger.is_some() {
                report.write_pending(args);
            }
            let exit = report.print(&wrote);
            // Only now: the cleanup is bounded, but nothing may delay the envelope.
            stage.set(Stage::CleaningUp(exit));
            if let Some(obtained) = obtained.take() {
                obtained.clean_up();
            }
            // Last: the ledger file is made to stand alone (SPEC §14.4).
            if let Some(gated) = gated.as_mut() {
                gate::checkpoint(gated);
            }
            exit
        }));
        let reached = match attempt {
            Ok(exit) => return exit,
            Err(_) => stage.get(),
        };
        match reached {
            Stage::Steps => failure = Some(panics.error()),
            Stage::Concluding => {
                let failed = last_resort(
                    &learned.echo,
                    &learned.redactor,
                    &panics.error(),
                    args.pretty,
                );
                // Nothing on stdout yet: the last resort is the one envelope.
                if !wrote.get() {
                    return failed.print();
                }
                // stdout is cut short and no second envelope may follow it; stderr and the
                // exit status still say what happened.
                for line in &failed.stderr {
                    stderr_line!("{line}");
                }
                return failed.exit;
            }
            Stage::CleaningUp(exit) => {
                stderr_line!(
                    "warning[internal_error]: cleaning up after the run: {}",
                    panics.take()
                );
                return exit;
            }
        }
    }
}

/// What the main job's options say once checked.
pub struct Usage {
    /// The tool map in force.
    pub tool_map: ToolMap,
    /// The confinement asked for (SPEC §13; nothing when no option is given).
    pub confine: crate::confine::Options,
    /// `--session`: the host's session, which the request's must be (SPEC §14.4).
    pub session: Option<String>,
}

/// The usage errors of the main job's options (exit 2, no envelope): no bridge at all, a
/// `--tool-map` that cannot be used, a confinement option (or its `PARENT_TOOL_DISPATCH_*`
/// variable in `env`) that does not parse, names no existing path, or grants what confines
/// nothing (`/`, the ledger's folder).
pub fn check_usage(args: &DispatchArgs, env: &HostEnv) -> Result<Usage, UsageError> {
    if args.bridge.parent_tool_bridge.is_none() {
        return Err(UsageError(format!(
            "no bridge: pass --parent-tool-bridge '<json>|@FILE' or set {}",
            crate::cli::BRIDGE_ENV
        )));
    }
    gate::options(&args.ledger)?;
    let tool_map = match &args.tool_map {
        // The error's own message already names its cause (and the file): printed once.
        Some(arg) => ToolMap::parse(arg)
            .map_err(|err| UsageError(format!("the --tool-map value cannot be used: {err}")))?,
        None => ToolMap::Identity,
    };
    let ledger = args.ledger.ledger.as_deref();
    let confine = confine_options(&args.run.confine, env, ledger).map_err(UsageError)?;
    let session = gate::session(&args.ledger)?;
    Ok(Usage {
        tool_map,
        confine,
        session,
    })
}

/// The confinement options of a command line, each flag falling back to its variable in
/// `env` (SPEC §13), checked; the error names the option (a usage error, exit 2). With the
/// `ledger` the dispatcher keeps, a `--fs-*` path that holds its folder or lies in it is
/// refused too (SPEC §13.2).
pub fn confine_options(
    args: &crate::cli::ConfineArgs,
    env: &HostEnv,
    ledger: Option<&std::path::Path>,
) -> Result<crate::confine::Options, String> {
    use crate::confine::{Options, RawOptions};
    let raw = RawOptions::from_args(args).or_env(RawOptions::from_env(|name| env.var_os(name)));
    Options::parse_beside_ledger(&raw, ledger).map_err(|err| err.to_string())
}

/// The live main job's steps, up to the judged answer (which borrows from what `obtained`
/// keeps). The ledger step of SPEC §14 goes between `admit` and `obtain`: it records
/// `diagnostics.ledger` in `learned`, leaves what is to be recorded in the gate, and may
/// answer at once — a recorded envelope to print again, or a refusal — so that nothing runs.
fn steps<'o>(
    args: &DispatchArgs,
    env: &HostEnv,
    usage: &Usage,
    interrupts: &Interrupts,
    learned: &mut Learned,
    (ledger, gated): (Option<&gate::Options>, &mut Option<gate::Gate>),
    obtained: &'o mut Option<Obtained>,
) -> Result<Outcome<'o>, DispatchError> {
    let bytes = read_request(args, interrupts)?;
    let admitted = admit(args, env, usage, bytes, learned);
    let admitted = match gate::gate(ledger, interrupts, admitted, learned, gated)? {
        gate::Gated::Run(admitted) => *admitted,
        gate::Gated::Replay(recorded) => {
            let obtained = obtained.insert(Obtained::Replayed(recorded));
            return Ok(obtained.judge());
        }
    };
    let run = Obtain {
        args,
        env,
        confine: &usage.confine,
        interrupts,
    };
    let started = std::time::Instant::now();
    let answer = obtain(admitted, &run, learned);
    if let Some(gated) = gated.as_mut() {
        gated.ran(started.elapsed());
    }
    let obtained = obtained.insert(answer?);
    panic_point::reach(PanicPoint::Judging);
    Ok(obtained.judge())
}

/// What a recorded adapter did (`replay`): what it wrote and how it exited.
#[derive(Debug, Clone, Copy)]
pub struct Recorded<'r> {
    pub stdout: &'r [u8],
    pub exit_code: i32,
    pub stderr: &'r [u8],
}

/// The main job for `request` answered by a recorded adapter, in this process, with no
/// process started and nothing printed: the same admission, judge and report as a live run.
/// `Err` is what the main job would refuse as a usage error (exit 2, no envelope).
pub fn conclude_recorded(
    args: &DispatchArgs,
    env: &HostEnv,
    request: Vec<u8>,
    recorded: Recorded<'_>,
) -> Result<Concluded, UsageError> {
    let usage = check_usage(args, env)?;
    let mut learned = Learned::new(args, env);
    let outcome = replay_recorded(args, env, &usage, request, recorded, &mut learned)
        .unwrap_or_else(Outcome::from);
    Ok(Report::build(args, &learned, outcome).into_concluded())
}

/// [`conclude_recorded`]'s steps: admit, then judge the recorded answer in place of a run.
fn replay_recorded<'r>(
    args: &DispatchArgs,
    env: &HostEnv,
    usage: &Usage,
    request: Vec<u8>,
    recorded: Recorded<'r>,
    learned: &mut Learned,
) -> Result<Outcome<'r>, DispatchError> {
    let admitted = admit(args, env, usage, request, learned)?;
    command_of(&admitted.bridge)?;
    learned.dispatch.transport = Some(Transport::Replay);
    learned.dispatch.run = Some(report::replayed_diagnostics(
        recorded.exit_code,
        recorded.stdout.len() as u64,
        recorded.stderr,
        &learned.redactor,
    ));
    let limits = admitted.expected.limits;
    // A live adapter writing past the cap is stopped there: replay that, not a longer read.
    let ending = if recorded.stdout.len() > limits.max_bytes {
        Ending::Stopped(exec::Stop::OutputCap)
    } else {
        Ending::Exited(recorded.exit_code)
    };
    let answer = Answer {
        ending,
        body: Body::Bytes(recorded.stdout),
    };
    let expect = admitted.expected.expect();
    Ok(judge_answer(answer, recorded.stdout, true, expect, limits))
}

/// The envelope of a failure when building or printing the report itself panicked: no transcript and no
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

/// A request that passed every check before anything runs (SPEC §4.1 steps 1–3).
pub struct Admitted {
    pub bridge: Bridge,
    pub request: Request,
    /// What its answer must echo, and the bounds it is judged by.
    pub expected: Expected,
}

/// What an answer to an admitted request is judged against.
pub struct Expected {
    /// The request as the adapter (or endpoint) sees it: the tool id mapped (§4.4).
    pub sent: Echo,
    /// The tool id as requested, which the printed envelope carries.
    pub canonical_tool: String,
    /// The bridge's deadline and `--max-output-bytes`.
    pub limits: Limits,
}

impl Expected {
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
/// What each step returns that the report needs goes into `learned` as it returns.
fn admit(
    args: &DispatchArgs,
    env: &HostEnv,
    usage: &Usage,
    bytes: Vec<u8>,
    learned: &mut Learned,
) -> Result<Admitted, DispatchError> {
    if args.artifact_dir.is_some() {
        learned.fallback_name = Some(safe_name(None, &bytes));
    }
    let max_request = usize::try_from(args.run.max_request_bytes).unwrap_or(usize::MAX);
    let parsed = Document::parse(bytes, max_request).map(Rc::new);
    if let Ok(doc) = &parsed {
        learned.parsed(Rc::clone(doc));
    }
    learned.artifacts = prepare_artifacts(args)?;
    let (warnings, bridge) = load_bridge(args);
    learned
        .warnings
        .extend(warnings.iter().map(crate::terminal::warning_line));
    let bridge = bridge?;
    learned.bridge(&bridge, env);
    let bridge_ref = bridge.bridge_ref();
    learned.bridge_ref = Some(bridge_ref.clone());
    let request = validate_request(parsed, max_request)?;
    authorize(&bridge, &request, &bridge_ref).map_err(|denial| DispatchError::Denied {
        denial,
        tool: request.echo.tool.clone(),
        status: bridge.failure_status,
    })?;
    // The host's session, not the sandbox's word (SPEC §14.4).
    if let Some(session) = &usage.session {
        if request.session_id() != *session {
            return Err(DispatchError::SessionMismatch);
        }
    }
    let canonical_tool = request.echo.tool.clone();
    let sent = Echo {
        tool: usage.tool_map.external(&canonical_tool),
        ..request.echo.clone()
    };
    let limits = Limits {
        timeout_ms: bridge.timeout_ms,
        max_bytes: usize::try_from(args.run.max_output_bytes).unwrap_or(usize::MAX),
    };
    Ok(Admitted {
        bridge,
        request,
        expected: Expected {
            sent,
            canonical_tool,
            limits,
        },
    })
}

/// Check the transcript folder before anything can run (SPEC §5).
fn prepare_artifacts(args: &DispatchArgs) -> Result<Option<ArtifactDir>, DispatchError> {
    let Some(dir) = &args.artifact_dir else {
        return Ok(None);
    };
    ArtifactDir::prepare(dir)
        .map(Some)
        .map_err(|source| DispatchError::ArtifactDir {
            dir: dir.clone(),
            source,
        })
}

/// What obtaining an answer needs besides the admitted request.
struct Obtain<'a> {
    args: &'a DispatchArgs,
    env: &'a HostEnv,
    confine: &'a crate::confine::Options,
    interrupts: &'a Interrupts,
}

/// Steps 4–5 up to the answer, by the bridge's mode: run the adapter (`host_command`), or
/// POST to the endpoint (`host_endpoint`). Both get the request re-serialized with the tool
/// id mapped (§4.2, §4.4).
fn obtain(
    admitted: Admitted,
    run: &Obtain<'_>,
    learned: &mut Learned,
) -> Result<Obtained, DispatchError> {
    let Obtain {
        args,
        env,
        interrupts,
        ..
    } = *run;
    let Admitted {
        bridge,
        request,
        expected,
    } = admitted;
    let body = request.for_adapter(&expected.sent.tool);
    drop(request);
    match bridge.mode {
        Mode::HostCommand => run_adapter(&bridge, body, expected, run, learned)
            .map(|ran| Obtained::Ran(Box::new(ran))),
        Mode::HostEndpoint => {
            call_endpoint(&bridge, body, expected, args, env, interrupts, learned)
                .map(Obtained::Answered)
        }
    }
}

/// What came back, to judge.
enum Obtained {
    Ran(Box<Ran>),
    Answered(Answered),
    /// The ledger's recorded envelope (SPEC §14.1): printed again, not judged again.
    Replayed(crate::ledger::Recorded),
}

impl Obtained {
    fn judge(&self) -> Outcome<'_> {
        match self {
            Obtained::Ran(ran) => ran.judge(),
            Obtained::Answered(answered) => answered.judge(),
            Obtained::Replayed(recorded) => {
                match ResultEnvelope::check(&recorded.envelope, None) {
                    Ok(envelope) => Outcome {
                        verdict: Ok(envelope),
                        stdout_kept: None,
                        replayed: Some(Replayed {
                            text: &recorded.envelope,
                            exit: recorded.exit_status,
                        }),
                    },
                    // Only the dispatcher writes the ledger: a recorded envelope that is no
                    // envelope is damage.
                    Err(issues) => Outcome::from(DispatchError::LedgerUnavailable(
                        crate::ledger::LedgerError::Corrupt(format!(
                            "the recorded envelope is not valid: {}",
                            crate::validate::summary(&issues)
                        )),
                    )),
                }
            }
        }
    }

    fn clean_up(self) {
        match self {
            Obtained::Ran(ran) => ran.clean_up(),
            Obtained::Answered(_) | Obtained::Replayed(_) => {}
        }
    }
}

/// The `host_endpoint` mode (SPEC §11): check the endpoint as configured on the host, POST
/// the request, and keep the complete answer for the judge.
fn call_endpoint(
    bridge: &Bridge,
    body: Vec<u8>,
    expected: Expected,
    args: &DispatchArgs,
    env: &HostEnv,
    interrupts: &Interrupts,
    learned: &mut Learned,
) -> Result<Answered, DispatchError> {
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
    // The URL is a secret when it carries more than its origin (a path or query may hold a
    // credential); only the origin is shown.
    for part in target.secret_parts() {
        learned.redactor.add_secret(&part);
    }
    learned.dispatch.transport = Some(Transport::Http);
    learned.dispatch.endpoint = Some(target.origin().to_string());
    let limits = expected.limits;
    let endpoint_limits = endpoint::Limits {
        timeout_ms: limits.timeout_ms,
        max_bytes: limits.max_bytes,
    };
    let request_id = &expected.sent.request_id;
    let Exchanged {
        outcome,
        http_status,
        response_bytes,
    } = endpoint::exchange(&target, body, request_id, endpoint_limits, interrupts);
    // What the exchange observed, also when it ended early.
    learned.dispatch.http_status = http_status;
    learned.dispatch.response_bytes = Some(response_bytes);
    let response = outcome.map_err(|failure| match failure {
        Failure::Timeout => DispatchError::EndpointTimeout {
            timeout_ms: limits.timeout_ms,
        },
        Failure::Interrupted(signal) => DispatchError::EndpointInterrupted { signal },
        Failure::TooLarge => DispatchError::EndpointTooLarge {
            max_bytes: limits.max_bytes,
        },
        Failure::Unreachable(cause) => DispatchError::EndpointUnreachable {
            origin: target.origin().to_string(),
            cause,
        },
        Failure::Unconfigured(why) => DispatchError::EndpointUnconfigured(why),
        Failure::Internal(what) => DispatchError::Internal(what),
    })?;
    Ok(Answered { response, expected })
}

/// A complete answer of the endpoint.
struct Answered {
    response: endpoint::Response,
    expected: Expected,
}

impl Answered {
    /// Judge the body like an adapter's stdout, the HTTP status playing the exit status.
    fn judge(&self) -> Outcome<'_> {
        let status = self.response.status;
        let ending = if (200..300).contains(&status) {
            Ending::Exited(0)
        } else {
            Ending::HttpStatus(status)
        };
        let body = Body::Bytes(&self.response.body);
        let expected = &self.expected;
        Outcome {
            verdict: judge::judge(Answer { ending, body }, expected.expect(), expected.limits),
            stdout_kept: None,
            replayed: None,
        }
    }
}

/// The `host_command` mode: plan and run the adapter. Confinement (SPEC §13) plugs in between
/// the plan and the run: [`confine_step`] prepares it (failing closed), the sequencer records
/// `diagnostics.dispatch.confinement` and its paths in `learned`, and the plan's spec goes to
/// `exec` with it.
fn run_adapter(
    bridge: &Bridge,
    body: Vec<u8>,
    expected: Expected,
    run: &Obtain<'_>,
    learned: &mut Learned,
) -> Result<Ran, DispatchError> {
    let command = command_of(bridge)?;
    let mut plan = plan::plan(bridge, command, &expected.sent, body, run.args, run.env)?;
    for path in &plan.host_paths {
        learned.redactor.add_host_path(&path.to_string_lossy());
    }
    learned.dispatch.transport = Some(transport_of(command.transport));
    let program = command.argv[0].clone();
    let transport_dir = plan.files.as_ref().map(|f| f.folder().to_path_buf());
    // The listed paths are host paths whether or not the confinement can be put in place.
    for path in run.confine.fs_read.iter().chain(&run.confine.fs_write) {
        learned.redactor.add_host_path(&path.to_string_lossy());
    }
    let confinement = confine_step(
        &mut plan.spec,
        run.confine,
        transport_dir.as_deref(),
        &program,
    )?;
    if let Some(prepared) = &confinement {
        for path in confinement_paths(run.confine, prepared) {
            learned.redactor.add_host_path(&path.to_string_lossy());
        }
        learned.dispatch.confinement = Some(report::confinement_diagnostics(run.confine, prepared));
    }
    let mut spec = plan.spec;
    if run.args.messages.verbose {
        let live = report::LiveStderr::new(&learned.redactor);
        spec.stderr_tap = Some(exec::Tap(std::rc::Rc::new(live)));
    }
    // The answer on stdout is read while it arrives; a result file is read after the run.
    let prescan = plan
        .files
        .is_none()
        .then(std::rc::Rc::<Prescanning>::default);
    spec.stdout_watch = prescan.clone().map(|p| exec::Viewer(p));
    let (path_var, cwd) = (exec::path_var(&spec.env).cloned(), spec.cwd.clone());
    let program_path = spec.program.clone();
    let finished = exec::run(spec, run.interrupts).map_err(|error| match error {
        exec::SpawnError::Confinement(refused) => {
            // Nothing was in force: the child gave up before the adapter ran.
            learned.dispatch.confinement = None;
            DispatchError::from(refused)
        }
        error => DispatchError::Spawn { program, error },
    })?;
    if matches!(finished.termination, Termination::Exited(126 | 127)) {
        // `env` (or a shell) could not run what a CRLF `#!` line names: say why.
        let path_var = path_var.as_deref().map(std::ffi::OsStr::new);
        if let Some(why) = exec::crlf_shebang(&program_path, path_var, cwd.as_deref()) {
            learned.notes.push(crate::terminal::note_line(&format!(
                "the adapter program {}: {}",
                command.argv[0],
                why.describe(false)
            )));
        }
    }
    learned.dispatch.adapter_started = finished.termination != Termination::NotStarted;
    learned.dispatch.run = Some(report::run_diagnostics(&finished, &learned.redactor));
    let result_file = match &plan.files {
        None => None,
        // Only read what an adapter that ran to its end left behind.
        Some(files) if finished.stopped.is_none() => {
            Some(files.read_result(expected.limits.max_bytes))
        }
        Some(_) => Some(ResultFile::Missing),
    };
    Ok(Ran {
        finished,
        files: plan.files,
        result_file,
        prescan: prescan.map(|p| p.0.take()),
        expected,
        confinement,
    })
}

/// The judge's prescan of the adapter's stdout, fed by the supervisor as stdout grows.
#[derive(Default)]
struct Prescanning(std::cell::RefCell<crate::json::Prescan>);

impl exec::StdoutWatch for Prescanning {
    fn grew(&self, kept: &[u8]) {
        self.0.borrow_mut().advance(kept);
    }
}

/// The confinement step (SPEC §13), between the plan and the run: prepare what `options` ask
/// for the spec's program, or fail closed before anything starts. `Ok(None)`: nothing asked.
pub fn confine_step(
    spec: &mut exec::Spec,
    options: &crate::confine::Options,
    transport_dir: Option<&std::path::Path>,
    program: &str,
) -> Result<Option<std::sync::Arc<crate::confine::Prepared>>, DispatchError> {
    spec.confine(options, transport_dir)
        .map_err(|refused| match refused {
            exec::Unconfinable::Spawn(error) => DispatchError::Spawn {
                program: program.to_string(),
                error,
            },
            exec::Unconfinable::Unavailable(unavailable) => DispatchError::from(unavailable),
        })
}

/// The host paths a confined run reveals (SPEC §13: they join §5's host paths): the listed
/// `--fs-*` paths and the private `TMPDIR`.
pub fn confinement_paths(
    options: &crate::confine::Options,
    prepared: &crate::confine::Prepared,
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = options
        .fs_read
        .iter()
        .chain(&options.fs_write)
        .cloned()
        .collect();
    paths.extend(prepared.tmpdir().map(std::path::Path::to_path_buf));
    paths
}

/// What a finished adapter run left to judge.
struct Ran {
    finished: Finished,
    files: Option<FileTransport>,
    /// The result file's contents (file transport).
    result_file: Option<ResultFile>,
    /// What was read of stdout while it arrived (`None` with a result file).
    prescan: Option<crate::json::Prescan>,
    expected: Expected,
    /// The run's confinement: its counters name a limit that was hit. Dropped after the
    /// envelope (its private `TMPDIR` and cgroup go with it).
    confinement: Option<std::sync::Arc<crate::confine::Prepared>>,
}

impl Ran {
    /// Judge the answer (SPEC §4.5).
    fn judge(&self) -> Outcome<'_> {
        let limits = self.expected.limits;
        // Over the cap is over the cap, whether the adapter exited before or after the
        // dispatcher noticed (SPEC §4.3).
        let overflowed =
            self.files.is_none() && self.finished.stdout_bytes > limits.max_bytes as u64;
        let ending = match (self.finished.stopped, self.finished.termination) {
            (Some(stop), _) => Ending::Stopped(stop),
            (None, _) if overflowed => Ending::Stopped(crate::exec::Stop::OutputCap),
            (None, Termination::Exited(code)) => Ending::Exited(code),
            (None, Termination::Signaled(signal)) => Ending::Signaled(signal),
            (None, Termination::Unreaped | Termination::NotStarted) => Ending::Unobserved,
        };
        let body = match (&self.result_file, &self.prescan) {
            (None, Some(prescan)) => Body::Prescanned(&self.finished.stdout, prescan),
            (None, None) => Body::Bytes(&self.finished.stdout),
            (Some(file), _) => match file {
                ResultFile::Read(bytes) => Body::Bytes(bytes),
                ResultFile::Missing => Body::Missing,
                ResultFile::TooLarge => Body::TooLarge,
                ResultFile::NotRegular(kind) => Body::NotRegular(crate::fs::describe(*kind)),
                ResultFile::Unreadable(kind) => Body::Unreadable(*kind),
            },
        };
        let outcome = judge_answer(
            Answer { ending, body },
            &self.finished.stdout,
            self.files.is_none(),
            self.expected.expect(),
            limits,
        );
        Outcome {
            verdict: outcome.verdict.map_err(|err| self.limit_hit(err)),
            stdout_kept: outcome.stdout_kept,
            replayed: None,
        }
    }

    /// A failure of the adapter's own without a valid failure envelope becomes
    /// `resource_limit_exceeded` when a limit's own counter shows the limit was reached
    /// (SPEC §13); the dispatcher's own stops (timeout, output cap, signal) stay what they are.
    fn limit_hit(&self, err: DispatchError) -> DispatchError {
        let adapters_own = matches!(
            err,
            DispatchError::AdapterSignaled { .. }
                | DispatchError::AdapterExitNonzero { .. }
                | DispatchError::ResultInvalid { .. }
                | DispatchError::ResultFileUnusable(_)
        );
        let signal = match self.finished.termination {
            Termination::Signaled(signal) => Some(signal.raw()),
            _ => None,
        };
        match self.confinement.as_ref().filter(|_| adapters_own) {
            Some(prepared) => match prepared.limit_hit(signal) {
                Some(limit) => DispatchError::ResourceLimitExceeded {
                    limit,
                    cause: Box::new(err),
                },
                None => err,
            },
            None => err,
        }
    }

    /// Remove the file transport's folder, within its budget; say so when something stays.
    fn clean_up(self) {
        if let Some(files) = self.files {
            let folder = files.folder().display().to_string();
            if let Err(err) = files.cleanup(crate::fs::Budget::default()) {
                stderr_line!(
                    "warning[file_transport]: the private folder {folder} was not fully removed: \
                     {err}; what is left stays"
                );
            }
        }
    }
}

/// Judge an answer (SPEC §4.5), keeping the start of stdout as a diagnostic when it is not the
/// answer (`stdout_is_the_answer` false: file transport), and when it should have been and was
/// not (the cause is then usually in its first bytes). The live run and `replay` both end
/// here, so a recorded answer is judged and reported exactly like a live one.
pub fn judge_answer<'a>(
    answer: Answer<'a>,
    stdout: &'a [u8],
    stdout_is_the_answer: bool,
    expect: Expect,
    limits: Limits,
) -> Outcome<'a> {
    let verdict = judge::judge(answer, expect, limits);
    let stdout_unusable = matches!(
        &verdict,
        Err(DispatchError::ResultInvalid { .. } | DispatchError::AdapterExitNonzero { .. })
    );
    let keep = !stdout_is_the_answer || stdout_unusable;
    Outcome {
        verdict,
        stdout_kept: keep.then_some(stdout),
        replayed: None,
    }
}

/// Read the request (file, or stdin for none / `-`), at most cap + 1 bytes, giving up when
/// the dispatcher is interrupted while waiting for a writer that never closes.
fn read_request(args: &DispatchArgs, interrupts: &Interrupts) -> Result<Vec<u8>, DispatchError> {
    let path = args.request.clone().filter(|p| p.as_os_str() != "-");
    if path.is_none() && !args.messages.quiet {
        if let Some(hint) = crate::terminal::stdin_hint() {
            stderr_line!("{hint}");
        }
    }
    read_interruptibly(path.clone(), args.run.max_request_bytes, interrupts).map_err(|stop| {
        match stop {
            ReadStop::Failed(source) => DispatchError::RequestUnreadable { path, source },
            ReadStop::Interrupted(signal) => DispatchError::Interrupted {
                signal,
                adapter_started: false,
            },
        }
    })
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
/// with the one reader's stream mode ([`crate::fs::read_stream`]): a FIFO or a writer that
/// never closes waits in `poll(2)` together with the signal wake-up, never in `open(2)`.
pub fn read_interruptibly(
    path: Option<PathBuf>,
    max_bytes: u64,
    interrupts: &Interrupts,
) -> Result<Vec<u8>, ReadStop> {
    let path = path.filter(|p| p.as_os_str() != "-");
    crate::fs::read_stream(path.as_deref(), max_bytes.saturating_add(1), interrupts).map_err(
        |err| match err {
            crate::fs::ReadError::Interrupted(signal) => ReadStop::Interrupted(signal),
            other => ReadStop::Failed(other.into()),
        },
    )
}

/// The bridge from `--parent-tool-bridge` (or the environment), and its unknown-key warnings,
/// which go to stderr whether or not it is valid.
fn load_bridge(args: &DispatchArgs) -> (Vec<Issue>, Result<Bridge, DispatchError>) {
    let text = args
        .bridge
        .parent_tool_bridge
        .as_deref()
        .unwrap_or_default();
    match Bridge::load(text) {
        Ok(bridge) => (bridge.warnings.clone(), Ok(bridge)),
        Err(err) => (
            err.warnings().to_vec(),
            Err(DispatchError::BridgeInvalid {
                issues: err.issues().to_vec(),
                human: Some(err.to_string()),
            }),
        ),
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
