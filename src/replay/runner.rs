//! Running one case: what the main job prints, and its exit status, for the case's bridge,
//! request, options, environment and adapter.
//!
//! - A `recorded` or `result` answer runs **in this process**, through the main job's own
//!   steps: the case's options parsed by the same clap definitions, then
//!   `dispatch::conclude_recorded` with the case's variables overlaid (`HostEnv::with`): the
//!   main job's admission, `dispatch::judge_answer` on the recorded bytes and exit code, and
//!   its report (diagnostics, transcript, redaction, `--result-file`). No second
//!   implementation of any rule: a recorded answer is judged exactly as a live one.
//! - An `argv` answer runs **this binary's main job as a child process**, with the case's argv
//!   as the bridge's `dispatcher.command.argv`, the options, the variables and the request on
//!   stdin. The child owns the adapter's guarantees (process group, deadline, kill ladder,
//!   subreaper), and each adapter run has a dispatcher process of its own, so parallel cases
//!   never share a reaper. The child is started and watched by `exec::Watched` (a session of
//!   its own, the parent-death signal, no inherited descriptor): past its own bound by far,
//!   exec's ladder stops it (SIGTERM, then SIGKILL), so a broken dispatcher fails its case,
//!   it does not hang the suite.
//!
//! It must not compare anything (that is `diff`) nor print.

use super::cases::{Adapter, Case};
use crate::cli::{Cli, DispatchArgs};
use crate::dispatch::{self, Concluded, UsageError};
use clap::Parser;
use ptd_sys::exec::{self, Watch, Watched};
use ptd_sys::hostenv::HostEnv;
use ptd_wire::envelope::bridge::DEFAULT_TIMEOUT_MS;
use serde_json::{Map, Value};
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How far past its own bound (`timeout_ms + kill_grace_ms + 250 ms`) a child dispatcher may
/// run before the watchdog stops it.
const WATCHDOG_MARGIN: Duration = Duration::from_secs(10);
/// What a child dispatcher may print on stdout beyond `--max-output-bytes` (its own
/// diagnostics around the adapter's output).
const STDOUT_SLACK_BYTES: u64 = 4 * 1024 * 1024;
/// The end of a child dispatcher's stderr that is kept.
const STDERR_KEEP_BYTES: usize = 64 * 1024;
/// A bridge longer than this goes to the child in a private temp file (`@FILE`): one argv
/// element is capped by the kernel at 128 KiB.
const INLINE_BRIDGE_BYTES: usize = 64 * 1024;

/// Why a case could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the dispatcher binary to run argv cases with is unknown")]
    NoDispatcherBinary,
    #[error("the options name a subcommand; a case's options are the main job's")]
    OptionsNameASubcommand,
    #[error("the options name a REQUEST file; a case's request is its \"request\"")]
    OptionsNameARequest,
    #[error("the options ask for help or the version")]
    OptionsAskForHelp,
    #[error("the case confines its adapter itself (a confinement option or PARENT_TOOL_DISPATCH_* variable), and replay was given confinement options: one place decides")]
    CaseConfines,
    #[error("an argv case's bridge cannot be used: {0}")]
    BridgeUnreadable(String),
    #[error("an argv case's bridge needs a \"dispatcher\" object to take the argv")]
    NoDispatcherObject,
    #[error("an argv case's bridge has a dispatcher.command that is not an object")]
    CommandNotAnObject,
    #[error("could not write the bridge to a temp file: {0}")]
    BridgeFile(std::io::Error),
    #[error("could not start the dispatcher: {0}")]
    Spawn(ptd_sys::exec::SpawnError),
    /// The watchdog's account: the child could not be waited for, or had to be stopped.
    #[error("{0}")]
    Watchdog(String),
    #[error("the dispatcher printed more than {0} bytes on stdout")]
    StdoutTooLarge(u64),
    #[error("internal error: running the case panicked; please report it")]
    Panicked,
}

/// What the main job did for a case.
#[derive(Debug, Clone, Default)]
pub struct Actual {
    /// The printed envelope, parsed (absent on a usage error, or when stdout held none).
    pub envelope: Option<Value>,
    /// Why stdout could not be read as an envelope, when it could not.
    pub envelope_problem: Option<String>,
    /// The exit status (absent when a signal ended the child dispatcher).
    pub exit: Option<i32>,
    /// What the main job said on stderr, line by line.
    pub stderr: Vec<String>,
}

impl Actual {
    /// `status` of the envelope.
    pub fn status(&self) -> Option<&str> {
        self.envelope.as_ref()?.get("status")?.as_str()
    }

    /// `error.code` of the envelope.
    pub fn error_code(&self) -> Option<&str> {
        self.envelope.as_ref()?.get("error")?.get("code")?.as_str()
    }

    /// `error.message` of the envelope.
    pub fn error_message(&self) -> Option<&str> {
        self.envelope
            .as_ref()?
            .get("error")?
            .get("message")?
            .as_str()
    }

    fn from_output(stdout: &str, exit: Option<i32>, stderr: Vec<String>) -> Actual {
        let (envelope, envelope_problem) = if stdout.trim().is_empty() {
            (None, None)
        } else {
            match serde_json::from_str::<Value>(stdout) {
                Ok(value) => (Some(value), None),
                Err(e) => (
                    None,
                    Some(format!(
                        "stdout could not be read as one JSON envelope: {e}"
                    )),
                ),
            }
        };
        Actual {
            envelope,
            envelope_problem,
            exit,
            stderr,
        }
    }

    fn usage(message: String) -> Actual {
        Actual {
            exit: Some(i32::from(ptd_wire::error::exit::USAGE)),
            stderr: vec![format!("error[usage]: {message}")],
            ..Actual::default()
        }
    }
}

/// Run `case`. `exe` is the dispatcher binary for `argv` cases (normally this one). `Err` is a
/// case that could not be run at all: its options are not the main job's, or the child
/// dispatcher could not be started or had to be stopped.
pub fn run(case: &Case, exe: Option<&Path>) -> Result<Actual, RunError> {
    run_with(case, exe, &[])
}

/// [`run`], with `confine` (confinement flags, `confine::Options::to_flags`) given to the
/// dispatcher of an `argv` case before the case's own options (SPEC §13: replay's argv cases
/// can be confined).
pub(crate) fn run_with(
    case: &Case,
    exe: Option<&Path>,
    confine: &[OsString],
) -> Result<Actual, RunError> {
    match &case.adapter {
        Adapter::Argv(argv) => {
            let exe = exe.ok_or(RunError::NoDispatcherBinary)?;
            in_child(case, argv, exe, confine)
        }
        Adapter::Recorded {
            stdout,
            exit_code,
            stderr,
        } => in_process(case, stdout.as_bytes(), *exit_code, stderr.as_bytes()),
        Adapter::Result(envelope) => in_process(case, envelope.as_bytes(), 0, b""),
    }
}

/// The options as the main job parses them: `Ok(Err(usage))` when the main job would refuse
/// them (exit 2), `Err` when they are not a main job's options at all.
fn parse_options(
    bridge: &str,
    options: &[String],
) -> Result<Result<DispatchArgs, String>, RunError> {
    let argv = ["parent-tool-dispatch", "--parent-tool-bridge", bridge]
        .into_iter()
        .map(str::to_string)
        .chain(options.iter().cloned());
    match Cli::try_parse_from(argv) {
        Ok(cli) if cli.command.is_some() => Err(RunError::OptionsNameASubcommand),
        Ok(cli) if cli.dispatch.request.is_some() => Err(RunError::OptionsNameARequest),
        Ok(cli) => Ok(Ok(cli.dispatch)),
        Err(e) if !e.use_stderr() => Err(RunError::OptionsAskForHelp),
        Err(e) => {
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            Ok(Err(first.trim_start_matches("error: ").to_string()))
        }
    }
}

fn in_process(
    case: &Case,
    stdout: &[u8],
    exit_code: i32,
    stderr: &[u8],
) -> Result<Actual, RunError> {
    let args = match parse_options(&case.bridge, &case.options)? {
        Ok(args) => args,
        Err(usage) => return Ok(Actual::usage(usage)),
    };
    let env = HostEnv::with(case.env.iter().cloned());
    match run_recorded(&args, &env, case.request.clone(), stdout, exit_code, stderr) {
        Ok(concluded) => Ok(Actual::from_output(
            &concluded.envelope,
            Some(i32::from(concluded.exit)),
            concluded.stderr,
        )),
        Err(UsageError(message)) => Ok(Actual::usage(message)),
    }
}

/// The main job, in this process, for `request` answered by a recorded adapter that wrote
/// `stdout` and `stderr` and exited with `exit_code`: the same steps as a live run (see
/// `dispatch::conclude_recorded`), with no process started and nothing printed. `Err`
/// is what the main job would refuse as a usage error (exit 2, no envelope). The fuzz
/// targets and the property tests drive the pipeline through this too.
pub fn run_recorded(
    args: &DispatchArgs,
    env: &HostEnv,
    request: Vec<u8>,
    stdout: &[u8],
    exit_code: i32,
    stderr: &[u8],
) -> Result<Concluded, UsageError> {
    let recorded = dispatch::Recorded {
        stdout,
        exit_code,
        stderr,
    };
    dispatch::conclude_recorded(args, env, request, recorded)
}

/// The folder of the case file (`None` for a transcript, which runs no argv): where an `argv`
/// case's child dispatcher runs.
fn case_folder(case: &Case) -> Option<&Path> {
    match case.origin {
        super::cases::Origin::CaseFile => case
            .file
            .parent()
            .filter(|folder| !folder.as_os_str().is_empty()),
        _ => None,
    }
}

/// The case's bridge with `argv` as `dispatcher.command.argv`.
fn bridge_with_argv(
    bridge: &Map<String, Value>,
    argv: &[String],
) -> Result<Map<String, Value>, RunError> {
    let mut bridge = bridge.clone();
    let dispatcher = bridge
        .get_mut("dispatcher")
        .and_then(Value::as_object_mut)
        .ok_or(RunError::NoDispatcherObject)?;
    let command = dispatcher
        .entry("command")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or(RunError::CommandNotAnObject)?;
    command.insert("argv".into(), Value::from(argv.to_vec()));
    Ok(bridge)
}

/// The bridge of an `argv` case as a tree: the case's object, or the JSON text or `@FILE`
/// (already relative to the case's folder) it names, read through the one reader.
fn bridge_tree(case: &Case) -> Result<Map<String, Value>, RunError> {
    if let Some(tree) = &case.bridge_tree {
        return Ok(tree.clone());
    }
    let max = ptd_wire::envelope::bridge::MAX_BYTES;
    let bytes = match case.bridge.strip_prefix('@') {
        Some(file) => ptd_sys::fs::read_file(Path::new(file), max as u64)
            .map_err(|err| RunError::BridgeUnreadable(format!("reading {file}: {err}")))?,
        None => case.bridge.clone().into_bytes(),
    };
    ptd_wire::json::parse_object(&bytes, max)
        .map_err(|err| RunError::BridgeUnreadable(err.to_string()))
}

fn in_child(
    case: &Case,
    argv: &[String],
    exe: &Path,
    confine: &[OsString],
) -> Result<Actual, RunError> {
    let tree = bridge_tree(case)?;
    let bridge = bridge_with_argv(&tree, argv)?;
    let text = serde_json::to_string(&Value::Object(bridge.clone())).unwrap_or_default();
    let (max_output_bytes, kill_grace_ms) = match parse_options(&text, &case.options)? {
        Ok(args) if !confine.is_empty() && case_confines(&args, &case.env) => {
            return Err(RunError::CaseConfines)
        }
        Ok(args) => (args.run.max_output_bytes, args.run.kill_grace_ms),
        // The child says why, and exits 2, as the main job does.
        Err(_) => (0, 0),
    };
    let timeout_ms = bridge
        .get("dispatcher")
        .and_then(|d| d.get("timeout_ms"))
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TIMEOUT_MS);
    let bound = exec::bound(
        Duration::from_millis(timeout_ms),
        Duration::from_millis(kill_grace_ms),
    ) + WATCHDOG_MARGIN;

    let (bridge_arg, bridge_file) = bridge_arg(text)?;

    let argv: Vec<OsString> = [exe.as_os_str(), OsStr::new("--parent-tool-bridge")]
        .into_iter()
        .map(OsStr::to_os_string)
        .chain([OsString::from(&bridge_arg)])
        .chain(confine.iter().cloned())
        .chain(case.options.iter().map(OsString::from))
        .collect();
    let (mut child, pipes) =
        // In the case's folder: the one rule for its relative paths (argv[0] stays as given,
        // resolved by the child as the main job resolves it, against its working directory).
        Watched::spawn(exe, &argv, child_env(&case.env), case_folder(case))
            .map_err(RunError::Spawn)?;
    let (tx, rx) = mpsc::channel();
    if let Some(mut stdin) = pipes.stdin {
        let request = case.request.clone();
        // A dispatcher that stops reading (request too large) closes the pipe: not an error.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&request);
        });
    }
    let stdout_cap = max_output_bytes.saturating_add(STDOUT_SLACK_BYTES);
    let stdout = pipes.stdout;
    let out_tx = tx.clone();
    std::thread::spawn(move || {
        let _ = out_tx.send(Stream::Stdout(read_capped(stdout, stdout_cap, false)));
    });
    let stderr = pipes.stderr;
    std::thread::spawn(move || {
        let _ = tx.send(Stream::Stderr(read_capped(
            stderr,
            STDERR_KEEP_BYTES as u64,
            true,
        )));
    });

    let status = wait_bounded(&mut child, bound, kill_grace_ms).map_err(RunError::Watchdog)?;
    drop(bridge_file);

    // The dispatcher is gone; its pipes close with it unless something it failed to clean up
    // still holds them. Never wait for that without a bound.
    let (stdout, stderr) = receive_streams(&rx, Duration::from_secs(2));
    let (stdout, truncated) = stdout.unwrap_or_default();
    let (stderr, _) = stderr.unwrap_or_default();
    let stderr: Vec<String> = String::from_utf8_lossy(&stderr)
        .lines()
        .map(str::to_string)
        .collect();
    if truncated {
        return Err(RunError::StdoutTooLarge(stdout_cap));
    }
    let stdout = String::from_utf8_lossy(&stdout);
    let mut actual = Actual::from_output(&stdout, status.code(), stderr);
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        actual.stderr.push(format!(
            "(replay: the dispatcher was ended by {})",
            ptd_sys::signal::signal_name(signal)
        ));
    }
    Ok(actual)
}

/// The `--parent-tool-bridge` argument for `text`: the text itself, or `@file` for a bridge
/// too long for an argument (the file lives as long as the returned handle).
fn bridge_arg(text: String) -> Result<(String, Option<tempfile::NamedTempFile>), RunError> {
    if text.len() <= INLINE_BRIDGE_BYTES {
        return Ok((text, None));
    }
    let mut file = tempfile::NamedTempFile::new().map_err(RunError::BridgeFile)?;
    file.write_all(text.as_bytes())
        .map_err(RunError::BridgeFile)?;
    let arg = format!("@{}", file.path().display());
    Ok((arg, Some(file)))
}

/// What a reader thread read of one pipe (and whether it had to cut it), if it finished.
type Captured = Option<(Vec<u8>, bool)>;

/// What the reader threads send on `rx` (stdout, stderr), waiting at most `wait` for both.
fn receive_streams(rx: &mpsc::Receiver<Stream>, wait: Duration) -> (Captured, Captured) {
    let mut stdout = None;
    let mut stderr = None;
    let until = Instant::now() + wait;
    while stdout.is_none() || stderr.is_none() {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Stream::Stdout(out)) => stdout = Some(out),
            Ok(Stream::Stderr(err)) => stderr = Some(err),
            Err(_) => break,
        }
    }
    (stdout, stderr)
}

enum Stream {
    Stdout((Vec<u8>, bool)),
    Stderr((Vec<u8>, bool)),
}

/// Read a pipe to its end, keeping at most `cap` bytes (the first ones, or the last ones with
/// `keep_tail`); the flag says whether anything was dropped. Reading goes on past the cap so
/// that the writer never blocks on a full pipe.
fn read_capped(mut pipe: impl Read, cap: u64, keep_tail: bool) -> (Vec<u8>, bool) {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut kept = Vec::new();
    let mut dropped = false;
    let mut buf = [0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if keep_tail {
                    kept.extend_from_slice(&buf[..n]);
                    if kept.len() > cap {
                        kept.drain(..kept.len() - cap);
                        dropped = true;
                    }
                } else {
                    let room = cap.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                    dropped |= n > room;
                }
            }
        }
    }
    (kept, dropped)
}

/// Whether a case sets confinement of its own: a confinement flag in its options, or a
/// `PARENT_TOOL_DISPATCH_*` confinement variable in its env.
fn case_confines(args: &DispatchArgs, env: &[(String, String)]) -> bool {
    use ptd_sys::confine::{OptionName, RawOptions};
    args.run.confine.raw() != RawOptions::default()
        || env
            .iter()
            .any(|(name, _)| OptionName::ALL.iter().any(|o| o.env_var() == name))
}

/// The child dispatcher's environment: this process's, with the case's variables on top.
fn child_env(case_env: &[(String, String)]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, _)| !case_env.iter().any(|(k, _)| OsStr::new(k) == name))
        .collect();
    env.extend(
        case_env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env
}

/// Wait for the child up to `bound`; past it, exec's ladder: SIGTERM (the dispatcher forwards
/// it to its adapter and still prints an envelope), then SIGKILL after the grace.
fn wait_bounded(
    child: &mut Watched,
    bound: Duration,
    kill_grace_ms: u64,
) -> Result<std::process::ExitStatus, String> {
    let grace = Duration::from_millis(kill_grace_ms) + Duration::from_secs(1);
    match child.wait_within(bound, grace) {
        Watch::Exited(status) => Ok(status),
        Watch::Stopped(_) => Err(format!(
            "the dispatcher did not finish within its own bound plus {} s and was stopped",
            WATCHDOG_MARGIN.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_parsed_like_the_main_job() {
        let ok = parse_options("{}", &["--tool-map".into(), "provider-safe".into()]);
        assert_eq!(
            ok.unwrap().unwrap().tool_map.as_deref(),
            Some("provider-safe")
        );
        let usage = parse_options("{}", &["--max-output-bytes".into(), "many".into()]);
        assert!(usage.unwrap().unwrap_err().contains("many"));
        // After the main job's options a subcommand is no subcommand: the main job refuses it.
        let sub = parse_options("{}", &["validate".into(), "bridge".into()]);
        assert!(sub.unwrap().is_err());
        assert!(parse_options("{}", &["request.json".into()]).is_err());
        assert!(parse_options("{}", &["--help".into()]).is_err());
    }

    #[test]
    fn the_argv_becomes_the_bridges_command() {
        let bridge: Map<String, Value> =
            serde_json::from_str(r#"{"dispatcher": {"mode": "host_command"}}"#).unwrap();
        let out = bridge_with_argv(&bridge, &["a".into(), "b".into()]).unwrap();
        assert_eq!(
            out["dispatcher"]["command"]["argv"],
            serde_json::json!(["a", "b"])
        );
        let none: Map<String, Value> = serde_json::from_str(r#"{"dispatcher": 1}"#).unwrap();
        assert!(bridge_with_argv(&none, &["a".into()]).is_err());
    }

    #[test]
    fn a_child_dispatcher_past_its_bound_is_stopped_and_reaped() {
        // One that obeys SIGTERM, and one that ignores it (SIGKILL after the grace).
        let env = [("PATH", "/usr/bin:/bin")];
        for script in ["exec sleep 30", "trap '' TERM; exec sleep 30"] {
            let argv = ["sh", "-c", script];
            let (mut child, _pipes) =
                Watched::spawn(Path::new("/bin/sh"), &argv, env, None).unwrap();
            let pid = child.id();
            let started = Instant::now();
            let err = wait_bounded(&mut child, Duration::from_millis(200), 100).unwrap_err();
            assert!(err.contains("was stopped"), "{err}");
            assert!(started.elapsed() < Duration::from_secs(10), "{script}");
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists(),
                "{script}: reaped"
            );
        }
        // One that ends in time is reaped with its status.
        let argv = ["sh", "-c", "exit 3"];
        let (mut child, _pipes) = Watched::spawn(Path::new("/bin/sh"), &argv, env, None).unwrap();
        let status = wait_bounded(&mut child, Duration::from_secs(20), 100).unwrap();
        assert_eq!(status.code(), Some(3));
    }

    #[test]
    fn capped_reads_keep_the_head_or_the_tail_and_say_so() {
        assert_eq!(
            read_capped(&b"abcdef"[..], 4, false),
            (b"abcd".to_vec(), true)
        );
        assert_eq!(
            read_capped(&b"abcdef"[..], 4, true),
            (b"cdef".to_vec(), true)
        );
        assert_eq!(read_capped(&b"ab"[..], 4, false), (b"ab".to_vec(), false));
    }
}
