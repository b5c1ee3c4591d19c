//! The small subcommands: `validate`, `sandbox-env` and `request`. Each reads, checks and prints; none
//! starts a process. stdout carries only the report or the variables; every human line goes to
//! stderr through [`ptd_wire::terminal`], escaped.

use crate::cli::{EnvFormat, EnvelopeKind, RequestArgs, SandboxEnvArgs, ValidateArgs};
use ptd_wire::envelope::bridge::{self, Bridge, LoadError, SandboxVar};
use ptd_wire::envelope::request::Request;
use ptd_wire::envelope::result::ResultEnvelope;
use ptd_wire::envelope::{request, result};
use ptd_wire::error::exit;
use ptd_wire::json;
use ptd_wire::json::Document;
use ptd_wire::terminal::{error_line, print_warnings};
use ptd_wire::validate::{summary, Issue, Report};
use serde_json::{Map, Value};
use std::rc::Rc;

/// `validate bridge|request|result [FILE...] [--strict]`: print the report on stdout; on
/// stderr the warnings (`warning[unknown_key]: …`) and, when invalid, one
/// `error[<kind>_invalid]: …` line naming the first issue (or the file and the OS error when it
/// could not be read). Exit 0 when valid, 65 otherwise, 74 when stdout could not be written
/// (`ptd_wire::stdout`). `--strict` turns warnings into issues.
///
/// Several files get one report each, a JSON line per file in the order given, with the file
/// as given under `"file"`, and their stderr lines start with the file's name; exit 65 when any
/// of them is invalid. `-` (stdin) may be given once.
pub(crate) fn validate(args: &ValidateArgs) -> u8 {
    let kind = args.kind.name();
    let stdin = |p: &&std::path::PathBuf| p.as_os_str() == "-";
    if args.files.iter().filter(stdin).count() > 1 {
        stderr_line!(
            "error[usage]: `-` (stdin) can be given once\n\nFor more information, try '--help'."
        );
        return exit::USAGE;
    }
    if args.files.len() <= 1 {
        let file = args.files.first().filter(|p| !stdin(p));
        let (report, cause) = check_file(args, file.map(|p| p.as_path()));
        print_verdict(args, &report, cause, None);
        let status = if report.valid {
            exit::SUCCESS
        } else {
            exit::DATA_INVALID
        };
        return ptd_wire::stdout::print(&json_line(&report), "the report", status);
    }
    let mut lines = Vec::new();
    let mut status = exit::SUCCESS;
    for path in &args.files {
        let file = Some(path.as_path()).filter(|_| !stdin(&path));
        let (report, cause) = check_file(args, file);
        let name = match file {
            Some(path) => path.display().to_string(),
            None => format!("the {kind} on stdin"),
        };
        print_verdict(args, &report, cause, Some(&name));
        if !report.valid {
            status = exit::DATA_INVALID;
        }
        #[derive(serde::Serialize)]
        struct FileReport<'r> {
            file: String,
            #[serde(flatten)]
            report: &'r Report,
        }
        let file = path.to_string_lossy().into_owned();
        lines.extend(json_line(&FileReport {
            file,
            report: &report,
        }));
    }
    ptd_wire::stdout::print(&lines, "the reports", status)
}

/// The stderr lines of one checked file: its warnings and, when invalid, the `error[..]` line
/// (after the file's name when several are checked).
fn print_verdict(args: &ValidateArgs, report: &Report, cause: Option<String>, name: Option<&str>) {
    let prefix = name.map(|n| format!("{n}: ")).unwrap_or_default();
    for warning in &report.warnings {
        let line = ptd_wire::terminal::warning_line(warning);
        match name {
            None => stderr_line!("{line}"),
            Some(_) => {
                let (head, rest) = line.split_once(": ").unwrap_or((&line, ""));
                stderr_line!("{head}: {}{rest}", ptd_wire::terminal::escape(&prefix));
            }
        }
    }
    if !report.valid {
        let cause = cause.unwrap_or_else(|| summary(&report.issues));
        let cause = match name {
            // A file that could not be read is already named in the cause.
            Some(_) if !cause.starts_with("reading ") => format!("{prefix}{cause}"),
            _ => cause,
        };
        stderr_line!("{}", error_line(args.kind.error_code().as_str(), &cause));
    }
}

/// Check one file (`None`: stdin) as `args.kind`: the report, and why it could not be read
/// (naming the file and the OS error, for stderr only).
fn check_file(args: &ValidateArgs, file: Option<&std::path::Path>) -> (Report, Option<String>) {
    let max = usize::try_from(args.max_bytes).unwrap_or(usize::MAX);
    let kind = args.kind.name();
    if file.is_none() {
        if let Some(hint) = ptd_wire::terminal::stdin_hint_for(kind) {
            stderr_line!("{hint}");
        }
    }
    let mut cause = None;
    let (mut issues, mut warnings) = match ptd_wire::envelope::read_input(file, max as u64) {
        Err(err) => {
            cause = Some(match file {
                Some(path) => format!("reading {kind} file {}: {err}", path.display()),
                None => format!("reading the {kind} from stdin: {err}"),
            });
            // The report names no path: it may be shown further than the host's terminal.
            let issue = Issue::new(
                ptd_wire::validate::codes::UNREADABLE,
                "",
                format!("the file could not be read: {err}"),
            );
            (vec![issue], Vec::new())
        }
        Ok(bytes) => match args.kind {
            EnvelopeKind::Bridge => match json::parse_object(&bytes, max) {
                Err(e) => (vec![Issue::from_json(&e)], Vec::new()),
                Ok(map) => {
                    let warnings = bridge::unknown_keys(&map);
                    (Bridge::from_json(map).err().unwrap_or_default(), warnings)
                }
            },
            EnvelopeKind::Request | EnvelopeKind::Result => match Document::parse(bytes, max) {
                Err(e) => (vec![Issue::from_json(&e)], Vec::new()),
                Ok(doc) if args.kind == EnvelopeKind::Request => (
                    Request::from_document(Rc::new(doc))
                        .err()
                        .unwrap_or_default(),
                    Vec::new(),
                ),
                Ok(doc) => (
                    ResultEnvelope::check(doc.text(), None)
                        .err()
                        .unwrap_or_default(),
                    Vec::new(),
                ),
            },
        },
    };
    if args.strict {
        issues.append(&mut warnings);
    }
    (Report::with_warnings(issues, warnings), cause)
}

/// `request TOOL [--input JSON|@FILE] [--id ID] [--session ID] [--operation OP]`: print a new
/// request envelope, checked by the request's own validator first. Exit 0; 65 (with
/// `error[request_invalid]`) when the input is not one JSON value or the envelope would be
/// invalid; 2 (`error[usage]`) when the input file cannot be read.
pub(crate) fn request(args: &RequestArgs) -> u8 {
    // The main job's default --max-request-bytes: a bigger input makes a request it refuses.
    let max = 8 * 1024 * 1024;
    let input = match args.input.strip_prefix('@') {
        Some(path) => match ptd_sys::fs::read_file(std::path::Path::new(path), max as u64) {
            Ok(bytes) => bytes,
            Err(err) => {
                stderr_line!(
                    "{}\n\nFor more information, try '--help'.",
                    error_line(
                        "usage",
                        &format!("the --input file {path} cannot be read: {err}")
                    )
                );
                return exit::USAGE;
            }
        },
        None => args.input.clone().into_bytes(),
    };
    let input = match json::check(&input, max) {
        Ok(text) => text,
        Err(e) => {
            let issue = Issue::from_json(&e);
            let message = format!("--input is not one JSON value: {}", summary(&[issue]));
            stderr_line!("{}", error_line("request_invalid", &message));
            return exit::DATA_INVALID;
        }
    };
    let id = args.id.clone().unwrap_or_else(fresh_request_id);
    let mut text = String::new();
    let mut top = json::raw::ObjectWriter::new(&mut text);
    top.str("schema", request::SCHEMA)
        .raw("version", "1")
        .str("request_id", &id)
        .str("tool", &args.tool)
        .str("operation", &args.operation)
        .raw("input", input)
        .with("sandbox_session", |out| {
            let mut session = json::raw::ObjectWriter::new(out);
            session.str("sandbox_session_id", &args.session);
            session.finish();
        })
        .with("authorization", |out| {
            let mut authorization = json::raw::ObjectWriter::new(out);
            authorization
                .value("allowed_tools", &[&args.tool])
                .raw("principal", "{}");
            authorization.finish();
        })
        .raw("metadata", "{}");
    top.finish();
    let checked = Document::parse(text.clone().into_bytes(), usize::MAX)
        .map_err(|e| vec![Issue::from_json(&e)])
        .and_then(|doc| Request::from_document(Rc::new(doc)).map(|_| ()));
    if let Err(issues) = checked {
        let message = format!("the request would be invalid: {}", summary(&issues));
        stderr_line!("{}", error_line("request_invalid", &message));
        return exit::DATA_INVALID;
    }
    if args.pretty {
        text = json::raw::pretty(&text);
    }
    text.push('\n');
    ptd_wire::stdout::print(text.as_bytes(), "the request", exit::SUCCESS)
}

/// A request id no other run makes: `ptr-<unix ms>-<pid>-<16 hex digits>`, the digits from
/// the operating system's randomness (std's hash keys are seeded from it).
fn fresh_request_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let random = ptd_sys::fs::random_u64();
    format!("ptr-{ms}-{}-{random:016x}", std::process::id())
}

/// `value` as compact JSON and a newline: a report as the small subcommands print it.
pub(crate) fn json_line(value: &impl serde::Serialize) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    line
}

/// Why `sandbox-env` refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SandboxEnvError {
    /// The bridge could not be read, parsed or validated.
    #[error("{0}")]
    Bridge(#[from] LoadError),
    /// A sandbox variable name is also a secret or token variable name.
    #[error("sandbox variable {0} collides with a secret or token variable name")]
    Collision(String),
}

impl SandboxEnvError {
    /// The code of the `error[code]:` line.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            SandboxEnvError::Bridge(_) => "bridge_invalid",
            SandboxEnvError::Collision(_) => "sandbox_env_collision",
        }
    }
}

/// The metadata-only variables for the sandbox, in a stable order.
pub(crate) fn sandbox_variables(bridge: &Bridge) -> Result<Vec<(String, String)>, SandboxEnvError> {
    let mut out = Vec::new();
    for var in SandboxVar::ALL {
        let name = match &bridge.sandbox_variables {
            None => var.default_name(),
            Some(named) => match named.name(var) {
                Some(name) => name,
                None => continue,
            },
        };
        if bridge.secret_env.iter().any(|s| s == name) || bridge.token_env.as_deref() == Some(name)
        {
            return Err(SandboxEnvError::Collision(name.to_string()));
        }
        let value = match var {
            SandboxVar::BridgeRef => bridge.bridge_ref(),
            SandboxVar::BridgeSchema => bridge::SCHEMA.to_string(),
            SandboxVar::DispatchMode => bridge.mode.as_str().to_string(),
            SandboxVar::RequestSchema => request::SCHEMA.to_string(),
            SandboxVar::ResultSchema => result::SCHEMA.to_string(),
        };
        out.push((name.to_string(), value));
    }
    Ok(out)
}

/// `sandbox-env`: print the variables. No envelope: a refusal (bad bridge, name collision)
/// is one `error[code]: …` line on stderr, nothing on stdout, exit 69; no bridge at all is a
/// usage error (exit 2); a stdout that cannot be written is exit 74. Unknown-key warnings go to
/// stderr and do not stop it.
pub(crate) fn sandbox_env(args: &SandboxEnvArgs) -> u8 {
    let Some(text) = args.parent_tool_bridge.as_deref() else {
        stderr_line!(
            "{}",
            error_line(
                "usage",
                &format!(
                    "no bridge: pass --parent-tool-bridge '<json>|@FILE' or set {}",
                    crate::cli::BRIDGE_ENV
                )
            )
        );
        return exit::USAGE;
    };
    let vars = Bridge::load(text)
        .map_err(|err| {
            print_warnings(err.warnings());
            SandboxEnvError::from(err)
        })
        .and_then(|bridge| {
            print_warnings(&bridge.warnings);
            sandbox_variables(&bridge)
        });
    let vars = match vars {
        Ok(vars) => vars,
        Err(err) => {
            stderr_line!("{}", error_line(err.code(), &err.to_string()));
            return exit::UNAVAILABLE;
        }
    };
    let text = match args.format {
        EnvFormat::Env => vars
            .into_iter()
            .map(|(name, value)| format!("{name}={value}\n"))
            .collect::<String>()
            .into_bytes(),
        EnvFormat::Json => {
            let map: Map<String, Value> = vars
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            json_line(&Value::Object(map))
        }
    };
    ptd_wire::stdout::print(&text, "the variables", exit::SUCCESS)
}
