//! `delegation run`: check the request, run the product host adapter, check its answer, print
//! one `wp-codebox/host-delegation-result/v1` envelope (SPEC §8).
//!
//! The adapter runs on the main job's engine (`exec::run`): argv exactly as given with no
//! shell, its own process group, a cleared environment rebuilt from the base variables, the
//! deadline and kill ladder, the stdout cap, no leftovers. It gets the request as compact JSON
//! and a newline on stdin and must print one JSON object — its answer — on stdout.
//!
//! Invariants: nothing runs unless the request passed every check; every path after argument
//! parsing prints exactly one envelope (one line) and ends with a final event; every failure
//! the dispatcher decides has a `wp_codebox_host_delegation_*` code and no `result`; all that is
//! printed goes through one [`Redactor`]. This module only sequences the steps: the rules live
//! in `checks`, the shapes in `envelopes`, the codes in `codes`.

use super::checks::{check_answer, check_request, Answer, Findings, Scope};
use super::codes::{Code, DelegationStatus, Event, IssueKind};
use super::envelopes::{Envelope, ErrorBody, ErrorPart, EventRecord};
use super::{REQUEST_SCHEMA, RESULT_SCHEMA};
use crate::cli::DelegationRunArgs;
use crate::dispatch::{read_interruptibly, ReadStop};
use crate::plan;
use ptd_sys::confine::{Options, Prepared};
use ptd_sys::exec::{self, Finished, SpawnError, Spec, Stop, Termination};
use ptd_sys::hostenv::HostEnv;
use ptd_sys::interrupt::Interrupts;
use ptd_sys::signal::signal_name;
use ptd_wire::json::raw::{Fields, ObjectWriter};
use ptd_wire::json::{self, human_bytes, JsonIssue, Kind};
use ptd_wire::redact::Redactor;
use ptd_wire::validate::Issue;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Metadata variables the adapter receives (besides the base variables and `--pass-env`).
pub mod vars {
    /// The request's id (the generated one when the request has none).
    pub const REQUEST_ID: &str = "WP_CODEBOX_HOST_DELEGATION_REQUEST_ID";
    /// `--timeout-ms`: the adapter is stopped past it.
    pub const TIMEOUT_MS: &str = "WP_CODEBOX_HOST_DELEGATION_TIMEOUT_MS";
    /// `wp-codebox/host-delegation-request/v1`.
    pub const REQUEST_SCHEMA: &str = "WP_CODEBOX_HOST_DELEGATION_REQUEST_SCHEMA";
    /// `wp-codebox/host-delegation-result/v1`.
    pub const RESULT_SCHEMA: &str = "WP_CODEBOX_HOST_DELEGATION_RESULT_SCHEMA";
}

/// How much of stdout a failure keeps when it was not a valid answer.
const STDOUT_HEAD_BYTES: usize = 1024;

/// A failure the dispatcher decided (small: it travels in every `Result` of a run).
#[derive(Debug)]
struct Failure {
    code: Code,
    /// For `error.message`: one sentence, no host path.
    message: String,
    /// For `error.data`.
    data: Option<Box<Map<String, Value>>>,
    /// A fuller account for stderr (may name the program or file as the operator gave it).
    human: Option<String>,
}

impl Failure {
    fn new(code: Code, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            data: None,
            human: None,
        }
    }

    /// `message: first issue` in the envelope, every issue in `data.issues`.
    fn issues(code: Code, message: &str, issues: Vec<Issue>) -> Failure {
        let message = match issues.first() {
            Some(first) if first.path.is_empty() => format!("{message}: {}", first.message),
            Some(first) => format!("{message}: {} {}", first.path, first.message),
            None => message.to_string(),
        };
        Failure::new(code, message).data("issues", json!(issues))
    }

    fn data(mut self, key: &str, value: Value) -> Failure {
        self.data
            .get_or_insert_with(Box::default)
            .insert(key.to_string(), value);
        self
    }

    fn human(mut self, human: String) -> Failure {
        self.human = Some(human);
        self
    }

    /// The envelope's `error`.
    fn error(&self) -> ErrorBody {
        let data = self.data.as_ref().map(|d| Value::Object((**d).clone()));
        ErrorBody::new(self.code, self.message.clone(), data)
    }
}

/// Run one delegation; print the envelope; return the exit status. `confine` is the
/// confinement asked for (SPEC §13), checked by the caller.
pub fn run(args: &DelegationRunArgs, confine: &Options, interrupts: &Interrupts) -> u8 {
    let host = HostEnv::process();
    let mut learned = Learned::new(args, &host);
    let mut finished = None;
    let mut confinement = None;
    let run = Delegate {
        args,
        host: &host,
        confine,
        interrupts,
    };
    let outcome = delegate(&run, &mut learned, &mut finished, &mut confinement);
    conclude(&learned, outcome)
}

/// What one delegation needs besides what it learns.
struct Delegate<'a> {
    args: &'a DelegationRunArgs,
    host: &'a HostEnv,
    confine: &'a Options,
    interrupts: &'a Interrupts,
}

/// Every step up to the adapter's checked answer, which borrows from its run (kept in
/// `finished`), or the failure that ended the run. What the envelope needs of each step goes
/// into `learned` as the step returns.
fn delegate<'f>(
    run: &Delegate<'_>,
    learned: &mut Learned,
    finished: &'f mut Option<Finished>,
    confinement: &mut Option<Arc<Prepared>>,
) -> Result<Answer<'f>, Failure> {
    let Delegate {
        args,
        host,
        interrupts,
        ..
    } = *run;
    let bytes = read_request(args, interrupts)?;
    let max_request = usize::try_from(args.run.max_request_bytes).unwrap_or(usize::MAX);
    let text = json::check_object(&bytes, max_request).map_err(not_a_request)?;
    let (scope, findings) = check_request(text);
    let request_id = scope.request_id.clone().unwrap_or_else(generate_id);
    let canonical = canonical_request(text, &request_id);
    learned.request_id = request_id;
    let canonical = learned.request.insert(canonical);
    if let Some(worst) = findings.worst() {
        let code = worst.request_code();
        let message = match code {
            Code::SourceDigestInvalid => "the request's source_digest is not a SHA-256 digest",
            _ => "the request is not a valid host delegation request",
        };
        return Err(Failure::issues(code, message, findings.into_issues()));
    }
    drop(bytes);
    let (mut spec, found) = adapter_spec(args, host, &learned.request_id, canonical);
    if let Some(found) = found {
        learned.redactor.add_host_path(&found.to_string_lossy());
    }
    // SPEC §13: prepared before the spawn, or nothing runs. The listed paths are host paths
    // whether or not it can be.
    for path in run.confine.fs_read.iter().chain(&run.confine.fs_write) {
        learned.redactor.add_host_path(&path.to_string_lossy());
    }
    *confinement = crate::dispatch::confine_step(&mut spec, run.confine, None, &args.argv[0])
        .map_err(|err| unconfined(err, &args.argv[0]))?;
    if let Some(prepared) = confinement.as_deref() {
        for path in crate::dispatch::confinement_paths(run.confine, prepared) {
            learned.redactor.add_host_path(&path.to_string_lossy());
        }
    }
    // SPEC §17: with `--network allow:`, the egress proxy serves the adapter for the run (its
    // report has no place in delegation's envelope).
    let proxy = match confinement.as_deref() {
        Some(prepared) => {
            let timeout_ms = u64::try_from(spec.timeout.as_millis()).unwrap_or(u64::MAX);
            crate::dispatch::egress::start(prepared, run.confine, timeout_ms, host)
                .map_err(|err| confinement_unavailable(&err))?
        }
        None => None,
    };
    let ran = exec::run(spec, interrupts);
    drop(proxy);
    let ran = ran.map_err(|error| not_started(error, &args.argv[0]))?;
    learned.resources = ran.resources_used();
    let finished: &'f Finished = finished.insert(ran);
    judge(finished, &scope, args)
        .map_err(|failure| limit_hit(failure, finished, confinement.as_deref()))
        .map_err(|failure| with_stderr_tail(failure, finished))
}

/// The confinement step failed: the program is not there, or the host cannot confine it.
fn unconfined(err: crate::dispatch::DispatchError, argv0: &str) -> Failure {
    match err {
        crate::dispatch::DispatchError::Spawn { error, .. } => not_started(error, argv0),
        other => confinement_unavailable(&other),
    }
}

/// SPEC §13 "Fail closed" in delegation's vocabulary: `wp_codebox_host_delegation_unavailable`
/// with `error.data.missing` (the names of the main job's `confinement_unavailable`).
fn confinement_unavailable(err: &crate::dispatch::DispatchError) -> Failure {
    let missing = err
        .details()
        .and_then(|d| d.get("missing").cloned())
        .unwrap_or_else(|| json!([]));
    Failure::new(Code::Unavailable, err.message())
        .data("missing", missing)
        .human(err.human())
}

/// SPEC §13 "A limit that was reached", in delegation's vocabulary: a failure of the adapter's
/// own (no valid answer) becomes `wp_codebox_host_delegation_provider_result_invalid` with
/// `error.data.limit` when a limit's own counter shows it was reached.
fn limit_hit(failure: Failure, finished: &Finished, prepared: Option<&Prepared>) -> Failure {
    if failure.code != Code::ProviderResultInvalid || finished.stopped.is_some() {
        return failure;
    }
    let signal = match finished.termination {
        Termination::Signaled(signal) => Some(signal.raw()),
        _ => None,
    };
    match prepared.and_then(|p| p.limit_hit(signal)) {
        Some(limit) => Failure {
            message: format!(
                "the host adapter reached its {} limit ({}) and failed without an answer",
                limit.as_str(),
                limit.flag()
            ),
            ..failure
        }
        .data("limit", json!(limit.as_str())),
        None => failure,
    }
}

/// Read the request (`--request`, or stdin for none / `-`), at most cap + 1 bytes.
fn read_request(args: &DelegationRunArgs, interrupts: &Interrupts) -> Result<Vec<u8>, Failure> {
    let path = args
        .request
        .clone()
        .or_else(|| args.request_option.clone())
        .filter(|p| p.as_os_str() != "-");
    match read_interruptibly(path.clone(), args.run.max_request_bytes, interrupts) {
        Ok(bytes) => Ok(bytes),
        Err(ReadStop::Failed(err)) => {
            let failure = Failure::new(
                Code::RequestInvalid,
                format!("the request could not be read: {}", err.kind()),
            );
            let human = match &path {
                Some(p) => format!("the request file {} could not be read: {err}", p.display()),
                None => format!("the request could not be read from stdin: {err}"),
            };
            Err(failure.human(human))
        }
        Err(ReadStop::Interrupted(signal)) => Err(interrupted(signal, false)),
    }
}

/// A request that is not one JSON object (or is over the cap).
fn not_a_request(issue: JsonIssue) -> Failure {
    let mut f = Findings::default();
    f.push(
        IssueKind::RequestInvalid,
        issue.pointer(),
        issue.to_string(),
    );
    Failure::issues(
        Code::RequestInvalid,
        "the request is not a host delegation request",
        f.into_issues(),
    )
}

/// The adapter's run (SPEC §8): argv as given, the environment rebuilt by the main job's
/// rules with the delegation's metadata variables, the canonical request and a newline on
/// stdin. Also where the program was found, a host path to redact.
fn adapter_spec(
    args: &DelegationRunArgs,
    host: &HostEnv,
    request_id: &str,
    canonical: &str,
) -> (Spec, Option<PathBuf>) {
    let (program, found) = plan::locate(&args.argv[0], host);
    let metadata = [
        (vars::REQUEST_ID, request_id.to_string()),
        (vars::TIMEOUT_MS, args.timeout_ms.to_string()),
        (vars::REQUEST_SCHEMA, REQUEST_SCHEMA.to_string()),
        (vars::RESULT_SCHEMA, RESULT_SCHEMA.to_string()),
    ];
    let mut stdin = canonical.as_bytes().to_vec();
    stdin.push(b'\n');
    let spec = Spec {
        program,
        argv: args.argv.clone(),
        env: plan::adapter_env(&[], plan::EnvNames::of(&args.run), host, metadata),
        cwd: None,
        stdin: Some(stdin),
        timeout: Duration::from_millis(args.timeout_ms),
        kill_grace: Duration::from_millis(args.run.kill_grace_ms),
        max_stdout_bytes: args.run.max_output_bytes,
        confinement: None,
        stderr_tap: None,
        stdout_watch: None,
    };
    (spec, found)
}

/// The adapter could not be started.
fn not_started(error: SpawnError, argv0: &str) -> Failure {
    let (what, long) = match &error {
        SpawnError::NotFound(None) => ("was not found".to_string(), None),
        SpawnError::NotExecutable(None) => ("is not executable".to_string(), None),
        SpawnError::NotFound(Some(why)) | SpawnError::NotExecutable(Some(why)) => (
            format!("could not be started: {}", why.describe(true)),
            Some(format!("could not be started: {}", why.describe(false))),
        ),
        SpawnError::Other(kind) => (format!("could not be started: {kind}"), None),
        SpawnError::Confinement(refused) => {
            return confinement_unavailable(&crate::dispatch::DispatchError::from(*refused))
        }
    };
    let failure = Failure::new(Code::Unavailable, format!("the host adapter {what}"));
    let long = long.unwrap_or_else(|| what.clone());
    failure.human(format!("the host adapter {argv0:?} {long}"))
}

/// The adapter's end and stdout → its checked answer, or the failure it stands for. The same
/// exit-status rule as the main job's (SPEC §4.5): exit 0 with a valid answer is the answer;
/// a non-zero exit stands only behind a valid answer that admits a failure.
fn judge<'f>(
    finished: &'f Finished,
    scope: &Scope,
    args: &DelegationRunArgs,
) -> Result<Answer<'f>, Failure> {
    let max = usize::try_from(args.run.max_output_bytes).unwrap_or(usize::MAX);
    if let Some(stop) = finished.stopped {
        return Err(match stop {
            Stop::Timeout => Failure::new(
                Code::Timeout,
                format!(
                    "the host adapter did not answer within {} ms and was stopped",
                    args.timeout_ms
                ),
            ),
            Stop::Interrupted(signal) => interrupted(signal, true),
            Stop::OutputCap => Failure::new(
                Code::ProviderResultInvalid,
                format!(
                    "the host adapter's answer is over the {} limit (--max-output-bytes); it \
                     was stopped",
                    human_bytes(max)
                ),
            )
            .data("max_output_bytes", json!(args.run.max_output_bytes))
            .data("stdout_bytes", json!(finished.stdout_bytes)),
        });
    }
    let exit_code = match finished.termination {
        Termination::Exited(code) => code,
        Termination::Signaled(signal) => {
            return Err(Failure::new(
                Code::ProviderResultInvalid,
                format!(
                    "the host adapter was killed by {} before answering",
                    signal_name(signal)
                ),
            )
            .data("signal", json!(signal_name(signal))))
        }
        Termination::Unreaped | Termination::NotStarted => {
            return Err(Failure::new(
                Code::ProviderResultInvalid,
                "the host adapter's end could not be observed",
            ))
        }
    };
    let (checked, parsed) = match json::check_object(&finished.stdout, max) {
        Ok(text) => (check_answer(text, scope), true),
        Err(issue) => {
            let mut f = Findings::default();
            let message = match &issue {
                JsonIssue::Empty => "the host adapter printed nothing".to_string(),
                other => other.to_string(),
            };
            f.push(IssueKind::ResultInvalid, issue.pointer(), message);
            (Err(f), false)
        }
    };
    match (exit_code, checked) {
        (0, Ok(answer)) => Ok(answer),
        (_, Ok(answer)) if !answer.status.is_success() => Ok(answer),
        (0, Err(findings)) => {
            let code = findings
                .worst()
                .map_or(Code::ProviderResultInvalid, IssueKind::answer_code);
            let failure = Failure::issues(code, answer_message(code), findings.into_issues());
            Err(if parsed {
                failure
            } else {
                with_stdout_head(failure, &finished.stdout)
            })
        }
        (code, checked) => {
            let failure = Failure::new(
                Code::ProviderResultInvalid,
                format!("the host adapter exited with status {code} without a failure answer"),
            )
            .data("exit_code", json!(code));
            Err(match checked {
                Ok(_) => failure,
                Err(findings) => failure.data("issues", json!(findings.into_issues())),
            })
        }
    }
}

fn answer_message(code: Code) -> &'static str {
    match code {
        Code::ProviderResultSchemaInvalid => "the host adapter's answer names another schema",
        Code::ProviderStatusInvalid => "the host adapter's answer has no valid status",
        Code::RequestIdMismatch => "the host adapter answered for another request",
        Code::ScopeMismatch => "the host adapter answered for another sandbox session",
        Code::SourceDigestMismatch => {
            "the host adapter's answer was made from another source (stale source_digest)"
        }
        _ => "the host adapter's answer is not a valid host delegation result",
    }
}

fn interrupted(signal: ptd_sys::signal::Signal, adapter_started: bool) -> Failure {
    let when = if adapter_started {
        "and stopped the host adapter"
    } else {
        "before the host adapter started"
    };
    Failure::new(
        Code::Interrupted,
        format!("the dispatcher received {} {when}", signal_name(signal)),
    )
    .data("signal", json!(signal_name(signal)))
}

fn with_stderr_tail(failure: Failure, finished: &Finished) -> Failure {
    if finished.stderr_tail.is_empty() {
        return failure;
    }
    failure
        .data(
            "stderr_tail",
            json!(String::from_utf8_lossy(&finished.stderr_tail)),
        )
        .data("stderr_truncated", json!(finished.stderr_truncated))
}

fn with_stdout_head(failure: Failure, stdout: &[u8]) -> Failure {
    if stdout.is_empty() {
        return failure;
    }
    let head = String::from_utf8_lossy(&stdout[..stdout.len().min(STDOUT_HEAD_BYTES)]);
    failure.data("stdout_head", json!(head))
}

/// `hd-<unix ms>-<pid>`: unique on a host, since one process runs one delegation.
fn generate_id() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("hd-{ms}-{}", std::process::id())
}

/// The request the adapter gets and the envelope echoes: as written (minified), with `schema`
/// and the `request_id` in use filled in first when absent.
fn canonical_request(text: &str, request_id: &str) -> String {
    let fields = Fields::parse(text).unwrap_or_default();
    let mut out = String::with_capacity(text.len() + 128);
    let mut w = ObjectWriter::new(&mut out);
    if fields.get("schema").is_none() {
        w.str("schema", REQUEST_SCHEMA);
    }
    if fields.get("request_id").is_none() {
        w.str("request_id", request_id);
    }
    for (key, value) in fields.iter() {
        w.raw(key, value);
    }
    w.finish();
    out
}

/// What the printed envelope needs, as the steps return it.
struct Learned {
    /// The host's secrets and paths, and where the program was found.
    redactor: Redactor,
    started: Instant,
    started_at: SystemTime,
    /// The request's id in use (a generated one until the request gave its own).
    request_id: String,
    /// The canonical request, once the request was a JSON object.
    request: Option<String>,
    /// What the adapter's tree used, once it ran (SPEC §13 "Reported").
    resources: Option<exec::Resources>,
}

impl Learned {
    /// What is known before anything is read: the host's secrets and paths (the main job's
    /// set-up, `plan::host_redactor`).
    fn new(args: &DelegationRunArgs, host: &HostEnv) -> Learned {
        Learned {
            redactor: plan::host_redactor(&args.run, host),
            started: Instant::now(),
            started_at: SystemTime::now(),
            request_id: generate_id(),
            request: None,
            resources: None,
        }
    }
}

/// How the run ended, as the envelope and stderr show it.
struct Ended<'a> {
    status: DelegationStatus,
    provider: Option<&'a str>,
    result: Option<&'a str>,
    error: Option<ErrorPart<'a>>,
    exit: u8,
    /// The `error[code]` line's code and message (redacted).
    stderr: Option<(String, String)>,
}

impl<'a> Ended<'a> {
    /// A failure the dispatcher decided. Its own account may name the program or file as the
    /// operator gave it (it is for the host's eyes): only secrets are scrubbed from it, as in
    /// the main job. Everything else gets the full rules.
    fn failed(failure: &Failure, redactor: &Redactor) -> Ended<'a> {
        let code = failure.code;
        let human = match &failure.human {
            Some(human) => redactor.scrub_secrets_str(human),
            None => redactor.redact_str(&failure.message),
        };
        Ended {
            status: code.status(),
            provider: None,
            result: None,
            error: Some(ErrorPart::Own(failure.error())),
            exit: code.exit_code(),
            stderr: Some((code.as_str().to_string(), human)),
        }
    }

    /// The adapter's checked answer; a failure it admits keeps its own `error`.
    fn answered(answer: &'a Answer<'a>, redactor: &Redactor) -> Ended<'a> {
        let error = answer
            .error
            .filter(|raw| !answer.status.is_success() && Kind::of(raw) == Kind::Object);
        let stderr = error.and_then(Fields::parse).map(|e| {
            let field = |k| {
                e.get(k)
                    .and_then(ptd_wire::json::raw::string)
                    .unwrap_or_default()
                    .into_owned()
            };
            (field("code"), redactor.redact_str(&field("message")))
        });
        Ended {
            status: answer.status,
            provider: answer.provider.as_deref(),
            result: answer.result,
            error: error.map(ErrorPart::Answer),
            exit: answer.status.exit_code(),
            stderr,
        }
    }
}

/// Build, redact and print the envelope and the stderr line; return the exit status.
fn conclude(learned: &Learned, outcome: Result<Answer<'_>, Failure>) -> u8 {
    let ended_at = SystemTime::now();
    let redactor = &learned.redactor;
    let ended = match &outcome {
        Err(failure) => Ended::failed(failure, redactor),
        Ok(answer) => Ended::answered(answer, redactor),
    };
    let requested = EventRecord {
        event: Event::Requested,
        time: learned.started_at,
        status: None,
        provider: None,
    };
    let last = EventRecord {
        event: ended.status.final_event(),
        time: ended_at,
        status: Some(ended.status),
        provider: ended.provider.map(str::to_string),
    };
    let envelope = Envelope {
        status: ended.status,
        request_id: &learned.request_id,
        request: learned.request.as_deref(),
        provider: ended.provider,
        result: ended.result,
        error: ended.error,
        events: vec![requested, last],
        started_at: learned.started_at,
        ended_at,
        duration_ms: learned.started.elapsed().as_millis() as u64,
        resources: learned.resources.map(crate::dispatch::resources),
    };
    let text = envelope.render(redactor);
    if let Some((code, message)) = ended.stderr {
        stderr_line!(
            "{}",
            ptd_wire::terminal::error_line(&redactor.redact_str(&code), &message)
        );
    }
    let mut line = text.into_bytes();
    line.push(b'\n');
    ptd_wire::stdout::print(&line, "the envelope", ended.exit)
}
