//! Approvals (SPEC §18): a policy entry with `decision = "ask"` makes a call wait for a person.
//!
//! The first time a key is asked, [`super::Ledger::begin`] records a pending [`Approval`] bound
//! to the key and the request digest ([`super::Decision::ApprovalRequired`]); a person approves
//! or denies it with [`super::Ledger::decide_approval`], one transaction that also appends the
//! decision's audit record; the next `begin` of the same key and digest then runs it (once: the
//! key is `running`, then `final`, and replays from then on), or answers that it was denied or
//! expired. The rules are [`super::decide`]'s; here are the types, the bounds, and the pure
//! rules of a person's decision ([`settle`]).

use super::audit::{self, ApprovalRef, AuditRecord, Name, PolicyRef, Resources, Rule, Verdict};
use super::LedgerError;

/// The longest [`Ask::input_shown`] (and so [`Approval::input_shown`]): 64 KiB.
pub const MAX_INPUT_SHOWN_BYTES: usize = 64 * 1024;

/// What the policy asks for a call whose entry says `decision = "ask"` (SPEC §18).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// `approval_ttl`: how long a new approval stays open, ms.
    pub ttl_ms: u64,
    /// The policy's SHA-256, 64 lower-case hex digits.
    pub policy_sha256: String,
    /// The deciding entry's `match`.
    pub entry: String,
    /// The line of the deciding entry's header, from 1.
    pub line: Option<u64>,
    /// The session id as the request has it, already redacted by the caller.
    pub session_shown: String,
    /// The request id, redacted.
    pub request_shown: String,
    /// The request's `operation`.
    pub operation: String,
    /// The request's input, redacted and bounded by the caller: at most
    /// [`MAX_INPUT_SHOWN_BYTES`] bytes ([`super::Ledger::begin`] refuses a longer one with
    /// [`LedgerError::Record`]).
    pub input_shown: String,
}

impl Ask {
    /// The bounds [`super::Ledger::begin`] holds it to: what an approval and its decision's
    /// audit record will hold must fit that record's bounds.
    pub(crate) fn check(&self) -> Result<(), LedgerError> {
        let bad = |why: String| Err(LedgerError::Record(format!("the approval's {why}")));
        for (name, value) in [
            ("session", self.session_shown.as_str()),
            ("request id", &self.request_shown),
            ("operation", &self.operation),
            ("policy entry", &self.entry),
        ] {
            if value.len() > audit::MAX_FIELD_BYTES {
                return bad(format!(
                    "{name} is longer than {} bytes",
                    audit::MAX_FIELD_BYTES
                ));
            }
            if value.chars().any(char::is_control) {
                return bad(format!("{name} holds a control character"));
            }
        }
        if self.entry.is_empty() {
            return bad("policy entry is empty".into());
        }
        if !audit::is_sha256_hex(&self.policy_sha256) {
            return bad("policy sha256 is not a SHA-256 in lower-case hex".into());
        }
        if self.line == Some(0) {
            return bad("policy line is 0 (lines count from 1)".into());
        }
        if self.input_shown.len() > MAX_INPUT_SHOWN_BYTES {
            return bad(format!(
                "input is longer than {MAX_INPUT_SHOWN_BYTES} bytes"
            ));
        }
        Ok(())
    }
}

/// Where an approval is. Stored as `pending`, `approved` or `denied`; an approval past its
/// expiry keeps its state (expiry is a matter of the time, [`Approval::expired_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalState {
    /// Nobody decided yet.
    Pending,
    /// A person said yes.
    Approved,
    /// A person said no.
    Denied,
}

impl ApprovalState {
    /// The stored spelling: `pending`, `approved`, `denied`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
        }
    }

    /// The state spelled `text`.
    pub fn parse(text: &str) -> Option<ApprovalState> {
        [
            ApprovalState::Pending,
            ApprovalState::Approved,
            ApprovalState::Denied,
        ]
        .into_iter()
        .find(|state| state.as_str() == text)
    }
}

impl std::fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One approval as the ledger keeps it: bound to a key (one approval per key) and to the
/// digest of the request that was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// `apr_` and 32 lower-case hex digits.
    pub id: String,
    /// The key's bridge ref.
    pub bridge_ref: String,
    /// The key's session (its digest, [`super::Key::session_id`]).
    pub session_key: String,
    /// The key's request id (its digest, [`super::Key::request_id`]).
    pub request_key: String,
    /// The digest of the request that was asked.
    pub digest: String,
    /// The canonical tool id.
    pub tool: String,
    /// The request's `operation`.
    pub operation: String,
    /// The session id as the request had it, redacted ([`Ask::session_shown`]).
    pub session_shown: String,
    /// The request id, redacted ([`Ask::request_shown`]).
    pub request_shown: String,
    /// The request's input, redacted and bounded ([`Ask::input_shown`]).
    pub input_shown: String,
    /// The policy's SHA-256.
    pub policy_sha256: String,
    /// The policy entry that asked.
    pub entry: String,
    /// Its line.
    pub line: Option<u64>,
    /// When it was asked, ms since the Unix epoch.
    pub created_ms: u64,
    /// When it expires (`created_ms` + `approval_ttl`): from then on it is neither pending
    /// nor approved.
    pub expires_ms: u64,
    /// Pending, approved or denied.
    pub state: ApprovalState,
    /// Approved for the session's later calls of the same tool, until `expires_ms`.
    pub for_session: bool,
    /// Who decided.
    pub decided_by: Option<String>,
    /// Their note.
    pub note: Option<String>,
    /// When they decided.
    pub decided_ms: Option<u64>,
}

impl Approval {
    /// Whether it has expired at `now_ms`.
    pub fn expired_at(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_ms
    }

    /// Whether it lets a call run at `now_ms`: approved and not expired.
    pub fn grants_at(&self, now_ms: u64) -> bool {
        self.state == ApprovalState::Approved && !self.expired_at(now_ms)
    }
}

/// Which approvals [`super::Ledger::approvals`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalFilter {
    /// Only those in state `pending` (expired ones included: their `expires_ms` says so).
    pub pending_only: bool,
    /// Only those of this session key ([`super::Key::session_id`]).
    pub session_key: Option<String>,
}

/// A person's decision on an approval ([`super::Ledger::decide_approval`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// Approve (`true`) or deny.
    pub approve: bool,
    /// Who decides: 1 to 256 bytes, no control character.
    pub by: String,
    /// Their note: at most 1024 bytes, no control character.
    pub note: Option<String>,
    /// Approve the session's later calls of the same tool too, until the approval's expiry
    /// (only with `approve`).
    pub for_session: bool,
    /// Now, ms since the Unix epoch.
    pub now_ms: u64,
}

/// Why [`super::Ledger::decide_approval`] changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// No approval has this id.
    #[error("no approval has the id {0}")]
    Unknown(String),
    /// It was approved or denied already.
    #[error("approval {id} was {state} already")]
    AlreadyDecided {
        /// The approval.
        id: String,
        /// What it is.
        state: ApprovalState,
    },
    /// It is past its expiry.
    #[error("approval {id} has expired")]
    Expired {
        /// The approval.
        id: String,
    },
    /// The decision itself is not acceptable: `by` or `note` too long or holding a control
    /// character, `for_session` with a denial.
    #[error("invalid decision: {0}")]
    Invalid(String),
    /// The ledger cannot be used.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// A new approval id: `apr_` and 32 lower-case hex digits.
pub(crate) fn new_approval_id() -> String {
    format!(
        "apr_{:016x}{:016x}",
        ptd_sys::fs::random_u64(),
        ptd_sys::fs::random_u64()
    )
}

/// The bounds of `decided`, before anything is read.
pub(crate) fn check_decided(decided: &Decided) -> Result<(), ApprovalError> {
    if let Some(problem) = audit::by_problem(&decided.by) {
        return Err(ApprovalError::Invalid(problem));
    }
    if let Some(problem) = decided.note.as_deref().and_then(audit::note_problem) {
        return Err(ApprovalError::Invalid(problem));
    }
    if decided.for_session && !decided.approve {
        return Err(ApprovalError::Invalid(
            "for_session is only given with an approval".into(),
        ));
    }
    Ok(())
}

/// A person's decision on `approval` as it is stored: the approval as it becomes, and the
/// audit record of the decision — or why nothing changes (already decided, expired).
pub(crate) fn settle(
    approval: &Approval,
    decided: &Decided,
) -> Result<(Approval, AuditRecord), ApprovalError> {
    check_decided(decided)?;
    if approval.state != ApprovalState::Pending {
        return Err(ApprovalError::AlreadyDecided {
            id: approval.id.clone(),
            state: approval.state,
        });
    }
    if approval.expired_at(decided.now_ms) {
        return Err(ApprovalError::Expired {
            id: approval.id.clone(),
        });
    }
    let (state, verdict, rule, status) = if decided.approve {
        (
            ApprovalState::Approved,
            Verdict::Admit,
            Rule::ApprovalApprove,
            "approved",
        )
    } else {
        (
            ApprovalState::Denied,
            Verdict::Deny,
            Rule::ApprovalDeny,
            "denied",
        )
    };
    let updated = Approval {
        state,
        for_session: decided.for_session,
        decided_by: Some(decided.by.clone()),
        note: decided.note.clone(),
        decided_ms: Some(decided.now_ms),
        ..approval.clone()
    };
    let record = AuditRecord {
        time_ms: decided.now_ms,
        bridge_ref: approval.bridge_ref.clone(),
        session_id: approval.session_shown.clone(),
        request_id: approval.request_shown.clone(),
        tool: approval.tool.clone(),
        operation: approval.operation.clone(),
        request_digest: approval.digest.clone(),
        attempt: 0,
        decision: verdict,
        rule,
        policy: Some(PolicyRef {
            sha256: approval.policy_sha256.clone(),
            entry: approval.entry.clone(),
            line: approval.line,
        }),
        approval: Some(ApprovalRef {
            id: approval.id.clone(),
            by: Some(decided.by.clone()),
            note: decided.note.clone(),
            for_session: decided.for_session,
        }),
        status: Name::new(status).map_err(ApprovalError::Invalid)?,
        code: None,
        duration_ms: 0,
        adapter_ms: None,
        exit_status: 0,
        resources: Resources::default(),
        transcript_ref: None,
        envelope_sha256: None,
        session_key: None,
        network: None,
        checkpoint: None,
        admitted: false,
    };
    record
        .check()
        .map_err(|why| ApprovalError::Ledger(LedgerError::Record(why)))?;
    Ok((updated, record))
}
