//! The `wp-codebox/parent-tool-bridge/v1` policy (SPEC §2.1): its typed form and its checks.
//!
//! Unknown keys are allowed everywhere (forward compatibility). The inner keys of
//! `sandbox_env`, `authorization` and `redaction` are optional — real bridges omit them — but
//! checked when present. argv is kept exactly as given: bridges from the upstream builder may
//! arrive trimmed and de-duplicated, and "repairing" them would run something nobody wrote.
//!
//! Unknown keys never make a bridge invalid, but in the six objects whose every key this
//! dispatcher acts on — `dispatcher`, `dispatcher.command`, `dispatcher.endpoint`,
//! `sandbox_env`, `authorization` and `redaction` — an unknown key is almost always a typo
//! that silently changes behaviour (`timeout_sm` runs with the 30 s default,
//! `failure_stauts` with `denied`, `secret_evn` redacts nothing), so each one becomes an
//! `unknown_key` *warning* ([`Bridge::warnings`], [`unknown_keys`]) with a suggestion
//! (`validate --strict` makes them issues). The top level and `metadata` carry upstream's
//! extra keys and get no warnings.
//!
//! [`Bridge::load`] reads the command-line form (`JSON` or `@FILE`) and fails with a
//! [`LoadError`]: its issues are for the envelope and never carry a host path; its `Display`
//! is for the host's stderr and names the file and the OS error.

use super::canonical;
use crate::error::Status;
use crate::validate::{codes, did_you_mean, join, summary, Checker, Issue};
use serde_json::{Map, Value};
use std::fmt;
use std::path::{Path, PathBuf};

/// Schema id of the bridge.
pub const SCHEMA: &str = "wp-codebox/parent-tool-bridge/v1";
/// Largest bridge accepted, inline or from a file.
pub const MAX_BYTES: usize = 8 * 1024 * 1024;
/// `dispatcher.timeout_ms` when absent.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// How the dispatcher reaches the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// An HTTP endpoint (SPEC §11): the request is POSTed to the host's URL.
    HostEndpoint,
    /// A host command: the adapter.
    HostCommand,
}

impl Mode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::HostEndpoint => "host_endpoint",
            Mode::HostCommand => "host_command",
        }
    }
}

/// How the request reaches the adapter and the result comes back (SPEC §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Request on stdin, result on stdout.
    Stdin,
    /// Request and result in private files named by environment variables.
    File,
}

/// `dispatcher.command`.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// Exactly as given.
    pub argv: Vec<String>,
    /// NAME of the host variable holding the working directory.
    pub cwd_env: Option<String>,
    /// Extra variables for the adapter, in the bridge's order.
    pub env: Vec<(String, String)>,
    /// Request/result transport.
    pub transport: Transport,
}

/// `dispatcher.endpoint`: where the URL and the method come from (the token's variable is
/// [`Bridge::token_env`]). Only variable NAMES: the values are read on the host at dispatch time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSpec {
    /// NAME of the host variable holding the URL.
    pub url_env: String,
    /// The method as written (`POST` when absent). Any other value is refused at dispatch
    /// time (`endpoint_unconfigured`, SPEC §11), not here.
    pub method: String,
}

/// One of the metadata-only variables the sandbox may be given (SPEC §4.6): the key under
/// `sandbox_env.variables` and the upstream default name are defined here, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SandboxVar {
    BridgeRef,
    BridgeSchema,
    DispatchMode,
    RequestSchema,
    ResultSchema,
}

impl SandboxVar {
    /// Every variable, in the order they are printed.
    pub const ALL: [SandboxVar; 5] = [
        SandboxVar::BridgeRef,
        SandboxVar::BridgeSchema,
        SandboxVar::DispatchMode,
        SandboxVar::RequestSchema,
        SandboxVar::ResultSchema,
    ];

    /// The key under `sandbox_env.variables`.
    pub fn key(self) -> &'static str {
        self.row().0
    }

    /// The upstream default variable name.
    pub fn default_name(self) -> &'static str {
        self.row().1
    }

    fn row(self) -> (&'static str, &'static str) {
        match self {
            SandboxVar::BridgeRef => ("bridge_ref", "WP_CODEBOX_PARENT_TOOL_BRIDGE_REF"),
            SandboxVar::BridgeSchema => ("bridge_schema", "WP_CODEBOX_PARENT_TOOL_BRIDGE_SCHEMA"),
            SandboxVar::DispatchMode => ("dispatch_mode", "WP_CODEBOX_PARENT_TOOL_DISPATCH_MODE"),
            SandboxVar::RequestSchema => {
                ("request_schema", "WP_CODEBOX_PARENT_TOOL_REQUEST_SCHEMA")
            }
            SandboxVar::ResultSchema => ("result_schema", "WP_CODEBOX_PARENT_TOOL_RESULT_SCHEMA"),
        }
    }

    /// The variable a `sandbox_env.variables` key names, if it is one of the five.
    pub fn parse(key: &str) -> Option<SandboxVar> {
        SandboxVar::ALL.into_iter().find(|v| v.key() == key)
    }
}

/// `sandbox_env.variables`: the name given to each variable, when it is named.
#[derive(Debug, Clone, Default)]
pub struct SandboxVariables {
    names: std::collections::BTreeMap<SandboxVar, String>,
}

impl SandboxVariables {
    /// The name the bridge gives `var`, if any.
    pub fn name(&self, var: SandboxVar) -> Option<&str> {
        self.names.get(&var).map(String::as_str)
    }
}

/// A validated bridge.
#[derive(Debug, Clone)]
pub struct Bridge {
    /// The bridge as given, for the ref and the transcript.
    pub raw: Map<String, Value>,
    pub allowed_tools: Vec<String>,
    pub mode: Mode,
    pub timeout_ms: u64,
    pub command: Option<CommandSpec>,
    /// `dispatcher.endpoint`, when present and well-formed.
    pub endpoint: Option<EndpointSpec>,
    /// `dispatcher.endpoint.token_env`, a variable NAME.
    pub token_env: Option<String>,
    /// `authorization.failure_status`: `Denied` (default) or `Unavailable`.
    pub failure_status: Status,
    /// `sandbox_env.variables`, `None` when absent (then the upstream defaults apply).
    pub sandbox_variables: Option<SandboxVariables>,
    /// `sandbox_env.secret_env`: NAMES that must never reach the sandbox env.
    pub secret_env: Vec<String>,
    /// `unknown_key` findings in `dispatcher`, `dispatcher.command` and `dispatcher.endpoint`
    /// (see [`unknown_keys`]). They do not make the bridge invalid; show them to the host.
    pub warnings: Vec<Issue>,
}

impl Bridge {
    /// Check `raw` and build the typed bridge, or return every issue.
    pub fn from_json(raw: Map<String, Value>) -> Result<Bridge, Vec<Issue>> {
        let mut c = Checker::new();
        let top = &raw;
        c.check(top, "", &fields::SCHEMA);
        c.check(top, "", &fields::VERSION);
        let allowed_tools = c.check(top, "", &fields::ALLOWED_TOOLS).map(strings);
        let dispatcher = c
            .check_object(top, "", &fields::DISPATCHER)
            .map(|d| check_dispatcher(&mut c, d));
        let sandbox = c
            .check_object(top, "", &fields::SANDBOX_ENV)
            .map(|s| check_sandbox_env(&mut c, s));
        let failure_status = c
            .check_object(top, "", &fields::AUTHORIZATION)
            .map(|a| check_authorization(&mut c, a));
        if let Some(redaction) = c.check_object(top, "", &fields::REDACTION) {
            c.check_shape(redaction, "/redaction", &fields::REDACTION_SHAPE);
        }
        c.check(top, "", &fields::METADATA);

        let (
            Some(allowed_tools),
            Some(Some(dispatcher)),
            Some((sandbox_variables, secret_env)),
            Some(failure_status),
        ) = (allowed_tools, dispatcher, sandbox, failure_status)
        else {
            return Err(c.into_issues());
        };
        let bridge = Bridge {
            raw: Map::new(),
            warnings: unknown_keys(&raw),
            allowed_tools,
            mode: dispatcher.mode,
            timeout_ms: dispatcher.timeout_ms,
            command: dispatcher.command,
            endpoint: dispatcher.endpoint.as_ref().map(|e| e.0.clone()),
            token_env: dispatcher.endpoint.and_then(|e| e.1),
            failure_status,
            sandbox_variables,
            secret_env,
        };
        c.finish(Bridge { raw, ..bridge })
    }

    /// Read a bridge given the way the command line takes it — JSON text, or `@FILE` — with
    /// the strict reader (at most [`MAX_BYTES`]), and validate it.
    pub fn load(arg: &str) -> Result<Bridge, LoadError> {
        let file = arg.strip_prefix('@').map(PathBuf::from);
        let parse_error = |e: crate::json::JsonIssue| LoadError::Parse {
            hint: file.is_none().then(|| file_hint(arg)).flatten(),
            file: file.clone(),
            issues: vec![Issue::from_json(&e)],
        };
        let bytes = match &file {
            Some(path) => match ptd_sys::fs::read_file(path, MAX_BYTES as u64) {
                Ok(bytes) => bytes,
                // Over the cap: the strict reader's own issue, as for inline text.
                Err(ptd_sys::fs::ReadError::TooLarge { .. }) => {
                    return Err(parse_error(crate::json::JsonIssue::TooLarge {
                        limit: MAX_BYTES,
                    }))
                }
                Err(err) => {
                    let source = std::io::Error::from(err);
                    return Err(LoadError::Read {
                        issues: vec![Issue::new(
                            codes::UNREADABLE,
                            "",
                            // The reader's errors name no path.
                            format!("the bridge file could not be read: {source}"),
                        )],
                        path: path.clone(),
                        source,
                    });
                }
            },
            None => arg.as_bytes().to_vec(),
        };
        let map = crate::json::parse_object(&bytes, MAX_BYTES).map_err(parse_error)?;
        let warnings = unknown_keys(&map);
        Bridge::from_json(map).map_err(|issues| LoadError::Invalid {
            file,
            issues,
            warnings,
        })
    }

    /// The bridge ref: `sha256:` + hex SHA-256 of the canonical JSON of the bridge as given.
    pub fn bridge_ref(&self) -> String {
        format!(
            "sha256:{}",
            canonical::digest(&Value::Object(self.raw.clone()))
        )
    }

    /// Whether the bridge allows `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed_tools.iter().any(|t| t == tool)
    }
}

/// Why the bridge given on the command line cannot be used. Every variant is the envelope's
/// `unavailable` / `bridge_invalid`; they differ in what the host is told on stderr.
#[derive(Debug)]
pub enum LoadError {
    /// `@FILE` could not be opened or read.
    Read {
        /// The file as given after `@`.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
        /// One `unreadable` issue, without the path.
        issues: Vec<Issue>,
    },
    /// The text (inline or from the file) is not exactly one JSON object.
    Parse {
        /// The file, when the text came from `@FILE`.
        file: Option<PathBuf>,
        /// One issue from the strict reader.
        issues: Vec<Issue>,
        /// `@PATH` when the inline text is not JSON but names an existing file.
        hint: Option<String>,
    },
    /// The JSON is not a valid bridge.
    Invalid {
        /// The file, when the text came from `@FILE`.
        file: Option<PathBuf>,
        /// Every issue.
        issues: Vec<Issue>,
        /// The unknown keys found on the way (often the cause of a `missing` issue).
        warnings: Vec<Issue>,
    },
}

impl LoadError {
    /// The issues for the envelope's `error.details.issues`: never a host path.
    pub fn issues(&self) -> &[Issue] {
        match self {
            LoadError::Read { issues, .. }
            | LoadError::Parse { issues, .. }
            | LoadError::Invalid { issues, .. } => issues,
        }
    }

    /// Unknown-key warnings of a bridge that was read but is invalid; empty otherwise.
    pub fn warnings(&self) -> &[Issue] {
        match self {
            LoadError::Invalid { warnings, .. } => warnings,
            _ => &[],
        }
    }
}

/// For stderr only (it names the host's file): `reading bridge file F: <OS error>`,
/// `parsing bridge file F: <issue>`, `parsing the bridge JSON: <issue> (did you mean @F?)`,
/// `bridge file F: <summary>` or just the summary of the issues.
impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Read { path, source, .. } => {
                write!(f, "reading bridge file {}: {source}", path.display())
            }
            LoadError::Parse { file, issues, hint } => {
                match file {
                    Some(path) => write!(f, "parsing bridge file {}: ", path.display())?,
                    None => f.write_str("parsing the bridge JSON: ")?,
                }
                f.write_str(&summary(issues))?;
                match hint {
                    Some(at) => write!(f, " (did you mean {at}?)"),
                    None => Ok(()),
                }
            }
            LoadError::Invalid { file, issues, .. } => {
                if let Some(path) = file {
                    write!(f, "bridge file {}: ", path.display())?;
                }
                f.write_str(&summary(issues))
            }
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// `@arg` when `arg` (inline text that is not JSON) names an existing file: the `@` was
/// probably forgotten. Long or multi-line text is JSON gone wrong, not a path.
fn file_hint(arg: &str) -> Option<String> {
    let plausible = !arg.is_empty() && arg.len() <= 4096 && !arg.contains(['\n', '{']);
    (plausible && Path::new(arg).is_file()).then(|| format!("@{arg}"))
}

/// One of the objects whose keys are all known to this dispatcher.
struct KnownKeys {
    /// Dotted name for messages.
    name: &'static str,
    /// JSON Pointer of the object.
    pointer: &'static str,
    keys: &'static [&'static str],
}

/// `notes` is upstream's free-text key; it may appear in any object.
const LEVELS: [KnownKeys; 6] = [
    KnownKeys {
        name: "dispatcher",
        pointer: "/dispatcher",
        keys: &[
            "owner",
            "mode",
            "command",
            "endpoint",
            "request_schema",
            "result_schema",
            "timeout_ms",
            "notes",
        ],
    },
    KnownKeys {
        name: "dispatcher.command",
        pointer: "/dispatcher/command",
        keys: &["argv", "cwd_env", "env", "transport", "notes"],
    },
    KnownKeys {
        name: "dispatcher.endpoint",
        pointer: "/dispatcher/endpoint",
        keys: &["url_env", "method", "token_env", "notes"],
    },
    KnownKeys {
        name: "sandbox_env",
        pointer: "/sandbox_env",
        keys: &["mode", "variables", "secret_env", "notes"],
    },
    KnownKeys {
        name: "authorization",
        pointer: "/authorization",
        keys: &["mode", "failure_status", "notes"],
    },
    KnownKeys {
        name: "redaction",
        pointer: "/redaction",
        keys: &["transcript_artifact_refs", "notes"],
    },
];

/// At most this many `unknown_key` warnings, then one that counts the rest.
const MAX_UNKNOWN_KEY_WARNINGS: usize = 20;

/// `unknown_key` warnings for `dispatcher`, `dispatcher.command`, `dispatcher.endpoint`,
/// `sandbox_env`, `authorization` and `redaction` (the objects whose every key is acted on):
/// each with a "did you mean" when a known key is close, or where the key belongs when it is a
/// known key of one of the other two objects (`transport` directly under `dispatcher`).
/// Objects of the wrong type are left to validation. Bounded: at most 21 warnings.
pub fn unknown_keys(raw: &Map<String, Value>) -> Vec<Issue> {
    let dispatcher = raw.get("dispatcher").and_then(Value::as_object);
    let objects = [
        dispatcher,
        dispatcher
            .and_then(|d| d.get("command"))
            .and_then(Value::as_object),
        dispatcher
            .and_then(|d| d.get("endpoint"))
            .and_then(Value::as_object),
        raw.get("sandbox_env").and_then(Value::as_object),
        raw.get("authorization").and_then(Value::as_object),
        raw.get("redaction").and_then(Value::as_object),
    ];
    let mut out = Vec::new();
    let mut more = 0usize;
    for (level, object) in LEVELS.iter().zip(objects) {
        for key in object.into_iter().flat_map(Map::keys) {
            if level.keys.contains(&key.as_str()) {
                continue;
            }
            if out.len() == MAX_UNKNOWN_KEY_WARNINGS {
                more += 1;
                continue;
            }
            out.push(Issue::new(
                codes::UNKNOWN_KEY,
                join(level.pointer, key),
                unknown_key_message(level, key),
            ));
        }
    }
    if more > 0 {
        out.push(Issue::new(
            codes::UNKNOWN_KEY,
            "",
            format!("and {more} more unknown keys"),
        ));
    }
    out
}

fn unknown_key_message(level: &KnownKeys, key: &str) -> String {
    // A key can be megabytes long.
    let shown = crate::terminal::cut_at_char_boundary(key, 64);
    let others = || LEVELS.iter().filter(|l| l.name != level.name);
    if let Some(home) = others().find(|l| l.keys.contains(&key) && key != "notes") {
        return format!(
            "key {shown:?} belongs in {}, not {}; here it is ignored",
            home.name, level.name
        );
    }
    if let Some(near) = did_you_mean(key, level.keys.iter().copied()) {
        return format!("unknown key {shown:?} (did you mean {near:?}?)");
    }
    for other in others() {
        if let Some(near) = did_you_mean(key, other.keys.iter().copied()) {
            return format!(
                "unknown key {shown:?} (did you mean {near:?} in {}?)",
                other.name
            );
        }
    }
    format!(
        "unknown key {shown:?}; {} takes {}",
        level.name,
        level.keys.join(", ")
    )
}

struct Dispatcher {
    mode: Mode,
    timeout_ms: u64,
    command: Option<CommandSpec>,
    /// The endpoint and its `token_env`.
    endpoint: Option<(EndpointSpec, Option<String>)>,
}

/// The strings of an array that passed its checks.
fn strings(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item.as_str().map(str::to_string))
        .collect()
}

fn check_dispatcher(c: &mut Checker, d: &Map<String, Value>) -> Option<Dispatcher> {
    const BASE: &str = "/dispatcher";
    c.check(d, BASE, &fields::OWNER);
    c.check(d, BASE, &fields::REQUEST_SCHEMA);
    c.check(d, BASE, &fields::RESULT_SCHEMA);
    let mode = match c.check_str(d, BASE, &fields::MODE) {
        Some("host_command") => Some(Mode::HostCommand),
        Some(_) => Some(Mode::HostEndpoint),
        None => None,
    };
    let timeout_ms = match d.get(fields::TIMEOUT_MS.key) {
        None => Some(DEFAULT_TIMEOUT_MS),
        Some(_) => c
            .check(d, BASE, &fields::TIMEOUT_MS)
            .and_then(Value::as_u64),
    };
    let command = c
        .check_object(d, BASE, &fields::COMMAND)
        .and_then(|cmd| check_command(c, cmd));
    let endpoint = c
        .check_object(d, BASE, &fields::ENDPOINT)
        .and_then(|e| check_endpoint(c, e));
    Some(Dispatcher {
        mode: mode?,
        timeout_ms: timeout_ms?,
        command,
        endpoint,
    })
}

fn check_command(c: &mut Checker, cmd: &Map<String, Value>) -> Option<CommandSpec> {
    const BASE: &str = "/dispatcher/command";
    let argv = c.check(cmd, BASE, &fields::ARGV).map(strings);
    for (i, arg) in argv.iter().flatten().enumerate() {
        if arg.contains('\0') {
            c.push(
                codes::WRONG_VALUE,
                format!("/dispatcher/command/argv/{i}"),
                "argv elements must not contain NUL",
            );
        }
    }
    let cwd_env = c.check_str(cmd, BASE, &fields::CWD_ENV).map(str::to_string);
    // The env's values are also checked for NUL, as a case file's are (`env_vars`).
    let env = c
        .check_object(cmd, BASE, &fields::ENV)
        .map(|map| c.env_vars(map, "/dispatcher/command/env", codes::WRONG_VALUE))
        .unwrap_or_default();
    let transport = match c.check_str(cmd, BASE, &fields::TRANSPORT) {
        Some("file") => Transport::File,
        _ => Transport::Stdin,
    };
    Some(CommandSpec {
        argv: argv?,
        cwd_env,
        env,
        transport,
    })
}

fn check_endpoint(
    c: &mut Checker,
    e: &Map<String, Value>,
) -> Option<(EndpointSpec, Option<String>)> {
    const BASE: &str = "/dispatcher/endpoint";
    let url_env = c.check_str(e, BASE, &fields::URL_ENV).map(str::to_string);
    // Only the shape here: a method other than POST is a host configuration the dispatcher
    // refuses when it would send (SPEC §11), so that `validate bridge` and the main job agree
    // on what a well-formed bridge is.
    let method = c
        .check_str(e, BASE, &fields::METHOD)
        .unwrap_or("POST")
        .to_string();
    let token_env = c.check_str(e, BASE, &fields::TOKEN_ENV).map(str::to_string);
    Some((
        EndpointSpec {
            url_env: url_env?,
            method,
        },
        token_env,
    ))
}

type SandboxParts = (Option<SandboxVariables>, Vec<String>);

fn check_sandbox_env(c: &mut Checker, s: &Map<String, Value>) -> SandboxParts {
    const BASE: &str = "/sandbox_env";
    c.check(s, BASE, &fields::SANDBOX_MODE);
    let variables = c.check_object(s, BASE, &fields::VARIABLES).map(|vars| {
        let mut out = SandboxVariables::default();
        for (key, value) in vars {
            let path = join("/sandbox_env/variables", key);
            let named = c.check_value(value, &path, key, &fields::ENV_NAME_SPEC);
            if let (Some(var), true, Some(name)) = (SandboxVar::parse(key), named, value.as_str()) {
                out.names.insert(var, name.to_string());
            }
        }
        out
    });
    let secret_env = c
        .check(s, BASE, &fields::SECRET_ENV)
        .map(strings)
        .unwrap_or_default();
    (variables, secret_env)
}

fn check_authorization(c: &mut Checker, a: &Map<String, Value>) -> Status {
    const BASE: &str = "/authorization";
    c.check(a, BASE, &fields::AUTHORIZATION_MODE);
    match c.check_str(a, BASE, &fields::FAILURE_STATUS) {
        Some("unavailable") => Status::Unavailable,
        _ => Status::Denied,
    }
}

pub mod fields;

#[cfg(test)]
mod tests;
