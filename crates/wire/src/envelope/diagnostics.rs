//! The dispatcher's own part of a result envelope's `diagnostics`: `dispatch` (how the call
//! ran: transport, the adapter's run, its resources, the confinement) and `ledger` (what the
//! ledger decided), typed and serialized as they are written (SPEC §2.3, §13, §14).

use crate::json::raw::{Fields, ObjectWriter};
use serde::Serialize;

/// How the request reached whoever answered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// Request on the adapter's stdin, result on its stdout.
    Stdin,
    /// Request and result in private files.
    File,
    /// An HTTP `POST` to the host's endpoint (`host_endpoint`).
    Http,
    /// No process ran: `replay` judged a recorded answer.
    Replay,
}

/// What happened to the request bytes on the adapter's stdin, when writing them failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StdinError {
    /// The adapter closed its stdin early: normal for adapters that need no request.
    BrokenPipe,
    /// Any other write error, by its kind.
    #[serde(untagged)]
    Other(String),
}

impl StdinError {
    /// Any other write error, by the wire name of its kind ([`io_kind_name`]).
    pub fn other(kind: std::io::ErrorKind) -> StdinError {
        StdinError::Other(io_kind_name(kind).to_string())
    }
}

/// The stable wire name of an I/O error kind (`diagnostics.dispatch.stdin_error`): the kind's
/// name in lower case without separators (`permissiondenied`, `storagefull`), the spelling the
/// envelope has always had. `Debug` output is not a format, so each name is written here; a
/// kind this table does not name (one added to std later, or an uncategorized OS error) is
/// `uncategorized`.
pub(crate) fn io_kind_name(kind: std::io::ErrorKind) -> &'static str {
    use std::io::ErrorKind as K;
    match kind {
        K::NotFound => "notfound",
        K::PermissionDenied => "permissiondenied",
        K::ConnectionRefused => "connectionrefused",
        K::ConnectionReset => "connectionreset",
        K::HostUnreachable => "hostunreachable",
        K::NetworkUnreachable => "networkunreachable",
        K::ConnectionAborted => "connectionaborted",
        K::NotConnected => "notconnected",
        K::AddrInUse => "addrinuse",
        K::AddrNotAvailable => "addrnotavailable",
        K::NetworkDown => "networkdown",
        K::BrokenPipe => "brokenpipe",
        K::AlreadyExists => "alreadyexists",
        K::WouldBlock => "wouldblock",
        K::NotADirectory => "notadirectory",
        K::IsADirectory => "isadirectory",
        K::DirectoryNotEmpty => "directorynotempty",
        K::ReadOnlyFilesystem => "readonlyfilesystem",
        K::StaleNetworkFileHandle => "stalenetworkfilehandle",
        K::InvalidInput => "invalidinput",
        K::InvalidData => "invaliddata",
        K::TimedOut => "timedout",
        K::WriteZero => "writezero",
        K::StorageFull => "storagefull",
        K::NotSeekable => "notseekable",
        K::FileTooLarge => "filetoolarge",
        K::ResourceBusy => "resourcebusy",
        K::ExecutableFileBusy => "executablefilebusy",
        K::Deadlock => "deadlock",
        K::TooManyLinks => "toomanylinks",
        K::ArgumentListTooLong => "argumentlisttoolong",
        K::Interrupted => "interrupted",
        K::Unsupported => "unsupported",
        K::UnexpectedEof => "unexpectedeof",
        K::OutOfMemory => "outofmemory",
        K::Other => "other",
        _ => "uncategorized",
    }
}

/// What the process runner observed, for `diagnostics.dispatch` (absent until an adapter ran).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiagnostics {
    pub exit_code: Option<i32>,
    /// `SIGKILL`, … when a signal ended the adapter.
    pub signal: Option<String>,
    pub stdout_bytes: u64,
    pub stdin_bytes_written: u64,
    pub stdin_error: Option<StdinError>,
    /// The end of stderr, redacted, at most 64 KiB.
    pub stderr_tail: String,
    pub stderr_truncated: bool,
    /// Every byte the adapter wrote to stderr: for the audit record (SPEC §14.3), not printed.
    #[serde(skip)]
    pub stderr_bytes: u64,
    pub leaked_processes: usize,
    /// What the adapter's whole process tree used (SPEC §13); absent for a recorded answer,
    /// where nothing ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
}

/// `diagnostics.dispatch.resources`: the whole tree's usage, confined or not (SPEC §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Resources {
    /// The largest resident set size any single process of the tree reached.
    pub max_rss_bytes: u64,
    /// User-mode CPU time, summed over the tree.
    pub user_ms: u64,
    /// Kernel-mode CPU time, summed over the tree.
    pub system_ms: u64,
}

/// `diagnostics.dispatch.confinement` (SPEC §13 "Reported"): what was in force for the
/// adapter. Paths are host paths: they reach the envelope only through redaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfinementDiagnostics {
    /// In SPEC §13.1's and §13.2's order: `cgroup`, `rlimits`, `user_namespace`,
    /// `pid_namespace`, `network_namespace`, `no_privileges`, `no_new_privs`, `landlock`,
    /// `seccomp`.
    pub mechanisms: Vec<&'static str>,
    /// Who the adapter ran as (SPEC §13.2).
    pub run_as: RunAsDiagnostics,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub landlock: Option<LandlockDiagnostics>,
    /// `none` or `any`.
    pub network: &'static str,
    pub limits: LimitDiagnostics,
    /// Each tree-limit controller and the cgroup interface it is used through (`v1`, `v2`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub cgroup: std::collections::BTreeMap<&'static str, &'static str>,
}

/// The user of [`ConfinementDiagnostics`]: never 0, and no capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RunAsDiagnostics {
    pub uid: u32,
    pub gid: u32,
}

/// The Landlock part of [`ConfinementDiagnostics`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LandlockDiagnostics {
    /// The kernel's Landlock ABI.
    pub abi: u32,
    /// Whether signals and abstract unix sockets are scoped to the adapter (ABI 6+).
    pub scoped: bool,
    /// `--fs-read` and `--fs-write`, canonical.
    pub fs_read: Vec<String>,
    pub fs_write: Vec<String>,
}

/// The limits of [`ConfinementDiagnostics`]; absent ones were not asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LimitDiagnostics {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_size_bytes: Option<u64>,
}

/// `diagnostics.dispatch`: what the dispatcher itself reports (SPEC §4.5). It replaces any
/// `dispatch` key an answer wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DispatchDiagnostics {
    /// The dispatcher's version.
    pub version: &'static str,
    pub adapter_started: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    /// The endpoint's origin, `scheme://host:port` (never the rest of its URL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The endpoint's HTTP status, once one was received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// Bytes of the endpoint's response body received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<u64>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunDiagnostics>,
    /// The start of stdout, redacted, when stdout is not the answer or not a valid one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_head: Option<String>,
    /// What confined the adapter (SPEC §13); absent when nothing did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confinement: Option<ConfinementDiagnostics>,
    /// The host policy's entry that decided the call (SPEC §16); absent without `--policy`
    /// or before the call was routed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyDiagnostics>,
    /// The egress proxy's connections (SPEC §17); present with `--network allow:` once the
    /// adapter ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkDiagnostics>,
    pub duration_ms: u64,
    /// The call's span's trace id, 32 lower-case hex digits, when telemetry is on (SPEC §20):
    /// how a host finds the trace of an envelope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_file_error: Option<String>,
}

impl Default for DispatchDiagnostics {
    fn default() -> Self {
        DispatchDiagnostics {
            version: env!("CARGO_PKG_VERSION"),
            adapter_started: false,
            timeout_ms: None,
            transport: None,
            endpoint: None,
            http_status: None,
            response_bytes: None,
            run: None,
            stdout_head: None,
            confinement: None,
            policy: None,
            network: None,
            duration_ms: 0,
            trace_id: None,
            transcript_error: None,
            result_file_error: None,
        }
    }
}

/// `diagnostics.dispatch.policy` (SPEC §16): which policy, and which entry of it, decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyDiagnostics {
    /// The policy file's SHA-256, 64 lower-case hex digits.
    pub sha256: String,
    /// The deciding entry's `match`, or `defaults` when no entry matched.
    pub entry: String,
    /// The line of the entry's header (`[[tool]]`, or `[defaults]` when the file has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

/// `diagnostics.dispatch.network` (SPEC §17): what the egress proxy let through and refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkDiagnostics {
    /// `allow`: the only mode with a proxy.
    pub mode: &'static str,
    /// The first [`NetworkDiagnostics::LISTED`] connections, in the order they arrived.
    pub connections: Vec<ConnectionDiagnostics>,
    /// Connections not listed (past the first [`NetworkDiagnostics::LISTED`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub more: u64,
    /// Connections allowed and refused, all of them.
    pub allowed: u64,
    pub refused: u64,
}

impl NetworkDiagnostics {
    /// How many connections are listed.
    pub const LISTED: usize = 64;
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One connection the adapter asked the proxy for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnectionDiagnostics {
    /// The host as asked (lower case; an IPv6 address in brackets).
    pub host: String,
    pub port: u16,
    pub allowed: bool,
    /// Why it was refused, or why an allowed one was cut short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes from the adapter to the host, and back.
    pub bytes_up: u64,
    pub bytes_down: u64,
}

/// `diagnostics.ledger` (SPEC §14): what the ledger did with the call, present when the
/// dispatcher runs with `--ledger`. Like `dispatch`, it replaces any `ledger` member an answer
/// wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LedgerDiagnostics {
    /// True when this envelope is a recorded one printed again.
    pub replayed: bool,
    /// The key's attempt that produced the envelope (1 for a first run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The session's adapter time left under `--budget-adapter-ms` when the call started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter_ms_left: Option<u64>,
    /// Why the call could not be recorded (the envelope is the real one nonetheless).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `text`, a compact envelope the dispatcher rendered, with `diagnostics.ledger` set to
/// `ledger` and every other byte of every other member kept as it is; `None` when `text` is
/// not an object with an object `diagnostics`.
pub fn with_ledger_diagnostics(text: &str, ledger: &LedgerDiagnostics) -> Option<String> {
    let top = Fields::parse(text)?;
    let diagnostics = Fields::parse(top.get("diagnostics")?)?;
    let mut out = String::with_capacity(text.len() + 128);
    let mut w = ObjectWriter::new(&mut out);
    for (key, value) in top.iter() {
        if key != "diagnostics" {
            w.raw(key, value);
            continue;
        }
        w.with("diagnostics", |o| {
            let mut d = ObjectWriter::new(o);
            for (key, value) in diagnostics.iter().filter(|(k, _)| *k != "ledger") {
                d.raw(key, value);
            }
            d.value("ledger", ledger);
            d.finish();
        });
    }
    w.finish();
    Some(out)
}
