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
        Options::parse_beside_named_ledger(raw, ledger, "--ledger")
    }

    /// [`Options::parse_beside_ledger`] for a ledger the host named another way than
    /// `--ledger` (a policy's `[ledger] path`): `named_by` says how, in a refusal.
    pub fn parse_beside_named_ledger(
        raw: &RawOptions,
        ledger: Option<&Path>,
        named_by: &'static str,
    ) -> Result<Options, OptionError> {
        let ledger = ledger.map(|path| (path, ledger_folder(path), named_by));
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
/// system, or it holds the ledger's folder or lies in it (`ledger`: the path as given, its
/// folder and how the host named it).
fn confines_nothing(
    path: &Path,
    ledger: Option<&(&Path, PathBuf, &'static str)>,
) -> Option<Problem> {
    if path == Path::new("/") {
        return Some(Problem::WholeFileSystem);
    }
    let (given, folder, named_by) = ledger?;
    let inside = path.starts_with(folder);
    (inside || folder.starts_with(path)).then(|| Problem::CoversLedger {
        ledger: given.to_string_lossy().into_owned(),
        named_by,
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
    /// given, how the host named it (`--ledger`, `[ledger] path`) and its canonical folder.
    CoversLedger {
        ledger: String,
        named_by: &'static str,
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
                named_by,
                folder,
                inside,
            } => {
                let relation = if *inside { "lies in" } else { "holds" };
                write!(
                    f,
                    ": `{value}` {relation} the ledger's folder {folder} ({named_by} `{ledger}`), \
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
mod tests;
