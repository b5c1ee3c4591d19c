//! The main job, in the order of SPEC §4.1: read → validate → authorize → obtain an answer
//! (plan and run the adapter, POST to the endpoint, or take a recorded one) → judge → report.
//! Every path after argument parsing ends in exactly one printed envelope.
//!
//! This module only sequences the steps. Each step is a plain function of its own module that
//! takes what it needs and returns `Result<_, DispatchError>`; the sequencer keeps what each
//! returned in [`Learned`] (the request's echo, secrets to scrub, host paths, diagnostics, the
//! ledger's gate), and the report is built once from that and the [`Outcome`]
//! ([`Report::build`]). It prints nothing itself: [`Report::print`] prints the one envelope.
//! [`main_job`] runs two phases — the steps, then concluding — and holds the one panic
//! boundary.

mod deadline;
pub(crate) mod egress;
pub(crate) mod explain;
pub(crate) mod gate;
mod heartbeat;
mod host_endpoint;
mod notify;
mod panics;
pub(crate) mod policy;
mod read;
mod report;
mod run;
mod trace;

pub use crate::settings::CallSettings;
pub use deadline::Deadline;
pub(crate) use gate::{id_digest, options as ledger_options};
use host_endpoint::{call_endpoint, Answered};
pub use ptd_verdict::DispatchError;
use read::{load_bridge, validate_request};
pub(crate) use read::{read_interruptibly, read_request, ReadStop};
pub(crate) use report::resources;
pub use report::{Concluded, Learned, Outcome, Replayed, Report};
pub use run::command_of;
pub(crate) use run::{confine_step, confinement_paths};
use run::{run_adapter, Ran};

use crate::cli::DispatchArgs;
pub use panics::last_resort;
use panics::PanicNote;
use ptd_sys::exec;
pub use ptd_sys::fault::panic_point;
pub use ptd_sys::fault::PanicPoint;
use ptd_sys::hostenv::HostEnv;
use ptd_sys::interrupt::Interrupts;
use ptd_verdict::judge::{self, Answer, Body, Ending, Limits};
use ptd_wire::authorize::authorize;
use ptd_wire::envelope::bridge::{Bridge, Mode};
use ptd_wire::envelope::request::{Echo, Request};
use ptd_wire::envelope::result::{Expect, ResultEnvelope, Transport};
use ptd_wire::json::Document;
use ptd_wire::toolmap::ToolMap;
use ptd_wire::transcript::{safe_name, ArtifactDir};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// A usage error: no envelope, a message on stderr, exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Run the main job; print the envelope; return the exit status.
///
/// Two phases, in this order, and the one panic boundary: each phase runs under
/// [`PanicNote::catch`], and what a panic becomes depends on the phase alone.
///
/// 1. **The steps** ([`steps`], then judging what was obtained): a panic — reading,
///    admitting, running the adapter (whose process group `exec`'s guard kills and sweeps
///    while unwinding), judging — is a failure like any other, an `internal_error` outcome
///    concluded from what was learned (transcript included).
/// 2. **Concluding** ([`conclude`]: the report built once, recorded, printed): a panic
///    before the envelope's first byte prints the last-resort envelope ([`last_resort`]);
///    after it, only the stderr line and exit 70, since no second envelope may follow a cut
///    one. Then, after the envelope, the cleanup: a panic there is a warning, and the
///    envelope's exit status stands.
///
/// Every panic is reported once, on an `error[internal_error]` line saying where it panicked.
pub(crate) fn main_job(args: &DispatchArgs, interrupts: &Interrupts) -> u8 {
    let env = HostEnv::process();
    panic_point::arm(&env);
    let usage = match check_usage(args, &env) {
        Ok(usage) => usage,
        Err(UsageError(message)) => {
            // Like clap's own usage errors: a pointer to the help (also for no arguments at
            // all, which is this error).
            stderr_line!("error[usage]: {message}\n\nFor more information, try '--help'.");
            return ptd_wire::error::exit::USAGE;
        }
    };
    let job = Job {
        args,
        env: &env,
        usage: &usage,
        interrupts,
    };
    let panics = PanicNote::install();
    let mut learned = Learned::new(args, &env);
    learned.policy(&usage, &env);
    learned.trace = trace::start(&env);
    learned.dispatch.trace_id = learned.trace.as_ref().map(|t| t.context().trace_id_hex());
    // Phase 1: the steps, then the judge. What was obtained outlives a panic in judging: it
    // is cleaned up after the envelope.
    let stepped = panics.catch(|| steps(&job, &mut learned)).and_then(|s| s);
    let mut obtained = None;
    let outcome = match stepped {
        Ok(answer) => {
            let since = learned.clock();
            let answer = &*obtained.insert(answer);
            let outcome = panics
                .catch(|| answer.judge())
                .unwrap_or_else(Outcome::from);
            learned.traced("judge", since);
            outcome
        }
        Err(err) => Outcome::from(err),
    };
    // Phase 2: the report, built once, recorded, printed; then the cleanup.
    let mut gate = learned.gate.take();
    let wrote = Cell::new(false);
    let replayed = outcome.replayed.is_some();
    let concluded = panics.catch(|| conclude(args, &learned, gate.as_mut(), outcome, &wrote));
    let (exit, ended) = match concluded {
        Ok(concluded) => concluded,
        Err(err) => {
            let failed = last_resort(&learned.echo, &learned.redactor, &err, args.pretty);
            let ended = learned.trace.as_ref().map(|_| trace::Ended {
                status: failed.status,
                code: Some(err.code().as_str().to_string()),
                exit: failed.exit,
                replayed,
                at: std::time::SystemTime::now(),
            });
            // Nothing on stdout yet: the last resort is the one envelope.
            let exit = if wrote.get() {
                // stdout is cut short and no second envelope may follow it; stderr and the
                // exit status still say what happened.
                for line in &failed.stderr {
                    stderr_line!("{line}");
                }
                failed.exit
            } else {
                failed.print()
            };
            export_spans(&panics, &learned, ended, &env);
            return exit;
        }
    };
    let told = Tell {
        env: &env,
        redactor: &learned.redactor,
        interrupts,
    };
    let cleaned = panics.catch(|| clean_up(obtained, gate, &told));
    if let Err(DispatchError::Panicked { what }) = cleaned {
        stderr_line!("warning[internal_error]: cleaning up after the run: {what}");
    }
    let ended = ended.map(|mut ended| {
        ended.replayed = replayed;
        ended
    });
    export_spans(&panics, &learned, ended, &env);
    exit
}

/// After the envelope and the cleanup, with telemetry on: the call's spans exported
/// (SPEC §20). Nothing here changes the exit status; a panic is a warning.
fn export_spans(panics: &PanicNote, learned: &Learned, ended: Option<trace::Ended>, env: &HostEnv) {
    let Some(ended) = ended else {
        return;
    };
    if let Err(DispatchError::Panicked { what }) =
        panics.catch(|| trace::export(learned, &ended, env))
    {
        stderr_line!("warning[internal_error]: exporting the call's spans: {what}");
    }
}

/// Concluding a main job that ended in `outcome`: the report is built once, recorded in the
/// ledger when there is one (durable before a byte is printed, SPEC §14.1), written to
/// `--result-file`, and printed. Returns the exit status.
fn conclude(
    args: &DispatchArgs,
    learned: &Learned,
    gate: Option<&mut gate::Gate>,
    outcome: Outcome<'_>,
    wrote: &Cell<bool>,
) -> (u8, Option<trace::Ended>) {
    panic_point::reach(PanicPoint::Concluding);
    let mut report = Report::build(args, learned, outcome);
    if let Some(gate) = gate {
        gate::conclude(gate, &mut report, learned);
    }
    // With a ledger, the result file holds only what the ledger knows.
    if learned.ledger.is_some() {
        report.write_pending(args);
    }
    // With telemetry on, how the call ended, for its span (SPEC §20); nothing otherwise.
    let ended = learned.trace.as_ref().map(|_| trace::Ended {
        status: report.status(),
        code: report.error_code(),
        exit: report.exit(),
        replayed: false,
        at: std::time::SystemTime::now(),
    });
    let exit = report.print(wrote);
    let ended = ended.map(|ended| trace::Ended {
        at: std::time::SystemTime::now(),
        ..ended
    });
    (exit, ended)
}

/// After the envelope, bounded, since nothing may delay it: the file transport's folder is
/// removed, and last, the ledger file made to stand alone (SPEC §14.4).
fn clean_up(obtained: Option<Obtained>, gate: Option<gate::Gate>, told: &Tell<'_>) {
    if let Some(obtained) = obtained {
        obtained.clean_up();
    }
    if let Some(mut gate) = gate {
        if let Some((argv, notice)) = gate.notice.take() {
            // The envelope is out: the host reads its end of stdout now, not when the
            // notifier is done (SPEC §18: a notifier never holds the call's answer).
            ptd_wire::stdout::close();
            if let Some(warning) =
                notify::notify(&argv, notice, told.env, told.redactor, told.interrupts)
            {
                stderr_line!("{warning}");
            }
        }
        gate::checkpoint(&mut gate);
    }
}

/// What telling a person of a new approval needs after the envelope (SPEC §18).
struct Tell<'a> {
    env: &'a HostEnv,
    redactor: &'a ptd_wire::redact::Redactor,
    interrupts: &'a Interrupts,
}

/// What the main job's options say once checked.
pub struct Usage {
    /// The tool map in force.
    pub tool_map: ToolMap,
    /// What every call gets from the command line (SPEC §3, §13): its variables and
    /// confinement. Under a policy, only the variables a policy that sets none leaves in force.
    pub settings: CallSettings,
    /// The host's session, which the request's must be (SPEC §14.4): `--session`, or the
    /// variable the policy's `session_env` names.
    pub session: Option<String>,
    /// The ledger and its budgets (`--ledger`, or the policy's `[ledger]`).
    pub(crate) ledger: Option<gate::Options>,
    /// `--policy`, loaded before the request is read — or its problems, which the main job
    /// reports as `policy_invalid` once the request's ids are known (SPEC §16).
    pub policy: Option<Result<ptd_policy::Compiled, Vec<ptd_policy::Problem>>>,
}

/// The usage errors of the main job's options (exit 2, no envelope): no bridge at all, a
/// `--tool-map` that cannot be used, a confinement option (or its `PARENT_TOOL_DISPATCH_*`
/// variable in `env`) that does not parse, names no existing path, or grants what confines
/// nothing (`/`, the ledger's folder).
pub(crate) fn check_usage(args: &DispatchArgs, env: &HostEnv) -> Result<Usage, UsageError> {
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
    let Some(path) = &args.policy else {
        let ledger = gate::options(&args.ledger)?;
        let file = args.ledger.ledger.as_deref();
        let confine = confine_options(&args.run.confine, env, file).map_err(UsageError)?;
        return Ok(Usage {
            tool_map,
            settings: CallSettings::command_line(args, &confine),
            session: gate::session(&args.ledger)?,
            ledger,
            policy: None,
        });
    };
    policy::refuse_beside(args, env, None)?;
    let cli_session = gate::session(&args.ledger)?;
    let loaded = policy::load_for_call(path, args.ledger.ledger.as_deref(), env);
    let (ledger, session) = match &loaded {
        Ok(policy) => {
            policy::refuse_beside(args, env, Some(policy))?;
            policy::ledger_and_session(args, env, policy, cli_session)?
        }
        // Reported as `policy_invalid`; a ledger the command line names still records it.
        Err(_) => (gate::options(&args.ledger)?, cli_session),
    };
    Ok(Usage {
        tool_map,
        settings: CallSettings::command_line(args, &ptd_sys::confine::Options::default()),
        session,
        ledger,
        policy: Some(loaded),
    })
}

/// The confinement options of a command line, each flag falling back to its variable in
/// `env` (SPEC §13), checked; the error names the option (a usage error, exit 2). With the
/// `ledger` the dispatcher keeps, a `--fs-*` path that holds its folder or lies in it is
/// refused too (SPEC §13.2).
pub(crate) fn confine_options(
    args: &crate::cli::ConfineArgs,
    env: &HostEnv,
    ledger: Option<&std::path::Path>,
) -> Result<ptd_sys::confine::Options, String> {
    use ptd_sys::confine::{Options, RawOptions};
    let raw = args
        .raw()
        .or_env(RawOptions::from_env(|name| env.var_os(name)));
    Options::parse_beside_ledger(&raw, ledger).map_err(|err| err.to_string())
}

/// What the live main job's steps need, besides the request: the command line, the host, the
/// checked options.
struct Job<'a> {
    args: &'a DispatchArgs,
    env: &'a HostEnv,
    usage: &'a Usage,
    interrupts: &'a Interrupts,
}

/// The live main job's steps, up to an answer to judge, in SPEC §4.1's order: read, admit,
/// the ledger step of SPEC §14, obtain. Each step returns what it learned, and the sequencer
/// records it in `learned` as it returns — the ledger step's gate included, for the record
/// after the report. The ledger step may answer at once — a recorded envelope to print
/// again, or a refusal — so that nothing runs.
fn steps(job: &Job<'_>, learned: &mut Learned) -> Result<Obtained, DispatchError> {
    let bytes = read_request(job.args, job.interrupts)?;
    let admitted = admit(job.args, job.env, job.usage, bytes, learned);
    learned.traced("admit", learned.trace.as_ref().map(|_| learned.started_at));
    let since = learned.clock();
    let asked = gate::Asked {
        started: learned.started,
        timeout: Duration::from_millis(
            learned
                .dispatch
                .timeout_ms
                .unwrap_or(ptd_wire::envelope::bridge::DEFAULT_TIMEOUT_MS),
        ),
        bridge_ref: learned.bridge_ref.as_deref(),
        echo: &learned.echo,
        request: learned.request.as_deref(),
        redactor: &learned.redactor,
        env: job.env,
    };
    let gated = gate::gate(job.usage.ledger.as_ref(), job.interrupts, admitted, &asked);
    if job.usage.ledger.is_some() {
        learned.traced("ledger", since);
    }
    learned.gate = gated.gate;
    learned.warnings.extend(gated.warning);
    if gated.diagnostics.is_some() {
        learned.ledger = gated.diagnostics;
    }
    if let Some(deadline) = gated.deadline {
        learned.dispatch.timeout_ms = Some(deadline.timeout_ms());
    }
    let admitted = match gated.pass? {
        gate::Pass::Run(admitted) => *admitted,
        gate::Pass::Replay(recorded) => return Ok(Obtained::Replayed(recorded)),
    };
    let run = Obtain {
        args: job.args,
        env: job.env,
        interrupts: job.interrupts,
    };
    let started = std::time::Instant::now();
    // A PostgreSQL ledger's lease is kept fresh while the call runs (SPEC §19.1).
    let heartbeat = match (job.usage.ledger.as_ref(), learned.gate.as_ref()) {
        (Some(options), Some(gate)) => heartbeat::Heartbeat::start(options, gate, job.env),
        _ => None,
    };
    let since = learned.clock();
    let answer = obtain(admitted, &run, learned);
    learned.traced_obtain(since);
    drop(heartbeat);
    if let Some(gate) = learned.gate.as_mut() {
        gate.ran(started.elapsed());
    }
    answer
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
pub(crate) fn conclude_recorded(
    args: &DispatchArgs,
    env: &HostEnv,
    request: Vec<u8>,
    recorded: Recorded<'_>,
) -> Result<Concluded, UsageError> {
    let usage = check_usage(args, env)?;
    let mut learned = Learned::new(args, env);
    learned.policy(&usage, env);
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
    let limits = admitted.expected.limits();
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

/// A request that passed every check before anything runs (SPEC §4.1 steps 1–3).
pub(crate) struct Admitted {
    pub bridge: Bridge,
    pub request: Request,
    /// What its answer must echo, and the bounds it is judged by.
    pub expected: Expected,
    /// What the call runs with: the command line's, or its policy entry's (SPEC §16).
    pub settings: CallSettings,
}

/// What an answer to an admitted request is judged against.
pub struct Expected {
    /// The request as the adapter (or endpoint) sees it: the tool id mapped (§4.4).
    pub sent: Echo,
    /// The tool id as requested, which the printed envelope carries.
    pub canonical_tool: String,
    /// The time the adapter or endpoint may take: the bridge's, unless the ledger step cut it.
    pub deadline: Deadline,
    /// `--max-output-bytes`.
    pub max_bytes: usize,
}

impl Expected {
    /// The bounds an answer is judged by: the deadline and `--max-output-bytes`.
    pub fn limits(&self) -> Limits {
        Limits {
            timeout_ms: self.deadline.timeout_ms(),
            max_bytes: self.max_bytes,
        }
    }

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
        .extend(warnings.iter().map(ptd_wire::terminal::warning_line));
    let bridge = bridge?;
    learned.bridge(&bridge, env);
    let policy = loaded_policy(usage, &bridge, learned)?;
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
    let settings = match policy {
        None => usage.settings.clone(),
        Some(policy) => {
            let ledger = usage.ledger.as_ref().and_then(gate::ledger_file);
            let (diagnostics, settings) =
                policy::routed(policy, &canonical_tool, &usage.settings, ledger);
            learned.dispatch.policy = Some(diagnostics);
            settings?
        }
    };
    let mut deadline = Deadline::of(&bridge);
    if let Some(ms) = settings.timeout_ms {
        deadline = deadline.cut_to(ms);
        learned.dispatch.timeout_ms = Some(deadline.timeout_ms());
    }
    let sent = Echo {
        tool: usage.tool_map.external(&canonical_tool),
        ..request.echo.clone()
    };
    Ok(Admitted {
        expected: Expected {
            sent,
            canonical_tool,
            deadline,
            max_bytes: usize::try_from(args.run.max_output_bytes).unwrap_or(usize::MAX),
        },
        bridge,
        request,
        settings,
    })
}

/// The job's policy once the bridge is known (SPEC §16): `None` without `--policy`; the
/// loaded policy when it also keeps under the bridge's timeout; else `policy_invalid`, its
/// first problem on the `error[..]` line and the others on note lines after it.
fn loaded_policy<'u>(
    usage: &'u Usage,
    bridge: &Bridge,
    learned: &mut Learned,
) -> Result<Option<&'u ptd_policy::Compiled>, DispatchError> {
    let problems = match &usage.policy {
        None => return Ok(None),
        Some(Ok(policy)) => policy.above_bridge(bridge.timeout_ms),
        Some(Err(problems)) => problems.clone(),
    };
    if problems.is_empty() {
        return Ok(usage.policy.as_ref().and_then(|p| p.as_ref().ok()));
    }
    for problem in problems.iter().skip(1) {
        learned
            .notes
            .push(ptd_wire::terminal::note_line(&problem.to_string()));
    }
    Err(DispatchError::PolicyInvalid { problems })
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
        settings,
    } = admitted;
    let body = request.for_adapter(&expected.sent.tool);
    drop(request);
    match bridge.mode {
        Mode::HostCommand => run_adapter(&bridge, body, expected, &settings, run, learned)
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
    Replayed(ptd_ledger::Recorded),
}

impl Obtained {
    /// Judge what came back (SPEC §4.5); a recorded envelope is only checked.
    fn judge(&self) -> Outcome<'_> {
        if !matches!(self, Obtained::Replayed(_)) {
            panic_point::reach(PanicPoint::Judging);
        }
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
                        ptd_ledger::LedgerError::Corrupt(format!(
                            "the recorded envelope is not valid: {}",
                            ptd_wire::validate::summary(&issues)
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

/// Judge an answer (SPEC §4.5), keeping the start of stdout as a diagnostic when it is not the
/// answer (`stdout_is_the_answer` false: file transport), and when it should have been and was
/// not (the cause is then usually in its first bytes). The live run and `replay` both end
/// here, so a recorded answer is judged and reported exactly like a live one.
pub(crate) fn judge_answer<'a>(
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
