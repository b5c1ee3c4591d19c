//! The ledger step of the main job (SPEC §14), between `admit` and `obtain`, and the recording
//! of the outcome after [`Report::build`].
//!
//! [`gate`] opens the ledger (failing closed: `unavailable` / `ledger_unavailable` before
//! anything starts), and asks it ONE atomic question for an admitted call — run it, replay it,
//! refuse it (reused id, budget, concurrency), or declare it indeterminate — waiting for a live
//! holder within the call's own timeout. A call that failed before the step (not authorized,
//! invalid) only gets its audit record. The step takes what it needs and returns what it
//! learned ([`Gated`]): the sequencer records it. [`conclude`] stores the envelope's one
//! rendering, the text that is then printed, with the audit record, in one transaction that
//! is durable before the envelope goes out; when that fails, the envelope is still printed,
//! with `diagnostics.ledger.error`.
//!
//! Everything that goes into an audit record goes through the job's redactor first; no
//! payload (`input`, `output`) ever does. This module does not know how the ledger stores
//! anything.

use super::{Admitted, Deadline, DispatchError, Learned, Report, UsageError};
use crate::cli::{LedgerArgs, LEDGER_ENV, SESSION_ENV};
use ptd_ledger::audit::MAX_FIELD_BYTES;
use ptd_ledger::{
    self as ledger, AuditRecord, Budgets, Call, Decision, Key, Lease, Ledger, LedgerError, Name,
    Recorded, Resources, Rule, Verdict, Waited,
};
use ptd_wire::authorize::Denial;
use ptd_wire::envelope::canonical;
use ptd_wire::envelope::request::Echo;
use ptd_wire::envelope::result::LedgerDiagnostics;
use ptd_wire::error::ErrorCode;
use ptd_wire::json::raw::{self, Fields};
use ptd_wire::json::Document;
use ptd_wire::redact::Redactor;
use std::time::{Duration, Instant};

/// The ledger options of one main job, checked.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// `--ledger`, or the policy's `[ledger] path`: a file, or a PostgreSQL URL (SPEC §19.1).
    pub(crate) location: ledger::Location,
    /// The budgets and `--max-concurrent` (or the policy's `[ledger]` section's).
    pub(crate) budgets: Budgets,
    /// How long a holder on another host counts as alive without a heartbeat (SPEC §19.1).
    pub(crate) lease_ttl: Duration,
    /// When the main job's commits are on the disk (`--ledger-durability`, SPEC §14.4).
    pub(crate) durability: ledger::Durability,
}

/// `--session` (or its variable), checked: `None` when not given; an empty or overlong id, or
/// one with a control character, is a usage error.
pub(super) fn session(args: &LedgerArgs) -> Result<Option<String>, UsageError> {
    args.session
        .as_deref()
        .map(ledger::parse_session)
        .transpose()
        .map_err(|err| UsageError(err.to_string()))
}

/// Check the ledger options: a value that does not parse, a budget without `--ledger`, or a
/// budget without `--session` (SPEC §14.4: budgets are the host's session's, never an id the
/// sandbox chose) is a usage error naming the option. `None` without `--ledger`.
pub(crate) fn options(args: &LedgerArgs) -> Result<Option<Options>, UsageError> {
    let session = session(args)?;
    let mut budgets = Budgets::default();
    let single = [
        ("--budget-calls", &args.budget_calls),
        ("--budget-adapter-ms", &args.budget_adapter_ms),
        ("--max-concurrent", &args.max_concurrent),
    ];
    let values = single
        .iter()
        .filter_map(|(flag, value)| value.as_deref().map(|v| (*flag, v)))
        .chain(
            args.budget_tool
                .iter()
                .map(|v| ("--budget-tool", v.as_str())),
        );
    let mut first = None;
    for (flag, value) in values {
        first.get_or_insert(flag);
        ledger::parse_budget_flag(&mut budgets, flag, value)
            .map_err(|err| UsageError(err.to_string()))?;
    }
    match (&args.ledger, first) {
        (None, Some(flag)) => Err(UsageError(format!(
            "{flag} needs a ledger: pass --ledger PATH or set {LEDGER_ENV}"
        ))),
        (Some(_), Some(flag)) if session.is_none() => Err(UsageError(format!(
            "{flag} needs the host's session: pass --session ID or set {SESSION_ENV}"
        ))),
        (Some(path), _) => Ok(Some(Options {
            location: location_of(path)?,
            budgets,
            lease_ttl: lease_ttl(args)?,
            durability: durability(args),
        })),
        (None, None) => Ok(None),
    }
}

/// `--ledger-durability` (or its variable; clap has checked the word): `full` unless set.
pub(crate) fn durability(args: &LedgerArgs) -> ledger::Durability {
    args.ledger_durability.map(Into::into).unwrap_or_default()
}

/// `--lease-ttl` (or its variable): whole seconds, or digits with `s`, `m` or `h`; at least
/// 3 s (a third of it is the heartbeat's period). The default: 30 s.
pub(crate) fn lease_ttl(args: &LedgerArgs) -> Result<Duration, UsageError> {
    let Some(text) = args.lease_ttl.as_deref() else {
        return Ok(ledger::DEFAULT_LEASE_TTL);
    };
    let seconds = ptd_policy::parse_duration(text).filter(|s| (3..=86_400).contains(s));
    seconds.map(Duration::from_secs).ok_or_else(|| {
        UsageError(format!(
            "--lease-ttl: `{text}` is not a duration from 3s to 24h (write 30s, 5m or whole \
             seconds)"
        ))
    })
}

/// The ledger `path` names: a `postgres://` URL is a PostgreSQL ledger (SPEC §19.1), anything
/// else a file. A URL that cannot be used (a password in it, a parameter this dispatcher does
/// not take) is a usage error.
pub(crate) fn location_of(path: &std::path::Path) -> Result<ledger::Location, UsageError> {
    ledger::Location::of_path(path).map_err(|err| UsageError(format!("--ledger: {err}")))
}

/// The ledger's file, when it is one (a grant must neither hold nor lie in its folder).
pub(crate) fn ledger_file(options: &Options) -> Option<&std::path::Path> {
    match &options.location {
        ledger::Location::File(path) => Some(path),
        ledger::Location::Postgres(_) => None,
    }
}

/// What the ledger step lets through.
pub(super) enum Pass {
    /// Run it: this process holds the key (with `--ledger`); its deadline is the one the
    /// step left it.
    Run(Box<Admitted>),
    /// Print the recorded envelope again.
    Replay(Recorded),
}

/// What the ledger step returns, for the sequencer to record.
pub(super) struct Gated {
    /// The call to run, the envelope to print again, or the failure (the one `admit`
    /// returned, or the ledger's refusal).
    pub(super) pass: Result<Pass, DispatchError>,
    /// What is to be recorded once the report is built (nothing without `--ledger`, or when
    /// the ledger could not be opened).
    pub(super) gate: Option<Gate>,
    /// `diagnostics.ledger` (nothing without `--ledger`).
    pub(super) diagnostics: Option<LedgerDiagnostics>,
    /// The call's deadline when the step cut it (a wait for another holder, the session's
    /// adapter budget): `diagnostics.dispatch.timeout_ms` reports it.
    pub(super) deadline: Option<Deadline>,
    /// A stderr line: a refusal whose record could not be kept.
    pub(super) warning: Option<String>,
}

impl Gated {
    /// Nothing to ask the ledger: `pass` as it is.
    fn through(pass: Result<Pass, DispatchError>) -> Gated {
        Gated {
            pass,
            gate: None,
            diagnostics: None,
            deadline: None,
            warning: None,
        }
    }
}

/// What the ledger step knows of the call besides the admitted request: what `admit` read of
/// it before it failed or passed, the job's start and the bridge's timeout.
pub(super) struct Asked<'a> {
    pub(super) started: Instant,
    /// The bridge's timeout (its default when no bridge loaded).
    pub(super) timeout: Duration,
    /// The bridge ref, once the bridge loaded.
    pub(super) bridge_ref: Option<&'a str>,
    /// The ids the request carries, as far as it was read.
    pub(super) echo: &'a Echo,
    /// The request as read, when it was a JSON object.
    pub(super) request: Option<&'a Document>,
    /// For what the step reports of the ledger's own failures.
    pub(super) redactor: &'a Redactor,
    /// The host's variables (a PostgreSQL ledger's password sources).
    pub(super) env: &'a ptd_sys::hostenv::HostEnv,
}

/// What the ledger knows of one main job, from the step to the recording.
pub(super) struct Gate {
    ledger: Ledger,
    /// This process's lease, when it holds the key (started it, or took it over from a dead
    /// holder): the outcome is then stored with the key.
    held: Option<Lease>,
    /// The key, its ids as digests (see [`id_digest`]).
    key: Key,
    /// The session id as the request has it (the record keeps it redacted).
    session_id: String,
    digest: String,
    tool: String,
    operation: String,
    attempt: u32,
    decision: Verdict,
    rule: Rule,
    /// The adapter's (or endpoint's) wall time, once it ran.
    adapter_ms: Option<u64>,
    /// The call's own timeout, for waiting on other writers.
    timeout: Duration,
    /// The approval the call is held for, once the ledger named one (SPEC §18).
    approval: Option<String>,
    /// A new approval's notice and its notifier (`approval_notify`), run after the envelope.
    pub(super) notice: Option<(Vec<String>, Vec<u8>)>,
}

/// The ledger step. Without `--ledger`, `admitted` passes as it is. With it: the ledger is
/// opened; a call that failed before the step keeps its failure (and gets its audit record at
/// the end); an admitted one gets the ledger's decision. The returned gate is whatever is to
/// be recorded at the end.
pub(super) fn gate(
    options: Option<&Options>,
    interrupts: &ptd_sys::interrupt::Interrupts,
    admitted: Result<Admitted, DispatchError>,
    asked: &Asked<'_>,
) -> Gated {
    let Some(options) = options else {
        return Gated::through(admitted.map(|a| Pass::Run(Box::new(a))));
    };
    let deadline = asked.started + asked.timeout;
    let opened = Ledger::open_at(&options.location, asked.env, deadline).and_then(|mut ledger| {
        ledger.set_lease_ttl(options.lease_ttl);
        ledger.set_durability(options.durability)?;
        Ok(ledger)
    });
    let (decision, rule) = match &admitted {
        Err(err) => rule_of(err),
        Ok(_) => (Verdict::Admit, Rule::BridgeAllowedTools),
    };
    let ledger = match (opened, admitted) {
        (Ok(ledger), admitted) => (ledger, admitted),
        // Refused already: that stays the answer, and the record that could not be kept is
        // reported beside it.
        (Err(err), Err(refused)) => return unrecorded(asked.redactor, &err, refused),
        (Err(err), Ok(_)) => {
            return Gated {
                diagnostics: Some(LedgerDiagnostics::default()),
                ..Gated::through(Err(DispatchError::LedgerUnavailable(err)))
            }
        }
    };
    let (ledger, admitted) = ledger;
    let (key, session_id, digest) = call_key(asked.bridge_ref, asked.request, asked.echo);
    let mut gate = Gate {
        ledger,
        held: None,
        key,
        session_id,
        digest,
        tool: asked.echo.tool.clone(),
        operation: asked.echo.operation.clone(),
        attempt: 0,
        decision,
        rule,
        adapter_ms: None,
        timeout: asked.timeout,
        approval: None,
        notice: None,
    };
    let asked = match admitted {
        Ok(admitted) => gate.ask(options, interrupts, admitted, deadline, asked),
        Err(err) => Gated::through(Err(err)),
    };
    Gated {
        gate: Some(gate),
        diagnostics: Some(asked.diagnostics.unwrap_or_default()),
        ..asked
    }
}

/// A call's key in the ledger (its ids as digests, [`id_digest`]), the session id as the
/// request has it, and the canonical request's digest.
pub(super) fn call_key(
    bridge_ref: Option<&str>,
    request: Option<&Document>,
    echo: &Echo,
) -> (Key, String, String) {
    let session_id = session_of(request);
    let key = Key {
        bridge_ref: bridge_ref.unwrap_or_default().to_string(),
        session_id: id_digest(&session_id),
        request_id: id_digest(&echo.request_id),
    };
    let digest = request
        .map(|doc| canonical::sha256_hex(canonical::to_string_raw(doc.text()).as_bytes()))
        .unwrap_or_default();
    (key, session_id, digest)
}

/// The most of a request's `input` an approval keeps for a person to judge (redacted first).
const INPUT_SHOWN_BYTES: usize = 16 * 1024;

/// What a call whose policy entry says `decision = "ask"` asks the ledger (SPEC §18): its
/// approval's ttl and deciding entry, and what a person is shown — the ids and the request's
/// `input`, redacted by the job's redactor (§5) and bounded. `None` for any other call.
pub(super) fn ask_for(
    settings: &crate::settings::CallSettings,
    echo: &Echo,
    request: Option<&Document>,
    redactor: &Redactor,
    session_id: &str,
) -> Option<ledger::Ask> {
    let ask = settings.ask.as_ref()?;
    let policy = settings.policy.as_ref()?;
    let input = request
        .and_then(|doc| Fields::parse(doc.text()))
        .and_then(|top| top.get("input").map(str::to_string))
        .and_then(|raw| serde_json::from_str::<serde_json::Value>(&raw).ok())
        .map(|input| {
            // Wrapped, so that the input's own `authorization` is not taken for the
            // envelope's structural one.
            let mut wrapped = serde_json::json!({ "input": input });
            redactor.redact_value(&mut wrapped);
            wrapped["input"].to_string()
        })
        .unwrap_or_default();
    Some(ledger::Ask {
        ttl_ms: millis(ask.ttl),
        policy_sha256: policy.sha256.clone(),
        entry: policy.entry.clone(),
        line: policy.line.map(|l| l as u64),
        session_shown: field(redactor, session_id),
        request_shown: field(redactor, &echo.request_id),
        operation: field(redactor, &echo.operation),
        input_shown: bounded(&input, INPUT_SHOWN_BYTES),
    })
}

/// `text`, cut to at most `max` bytes on a character boundary, saying so when cut.
fn bounded(text: &str, max: usize) -> String {
    let kept = ptd_wire::terminal::cut_at_char_boundary(text, max);
    if kept.len() == text.len() {
        return text.to_string();
    }
    format!("{kept}… ({} bytes in all)", text.len())
}

/// A refusal whose record cannot be kept: `diagnostics.ledger.error` and a warning.
fn unrecorded(redactor: &Redactor, err: &LedgerError, refused: DispatchError) -> Gated {
    let message = redactor.redact_str(&err.to_string());
    Gated {
        warning: Some(format!(
            "warning[ledger_unavailable]: the call's outcome was not recorded in the ledger: {}",
            ptd_wire::terminal::escape(&message)
        )),
        diagnostics: Some(LedgerDiagnostics {
            error: Some(message),
            ..LedgerDiagnostics::default()
        }),
        ..Gated::through(Err(refused))
    }
}

impl Gate {
    /// Ask the ledger its one atomic question for an admitted call, waiting for a live holder
    /// up to `deadline`; what it decided is kept for the record. The returned diagnostics are
    /// `None` when the default ones stand.
    fn ask(
        &mut self,
        options: &Options,
        interrupts: &ptd_sys::interrupt::Interrupts,
        mut admitted: Admitted,
        deadline: Instant,
        asked: &Asked<'_>,
    ) -> Gated {
        let lease = match Lease::current() {
            Ok(lease) => lease,
            Err(e) => {
                let err = DispatchError::LedgerUnavailable(LedgerError::Lease(e));
                return Gated::through(Err(err));
            }
        };
        let budgets = call_budgets(&options.budgets, &self.tool, admitted.settings.tool_budget);
        let ask = ask_for(
            &admitted.settings,
            asked.echo,
            asked.request,
            asked.redactor,
            &self.session_id,
        );
        let call = Call {
            key: &self.key,
            digest: &self.digest,
            tool: &self.tool,
            budgets: &budgets,
            ask: ask.as_ref(),
        };
        // A signal ends the wait at once: the call is then interrupted before anything started.
        let mut pause = |pause: Duration| interrupts.wait(pause).is_none();
        let Waited { decision, waited } =
            match self.ledger.wait(&call, &lease, deadline, &mut pause) {
                Ok(waited) => waited,
                Err(err) => {
                    self.refuse(Verdict::Refuse, Rule::Ledger);
                    return Gated::through(Err(DispatchError::LedgerUnavailable(err)));
                }
            };
        if let (Decision::Held(_), Some(signal)) = (&decision, interrupts.received()) {
            self.refuse(Verdict::Refuse, Rule::Dispatch);
            return Gated::through(Err(DispatchError::Interrupted {
                signal,
                adapter_started: false,
            }));
        }
        let mut cut = None;
        if waited {
            // The wait for the holder spent part of this call's own timeout: the adapter gets
            // what is left of it.
            let left = deadline.saturating_duration_since(Instant::now());
            cut = Some(admitted.expected.deadline.cut_to(millis(left)));
        }
        let mut diagnostics = None;
        let pass = match decision {
            Decision::Start {
                attempt,
                adapter_ms_left,
                approval,
            } => {
                self.held = Some(lease);
                self.attempt = attempt;
                // The approval that let it start (SPEC §18): its run's record names it.
                self.approval = approval;
                if let Some(left) = adapter_ms_left {
                    let from = cut.unwrap_or(admitted.expected.deadline);
                    cut = Some(from.cut_to(left));
                }
                if let Some(cut) = cut {
                    admitted.expected.deadline = cut;
                }
                diagnostics = Some(LedgerDiagnostics {
                    attempt: Some(attempt),
                    adapter_ms_left,
                    ..LedgerDiagnostics::default()
                });
                Ok(Pass::Run(Box::new(admitted)))
            }
            Decision::Replay(recorded) => {
                self.refuse(Verdict::Replay, Rule::LedgerReplay);
                self.attempt = recorded_attempt(&recorded.envelope).unwrap_or(0);
                diagnostics = Some(LedgerDiagnostics {
                    replayed: true,
                    attempt: recorded_attempt(&recorded.envelope),
                    ..LedgerDiagnostics::default()
                });
                Ok(Pass::Replay(recorded))
            }
            Decision::ApprovalRequired {
                approval_id,
                expires_ms,
                new,
            } => {
                let notify = admitted
                    .settings
                    .ask
                    .as_ref()
                    .and_then(|a| a.notify.clone());
                let notify = notify.filter(|_| new);
                Err(self.held(approval_id, expires_ms, ask.as_ref(), notify))
            }
            refused => Err(self.refused(refused, lease)),
        };
        Gated {
            diagnostics,
            deadline: cut,
            ..Gated::through(pass)
        }
    }

    /// The call is held for a person (SPEC §18): `approval_required`, recorded with its
    /// approval; a new approval's notice is kept for its notifier (`notify`), which runs once
    /// the envelope is out.
    fn held(
        &mut self,
        approval_id: String,
        expires_ms: u64,
        ask: Option<&ledger::Ask>,
        notify: Option<Vec<String>>,
    ) -> DispatchError {
        if let (Some(ask), Some(argv)) = (ask, notify) {
            let notice = super::notify::notice(ask, &approval_id, expires_ms, &self.tool);
            self.notice = Some((argv, notice));
        }
        self.approval = Some(approval_id.clone());
        self.refuse(Verdict::Refuse, Rule::Approval);
        DispatchError::ApprovalRequired {
            approval_id,
            expires_ms,
        }
    }

    /// The ledger's refusals: the decision and rule for the record, and the failure.
    fn refused(&mut self, decision: Decision, lease: Lease) -> DispatchError {
        match decision {
            Decision::Reused => {
                self.refuse(Verdict::Deny, Rule::LedgerRequestId);
                DispatchError::RequestIdReused
            }
            Decision::Held(_) => {
                self.refuse(Verdict::Refuse, Rule::LedgerHeld);
                DispatchError::HeldTimeout {
                    timeout_ms: millis(self.timeout),
                }
            }
            Decision::Indeterminate { attempt, .. } => {
                // The dead holder's key is ours now, to close with this final outcome.
                self.held = Some(lease);
                self.attempt = attempt;
                self.refuse(Verdict::Refuse, Rule::LedgerLease);
                DispatchError::Indeterminate { attempt }
            }
            Decision::BudgetExhausted(over) => {
                self.refuse(Verdict::Deny, over.budget.rule());
                DispatchError::BudgetExhausted(over)
            }
            Decision::ConcurrencyLimited(over) => {
                self.refuse(Verdict::Refuse, over.budget.rule());
                DispatchError::ConcurrencyLimited(over)
            }
            Decision::ApprovalDenied { approval_id } => {
                self.approval = Some(approval_id.clone());
                self.refuse(Verdict::Deny, Rule::Approval);
                DispatchError::ApprovalDenied { approval_id }
            }
            Decision::ApprovalExpired { approval_id } => {
                self.approval = Some(approval_id.clone());
                self.refuse(Verdict::Deny, Rule::Approval);
                DispatchError::ApprovalExpired { approval_id }
            }
            // Answered by [`Gate::ask`] itself.
            Decision::Start { .. } | Decision::Replay(_) | Decision::ApprovalRequired { .. } => {
                DispatchError::Internal(
                    "the ledger's decision to run a call was taken for a refusal".into(),
                )
            }
        }
    }

    /// The ledger decided other than admitting the call: this goes into its record.
    fn refuse(&mut self, decision: Verdict, rule: Rule) {
        self.decision = decision;
        self.rule = rule;
    }
}

/// The budgets a call is admitted under: the job's, and the tool's own when its policy entry
/// sets `budget_calls` (what `--budget-tool TOOL=N` means, SPEC §16).
pub(crate) fn call_budgets(job: &Budgets, tool: &str, tool_budget: Option<u64>) -> Budgets {
    let mut budgets = job.clone();
    if let Some(n) = tool_budget {
        budgets.tools.insert(tool.to_string(), n);
    }
    budgets
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Gate {
    /// The adapter (or the endpoint) took this long.
    pub(super) fn ran(&mut self, took: Duration) {
        self.adapter_ms = Some(millis(took));
    }

    /// The audit record of the concluded job.
    fn record(&self, report: &Report<'_>, learned: &Learned) -> AuditRecord {
        let redactor = &learned.redactor;
        let (decision, rule) = match report.code() {
            // Admitted by the policy, then refused by the host's confinement.
            Some(ErrorCode::ConfinementUnavailable) => (Verdict::Refuse, Rule::Confinement),
            _ => (self.decision, self.rule),
        };
        let resources = resources_of(learned);
        AuditRecord {
            time_ms: ledger::now_ms(),
            bridge_ref: field(redactor, &self.key.bridge_ref),
            session_id: field(redactor, &self.session_id),
            request_id: field(redactor, &learned.echo.request_id),
            tool: field(redactor, &self.tool),
            operation: field(redactor, &self.operation),
            request_digest: self.digest.clone(),
            attempt: self.attempt,
            decision,
            rule,
            // No host policy is read yet: none decided.
            approval: self.approval.as_ref().map(|id| ledger::ApprovalRef {
                id: id.clone(),
                by: None,
                note: None,
                for_session: false,
            }),
            policy: learned.dispatch.policy.as_ref().map(|p| ledger::PolicyRef {
                sha256: p.sha256.clone(),
                entry: field(redactor, &p.entry),
                line: p.line.map(|l| l as u64),
            }),
            status: name(report.status().as_str()),
            code: report.error_code().map(|c| name(&redactor.redact_str(&c))),
            duration_ms: millis(learned.started.elapsed()),
            adapter_ms: self.adapter_ms,
            exit_status: report.exit(),
            resources,
            transcript_ref: report.transcript_ref().map(|r| field(redactor, &r)),
            envelope_sha256: None,
            session_key: None,
            checkpoint: None,
            network: learned
                .dispatch
                .network
                .as_ref()
                .map(|n| ledger::NetworkCounts {
                    allowed: n.allowed,
                    refused: n.refused,
                }),
            admitted: false,
        }
    }
}

/// Record the concluded job (SPEC §14.3): the envelope's text is fixed as it will be printed,
/// and stored with the audit record in one transaction — with the key when this process holds
/// it — before anything is printed. A failure is reported in the envelope and on stderr.
pub(super) fn conclude(gate: &mut Gate, report: &mut Report<'_>, learned: &Learned) {
    let record = gate.record(report, learned);
    let exit_status = report.exit();
    // A failure of the host's own making is not the key's final answer.
    let retryable = report.retryable() || host_side(report.code());
    // The job's own deadline may have passed (the adapter ran up to it): the record gets a
    // deadline of its own.
    gate.ledger
        .set_deadline(Instant::now() + gate.timeout.max(MIN_RECORD_WAIT));
    let text = report.text();
    let stored = match &gate.held {
        Some(lease) => {
            let outcome = ledger::Outcome {
                envelope: text,
                exit_status,
                retryable,
                adapter_ms: gate.adapter_ms.unwrap_or(0),
            };
            gate.ledger
                .finish(&gate.key, lease, &outcome, &record)
                .map(|_| ())
        }
        None => gate.ledger.record(&record),
    };
    if let Err(err) = stored {
        report.ledger_failed(&err.to_string());
    }
}

impl Gate {
    /// The key and this process's lease on it, when it holds the key.
    pub(super) fn holding(&self) -> Option<(&Key, &Lease)> {
        self.held.as_ref().map(|lease| (&self.key, lease))
    }
}

/// After the envelope was printed, before the process exits: checkpoint the ledger (SPEC
/// §14.4), so that the file alone holds every call — a copy of it without its `-wal` replays
/// them. Best effort, waiting for no other writer.
pub(super) fn checkpoint(gate: &mut Gate) {
    gate.ledger.checkpoint();
}

/// The codes of an outcome where nothing started because of the host (SPEC §14.4): recorded
/// in the audit trail, but not stored as the key's final envelope, so that the same request
/// runs once the host fixed the problem. (`artifact_dir_unavailable` is found before the
/// ledger step and never reaches a key.)
const HOST_SIDE: [ErrorCode; 5] = [
    ErrorCode::ConfinementUnavailable,
    ErrorCode::CwdUnavailable,
    ErrorCode::AdapterNotFound,
    ErrorCode::AdapterNotExecutable,
    ErrorCode::ArtifactDirUnavailable,
];

/// Whether `code` is one of [`HOST_SIDE`].
fn host_side(code: Option<ErrorCode>) -> bool {
    code.is_some_and(|code| HOST_SIDE.contains(&code))
}

/// What the adapter's run used, for its audit record: the stdout and stderr byte counts and,
/// when a process tree ran, its peak RSS and CPU times (`diagnostics.dispatch.resources`).
/// Nothing for a call that ran nothing (an endpoint's answer has only its size).
fn resources_of(learned: &Learned) -> Resources {
    let Some(run) = learned.dispatch.run.as_ref() else {
        return Resources {
            stdout_bytes: learned.dispatch.response_bytes,
            ..Resources::default()
        };
    };
    let tree = run.resources;
    Resources {
        max_rss_kb: tree.map(|t| t.max_rss_bytes / 1024),
        user_cpu_ms: tree.map(|t| t.user_ms),
        system_cpu_ms: tree.map(|t| t.system_ms),
        stdout_bytes: Some(run.stdout_bytes),
        stderr_bytes: Some(run.stderr_bytes),
    }
}

/// The least a record waits for other writers, however short the call's timeout.
const MIN_RECORD_WAIT: Duration = Duration::from_secs(2);

/// The decision and the rule behind a failure before the ledger step.
fn rule_of(err: &DispatchError) -> (Verdict, Rule) {
    match err {
        DispatchError::Denied {
            denial: Denial::ToolNotAllowed {
                by_bridge: false, ..
            },
            ..
        } => (Verdict::Deny, Rule::BridgeAllowedTools),
        DispatchError::Denied {
            denial: Denial::ToolNotAllowed { .. },
            ..
        } => (Verdict::Deny, Rule::RequestAllowedTools),
        DispatchError::Denied {
            denial: Denial::BridgeRefMismatch,
            ..
        } => (Verdict::Deny, Rule::BridgeRef),
        DispatchError::BridgeInvalid { .. } => (Verdict::Refuse, Rule::BridgeSchema),
        DispatchError::RequestInvalid { .. } | DispatchError::RequestUnreadable { .. } => {
            (Verdict::Refuse, Rule::RequestSchema)
        }
        DispatchError::RequestTooLarge { .. } => (Verdict::Refuse, Rule::RequestMaxBytes),
        DispatchError::ArtifactDir { .. } => (Verdict::Refuse, Rule::ArtifactDir),
        DispatchError::SessionMismatch => (Verdict::Deny, Rule::Session),
        DispatchError::DeniedByPolicy { .. } => (Verdict::Deny, Rule::Policy),
        DispatchError::PolicyInvalid { .. } => (Verdict::Refuse, Rule::Policy),
        _ => (Verdict::Refuse, Rule::Dispatch),
    }
}

/// A key's id as the ledger keeps it: `sha256:` and the hex SHA-256 of the id. The ids are
/// the sandbox's to choose and may carry anything, a secret included; the calls table keeps
/// only their digests, the audit record the redacted ids.
pub(crate) fn id_digest(id: &str) -> String {
    format!("sha256:{}", canonical::sha256_hex(id.as_bytes()))
}

/// `sandbox_session.sandbox_session_id` of the request as read (empty without one).
fn session_of(request: Option<&Document>) -> String {
    request
        .and_then(|doc| Fields::parse(doc.text()))
        .and_then(|top| top.get("sandbox_session").and_then(Fields::parse))
        .and_then(|session| session.get("sandbox_session_id").and_then(raw::string))
        .map(|id| id.into_owned())
        .unwrap_or_default()
}

/// `diagnostics.ledger.attempt` of a recorded envelope.
fn recorded_attempt(envelope: &str) -> Option<u32> {
    let top = Fields::parse(envelope)?;
    let ledger = Fields::parse(top.get("diagnostics")?)
        .and_then(|d| d.get("ledger").and_then(Fields::parse))?;
    u32::try_from(raw::integer(ledger.get("attempt")?)?).ok()
}

/// A text field of an audit record: redacted, control characters escaped, cut at the
/// record's bound.
fn field(redactor: &Redactor, text: &str) -> String {
    let escaped = ptd_wire::terminal::escape(&redactor.redact_str(text)).into_owned();
    ptd_wire::terminal::cut_at_char_boundary(&escaped, MAX_FIELD_BYTES)
        .chars()
        .filter(|c| !c.is_control())
        .collect()
}

/// A rule, status or code as a record's [`Name`] (an adapter's own code outside the name's
/// alphabet is cleaned, see [`Name::lossy`]).
fn name(text: &str) -> Name {
    Name::lossy(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_host_side_codes_leave_a_key_open() {
        for code in HOST_SIDE {
            assert!(host_side(Some(code)), "{code:?}");
        }
        assert!(!host_side(Some(ErrorCode::InternalError)));
        assert!(!host_side(None));
    }
}
