//! [`Compiled`]: a checked policy in the form one call reads (the main job's, `policy
//! explain`'s): what every call needs — `[defaults]`, `[ledger]`, the `match` of every entry,
//! the `timeout_ms` values, and what the whole file passes as secrets or sets at all — and the
//! entries themselves encoded one after the other, each decoded only when it decides the call.
//! It is what the compiled-policy cache stores (`cache.rs`), so reading a cached policy back
//! costs the few fields a call uses, not the whole file (docs/PERFORMANCE.md).

use crate::model::{Entry, LedgerSection, Location, Pattern, Policy, DEFAULTS_ENTRY};
use crate::problem::Problem;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A checked policy as one call reads it; see the module's comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compiled {
    /// The file as named.
    pub file: PathBuf,
    /// SHA-256 of the file's bytes, 64 lower-case hex digits.
    pub sha256: String,
    pub defaults: Entry,
    /// The line of the `[defaults]` header, when the file has one.
    pub defaults_line: Option<usize>,
    pub ledger: Option<LedgerSection>,
    /// Every `timeout_ms` written, with where ([`Compiled::above_bridge`]).
    pub timeouts: Vec<(u64, Location)>,
    /// Every variable any table passes as a secret (`secret_env`) or under a sensitive name
    /// (`pass_env`): scrubbed from everything that leaves, whichever entry decides.
    pub secret_names: Vec<String>,
    /// Whether any table sets `pass_env`.
    pub sets_pass_env: bool,
    /// Whether any table sets `secret_env`.
    pub sets_secret_env: bool,
    /// Whether any table sets `budget_calls`.
    pub sets_budget_calls: bool,
    /// Each entry's `match` and the line of its header, in the file's order.
    patterns: Vec<(Pattern, usize)>,
    /// The entries' keys, each encoded on its own, back to back. Not part of the serialized
    /// form: the cache writes them after it as they are ([`Compiled::entries`],
    /// [`Compiled::with_entries`]), so reading them back is no copy.
    #[serde(skip)]
    entries: Vec<u8>,
    /// Where each entry's encoding ends in `entries`.
    ends: Vec<u32>,
}

/// What [`Compiled::route`] found: the deciding entry (its `match` as written, or
/// [`DEFAULTS_ENTRY`], and the line of its header) and its keys over `[defaults]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub entry: String,
    pub line: Option<usize>,
    /// Whether an entry matched (else `[defaults]` alone).
    pub matched: bool,
    pub effective: Entry,
}

impl Policy {
    /// This policy in the form one call reads.
    pub fn compile(&self) -> Compiled {
        let tables = || std::iter::once(&self.defaults).chain(self.tools.iter().map(|t| &t.entry));
        let mut secret_names = Vec::new();
        for table in tables() {
            secret_names.extend(table.secret_env.iter().flatten().cloned());
            secret_names.extend(
                table
                    .pass_env
                    .iter()
                    .flatten()
                    .filter(|name| ptd_wire::redact::is_sensitive_key(name))
                    .cloned(),
            );
        }
        secret_names.sort_unstable();
        secret_names.dedup();
        let mut entries = Vec::new();
        let mut ends = Vec::with_capacity(self.tools.len());
        for tool in &self.tools {
            // An entry of a loaded policy always encodes (plain data); a failure would only
            // leave the entry empty, which `route` reads as no keys.
            if let Ok(bytes) = postcard::to_allocvec(&tool.entry) {
                entries.extend_from_slice(&bytes);
            }
            ends.push(u32::try_from(entries.len()).unwrap_or(u32::MAX));
        }
        Compiled {
            file: self.file.clone(),
            sha256: self.sha256.clone(),
            defaults: self.defaults.clone(),
            defaults_line: self.defaults_line,
            ledger: self.ledger.clone(),
            timeouts: self.timeouts.clone(),
            secret_names,
            sets_pass_env: tables().any(|t| t.pass_env.is_some()),
            sets_secret_env: tables().any(|t| t.secret_env.is_some()),
            sets_budget_calls: tables().any(|t| t.budget_calls.is_some()),
            patterns: self
                .tools
                .iter()
                .map(|t| (t.pattern.clone(), t.line))
                .collect(),
            entries,
            ends,
        }
    }
}

impl Compiled {
    /// The entry that decides `canonical_tool`, by the rules of [`Policy::route`] (one
    /// function decides for both: [`crate::route::decider`]), and its keys over `[defaults]`.
    pub fn route(&self, canonical_tool: &str) -> Routed {
        let found = crate::route::decider(
            self.patterns.iter().map(|(pattern, _)| pattern),
            canonical_tool,
        );
        let Some(index) = found else {
            return Routed {
                entry: DEFAULTS_ENTRY.to_string(),
                line: self.defaults_line,
                matched: false,
                effective: self.defaults.clone(),
            };
        };
        let (pattern, line) = &self.patterns[index];
        let start = match index {
            0 => 0,
            i => self.ends[i - 1] as usize,
        };
        let end = self.ends[index] as usize;
        let entry: Entry = self
            .entries
            .get(start..end)
            .and_then(|bytes| postcard::from_bytes(bytes).ok())
            .unwrap_or_default();
        Routed {
            entry: pattern.as_written(),
            line: Some(*line),
            matched: true,
            effective: entry.over(&self.defaults),
        }
    }

    /// The problems of `timeout_ms` values above the bridge's (see [`Policy::above_bridge`]).
    pub fn above_bridge(&self, bridge_timeout_ms: u64) -> Vec<Problem> {
        crate::route::above(&self.file, &self.timeouts, bridge_timeout_ms)
    }

    /// The encoded entries (what the serialized form leaves out).
    pub(crate) fn entries(&self) -> &[u8] {
        &self.entries
    }

    /// This policy with its encoded entries put back; `None` when they do not fit its index.
    pub(crate) fn with_entries(mut self, entries: Vec<u8>) -> Option<Compiled> {
        let fits = self.ends.len() == self.patterns.len()
            && self.ends.windows(2).all(|w| w[0] <= w[1])
            && self.ends.last().map_or(0, |&end| end as usize) == entries.len();
        self.entries = entries;
        fits.then_some(self)
    }

    /// How many `[[tool]]` entries the policy has.
    pub fn len(&self) -> usize {
        self.patterns.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}
