//! `audit export`'s filters and `audit stats` (SPEC §14.3): the audit records read back and
//! added up per session and tool. Only reads; the binary prints.

use super::audit::{self, AuditRecord, Break, Rule, StoredRecord, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;

/// Which records `audit export` and `audit stats` keep: each list that is not empty must hold
/// the record's value (a record passes when it matches every list given, any of its values).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// The record's `session_id` (the sandbox session id as recorded).
    pub sessions: Vec<String>,
    /// The record's `tool` (its canonical id).
    pub tools: Vec<String>,
    /// The record's `status` (`succeeded`, `failed`, `denied`, …).
    pub statuses: Vec<String>,
}

impl Filter {
    /// Whether `record` passes.
    pub fn matches(&self, record: &AuditRecord) -> bool {
        let has = |list: &[String], value: &str| list.is_empty() || list.iter().any(|v| v == value);
        has(&self.sessions, &record.session_id)
            && has(&self.tools, &record.tool)
            && has(&self.statuses, record.status.as_str())
    }

    /// Whether it lets every record through.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty() && self.tools.is_empty() && self.statuses.is_empty()
    }
}

/// The record inside a stored row, with its seq; an error names the row and why.
pub fn read(row: Result<StoredRecord, Break>) -> Result<(StoredRecord, AuditRecord), Break> {
    let row = row?;
    match audit::open(&row.body) {
        Ok((_, _, record)) => Ok((row, record)),
        Err(reason) => Err(Break {
            seq: row.seq,
            reason,
        }),
    }
}

/// What the records of one session and tool add up to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// The sandbox session id as recorded (empty: the request had none).
    pub session_id: String,
    /// The canonical tool id (empty: the request had none that could be read).
    pub tool: String,
    /// Calls admitted (decision `admit`): their adapter (or endpoint) was started.
    pub admitted: u64,
    /// Calls answered from the ledger (decision `replay`).
    pub replays: u64,
    /// Calls denied (decision `deny`), per rule.
    pub denied: BTreeMap<String, u64>,
    /// Calls refused (decision `refuse`), per rule.
    pub refused: BTreeMap<String, u64>,
    /// Admitted calls that ended with an error, per `error.code`.
    pub failures: BTreeMap<String, u64>,
    /// Adapter (or endpoint) wall time, ms: what `--budget-adapter-ms` counts.
    pub adapter_ms: u64,
}

/// `audit stats`: one [`Tally`] per session and tool, sorted by session then tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// The call records added up (the records of a person's decision on an approval and the
    /// checkpoints of `ledger prune` are not calls, and are left out).
    pub records: u64,
    /// Per session and tool.
    pub rows: Vec<Tally>,
}

impl Stats {
    /// Add one record.
    pub fn add(&mut self, record: &AuditRecord) {
        if matches!(
            record.rule,
            Rule::ApprovalApprove | Rule::ApprovalDeny | Rule::LedgerCheckpoint
        ) {
            return;
        }
        self.records += 1;
        let at = match self.rows.binary_search_by(|t| {
            (&*t.session_id, &*t.tool).cmp(&(&record.session_id, &record.tool))
        }) {
            Ok(at) => at,
            Err(at) => {
                let tally = Tally {
                    session_id: record.session_id.clone(),
                    tool: record.tool.clone(),
                    ..Tally::default()
                };
                self.rows.insert(at, tally);
                at
            }
        };
        let tally = &mut self.rows[at];
        let rule = record.rule.as_str().to_string();
        match record.decision {
            Verdict::Admit => {
                tally.admitted += 1;
                if let Some(code) = &record.code {
                    *tally.failures.entry(code.as_str().to_string()).or_default() += 1;
                }
            }
            Verdict::Replay => tally.replays += 1,
            Verdict::Deny => *tally.denied.entry(rule).or_default() += 1,
            Verdict::Refuse => *tally.refused.entry(rule).or_default() += 1,
        }
        tally.adapter_ms = tally
            .adapter_ms
            .saturating_add(record.adapter_ms.unwrap_or(0));
    }
}
