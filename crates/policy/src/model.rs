//! The policy as values (SPEC §16): what the loader returns once every check has passed.
//!
//! Values keep the spelling a command-line flag would take where one exists (sizes such as
//! `512M`, paths as written), so that [`Entry::confine_raw`] hands the confinement layer exactly
//! what the command line would, and `Options::parse` gives them their one meaning.

use ptd_sys::confine::{OptionName, RawOptions};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// A place in the policy file: 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// What happens to a call an entry decides (SPEC §16, §18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

impl Decision {
    /// The spelling in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

/// `network`: `"none"`, `"any"`, or `{ allow = ["host:port", …] }` (SPEC §17).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetworkPolicy {
    None,
    Any,
    /// Egress by name to these `host:port` pairs, as written (SPEC §17 gives them meaning).
    Allow(Vec<String>),
}

/// The keys an entry (or `[defaults]`) may set, each optional.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Entry {
    /// The adapter's argv (non-empty; its program absolute or found on `PATH` at load).
    pub adapter: Option<Vec<String>>,
    pub cwd: Option<PathBuf>,
    pub timeout_ms: Option<u64>,
    pub pass_env: Option<Vec<String>>,
    pub secret_env: Option<Vec<String>>,
    /// Grant paths as written (they existed at load).
    pub fs_read: Option<Vec<PathBuf>>,
    pub fs_write: Option<Vec<PathBuf>>,
    pub network: Option<NetworkPolicy>,
    /// A size as `--network-max-bytes` takes it (SPEC §17: the proxy's bound, with
    /// `network = { allow = [...] }` only).
    pub network_max_bytes: Option<String>,
    pub run_as: Option<String>,
    /// A size as `--limit-memory` takes it (`512M`, or digits).
    pub limit_memory: Option<String>,
    pub limit_pids: Option<u64>,
    pub limit_open_files: Option<u64>,
    /// A size as `--limit-file-size` takes it.
    pub limit_file_size: Option<String>,
    pub decision: Option<Decision>,
    /// Admitted calls of this tool per session (what `--budget-tool TOOL=N` means).
    pub budget_calls: Option<u64>,
    pub approval_ttl: Option<Duration>,
    pub approval_notify: Option<Vec<String>>,
    pub unconfined: Option<bool>,
}

impl Entry {
    /// This entry's keys over `base`'s: what a tool gets when `base` is `[defaults]`.
    pub fn over(&self, base: &Entry) -> Entry {
        fn pick<T: Clone>(top: &Option<T>, base: &Option<T>) -> Option<T> {
            top.as_ref().or(base.as_ref()).cloned()
        }
        Entry {
            adapter: pick(&self.adapter, &base.adapter),
            cwd: pick(&self.cwd, &base.cwd),
            timeout_ms: self.timeout_ms.or(base.timeout_ms),
            pass_env: pick(&self.pass_env, &base.pass_env),
            secret_env: pick(&self.secret_env, &base.secret_env),
            fs_read: pick(&self.fs_read, &base.fs_read),
            fs_write: pick(&self.fs_write, &base.fs_write),
            network: pick(&self.network, &base.network),
            network_max_bytes: pick(&self.network_max_bytes, &base.network_max_bytes),
            run_as: pick(&self.run_as, &base.run_as),
            limit_memory: pick(&self.limit_memory, &base.limit_memory),
            limit_pids: self.limit_pids.or(base.limit_pids),
            limit_open_files: self.limit_open_files.or(base.limit_open_files),
            limit_file_size: pick(&self.limit_file_size, &base.limit_file_size),
            decision: self.decision.or(base.decision),
            budget_calls: self.budget_calls.or(base.budget_calls),
            approval_ttl: self.approval_ttl.or(base.approval_ttl),
            approval_notify: pick(&self.approval_notify, &base.approval_notify),
            unconfined: self.unconfined.or(base.unconfined),
        }
    }

    /// The confinement keys as the command line's raw options: one `flag` per key (per path
    /// for the grants), spelled as the flag would be, for `Options::parse` (or
    /// `parse_beside_ledger`) to give them the command line's meaning. Call it on an effective
    /// entry ([`Route::effective`](crate::Route)) to have `[defaults]` merged.
    ///
    /// `network = { allow = [...] }` is `--network allow:` with the entries joined by `,`, and
    /// `network_max_bytes` is `--network-max-bytes` (SPEC §17), so the rules are read by the
    /// same `Options::parse` as the command line's.
    pub fn confine_raw(&self) -> RawOptions {
        let mut raw = RawOptions::default();
        for path in self.fs_read.iter().flatten() {
            raw.flag(OptionName::FsRead, path.clone());
        }
        for path in self.fs_write.iter().flatten() {
            raw.flag(OptionName::FsWrite, path.clone());
        }
        match &self.network {
            Some(NetworkPolicy::None) => {
                raw.flag(OptionName::Network, "none");
            }
            Some(NetworkPolicy::Any) => {
                raw.flag(OptionName::Network, "any");
            }
            Some(NetworkPolicy::Allow(list)) => {
                raw.flag(OptionName::Network, format!("allow:{}", list.join(",")));
            }
            None => {}
        }
        // Only an allow list has a proxy to bound: a `[defaults]` bound applies to the entries
        // that allow hosts, and to no other.
        let allows = matches!(self.network, Some(NetworkPolicy::Allow(_)));
        let spelled = [
            (
                OptionName::NetworkMaxBytes,
                self.network_max_bytes.clone().filter(|_| allows),
            ),
            (OptionName::LimitMemory, self.limit_memory.clone()),
            (
                OptionName::LimitPids,
                self.limit_pids.map(|n| n.to_string()),
            ),
            (
                OptionName::LimitOpenFiles,
                self.limit_open_files.map(|n| n.to_string()),
            ),
            (OptionName::LimitFileSize, self.limit_file_size.clone()),
            (OptionName::RunAs, self.run_as.clone()),
        ];
        for (name, value) in spelled {
            if let Some(value) = value {
                raw.flag(name, value);
            }
        }
        raw
    }
}

/// What a `[[tool]]` entry's `match` says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Pattern {
    /// A canonical tool id (`git.commit`).
    Exact(String),
    /// A prefix pattern: the literal before its one trailing `*` (`workspace.` for
    /// `workspace.*`, empty for `*`).
    Prefix(String),
}

impl Pattern {
    /// Whether `tool` (a canonical id) is matched: the `*` matches any characters, dots
    /// included.
    pub fn matches(&self, tool: &str) -> bool {
        match self {
            Pattern::Exact(id) => id == tool,
            Pattern::Prefix(literal) => tool.starts_with(literal.as_str()),
        }
    }

    /// The spelling in the file.
    pub fn as_written(&self) -> String {
        match self {
            Pattern::Exact(id) => id.clone(),
            Pattern::Prefix(literal) => format!("{literal}*"),
        }
    }
}

/// One `[[tool]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolEntry {
    pub pattern: Pattern,
    /// The line of its `[[tool]]` header.
    pub line: usize,
    /// Where its `match` value is written.
    pub match_at: Location,
    /// Where its `unconfined = true` is written, when it is.
    pub unconfined_at: Option<Location>,
    pub entry: Entry,
}

/// `[ledger]` (SPEC §14 settings the policy may carry instead of the command line).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LedgerSection {
    /// A file path, or a `postgres://` URL (SPEC §19), as written.
    pub path: Option<String>,
    /// Where `path` is written.
    pub path_at: Option<Location>,
    /// The variable the host's session id is read from.
    pub session_env: Option<String>,
    pub budget_calls: Option<u64>,
    pub budget_adapter_ms: Option<u64>,
    pub max_concurrent: Option<u64>,
    /// `lease_ttl`, in seconds (`--lease-ttl`, SPEC §19.1).
    pub lease_ttl: Option<u64>,
    /// `durability` (`--ledger-durability`, SPEC §14.4).
    pub durability: Option<ptd_ledger::Durability>,
}

impl LedgerSection {
    /// The section's budgets as the ledger's own value, as its flags would have set them.
    pub fn budgets(&self) -> ptd_ledger::Budgets {
        ptd_ledger::Budgets {
            calls: self.budget_calls,
            adapter_ms: self.budget_adapter_ms,
            max_concurrent: self.max_concurrent,
            ..ptd_ledger::Budgets::default()
        }
    }
}

/// A loaded, checked policy file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The file as named (for `FILE:LINE:COL` in problems and lints).
    pub file: PathBuf,
    /// SHA-256 of the file's bytes, 64 lower-case hex digits.
    pub sha256: String,
    pub defaults: Entry,
    /// The line of the `[defaults]` header, when the file has one.
    pub defaults_line: Option<usize>,
    /// Where `[defaults]`' `unconfined = true` is written, when it is.
    pub defaults_unconfined_at: Option<Location>,
    pub ledger: Option<LedgerSection>,
    pub tools: Vec<ToolEntry>,
    /// Every `timeout_ms` written, with where: checked against the bridge's
    /// ([`Policy::above_bridge`]) once the bridge is known.
    pub timeouts: Vec<(u64, Location)>,
    /// Where `decision = "ask"` is written (SPEC §18).
    pub asks: Vec<Location>,
}

/// Which entry decides a tool, and what the tool gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route<'p> {
    /// The deciding entry; `None` when none matches (then `[defaults]` alone).
    pub entry: Option<&'p ToolEntry>,
    /// The entry's keys over `[defaults]`.
    pub effective: Entry,
}

/// The name of the entry that decides when none matches, in `diagnostics.dispatch.policy.entry`
/// and the audit record.
pub const DEFAULTS_ENTRY: &str = "defaults";

/// An entry as a person reads it: `the entry "git.*" (line 12)`, or `[defaults] (line 3)`.
pub fn entry_name(entry: &str, line: Option<usize>) -> String {
    let name = if entry == DEFAULTS_ENTRY {
        "[defaults]".to_string()
    } else {
        format!("the entry {entry:?}")
    };
    match line {
        Some(line) => format!("{name} (line {line})"),
        None => name,
    }
}
