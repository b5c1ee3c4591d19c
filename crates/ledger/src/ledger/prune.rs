//! `ledger prune` (SPEC §14.3): removing the oldest audit records while the rest still
//! verifies. The records before a time are removed in ONE transaction that first appends a
//! checkpoint record (rule `ledger:checkpoint`) naming the last removed record's `seq` and
//! `hash` — the first kept record's `prev` — how many were removed, and the budget use they
//! implied, so that `audit verify` checks a trail that starts at that anchor and still checks
//! the budget counters, which pruning never touches.
//!
//! The store walks the whole trail inside its transaction ([`Pruning`]); [`Pruner`] checks it
//! as `audit verify` does, picks the cut and builds the checkpoint record. A trail that does not
//! verify is not pruned.

use super::audit::{is_sha256_hex, Carried, Checkpoint, Verdict};
use super::audit::{AuditRecord, Break, Chain, Counters, Name, Resources, Rule, StoredRecord};
use super::LedgerError;

impl Checkpoint {
    /// The checkpoint after removing records up to `seq` (hash `hash`), `removed` of them,
    /// which implied `implied`.
    pub(crate) fn new(seq: u64, hash: String, removed: u64, implied: &Counters) -> Checkpoint {
        let mut carried: Vec<Carried> = implied
            .sessions
            .iter()
            .map(|((bridge_ref, session_key), (calls, adapter_ms))| Carried {
                bridge_ref: bridge_ref.clone(),
                session_key: session_key.clone(),
                calls: *calls,
                adapter_ms: *adapter_ms,
                tools: std::collections::BTreeMap::new(),
            })
            .collect();
        for ((bridge_ref, session_key, tool), calls) in &implied.tools {
            let at = carried
                .iter()
                .position(|c| c.bridge_ref == *bridge_ref && c.session_key == *session_key);
            let at = at.unwrap_or_else(|| {
                carried.push(Carried {
                    bridge_ref: bridge_ref.clone(),
                    session_key: session_key.clone(),
                    ..Carried::default()
                });
                carried.len() - 1
            });
            carried[at].tools.insert(tool.clone(), *calls);
        }
        Checkpoint {
            seq,
            hash,
            removed,
            carried,
        }
    }

    /// The counters it carries.
    pub(crate) fn counters(&self) -> Counters {
        let mut counters = Counters::default();
        for c in &self.carried {
            let key = (c.bridge_ref.clone(), c.session_key.clone());
            counters.sessions.insert(key, (c.calls, c.adapter_ms));
            for (tool, calls) in &c.tools {
                let key = (c.bridge_ref.clone(), c.session_key.clone(), tool.clone());
                counters.tools.insert(key, *calls);
            }
        }
        counters
    }

    /// The bounds [`AuditRecord::check`] holds it to.
    pub(crate) fn check(&self) -> Result<(), String> {
        if !is_sha256_hex(&self.hash) {
            return Err("checkpoint.hash is not a SHA-256 in lower-case hex".into());
        }
        Ok(())
    }
}

/// What a store's [`super::Store::prune`] asks while it holds its write transaction.
pub trait Pruning {
    /// Start (again, when the store retries its transaction): the lowest `record_seq` of the
    /// calls still `running` (records at or after it are never removed).
    fn start(&mut self, running_floor: Option<u64>);
    /// One stored row, in `seq` order, from the first; false to stop (the trail is broken).
    fn visit(&mut self, row: Result<StoredRecord, Break>) -> bool;
    /// Every row was visited: the head (`seq`, hash) the store recorded. The cut (remove every
    /// record at or before it) and the checkpoint record to append first, or `None`: nothing
    /// to remove. An error changes nothing.
    fn finish(
        &mut self,
        head: Option<(u64, String)>,
    ) -> Result<Option<(u64, AuditRecord)>, LedgerError>;
}

/// What `ledger prune` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pruned {
    /// Records up to `seq` (its hash `hash`) were removed, `removed` of them; the checkpoint
    /// record is `checkpoint`.
    Removed {
        /// The last removed record.
        seq: u64,
        /// Its hash: the first kept record's `prev`.
        hash: String,
        /// How many.
        removed: u64,
        /// The checkpoint record's seq.
        checkpoint: u64,
    },
    /// No record is old enough (or every old one is held by a running call).
    Nothing,
    /// The trail does not verify: nothing was removed.
    Broken(Break),
}

/// The [`Pruning`] of `ledger prune --before`: checks the whole trail as `audit verify` does,
/// and cuts after the last record of the oldest run of records older than `before_ms` that
/// no running call names.
#[derive(Debug)]
pub(crate) struct Pruner {
    before_ms: u64,
    now_ms: u64,
    floor: Option<u64>,
    chain: Chain,
    /// The cut so far: the last removable record's seq and hash, how many, and what the
    /// removed records imply.
    cut: Option<(u64, String, u64, Counters)>,
    /// Whether the run of removable records is over.
    closed: bool,
    broken: Option<Break>,
}

impl Pruner {
    pub(crate) fn new(before_ms: u64, now_ms: u64) -> Pruner {
        Pruner {
            before_ms,
            now_ms,
            floor: None,
            chain: Chain::default(),
            cut: None,
            closed: false,
            broken: None,
        }
    }

    /// The outcome once the store is done; `checkpoint` the checkpoint record's seq.
    pub(crate) fn outcome(&self, checkpoint: Option<u64>) -> Pruned {
        match (&self.broken, &self.cut, checkpoint) {
            (Some(at), _, _) => Pruned::Broken(at.clone()),
            (None, Some((seq, hash, removed, _)), Some(checkpoint)) => Pruned::Removed {
                seq: *seq,
                hash: hash.clone(),
                removed: *removed,
                checkpoint,
            },
            _ => Pruned::Nothing,
        }
    }
}

impl Pruning for Pruner {
    fn start(&mut self, running_floor: Option<u64>) {
        *self = Pruner::new(self.before_ms, self.now_ms);
        self.floor = running_floor;
    }

    fn visit(&mut self, row: Result<StoredRecord, Break>) -> bool {
        let (seq, time_ms, hash) = match &row {
            Ok(r) => (r.seq, r.time_ms, r.hash.clone()),
            Err(_) => (0, 0, String::new()),
        };
        if let Err(at) = self.chain.push(row) {
            self.broken = Some(at);
            return false;
        }
        let removable = time_ms < self.before_ms && self.floor.is_none_or(|floor| seq < floor);
        if self.closed || !removable {
            self.closed = true;
            return true;
        }
        let removed = self.cut.as_ref().map_or(0, |c| c.2) + 1;
        self.cut = Some((seq, hash, removed, self.chain.own().clone()));
        true
    }

    fn finish(
        &mut self,
        head: Option<(u64, String)>,
    ) -> Result<Option<(u64, AuditRecord)>, LedgerError> {
        if self.broken.is_some() {
            return Ok(None);
        }
        let chain = std::mem::take(&mut self.chain);
        let carried = chain.anchored().cloned();
        if let Err(at) = chain.finish(head) {
            self.broken = Some(at);
            return Ok(None);
        }
        let Some((seq, hash, removed, own)) = &self.cut else {
            return Ok(None);
        };
        let implied = match &carried {
            Some(carried) => own.merged(carried),
            None => own.clone(),
        };
        let checkpoint = Checkpoint::new(*seq, hash.clone(), *removed, &implied);
        Ok(Some((*seq, checkpoint_record(self.now_ms, checkpoint))))
    }
}

/// The record `ledger prune` appends: rule `ledger:checkpoint`, status `pruned`, no call's
/// fields, and the checkpoint.
pub(crate) fn checkpoint_record(now_ms: u64, checkpoint: Checkpoint) -> AuditRecord {
    AuditRecord {
        time_ms: now_ms,
        bridge_ref: String::new(),
        session_id: String::new(),
        request_id: String::new(),
        tool: String::new(),
        operation: String::new(),
        request_digest: String::new(),
        attempt: 0,
        decision: Verdict::Admit,
        rule: Rule::LedgerCheckpoint,
        policy: None,
        approval: None,
        network: None,
        checkpoint: Some(checkpoint),
        status: Name::lossy("pruned"),
        code: None,
        duration_ms: 0,
        adapter_ms: None,
        exit_status: 0,
        resources: Resources::default(),
        transcript_ref: None,
        envelope_sha256: None,
        session_key: None,
        admitted: false,
    }
}
