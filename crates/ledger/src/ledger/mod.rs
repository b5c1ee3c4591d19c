//! The ledger (SPEC §14): idempotency, budgets and the audit trail, shared by every dispatcher
//! process on the host through one database file.
//!
//! The main job calls it after authorization:
//!
//! 1. [`Ledger::open`] (fails closed: every [`LedgerError`] is `unavailable` /
//!    `ledger_unavailable`, see [`LedgerError::code`]);
//! 2. [`Ledger::begin`] or [`Ledger::wait`] with the call's [`Key`], digest, tool, this
//!    process's [`Lease`] and the [`Budgets`] — ONE atomic step that answers with a
//!    [`Decision`]: run it, replay a recorded envelope, refuse it (reused id, budget,
//!    concurrency), wait for its live holder, or declare it indeterminate;
//! 3. [`Ledger::finish`] with the redacted final envelope and the [`AuditRecord`] (one
//!    transaction), or [`Ledger::record`] for a call that ran nothing.
//!
//! The rules live here, in [`decide`], as a pure function of what the store read; the storage
//! is behind the [`Store`] trait, which only promises atomic read-decide-write steps and an
//! append-only chain. Only `sqlite.rs` knows the storage is SQLite.
//!
//! A call whose host-policy entry says `decision = "ask"` ([`Call::ask`]) runs only once a
//! person approved it (SPEC §18, [`approval`]): `begin` records a pending [`Approval`] and
//! answers [`Decision::ApprovalRequired`]; [`Ledger::approvals`], [`Ledger::approval`] and
//! [`Ledger::decide_approval`] are the person's side.
//!
//! It must not build envelopes, redact, or decide an exit status: the caller hands those in
//! and gets them back verbatim.

pub mod approval;
pub mod audit;
mod decide;
mod durability;
pub mod flags;
pub mod lease;
pub mod location;
mod open;
mod pg;
pub mod prune;
mod sqlite;
pub mod stats;
#[cfg(test)]
mod tests;

pub use approval::{
    Approval, ApprovalError, ApprovalFilter, ApprovalState, Ask, Decided, MAX_INPUT_SHOWN_BYTES,
};
pub use audit::{
    ApprovalRef, AuditRecord, Name, NetworkCounts, PolicyRef, Resources, Rule, Verdict,
    Verification,
};
pub use decide::{decide, decide_at};
pub use durability::Durability;
pub use flags::{parse_budget_flag, parse_session, parse_since, FlagError};
pub use lease::{Lease, DEFAULT_LEASE_TTL};
pub use location::{Location, Password, PgUrl, SslMode, PASSWORD_FILE_VAR};
pub use open::{migrate, restore, MigrateReport};
pub use prune::Pruned;
use ptd_sys::hostenv::HostEnv;
pub use stats::{Filter, Stats};

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// A call's key (SPEC §14): bridge ref, sandbox session id (empty when the request has no
/// session), request id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// The bridge ref.
    pub bridge_ref: String,
    /// `sandbox_session.sandbox_session_id`.
    pub session_id: String,
    /// `request_id`.
    pub request_id: String,
}

/// The limits of SPEC §14.2, per (bridge ref, session); `None` is no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Budgets {
    /// `--budget-calls`: admitted calls (replays do not count).
    pub calls: Option<u64>,
    /// `--budget-tool TOOL=N`: admitted calls of one tool.
    pub tools: BTreeMap<String, u64>,
    /// `--budget-adapter-ms`: total adapter wall time.
    pub adapter_ms: Option<u64>,
    /// `--max-concurrent`: calls in flight at once (held by live dispatchers).
    pub max_concurrent: Option<u64>,
}

impl Budgets {
    /// Whether any limit is set (a budget without `--ledger` is a usage error).
    pub fn any(&self) -> bool {
        self.calls.is_some()
            || !self.tools.is_empty()
            || self.adapter_ms.is_some()
            || self.max_concurrent.is_some()
    }
}

/// One call as [`Ledger::begin`] sees it.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    /// The key.
    pub key: &'a Key,
    /// SHA-256 of the canonical request.
    pub digest: &'a str,
    /// The canonical tool id (for `--budget-tool`).
    pub tool: &'a str,
    /// The limits.
    pub budgets: &'a Budgets,
    /// What the host policy asks when its entry says `decision = "ask"` (SPEC §18): the call
    /// then runs only under an approval. `None`: no approval is looked at, as before.
    pub ask: Option<&'a Ask>,
}

/// Which limit a call is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    /// `--budget-calls`.
    Calls,
    /// `--budget-tool`.
    Tool,
    /// `--budget-adapter-ms`.
    AdapterMs,
    /// `--max-concurrent`.
    Concurrent,
}

impl BudgetKind {
    /// The audit rule for it: `budget:calls`, `budget:tool`, `budget:adapter_ms`,
    /// `budget:concurrent`.
    pub fn rule(self) -> Rule {
        match self {
            BudgetKind::Calls => Rule::BudgetCalls,
            BudgetKind::Tool => Rule::BudgetTool,
            BudgetKind::AdapterMs => Rule::BudgetAdapterMs,
            BudgetKind::Concurrent => Rule::BudgetConcurrent,
        }
    }
}

/// `error.details` of `budget_exhausted` / `concurrency_limited`: `{budget, limit, used,
/// tool?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverBudget {
    /// Which limit.
    pub budget: BudgetKind,
    /// Its value.
    pub limit: u64,
    /// What the session has used (for `concurrent`: calls in flight now).
    pub used: u64,
    /// The tool, for `budget: "tool"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// A recorded final outcome, printed again as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The envelope exactly as it was printed.
    pub envelope: String,
    /// The exit status it had.
    pub exit_status: u8,
}

/// The answer of [`Ledger::begin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it: the key is now `running` under the caller's lease; call [`Ledger::finish`].
    Start {
        /// 1 for a new key, more after retryable outcomes.
        attempt: u32,
        /// Adapter time left in the session's `--budget-adapter-ms`: cut the timeout to it.
        adapter_ms_left: Option<u64>,
        /// The approval that lets a call with `ask` start (SPEC §18): the key's own, or the
        /// session's grant; `None` for every other call. Its run's audit record names it.
        approval: Option<String>,
    },
    /// Same key and digest, final outcome recorded: print it again (`ledger:replay`).
    Replay(Recorded),
    /// Same key, different digest: `denied` / `request_id_reused`.
    Reused,
    /// Another live dispatcher holds the key: [`Ledger::wait`] for it.
    Held(Lease),
    /// The key's holder died while running it: nobody knows whether the effect happened. The
    /// caller now holds the key and must [`Ledger::finish`] it with `failed` /
    /// `dispatch_indeterminate` (final).
    Indeterminate {
        /// The attempt the dead holder was running.
        attempt: u32,
        /// The dead holder.
        holder: Lease,
    },
    /// Over a budget: `denied` / `budget_exhausted`.
    BudgetExhausted(OverBudget),
    /// Over `--max-concurrent`: `unavailable` / `concurrency_limited` (retryable).
    ConcurrencyLimited(OverBudget),
    /// The call needs a person's approval first (SPEC §18), and has none yet: `denied` /
    /// `approval_required` (retryable). Nothing runs; the same request retried later gets the
    /// same approval.
    ApprovalRequired {
        /// The pending approval.
        approval_id: String,
        /// When it expires, ms since the Unix epoch.
        expires_ms: u64,
        /// Whether this call created it (and so a person is to be told).
        new: bool,
    },
    /// A person denied the key's approval: `denied` / `approval_denied` (final).
    ApprovalDenied {
        /// The approval.
        approval_id: String,
    },
    /// The key's approval expired before it was approved, or before the approved call ran:
    /// `denied` / `approval_expired` (final; a new request id asks again).
    ApprovalExpired {
        /// The approval.
        approval_id: String,
    },
}

/// The answer of [`Ledger::wait`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waited {
    /// The last decision: `Held` when the key was still held at the deadline or when the
    /// caller stopped waiting.
    pub decision: Decision,
    /// Whether the call waited for a holder at all: its own time is then partly spent.
    pub waited: bool,
}

/// The final outcome [`Ledger::finish`] stores with the key.
#[derive(Debug, Clone)]
pub struct Outcome<'a> {
    /// The redacted envelope exactly as printed.
    pub envelope: &'a str,
    /// The exit status.
    pub exit_status: u8,
    /// The envelope's `retryable`: such an outcome is not final, the key may run again.
    pub retryable: bool,
    /// Adapter wall time this call spent (counted against `--budget-adapter-ms`).
    pub adapter_ms: u64,
}

/// What [`Ledger::finish`] did with the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// Stored: final, or open for another attempt when retryable.
    Stored,
    /// The key was not held by the caller's lease any more; only the audit record was kept.
    NotHolder,
}

/// A call row as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRow {
    /// The digest of the request that first used the key.
    pub digest: String,
    /// Where the key is.
    pub state: CallState,
    /// Attempts so far.
    pub attempt: u32,
    /// The last holder.
    pub lease: Lease,
    /// The recorded outcome (final or retryable).
    pub outcome: Option<Recorded>,
}

/// A key's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallState {
    /// A dispatcher holds it (live or dead: see its lease).
    Running,
    /// The last outcome was retryable: it may run again.
    Retryable,
    /// Done; replayed from now on.
    Final,
}

/// What the store read for [`decide`], inside the transaction ([`Store::begin`]), or in a
/// read transaction of its own ([`Ledger::peek`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// The key's row, if any.
    pub row: Option<CallRow>,
    /// Admitted calls of the session.
    pub calls: u64,
    /// Admitted calls of the call's tool in the session.
    pub tool_calls: u64,
    /// Adapter ms the session spent.
    pub adapter_ms: u64,
    /// Leases of the session's OTHER running keys (live or not: [`decide`] checks).
    pub running: Vec<Lease>,
    /// The key's approval, in any state (read only for a call with [`Call::ask`]).
    pub approval: Option<Approval>,
    /// The session's grant for the call's tool: of the approved `for_session` approvals of the
    /// same bridge ref, session key and tool, the one that expires last ([`decide`] checks it
    /// has not expired). Read only for a call with [`Call::ask`].
    pub session_grant: Option<Approval>,
}

/// The write [`decide`] asks the store to make in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Nothing.
    None,
    /// Mark the key `running` under the caller's lease at `attempt`, and count one admitted
    /// call for the session and its tool.
    Admit {
        /// The attempt.
        attempt: u32,
    },
    /// Mark the key `running` under the caller's lease, attempt unchanged, nothing counted
    /// (the caller only records the indeterminate outcome).
    TakeOver,
    /// Record a new pending approval for the call's key, digest and tool, with what
    /// [`Call::ask`] says, made `expires_ms - ttl_ms` and expiring at `expires_ms`.
    Ask {
        /// Its id.
        approval_id: String,
        /// Its expiry, ms since the Unix epoch.
        expires_ms: u64,
    },
}

/// Why the ledger cannot be used: always `unavailable` / `ledger_unavailable` for the main
/// job (SPEC §14.3). Messages never name a host path.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The folder the ledger should be in cannot be opened (missing, no permission).
    #[error("the ledger's folder cannot be opened: {0}")]
    Folder(std::io::Error),
    /// The path is not a usable file name.
    #[error("the ledger path has no file name")]
    NoFileName,
    /// Something other than a regular file is there (a symlink is never followed).
    #[error("the ledger path is a {0}, not a regular file")]
    NotRegular(&'static str),
    /// The file exists but is not writable by its owner.
    #[error("the ledger file is read-only")]
    ReadOnly,
    /// `audit` was pointed at a ledger that does not exist.
    #[error("the ledger file does not exist")]
    Missing,
    /// The file cannot be created or opened.
    #[error("the ledger file cannot be opened: {0}")]
    Open(std::io::Error),
    /// The file, its `-wal` or `-shm`, or its folder is not the dispatcher's own (SPEC §14.4).
    #[error("the ledger is not this user's own: {0}")]
    NotOwn(&'static str),
    /// The file was replaced between our checks and the database's open.
    #[error("the ledger file was replaced while it was being opened")]
    Replaced,
    /// A database that is not ours (another application, another schema version).
    #[error("the file is not a parent-tool-dispatch ledger: {0}")]
    Foreign(String),
    /// Not a database, or a damaged one.
    #[error("the ledger is corrupt: {0}")]
    Corrupt(String),
    /// Another process held the database locked past the deadline.
    #[error("the ledger stayed locked past the call's deadline")]
    Locked,
    /// Reading or writing failed otherwise.
    #[error("the ledger cannot be read or written: {0}")]
    Database(String),
    /// A record the caller built breaks the record's bounds.
    #[error("the audit record is invalid: {0}")]
    Record(String),
    /// This process's lease cannot be read from /proc.
    #[error("this process's lease cannot be read: {0}")]
    Lease(std::io::Error),
    /// The ledger cannot be read without making a file beside it or without permissions this
    /// user lacks (SPEC §14.4: `audit` and `ledger backup` only read).
    #[error("the ledger cannot be read as it is: {0}")]
    Unreadable(&'static str),
    /// A ledger read without SQLite's locks (no WAL index to share) changed while it was
    /// read: what was read is not trusted; reading again uses the WAL the writer made.
    #[error("the ledger changed while it was being read")]
    ChangedWhileRead,
    /// A `postgres://` ledger URL that cannot be used (a password in it, an unknown
    /// parameter, …). The message never repeats the URL.
    #[error("the ledger URL is invalid: {0}")]
    Url(String),
    /// The ledger's password cannot be read (the message never holds it).
    #[error("the ledger's password cannot be read: {0}")]
    Password(String),
    /// TLS to the ledger's server cannot be set up as `sslmode` asks.
    #[error("TLS to the ledger cannot be set up: {0}")]
    Tls(String),
    /// The database server could not be reached, refused the connection, or cannot take one
    /// now: the one retryable case ([`LedgerError::is_unreachable`], SPEC §19.1).
    #[error("the ledger's database cannot be reached: {0}")]
    Unreachable(String),
    /// The server answered but the connection was refused for good (authentication, a
    /// missing database, TLS refused).
    #[error("the ledger's database refused the connection: {0}")]
    Connect(String),
    /// The database holds no ledger schema, or a version this dispatcher does not know; the
    /// message says to run `parent-tool-dispatch ledger migrate --ledger URL`.
    #[error("{0}")]
    Schema(String),
    /// A transaction lost a race with another (a serialization failure or deadlock). Retried
    /// by the store until its deadline, then answered as [`LedgerError::Locked`]: callers
    /// never see it.
    #[error("the ledger's transaction conflicted with another")]
    Conflict,
    /// A stored envelope is not the one its audit record covers: the ledger was edited, and
    /// is never used to replay (SPEC §14.4).
    #[error("the ledger fails verification: {0}")]
    Tampered(String),
}

impl LedgerError {
    /// The stable error code of SPEC §14.3 for every ledger failure.
    pub fn code(&self) -> &'static str {
        "ledger_unavailable"
    }

    /// Whether the database could not be reached or refused the connection: the one case
    /// where `ledger_unavailable` is retryable (SPEC §19.1).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, LedgerError::Unreachable(_))
    }
}

/// A visit of the stored envelopes ([`Store::scan`]): the seq of the audit record that stored
/// one (if any), the envelope and its exit status; returns false to stop.
pub type StoredVisit<'a> = dyn FnMut(Option<u64>, &str, u8) -> bool + 'a;

/// A person's decision as [`Store::decide_approval`] applies it to the approval it read: the
/// approval as it becomes and the decision's audit record, or why nothing changes.
pub type Settle<'a> = dyn FnMut(&Approval) -> Result<(Approval, AuditRecord), ApprovalError> + 'a;

/// The budget counters [`Store::scan`] reads for `audit verify` in its snapshot (SPEC §14.4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// The counters as stored.
    pub stored: audit::Counters,
    /// The claims still `running` (admitted and counted, their record not written yet): one
    /// call each, for its session and its tool.
    pub running: audit::Counters,
}

/// The storage under a [`Ledger`]. Each method is ONE atomic transaction that either happens
/// whole or not at all, also when the process is killed in the middle, and is serialised with
/// every other process's transactions on the same ledger.
pub trait Store: Send {
    /// Give up waiting for other writers at `deadline` ([`LedgerError::Locked`]).
    fn set_deadline(&mut self, deadline: Instant);
    /// When this connection's commits are on the disk from now on ([`Durability::Full`]
    /// until told otherwise).
    fn set_durability(&mut self, durability: Durability) -> Result<(), LedgerError>;
    /// Read the key's row and the session's usage, call `decide` on them, apply its [`Claim`]
    /// under `lease`, and return its decision.
    fn begin(
        &mut self,
        call: &Call<'_>,
        lease: &Lease,
        decide: &mut dyn FnMut(&Snapshot) -> (Decision, Claim),
    ) -> Result<Decision, LedgerError>;
    /// Read what [`Store::begin`] would hand to `decide` for `call` — the key's row, the
    /// session's admitted calls and adapter ms, the tool's admitted calls, the leases of the
    /// session's other running keys — in ONE read transaction that writes nothing, and decide
    /// nothing. It must work on a store opened read-only ([`Ledger::open_existing`]).
    fn peek(&mut self, call: &Call<'_>) -> Result<Snapshot, LedgerError>;
    /// Append `record` to the chain and, when the key is still held by `lease`, store the
    /// outcome (final, or retryable) and add its adapter time to the session's usage.
    fn finish(
        &mut self,
        key: &Key,
        lease: &Lease,
        outcome: &Outcome<'_>,
        record: &AuditRecord,
    ) -> Result<Finished, LedgerError>;
    /// Append `record` to the chain.
    fn append(&mut self, record: &AuditRecord) -> Result<(), LedgerError>;
    /// The key's row (for inspection and tests).
    fn call(&mut self, key: &Key) -> Result<Option<CallRow>, LedgerError>;
    /// While the adapter runs: renew `lease`'s hold on `key` (its heartbeat, for a store
    /// shared across hosts); false when `lease` no longer holds it.
    fn renew(&mut self, key: &Key, lease: &Lease) -> Result<bool, LedgerError>;

    /// Visit the audit rows with `time_ms >= since_ms` in `seq` order, in one read snapshot;
    /// a row whose columns cannot be read is handed over as the reason. Returns the head
    /// (`seq`, hash) recorded with the last append, as of that snapshot.
    ///
    /// When every row was visited and `stored` is given, it is then called, in the same
    /// snapshot, for every call row that holds an envelope — the seq of the audit record that
    /// stored it (if any), the envelope and its exit status — until it returns false; and
    /// `usage`, when given, is filled with the budget counters and the running claims of that
    /// same snapshot.
    fn scan(
        &mut self,
        since_ms: u64,
        visit: &mut dyn FnMut(Result<audit::StoredRecord, audit::Break>) -> bool,
        stored: Option<&mut StoredVisit<'_>>,
        usage: Option<&mut Usage>,
    ) -> Result<Option<(u64, String)>, LedgerError>;

    /// `ledger prune`: in ONE write transaction, read the lowest `record_seq` of the calls
    /// still `running` and hand it to [`prune::Pruning::start`], visit every audit row in
    /// `seq` order, then the head, and when [`prune::Pruning::finish`] answers a cut and a
    /// checkpoint record: append the record, delete every audit row at or before the cut, and
    /// forget the stored envelope of every call whose record was deleted (its `record_seq`,
    /// envelope and exit status). The budget counters and the approvals are not touched.
    /// Returns the checkpoint record's seq.
    fn prune(&mut self, pruning: &mut dyn prune::Pruning) -> Result<Option<u64>, LedgerError>;

    /// Best effort, waiting for nobody: move what the store keeps beside its file into the
    /// file, so that a copy of the file alone is the whole ledger (SPEC §14.4). Nothing to do
    /// for a store without such a log.
    fn checkpoint(&mut self) {}

    /// Write a consistent copy of the whole store to the new file `dest` (SPEC §14.4), made
    /// 0600 and never replacing anything: an existing `dest` is [`BackupError::Exists`].
    fn backup(&mut self, dest: &Path) -> Result<(), BackupError>;

    /// The approvals `filter` lets through, newest first, in one read transaction that writes
    /// nothing; it must work on a store opened read-only, also one without approvals yet (none).
    fn approvals(&mut self, filter: &ApprovalFilter) -> Result<Vec<Approval>, LedgerError>;
    /// The approval `id`, read as [`Store::approvals`] reads.
    fn approval(&mut self, id: &str) -> Result<Option<Approval>, LedgerError>;
    /// ONE transaction: read the approval `id` (none: [`ApprovalError::Unknown`]), hand it to
    /// `settle`, and when it answers, store the approval it returns and append its record to
    /// the chain; when it refuses, change nothing.
    fn decide_approval(
        &mut self,
        id: &str,
        settle: &mut Settle<'_>,
    ) -> Result<Approval, ApprovalError>;
}

/// Why `ledger backup` wrote no copy.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// Something (of any kind, a dangling symlink too) is already at the destination: it is
    /// left as it is.
    #[error("the destination already exists; nothing was written")]
    Exists,
    /// The destination cannot be made or written (its folder missing, no permission, no
    /// space); nothing is left behind.
    #[error("the backup cannot be written: {0}")]
    Write(String),
    /// The ledger cannot be read.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// How long [`Ledger::wait`] sleeps between looks at a held key: short at first (most calls are
/// quick), then at most this.
const MAX_POLL: Duration = Duration::from_millis(100);

/// The ledger of SPEC §14.
pub struct Ledger {
    store: Box<dyn Store>,
    lease_ttl: Duration,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ledger")
    }
}

impl Ledger {
    /// Open (creating it 0600 if missing) the ledger at `path` for the main job; wait for
    /// other writers until `deadline` at most.
    pub fn open(path: &Path, deadline: Instant) -> Result<Ledger, LedgerError> {
        Ok(Ledger::with(Box::new(sqlite::SqliteStore::open(
            path, deadline,
        )?)))
    }

    pub(crate) fn with(store: Box<dyn Store>) -> Ledger {
        Ledger {
            store,
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }

    /// How long a holder on another host counts as alive after its last heartbeat
    /// (`lease_ttl`, [`DEFAULT_LEASE_TTL`] unless set).
    pub fn set_lease_ttl(&mut self, ttl: Duration) {
        self.lease_ttl = ttl;
    }

    /// When the main job's commits are on the disk ([`Durability::Full`] unless set; SPEC
    /// §14.4).
    pub fn set_durability(&mut self, durability: Durability) -> Result<(), LedgerError> {
        self.store.set_durability(durability)
    }

    /// Renew `lease`'s hold on `key` (the caller does it every third of `lease_ttl` while the
    /// adapter runs): false when `lease` no longer holds the key. On SQLite it only looks.
    pub fn renew(&mut self, key: &Key, lease: &Lease) -> Result<bool, LedgerError> {
        self.store.renew(key, lease)
    }

    /// Open an existing ledger only to read it (for `audit` and `ledger backup`; SPEC §14.4):
    /// no file is made or changed beside it, and any user who can read it may. A missing one
    /// is [`LedgerError::Missing`].
    pub fn open_existing(path: &Path, deadline: Instant) -> Result<Ledger, LedgerError> {
        Ok(Ledger::with(Box::new(sqlite::SqliteStore::open_read_only(
            path, deadline,
        )?)))
    }

    /// Move the deadline for waiting on other writers.
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.store.set_deadline(deadline);
    }

    /// One atomic decision for `call` under `lease` (see [`Decision`]). A call with
    /// [`Call::ask`] whose `ask` breaks its bounds (its `input_shown` over
    /// [`MAX_INPUT_SHOWN_BYTES`], say) is [`LedgerError::Record`], nothing read or written.
    pub fn begin(&mut self, call: &Call<'_>, lease: &Lease) -> Result<Decision, LedgerError> {
        if let Some(ask) = call.ask {
            ask.check()?;
        }
        let ttl = self.lease_ttl;
        self.store.begin(call, lease, &mut |snap| {
            decide(call, snap, &|l| l.is_live_within(ttl))
        })
    }

    /// What [`Ledger::begin`] would decide `call` on, read in one read transaction that
    /// writes nothing — for a dry run (`policy explain`) that starts nothing and changes no
    /// ledger. Works on a ledger opened with [`Ledger::open_existing`], making no file beside
    /// it, as `audit` does.
    ///
    /// `decide(call, &snapshot, &|l| l.is_live())` on it gives the decision a `begin` made
    /// now would give, and the snapshot's counters what each budget has used (and so has
    /// left). It is only a look: another dispatcher may change the ledger right after it, and
    /// a [`Decision::Replay`] decided on it has not had its record checked against the stored
    /// envelope, as `begin` checks it before replaying (a tampered ledger answers
    /// [`LedgerError::Tampered`] there).
    pub fn peek(&mut self, call: &Call<'_>) -> Result<Snapshot, LedgerError> {
        self.store.peek(call)
    }

    /// [`Ledger::begin`], and while the key is [`Decision::Held`] by a live dispatcher, look
    /// again until `deadline`; a key still held then is answered `Held` (the caller's
    /// `timeout` / `dispatch_timeout`). Other writers are waited for until `deadline` too.
    ///
    /// Between two looks it calls `pause` with how long to wait; `pause` returns `false` to
    /// stop waiting at once (the caller received a signal), and the key is then answered
    /// `Held` as it stands. [`Waited::waited`] says whether any pause was taken.
    pub fn wait(
        &mut self,
        call: &Call<'_>,
        lease: &Lease,
        deadline: Instant,
        pause: &mut dyn FnMut(Duration) -> bool,
    ) -> Result<Waited, LedgerError> {
        self.set_deadline(deadline);
        let mut step = Duration::from_millis(2);
        let mut waited = false;
        loop {
            let decision = self.begin(call, lease)?;
            let now = Instant::now();
            if !matches!(decision, Decision::Held(_)) || now >= deadline {
                return Ok(Waited { decision, waited });
            }
            waited = true;
            if !pause(step.min(deadline - now)) {
                return Ok(Waited { decision, waited });
            }
            step = (step * 2).min(MAX_POLL);
        }
    }

    /// Store the final (or retryable) outcome of a call this process started or took over,
    /// with its audit record, in one transaction.
    pub fn finish(
        &mut self,
        key: &Key,
        lease: &Lease,
        outcome: &Outcome<'_>,
        record: &AuditRecord,
    ) -> Result<Finished, LedgerError> {
        let record = AuditRecord {
            envelope_sha256: Some(ptd_wire::envelope::canonical::sha256_hex(
                outcome.envelope.as_bytes(),
            )),
            // The record says what the session is charged (SPEC §14.4: the counters are what
            // the records imply).
            adapter_ms: if record.adapter_ms.unwrap_or(0) == outcome.adapter_ms {
                record.adapter_ms
            } else {
                Some(outcome.adapter_ms)
            },
            // The store's to set, in the transaction that knows them.
            session_key: None,
            admitted: false,
            ..record.clone()
        };
        record.check().map_err(LedgerError::Record)?;
        self.store.finish(key, lease, outcome, &record)
    }

    /// Append the audit record of a call that ran nothing (denied, replayed, refused).
    pub fn record(&mut self, record: &AuditRecord) -> Result<(), LedgerError> {
        // Nothing charged, nothing counted: such a record implies no budget use.
        let record = AuditRecord {
            session_key: None,
            admitted: false,
            ..record.clone()
        };
        record.check().map_err(LedgerError::Record)?;
        self.store.append(&record)
    }

    /// The key's row.
    pub fn call(&mut self, key: &Key) -> Result<Option<CallRow>, LedgerError> {
        self.store.call(key)
    }

    /// Before the process exits, after its envelope was printed: fold the store's log into its
    /// file, best effort and without waiting for other writers (SPEC §14.4, "a ledger file
    /// stands alone after use"). A failure is no failure of the call: the next dispatcher to
    /// finish does it.
    pub fn checkpoint(&mut self) {
        self.store.checkpoint();
    }

    /// A consistent copy of the ledger at `dest` (`ledger backup`), see [`Store::backup`].
    pub fn backup(&mut self, dest: &Path) -> Result<(), BackupError> {
        self.store.backup(dest)
    }

    /// The approvals `filter` lets through, newest first (`approvals list`). Only reads: works
    /// on a ledger opened with [`Ledger::open_existing`], one written before approvals existed
    /// included (it has none).
    pub fn approvals(&mut self, filter: &ApprovalFilter) -> Result<Vec<Approval>, LedgerError> {
        self.store.approvals(filter)
    }

    /// The approval `id` (`approvals show`); only reads, as [`Ledger::approvals`].
    pub fn approval(&mut self, id: &str) -> Result<Option<Approval>, LedgerError> {
        self.store.approval(id)
    }

    /// A person approves or denies the pending approval `id` (`approvals approve` / `deny`):
    /// in ONE transaction, the approval is updated and the decision's audit record appended
    /// (rule `approval:approve` or `approval:deny`, the record's `approval` naming who and
    /// their note). An unknown id, one approved or denied already, one past its expiry at
    /// `decided.now_ms`, or a `decided` out of bounds is refused and changes nothing.
    pub fn decide_approval(
        &mut self,
        id: &str,
        decided: &Decided,
    ) -> Result<Approval, ApprovalError> {
        approval::check_decided(decided)?;
        self.store
            .decide_approval(id, &mut |current| approval::settle(current, decided))
    }

    /// Recompute the whole chain (`audit verify`).
    pub fn verify(&mut self) -> Result<Verification, LedgerError> {
        let chain = audit::Chain::default();
        let mut broken = None;
        let mut intact = 0;
        let chain = std::cell::RefCell::new(chain);
        let mut bad = None;
        let mut usage = Usage::default();
        let head = self.store.scan(
            0,
            &mut |row| match chain.borrow_mut().push(row) {
                Ok(()) => {
                    intact += 1;
                    true
                }
                Err(at) => {
                    broken = Some(at);
                    false
                }
            },
            Some(&mut |seq, envelope, exit| {
                bad = chain.borrow().check_stored(seq, envelope, exit).err();
                bad.is_none()
            }),
            Some(&mut usage),
        )?;
        if let Some(at) = broken.or(bad) {
            return Ok(Verification::Broken { intact, at });
        }
        let chain = chain.into_inner();
        // The counters the records imply, and the claims still running (counted when they
        // were admitted; their record comes when they finish, or with the key's
        // `dispatch_indeterminate` when their dispatcher died).
        let implied = chain.implied().merged(&usage.running);
        Ok(match chain.finish(head) {
            Ok((records, head)) => match implied.first_difference(&usage.stored) {
                None => Verification::Intact { records, head },
                Some((counter, reason)) => Verification::Miscounted {
                    records,
                    counter,
                    reason,
                },
            },
            Err(at) => Verification::Broken { intact, at },
        })
    }

    /// `ledger prune --before`: remove the audit records older than `before_ms` (the oldest
    /// run of them, up to the first record a running call still names), after appending a
    /// checkpoint record that anchors what is left (see [`prune`]), in one transaction. A
    /// trail that does not verify is left as it is ([`Pruned::Broken`]).
    pub fn prune(&mut self, before_ms: u64) -> Result<Pruned, LedgerError> {
        let mut pruner = prune::Pruner::new(before_ms, now_ms());
        let checkpoint = self.store.prune(&mut pruner)?;
        Ok(pruner.outcome(checkpoint))
    }

    /// `audit stats`: the records at or after `since_ms` (those `filter` lets through) added
    /// up per session and tool, in one read snapshot. A record that cannot be read is the
    /// error.
    pub fn stats(&mut self, since_ms: u64, filter: &Filter) -> Result<Stats, StatsError> {
        let mut stats = Stats::default();
        let mut bad = None;
        self.store.scan(
            since_ms,
            &mut |row| match stats::read(row) {
                Ok((_, record)) => {
                    if filter.matches(&record) {
                        stats.add(&record);
                    }
                    true
                }
                Err(at) => {
                    bad = Some(at);
                    false
                }
            },
            None,
            None,
        )?;
        match bad {
            Some(at) => Err(StatsError::Unreadable(at)),
            None => Ok(stats),
        }
    }

    /// Visit the records at or after `since_ms` as stored (`audit export`); `visit` returns
    /// false to stop.
    pub fn scan(
        &mut self,
        since_ms: u64,
        visit: &mut dyn FnMut(Result<audit::StoredRecord, audit::Break>) -> bool,
    ) -> Result<(), LedgerError> {
        self.store.scan(since_ms, visit, None, None).map(|_| ())
    }
}

/// Why `audit stats` has no answer.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// The ledger cannot be read.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// A record cannot be read.
    #[error("record {}: {}", .0.seq, .0.reason)]
    Unreadable(audit::Break),
}

/// Milliseconds since the Unix epoch, now (for [`AuditRecord::time_ms`]).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
