//! The confinement options of SPEC §13, as values: sizes, counts, paths and the network mode
//! (with SPEC §17's allow rules, read by [`AllowRule::parse_list`]), parsed from the command
//! line or from `PARENT_TOOL_DISPATCH_*` variables.
//!
//! Pure apart from [`parse_path`] (which asks the file system whether the path exists and what
//! it resolves to). Every error names the option (and the variable, when the value came from
//! one) and says what was expected; nothing here panics on any input (a property test holds it
//! to that).
//!
//! Units are binary: `512k` = 512 KiB = 524 288 bytes, `256M` = 256 MiB, `1G` = 1 GiB, `1T`;
//! the suffix is one letter in either case, optionally followed by `iB` (`256MiB`). `MB`,
//! `kB` and the like are refused rather than guessed at (decimal or binary?). Plain digits are
//! bytes. Values stop at `i64::MAX`: the kernel's limits are signed in places and
//! `RLIM_INFINITY` is `u64::MAX`.

use super::allow::AllowRule;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};

/// One option: its flag, its variable and what kind of value it takes. The one table of
/// names; the command line and the environment reader both use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptionName {
    FsRead,
    FsWrite,
    Network,
    /// The proxy's bound on the bytes of a call's connections (SPEC §17, `--network allow:`
    /// only).
    NetworkMaxBytes,
    LimitMemory,
    LimitPids,
    LimitOpenFiles,
    LimitFileSize,
    RunAs,
}

impl OptionName {
    /// Every option, in the order of SPEC §13's table (then §13.2's), `--network-max-bytes`
    /// (SPEC §17) after `--network`.
    pub const ALL: [OptionName; 9] = [
        OptionName::FsRead,
        OptionName::FsWrite,
        OptionName::Network,
        OptionName::NetworkMaxBytes,
        OptionName::LimitMemory,
        OptionName::LimitPids,
        OptionName::LimitOpenFiles,
        OptionName::LimitFileSize,
        OptionName::RunAs,
    ];

    /// The command-line flag.
    pub fn flag(self) -> &'static str {
        match self {
            OptionName::FsRead => "--fs-read",
            OptionName::FsWrite => "--fs-write",
            OptionName::Network => "--network",
            OptionName::NetworkMaxBytes => "--network-max-bytes",
            OptionName::LimitMemory => "--limit-memory",
            OptionName::LimitPids => "--limit-pids",
            OptionName::LimitOpenFiles => "--limit-open-files",
            OptionName::LimitFileSize => "--limit-file-size",
            OptionName::RunAs => "--run-as",
        }
    }

    /// The environment variable that sets it when the flag is not given (SPEC §13).
    pub fn env_var(self) -> &'static str {
        match self {
            OptionName::FsRead => "PARENT_TOOL_DISPATCH_FS_READ",
            OptionName::FsWrite => "PARENT_TOOL_DISPATCH_FS_WRITE",
            OptionName::Network => "PARENT_TOOL_DISPATCH_NETWORK",
            OptionName::NetworkMaxBytes => "PARENT_TOOL_DISPATCH_NETWORK_MAX_BYTES",
            OptionName::LimitMemory => "PARENT_TOOL_DISPATCH_LIMIT_MEMORY",
            OptionName::LimitPids => "PARENT_TOOL_DISPATCH_LIMIT_PIDS",
            OptionName::LimitOpenFiles => "PARENT_TOOL_DISPATCH_LIMIT_OPEN_FILES",
            OptionName::LimitFileSize => "PARENT_TOOL_DISPATCH_LIMIT_FILE_SIZE",
            OptionName::RunAs => "PARENT_TOOL_DISPATCH_RUN_AS",
        }
    }

    /// Whether the option takes a list (repeatable flag; `:`-separated variable).
    pub(crate) fn is_list(self) -> bool {
        matches!(self, OptionName::FsRead | OptionName::FsWrite)
    }
}

/// Where a value came from, for the error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env,
}

/// `--network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Network {
    /// Unchanged: the host's network.
    #[default]
    Any,
    /// A new, empty network namespace.
    None,
    /// `allow:HOST:PORT,…` (SPEC §17): a new network namespace with loopback up, where the
    /// dispatcher's proxy listens; the rules are [`Options::network_allow`].
    Allow,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Any => "any",
            Network::None => "none",
            Network::Allow => "allow",
        }
    }

    /// Whether the adapter gets a network namespace of its own (`none` and `allow:`).
    pub fn has_namespace(self) -> bool {
        matches!(self, Network::None | Network::Allow)
    }
}

/// The confinement options, checked. [`Options::default`] is "nothing requested".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Options {
    /// Canonical, existing paths the adapter may read and execute beneath.
    pub fs_read: Vec<PathBuf>,
    /// Canonical, existing paths the adapter may read, write, create and remove beneath.
    pub fs_write: Vec<PathBuf>,
    pub network: Network,
    /// The hosts and ports the proxy may connect to: non-empty exactly when `network` is
    /// [`Network::Allow`].
    pub network_allow: Vec<AllowRule>,
    /// `--network-max-bytes`: the proxy's bound on a call's bytes (only with
    /// [`Network::Allow`]; `None`: the proxy's default).
    pub network_max_bytes: Option<u64>,
    pub limit_memory_bytes: Option<u64>,
    pub limit_pids: Option<u64>,
    pub limit_open_files: Option<u64>,
    pub limit_file_size_bytes: Option<u64>,
    /// `--run-as`, resolved (SPEC §13.2); `None`: `nobody` for a root dispatcher, else the
    /// dispatcher's own user.
    pub run_as: Option<super::creds::RunAs>,
    /// The host policy's baseline (SPEC §16): confinement is on although no option asks for
    /// it, and Landlock's file-system rules are handled without a grant, so that the adapter
    /// reads the base and writes nothing but its private `TMPDIR` (and the file transport's
    /// folder). No command-line option sets it; [`Options::to_flags`] cannot express it.
    pub baseline: bool,
}

impl Options {
    /// Whether any option asks for confinement (SPEC §13: any one turns it on, and with it
    /// no privilege, the PID namespace, Landlock's scopes, `no_new_privs` and the seccomp
    /// filter; `--run-as` alone does too, SPEC §13.2).
    pub fn is_requested(&self) -> bool {
        self.baseline
            || self.wants_landlock()
            || self.run_as.is_some()
            || self.network.has_namespace()
            || self.wants_cgroup()
            || self.limit_open_files.is_some()
            || self.limit_file_size_bytes.is_some()
    }

    /// Whether Landlock's file-system rules are handled: a `--fs-*` option was given, or the
    /// policy's baseline is on.
    pub fn wants_landlock(&self) -> bool {
        self.baseline || !self.fs_read.is_empty() || !self.fs_write.is_empty()
    }

    /// Whether a limit on the whole tree was given (a cgroup).
    pub(crate) fn wants_cgroup(&self) -> bool {
        self.limit_memory_bytes.is_some() || self.limit_pids.is_some()
    }

    /// The options as command-line flags that [`Options::parse`] reads back to the same
    /// value: canonical paths, sizes in bytes, counts in digits (what `replay` forwards to the
    /// child dispatchers of its `argv` cases). Empty when nothing is requested.
    pub fn to_flags(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        let mut flag = |name: OptionName, value: OsString| {
            out.push(name.flag().into());
            out.push(value);
        };
        for path in &self.fs_read {
            flag(OptionName::FsRead, path.clone().into_os_string());
        }
        for path in &self.fs_write {
            flag(OptionName::FsWrite, path.clone().into_os_string());
        }
        match self.network {
            Network::Any => {}
            Network::None => flag(OptionName::Network, Network::None.as_str().into()),
            Network::Allow => flag(OptionName::Network, allow_value(&self.network_allow).into()),
        }
        let numbers = [
            (OptionName::NetworkMaxBytes, self.network_max_bytes),
            (OptionName::LimitMemory, self.limit_memory_bytes),
            (OptionName::LimitPids, self.limit_pids),
            (OptionName::LimitOpenFiles, self.limit_open_files),
            (OptionName::LimitFileSize, self.limit_file_size_bytes),
        ];
        for (name, value) in numbers {
            if let Some(n) = value {
                flag(name, n.to_string().into());
            }
        }
        if let Some(run_as) = &self.run_as {
            flag(OptionName::RunAs, run_as.spec.clone().into());
        }
        out
    }

    /// Check raw values (each option's flag values, or else its variable's).
    pub fn parse(raw: &RawOptions) -> Result<Options, OptionError> {
        Options::parse_beside_ledger(raw, None)
    }

    /// [`Options::parse`] for a dispatcher that keeps a ledger at `ledger` (`--ledger`, SPEC
    /// §14): a `--fs-*` path that holds the ledger's folder ([`ledger_folder`]) or lies in it is
    /// refused too (SPEC §13.2), since that folder is the dispatcher's own.
    pub fn parse_beside_ledger(
        raw: &RawOptions,
        ledger: Option<&Path>,
    ) -> Result<Options, OptionError> {
        let ledger = ledger.map(|path| (path, ledger_folder(path)));
        let mut options = Options::default();
        for name in [OptionName::FsRead, OptionName::FsWrite] {
            for (value, source) in raw.values(name) {
                let path = parse_path(name, source, value)?;
                if let Some(problem) = confines_nothing(&path, ledger.as_ref()) {
                    return Err(OptionError::new(name, source, value, problem));
                }
                match name {
                    OptionName::FsRead => options.fs_read.push(path),
                    _ => options.fs_write.push(path),
                }
            }
        }
        if let Some((value, source)) = raw.single(OptionName::Network) {
            (options.network, options.network_allow) = parse_network(source, value)?;
        }
        if let Some((value, source)) = raw.single(OptionName::NetworkMaxBytes) {
            options.network_max_bytes =
                Some(parse_network_max_bytes(source, value, options.network)?);
        }
        if let Some((value, source)) = raw.single(OptionName::LimitMemory) {
            let bytes = parse_size(OptionName::LimitMemory, source, value)?;
            if bytes == 0 {
                let problem = Problem::Zero;
                return Err(OptionError::new(
                    OptionName::LimitMemory,
                    source,
                    value,
                    problem,
                ));
            }
            options.limit_memory_bytes = Some(bytes);
        }
        let size = |name| raw.single(name).map(|(v, s)| parse_size(name, s, v));
        let count = |name| raw.single(name).map(|(v, s)| parse_count(name, s, v));
        options.limit_pids = count(OptionName::LimitPids).transpose()?;
        options.limit_open_files = count(OptionName::LimitOpenFiles).transpose()?;
        options.limit_file_size_bytes = size(OptionName::LimitFileSize).transpose()?;
        if let Some((value, source)) = raw.single(OptionName::RunAs) {
            options.run_as = Some(parse_run_as(
                source,
                value,
                rustix::process::geteuid().as_raw(),
            )?);
        }
        Ok(options)
    }
}

/// Why a grant of `path` (canonical) confines nothing (SPEC §13.2): it is the whole file
/// system, or it holds the ledger's folder or lies in it (`ledger`: the path as given and its
/// folder).
fn confines_nothing(path: &Path, ledger: Option<&(&Path, PathBuf)>) -> Option<Problem> {
    if path == Path::new("/") {
        return Some(Problem::WholeFileSystem);
    }
    let (given, folder) = ledger?;
    let inside = path.starts_with(folder);
    (inside || folder.starts_with(path)).then(|| Problem::CoversLedger {
        ledger: given.to_string_lossy().into_owned(),
        folder: folder.clone(),
        inside,
    })
}

/// The folder the ledger at `ledger` is kept in, canonical: its parent as the ledger opens it
/// (against the current directory; the ledger file itself is never followed as a link), every
/// link resolved. Where that folder does not exist (yet), its nearest existing ancestor is
/// resolved and the rest of the names appended: the folder it would be.
pub(crate) fn ledger_folder(ledger: &Path) -> PathBuf {
    let parent = match ledger.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let absolute = std::path::absolute(parent).unwrap_or_else(|_| parent.to_path_buf());
    let mut existing = absolute.as_path();
    let mut missing = Vec::new();
    loop {
        if let Ok(mut folder) = std::fs::canonicalize(existing) {
            folder.extend(missing.iter().rev());
            return folder;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(up), Some(name)) => {
                missing.push(name);
                existing = up;
            }
            // A `..` past a missing folder: nothing to resolve (the ledger cannot be opened
            // there either); compared as written.
            _ => return absolute,
        }
    }
}

/// The options as given, before any check: flag values (in order) and variable values.
/// A flag given on the command line wins over its variable, as with clap's `env`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawOptions {
    flags: Vec<(OptionName, OsString)>,
    env: Vec<(OptionName, OsString)>,
}

impl RawOptions {
    /// Record one flag value (call once per occurrence of a repeatable flag).
    pub fn flag(&mut self, name: OptionName, value: impl Into<OsString>) -> &mut Self {
        self.flags.push((name, value.into()));
        self
    }

    /// Read the `PARENT_TOOL_DISPATCH_*` variables through `lookup` (e.g.
    /// `|name| std::env::var_os(name)`, or an overlay for replay). List variables are split on
    /// `:`; an empty entry (`a::b`, a leading or trailing `:`) is kept, and refused by
    /// [`Options::parse`] as an empty path. An empty variable counts as unset.
    pub fn from_env(lookup: impl Fn(&str) -> Option<OsString>) -> RawOptions {
        let mut raw = RawOptions::default();
        for name in OptionName::ALL {
            let Some(value) = lookup(name.env_var()) else {
                continue;
            };
            if value.is_empty() {
                continue;
            }
            if name.is_list() {
                for part in split_list(&value) {
                    raw.env.push((name, part));
                }
            } else {
                raw.env.push((name, value));
            }
        }
        raw
    }

    /// Take the variables of `env` for every option this one has no flag for.
    pub fn or_env(mut self, env: RawOptions) -> RawOptions {
        for (name, value) in env.env {
            if !self.flags.iter().any(|(n, _)| *n == name) {
                self.env.push((name, value));
            }
        }
        self
    }

    fn values(&self, name: OptionName) -> Vec<(&OsStr, Source)> {
        let flags: Vec<_> = self
            .flags
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| (v.as_os_str(), Source::Flag))
            .collect();
        if !flags.is_empty() {
            return flags;
        }
        self.env
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| (v.as_os_str(), Source::Env))
            .collect()
    }

    /// The last value of a single-valued option (a repeated flag: the last one wins, as clap's).
    fn single(&self, name: OptionName) -> Option<(&OsStr, Source)> {
        self.values(name).pop()
    }
}

fn split_list(value: &OsStr) -> Vec<OsString> {
    use std::os::unix::ffi::OsStrExt;
    value
        .as_bytes()
        .split(|b| *b == b':')
        .map(|part| OsStr::from_bytes(part).to_os_string())
        .collect()
}

/// What was wrong with a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// `--run-as` names no usable user (SPEC §13.2).
    RunAs(super::creds::RunAsProblem),
    /// Not digits with an optional binary unit.
    NotASize,
    /// A decimal-looking unit (`MB`, `kB`): refused, not guessed.
    AmbiguousUnit,
    /// Not a whole number.
    NotACount,
    /// Above `i64::MAX`.
    TooLarge,
    /// Zero where it would stop anything from running.
    Zero,
    /// Neither `none`, `any` nor `allow:…`.
    NotANetworkMode,
    /// An `allow:` list that cannot be read: the rule's reason.
    BadAllowRule(String),
    /// `--network-max-bytes` without `--network allow:` (it bounds the proxy, which only
    /// that mode has).
    NoProxy,
    /// An empty path (an empty list entry).
    EmptyPath,
    /// The path does not exist (or cannot be resolved): the error's text.
    PathUnusable(String),
    /// `--fs-read /`, `--fs-write /` (however spelled): a grant of everything confines
    /// nothing.
    WholeFileSystem,
    /// A `--fs-*` path that holds the ledger's folder or lies in it (`inside`): the ledger as
    /// given and its canonical folder.
    CoversLedger {
        ledger: String,
        folder: PathBuf,
        inside: bool,
    },
}

/// A confinement option that cannot be used, with the option, where it came from and the
/// value as given (lossily decoded; it is a host value shown on the host's terminal only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    pub option: OptionName,
    pub source: Source,
    pub value: String,
    pub problem: Problem,
}

impl OptionError {
    fn new(option: OptionName, source: Source, value: &OsStr, problem: Problem) -> OptionError {
        OptionError {
            option,
            source,
            value: value.to_string_lossy().into_owned(),
            problem,
        }
    }
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            Source::Flag => write!(f, "{}", self.option.flag())?,
            Source::Env => write!(f, "{} ({})", self.option.env_var(), self.option.flag())?,
        }
        let value = &self.value;
        match &self.problem {
            Problem::RunAs(problem) => write!(f, ": `{value}`: {problem}"),
            Problem::NotASize => write!(
                f,
                ": `{value}` is not a size: digits (bytes), optionally followed by K, M, G or T \
                 (binary units: 1K = 1024 bytes), e.g. 256M"
            ),
            Problem::AmbiguousUnit => write!(
                f,
                ": `{value}` has an ambiguous unit: sizes are binary, write e.g. 256M or 256MiB"
            ),
            Problem::NotACount => write!(f, ": `{value}` is not a whole number"),
            Problem::TooLarge => write!(f, ": `{value}` is too large (at most {})", i64::MAX),
            Problem::Zero => write!(f, ": `{value}` would leave nothing able to run"),
            Problem::NotANetworkMode => {
                write!(
                    f,
                    ": `{value}` is not a network mode (expected `none`, `any` or \
                     `allow:HOST:PORT,…`)"
                )
            }
            Problem::BadAllowRule(why) => {
                write!(f, ": `{value}` is not a list of allow rules: {why}")
            }
            Problem::NoProxy => write!(
                f,
                ": `{value}` bounds the proxy of `--network allow:HOST:PORT,…`, and the \
                 network is not in that mode"
            ),
            Problem::EmptyPath => write!(f, ": an empty path (an empty entry in a `:` list?)"),
            Problem::PathUnusable(why) => write!(f, ": `{value}` cannot be used: {why}"),
            Problem::WholeFileSystem => {
                let (access, verb) = match self.option {
                    OptionName::FsRead => ("read", "reads"),
                    _ => ("write", "writes"),
                };
                write!(
                    f,
                    ": `{value}` is the whole file system: {access} access to it confines nothing \
                     (list the folders the adapter {verb})"
                )
            }
            Problem::CoversLedger {
                ledger,
                folder,
                inside,
            } => {
                let relation = if *inside { "lies in" } else { "holds" };
                write!(
                    f,
                    ": `{value}` {relation} the ledger's folder {folder} (--ledger `{ledger}`), \
                     which is the dispatcher's own: grant folders that neither hold it nor lie \
                     in it",
                    folder = folder.display()
                )
            }
        }
    }
}

impl std::error::Error for OptionError {}

/// A size in bytes: digits, then optionally one of `kKmMgGtT`, optionally followed by `iB`.
pub(crate) fn parse_size(
    option: OptionName,
    source: Source,
    value: &OsStr,
) -> Result<u64, OptionError> {
    let err = |problem| OptionError::new(option, source, value, problem);
    let text = value.to_str().ok_or_else(|| err(Problem::NotASize))?;
    let digits_end = text
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(err(Problem::NotASize));
    }
    let shift = match unit {
        "" => 0,
        "k" | "K" | "KiB" | "kiB" => 10,
        "m" | "M" | "MiB" | "miB" => 20,
        "g" | "G" | "GiB" | "giB" => 30,
        "t" | "T" | "TiB" | "tiB" => 40,
        "kB" | "KB" | "MB" | "mB" | "GB" | "gB" | "TB" | "tB" => {
            return Err(err(Problem::AmbiguousUnit))
        }
        _ => return Err(err(Problem::NotASize)),
    };
    let number: u64 = digits.parse().map_err(|_| err(Problem::TooLarge))?;
    let bytes = number
        .checked_mul(1u64 << shift)
        .filter(|b| *b <= i64::MAX as u64)
        .ok_or_else(|| err(Problem::TooLarge))?;
    Ok(bytes)
}

/// A count: digits only, at least 1.
pub(crate) fn parse_count(
    option: OptionName,
    source: Source,
    value: &OsStr,
) -> Result<u64, OptionError> {
    let err = |problem| OptionError::new(option, source, value, problem);
    let text = value.to_str().ok_or_else(|| err(Problem::NotACount))?;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(Problem::NotACount));
    }
    let number: u64 = text.parse().map_err(|_| err(Problem::TooLarge))?;
    if number > i64::MAX as u64 {
        return Err(err(Problem::TooLarge));
    }
    if number == 0 {
        return Err(err(Problem::Zero));
    }
    Ok(number)
}

/// `USER[:GROUP]`, resolved on this host; a dispatcher of effective uid `euid` other than 0
/// may name only itself.
pub(crate) fn parse_run_as(
    source: Source,
    value: &OsStr,
    euid: u32,
) -> Result<super::creds::RunAs, OptionError> {
    let err = |problem| OptionError::new(OptionName::RunAs, source, value, Problem::RunAs(problem));
    let text = value
        .to_str()
        .ok_or_else(|| err(super::creds::RunAsProblem::Malformed))?;
    super::creds::RunAs::parse(text, euid).map_err(err)
}

/// `none` or `any`, exactly, or `allow:` and a list of rules ([`AllowRule::parse_list`]).
pub(crate) fn parse_network(
    source: Source,
    value: &OsStr,
) -> Result<(Network, Vec<AllowRule>), OptionError> {
    let err = |problem| OptionError::new(OptionName::Network, source, value, problem);
    match value.to_str() {
        Some("none") => Ok((Network::None, Vec::new())),
        Some("any") => Ok((Network::Any, Vec::new())),
        Some(text) => match text.strip_prefix("allow:") {
            Some(list) => match AllowRule::parse_list(list) {
                Ok(rules) => Ok((Network::Allow, rules)),
                Err(why) => Err(err(Problem::BadAllowRule(why.0))),
            },
            None => Err(err(Problem::NotANetworkMode)),
        },
        None => Err(err(Problem::NotANetworkMode)),
    }
}

/// `--network allow:`'s value for `rules` (what [`parse_network`] reads back to them).
fn allow_value(rules: &[AllowRule]) -> String {
    let list: Vec<String> = rules.iter().map(ToString::to_string).collect();
    format!("allow:{}", list.join(","))
}

/// `--network-max-bytes`: a size, not zero, and only beside `--network allow:`.
fn parse_network_max_bytes(
    source: Source,
    value: &OsStr,
    network: Network,
) -> Result<u64, OptionError> {
    let name = OptionName::NetworkMaxBytes;
    let bytes = parse_size(name, source, value)?;
    if bytes == 0 {
        return Err(OptionError::new(name, source, value, Problem::Zero));
    }
    if network != Network::Allow {
        return Err(OptionError::new(name, source, value, Problem::NoProxy));
    }
    Ok(bytes)
}

/// An existing path, canonicalised (symlinks resolved, relative paths against the current
/// directory): Landlock grants the inode the path resolves to, so the rule and what is shown
/// must name the same thing.
pub fn parse_path(
    option: OptionName,
    source: Source,
    value: &OsStr,
) -> Result<PathBuf, OptionError> {
    if value.is_empty() {
        return Err(OptionError::new(option, source, value, Problem::EmptyPath));
    }
    std::fs::canonicalize(value)
        .map_err(|e| OptionError::new(option, source, value, Problem::PathUnusable(e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn flags_read_back_to_the_same_options() {
        let dir = tempfile::tempdir().unwrap();
        let mut raw = RawOptions::default();
        raw.flag(OptionName::FsRead, "/usr")
            .flag(OptionName::FsRead, dir.path())
            .flag(OptionName::FsWrite, dir.path())
            .flag(OptionName::Network, "none")
            .flag(OptionName::LimitMemory, "64M")
            .flag(OptionName::LimitPids, "16")
            .flag(OptionName::LimitOpenFiles, "64")
            .flag(OptionName::LimitFileSize, "0");
        let options = Options::parse(&raw).unwrap();
        let flags = options.to_flags();
        assert!(flags.contains(&OsString::from("67108864")), "{flags:?}");
        let mut again = RawOptions::default();
        for pair in flags.chunks(2) {
            let name = OptionName::ALL
                .into_iter()
                .find(|n| OsStr::new(n.flag()) == pair[0])
                .unwrap();
            again.flag(name, pair[1].clone());
        }
        assert_eq!(Options::parse(&again).unwrap(), options);
        assert!(Options::default().to_flags().is_empty());
    }

    /// `flags` (as [`Options::to_flags`] makes them) read back.
    fn read_back(flags: &[OsString]) -> Options {
        let mut again = RawOptions::default();
        for pair in flags.chunks(2) {
            let name = OptionName::ALL
                .into_iter()
                .find(|n| OsStr::new(n.flag()) == pair[0])
                .unwrap();
            again.flag(name, pair[1].clone());
        }
        Options::parse(&again).unwrap()
    }

    #[test]
    fn allow_mode_reads_back_to_the_same_options() {
        let mut raw = RawOptions::default();
        raw.flag(
            OptionName::Network,
            "allow:API.github.com:443,*.pythonhosted.org:443,203.0.113.7:8080,[::1]:80,\
             api.github.com:443",
        )
        .flag(OptionName::NetworkMaxBytes, "64M");
        let options = Options::parse(&raw).unwrap();
        assert_eq!(options.network, Network::Allow);
        assert_eq!(options.network.as_str(), "allow");
        assert!(options.is_requested() && options.network.has_namespace());
        assert_eq!(options.network_max_bytes, Some(64 << 20));
        let rules: Vec<String> = options
            .network_allow
            .iter()
            .map(|r| r.to_string())
            .collect();
        assert_eq!(
            rules,
            [
                "api.github.com:443",
                "*.pythonhosted.org:443",
                "203.0.113.7:8080",
                "[::1]:80"
            ],
            "lower case, a repeated rule kept once"
        );
        let flags = options.to_flags();
        assert_eq!(
            flags,
            [
                "--network",
                "allow:api.github.com:443,*.pythonhosted.org:443,203.0.113.7:8080,[::1]:80",
                "--network-max-bytes",
                "67108864"
            ]
            .map(OsString::from)
        );
        assert_eq!(read_back(&flags), options);
        // Without a bound, none is written.
        let mut only = RawOptions::default();
        only.flag(OptionName::Network, "allow:example.com:80");
        let options = Options::parse(&only).unwrap();
        assert_eq!(options.network_max_bytes, None);
        assert_eq!(options.to_flags().len(), 2);
        assert_eq!(read_back(&options.to_flags()), options);
    }

    #[test]
    fn a_malformed_allow_rule_names_the_option_the_value_and_why() {
        for (value, why) in [
            ("allow:", "no port"),
            ("allow:example.com", "port"),
            ("allow:example.com:0", "port"),
            ("allow:example.com:65536", "port"),
            ("allow:*:443", "`*` alone"),
            ("allow:a.*.com:443", "first label"),
            ("allow:ok.com:443,", "`"),
        ] {
            let mut raw = RawOptions::default();
            raw.flag(OptionName::Network, value);
            let err = Options::parse(&raw).unwrap_err();
            assert!(
                matches!(&err.problem, Problem::BadAllowRule(reason) if !reason.is_empty()),
                "{value}: {err:?}"
            );
            let text = err.to_string();
            assert!(
                text.starts_with(&format!(
                    "--network: `{value}` is not a list of allow rules: "
                )),
                "{text}"
            );
            assert!(text.contains(why), "{value}: {text}");
        }
        // From the variable, named as such.
        let env = |name: &str| {
            (name == "PARENT_TOOL_DISPATCH_NETWORK").then(|| OsString::from("allow:nope"))
        };
        let err = Options::parse(&RawOptions::from_env(env)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("PARENT_TOOL_DISPATCH_NETWORK (--network): `allow:nope` is not"),
            "{err}"
        );
        // `allow` without its colon, or in another case, is no mode at all.
        for value in ["allow", "Allow:example.com:443", "allow=example.com:443"] {
            let mut raw = RawOptions::default();
            raw.flag(OptionName::Network, value);
            let err = Options::parse(&raw).unwrap_err();
            assert_eq!(err.problem, Problem::NotANetworkMode, "{value}");
        }
    }

    #[test]
    fn network_max_bytes_is_a_size_beside_allow_mode_only() {
        let parse = |network: Option<&str>, bytes: &str| {
            let mut raw = RawOptions::default();
            if let Some(network) = network {
                raw.flag(OptionName::Network, network);
            }
            raw.flag(OptionName::NetworkMaxBytes, bytes);
            Options::parse(&raw)
        };
        let allow = Some("allow:example.com:443");
        assert_eq!(parse(allow, "1G").unwrap().network_max_bytes, Some(1 << 30));
        assert_eq!(parse(allow, "4096").unwrap().network_max_bytes, Some(4096));
        let err = parse(allow, "0").unwrap_err();
        assert_eq!(
            (err.option, err.problem),
            (OptionName::NetworkMaxBytes, Problem::Zero)
        );
        assert_eq!(
            parse(allow, "1MB").unwrap_err().problem,
            Problem::AmbiguousUnit
        );
        assert_eq!(parse(allow, "lots").unwrap_err().problem, Problem::NotASize);
        for network in [None, Some("none"), Some("any")] {
            let err = parse(network, "64M").unwrap_err();
            assert_eq!(
                (err.option, &err.problem),
                (OptionName::NetworkMaxBytes, &Problem::NoProxy),
                "{network:?}"
            );
            assert_eq!(
                err.to_string(),
                "--network-max-bytes: `64M` bounds the proxy of `--network allow:HOST:PORT,…`, \
                 and the network is not in that mode"
            );
        }
        // The variables, the flag of one and the variable of the other together.
        let env = |name: &str| match name {
            "PARENT_TOOL_DISPATCH_NETWORK" => Some(OsString::from("allow:example.com:443")),
            "PARENT_TOOL_DISPATCH_NETWORK_MAX_BYTES" => Some(OsString::from("2M")),
            _ => None,
        };
        let options = Options::parse(&RawOptions::from_env(env)).unwrap();
        assert_eq!(options.network_max_bytes, Some(2 << 20));
        let mut flags = RawOptions::default();
        flags.flag(OptionName::Network, "none");
        let err = Options::parse(&flags.or_env(RawOptions::from_env(env))).unwrap_err();
        assert_eq!(err.problem, Problem::NoProxy);
        assert!(
            err.to_string()
                .starts_with("PARENT_TOOL_DISPATCH_NETWORK_MAX_BYTES (--network-max-bytes): `2M`"),
            "{err}"
        );
        let i = OptionName::ALL
            .iter()
            .position(|n| *n == OptionName::Network)
            .unwrap();
        assert_eq!(OptionName::ALL[i + 1], OptionName::NetworkMaxBytes);
    }

    fn size(text: &str) -> Result<u64, Problem> {
        parse_size(OptionName::LimitMemory, Source::Flag, OsStr::new(text)).map_err(|e| e.problem)
    }

    fn count(text: &str) -> Result<u64, Problem> {
        parse_count(OptionName::LimitPids, Source::Flag, OsStr::new(text)).map_err(|e| e.problem)
    }

    #[test]
    fn sizes_are_binary() {
        assert_eq!(size("256M"), Ok(256 << 20));
        assert_eq!(size("256MiB"), Ok(256 << 20));
        assert_eq!(size("1G"), Ok(1 << 30));
        assert_eq!(size("1g"), Ok(1 << 30));
        assert_eq!(size("512k"), Ok(512 << 10));
        assert_eq!(size("512K"), Ok(512 << 10));
        assert_eq!(size("2T"), Ok(2 << 40));
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("0"), Ok(0));
    }

    #[test]
    fn sizes_refuse_what_they_cannot_read_exactly() {
        assert_eq!(size("256MB"), Err(Problem::AmbiguousUnit));
        assert_eq!(size("1kB"), Err(Problem::AmbiguousUnit));
        for bad in [
            "", "M", "1.5G", " 1G", "1G ", "-1", "+1", "1X", "1GG", "0x10", "1 G",
        ] {
            assert_eq!(size(bad), Err(Problem::NotASize), "{bad:?}");
        }
        assert_eq!(size("8388608T"), Err(Problem::TooLarge));
        assert_eq!(size("99999999999999999999999"), Err(Problem::TooLarge));
        assert_eq!(size(&(i64::MAX as u64).to_string()), Ok(i64::MAX as u64));
        assert_eq!(
            size(&(i64::MAX as u64 + 1).to_string()),
            Err(Problem::TooLarge)
        );
    }

    #[test]
    fn counts_are_positive_whole_numbers() {
        assert_eq!(count("64"), Ok(64));
        assert_eq!(count("0"), Err(Problem::Zero));
        for bad in ["", "1k", "-3", "1.0", " 2"] {
            assert_eq!(count(bad), Err(Problem::NotACount), "{bad:?}");
        }
        assert_eq!(count("9223372036854775808"), Err(Problem::TooLarge));
    }

    #[test]
    fn network_is_none_or_any() {
        assert_eq!(
            parse_network(Source::Flag, OsStr::new("none")),
            Ok((Network::None, Vec::new()))
        );
        assert_eq!(
            parse_network(Source::Flag, OsStr::new("any")),
            Ok((Network::Any, Vec::new()))
        );
        assert_eq!(
            parse_network(Source::Flag, OsStr::new("allow:127.0.0.1:8080")),
            Ok((
                Network::Allow,
                vec![AllowRule::parse("127.0.0.1:8080").unwrap()]
            ))
        );
        let err = parse_network(Source::Env, OsStr::new("None")).unwrap_err();
        assert_eq!(err.problem, Problem::NotANetworkMode);
        assert_eq!(
            err.to_string(),
            "PARENT_TOOL_DISPATCH_NETWORK (--network): `None` is not a network mode \
             (expected `none`, `any` or `allow:HOST:PORT,…`)"
        );
    }

    #[test]
    fn paths_must_exist_and_are_canonical() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&inner, &link).unwrap();
        let canonical = std::fs::canonicalize(&inner).unwrap();
        let mut raw = RawOptions::default();
        raw.flag(OptionName::FsRead, link.join("."));
        let options = Options::parse(&raw).unwrap();
        assert_eq!(options.fs_read, vec![canonical]);
        assert!(options.is_requested() && options.wants_landlock());

        let mut raw = RawOptions::default();
        raw.flag(OptionName::FsRead, dir.path().join("missing"));
        let err = Options::parse(&raw).unwrap_err();
        assert!(matches!(err.problem, Problem::PathUnusable(_)), "{err:?}");
        assert!(err.to_string().starts_with("--fs-read: `"), "{err}");
    }

    #[test]
    fn fs_write_of_the_root_is_refused_however_spelled() {
        for root in ["/", "//", "/tmp/..", "/.", "/./", "/.."] {
            let mut raw = RawOptions::default();
            raw.flag(OptionName::FsWrite, root);
            let err = Options::parse(&raw).unwrap_err();
            assert_eq!(err.problem, Problem::WholeFileSystem, "{root}");
            assert!(err.to_string().starts_with("--fs-write: `"), "{err}");
        }
    }

    #[test]
    fn fs_read_of_the_root_is_refused_however_spelled() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("root");
        std::os::unix::fs::symlink("/", &link).unwrap();
        let link = link.to_str().unwrap().to_string();
        for root in ["/", "//", "/.", "/./", "/..", "/tmp/..", &link] {
            let mut raw = RawOptions::default();
            raw.flag(OptionName::FsRead, "/usr")
                .flag(OptionName::FsRead, root);
            let err = Options::parse(&raw).unwrap_err();
            assert_eq!(
                (err.option, &err.problem),
                (OptionName::FsRead, &Problem::WholeFileSystem),
                "{root}"
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "--fs-read: `{root}` is the whole file system: read access to it confines \
                     nothing (list the folders the adapter reads)"
                )
            );
        }
        // The variable too, named as such; one entry of its list is enough.
        let env =
            |name: &str| (name == "PARENT_TOOL_DISPATCH_FS_READ").then(|| OsString::from("/usr:/"));
        let err = Options::parse(&RawOptions::from_env(env)).unwrap_err();
        assert_eq!(err.problem, Problem::WholeFileSystem);
        assert!(
            err.to_string().starts_with(
                "PARENT_TOOL_DISPATCH_FS_READ (--fs-read): `/` is the whole file system"
            ),
            "{err}"
        );
    }

    #[test]
    fn the_ledgers_folder_is_canonical_or_what_it_would_be() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let link = real.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(ledger_folder(&real.join("ledger.db")), real);
        assert_eq!(ledger_folder(&link.join("ledger.db")), real);
        assert_eq!(
            ledger_folder(&link.join("not/yet/ledger.db")),
            real.join("not/yet")
        );
        std::fs::create_dir(real.join("sub")).unwrap();
        assert_eq!(
            ledger_folder(&link.join("./sub/../ledger.db")),
            real,
            "`..` after an existing folder is resolved"
        );
        // A bare name is in the current directory.
        assert_eq!(
            ledger_folder(Path::new("ledger.db")),
            std::env::current_dir().unwrap().canonicalize().unwrap()
        );
        // The ledger file itself is not followed: its folder is where the name is.
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("l.db"), real.join("l.db")).unwrap();
        assert_eq!(ledger_folder(&real.join("l.db")), real);
    }

    #[test]
    fn a_grant_that_holds_the_ledgers_folder_or_lies_in_it_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        let folder = top.join("state");
        let inner = folder.join("inner");
        let beside = top.join("beside");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::create_dir(&beside).unwrap();
        // Not made yet: its would-be folder counts.
        let ledger = folder.join("ledger.db");
        let parse = |name: OptionName, path: &Path| {
            let mut raw = RawOptions::default();
            raw.flag(name, path);
            Options::parse_beside_ledger(&raw, Some(&ledger))
        };
        for name in [OptionName::FsRead, OptionName::FsWrite] {
            for (grant, inside) in [(&top, false), (&folder, true), (&inner, true)] {
                let err = parse(name, grant).unwrap_err();
                assert_eq!(
                    err.problem,
                    Problem::CoversLedger {
                        ledger: ledger.display().to_string(),
                        folder: folder.clone(),
                        inside,
                    },
                    "{grant:?}"
                );
                let relation = if inside { "lies in" } else { "holds" };
                assert_eq!(
                    err.to_string(),
                    format!(
                        "{flag}: `{grant}` {relation} the ledger's folder {folder} (--ledger \
                         `{ledger}`), which is the dispatcher's own: grant folders that neither \
                         hold it nor lie in it",
                        flag = name.flag(),
                        grant = grant.display(),
                        folder = folder.display(),
                        ledger = ledger.display(),
                    )
                );
            }
            let options = parse(name, &beside).unwrap();
            assert!(options.wants_landlock());
            // Without a ledger, nothing is in the way.
            let mut raw = RawOptions::default();
            raw.flag(name, &top);
            assert!(Options::parse(&raw).is_ok());
        }
        // A sibling whose name starts like the folder's is not in it.
        let similar = top.join("state-2");
        std::fs::create_dir(&similar).unwrap();
        assert!(parse(OptionName::FsWrite, &similar).is_ok());
    }

    #[test]
    fn environment_lists_split_on_colons_and_flags_win() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let list = format!("{}:{}", a.display(), b.display());
        let env = |name: &str| match name {
            "PARENT_TOOL_DISPATCH_FS_READ" => Some(OsString::from(&list)),
            "PARENT_TOOL_DISPATCH_LIMIT_MEMORY" => Some(OsString::from("64M")),
            "PARENT_TOOL_DISPATCH_LIMIT_PIDS" => Some(OsString::from("")),
            "PARENT_TOOL_DISPATCH_NETWORK" => Some(OsString::from("none")),
            _ => None,
        };
        let from_env = Options::parse(&RawOptions::from_env(env)).unwrap();
        assert_eq!(
            from_env.fs_read,
            vec![a.canonicalize().unwrap(), b.canonicalize().unwrap()]
        );
        assert_eq!(from_env.limit_memory_bytes, Some(64 << 20));
        assert_eq!(from_env.limit_pids, None, "an empty variable is unset");
        assert_eq!(from_env.network, Network::None);

        let mut flags = RawOptions::default();
        flags
            .flag(OptionName::FsRead, &b)
            .flag(OptionName::LimitMemory, "1G");
        let merged = Options::parse(&flags.clone().or_env(RawOptions::from_env(env))).unwrap();
        assert_eq!(merged.fs_read, vec![b.canonicalize().unwrap()]);
        assert_eq!(merged.limit_memory_bytes, Some(1 << 30));
        assert_eq!(merged.network, Network::None, "no flag: the variable holds");
    }

    #[test]
    fn an_empty_list_entry_names_the_variable() {
        let env = |name: &str| {
            (name == "PARENT_TOOL_DISPATCH_FS_WRITE").then(|| OsString::from("/tmp::/var"))
        };
        let err = Options::parse(&RawOptions::from_env(env)).unwrap_err();
        assert_eq!(err.problem, Problem::EmptyPath);
        assert_eq!(err.option, OptionName::FsWrite);
        assert!(
            err.to_string()
                .starts_with("PARENT_TOOL_DISPATCH_FS_WRITE (--fs-write): an empty path"),
            "{err}"
        );
    }

    #[test]
    fn zero_memory_is_refused_and_zero_file_size_allowed() {
        let mut raw = RawOptions::default();
        raw.flag(OptionName::LimitMemory, "0");
        let err = Options::parse(&raw).unwrap_err();
        assert_eq!(
            (err.option, err.problem),
            (OptionName::LimitMemory, Problem::Zero)
        );
        let mut raw = RawOptions::default();
        raw.flag(OptionName::LimitFileSize, "0");
        assert_eq!(Options::parse(&raw).unwrap().limit_file_size_bytes, Some(0));
    }

    #[test]
    fn nothing_given_requests_nothing() {
        let options = Options::parse(&RawOptions::default()).unwrap();
        assert!(!options.is_requested());
        assert_eq!(options, Options::default());
    }

    proptest! {
        #[test]
        fn parsing_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            use std::os::unix::ffi::OsStrExt;
            let value = OsStr::from_bytes(&bytes);
            for name in OptionName::ALL {
                let _ = parse_size(name, Source::Env, value);
                let _ = parse_count(name, Source::Flag, value);
            }
            let _ = parse_network(Source::Flag, value);
            let mut allow = b"allow:".to_vec();
            allow.extend_from_slice(&bytes);
            let allow = OsStr::from_bytes(&allow);
            if let Ok((network, rules)) = parse_network(Source::Env, allow) {
                prop_assert_eq!(network, Network::Allow);
                prop_assert!(!rules.is_empty());
            }
            let _ = parse_network_max_bytes(Source::Flag, value, Network::Allow);
            let env = |_: &str| Some(value.to_os_string());
            if let Err(err) = Options::parse(&RawOptions::from_env(env)) {
                prop_assert!(!err.to_string().is_empty());
            }
            let env = |name: &str| match name {
                "PARENT_TOOL_DISPATCH_NETWORK" => Some(allow.to_os_string()),
                _ => Some(value.to_os_string()),
            };
            if let Err(err) = Options::parse(&RawOptions::from_env(env)) {
                prop_assert!(!err.to_string().is_empty());
            }
        }

        #[test]
        fn a_size_with_a_unit_is_the_number_times_the_unit(n in 0u64..1_000_000, unit in 0usize..5) {
            let (suffix, shift) = [("", 0), ("K", 10), ("M", 20), ("G", 30), ("T", 40)][unit];
            let expected = n.checked_mul(1 << shift).filter(|b| *b <= i64::MAX as u64);
            prop_assert_eq!(size(&format!("{n}{suffix}")).ok(), expected);
        }
    }
}
