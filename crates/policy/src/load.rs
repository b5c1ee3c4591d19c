//! The strict loader: the file (owner, mode, size), then every key of the document, each
//! problem collected with its location: the whole file is judged, not its first mistake.

use crate::entry::{EntryContext, EntryRead};
use crate::model::{LedgerSection, Location, Pattern, Policy, ToolEntry};
use crate::problem::Problem;
use crate::value::{escape, is_var_name, Checker, Value};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};

/// The largest policy file read, in bytes (1 MiB).
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// The most `[[tool]]` entries a policy may have.
pub const MAX_TOOLS: usize = 1000;
/// The longest `match`, in bytes (the ledger's bound on a tool id).
pub(crate) const MAX_MATCH_BYTES: usize = 256;

/// What the loader checks the file against, from outside it.
#[derive(Debug, Clone, Default)]
pub struct LoadContext {
    /// The bridge's `dispatcher.timeout_ms`: no `timeout_ms` may be above it.
    pub bridge_timeout_ms: Option<u64>,
    /// The command line's ledger (`--ledger`), when the policy's `[ledger]` names none:
    /// `decision = "ask"` and the budgets need a ledger, and no grant may cover its folder.
    pub ledger: Option<PathBuf>,
    /// `PATH`, to find an adapter's program by name (`None`: the default search path).
    pub path: Option<OsString>,
}

/// The keys of the policy's top level.
pub const TOP_KEYS: [&str; 4] = ["version", "defaults", "ledger", "tool"];
/// The keys of `[ledger]`.
pub const LEDGER_KEYS: [&str; 7] = [
    "path",
    "session_env",
    "budget_calls",
    "budget_adapter_ms",
    "max_concurrent",
    "lease_ttl",
    "durability",
];

/// Load and check the policy file at `path`: every problem of the file, or the policy.
pub fn load(path: &Path, cx: &LoadContext) -> Result<Policy, Vec<Problem>> {
    let (bytes, status) = read_policy(path)?;
    let euid = rustix::process::geteuid().as_raw();
    check_read(path, &bytes, &status, cx, euid)
}

/// A problem about the whole file, at its first line.
fn whole(path: &Path, message: String) -> Problem {
    Problem::new(
        &path.display().to_string(),
        Location { line: 1, column: 1 },
        message,
    )
}

/// The policy file's bytes and status, through the one reader (no FIFO, no device, at most
/// [`MAX_FILE_BYTES`]); a file that cannot be read is one problem.
pub(crate) fn read_policy(path: &Path) -> Result<(Vec<u8>, rustix::fs::Stat), Vec<Problem>> {
    match ptd_sys::fs::read_file_with_status(path, MAX_FILE_BYTES) {
        Ok(read) => Ok(read),
        Err(ptd_sys::fs::ReadError::TooLarge { .. }) => Err(vec![whole(
            path,
            format!("the policy file is larger than {MAX_FILE_BYTES} bytes (1 MiB), the most read"),
        )]),
        Err(err) => Err(vec![whole(
            path,
            format!("the policy file cannot be read: {err}"),
        )]),
    }
}

/// Check a policy file as read: who may write it (for a dispatcher of `euid`), then its text.
pub(crate) fn check_read(
    path: &Path,
    bytes: &[u8],
    status: &rustix::fs::Stat,
    cx: &LoadContext,
    euid: u32,
) -> Result<Policy, Vec<Problem>> {
    let mut problems: Vec<Problem> = writers_problems(path, status, euid)
        .into_iter()
        .map(|message| whole(path, message))
        .collect();
    let parsed = match std::str::from_utf8(bytes) {
        Ok(text) => parse(path, text, cx),
        Err(err) => Err(vec![whole(
            path,
            format!("the policy file is not UTF-8: {err}"),
        )]),
    };
    match parsed {
        Ok(policy) if problems.is_empty() => Ok(policy),
        Ok(_) => Err(problems),
        Err(more) => {
            problems.extend(more);
            Err(problems)
        }
    }
}

/// Why someone other than the host could change the policy file at `path` (of `status`): the
/// file's own mode and owner ([`access_problem`]), and its folder's — a folder others may
/// write (without the sticky bit) or that another user owns lets them replace the file.
pub(crate) fn writers_problems(path: &Path, status: &rustix::fs::Stat, euid: u32) -> Vec<String> {
    let mut problems: Vec<String> = access_problem(status.st_mode, status.st_uid, euid)
        .into_iter()
        .collect();
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(dir) = rustix::fs::stat(folder) {
        let (mode, owner) = (dir.st_mode, dir.st_uid);
        let sticky = mode & 0o1000 != 0;
        if mode & 0o022 != 0 && !sticky {
            problems.push(format!(
                "the policy file's folder is writable by {} (mode {:o}): they could replace \
                 the file",
                if mode & 0o002 != 0 {
                    "others"
                } else {
                    "its group"
                },
                mode & 0o7777
            ));
        } else if owner != 0 && owner != euid {
            problems.push(format!(
                "the policy file's folder belongs to uid {owner}, another user than root or \
                 this dispatcher (uid {euid}), who could replace the file"
            ));
        }
    }
    problems
}

/// Why a file of this mode and owner could be changed by someone other than the host: it is
/// writable by its group or by others, or owned by a user who is neither root nor `euid`.
pub fn access_problem(mode: u32, owner: u32, euid: u32) -> Option<String> {
    if mode & 0o022 != 0 {
        return Some(format!(
            "the policy file is writable by {} (mode {:o}): only its owner may write it",
            if mode & 0o002 != 0 {
                "others"
            } else {
                "its group"
            },
            mode & 0o7777
        ));
    }
    if owner != 0 && owner != euid {
        return Some(format!(
            "the policy file belongs to uid {owner}, another user than root or this dispatcher \
             (uid {euid}), who could write it"
        ));
    }
    None
}

/// Check the text of a policy file named `file`: every problem, sorted by location, or the
/// policy. Never panics, whatever the text.
pub fn parse(file: &Path, text: &str, cx: &LoadContext) -> Result<Policy, Vec<Problem>> {
    let mut checker = Checker::new(file.display().to_string(), text);
    let (root, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        for err in errors {
            let span = err.span().unwrap_or(0..0);
            checker.report(&span, err.message().trim_end().to_string());
        }
        return Err(sorted(checker.problems));
    }
    let policy = checker.document(root.get_ref(), cx, file, text);
    if checker.problems.is_empty() {
        Ok(policy)
    } else {
        Err(sorted(checker.problems))
    }
}

fn sorted(mut problems: Vec<Problem>) -> Vec<Problem> {
    problems.sort_by_key(Problem::location);
    problems
}

/// What entries ask for that the file as a whole must allow, with where they ask it.
#[derive(Default)]
struct Needs {
    asks: Vec<Location>,
    budgets: Vec<Location>,
    timeouts: Vec<(u64, Location)>,
}

impl Needs {
    fn add(&mut self, read: &EntryRead<'_>) {
        self.asks.extend(read.ask_at);
        self.budgets.extend(read.budget_at);
        if let (Some(ms), Some(at)) = (read.entry.timeout_ms, read.timeout_at) {
            self.timeouts.push((ms, at));
        }
    }
}

/// Finds a top-level key's value.
fn find<'v, 'i>(table: &'v DeTable<'i>, name: &str) -> Option<&'v Value<'i>> {
    table
        .iter()
        .find(|(key, _)| key.get_ref().as_ref() == name)
        .map(|(_, value)| value)
}

impl Checker<'_> {
    fn document(
        &mut self,
        root: &DeTable<'_>,
        cx: &LoadContext,
        file: &Path,
        text: &str,
    ) -> Policy {
        for (key, _) in root.iter() {
            if !TOP_KEYS.contains(&key.get_ref().as_ref()) {
                self.unknown_key(key, "the policy", &TOP_KEYS);
            }
        }
        self.version(find(root, "version"));
        let ledger = find(root, "ledger").and_then(|v| self.ledger(v));
        let section_path = ledger.as_ref().and_then(|l| l.path.as_deref());
        // The ledger's file, when it is one: no grant may hold its folder or lie in it. A
        // PostgreSQL ledger (SPEC §19.1) has no folder here.
        let is_url = ptd_ledger::Location::is_url;
        let ledger_path = match section_path {
            Some(p) if is_url(p) => None,
            Some(p) => Some((Path::new(p), "[ledger] path")),
            None => cx
                .ledger
                .as_deref()
                .filter(|p| !p.to_str().is_some_and(is_url))
                .map(|p| (p, "--ledger")),
        };
        let ecx = EntryContext {
            path: cx.path.as_deref(),
            ledger: ledger_path,
        };
        let mut needs = Needs::default();
        let (defaults, defaults_line) = match find(root, "defaults") {
            Some(value) => match self.table("defaults", value) {
                Some(table) => (
                    self.entry(table, false, ecx, "[defaults]"),
                    Some(self.at(&value.span()).line),
                ),
                None => (EntryRead::default(), None),
            },
            None => (EntryRead::default(), None),
        };
        self.unconfined_grants(&defaults, None);
        needs.add(&defaults);
        let tools =
            find(root, "tool").map_or_else(Vec::new, |v| self.tools(v, ecx, &defaults, &mut needs));
        let has_ledger = section_path.is_some() || cx.ledger.is_some();
        self.needs_ledger(&needs, has_ledger);
        let mut policy = Policy {
            file: file.to_path_buf(),
            sha256: ptd_wire::envelope::canonical::sha256_hex(text.as_bytes()),
            defaults: defaults.entry,
            defaults_line,
            defaults_unconfined_at: defaults.unconfined_at,
            ledger,
            tools,
            timeouts: needs.timeouts,
            asks: needs.asks,
        };
        if let Some(bridge_ms) = cx.bridge_timeout_ms {
            self.problems.extend(policy.above_bridge(bridge_ms));
        }
        policy.timeouts.shrink_to_fit();
        policy
    }

    /// What only a ledger keeps (approvals, budgets) asked for without one.
    fn needs_ledger(&mut self, needs: &Needs, has_ledger: bool) {
        if has_ledger {
            return;
        }
        for at in &needs.asks {
            let message = "`decision = \"ask\"` needs a ledger ([ledger] path or --ledger): \
                           approvals are kept there";
            self.report_at(*at, message);
        }
        for at in &needs.budgets {
            let message = "`budget_calls` needs a ledger ([ledger] path or --ledger): budgets \
                           are counted there";
            self.report_at(*at, message);
        }
    }

    /// `unconfined = true` (here or inherited from `[defaults]`) beside a confinement key
    /// of the same table: the key would mean nothing, which is refused rather than ignored.
    fn unconfined_grants(&mut self, read: &EntryRead<'_>, inherited: Option<bool>) {
        let unconfined = read.entry.unconfined.or(inherited) == Some(true);
        if !unconfined {
            return;
        }
        for (key, at) in &read.confine_keys {
            let message = format!(
                "`{key}` confines nothing here: this entry runs unconfined (`unconfined = true`{}); \
                 remove one of the two",
                if read.entry.unconfined.is_some() { "" } else { " in [defaults]" }
            );
            self.report_at(*at, message);
        }
    }

    fn version(&mut self, value: Option<&Value<'_>>) {
        let Some(value) = value else {
            self.report_at(Location { line: 1, column: 1 }, "missing `version = 1`");
            return;
        };
        if let Some(text) = self.integer_text("version", value) {
            if text != "1" {
                let message = format!("`version` {text} is not known: this dispatcher reads 1");
                self.report(&value.span(), message);
            }
        }
    }

    /// `[ledger] lease_ttl` (`--lease-ttl`, SPEC §19.1): a duration from 3 s to 24 h, written
    /// like `30s`, `5m`, `1h`, or an integer number of seconds.
    fn lease_ttl(&mut self, value: &Value<'_>) -> Option<u64> {
        let seconds = match value.get_ref() {
            DeValue::String(text) => crate::entry::parse_duration(text),
            DeValue::Integer(_) => self
                .integer_text("lease_ttl", value)
                .and_then(|t| t.parse::<u64>().ok()),
            _ => None,
        };
        let fine = seconds.filter(|s| (3..=86_400).contains(s));
        if fine.is_none() {
            self.report(
                &value.span(),
                "`lease_ttl`: expected a duration from 3s to 24h, written like 30s, 5m, 1h or as \
                 an integer number of seconds",
            );
        }
        fine
    }

    fn ledger(&mut self, value: &Value<'_>) -> Option<LedgerSection> {
        let table = self.table("ledger", value)?;
        let mut section = LedgerSection::default();
        let mut budgets = ptd_ledger::Budgets::default();
        for (key, value) in table.iter() {
            let name = key.get_ref().as_ref();
            let flag = match name {
                "path" => {
                    section.path = self.nonempty(name, value).map(str::to_string);
                    section.path_at = Some(self.at(&value.span()));
                    // A URL is a PostgreSQL ledger (SPEC §19.1), read as `--ledger` reads it.
                    let url = section
                        .path
                        .as_deref()
                        .filter(|p| ptd_ledger::Location::is_url(p));
                    if let Some(Err(err)) = url.map(ptd_ledger::Location::parse) {
                        self.report(&value.span(), format!("`[ledger] path`: {err}"));
                        section.path = None;
                    }
                    continue;
                }
                "session_env" => {
                    section.session_env = self.session_env(value);
                    continue;
                }
                "lease_ttl" => {
                    section.lease_ttl = self.lease_ttl(value);
                    continue;
                }
                "durability" => {
                    section.durability = self.durability(value);
                    continue;
                }
                "budget_calls" => "--budget-calls",
                "budget_adapter_ms" => "--budget-adapter-ms",
                "max_concurrent" => "--max-concurrent",
                _ => {
                    self.unknown_key(key, "[ledger]", &LEDGER_KEYS);
                    continue;
                }
            };
            let Some(text) = self.integer_text(name, value) else {
                continue;
            };
            if let Err(err) = ptd_ledger::flags::parse_budget_flag(&mut budgets, flag, &text) {
                self.report(&value.span(), format!("`{name}`: {}", err.reason));
            }
        }
        section.budget_calls = budgets.calls;
        section.budget_adapter_ms = budgets.adapter_ms;
        section.max_concurrent = budgets.max_concurrent;
        Some(section)
    }

    /// `[ledger] durability` (`--ledger-durability`, SPEC §14.4): `full` or `normal`.
    fn durability(&mut self, value: &Value<'_>) -> Option<ptd_ledger::Durability> {
        let text = self.string("durability", value)?;
        let choice = ptd_ledger::Durability::parse(text);
        if choice.is_none() {
            let message = format!(
                "`durability`: `{}` is not one of {}",
                escape(text),
                ptd_ledger::Durability::NAMES.join(", ")
            );
            self.report(&value.span(), message);
        }
        choice
    }

    fn session_env(&mut self, value: &Value<'_>) -> Option<String> {
        let name = self.string("session_env", value)?;
        if is_var_name(name) {
            return Some(name.to_string());
        }
        let message = format!(
            "`session_env`: `{}` is not a variable name (non-empty, without `=`)",
            escape(name)
        );
        self.report(&value.span(), message);
        None
    }

    fn tools(
        &mut self,
        value: &Value<'_>,
        ecx: EntryContext<'_>,
        defaults: &EntryRead<'_>,
        needs: &mut Needs,
    ) -> Vec<ToolEntry> {
        let DeValue::Array(items) = value.get_ref() else {
            self.report(
                &value.span(),
                "`tool` must be an array of tables: write [[tool]]",
            );
            return Vec::new();
        };
        if let Some(extra) = items.get(MAX_TOOLS) {
            let message =
                format!("more than {MAX_TOOLS} [[tool]] entries: the most a policy may have");
            self.report(&extra.span(), message);
        }
        let mut tools = Vec::new();
        let mut seen: HashMap<Pattern, usize> = HashMap::new();
        for item in items.iter().take(MAX_TOOLS) {
            let Some(table) = self.table("tool", item) else {
                continue;
            };
            let header = self.at(&item.span());
            let read = self.entry(table, true, ecx, "[[tool]]");
            self.unconfined_grants(&read, defaults.entry.unconfined);
            needs.add(&read);
            let Some((written, span)) = read.pattern.clone() else {
                if !table.iter().any(|(k, _)| k.get_ref().as_ref() == "match") {
                    self.report_at(header, "a [[tool]] entry needs `match`");
                }
                continue;
            };
            let Some(pattern) = self.pattern(written, &span) else {
                continue;
            };
            if let Some(line) = seen.get(&pattern) {
                let message = format!(
                    "`match = \"{}\"` again: the entry at line {line} has the same `match`",
                    escape(written)
                );
                self.report(&span, message);
                continue;
            }
            seen.insert(pattern.clone(), header.line);
            tools.push(ToolEntry {
                pattern,
                line: header.line,
                match_at: self.at(&span),
                unconfined_at: read.unconfined_at,
                entry: read.entry,
            });
        }
        tools
    }

    /// A canonical id, or a prefix ending in exactly one `*`.
    fn pattern(&mut self, written: &str, span: &std::ops::Range<usize>) -> Option<Pattern> {
        let (literal, prefix) = match written.strip_suffix('*') {
            Some(literal) => (literal, true),
            None => (written, false),
        };
        let fine = written.len() <= MAX_MATCH_BYTES
            && (prefix || !literal.is_empty())
            && literal.bytes().all(|b| b.is_ascii_graphic() && b != b'*');
        if !fine {
            let message = format!(
                "`match = \"{}\"`: expected a canonical tool id (`git.commit`) or a prefix \
                 ending in one `*` (`git.*`, `*`)",
                escape(written)
            );
            self.report(span, message);
            return None;
        }
        let literal = literal.to_string();
        Some(if prefix {
            Pattern::Prefix(literal)
        } else {
            Pattern::Exact(literal)
        })
    }
}
