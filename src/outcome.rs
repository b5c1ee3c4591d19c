//! What happened → one result envelope (SPEC §4.5).
//!
//! Owns the mapping from a run (exit status, stop reason, the adapter's answer) to status,
//! error code and retryable, and the `Outcome` every path of the main job ends in. It never
//! starts processes and never touches the disk.

use crate::envelope::json;
use crate::envelope::request::Echo;
use crate::envelope::result::{self, Expect};
use crate::error::{exit_code_for, ErrorCode, Status};
use crate::exec::{Finished, Stop, Termination};
use crate::validate::Issue;
use serde_json::{json, Map, Value};

/// The envelope a run ends in, with what decides the exit status.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub envelope: Map<String, Value>,
    pub status: Status,
    /// The dispatcher's own code when the dispatcher produced the error (not the adapter).
    pub code: Option<ErrorCode>,
}

impl Outcome {
    /// A dispatcher-made failure with the code's own status.
    pub fn failure(echo: &Echo, code: ErrorCode, message: &str, details: Option<Value>) -> Outcome {
        Outcome::failure_as(echo, code.status(), code, message, details)
    }

    /// A dispatcher-made failure with an explicit status (the bridge's `failure_status`).
    pub fn failure_as(
        echo: &Echo,
        status: Status,
        code: ErrorCode,
        message: &str,
        details: Option<Value>,
    ) -> Outcome {
        Outcome {
            envelope: result::failure(echo, status, code, message, details),
            status,
            code: Some(code),
        }
    }

    /// The exit status of the main job for this outcome (SPEC §3.1).
    pub fn exit_code(&self) -> u8 {
        exit_code_for(self.status, self.code)
    }

    /// `diagnostics` of the envelope, created when absent or not an object.
    pub fn diagnostics_mut(&mut self) -> &mut Map<String, Value> {
        let slot = self
            .envelope
            .entry("diagnostics")
            .or_insert_with(|| json!({}));
        if !slot.is_object() {
            *slot = json!({});
        }
        slot.as_object_mut().expect("made an object above")
    }
}

/// Issues as the JSON array carried in `error.details.issues`.
pub fn issues_json(issues: &[Issue]) -> Value {
    serde_json::to_value(issues).unwrap_or_else(|_| json!([]))
}

/// Interpret a finished run. `answer` is where the result envelope came from: stdout for the
/// stdin transport, the result file for the file transport (`None`: the adapter wrote none).
pub fn interpret(
    finished: &Finished,
    answer: Option<&[u8]>,
    expect: Expect,
    timeout_ms: u64,
    max_bytes: usize,
) -> Outcome {
    let echo = expect.sent;
    match finished.stopped {
        Some(Stop::Timeout) => {
            return Outcome::failure(
                echo,
                ErrorCode::DispatchTimeout,
                &format!("the adapter did not finish within {timeout_ms} ms and was stopped"),
                None,
            )
        }
        Some(Stop::Interrupted(sig)) => {
            return Outcome::failure(
                echo,
                ErrorCode::Interrupted,
                &format!(
                    "the dispatcher received {} and stopped the adapter",
                    signal_name(sig)
                ),
                Some(json!({"signal": signal_name(sig)})),
            )
        }
        Some(Stop::OutputCap) => {
            return Outcome::failure(
                echo,
                ErrorCode::ResultTooLarge,
                &format!("the adapter wrote more than {max_bytes} bytes to stdout and was stopped"),
                Some(json!({"max_output_bytes": max_bytes})),
            )
        }
        None => {}
    }
    let exit_code = match finished.termination {
        Termination::Exited(code) => code,
        Termination::Signaled(sig) => {
            return Outcome::failure(
                echo,
                ErrorCode::AdapterSignaled,
                &format!("the adapter was killed by {}", signal_name(sig)),
                Some(json!({"signal": signal_name(sig)})),
            )
        }
        Termination::Unreaped | Termination::NotStarted => {
            return Outcome::failure(
                echo,
                ErrorCode::InternalError,
                "the adapter's exit could not be observed",
                None,
            )
        }
    };
    let checked = match answer {
        None => Err(vec![Issue::new(
            "missing",
            "",
            "the adapter wrote no result file",
        )]),
        Some(bytes) => json::parse_object(bytes, max_bytes)
            .map_err(|e| vec![Issue::from_json(&e)])
            .and_then(|map| result::check(map, Some(expect))),
    };
    match (exit_code, checked) {
        (0, Ok((envelope, status))) => adapter_envelope(envelope, status, expect),
        (_, Ok((envelope, status))) if status != Status::Succeeded => {
            adapter_envelope(envelope, status, expect)
        }
        (0, Err(issues)) => Outcome::failure(
            echo,
            ErrorCode::ResultInvalid,
            "the adapter's answer is not a valid result envelope",
            Some(json!({"issues": issues_json(&issues)})),
        ),
        (code, checked) => {
            let mut details = json!({"exit_code": code});
            if let Err(issues) = checked {
                details["issues"] = issues_json(&issues);
            }
            Outcome::failure(
                echo,
                ErrorCode::AdapterExitNonzero,
                &format!("the adapter exited with status {code} without a valid failure envelope"),
                Some(details),
            )
        }
    }
}

/// An adapter's valid envelope, with the canonical tool id put back (SPEC §4.4).
fn adapter_envelope(mut envelope: Map<String, Value>, status: Status, expect: Expect) -> Outcome {
    envelope.insert(
        "tool".into(),
        Value::String(expect.canonical_tool.to_string()),
    );
    Outcome {
        envelope,
        status,
        code: None,
    }
}

/// `SIGTERM` for 15, and so on; `signal N` for the rest.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}
