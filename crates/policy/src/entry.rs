//! The keys of an entry (`[defaults]` or a `[[tool]]`), read and checked.
//!
//! One meaning per key: each confinement key becomes the one command-line flag of the same
//! name in a `RawOptions` and is checked by the confinement layer's own `Options::parse`
//! (its message shown at the key, under the key's name); `budget_calls` is read by the
//! ledger's own parser.

use crate::model::{Decision, Entry, Location, NetworkPolicy};
use crate::value::{a_type, escape, Checker, Key, Value};
use ptd_sys::confine::allow::{AllowRule, MAX_RULES};
use ptd_sys::confine::{Network, OptionError, OptionName, Options, RawOptions};
use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::de::{DeTable, DeValue};

/// Every key an entry may set (SPEC §16), in the spec's order.
pub const ENTRY_KEYS: [&str; 19] = [
    "adapter",
    "cwd",
    "timeout_ms",
    "pass_env",
    "secret_env",
    "fs_read",
    "fs_write",
    "network",
    "network_max_bytes",
    "run_as",
    "limit_memory",
    "limit_pids",
    "limit_open_files",
    "limit_file_size",
    "decision",
    "budget_calls",
    "approval_ttl",
    "approval_notify",
    "unconfined",
];

/// The longest `approval_ttl`: a year (a longer approval is no approval at all).
pub(crate) const MAX_TTL_SECONDS: u64 = 366 * 24 * 3600;

/// What the loader needs from outside the file to check an entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryContext<'c> {
    /// `PATH` for finding an adapter's program.
    pub(crate) path: Option<&'c std::ffi::OsStr>,
    /// The ledger's file and how the host named it (`[ledger] path`, or `--ledger` when the
    /// policy names none): no grant may cover its folder.
    pub(crate) ledger: Option<(&'c Path, &'static str)>,
}

/// An entry as read, with what the loader checks across entries.
#[derive(Debug, Default)]
pub(crate) struct EntryRead<'v> {
    pub(crate) entry: Entry,
    /// `match`, as written, with its span (a `[[tool]]` only).
    pub(crate) pattern: Option<(&'v str, Range<usize>)>,
    pub(crate) unconfined_at: Option<Location>,
    /// Where `decision = "ask"` is written.
    pub(crate) ask_at: Option<Location>,
    /// Where `budget_calls` is written.
    pub(crate) budget_at: Option<Location>,
    /// Where `timeout_ms` is written.
    pub(crate) timeout_at: Option<Location>,
    /// The confinement keys this table writes, with where.
    pub(crate) confine_keys: Vec<(&'static str, Location)>,
}

/// The key `name` when it grants or limits what a confined adapter gets: the key of one of
/// the confinement options.
fn confine_key(name: &str) -> Option<&'static str> {
    OptionName::ALL
        .iter()
        .map(|option| key_of(*option))
        .find(|key| *key == name)
}

impl Checker<'_> {
    /// Read the table of an entry; `is_tool` allows `match` (a `[[tool]]`).
    pub(crate) fn entry<'v>(
        &mut self,
        table: &'v DeTable<'_>,
        is_tool: bool,
        cx: EntryContext<'_>,
        within: &str,
    ) -> EntryRead<'v> {
        let mut read = EntryRead::default();
        for (key, value) in table.iter() {
            let name = key.get_ref().as_ref();
            if let Some(known) = confine_key(name) {
                read.confine_keys.push((known, self.at(&key.span())));
            }
            let e = &mut read.entry;
            match name {
                "match" if is_tool => {
                    read.pattern = self.string(name, value).map(|s| (s, value.span()));
                }
                "adapter" => e.adapter = self.adapter(name, value, cx.path),
                "cwd" => e.cwd = self.nonempty(name, value).map(PathBuf::from),
                "timeout_ms" => {
                    e.timeout_ms = self.whole(name, value, 1);
                    read.timeout_at = Some(self.at(&value.span()));
                }
                "pass_env" => e.pass_env = self.var_names(name, value),
                "secret_env" => e.secret_env = self.var_names(name, value),
                "fs_read" => e.fs_read = self.grants(OptionName::FsRead, value, cx.ledger),
                "fs_write" => e.fs_write = self.grants(OptionName::FsWrite, value, cx.ledger),
                "network" => e.network = self.network(value),
                "network_max_bytes" => {
                    e.network_max_bytes = self.size(OptionName::NetworkMaxBytes, value);
                }
                "run_as" => {
                    e.run_as = self
                        .string(name, value)
                        .and_then(|s| self.confine_one(OptionName::RunAs, s, &value.span(), None))
                        .map(|(s, _)| s);
                }
                "limit_memory" => e.limit_memory = self.size(OptionName::LimitMemory, value),
                "limit_file_size" => {
                    e.limit_file_size = self.size(OptionName::LimitFileSize, value);
                }
                "limit_pids" => e.limit_pids = self.count(OptionName::LimitPids, value),
                "limit_open_files" => {
                    e.limit_open_files = self.count(OptionName::LimitOpenFiles, value);
                }
                "decision" => {
                    e.decision = self.decision(value);
                    if e.decision == Some(Decision::Ask) {
                        read.ask_at = Some(self.at(&value.span()));
                    }
                }
                "budget_calls" => {
                    e.budget_calls = self.budget_calls(value);
                    if e.budget_calls.is_some() {
                        read.budget_at = Some(self.at(&key.span()));
                    }
                }
                "approval_ttl" => e.approval_ttl = self.ttl(value),
                "approval_notify" => e.approval_notify = self.argv(name, value),
                "unconfined" => {
                    e.unconfined = self.boolean(name, value);
                    if e.unconfined == Some(true) {
                        read.unconfined_at = Some(self.at(&key.span()));
                    }
                }
                _ => self.unknown(key, is_tool, within),
            }
        }
        self.max_bytes_beside_allow(&read);
        read
    }

    /// `network_max_bytes` bounds the egress proxy, which only an allow list has: in a table
    /// that says `network = "none"` or `"any"` it is a mistake. (Set in `[defaults]` and not
    /// overridden, it applies to the entries that allow hosts.)
    fn max_bytes_beside_allow(&mut self, read: &EntryRead<'_>) {
        let network = &read.entry.network;
        let plain = matches!(network, Some(NetworkPolicy::None | NetworkPolicy::Any));
        let at = read
            .confine_keys
            .iter()
            .find(|(key, _)| *key == "network_max_bytes");
        if let (true, Some((_, at))) = (plain, at) {
            let message = "`network_max_bytes` bounds the egress proxy of `network = { allow = \
                           [...] }`, and this table's `network` is not an allow list";
            self.report_at(*at, message);
        }
    }

    fn unknown(&mut self, key: &Key<'_>, is_tool: bool, within: &str) {
        let mut known: Vec<&str> = Vec::with_capacity(ENTRY_KEYS.len() + 1);
        if is_tool {
            known.push("match");
        }
        known.extend(ENTRY_KEYS);
        self.unknown_key(key, within, &known);
    }

    /// `adapter`: an argv whose program is absolute or found on `PATH`.
    fn adapter(
        &mut self,
        key: &str,
        value: &Value<'_>,
        path: Option<&std::ffi::OsStr>,
    ) -> Option<Vec<String>> {
        let argv = self.argv(key, value)?;
        let program = argv.first()?;
        if program.starts_with('/') {
            return Some(argv);
        }
        let env: Vec<(&str, &std::ffi::OsStr)> = path.map(|p| ("PATH", p)).into_iter().collect();
        let found =
            !program.contains('/') && ptd_sys::exec::locate(Path::new(program), &env, None).is_ok();
        if found {
            return Some(argv);
        }
        let span = match value.get_ref() {
            DeValue::Array(items) => items.first().map_or(value.span(), |v| v.span()),
            _ => value.span(),
        };
        let message = format!(
            "`{key}`: the program `{}` is neither absolute nor found on PATH",
            escape(program)
        );
        self.report(&span, message);
        None
    }

    /// `fs_read` / `fs_write`: each path checked as its flag's value (it must exist, must not
    /// be `/`, must not cover the ledger's folder).
    fn grants(
        &mut self,
        option: OptionName,
        value: &Value<'_>,
        ledger: Option<(&Path, &'static str)>,
    ) -> Option<Vec<PathBuf>> {
        let key = key_of(option);
        let items = self.strings(key, value)?;
        let mut paths = Vec::with_capacity(items.len());
        for (path, span) in items {
            paths.push(
                self.confine_one(option, path, &span, ledger)
                    .map(|(s, _)| s),
            );
        }
        paths.into_iter().map(|p| p.map(PathBuf::from)).collect()
    }

    /// A size key (`limit_memory`, `limit_file_size`, `network_max_bytes`), as its flag
    /// spells it. `network_max_bytes` is checked as a size only: that it stands beside an allow
    /// list is the table's check ([`Checker::entry`]), and an effective entry without one does
    /// not pass it on (`Entry::confine_raw`).
    fn size(&mut self, option: OptionName, value: &Value<'_>) -> Option<String> {
        let text = self.size_text(key_of(option), value)?;
        if option == OptionName::NetworkMaxBytes {
            let mut raw = RawOptions::default();
            raw.flag(OptionName::Network, "allow:size.check:1");
            raw.flag(option, OsString::from(&text));
            return match Options::parse(&raw) {
                Ok(_) => Some(text),
                Err(err) => {
                    self.report(&value.span(), confine_message(&err));
                    None
                }
            };
        }
        self.confine_one(option, &text, &value.span(), None)
            .map(|(s, _)| s)
    }

    /// A count key (`limit_pids`, `limit_open_files`): an integer, checked as its flag.
    fn count(&mut self, option: OptionName, value: &Value<'_>) -> Option<u64> {
        let text = self.integer_text(key_of(option), value)?;
        let (_, options) = self.confine_one(option, &text, &value.span(), None)?;
        match option {
            OptionName::LimitPids => options.limit_pids,
            _ => options.limit_open_files,
        }
    }

    /// One confinement value through the command line's own check: `raw.flag(option, text)`
    /// and `Options::parse` (beside the ledger, when there is one). A refusal is reported at
    /// `value` in the option's words, under the key's name.
    pub(crate) fn confine_one(
        &mut self,
        option: OptionName,
        text: &str,
        span: &Range<usize>,
        ledger: Option<(&Path, &'static str)>,
    ) -> Option<(String, Options)> {
        let mut raw = RawOptions::default();
        raw.flag(option, OsString::from(text));
        let (path, named_by) = ledger.unzip();
        match Options::parse_beside_named_ledger(&raw, path, named_by.unwrap_or("--ledger")) {
            Ok(options) => Some((text.to_string(), options)),
            Err(err) => {
                self.report(span, confine_message(&err));
                None
            }
        }
    }

    /// `network`: `"none"`, `"any"` (checked as `--network`), or `{ allow = [...] }`.
    fn network(&mut self, value: &Value<'_>) -> Option<NetworkPolicy> {
        match value.get_ref() {
            DeValue::String(mode) => {
                let (_, options) =
                    self.confine_one(OptionName::Network, mode, &value.span(), None)?;
                match options.network {
                    Network::None => Some(NetworkPolicy::None),
                    Network::Any => Some(NetworkPolicy::Any),
                    Network::Allow => {
                        let message = "`network`: `allow:…` is the command line's spelling: \
                                       write network = { allow = [\"host:port\", …] }";
                        self.report(&value.span(), message);
                        None
                    }
                }
            }
            DeValue::Table(table) => self.allow_list(table),
            _ => {
                let found = a_type(value);
                let message = format!(
                    "`network` must be \"none\", \"any\" or {{ allow = [\"host:port\", …] }}, \
                     not {found}"
                );
                self.report(&value.span(), message);
                None
            }
        }
    }

    fn allow_list(&mut self, table: &DeTable<'_>) -> Option<NetworkPolicy> {
        let mut allow = None;
        for (key, value) in table.iter() {
            if key.get_ref().as_ref() != "allow" {
                self.unknown_key(key, "`network`", &["allow"]);
                continue;
            }
            allow = self.allow_rules(value);
        }
        allow.map(NetworkPolicy::Allow)
    }

    /// `network.allow`: each entry an allow rule as `--network allow:` reads it (SPEC §17), at
    /// least one, at most `MAX_RULES`; each refusal at its entry.
    fn allow_rules(&mut self, value: &Value<'_>) -> Option<Vec<String>> {
        let items = self.strings("network.allow", value)?;
        if items.is_empty() {
            let message =
                "`network.allow` is empty: it would allow nothing (write network = \"none\")";
            self.report(&value.span(), message);
            return None;
        }
        if items.len() > MAX_RULES {
            let message = format!("`network.allow` has more than {MAX_RULES} entries");
            self.report(&value.span(), message);
            return None;
        }
        let mut all = true;
        for (item, span) in &items {
            if let Err(why) = AllowRule::parse(item) {
                let message = format!("`network.allow`: `{}`: {why}", escape(item));
                self.report(span, message);
                all = false;
            }
        }
        all.then(|| items.iter().map(|(s, _)| (*s).to_string()).collect())
    }

    fn decision(&mut self, value: &Value<'_>) -> Option<Decision> {
        match self.string("decision", value)? {
            "allow" => Some(Decision::Allow),
            "ask" => Some(Decision::Ask),
            "deny" => Some(Decision::Deny),
            other => {
                let message = format!(
                    "`decision`: `{}` is not one of allow, ask, deny",
                    escape(other)
                );
                self.report(&value.span(), message);
                None
            }
        }
    }

    /// `budget_calls` (per tool, per session): a count as the ledger's own parser reads it.
    fn budget_calls(&mut self, value: &Value<'_>) -> Option<u64> {
        let text = self.integer_text("budget_calls", value)?;
        match ptd_ledger::flags::parse_budget_calls(&text) {
            Ok(n) => Some(n),
            Err(err) => {
                self.report(&value.span(), format!("`budget_calls`: {}", err.reason));
                None
            }
        }
    }

    /// `approval_ttl`: `30s`, `15m`, `1h`, or an integer number of seconds; at least a second.
    fn ttl(&mut self, value: &Value<'_>) -> Option<Duration> {
        let seconds = match value.get_ref() {
            DeValue::String(text) => parse_duration(text),
            DeValue::Integer(_) => self
                .integer_text("approval_ttl", value)
                .and_then(|t| t.parse::<u64>().ok()),
            _ => {
                let found = a_type(value);
                let message = format!(
                    "`approval_ttl` must be a duration such as \"15m\" or an integer number of \
                     seconds, not {found}"
                );
                self.report(&value.span(), message);
                return None;
            }
        };
        match seconds {
            Some(s) if (1..=MAX_TTL_SECONDS).contains(&s) => Some(Duration::from_secs(s)),
            _ => {
                let message = format!(
                    "`approval_ttl`: expected a duration from 1s to {MAX_TTL_SECONDS}s, written \
                     like 30s, 15m, 1h or as an integer number of seconds"
                );
                self.report(&value.span(), message);
                None
            }
        }
    }
}

/// The policy key of a confinement option (`--limit-memory` → `limit_memory`).
pub fn key_of(option: OptionName) -> &'static str {
    match option {
        OptionName::FsRead => "fs_read",
        OptionName::FsWrite => "fs_write",
        OptionName::Network => "network",
        OptionName::NetworkMaxBytes => "network_max_bytes",
        OptionName::LimitMemory => "limit_memory",
        OptionName::LimitPids => "limit_pids",
        OptionName::LimitOpenFiles => "limit_open_files",
        OptionName::LimitFileSize => "limit_file_size",
        OptionName::RunAs => "run_as",
    }
}

/// The confinement layer's message, naming the key instead of the flag.
fn confine_message(err: &OptionError) -> String {
    let text = err.to_string();
    let rest = text.strip_prefix(err.option.flag()).unwrap_or(&text);
    format!("`{}`{rest}", key_of(err.option))
}

/// Digits then `s`, `m` or `h` (or nothing: seconds) → seconds: how the policy writes a
/// duration (`approval_ttl`, `lease_ttl`) and `--lease-ttl` reads one.
pub fn parse_duration(text: &str) -> Option<u64> {
    let split = text
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let multiplier = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return None,
    };
    if digits.is_empty() {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(multiplier)
}
