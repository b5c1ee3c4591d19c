//! `doctor`'s `adapter_*` rows (SPEC §13.2, "doctor proves the host's real configuration"):
//! one real confined process, started through `exec` with the confinement `doctor`'s options
//! build — the same path, user, capabilities, namespaces, Landlock ruleset and seccomp filter
//! as the main job's adapter — runs the dispatcher's own probe (`attack.rs`), which tries what
//! the first version let a root adapter do. Each attempt must be refused.
//!
//! [`examine`] sets the host's side up (a 0644 file in a 0755 folder outside every grant, a
//! 0777 pathname socket doctor listens on), runs the probe and turns its lines into rows;
//! [`rows_from`] is that last step alone, pure, so a probe that got through (`chmod=ok`) is
//! tested without a broken kernel. Without any option the default confinement is probed (as
//! the main job's with any one option: `--run-as` defaulted; for a root dispatcher, `nobody`).

use super::attack::{self, Answer, Attack};
use super::{row, unavailable, Row};
use ptd_sys::confine::creds::{self, RunAs};
use ptd_sys::confine::{Options, Step};
use ptd_sys::exec::{self, SpawnError, Spec, Unconfinable};
use ptd_sys::interrupt::Interrupts;
use ptd_sys::probe::{self, Outcome, Probe};
use std::path::PathBuf;
use std::time::Duration;

/// What `error.details.missing` names when the probe could not be started at all.
pub const MISSING: &str = "adapter_probe";

/// Each row: its name, the attack it runs, and what the attack tries, in the report's order.
pub const ROWS: [(&str, Attack, &str); 9] = [
    (
        "adapter_not_root",
        Attack::SetuidRoot,
        "become uid 0 (setuid)",
    ),
    (
        "adapter_capabilities",
        Attack::Capabilities,
        "hold a capability in any set, or raise one (capset)",
    ),
    (
        "adapter_chmod",
        Attack::Chmod,
        "chmod a root file outside the grants",
    ),
    (
        "adapter_mknod",
        Attack::Mknod,
        "make a character device node in its own TMPDIR",
    ),
    (
        "adapter_proc_environ",
        Attack::Environ,
        "read the dispatcher's and the init's /proc/PID/environ",
    ),
    (
        "adapter_proc_cmdline",
        Attack::Cmdline,
        "read the dispatcher's and the init's /proc/PID/cmdline",
    ),
    (
        "adapter_prlimit",
        Attack::Prlimit,
        "prlimit64 on the dispatcher and the init",
    ),
    (
        "adapter_cgroup_escape",
        Attack::CgroupEscape,
        "move itself into the parent of its cgroup",
    ),
    (
        "adapter_unix_socket",
        Attack::UnixConnect,
        "connect to a host pathname unix socket (0777)",
    ),
];

/// The options the probe runs under: `options` when they ask for confinement, else the
/// default confinement (the run-as user defaulted, nothing else).
pub(crate) fn probe_options(options: &Options) -> Options {
    if options.is_requested() {
        return options.clone();
    }
    let euid = rustix::process::geteuid().as_raw();
    let run_as = if euid == 0 {
        RunAs::default_user().unwrap_or(RunAs {
            uid: 65534,
            gid: 65534,
            spec: creds::DEFAULT_USER.into(),
        })
    } else {
        RunAs {
            uid: euid,
            gid: rustix::process::getegid().as_raw(),
            spec: euid.to_string(),
        }
    };
    Options {
        run_as: Some(run_as),
        ..options.clone()
    }
}

/// The host's side of the attacks; removed when dropped.
struct HostSide {
    _dir: tempfile::TempDir,
    file: PathBuf,
    socket: Option<(PathBuf, std::os::unix::net::UnixListener)>,
}

fn host_side(with_socket: bool) -> std::io::Result<HostSide> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix("ptd-doctor-").tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let file = dir.path().join("host.conf");
    std::fs::write(&file, "doctor: a host file outside the grants\n")?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
    let socket = if with_socket {
        let path = dir.path().join("host.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path)?;
        // File modes let anyone connect: only the confinement may refuse.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))?;
        Some((path, listener))
    } else {
        None
    };
    Ok(HostSide {
        _dir: dir,
        file,
        socket,
    })
}

/// How `doctor` runs its own binary as a probe inside a confinement (the attacks, the egress
/// row): a minimal `PATH`, `/` as its folder, the probes' timeout, a small stdout.
pub(crate) fn probe_spec(program: PathBuf, argv: Vec<String>) -> Spec {
    Spec {
        program,
        argv,
        env: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
        cwd: Some(PathBuf::from("/")),
        stdin: None,
        timeout: probe::PROBE_TIMEOUT,
        kill_grace: Duration::from_millis(100),
        max_stdout_bytes: 64 * 1024,
        confinement: None,
        stderr_tap: None,
        stdout_watch: None,
    }
}

/// When nothing could be run: the two rows every run has, `unavailable` with the reason.
fn all_unavailable(requested: bool, missing: &str, reason: &str) -> Vec<Row> {
    ROWS.iter()
        .filter(|(_, a, _)| matches!(a, Attack::SetuidRoot | Attack::Capabilities))
        .map(|(name, _, _)| row(name, requested, None, unavailable(missing, reason)))
        .collect()
}

/// The attacks planned: each with its argument (several for one attack are merged into its row).
pub type Plan = Vec<(Attack, String)>;

/// Run the probe under `options`' confinement; one row per attack that applies.
pub(crate) fn examine(options: &Options) -> Vec<Row> {
    let requested = options.is_requested();
    let options = probe_options(options);
    let host = match host_side(options.network.has_namespace()) {
        Ok(host) => host,
        Err(e) => {
            return all_unavailable(
                requested,
                MISSING,
                &format!("cannot make the host's side of the probe: {e}"),
            )
        }
    };
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(e) => {
            return all_unavailable(
                requested,
                MISSING,
                &format!("cannot find the dispatcher's own program: {e}"),
            )
        }
    };
    let mut spec = probe_spec(program, Vec::new());
    let prepared = match spec.confine(&options, None) {
        Ok(Some(prepared)) => prepared,
        Ok(None) => return all_unavailable(requested, MISSING, "no confinement was prepared"),
        Err(Unconfinable::Unavailable(u)) => {
            return all_unavailable(requested, &u.missing().join(","), &u.to_string())
        }
        Err(Unconfinable::Spawn(e)) => return all_unavailable(requested, MISSING, &e.to_string()),
    };
    let credentials = prepared.credentials;
    let mut plan: Plan = vec![
        (Attack::SetuidRoot, String::new()),
        (Attack::Capabilities, String::new()),
    ];
    // chmod needs no right Landlock has: only ownership and capabilities refuse it, so it
    // proves something only when the adapter is another user than the file's owner.
    if credentials.change_ids {
        plan.push((Attack::Chmod, host.file.display().to_string()));
    }
    if let Some(tmp) = prepared.tmpdir() {
        plan.push((Attack::Mknod, tmp.join("kmsg").display().to_string()));
    }
    let pids = [std::process::id().to_string(), "1".to_string()];
    for attack in [Attack::Environ, Attack::Cmdline, Attack::Prlimit] {
        plan.extend(pids.iter().map(|pid| (attack, pid.clone())));
    }
    if let Some(cgroup) = &prepared.cgroup {
        for dir in cgroup.dirs() {
            if let Some(parent) = dir.parent() {
                let procs = parent.join("cgroup.procs");
                plan.push((Attack::CgroupEscape, procs.display().to_string()));
            }
        }
    }
    if let Some((path, _)) = &host.socket {
        plan.push((Attack::UnixConnect, path.display().to_string()));
    }
    spec.argv = ["parent-tool-dispatch", attack::PROBE_WORD]
        .into_iter()
        .map(String::from)
        .chain(plan.iter().map(|(attack, arg)| {
            if arg.is_empty() {
                attack.word().to_string()
            } else {
                format!("{}:{arg}", attack.word())
            }
        }))
        .collect();
    let detail = format!(
        "as {} (uid {}){}",
        creds::user_name(credentials.uid),
        credentials.uid,
        if credentials.change_ids {
            ""
        } else {
            ", in a user namespace"
        }
    );
    let result = exec::run(spec, &Interrupts::none());
    drop(host);
    let stdout = match result {
        Ok(finished) => Ran::Output(finished.stdout),
        Err(SpawnError::Confinement(e)) => Ran::Refused(e.step, e.errno.raw_os_error()),
        Err(e) => Ran::NotStarted(e.to_string()),
    };
    rows_from(&plan, &stdout, requested, &detail)
}

/// How the probe's run went.
#[derive(Debug)]
pub enum Ran {
    /// It ran (and may have ended any way): its stdout.
    Output(Vec<u8>),
    /// The kernel refused a confinement step: nothing ran.
    Refused(Step, i32),
    /// It could not be started.
    NotStarted(String),
}

/// The outcome of one attack from its answers (one per argument): any that worked is not
/// refused; else any refused is refused; answers that could not try prove nothing; no answer
/// at all is lost.
pub fn outcome(answers: &[Answer]) -> Outcome {
    if answers.contains(&Answer::Worked) {
        return Outcome::NotRefused { attempt: 0 };
    }
    if let Some(errno) = answers.iter().find_map(|a| match a {
        Answer::Refused(errno) => Some(*errno),
        _ => None,
    }) {
        return Outcome::Refused { errno };
    }
    match answers.first() {
        Some(Answer::NotTried(errno)) => Outcome::SetupFailed {
            step: Step::Control,
            errno: *errno,
        },
        _ => Outcome::Lost,
    }
}

/// The rows of `plan` from the probe's run: one per attack planned, in [`ROWS`]' order.
pub(crate) fn rows_from(plan: &Plan, ran: &Ran, requested: bool, detail: &str) -> Vec<Row> {
    let lines: Vec<(Attack, Answer)> = match ran {
        Ran::Output(stdout) => String::from_utf8_lossy(stdout)
            .lines()
            .filter_map(attack::parse_line)
            .collect(),
        _ => Vec::new(),
    };
    let mut rows = Vec::new();
    for (name, attack, what) in ROWS {
        let planned = plan.iter().filter(|(a, _)| *a == attack).count();
        if planned == 0 {
            continue;
        }
        let answers: Vec<Answer> = lines
            .iter()
            .filter(|(a, _)| *a == attack)
            .map(|(_, answer)| *answer)
            .collect();
        let (probe_outcome, missing) = match ran {
            Ran::Output(_) if answers.len() == planned => (outcome(&answers), MISSING),
            // An answer missing: the probe died or was stopped before it.
            Ran::Output(_) => (Outcome::Lost, MISSING),
            Ran::Refused(step, errno) => (
                Outcome::SetupFailed {
                    step: *step,
                    errno: *errno,
                },
                step.missing(),
            ),
            Ran::NotStarted(reason) => {
                rows.push(row(
                    name,
                    requested,
                    Some(detail.to_string()),
                    unavailable(MISSING, format!("the probe could not be started: {reason}")),
                ));
                continue;
            }
        };
        let probe = Probe {
            mechanism: name,
            attempt: what,
            outcome: probe_outcome,
            counter: None,
        };
        rows.push(super::ran(
            name,
            requested,
            Some(detail.to_string()),
            probe,
            missing,
        ));
    }
    rows
}
