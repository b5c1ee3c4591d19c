//! Planning one adapter run (SPEC §4.2): the program and argv, the rebuilt environment, the
//! working directory, and the transport (stdin, or private files).
//!
//! Owns what is decided before a process starts. It reads the host environment and creates
//! the file transport's private folder; it never starts a process (that is `exec`'s job) and
//! never looks at an answer (that is `judge`'s).

use crate::cli::RunArgs;
use crate::settings::CallSettings;
use ptd_sys::exec::Spec;
use ptd_sys::fs;
use ptd_sys::hostenv::HostEnv;
use ptd_verdict::DispatchError;
use ptd_wire::envelope::bridge::{CommandSpec, Transport};
use ptd_wire::envelope::request::{self, Echo};
use ptd_wire::envelope::result;
use ptd_wire::redact::{is_sensitive_key, Redactor};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Variables copied from the host into the adapter's otherwise empty environment.
pub(crate) const BASE_ENV: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];

pub use ptd_wire::envelope::vars;

/// Everything needed to start the adapter, and what the run leaves to clean up.
pub struct Plan {
    pub spec: Spec,
    /// The private folder of the file transport, when the bridge asks for it.
    pub files: Option<FileTransport>,
    /// Host paths this plan revealed (the working directory, the program's location): they
    /// are redacted from everything that leaves.
    pub host_paths: Vec<PathBuf>,
}

/// What a run is planned from: the bridge's command, what the call's settings change of it
/// (the adapter, its working directory, its variables: SPEC §16), the run options.
pub struct Planned<'a> {
    /// The call's deadline (the bridge's, or less when the policy or the ledger cut it): the
    /// run's bound and the adapter's `WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS`.
    pub timeout_ms: u64,
    /// The bridge's `dispatcher.command`.
    pub command: &'a CommandSpec,
    pub settings: &'a CallSettings,
    /// `--max-output-bytes`, `--kill-grace-ms`.
    pub run: &'a RunArgs,
}

impl Planned<'_> {
    /// The adapter's argv: the policy entry's, else the bridge's.
    pub fn argv(&self) -> &[String] {
        self.settings
            .adapter
            .as_deref()
            .unwrap_or(&self.command.argv)
    }

    /// The adapter's environment before the file transport's variables: the base, the
    /// bridge's `command.env`, the call's variables by name, then the metadata of `sent`.
    pub fn env(&self, sent: &Echo, host: &HostEnv) -> Vec<(String, String)> {
        let metadata = [
            (vars::REQUEST_ID, sent.request_id.clone()),
            (vars::TOOL, sent.tool.clone()),
            (vars::OPERATION, sent.operation.clone()),
            (vars::TIMEOUT_MS, self.timeout_ms.to_string()),
            (vars::REQUEST_SCHEMA, request::SCHEMA.to_string()),
            (vars::RESULT_SCHEMA, result::SCHEMA.to_string()),
        ];
        let names = EnvNames {
            pass_env: &self.settings.pass_env,
            secret_env: &self.settings.secret_env,
        };
        adapter_env(&self.command.env, names, host, metadata)
    }

    /// The working directory: the policy entry's `cwd`, else the directory the bridge's
    /// `cwd_env` names, else the dispatcher's own (`None`).
    pub fn cwd(&self, host: &HostEnv) -> Result<Option<PathBuf>, DispatchError> {
        let (var, found) = match (&self.settings.cwd, &self.command.cwd_env) {
            (Some(dir), _) => (None, Some(dir.clone())),
            (None, Some(name)) => (Some(name), host.var_os(name).map(PathBuf::from)),
            (None, None) => return Ok(None),
        };
        match found {
            Some(dir) if dir.is_dir() => Ok(Some(dir)),
            value => Err(DispatchError::CwdUnavailable {
                var: var.cloned(),
                value,
            }),
        }
    }
}

/// Plan the run of `planned` for a validated request. `sent` is the request as the adapter
/// will see it (tool id mapped), `request_bytes` the bytes it receives.
pub fn plan(
    planned: &Planned<'_>,
    sent: &Echo,
    request_bytes: Vec<u8>,
    host: &HostEnv,
) -> Result<Plan, DispatchError> {
    let Planned {
        timeout_ms,
        command,
        run,
        ..
    } = *planned;
    let mut host_paths = Vec::new();
    let cwd = planned.cwd(host)?;
    host_paths.extend(cwd.clone());
    let mut env = planned.env(sent, host);
    let argv = planned.argv();
    let (program, found) = locate(&argv[0], host);
    host_paths.extend(found);
    let files = match command.transport {
        Transport::Stdin => None,
        Transport::File => {
            let files = FileTransport::create(&request_bytes).map_err(DispatchError::Setup)?;
            env.push((
                vars::REQUEST_FILE.into(),
                files.request_path().to_string_lossy().into(),
            ));
            env.push((
                vars::RESULT_FILE.into(),
                files.result_path().to_string_lossy().into(),
            ));
            Some(files)
        }
    };
    let spec = Spec {
        program,
        argv: argv.to_vec(),
        env,
        cwd,
        stdin: files.is_none().then_some(request_bytes),
        timeout: Duration::from_millis(timeout_ms),
        kill_grace: Duration::from_millis(run.kill_grace_ms),
        max_stdout_bytes: run.max_output_bytes,
        confinement: None,
        stderr_tap: None,
        stdout_watch: None,
    };
    Ok(Plan {
        spec,
        files,
        host_paths,
    })
}

/// The host variables an adapter gets by name: `--pass-env` / `--secret-env`, or the policy
/// entry's `pass_env` / `secret_env`.
#[derive(Debug, Clone, Copy)]
pub struct EnvNames<'a> {
    pub pass_env: &'a [String],
    pub secret_env: &'a [String],
}

impl<'a> EnvNames<'a> {
    /// The command line's.
    pub fn of(run: &'a RunArgs) -> EnvNames<'a> {
        EnvNames {
            pass_env: &run.pass_env,
            secret_env: &run.secret_env,
        }
    }
}

/// An adapter's environment, rebuilt from nothing (SPEC §4.2): the base variables, `command_env`
/// (the bridge's `command.env`), `--pass-env` / `--secret-env`, then the metadata variables
/// (which win). The main job and `delegation run` both build theirs here.
pub fn adapter_env<'m>(
    command_env: &[(String, String)],
    names: EnvNames<'_>,
    host: &HostEnv,
    metadata: impl IntoIterator<Item = (&'m str, String)>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: String| {
        env.retain(|(k, _)| k != name);
        env.push((name.to_string(), value));
    };
    for name in BASE_ENV {
        if let Some(value) = host.var(name) {
            set(name, value);
        }
    }
    for (name, value) in command_env {
        set(name, value.clone());
    }
    for name in names.pass_env.iter().chain(names.secret_env) {
        if let Some(value) = host.var(name) {
            set(name, value);
        }
    }
    for (name, value) in metadata {
        set(name, value);
    }
    env
}

/// The dispatcher's span passed on to the adapter (SPEC §20), with telemetry on only: its
/// `TRACEPARENT`, and `TRACESTATE` when the host's parent had a valid one. Set last, over
/// whatever `--pass-env` or `command.env` gave the adapter under those names, and a stale
/// `TRACESTATE` is removed. With telemetry off the adapter gets neither (unless passed by
/// name): the dispatcher is then no part of the trace.
pub(crate) fn pass_trace_context(
    env: &mut Vec<(String, String)>,
    traceparent: String,
    tracestate: Option<&str>,
) {
    env.retain(|(k, _)| k != "TRACEPARENT" && k != "TRACESTATE");
    env.push(("TRACEPARENT".to_string(), traceparent));
    if let Some(state) = tracestate {
        env.push(("TRACESTATE".to_string(), state.to_string()));
    }
}

/// The redactor as the command line and the host set it up, before anything is read (SPEC §5):
/// the `--secret-env` values and the sensitive `--pass-env` ones as secrets; the working
/// directory, `HOME`, `TMPDIR` and the temp dir as host paths. The main job and `delegation
/// run` both start from it.
pub(crate) fn host_redactor(run: &RunArgs, host: &HostEnv) -> Redactor {
    let mut redactor = Redactor::new();
    // The keys of our own envelopes are structure: no secret value may rename them.
    redactor.keep_keys(ptd_wire::envelope::OWN_KEYS.iter().copied());
    let secret_names = run
        .secret_env
        .iter()
        .chain(run.pass_env.iter().filter(|name| is_sensitive_key(name)));
    for name in secret_names {
        if let Some(value) = host.var(name) {
            redactor.add_secret(&value);
        }
    }
    if let Ok(cwd) = std::env::current_dir() {
        redactor.add_host_path(&cwd.to_string_lossy());
    }
    for name in ["HOME", "TMPDIR"] {
        if let Some(value) = host.var(name) {
            redactor.add_host_path(&value);
        }
    }
    redactor.add_host_path(&std::env::temp_dir().to_string_lossy());
    redactor
}

/// The program to start for `argv0` (see [`resolve_program`]) and, when the kernel will find
/// it, where (a host path to redact).
pub fn locate(argv0: &str, host: &HostEnv) -> (PathBuf, Option<PathBuf>) {
    let program = resolve_program(argv0);
    let found = find_in_path(&program, host);
    (program, found)
}

pub use ptd_sys::exec::{absolute, resolve_program};

/// Where the kernel will find `program` (for redacting its path, not for running it): the path
/// itself when it has a slash, else the first executable match in `PATH`.
fn find_in_path(program: &Path, host: &HostEnv) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.is_absolute() {
        return Some(program.to_path_buf());
    }
    let path = host.var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// What the adapter left under the result file's name.
#[derive(Debug)]
pub(crate) enum ResultFile {
    /// No file: the adapter wrote no result.
    Missing,
    /// Something else than a regular file (a FIFO, a symlink, a directory, a socket, …).
    NotRegular(fs::FileType),
    /// A regular file over the cap.
    TooLarge,
    /// A regular file the dispatcher cannot read (its mode, an I/O error).
    Unreadable(std::io::ErrorKind),
    /// The result's bytes, at most the cap.
    Read(Vec<u8>),
}

/// The file transport (SPEC §4.2; docs/guide.md, "How the adapter is run"): a private folder in the
/// temp dir, 0700 whatever the umask, holding `request.json` (the request, 0600) and the path
/// where the adapter writes `result.json`.
///
/// The adapter runs as the same user, so once it ran nothing in the folder is trusted: the
/// result is read only if it is a regular file, without following a link, without blocking on
/// a FIFO, at most cap + 1 bytes, and whatever its mode. [`FileTransport::cleanup`] removes the
/// folder within a budget and runs after the envelope is printed; dropping a transport does the
/// same bounded work, silently.
#[derive(Debug)]
pub struct FileTransport {
    dir: fs::PrivateDir,
}

impl FileTransport {
    const REQUEST: &'static str = "request.json";
    const RESULT: &'static str = "result.json";

    fn create(request_bytes: &[u8]) -> std::io::Result<FileTransport> {
        let dir = fs::PrivateDir::create_in(&std::env::temp_dir(), "parent-tool-dispatch-")?;
        dir.write_file(&fs::cstring(Self::REQUEST.as_bytes())?, request_bytes)?;
        Ok(FileTransport { dir })
    }

    /// The folder's host path (for a warning; the adapter gets the two file paths).
    pub fn folder(&self) -> &Path {
        self.dir.path()
    }

    fn request_path(&self) -> PathBuf {
        self.dir.path().join(Self::REQUEST)
    }

    fn result_path(&self) -> PathBuf {
        self.dir.path().join(Self::RESULT)
    }

    /// The result file, judged and read (at most `max_bytes + 1` bytes).
    pub(crate) fn read_result(&self, max_bytes: usize) -> ResultFile {
        let read = fs::cstring(Self::RESULT.as_bytes())
            .and_then(|name| self.dir.read_regular(&name, max_bytes));
        match read {
            Ok(fs::ReadRegular::Missing) => ResultFile::Missing,
            Ok(fs::ReadRegular::NotRegular(kind)) => ResultFile::NotRegular(kind),
            Ok(fs::ReadRegular::TooLarge) => ResultFile::TooLarge,
            Ok(fs::ReadRegular::Bytes(bytes)) => ResultFile::Read(bytes),
            Err(err) => ResultFile::Unreadable(err.kind()),
        }
    }

    /// Remove the folder and whatever the adapter left in it within `budget`; what is left when
    /// it runs out stays, and the error says why (without the folder's path).
    pub fn cleanup(self, budget: fs::Budget) -> Result<(), fs::CleanupError> {
        self.dir.remove(budget)
    }
}
