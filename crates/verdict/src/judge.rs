//! Judging an answer (SPEC §4.5): how the answering party ended and what it wrote → the
//! envelope to print, or the dispatcher's failure.
//!
//! One function, [`judge`], for every source of answers: a live adapter (its stdout, or its
//! result file), a recorded fixture (replay), an HTTP endpoint. Whoever produced the answer,
//! the same rules decide: strict reading, the envelope checks, the echo checks, and the
//! exit-status rules — an HTTP status plays the exit status (a 2xx is a clean exit, any other
//! status a failing one). It never starts processes, never touches the disk and never redacts.

use crate::DispatchError;
use ptd_sys::exec::Stop;
use ptd_wire::envelope::result::{Expect, ResultEnvelope};
use ptd_wire::error::Status;
use ptd_wire::validate::Issue;

/// How the answering party ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code.
    Exited(i32),
    /// A signal it did not ask for ended it.
    Signaled(ptd_sys::signal::Signal),
    /// The dispatcher stopped it.
    Stopped(Stop),
    /// Its end could not be observed (stuck in the kernel after SIGKILL).
    Unobserved,
    /// An HTTP endpoint answered with this status. A 2xx counts as a clean exit (callers may
    /// as well pass `Exited(0)`); anything else as a failing one, which only a valid failure
    /// envelope explains (SPEC §11).
    HttpStatus(u16),
}

/// Where the answer is.
#[derive(Debug, Clone, Copy)]
pub enum Body<'a> {
    /// The bytes that should hold one result envelope.
    Bytes(&'a [u8]),
    /// The same, with what a [`ptd_wire::json::Prescan`] read of them as they arrived (the
    /// adapter's stdout): the same verdict, with less left to do.
    Prescanned(&'a [u8], &'a ptd_wire::json::Prescan),
    /// The file transport's result file does not exist.
    Missing,
    /// The file transport's result path is not a regular file: what it is instead.
    NotRegular(&'static str),
    /// The result file exists but cannot be read: why.
    Unreadable(std::io::ErrorKind),
    /// The result file is larger than the cap.
    TooLarge,
}

/// An answer to judge.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub ending: Ending,
    pub body: Body<'a>,
}

/// The bounds the answer is judged against (for messages).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout_ms: u64,
    pub max_bytes: usize,
}

/// The envelope an answer stands for, or why it stands for none. The envelope carries the
/// canonical tool id whichever id the answer echoed (SPEC §4.4).
pub fn judge<'a>(
    answer: Answer<'a>,
    expect: Expect,
    limits: Limits,
) -> Result<ResultEnvelope<'a>, DispatchError> {
    let close = match answer.ending {
        Ending::Stopped(Stop::Timeout) => {
            return Err(DispatchError::Timeout {
                timeout_ms: limits.timeout_ms,
            })
        }
        Ending::Stopped(Stop::Interrupted(signal)) => {
            return Err(DispatchError::Interrupted {
                signal,
                adapter_started: true,
            })
        }
        Ending::Stopped(Stop::OutputCap) => {
            return Err(DispatchError::ResultTooLarge {
                max_bytes: limits.max_bytes,
                in_file: false,
            })
        }
        Ending::Signaled(signal) => return Err(DispatchError::AdapterSignaled { signal }),
        Ending::Unobserved => {
            return Err(DispatchError::Internal(
                "the adapter's exit could not be observed".into(),
            ))
        }
        Ending::Exited(code) => Close::Exited(code),
        Ending::HttpStatus(status) => Close::Http(status),
    };
    let clean = match close {
        Close::Exited(code) => code == 0,
        Close::Http(status) => (200..300).contains(&status),
    };
    let checked = match answer.body {
        Body::Bytes(bytes) => ResultEnvelope::read(bytes, limits.max_bytes, Some(expect)),
        Body::Prescanned(bytes, prescan) => {
            ResultEnvelope::read_prescanned(bytes, Some(prescan), limits.max_bytes, Some(expect))
        }
        Body::Missing => Err(vec![Issue::new(
            ptd_wire::validate::codes::MISSING,
            "",
            "the adapter wrote no result file",
        )]),
        // Whatever the exit status: what sits at the result path is no answer at all.
        Body::NotRegular(what) => {
            return Err(DispatchError::ResultFileUnusable(format!(
                "the result file is {what}, not a regular file"
            )))
        }
        Body::Unreadable(why) => {
            return Err(DispatchError::ResultFileUnusable(format!(
                "the adapter's result file could not be read: {why}"
            )))
        }
        Body::TooLarge => {
            return Err(DispatchError::ResultTooLarge {
                max_bytes: limits.max_bytes,
                in_file: true,
            })
        }
    };
    match (clean, checked) {
        (true, Ok(mut envelope)) => {
            envelope.echo.tool = expect.canonical_tool.to_string();
            Ok(envelope)
        }
        (_, Ok(mut envelope)) if envelope.status != Status::Succeeded => {
            envelope.echo.tool = expect.canonical_tool.to_string();
            Ok(envelope)
        }
        (true, Err(issues)) => Err(DispatchError::ResultInvalid { issues }),
        (false, checked) => Err(match close {
            Close::Http(status) => DispatchError::EndpointHttpStatus {
                status,
                issues: checked.err(),
            },
            Close::Exited(code) => DispatchError::AdapterExitNonzero {
                code,
                issues: checked.err(),
            },
        }),
    }
}

/// How an answering party that was not stopped closed its answer.
enum Close {
    Exited(i32),
    Http(u16),
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptd_wire::envelope::request::Echo;
    use ptd_wire::error::ErrorCode;

    const LIMITS: Limits = Limits {
        timeout_ms: 500,
        max_bytes: 1 << 20,
    };

    fn echo() -> Echo {
        Echo {
            request_id: "r1".into(),
            tool: "ext_tool".into(),
            operation: "call".into(),
        }
    }

    fn envelope(status: &str, tool: &str) -> String {
        let error = if status == "succeeded" {
            String::new()
        } else {
            r#","error":{"code":"own_code","message":"m","retryable":false}"#.into()
        };
        format!(
            r#"{{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"r1","tool":"{tool}","operation":"call","status":"{status}"{error}}}"#
        )
    }

    fn run(ending: Ending, body: Body) -> Result<(Status, String), ErrorCode> {
        let sent = echo();
        let expect = Expect {
            sent: &sent,
            canonical_tool: "canon.tool",
        };
        judge(Answer { ending, body }, expect, LIMITS)
            .map(|e| (e.status, e.echo.tool.clone()))
            .map_err(|e| e.code())
    }

    #[test]
    fn exit_status_and_envelope_decide_together() {
        let ok = envelope("succeeded", "ext_tool");
        let denied = envelope("denied", "canon.tool");
        assert_eq!(
            run(Ending::Exited(0), Body::Bytes(ok.as_bytes())),
            Ok((Status::Succeeded, "canon.tool".into()))
        );
        assert_eq!(
            run(Ending::Exited(3), Body::Bytes(denied.as_bytes())),
            Ok((Status::Denied, "canon.tool".into()))
        );
        assert_eq!(
            run(Ending::Exited(3), Body::Bytes(ok.as_bytes())),
            Err(ErrorCode::AdapterExitNonzero)
        );
        assert_eq!(
            run(Ending::Exited(0), Body::Bytes(b"noise {}")),
            Err(ErrorCode::ResultInvalid)
        );
        assert_eq!(
            run(Ending::Exited(1), Body::Bytes(b"")),
            Err(ErrorCode::AdapterExitNonzero)
        );
    }

    #[test]
    fn endings_the_dispatcher_caused_win_over_any_answer() {
        let ok = envelope("succeeded", "ext_tool");
        let cases = [
            (Ending::Stopped(Stop::Timeout), ErrorCode::DispatchTimeout),
            (Ending::Stopped(Stop::OutputCap), ErrorCode::ResultTooLarge),
            (
                Ending::Stopped(Stop::Interrupted(ptd_sys::signal::Signal::TERM)),
                ErrorCode::Interrupted,
            ),
            (
                Ending::Signaled(ptd_sys::signal::Signal::KILL),
                ErrorCode::AdapterSignaled,
            ),
            (Ending::Unobserved, ErrorCode::InternalError),
        ];
        for (ending, code) in cases {
            assert_eq!(run(ending, Body::Bytes(ok.as_bytes())), Err(code));
        }
    }

    #[test]
    fn an_http_status_decides_like_an_exit_status() {
        let ok = envelope("succeeded", "ext_tool");
        let denied = envelope("denied", "canon.tool");
        // A 2xx is a clean exit, however it is passed.
        for ending in [
            Ending::Exited(0),
            Ending::HttpStatus(200),
            Ending::HttpStatus(201),
        ] {
            assert_eq!(
                run(ending, Body::Bytes(ok.as_bytes())),
                Ok((Status::Succeeded, "canon.tool".into()))
            );
            assert_eq!(
                run(ending, Body::Bytes(b"<html>")),
                Err(ErrorCode::ResultInvalid)
            );
        }
        // A failing status with a valid failure envelope: the endpoint explained itself.
        assert_eq!(
            run(Ending::HttpStatus(403), Body::Bytes(denied.as_bytes())),
            Ok((Status::Denied, "canon.tool".into()))
        );
        // Anything else under a failing status is the status itself.
        for (status, body) in [
            (503, b"".as_slice()),
            (404, b"<html>not found</html>".as_slice()),
            (500, ok.as_bytes()),
            (302, b"".as_slice()),
        ] {
            assert_eq!(
                run(Ending::HttpStatus(status), Body::Bytes(body)),
                Err(ErrorCode::EndpointHttpStatus),
                "{status}"
            );
        }
    }

    #[test]
    fn result_files_that_are_not_answers() {
        assert_eq!(
            run(Ending::Exited(0), Body::Missing),
            Err(ErrorCode::ResultInvalid)
        );
        assert_eq!(
            run(Ending::Exited(0), Body::NotRegular("a FIFO")),
            Err(ErrorCode::ResultInvalid)
        );
        assert_eq!(
            run(Ending::Exited(0), Body::TooLarge),
            Err(ErrorCode::ResultTooLarge)
        );
    }
}
