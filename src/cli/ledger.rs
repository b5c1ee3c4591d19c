//! The arguments of `audit`, `ledger` and `approvals` (SPEC §14, §18): what `--help` and the
//! man pages say of them. Like the rest of `cli`, only descriptions: nothing is read here.

use super::{BridgeArg, LedgerArgs, LEDGER_ENV};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// The `audit` subcommands (SPEC 14.3).
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Recompute the audit trail's hash chain: exit 0 if every record holds, 1 naming the
    /// first that does not.
    ///
    /// Each record holds the SHA-256 of the record before it and of its own canonical form,
    /// covering every stored field, and the ledger keeps the hash of the last one. stdout gets
    /// {"intact":true,"records":N,"head":HASH} or {"intact":false,"records_intact":K,
    /// "first_bad":{"seq":S,"reason":R}} with an `error[audit_chain_broken]` line on stderr.
    /// It also checks every stored envelope against the record that holds its digest, and the
    /// budget counters against what the records imply (admitted calls, per tool, adapter ms);
    /// a counter that differs prints {"intact":false,"records_intact":N,"counter":{"name":C,
    /// "reason":R}} with an `error[audit_counter_mismatch]` line (SPEC 14.4). The head hash can be kept outside the host: whoever can rewrite the whole file can also
    /// rebuild a consistent chain, which only an outside copy of the head reveals.
    Verify(AuditVerifyArgs),
    /// Print the audit records as JSON Lines, oldest first: seq, time (RFC 3339 UTC), the
    /// record's fields, prev and hash.
    ///
    /// A record that cannot be read stops the export with `error[audit_unreadable]` on stderr
    /// and exit 1 (the lines before it are printed). --session, --tool and --status keep only
    /// the records that match; each line is the record as stored, so it still verifies.
    Export(AuditExportArgs),
    /// Add up the audit records per session and tool: calls admitted, replayed, denied and
    /// refused (by rule), failures (by error code) and adapter ms
    ///
    /// Read in one snapshot; only reads, as `export`. A table by default; --json prints one
    /// object with "records" and "rows", each row with session_id, tool, admitted, replays,
    /// denied and refused (per rule), failures (per code) and adapter_ms (docs/ledger.md). A
    /// record that cannot be read: `error[audit_unreadable]`, exit 1.
    Stats(AuditStatsArgs),
}

/// The `ledger` subcommands (SPEC 14.4).
#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Write a consistent copy of the ledger to DEST, a new file (mode 0600), while
    /// dispatchers may be writing to it.
    ///
    /// The copy is made with SQLite's online backup from one read snapshot of the ledger,
    /// under a temporary name in DEST's folder, synced, and moved to DEST without replacing
    /// anything; it stands alone (no -wal), `audit verify` checks it and a dispatcher given it
    /// as --ledger replays what it recorded. The ledger is only read, as by `audit`. Exit 0
    /// with nothing printed; an existing DEST of any kind is left untouched:
    /// `error[destination_exists]`, exit 2; a ledger that cannot be read:
    /// `error[ledger_unavailable]`, exit 69; a copy that cannot be written (DEST's folder
    /// missing or not writable, the disk full): `error[backup_failed]`, exit 74, nothing left
    /// behind. A PostgreSQL ledger is written as JSON Lines (every table, one snapshot), which
    /// `ledger restore` loads.
    Backup(LedgerBackupArgs),
    /// Create or upgrade the ledger's schema (SPEC 19.1); the only command that changes it.
    ///
    /// A PostgreSQL ledger (`--ledger postgres://USER@HOST[:PORT]/DB`) gets its versioned
    /// tables; the main job refuses a database without them, or of a version it does not
    /// know (`ledger_unavailable`). An SQLite file is made or upgraded as a dispatcher would.
    /// Prints `{"from":N|null,"to":M}`; exit 0, or 69 when the ledger cannot be used. Run it
    /// again at will: an up-to-date schema is left as it is.
    Migrate(LedgerMigrateArgs),
    /// Load a `ledger backup` of a PostgreSQL ledger (JSON Lines) into a migrated, empty
    /// PostgreSQL ledger, in one transaction; prints `{"rows":N}`, exit 0; 69 when it cannot
    /// (a database that is not empty, an SQLite target, a file that is not such a backup).
    Restore(LedgerRestoreArgs),
    /// What each budget of a host session has used and has left, and its calls in flight
    ///
    /// Takes the main job's --parent-tool-bridge, --session and budget options, and reads the
    /// counters the next call's decision reads (only reads, as `audit`). A table by default;
    /// --json prints one object. A budget option without --session is a usage error (exit 2);
    /// a ledger that cannot be read: `error[ledger_unavailable]`, exit 69.
    Status(LedgerStatusArgs),
    /// Remove the audit records older than --before, keeping the rest verifiable
    ///
    /// In one transaction: a checkpoint record (rule `ledger:checkpoint`) naming the last
    /// removed record's seq and hash is appended, then the records are removed. A record a
    /// running call names, and everything after it, is kept; the budget counters are never
    /// touched; a removed call's stored envelope is forgotten. Export first (`audit export`):
    /// the removed records are gone. Prints {"removed":N,...}; a trail that does not verify is
    /// left as it is: `error[audit_chain_broken]`, exit 1.
    Prune(LedgerPruneArgs),
}

/// `approvals` subcommands (SPEC 18).
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// The pending approvals, newest first: id, tool, session, request id, age, time left and
    /// the start of the input
    ///
    /// Only those a person can still decide (pending, not expired); --all lists the approved,
    /// denied and expired ones too. --json prints one object {"approvals":
    /// [...]}, each approval with every field `show --json` has. Exit 0 (also when there is
    /// none); a ledger that cannot be read: `error[ledger_unavailable]`, exit 69.
    List(ApprovalsListArgs),
    /// One approval in full, its request's input redacted and bounded as the ledger keeps it
    ///
    /// Exit 0; an unknown id: `error[approval_unknown]`, exit 65.
    Show(ApprovalsShowArgs),
    /// Approve a pending call: the same request then runs exactly once when the sandbox
    /// retries it
    ///
    /// --for-session also approves later calls of the same tool in the same session until
    /// the approval expires. An unknown id, one already decided or one past its expiry
    /// changes nothing: `error[approval_unknown]`, `error[approval_decided]` or
    /// `error[approval_expired]`, exit 65.
    Approve(ApprovalsDecideArgs),
    /// Deny a pending call: the same request is then `approval_denied`, for good
    ///
    /// The same refusals as `approve`.
    Deny(ApprovalsDecideArgs),
}

/// The ledger an `approvals` subcommand works on.
#[derive(Debug, Args, Clone)]
pub struct ApprovalsLedger {
    /// The ledger (an SQLite file made by the dispatcher).
    #[arg(long, value_name = "PATH", env = LEDGER_ENV)]
    pub ledger: PathBuf,
}

/// Arguments of `approvals list`.
#[derive(Debug, Args)]
pub struct ApprovalsListArgs {
    #[command(flatten)]
    pub ledger: ApprovalsLedger,
    /// Only this sandbox session's approvals.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Also the approved, denied and expired ones.
    #[arg(long)]
    pub all: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `approvals show`.
#[derive(Debug, Args)]
pub struct ApprovalsShowArgs {
    /// The approval's id (`apr_…`).
    #[arg(value_name = "ID")]
    pub id: String,
    #[command(flatten)]
    pub ledger: ApprovalsLedger,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `approvals approve` and `approvals deny`.
#[derive(Debug, Args)]
pub struct ApprovalsDecideArgs {
    /// The approval's id (`apr_…`).
    #[arg(value_name = "ID")]
    pub id: String,
    #[command(flatten)]
    pub ledger: ApprovalsLedger,
    /// Who decides, for the audit record (1-256 bytes; default: the user running this
    /// command, from USER, else its uid).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Why, for the audit record (at most 1024 bytes, no control characters).
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    /// Approve later calls of the same tool in the same session too, until the approval
    /// expires (`approve` only).
    #[arg(long)]
    pub for_session: bool,
}

/// Arguments of `ledger backup`.
#[derive(Debug, Args)]
pub struct LedgerBackupArgs {
    /// The ledger (an SQLite file made by the dispatcher).
    #[arg(long, value_name = "PATH", env = LEDGER_ENV)]
    pub ledger: PathBuf,
    /// The copy to make: a new file, never replaced.
    #[arg(value_name = "DEST")]
    pub dest: PathBuf,
}

/// Arguments of `ledger migrate`.
#[derive(Debug, Args)]
pub struct LedgerMigrateArgs {
    /// The ledger: an SQLite file, or `postgres://USER@HOST[:PORT]/DB[?sslmode=…]` (the
    /// password from PARENT_TOOL_DISPATCH_LEDGER_PASSWORD_FILE, PGPASSWORD or ~/.pgpass).
    #[arg(long, value_name = "PATH|URL", env = LEDGER_ENV)]
    pub ledger: PathBuf,
}

/// Arguments of `ledger restore`.
#[derive(Debug, Args)]
pub struct LedgerRestoreArgs {
    /// The PostgreSQL ledger to fill (migrated, empty).
    #[arg(long, value_name = "URL", env = LEDGER_ENV)]
    pub ledger: PathBuf,
    /// The backup to load (what `ledger backup` wrote of a PostgreSQL ledger).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// Arguments of `audit verify`.
#[derive(Debug, Args)]
pub struct AuditVerifyArgs {
    /// The ledger (an SQLite file made by the dispatcher).
    #[arg(long, value_name = "PATH", env = LEDGER_ENV)]
    pub ledger: PathBuf,
}

/// Arguments of `audit export`.
#[derive(Debug, Args)]
pub struct AuditExportArgs {
    #[command(flatten)]
    pub records: AuditSelection,
}

/// Which audit records `audit export` and `audit stats` read.
#[derive(Debug, Args)]
pub struct AuditSelection {
    /// The ledger (an SQLite file made by the dispatcher).
    #[arg(long, value_name = "PATH", env = LEDGER_ENV)]
    pub ledger: PathBuf,
    /// Only records at or after this time, e.g. 2026-01-31T12:00:00Z or
    /// 2026-01-31T13:00:00+01:00.
    #[arg(long, value_name = "RFC3339", value_parser = ptd_ledger::flags::since_value)]
    pub since: Option<u64>,
    #[command(flatten)]
    pub filter: AuditFilterArgs,
}

/// Which records `audit export` and `audit stats` keep: a record must match every option
/// given, any of its values.
#[derive(Debug, Args, Clone, Default)]
pub struct AuditFilterArgs {
    /// Only the records of this sandbox session id (repeatable; not split at commas, which an
    /// id may hold).
    #[arg(long, value_name = "ID")]
    pub session: Vec<String>,
    /// Only the records of this canonical tool id (repeatable, or a `,`-separated list).
    #[arg(long, value_name = "TOOL", value_delimiter = ',')]
    pub tool: Vec<String>,
    /// Only the records with this final status, e.g. succeeded, failed, denied (repeatable, or
    /// a `,`-separated list).
    #[arg(long, value_name = "STATUS", value_delimiter = ',')]
    pub status: Vec<String>,
}

impl AuditFilterArgs {
    /// The ledger's filter.
    pub fn filter(&self) -> ptd_ledger::Filter {
        ptd_ledger::Filter {
            sessions: self.session.clone(),
            tools: self.tool.clone(),
            statuses: self.status.clone(),
        }
    }
}

/// Arguments of `audit stats`.
#[derive(Debug, Args)]
pub struct AuditStatsArgs {
    #[command(flatten)]
    pub records: AuditSelection,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `ledger status`: the main job's options that set a session's budgets.
#[derive(Debug, Args)]
pub struct LedgerStatusArgs {
    #[command(flatten)]
    pub bridge: BridgeArg,
    #[command(flatten)]
    pub ledger: LedgerArgs,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `ledger prune`.
#[derive(Debug, Args)]
pub struct LedgerPruneArgs {
    /// The ledger: an SQLite file or a PostgreSQL URL.
    #[arg(long, value_name = "PATH|URL", env = LEDGER_ENV)]
    pub ledger: PathBuf,
    /// Remove the records older than this time (as `audit export --since`).
    #[arg(long, value_name = "RFC3339", value_parser = ptd_ledger::flags::since_value)]
    pub before: u64,
}
