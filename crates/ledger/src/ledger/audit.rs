//! The audit trail (SPEC §14.3): one [`AuditRecord`] per call that got a request, chained.
//!
//! A record has only typed metadata fields: identifiers, digests, short rule and code names,
//! numbers, the transcript ref, the host policy's digest and deciding entry, and the approval a
//! record is about. There is no field of type JSON value, and no free text but a person's own
//! bounded note on an approval they decided, so a payload (`input`, `output`) cannot be put in
//! one; text fields are bounded and the short names are checked against a small alphabet when a
//! record is built AND when one is read back.
//! The caller hands in values that already went through §5 redaction.
//!
//! Chain: the stored body of record `seq` is the canonical JSON (`envelope::canonical`) of the
//! record's fields plus `seq` and `prev` (the previous record's hash, 64 zeros for the first);
//! its hash is the SHA-256 of that body. [`check_chain`] recomputes everything from the stored
//! rows; it owns what "intact" means, the store only hands rows over.

use ptd_wire::envelope::canonical;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `prev` of the first record.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The longest identifier-like field (bridge ref, session, request id, tool, operation,
/// transcript ref, session key, policy entry) a record holds.
pub const MAX_FIELD_BYTES: usize = 1024;

/// A short machine name: 1–64 bytes of `[a-z0-9_.:-]` — a status or an error code. Checked on
/// construction and when read back. (A rule is a [`Rule`].)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Name(String);

impl Name {
    /// `text` if it is a valid name.
    pub fn new(text: &str) -> Result<Name, String> {
        let ok = !text.is_empty()
            && text.len() <= 64
            && text.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'_' | b'.' | b':' | b'-')
            });
        if ok {
            Ok(Name(text.to_string()))
        } else {
            Err(format!(
                "{:?} is not a rule, status or code name ([a-z0-9_.:-], 1-64 bytes)",
                ptd_wire::terminal::escape(text)
            ))
        }
    }

    /// `text` as a name, cleaned when it is not one: lower-cased, every other character
    /// outside the alphabet turned into `_`, cut at 64 bytes (`_` for empty text). For codes
    /// an adapter chose itself.
    pub fn lossy(text: &str) -> Name {
        Name::new(text).unwrap_or_else(|_| {
            let cleaned: String = text
                .chars()
                .map(|c| match c.to_ascii_lowercase() {
                    c @ ('a'..='z' | '0'..='9' | '_' | '.' | ':' | '-') => c,
                    _ => '_',
                })
                .take(64)
                .collect();
            Name(if cleaned.is_empty() {
                "_".to_string()
            } else {
                cleaned
            })
        })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Name {
    type Error = String;
    fn try_from(text: String) -> Result<Name, String> {
        Name::new(&text)
    }
}

impl From<Name> for String {
    fn from(name: Name) -> String {
        name.0
    }
}

/// The rule behind a record's decision (docs/ledger.md's table). Stored and exported as its
/// spelling ([`Rule::as_str`]), which is part of the ledger's format: a stored spelling that is
/// none of these is an unreadable record, not a new rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum Rule {
    /// `bridge.allowed_tools`: admitted, or denied by the bridge's allowlist.
    BridgeAllowedTools,
    /// `request.authorization.allowed_tools`: denied by the request's own allowlist.
    RequestAllowedTools,
    /// `bridge_ref`: `metadata.bridge_ref` names another bridge.
    BridgeRef,
    /// `bridge.schema`: the bridge is invalid.
    BridgeSchema,
    /// `request.schema`: the request is invalid or unreadable.
    RequestSchema,
    /// `request.max_bytes`: the request is too large.
    RequestMaxBytes,
    /// `artifact_dir`: the transcript folder cannot be used.
    ArtifactDir,
    /// `session`: the request names another session than `--session`.
    Session,
    /// `budget:calls`: over `--budget-calls`.
    BudgetCalls,
    /// `budget:tool`: over `--budget-tool`.
    BudgetTool,
    /// `budget:adapter_ms`: over `--budget-adapter-ms`.
    BudgetAdapterMs,
    /// `budget:concurrent`: over `--max-concurrent`.
    BudgetConcurrent,
    /// `ledger:replay`: answered from the ledger.
    LedgerReplay,
    /// `ledger:request_id`: the request id was used for another request.
    LedgerRequestId,
    /// `ledger:held`: another dispatcher held the key past the call's timeout.
    LedgerHeld,
    /// `ledger:lease`: the key's holder died (`dispatch_indeterminate`).
    LedgerLease,
    /// `ledger`: the ledger could not be used.
    Ledger,
    /// `confinement`: admitted by the policy, refused by the host's confinement.
    Confinement,
    /// `dispatch`: another failure before the adapter started.
    Dispatch,
    /// `policy`: denied by the host policy's `decision` (SPEC §16), or the policy could not
    /// be loaded.
    Policy,
    /// `approval`: the host policy asks a person first (SPEC §18) and none said yes: the
    /// approval is required (pending), was denied, or expired.
    Approval,
    /// `approval:approve`: a person approved a pending approval (`approvals approve`).
    ApprovalApprove,
    /// `approval:deny`: a person denied a pending approval (`approvals deny`).
    ApprovalDeny,
    /// `ledger:checkpoint`: `ledger prune` removed the records before it; the record's
    /// [`AuditRecord::checkpoint`] anchors what is left.
    LedgerCheckpoint,
}

impl Rule {
    /// Every rule, in docs/ledger.md's order.
    pub const ALL: [Rule; 24] = [
        Rule::BridgeAllowedTools,
        Rule::RequestAllowedTools,
        Rule::BridgeRef,
        Rule::BridgeSchema,
        Rule::RequestSchema,
        Rule::RequestMaxBytes,
        Rule::ArtifactDir,
        Rule::Session,
        Rule::BudgetCalls,
        Rule::BudgetTool,
        Rule::BudgetAdapterMs,
        Rule::BudgetConcurrent,
        Rule::LedgerReplay,
        Rule::LedgerRequestId,
        Rule::LedgerHeld,
        Rule::LedgerLease,
        Rule::Ledger,
        Rule::Confinement,
        Rule::Dispatch,
        Rule::Policy,
        Rule::Approval,
        Rule::ApprovalApprove,
        Rule::ApprovalDeny,
        Rule::LedgerCheckpoint,
    ];

    /// The rule's spelling in a stored record and in `audit export`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::BridgeAllowedTools => "bridge.allowed_tools",
            Rule::RequestAllowedTools => "request.authorization.allowed_tools",
            Rule::BridgeRef => "bridge_ref",
            Rule::BridgeSchema => "bridge.schema",
            Rule::RequestSchema => "request.schema",
            Rule::RequestMaxBytes => "request.max_bytes",
            Rule::ArtifactDir => "artifact_dir",
            Rule::Session => "session",
            Rule::BudgetCalls => "budget:calls",
            Rule::BudgetTool => "budget:tool",
            Rule::BudgetAdapterMs => "budget:adapter_ms",
            Rule::BudgetConcurrent => "budget:concurrent",
            Rule::LedgerReplay => "ledger:replay",
            Rule::LedgerRequestId => "ledger:request_id",
            Rule::LedgerHeld => "ledger:held",
            Rule::LedgerLease => "ledger:lease",
            Rule::Ledger => "ledger",
            Rule::Confinement => "confinement",
            Rule::Dispatch => "dispatch",
            Rule::Policy => "policy",
            Rule::Approval => "approval",
            Rule::ApprovalApprove => "approval:approve",
            Rule::ApprovalDeny => "approval:deny",
            Rule::LedgerCheckpoint => "ledger:checkpoint",
        }
    }

    /// The rule spelled `text`; an error names the text when it is no rule.
    pub fn parse(text: &str) -> Result<Rule, String> {
        Rule::ALL
            .into_iter()
            .find(|rule| rule.as_str() == text)
            .ok_or_else(|| format!("{:?} is not a rule", ptd_wire::terminal::escape(text)))
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for Rule {
    type Error = String;
    fn try_from(text: String) -> Result<Rule, String> {
        Rule::parse(&text)
    }
}

impl From<Rule> for &'static str {
    fn from(rule: Rule) -> &'static str {
        rule.as_str()
    }
}

/// What happened to the call, in one word; the `rule` says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Admitted: the adapter was started.
    Admit,
    /// Refused by a policy: allowlist, bridge ref, budget, a reused request id.
    Deny,
    /// Answered from the ledger without starting anything.
    Replay,
    /// Not started for a reason that is not a policy: concurrency, a held key that did not
    /// finish in time, an indeterminate key, an unusable ledger, an invalid request.
    Refuse,
}

/// What the adapter run used (all optional: a call that never started has none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// Peak resident set size of the adapter, KiB.
    pub max_rss_kb: Option<u64>,
    /// User CPU time, ms.
    pub user_cpu_ms: Option<u64>,
    /// System CPU time, ms.
    pub system_cpu_ms: Option<u64>,
    /// Bytes the adapter wrote on stdout.
    pub stdout_bytes: Option<u64>,
    /// Bytes the adapter wrote on stderr.
    pub stderr_bytes: Option<u64>,
}

/// The host policy (`--policy`) in force for a call and the entry of it that decided, on the
/// call's audit record ([`AuditRecord::policy`]): the same three members as the envelope's
/// `diagnostics.dispatch.policy`.
///
/// Stored and exported as `{"sha256": …, "entry": …, "line": …}` (`line` absent when `None`);
/// [`AuditRecord::check`] bounds it when a record is built and when one is read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRef {
    /// SHA-256 of the policy file as it was read, 64 lower-case hex digits.
    pub sha256: String,
    /// The deciding entry's `match` (`workspace.*`, `git.commit`), or `defaults` when no
    /// `[[tool]]` entry covered the tool: 1 to [`MAX_FIELD_BYTES`] bytes, no control character.
    pub entry: String,
    /// The line (from 1) of that entry's `[[tool]]` header, or of `[defaults]`; `None` when there
    /// is none (a policy without a `[defaults]` table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// The connections an adapter asked the egress proxy for (SPEC §17), on the call's audit
/// record ([`AuditRecord::network`]): how many were allowed and how many refused. Stored and
/// exported as `{"allowed": …, "refused": …}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkCounts {
    pub allowed: u64,
    pub refused: u64,
}

impl PolicyRef {
    /// The bounds [`AuditRecord::check`] holds it to.
    fn check(&self) -> Result<(), String> {
        if !is_sha256_hex(&self.sha256) {
            return Err("policy.sha256 is not a SHA-256 in lower-case hex".into());
        }
        if self.entry.is_empty() {
            return Err("policy.entry is empty".into());
        }
        if self.line == Some(0) {
            return Err("policy.line is 0 (lines count from 1)".into());
        }
        Ok(())
    }
}

/// The approval (SPEC §18) a record is about ([`AuditRecord::approval`]): its id, and for a
/// person's decision who made it, their note and whether it approves the tool for the rest of
/// the session.
///
/// Stored and exported as `{"id": …, "by": …, "note": …, "for_session": …}` (`by` and `note`
/// absent when `None`); [`AuditRecord::check`] bounds it when a record is built and when one is
/// read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRef {
    /// The approval's id: `apr_` and 32 lower-case hex digits.
    pub id: String,
    /// Who decided (`approvals approve --by`): 1 to [`MAX_BY_BYTES`] bytes, no control
    /// character.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The person's note: at most [`MAX_NOTE_BYTES`] bytes, no control character. The one
    /// free text a record can hold: a person's words about the decision, never a payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Whether the approval covers the session's later calls of the same tool.
    pub for_session: bool,
}

/// The longest [`ApprovalRef::by`].
pub const MAX_BY_BYTES: usize = 256;
/// The longest [`ApprovalRef::note`].
pub const MAX_NOTE_BYTES: usize = 1024;

/// Whether `text` is an approval id as the ledger makes one: `apr_` and 32 lower-case hex
/// digits.
pub fn is_approval_id(text: &str) -> bool {
    text.strip_prefix("apr_").is_some_and(|hex| {
        hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Why `text` cannot be an approval's `by` (`None`: it can).
pub(crate) fn by_problem(text: &str) -> Option<String> {
    if text.is_empty() {
        Some("by is empty".into())
    } else if text.len() > MAX_BY_BYTES {
        Some(format!("by is longer than {MAX_BY_BYTES} bytes"))
    } else if text.chars().any(char::is_control) {
        Some("by holds a control character".into())
    } else {
        None
    }
}

/// Why `text` cannot be an approval's `note` (`None`: it can).
pub(crate) fn note_problem(text: &str) -> Option<String> {
    if text.len() > MAX_NOTE_BYTES {
        Some(format!("note is longer than {MAX_NOTE_BYTES} bytes"))
    } else if text.chars().any(char::is_control) {
        Some("note holds a control character".into())
    } else {
        None
    }
}

impl ApprovalRef {
    /// The bounds [`AuditRecord::check`] holds it to.
    fn check(&self) -> Result<(), String> {
        if !is_approval_id(&self.id) {
            return Err("approval.id is not apr_ and 32 lower-case hex digits".into());
        }
        if let Some(problem) = self.by.as_deref().and_then(by_problem) {
            return Err(format!("approval.{problem}"));
        }
        if let Some(problem) = self.note.as_deref().and_then(note_problem) {
            return Err(format!("approval.{problem}"));
        }
        Ok(())
    }
}

/// Whether `text` is a SHA-256 as the ledger writes one: 64 lower-case hex digits.
pub(crate) fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// One audit record: metadata only (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// When the call ended, ms since the Unix epoch.
    pub time_ms: u64,
    /// The bridge ref (SPEC §4.6).
    pub bridge_ref: String,
    /// `sandbox_session.sandbox_session_id`, empty when the request has none.
    pub session_id: String,
    /// The request's `request_id`.
    pub request_id: String,
    /// The canonical tool id.
    pub tool: String,
    /// The request's `operation`.
    pub operation: String,
    /// SHA-256 of the canonical request.
    pub request_digest: String,
    /// The key's attempt (1 for a first run; 0 when the call never reached the ledger's key).
    pub attempt: u32,
    /// The decision.
    pub decision: Verdict,
    /// The rule that made it, e.g. `bridge.allowed_tools`, `budget:calls`, `ledger:replay`.
    pub rule: Rule,
    /// The host policy in force and the entry of it that decided, when the dispatcher ran with
    /// one. Absent from the stored body when `None`, so that every record written without it —
    /// before the field existed included — keeps its bytes and its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyRef>,
    /// The approval (SPEC §18) the record is about: the one a call was asked for, denied or
    /// found expired on, or the one a person decided. Absent from the stored body when `None`,
    /// so that every record written without it — before the field existed included — keeps
    /// its bytes and its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalRef>,
    /// The egress proxy's counts (SPEC §17), when the adapter ran with `--network allow:`.
    /// Absent from the stored body when `None`, so that every record written without it —
    /// before the field existed included — keeps its bytes and its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkCounts>,
    /// What `ledger prune` removed (rule `ledger:checkpoint`): the anchor the kept chain starts
    /// from and the budget use of the removed records. Absent from the stored body when
    /// `None`, so that every other record keeps its bytes and its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// The final status of the envelope.
    pub status: Name,
    /// The envelope's `error.code`, if any.
    pub code: Option<Name>,
    /// The whole call, ms.
    pub duration_ms: u64,
    /// The adapter's wall time, ms (what `--budget-adapter-ms` counts), if it ran.
    pub adapter_ms: Option<u64>,
    /// The dispatcher's exit status.
    pub exit_status: u8,
    /// What the adapter used.
    pub resources: Resources,
    /// The transcript ref, if a transcript was written.
    pub transcript_ref: Option<String>,
    /// SHA-256 of the envelope stored with the key by this record's transaction (SPEC §14.4):
    /// set by [`super::Ledger::finish`], absent from every other record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope_sha256: Option<String>,
    /// The session key the budget counters use (the digest of the host's session id, as the
    /// key's row holds it), set by the store on every record of a call this process held —
    /// the records whose adapter time the session was charged (SPEC §14.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    /// Whether this record closed a key's `running` claim, which counted one admitted call
    /// against the session's and the tool's budgets; set by the store (SPEC §14.4).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admitted: bool,
}

impl AuditRecord {
    /// Every bound a stored record must keep; the store calls it before appending and
    /// [`check_chain`] after reading.
    pub fn check(&self) -> Result<(), String> {
        for (name, value) in [
            ("bridge_ref", self.bridge_ref.as_str()),
            ("session_id", &self.session_id),
            ("request_id", &self.request_id),
            ("tool", &self.tool),
            ("operation", &self.operation),
            ("request_digest", &self.request_digest),
            (
                "transcript_ref",
                self.transcript_ref.as_deref().unwrap_or(""),
            ),
            ("session_key", self.session_key.as_deref().unwrap_or("")),
            (
                "policy.entry",
                self.policy.as_ref().map_or("", |p| p.entry.as_str()),
            ),
        ] {
            if value.len() > MAX_FIELD_BYTES {
                return Err(format!("{name} is longer than {MAX_FIELD_BYTES} bytes"));
            }
            if value.chars().any(char::is_control) {
                return Err(format!("{name} holds a control character"));
            }
        }
        if self.admitted && self.session_key.is_none() {
            return Err("an admitted record has no session_key".into());
        }
        if let Some(digest) = &self.envelope_sha256 {
            if !is_sha256_hex(digest) {
                return Err("envelope_sha256 is not a SHA-256 in hex".into());
            }
        }
        if let Some(policy) = &self.policy {
            policy.check()?;
        }
        if let Some(approval) = &self.approval {
            approval.check()?;
        }
        if let Some(checkpoint) = &self.checkpoint {
            checkpoint.check()?;
        }
        Ok(())
    }
}

/// A record as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// Position in the chain, from 1.
    pub seq: u64,
    /// `time_ms` again, as a column the store can index for `--since`.
    pub time_ms: u64,
    /// The previous record's hash.
    pub prev: String,
    /// SHA-256 of `body`.
    pub hash: String,
    /// The canonical JSON of the record with `seq` and `prev`.
    pub body: String,
}

/// The body and hash of `record` as record `seq` after `prev`.
pub(crate) fn seal(record: &AuditRecord, seq: u64, prev: &str) -> Result<StoredRecord, String> {
    record.check()?;
    let Value::Object(mut map) = serde_json::to_value(record).map_err(|e| e.to_string())? else {
        return Err("an audit record is not a JSON object".into());
    };
    map.insert("seq".into(), Value::from(seq));
    map.insert("prev".into(), Value::from(prev));
    let body = canonical::to_string(&Value::Object(map));
    Ok(StoredRecord {
        seq,
        time_ms: record.time_ms,
        prev: prev.to_string(),
        hash: canonical::sha256_hex(body.as_bytes()),
        body,
    })
}

/// The record inside a stored body, with its `seq` and `prev`; an error says why it is not one.
pub fn open(body: &str) -> Result<(u64, String, AuditRecord), String> {
    let value: Value = serde_json::from_str(body).map_err(|e| format!("unreadable body: {e}"))?;
    let Value::Object(mut map): Value = value else {
        return Err("the body is not a JSON object".into());
    };
    let seq = map
        .remove("seq")
        .and_then(|v| v.as_u64())
        .ok_or("the body has no seq")?;
    let prev = match map.remove("prev") {
        Some(Value::String(s)) => s,
        _ => return Err("the body has no prev".into()),
    };
    let record: AuditRecord = serde_json::from_value(Value::Object(map))
        .map_err(|e| format!("the body is not an audit record: {e}"))?;
    record.check()?;
    Ok((seq, prev, record))
}

/// Whether the stored record `body` (whose stored hash is `hash`) is intact and covers the
/// stored `envelope` with its `exit_status` (SPEC §14.4); an error says why not.
pub fn covers(body: &str, hash: &str, envelope: &str, exit_status: u8) -> Result<(), String> {
    if canonical::sha256_hex(body.as_bytes()) != hash {
        return Err("its audit record's hash does not match its content (edited)".into());
    }
    let (seq, prev, record) = open(body)?;
    if seal(&record, seq, &prev)?.body != body {
        return Err("its audit record is not in canonical form (edited)".into());
    }
    match &record.envelope_sha256 {
        Some(digest) if *digest == canonical::sha256_hex(envelope.as_bytes()) => {}
        Some(_) => {
            return Err("the stored envelope does not match its audit record (edited)".into())
        }
        None => return Err("the stored envelope's audit record holds no digest of it".into()),
    }
    if record.exit_status != exit_status {
        return Err("the stored exit status does not match its audit record (edited)".into());
    }
    Ok(())
}

/// Why the chain is broken, at the first record that does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    /// The record's position (for a missing record, the position it should have had).
    pub seq: u64,
    /// What is wrong.
    pub reason: String,
}

/// What [`check_chain`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Every record holds; `head` is the last hash (or [`GENESIS`] for an empty trail).
    Intact {
        /// How many records.
        records: u64,
        /// The hash of the last record, for anchoring outside the file.
        head: String,
    },
    /// The first record that does not hold, after `intact` records that do.
    Broken {
        /// Records before it that hold.
        intact: u64,
        /// The first bad one.
        at: Break,
    },
    /// Every record holds, but a budget counter is not what the records imply (SPEC §14.4).
    Miscounted {
        /// How many records (all intact).
        records: u64,
        /// Which counter: the session key and bridge ref, and `calls`, `adapter_ms` or the tool.
        counter: String,
        /// What it holds and what the records imply.
        reason: String,
    },
}

/// Incremental chain check: feed rows in `seq` order with [`Chain::push`], then
/// [`Chain::finish`] with the head the store recorded.
#[derive(Debug)]
pub(crate) struct Chain {
    next: u64,
    prev: String,
    /// How many records were pushed.
    count: u64,
    /// The envelope digest and exit status of every record that stored an envelope, by seq.
    covered: std::collections::HashMap<u64, (String, u8)>,
    /// What the records read so far imply for the budget counters.
    implied: Counters,
    /// When the trail starts after a prune: the seq and hash the first record's `prev` names,
    /// which a checkpoint record must anchor.
    anchor: Option<(u64, String)>,
    /// The budget use the anchoring checkpoint carries, once found.
    anchored: Option<Counters>,
}

impl Default for Chain {
    fn default() -> Chain {
        Chain {
            next: 1,
            prev: GENESIS.to_string(),
            count: 0,
            covered: std::collections::HashMap::new(),
            implied: Counters::default(),
            anchor: None,
            anchored: None,
        }
    }
}

/// Budget counters (SPEC §14.2) as the store keeps them or as the records imply them: per
/// (bridge ref, session key) the admitted calls and adapter ms, and per (bridge ref, session
/// key, tool) the admitted calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// (bridge ref, session key) → (admitted calls, adapter ms).
    pub sessions: std::collections::BTreeMap<(String, String), (i64, i64)>,
    /// (bridge ref, session key, tool) → admitted calls.
    pub tools: std::collections::BTreeMap<(String, String, String), i64>,
}

impl Counters {
    /// Count one admitted call of `tool` (a claim), and `adapter_ms`.
    pub fn add(&mut self, bridge_ref: &str, session: &str, tool: Option<&str>, adapter_ms: i64) {
        let calls = i64::from(tool.is_some());
        let entry = self
            .sessions
            .entry((bridge_ref.to_string(), session.to_string()))
            .or_default();
        entry.0 = entry.0.saturating_add(calls);
        entry.1 = entry.1.saturating_add(adapter_ms);
        if let Some(tool) = tool {
            let entry = self
                .tools
                .entry((
                    bridge_ref.to_string(),
                    session.to_string(),
                    tool.to_string(),
                ))
                .or_default();
            *entry = entry.saturating_add(1);
        }
    }

    /// The sum of both.
    pub(crate) fn merged(&self, other: &Counters) -> Counters {
        let mut out = self.clone();
        for (key, (calls, ms)) in &other.sessions {
            let entry = out.sessions.entry(key.clone()).or_default();
            entry.0 = entry.0.saturating_add(*calls);
            entry.1 = entry.1.saturating_add(*ms);
        }
        for (key, calls) in &other.tools {
            let entry = out.tools.entry(key.clone()).or_default();
            *entry = entry.saturating_add(*calls);
        }
        out
    }

    /// The first counter of `stored` that is not what `self` (the implied counters) says, as
    /// (the counter's name, why); a counter absent on either side is 0.
    pub(crate) fn first_difference(&self, stored: &Counters) -> Option<(String, String)> {
        let sessions = self.sessions.keys().chain(stored.sessions.keys());
        for key in sessions.collect::<std::collections::BTreeSet<_>>() {
            let want = self.sessions.get(key).copied().unwrap_or_default();
            let have = stored.sessions.get(key).copied().unwrap_or_default();
            let (bridge, session) = key;
            for (what, want, have) in [("calls", want.0, have.0), ("adapter_ms", want.1, have.1)] {
                if want != have {
                    return Some((
                        format!("session {session} of bridge {bridge}: {what}"),
                        format!("the counter is {have}, the records imply {want} (edited)"),
                    ));
                }
            }
        }
        let tools = self.tools.keys().chain(stored.tools.keys());
        for key in tools.collect::<std::collections::BTreeSet<_>>() {
            let want = self.tools.get(key).copied().unwrap_or_default();
            let have = stored.tools.get(key).copied().unwrap_or_default();
            if want != have {
                let (bridge, session, tool) = key;
                return Some((
                    format!(
                        "session {session} of bridge {bridge}: tool {}",
                        ptd_wire::terminal::escape(tool)
                    ),
                    format!("the counter is {have}, the records imply {want} (edited)"),
                ));
            }
        }
        None
    }
}

impl Chain {
    /// Check one stored row (or the reason it could not be read) against everything before it.
    pub(crate) fn push(&mut self, row: Result<StoredRecord, Break>) -> Result<(), Break> {
        let row = row?;
        let at = |reason: String| Break {
            seq: row.seq,
            reason,
        };
        // A trail that starts after a prune: its first record links to the last removed
        // one, which a checkpoint record further on must name ([`Chain::finish`] checks).
        if self.count == 0 && row.seq > 1 {
            self.anchor = Some((row.seq - 1, row.prev.clone()));
            self.next = row.seq;
            self.prev.clone_from(&row.prev);
        }
        if row.seq != self.next {
            return Err(Break {
                seq: self.next,
                reason: format!("missing (the next record found is {})", row.seq),
            });
        }
        let (seq, prev, record) = open(&row.body).map_err(at)?;
        if seq != row.seq || prev != row.prev || record.time_ms != row.time_ms {
            return Err(at("its columns do not match its body (edited)".into()));
        }
        let resealed = seal(&record, seq, &prev).map_err(at)?;
        if resealed.body != row.body {
            return Err(at("its body is not in canonical form (edited)".into()));
        }
        if resealed.hash != row.hash {
            return Err(at("its hash does not match its content (edited)".into()));
        }
        if row.prev != self.prev {
            return Err(at(
                "its prev does not match the hash of the record before it (a record was \
                 removed or replaced)"
                    .into(),
            ));
        }
        if let Some(session) = &record.session_key {
            let adapter_ms = i64::try_from(record.adapter_ms.unwrap_or(0)).unwrap_or(i64::MAX);
            let tool = record.admitted.then_some(record.tool.as_str());
            self.implied
                .add(&record.bridge_ref, session, tool, adapter_ms);
        }
        if let Some(digest) = record.envelope_sha256 {
            self.covered.insert(seq, (digest, record.exit_status));
        }
        if let (Some(checkpoint), Some((anchor_seq, anchor_hash))) =
            (&record.checkpoint, &self.anchor)
        {
            if checkpoint.seq == *anchor_seq && checkpoint.hash == *anchor_hash {
                self.anchored = Some(checkpoint.counters());
            }
        }
        self.count += 1;
        self.next += 1;
        self.prev = row.hash;
        Ok(())
    }

    /// Whether the call row's stored `envelope` and `exit_status` are the ones its record
    /// `record_seq` (checked by [`Chain::push`] already) names (SPEC §14.4).
    pub(crate) fn check_stored(
        &self,
        record_seq: Option<u64>,
        envelope: &str,
        exit_status: u8,
    ) -> Result<(), Break> {
        let Some(seq) = record_seq else {
            return Err(Break {
                seq: self.next,
                reason: "a stored envelope has no audit record".into(),
            });
        };
        let at = |reason: &str| Break {
            seq,
            reason: reason.into(),
        };
        match self.covered.get(&seq) {
            None => Err(at(
                "a stored envelope names this record, which holds no digest of it",
            )),
            Some((digest, _)) if *digest != canonical::sha256_hex(envelope.as_bytes()) => Err(at(
                "the envelope stored with this record does not match it (edited)",
            )),
            Some((_, exit)) if *exit != exit_status => Err(at(
                "the exit status stored with this record does not match it (edited)",
            )),
            Some(_) => Ok(()),
        }
    }

    /// What the records pushed so far imply for the budget counters: the admitted calls
    /// (records that closed a claim) and adapter ms (records of held calls) of each session.
    pub(crate) fn implied(&self) -> Counters {
        match &self.anchored {
            Some(carried) => self.implied.merged(carried),
            None => self.implied.clone(),
        }
    }

    /// What the records pushed so far imply, without an anchoring checkpoint's carried use.
    pub(crate) fn own(&self) -> &Counters {
        &self.implied
    }

    /// The budget use the anchoring checkpoint carries (none for a trail from record 1).
    pub(crate) fn anchored(&self) -> Option<&Counters> {
        self.anchored.as_ref()
    }

    /// The outcome, given the head (`seq`, hash) the store recorded with its last append.
    /// A trail that starts after a prune must hold the checkpoint record that anchors it.
    /// Returns how many records the trail holds and its last hash.
    pub(crate) fn finish(self, head: Option<(u64, String)>) -> Result<(u64, String), Break> {
        let last = self.next - 1;
        if let (Some((anchor, _)), None) = (&self.anchor, &self.anchored) {
            return Err(Break {
                seq: *anchor,
                reason: format!(
                    "missing (the trail starts at record {}, and no checkpoint record anchors \
                     it)",
                    anchor + 1
                ),
            });
        }
        let (head_seq, head_hash) = head.unwrap_or((0, GENESIS.to_string()));
        if head_seq != last || head_hash != self.prev {
            return Err(Break {
                seq: last + 1,
                reason: format!(
                    "missing: the ledger's head is record {head_seq}, the trail ends at {last}"
                ),
            });
        }
        Ok((self.count, self.prev))
    }
}

/// One record as `audit export` prints it: the record's fields, `seq`, `prev`, `hash`, and
/// `time` (RFC 3339 UTC, from `time_ms`).
pub fn export_line(row: &StoredRecord) -> Result<String, String> {
    let (_, _, record) = open(&row.body)?;
    let Value::Object(fields) = serde_json::to_value(&record).map_err(|e| e.to_string())? else {
        return Err("an audit record is not a JSON object".into());
    };
    let mut out = Map::new();
    out.insert("seq".into(), Value::from(row.seq));
    out.insert(
        "time".into(),
        Value::from(super::flags::format_rfc3339_ms(record.time_ms)),
    );
    out.extend(fields);
    out.insert("prev".into(), Value::from(row.prev.as_str()));
    out.insert("hash".into(), Value::from(row.hash.as_str()));
    Ok(Value::Object(out).to_string())
}

/// A checkpoint (`ledger prune`, rule `ledger:checkpoint`): the last removed record's `seq`
/// and `hash` (the first kept record's `prev`), how many records were removed, and the budget
/// use those records implied (with an earlier checkpoint's), so that `audit verify` still
/// checks the counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The last removed record's seq.
    pub seq: u64,
    /// The last removed record's hash.
    pub hash: String,
    /// How many records were removed.
    pub removed: u64,
    /// The budget use the removed records implied, per bridge ref and session key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carried: Vec<Carried>,
}

/// One session's budget use carried by a [`Checkpoint`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Carried {
    /// The bridge ref.
    pub bridge_ref: String,
    /// The session key (as the counters name it).
    pub session_key: String,
    /// Admitted calls.
    pub calls: i64,
    /// Adapter ms.
    pub adapter_ms: i64,
    /// Admitted calls per tool.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tools: std::collections::BTreeMap<String, i64>,
}
