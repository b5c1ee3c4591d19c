//! `approval_notify` (SPEC §18): the host command told of each new approval, so that a host
//! can page a person or post to a chat. It gets the approval as one JSON line on its stdin
//! ([`notice`]: ids, tool, session, expiry and the request's input as the ledger keeps it —
//! redacted, never a secret value), runs confined like an adapter under a policy (the
//! no-privilege baseline, the base file system; network `any`, so that it can reach a chat
//! or paging service), with only the base environment, and for at most [`NOTIFY_TIMEOUT`].
//! Whatever it does — fail, hang, write too much — is a warning on stderr: the call's answer
//! is `approval_required` all the same, and the approval stands.
//!
//! It runs only in a main job that started no adapter (the call was not approved yet), so it
//! is the one run of the process (ARCHITECTURE.md, "One adapter run per process").

use crate::plan::{self, EnvNames};
use ptd_sys::confine::Options;
use ptd_sys::exec::{self, Spec, Termination};
use ptd_sys::hostenv::HostEnv;
use ptd_sys::interrupt::Interrupts;
use ptd_wire::redact::Redactor;
use std::time::Duration;

/// The longest a notifier may take; then it is stopped (and that is a warning).
pub(crate) const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// The grace between SIGTERM and SIGKILL for a notifier that overstays.
const NOTIFY_GRACE: Duration = Duration::from_millis(500);

/// The most of a notifier's stdout read (it is not used).
const NOTIFY_STDOUT_BYTES: u64 = 64 * 1024;

/// The JSON line a notifier reads: `schema`, the new approval's `approval_id` and
/// `expires_at`, `tool`, `operation`, `session_id`, `request_id`, the deciding `entry`, and
/// `input` (the request's input as text, redacted and bounded as the ledger keeps it).
pub(crate) fn notice(
    ask: &ptd_ledger::Ask,
    approval_id: &str,
    expires_ms: u64,
    tool: &str,
) -> Vec<u8> {
    let value = serde_json::json!({
        "schema": "parent-tool-dispatch/approval-notice/v1",
        "approval_id": approval_id,
        "tool": tool,
        "operation": ask.operation,
        "session_id": ask.session_shown,
        "request_id": ask.request_shown,
        "expires_at": ptd_ledger::flags::format_rfc3339_ms(expires_ms),
        "entry": ask.entry,
        "input": ask.input_shown,
    });
    let mut line = value.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Run the notifier `argv` with `notice` on its stdin; `None` when it ran and exited 0, else
/// the warning line (its stderr's tail redacted with `redactor`).
pub(crate) fn notify(
    argv: &[String],
    notice: Vec<u8>,
    host: &HostEnv,
    redactor: &Redactor,
    interrupts: &Interrupts,
) -> Option<String> {
    let warn = |what: String| {
        Some(format!(
            "warning[approval_notify]: the approval notifier {}: {}",
            ptd_wire::terminal::escape(&argv[0]),
            ptd_wire::terminal::escape(&redactor.redact_str(&what))
        ))
    };
    let (program, _) = plan::locate(&argv[0], host);
    let none: [String; 0] = [];
    let names = EnvNames {
        pass_env: &none,
        secret_env: &none,
    };
    let mut spec = Spec {
        program,
        argv: argv.to_vec(),
        env: plan::adapter_env(&[], names, host, []),
        cwd: None,
        stdin: Some(notice),
        timeout: NOTIFY_TIMEOUT,
        kill_grace: NOTIFY_GRACE,
        max_stdout_bytes: NOTIFY_STDOUT_BYTES,
        confinement: None,
        stderr_tap: None,
        stdout_watch: None,
    };
    let baseline = Options {
        baseline: true,
        ..Options::default()
    };
    if let Err(refused) = spec.confine(&baseline, None) {
        return warn(match refused {
            exec::Unconfinable::Spawn(error) => format!("could not be started: {error}"),
            exec::Unconfinable::Unavailable(unavailable) => format!(
                "could not be confined: {}",
                unavailable
                    .missing
                    .iter()
                    .map(|(_, why)| why.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        });
    }
    let finished = match exec::run(spec, interrupts) {
        Ok(finished) => finished,
        Err(error) => return warn(format!("could not be started: {error}")),
    };
    let tail = String::from_utf8_lossy(&finished.stderr_tail);
    let tail = tail.trim_end();
    let said = if tail.is_empty() {
        String::new()
    } else {
        format!("; its stderr ends: {}", last_line(tail))
    };
    match (finished.stopped, finished.termination) {
        (Some(_), _) => warn(format!(
            "was stopped after {} ms{said}",
            NOTIFY_TIMEOUT.as_millis()
        )),
        (None, Termination::Exited(0)) => None,
        (None, Termination::Exited(code)) => warn(format!("exited with status {code}{said}")),
        (None, Termination::Signaled(signal)) => warn(format!(
            "was killed by {}{said}",
            ptd_sys::signal::signal_name(signal)
        )),
        (None, Termination::Unreaped | Termination::NotStarted) => {
            warn(format!("ended without an exit status{said}"))
        }
    }
}

/// The last line of `text`, at most 200 bytes of it.
fn last_line(text: &str) -> &str {
    ptd_wire::terminal::cut_at_char_boundary(text.lines().last().unwrap_or_default(), 200)
}
