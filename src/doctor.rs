//! `doctor` (SPEC §13): for each confinement mechanism, whether this host supports it, proved
//! by a live probe that must be refused (`ptd_sys::probe`), and the exit status that sums it
//! up.
//!
//! The report is one row per mechanism, in [`MECHANISMS`]' order: `ok` (the probe ran and the
//! kernel refused the forbidden thing), `unavailable` (the host cannot put it in place, or the
//! probe could not prove anything), or `FAILED` (it was put in place and the forbidden thing
//! got through, or the probe never answered). [`judge`] turns a probe into a row's finding and
//! [`exit_status`] the rows into the exit status — both pure, so the `FAILED` path is tested
//! without a broken kernel. Human text or `--json` goes to stdout (`stdout::print`); the
//! reason for a non-zero exit is one `error[…]` line per kind on stderr.
//!
//! Must not: start anything but the probes' own children (each bounded by
//! [`probe::PROBE_TIMEOUT`]), or leave anything behind (the probes clean up).

pub mod adapter;
pub mod attack;
pub mod egress;

use crate::cli::DoctorArgs;
use ptd_sys::confine::cgroup::{Controller, Host, Version};
use ptd_sys::confine::{landlock, namespaces, seccomp, Network, Options, Step};
use ptd_sys::probe::{self, Outcome, Probe};
use ptd_sys::signal::signal_name;
use ptd_wire::error::exit;
use ptd_wire::terminal::{error_line, escape};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// The `--json` report's schema id.
pub const SCHEMA: &str = "parent-tool-dispatch/doctor/v1";

/// The `error[…]` code of a mechanism that claims support but was not refused.
pub(crate) const NOT_ENFORCED: &str = "confinement_not_enforced";

/// Every mechanism, in the report's order.
pub const MECHANISMS: [&str; 10] = [
    "landlock_fs",
    "landlock_signal_scope",
    "landlock_abstract_unix_scope",
    "network",
    "seccomp",
    "no_new_privs",
    "memory",
    "pids",
    "open_files",
    "file_size",
];

/// What one row found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The probe ran under the mechanism and was refused (or killed by it).
    Held,
    /// The host cannot put it in place (`missing` as `error.details.missing` names it), or
    /// the probe's own set-up or control failed, so nothing was proven.
    Unavailable { missing: String, reason: String },
    /// Put in place, and the forbidden thing worked — or the probe never answered.
    Failed { reason: String },
}

impl Finding {
    fn state(&self) -> &'static str {
        match self {
            Finding::Held => "ok",
            Finding::Unavailable { .. } => "unavailable",
            Finding::Failed { .. } => "failed",
        }
    }
}

/// One mechanism's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub mechanism: &'static str,
    /// Whether the options asked for it.
    pub requested: bool,
    /// What the host has (`ABI 7`, `cgroup v1 at …`), when known.
    pub detail: Option<String>,
    /// The kernel's Landlock ABI (Landlock rows).
    pub abi: Option<u32>,
    /// `v1` or `v2` (cgroup rows, when the controller was found).
    pub hierarchy: Option<Version>,
    /// The probe, when it could be run.
    pub probe: Option<Probe>,
    pub finding: Finding,
}

/// The finding of a probe that ran: held, not refused, or unproven. `missing` names the
/// mechanism for `Unavailable`.
pub fn judge(probe: &Probe, missing: &str) -> Finding {
    match probe.outcome {
        Outcome::Refused { .. } | Outcome::Killed { .. } => Finding::Held,
        Outcome::NotRefused { attempt } => {
            let what = match probe.mechanism {
                "seccomp" => probe::SECCOMP_ATTEMPTS
                    .get(usize::from(attempt))
                    .map_or(probe.attempt, |a| a.name),
                _ => probe.attempt,
            };
            Finding::Failed {
                reason: format!("the probe was not refused: {what} worked"),
            }
        }
        Outcome::Lost => Finding::Failed {
            reason: format!(
                "the probe gave no answer within {} s: nothing shows the mechanism holds",
                probe::PROBE_TIMEOUT.as_secs()
            ),
        },
        Outcome::SetupFailed {
            step: Step::Control,
            errno,
        } => Finding::Unavailable {
            missing: missing.to_string(),
            reason: format!(
                "the probe's control (what the mechanism must still allow) failed: {}",
                errno_text(errno)
            ),
        },
        Outcome::SetupFailed { step, errno } => Finding::Unavailable {
            missing: missing.to_string(),
            reason: format!(
                "the kernel refused the {} step: {}",
                step.as_str(),
                errno_text(errno)
            ),
        },
    }
}

/// The exit status of a report (SPEC §13): 70 when any mechanism was put in place and not
/// refused (a false claim of support outweighs everything), else 69 when a requested one is
/// unavailable, else 0.
pub fn exit_status(rows: &[Row]) -> u8 {
    if rows
        .iter()
        .any(|r| matches!(r.finding, Finding::Failed { .. }))
    {
        exit::INTERNAL
    } else if rows
        .iter()
        .any(|r| r.requested && matches!(r.finding, Finding::Unavailable { .. }))
    {
        exit::UNAVAILABLE
    } else {
        exit::SUCCESS
    }
}

fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

/// Run `doctor`; returns the exit status.
pub fn run(args: &DoctorArgs) -> u8 {
    let options = match args.confine.options() {
        Ok(options) => options,
        Err(e) => {
            stderr_line!("error: {}", escape(&e.to_string()));
            return exit::USAGE;
        }
    };
    let rows = examine(&options);
    let status = exit_status(&rows);
    let text = if args.json {
        let mut line = render_json(&rows, status);
        line.push('\n');
        line
    } else {
        render_human(&rows)
    };
    for line in stderr_lines(&rows) {
        stderr_line!("{line}");
    }
    ptd_wire::stdout::print(text.as_bytes(), "the report", status)
}

/// Probe every mechanism on this host.
pub(crate) fn examine(options: &Options) -> Vec<Row> {
    let confined = options.is_requested();
    let abi = landlock::kernel_abi().ok();
    let host = Host::read();
    let mut rows = vec![
        landlock_fs(options, abi),
        scope_row("landlock_signal_scope", abi, probe::landlock_signal_scope()),
        scope_row(
            "landlock_abstract_unix_scope",
            abi,
            probe::landlock_abstract_unix_scope(),
        ),
        network_row(options.network.has_namespace()),
        seccomp_row(confined),
        ran(
            "no_new_privs",
            confined,
            None,
            probe::no_new_privs(),
            "no_new_privs",
        ),
        cgroup_row(
            &host,
            Controller::Memory,
            options.limit_memory_bytes.is_some(),
        ),
        cgroup_row(&host, Controller::Pids, options.limit_pids.is_some()),
        rlimit_row(
            "open_files",
            options.limit_open_files.is_some(),
            probe::open_files(),
            "rlimit_nofile",
        ),
        rlimit_row(
            "file_size",
            options.limit_file_size_bytes.is_some(),
            probe::file_size(),
            "rlimit_fsize",
        ),
    ];
    for r in rows
        .iter_mut()
        .filter(|r| r.mechanism.starts_with("landlock"))
    {
        r.abi = abi;
    }
    // Last: `exec` sweeps every child of this process once its adapter is gone.
    rows.extend(adapter::examine(options));
    rows.push(egress::examine(options));
    rows
}

fn row(mechanism: &'static str, requested: bool, detail: Option<String>, finding: Finding) -> Row {
    Row {
        mechanism,
        requested,
        detail,
        abi: None,
        hierarchy: None,
        probe: None,
        finding,
    }
}

/// A row whose probe ran.
fn ran(
    mechanism: &'static str,
    requested: bool,
    detail: Option<String>,
    probe: Probe,
    missing: &str,
) -> Row {
    let finding = judge(&probe, missing);
    Row {
        probe: Some(probe),
        ..row(mechanism, requested, detail, finding)
    }
}

fn unavailable(missing: impl Into<String>, reason: impl Into<String>) -> Finding {
    Finding::Unavailable {
        missing: missing.into(),
        reason: reason.into(),
    }
}

fn abi_detail(abi: Option<u32>) -> Option<String> {
    abi.map(|n| format!("ABI {n}"))
}

fn landlock_fs(options: &Options, abi: Option<u32>) -> Row {
    let requested = options.wants_landlock();
    let mut out = match probe::landlock_fs() {
        Ok(probe) => ran("landlock_fs", requested, abi_detail(abi), probe, "landlock"),
        Err(e) => row(
            "landlock_fs",
            requested,
            abi_detail(abi),
            unavailable(e.missing(), e.to_string()),
        ),
    };
    // The paths asked for must be usable in a ruleset too (opened, not only present).
    if requested && out.finding == Finding::Held {
        let tmp = std::env::temp_dir();
        let request = landlock::FsRequest {
            read: &options.fs_read,
            write: &options.fs_write,
            program: Path::new("/bin/sh"),
            path_var: None,
            transport_dir: None,
            tmpdir: &tmp,
            handle_fs: true,
        };
        if let Err(e) = landlock::prepare(&request) {
            out.finding = unavailable(e.missing(), e.to_string());
        }
    }
    out
}

fn scope_row(
    mechanism: &'static str,
    abi: Option<u32>,
    probe: Result<Option<Probe>, landlock::LandlockError>,
) -> Row {
    // Scopes are used wherever the kernel has them; no option asks for them alone.
    match probe {
        Ok(Some(probe)) => ran(mechanism, false, abi_detail(abi), probe, "landlock_scopes"),
        Ok(None) => row(
            mechanism,
            false,
            abi_detail(abi),
            unavailable(
                "landlock_scopes",
                "this kernel's Landlock ABI has no scopes (ABI 6 or later)",
            ),
        ),
        Err(e) => row(
            mechanism,
            false,
            abi_detail(abi),
            unavailable(e.missing(), e.to_string()),
        ),
    }
}

fn network_row(requested: bool) -> Row {
    let root = ptd_sys::confine::creds::has_cap_sys_admin();
    let prepared = namespaces::PreparedNamespaces {
        user: (!root).then(|| {
            namespaces::UserMaps::identity(
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            )
        }),
        network: true,
        proxy: None,
    };
    let detail = Some(
        if !root {
            "a new network namespace, through a user namespace"
        } else {
            "a new network namespace (CAP_SYS_ADMIN)"
        }
        .to_string(),
    );
    match probe::network(&prepared) {
        Ok(probe) => ran("network", requested, detail, probe, "network_namespace"),
        Err(e) => row(
            "network",
            requested,
            detail,
            unavailable(
                "network_namespace",
                format!("cannot listen on the loopback for the probe: {e}"),
            ),
        ),
    }
}

fn seccomp_row(requested: bool) -> Row {
    let detail = seccomp::compile(Network::Any)
        .ok()
        .map(|f| format!("EPERM filter, {} BPF instructions", f.len()));
    match probe::seccomp() {
        Ok(probe) => ran("seccomp", requested, detail, probe, "seccomp"),
        Err(e) => row(
            "seccomp",
            requested,
            detail,
            unavailable("seccomp", e.to_string()),
        ),
    }
}

fn cgroup_row(host: &Host, controller: Controller, requested: bool) -> Row {
    let mechanism = match controller {
        Controller::Memory => "memory",
        Controller::Pids => "pids",
    };
    let location = host.locate(controller);
    let hierarchy = location.as_ref().ok().map(|l| l.version);
    let detail = location.as_ref().ok().map(|l| {
        format!(
            "cgroup {} under {}",
            version_name(l.version),
            l.parent.display()
        )
    });
    let result = match controller {
        Controller::Memory => probe::memory(host),
        Controller::Pids => probe::pids(host),
    };
    let mut out = match result {
        Ok(probe) => ran(
            mechanism,
            requested,
            detail,
            probe,
            &format!("cgroup_{mechanism}"),
        ),
        Err(errors) => {
            let missing = errors
                .first()
                .map_or_else(|| format!("cgroup_{mechanism}"), |e| e.missing());
            let reason = errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            row(mechanism, requested, detail, unavailable(missing, reason))
        }
    };
    out.hierarchy = hierarchy;
    out
}

fn rlimit_row(
    mechanism: &'static str,
    requested: bool,
    probe: std::io::Result<Probe>,
    missing: &str,
) -> Row {
    let detail = Some("per process (setrlimit)".to_string());
    match probe {
        Ok(probe) => ran(mechanism, requested, detail, probe, missing),
        Err(e) => row(
            mechanism,
            requested,
            detail,
            unavailable(missing, format!("the probe could not be prepared: {e}")),
        ),
    }
}

fn version_name(v: Version) -> &'static str {
    match v {
        Version::V1 => "v1",
        Version::V2 => "v2",
    }
}

/// What the probe showed, in words.
fn probe_text(probe: &Probe) -> String {
    let result = match probe.outcome {
        Outcome::Refused { errno } => format!("refused ({})", errno_text(errno)),
        Outcome::Killed { signal } => format!("killed by {}", signal_name(signal)),
        Outcome::NotRefused { .. } => "NOT refused".to_string(),
        Outcome::SetupFailed { step, errno } => {
            format!(
                "set-up step {} failed ({})",
                step.as_str(),
                errno_text(errno)
            )
        }
        Outcome::Lost => "no answer".to_string(),
    };
    match probe.counter {
        Some(n) => format!("{}: {result}, counter {n}", probe.attempt),
        None => format!("{}: {result}", probe.attempt),
    }
}

/// The aligned table: a header, one line per mechanism, a summary line.
pub(crate) fn render_human(rows: &[Row]) -> String {
    let width = MECHANISMS
        .iter()
        .chain(adapter::ROWS.iter().map(|(name, _, _)| name))
        .chain([&egress::NAME])
        .map(|m| m.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:<11}  {:<5}  DETAIL",
        "MECHANISM", "STATE", "ASKED"
    );
    for r in rows {
        let state = match r.finding {
            Finding::Held => "ok",
            Finding::Unavailable { .. } => "unavailable",
            Finding::Failed { .. } => "FAILED",
        };
        let mut detail: Vec<String> = r.detail.iter().cloned().collect();
        if let Some(p) = &r.probe {
            detail.push(probe_text(p));
        }
        match &r.finding {
            Finding::Held => {}
            Finding::Unavailable { reason, .. } | Finding::Failed { reason } => {
                detail.push(reason.clone())
            }
        }
        let line = format!(
            "{:<width$}  {:<11}  {:<5}  {}",
            r.mechanism,
            state,
            if r.requested { "yes" } else { "-" },
            detail.join("; ")
        );
        let _ = writeln!(out, "{}", escape(&line));
    }
    let count = |state: &str| rows.iter().filter(|r| r.finding.state() == state).count();
    let _ = writeln!(
        out,
        "{} ok, {} unavailable, {} failed",
        count("ok"),
        count("unavailable"),
        count("failed")
    );
    out
}

#[derive(Serialize)]
struct JsonReport<'a> {
    schema: &'static str,
    exit_code: u8,
    mechanisms: Vec<JsonRow<'a>>,
}

#[derive(Serialize)]
struct JsonRow<'a> {
    mechanism: &'static str,
    requested: bool,
    state: &'static str,
    detail: Option<&'a str>,
    abi: Option<u32>,
    hierarchy: Option<&'static str>,
    missing: Option<&'a str>,
    reason: Option<&'a str>,
    probe: Option<JsonProbe>,
}

#[derive(Serialize)]
struct JsonProbe {
    attempt: &'static str,
    result: &'static str,
    errno: Option<i32>,
    error: Option<String>,
    signal: Option<String>,
    step: Option<&'static str>,
    counter: Option<u64>,
}

fn json_probe(p: &Probe) -> JsonProbe {
    let mut out = JsonProbe {
        attempt: p.attempt,
        result: "",
        errno: None,
        error: None,
        signal: None,
        step: None,
        counter: p.counter,
    };
    match p.outcome {
        Outcome::Refused { errno } => {
            out.result = "refused";
            out.errno = Some(errno);
            out.error = Some(errno_text(errno));
        }
        Outcome::Killed { signal } => {
            out.result = "killed";
            out.signal = Some(signal_name(signal));
        }
        Outcome::NotRefused { .. } => out.result = "not_refused",
        Outcome::SetupFailed { step, errno } => {
            out.result = "setup_failed";
            out.step = Some(step.as_str());
            out.errno = Some(errno);
            out.error = Some(errno_text(errno));
        }
        Outcome::Lost => out.result = "lost",
    }
    out
}

/// The `--json` report: one object, compact.
pub(crate) fn render_json(rows: &[Row], status: u8) -> String {
    let report = JsonReport {
        schema: SCHEMA,
        exit_code: status,
        mechanisms: rows
            .iter()
            .map(|r| {
                let (missing, reason) = match &r.finding {
                    Finding::Held => (None, None),
                    Finding::Unavailable { missing, reason } => {
                        (Some(missing.as_str()), Some(reason.as_str()))
                    }
                    Finding::Failed { reason } => (None, Some(reason.as_str())),
                };
                JsonRow {
                    mechanism: r.mechanism,
                    requested: r.requested,
                    state: r.finding.state(),
                    detail: r.detail.as_deref(),
                    abi: r.abi,
                    hierarchy: r.hierarchy.map(version_name),
                    missing,
                    reason,
                    probe: r.probe.as_ref().map(json_probe),
                }
            })
            .collect(),
    };
    serde_json::to_string(&report).unwrap_or_else(|_| "{}".into())
}

/// The stderr lines for a non-zero exit: one `error[confinement_not_enforced]` naming every
/// mechanism that was not refused, one `error[confinement_unavailable]` naming every requested
/// one that is missing.
pub(crate) fn stderr_lines(rows: &[Row]) -> Vec<String> {
    let mut lines = Vec::new();
    let failed: Vec<String> = rows
        .iter()
        .filter_map(|r| match &r.finding {
            Finding::Failed { reason } => Some(format!("{}: {reason}", r.mechanism)),
            _ => None,
        })
        .collect();
    if !failed.is_empty() {
        lines.push(error_line(NOT_ENFORCED, &failed.join("; ")));
    }
    let missing: Vec<String> = rows
        .iter()
        .filter(|r| r.requested)
        .filter_map(|r| match &r.finding {
            Finding::Unavailable { missing, reason } => {
                Some(format!("{} (missing {missing}): {reason}", r.mechanism))
            }
            _ => None,
        })
        .collect();
    if !missing.is_empty() {
        lines.push(error_line(
            ptd_wire::error::ErrorCode::ConfinementUnavailable.as_str(),
            &format!("requested but unavailable: {}", missing.join("; ")),
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(outcome: Outcome) -> Probe {
        Probe {
            mechanism: "seccomp",
            attempt: "filtered system calls",
            outcome,
            counter: None,
        }
    }

    fn with(requested: bool, finding: Finding) -> Row {
        row("seccomp", requested, None, finding)
    }

    #[test]
    fn a_probe_that_was_not_refused_fails_the_report_with_70() {
        let not_refused = probe(Outcome::NotRefused { attempt: 3 });
        let finding = judge(&not_refused, "seccomp");
        // The attempt that got through is named (SECCOMP_ATTEMPTS[3]).
        assert_eq!(
            finding,
            Finding::Failed {
                reason: format!(
                    "the probe was not refused: {} worked",
                    probe::SECCOMP_ATTEMPTS[3].name
                )
            }
        );
        let rows = vec![
            ran("seccomp", false, None, not_refused, "seccomp"),
            with(true, unavailable("cgroup_memory", "none")),
        ];
        // Not asked for, and a requested one is missing too: 70 wins.
        assert_eq!(exit_status(&rows), exit::INTERNAL);
        let lines = stderr_lines(&rows);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("error[confinement_not_enforced]: seccomp: "));
        assert!(lines[1].starts_with("error[confinement_unavailable]: "));
        let text = render_human(&rows);
        assert!(text.contains("FAILED"), "{text}");
        assert!(text.ends_with("0 ok, 1 unavailable, 1 failed\n"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&render_json(&rows, 70)).unwrap();
        assert_eq!(json["exit_code"], 70);
        assert_eq!(json["mechanisms"][0]["state"], "failed");
        assert_eq!(json["mechanisms"][0]["probe"]["result"], "not_refused");
    }

    #[test]
    fn a_lost_probe_is_a_failure_not_a_pass() {
        assert!(matches!(
            judge(&probe(Outcome::Lost), "seccomp"),
            Finding::Failed { .. }
        ));
    }

    #[test]
    fn held_refused_and_killed_pass_and_failed_steps_are_unavailable() {
        assert_eq!(
            judge(&probe(Outcome::Refused { errno: libc::EPERM }), "x"),
            Finding::Held
        );
        assert_eq!(
            judge(
                &probe(Outcome::Killed {
                    signal: libc::SIGKILL
                }),
                "x"
            ),
            Finding::Held
        );
        for step in [Step::Namespaces, Step::Control] {
            let finding = judge(
                &probe(Outcome::SetupFailed {
                    step,
                    errno: libc::EPERM,
                }),
                "network_namespace",
            );
            assert!(
                matches!(&finding, Finding::Unavailable { missing, .. } if missing == "network_namespace"),
                "{finding:?}"
            );
        }
    }

    #[test]
    fn only_a_requested_mechanism_that_is_missing_makes_69() {
        let missing = || unavailable("cgroup_memory", "no");
        assert_eq!(exit_status(&[with(false, missing())]), exit::SUCCESS);
        assert_eq!(exit_status(&[with(true, missing())]), exit::UNAVAILABLE);
        assert_eq!(
            exit_status(&[with(true, Finding::Held), with(false, missing())]),
            exit::SUCCESS
        );
        assert!(stderr_lines(&[with(false, missing())]).is_empty());
    }

    fn plan() -> adapter::Plan {
        use attack::Attack;
        vec![
            (Attack::SetuidRoot, String::new()),
            (Attack::Capabilities, String::new()),
            (Attack::Chmod, "/tmp/ptd-doctor-x/host.conf".into()),
            (Attack::Environ, "4242".into()),
            (Attack::Environ, "1".into()),
        ]
    }

    #[test]
    fn an_adapter_attack_that_got_through_fails_the_report_with_70() {
        let out = b"setuid_root=refused(1)\ncapabilities=refused(1)\nchmod=ok\n\
                    environ=refused(2)\nenviron=refused(2)\n";
        let rows = adapter::rows_from(
            &plan(),
            &adapter::Ran::Output(out.to_vec()),
            true,
            "as nobody (uid 65534)",
        );
        let names: Vec<&str> = rows.iter().map(|r| r.mechanism).collect();
        assert_eq!(
            names,
            [
                "adapter_not_root",
                "adapter_capabilities",
                "adapter_chmod",
                "adapter_proc_environ"
            ]
        );
        assert_eq!(rows[0].finding, Finding::Held);
        assert_eq!(rows[3].finding, Finding::Held);
        assert_eq!(
            rows[2].finding,
            Finding::Failed {
                reason: "the probe was not refused: chmod a root file outside the grants worked"
                    .into()
            }
        );
        assert_eq!(exit_status(&rows), exit::INTERNAL);
        let lines = stderr_lines(&rows);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("error[confinement_not_enforced]: adapter_chmod: "),
            "{lines:?}"
        );
        let text = render_human(&rows);
        assert!(text.contains("adapter_chmod"), "{text}");
        assert!(text.contains("FAILED"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&render_json(&rows, 70)).unwrap();
        assert_eq!(json["mechanisms"][2]["state"], "failed");
        assert_eq!(json["mechanisms"][2]["probe"]["result"], "not_refused");
    }

    #[test]
    fn one_target_that_worked_is_enough_and_a_missing_answer_is_lost() {
        use attack::Answer;
        // The init refused, the dispatcher's environ was read: not refused.
        assert_eq!(
            adapter::outcome(&[Answer::Refused(2), Answer::Worked]),
            Outcome::NotRefused { attempt: 0 }
        );
        // A target it could not try (its own pid) next to a refused one: refused.
        assert_eq!(
            adapter::outcome(&[Answer::NotTried(22), Answer::Refused(2)]),
            Outcome::Refused { errno: 2 }
        );
        assert!(matches!(
            adapter::outcome(&[Answer::NotTried(22)]),
            Outcome::SetupFailed {
                step: Step::Control,
                ..
            }
        ));
        assert_eq!(adapter::outcome(&[]), Outcome::Lost);
        // The probe died after two lines: the rest are lost, which fails the report.
        let out = b"setuid_root=refused(1)\ncapabilities=refused(1)\n";
        let rows = adapter::rows_from(&plan(), &adapter::Ran::Output(out.to_vec()), false, "x");
        assert!(matches!(rows[2].finding, Finding::Failed { .. }));
        assert!(matches!(rows[3].finding, Finding::Failed { .. }));
        assert_eq!(exit_status(&rows), exit::INTERNAL);
        // Only one of environ's two answers: lost too.
        let out = b"setuid_root=refused(1)\ncapabilities=refused(1)\nchmod=refused(1)\nenviron=refused(2)\n";
        let rows = adapter::rows_from(&plan(), &adapter::Ran::Output(out.to_vec()), false, "x");
        assert!(matches!(rows[3].finding, Finding::Failed { .. }));
    }

    #[test]
    fn a_refused_confinement_step_makes_the_adapter_rows_unavailable() {
        let rows = adapter::rows_from(
            &plan(),
            &adapter::Ran::Refused(Step::PidNamespace, libc::EPERM),
            true,
            "x",
        );
        assert_eq!(rows.len(), 4);
        for r in &rows {
            assert!(
                matches!(&r.finding, Finding::Unavailable { missing, .. } if missing == "pid_namespace"),
                "{r:?}"
            );
        }
        assert_eq!(exit_status(&rows), exit::UNAVAILABLE);
        let rows = adapter::rows_from(
            &plan(),
            &adapter::Ran::NotStarted("not executable".into()),
            false,
            "x",
        );
        assert_eq!(exit_status(&rows), exit::SUCCESS);
    }

    #[test]
    fn the_egress_row_fails_when_the_unlisted_port_or_a_direct_connect_worked() {
        use attack::{Answer, Attack};
        let lines = |refused: Answer, direct: Answer| {
            egress::Lines::Ran(vec![
                (Attack::EgressProxy, Answer::Worked),
                (Attack::EgressRefused, refused),
                (Attack::EgressDirect, direct),
            ])
        };
        let econnrefused = Answer::Refused(libc::ECONNREFUSED);
        assert_eq!(
            egress::judge_lines(&lines(Answer::Refused(403), econnrefused)),
            Ok(Outcome::Refused {
                errno: libc::ECONNREFUSED
            })
        );
        for (refused, direct) in [
            (Answer::Worked, econnrefused),
            (Answer::Refused(403), Answer::Worked),
        ] {
            let r = egress::row_from(true, "x".into(), lines(refused, direct));
            assert!(matches!(r.finding, Finding::Failed { .. }), "{r:?}");
            assert_eq!(exit_status(&[r]), exit::INTERNAL);
        }
        // The control failed, or the proxy answered something else: nothing proven.
        let r = egress::row_from(
            true,
            "x".into(),
            egress::Lines::Ran(vec![
                (Attack::EgressProxy, Answer::Refused(libc::ECONNREFUSED)),
                (Attack::EgressRefused, Answer::Refused(403)),
                (Attack::EgressDirect, econnrefused),
            ]),
        );
        assert!(
            matches!(&r.finding, Finding::Unavailable { missing, .. } if missing == "network_proxy"),
            "{r:?}"
        );
        assert_eq!(exit_status(&[r]), exit::UNAVAILABLE);
        let r = egress::row_from(false, "x".into(), lines(Answer::Refused(502), econnrefused));
        assert!(matches!(r.finding, Finding::Unavailable { .. }), "{r:?}");
        // An answer missing: lost, which fails.
        let r = egress::row_from(
            false,
            "x".into(),
            egress::Lines::Ran(vec![(Attack::EgressProxy, Answer::Worked)]),
        );
        assert!(matches!(r.finding, Finding::Failed { .. }), "{r:?}");
    }

    #[test]
    fn without_options_the_default_confinement_is_probed() {
        let options = adapter::probe_options(&Options::default());
        assert!(options.is_requested());
        let asked = Options {
            limit_open_files: Some(64),
            ..Options::default()
        };
        assert_eq!(adapter::probe_options(&asked), asked);
    }
}
