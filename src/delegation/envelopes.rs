//! The `wp-codebox/host-delegation-result/v1` envelope `delegation run` prints, and the
//! `wp-codebox/host-delegation-event/v1` records in it.
//!
//! Invariants: [`Envelope::render`] is the only way an envelope becomes text, and it always
//! redacts — the full rules on everything the dispatcher or the request wrote, only exact
//! secrets on the adapter's `result` (product payload, like a parent-tool `output`); an
//! envelope whose status is not a success never carries `result`, and always carries `error`
//! when the dispatcher decided the failure. It builds no tree of the payload and does no I/O.

use super::codes::{Code, DelegationStatus, Event};
use super::{EVENT_SCHEMA, RESULT_SCHEMA};
use ptd_wire::envelope::result::redact_raw;
use ptd_wire::json::raw::ObjectWriter;
use ptd_wire::redact::Redactor;
use ptd_wire::redact::Scope;
use ptd_wire::transcript::timestamp;
use serde::Serialize;
use serde_json::Value;
use std::time::SystemTime;

/// The `error` of a failure the dispatcher decided.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    pub code: &'static str,
    /// One sentence; never a host path (the renderer redacts anyway).
    pub message: String,
    pub retryable: bool,
    /// What the failure is about: `issues`, `exit_code`, `stderr_tail`, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorBody {
    /// The error for `code`, retryable as the code table says.
    pub fn new(code: Code, message: impl Into<String>, data: Option<Value>) -> ErrorBody {
        ErrorBody {
            code: code.as_str(),
            message: message.into(),
            retryable: code.retryable(),
            data,
        }
    }
}

/// Whose `error` an envelope carries.
#[derive(Debug, Clone)]
pub enum ErrorPart<'a> {
    /// The dispatcher's own.
    Own(ErrorBody),
    /// The adapter's, as it wrote it (an object).
    Answer(&'a str),
}

/// One lifecycle event.
#[derive(Debug, Clone)]
pub(crate) struct EventRecord {
    pub event: Event,
    pub time: SystemTime,
    pub status: Option<DelegationStatus>,
    /// The adapter's `provider`, once its answer named one.
    pub provider: Option<String>,
}

/// A result envelope, before rendering.
#[derive(Debug, Clone)]
pub(crate) struct Envelope<'a> {
    pub status: DelegationStatus,
    pub request_id: &'a str,
    /// The request as validated and sent (compact JSON), or `None` when it was no JSON object.
    pub request: Option<&'a str>,
    pub provider: Option<&'a str>,
    /// The adapter's `result` (an object or `null`), rendered only for a success.
    pub result: Option<&'a str>,
    /// Rendered only for a failure.
    pub error: Option<ErrorPart<'a>>,
    pub events: Vec<EventRecord>,
    pub started_at: SystemTime,
    pub ended_at: SystemTime,
    pub duration_ms: u64,
    /// What the adapter's tree used, when it ran: `diagnostics.dispatch.resources`, as in the
    /// main job's result (SPEC §13).
    pub resources: Option<ptd_wire::envelope::result::Resources>,
}

impl Envelope<'_> {
    /// The envelope as one line of compact JSON, redacted.
    pub(crate) fn render(&self, redactor: &Redactor) -> String {
        let success = self.status.is_success();
        let full = |raw: &str, out: &mut String| {
            redact_raw(
                redactor,
                raw,
                Scope::Full {
                    envelope_root: false,
                },
                out,
            )
        };
        let mut out = String::with_capacity(
            512 + self.request.map_or(0, str::len) + self.result.map_or(0, str::len),
        );
        let mut w = ObjectWriter::new(&mut out);
        w.with("success", |o| {
            o.push_str(if success { "true" } else { "false" })
        })
        .str("schema", RESULT_SCHEMA)
        .str("execution", "host-delegation")
        .str("status", self.status.as_str())
        .str("request_id", &redactor.redact_str(self.request_id));
        match self.request {
            // The request is an envelope of its own: its top-level `authorization`, if any, is
            // structural, as in the main job's transcripts.
            Some(request) => w.with("request", |o| {
                redact_raw(
                    redactor,
                    request,
                    Scope::Full {
                        envelope_root: true,
                    },
                    o,
                )
            }),
            None => w.raw("request", "null"),
        };
        if let Some(provider) = self.provider {
            w.str("provider", &redactor.redact_str(provider));
        }
        if success {
            if let Some(result) = self.result {
                w.with("result", |o| {
                    redact_raw(redactor, result, Scope::SecretsOnly, o)
                });
            }
        } else {
            match &self.error {
                None => {}
                Some(ErrorPart::Answer(raw)) => {
                    w.with("error", |o| full(raw, o));
                }
                Some(ErrorPart::Own(body)) => {
                    let text = serde_json::to_string(body).unwrap_or_else(|_| "{}".into());
                    w.with("error", |o| full(&text, o));
                }
            }
        }
        w.with("events", |o| {
            o.push('[');
            for (i, event) in self.events.iter().enumerate() {
                if i > 0 {
                    o.push(',');
                }
                render_event(event, &redactor.redact_str(self.request_id), redactor, o);
            }
            o.push(']');
        });
        w.with("timings", |o| {
            let mut t = ObjectWriter::new(o);
            t.str("started_at", &timestamp(self.started_at))
                .str("ended_at", &timestamp(self.ended_at))
                .value("duration_ms", &self.duration_ms);
            t.finish();
        });
        if let Some(resources) = &self.resources {
            w.with("diagnostics", |o| {
                let mut d = ObjectWriter::new(o);
                d.with("dispatch", |o| {
                    let mut r = ObjectWriter::new(o);
                    r.value("resources", resources);
                    r.finish();
                });
                d.finish();
            });
        }
        w.finish();
        out
    }
}

fn render_event(event: &EventRecord, request_id: &str, redactor: &Redactor, out: &mut String) {
    let mut e = ObjectWriter::new(out);
    e.str("schema", EVENT_SCHEMA)
        .str("event", event.event.as_str())
        .str("time", &timestamp(event.time))
        .str("request_id", request_id);
    if let Some(status) = event.status {
        e.str("status", status.as_str());
    }
    if let Some(provider) = &event.provider {
        e.str("provider", &redactor.redact_str(provider));
    }
    e.finish();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn envelope(status: DelegationStatus, error: Option<ErrorPart<'static>>) -> Envelope<'static> {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        Envelope {
            status,
            request_id: "r1",
            request: Some(r#"{"goal":"g","metadata":{"api_key":"abcdefgh12345678"}}"#),
            provider: Some("p"),
            result: Some(r#"{"ok":true,"big":1e400}"#),
            error,
            events: vec![
                EventRecord {
                    event: Event::Requested,
                    time: t,
                    status: None,
                    provider: None,
                },
                EventRecord {
                    event: status.final_event(),
                    time: t,
                    status: Some(status),
                    provider: Some("p".into()),
                },
            ],
            started_at: t,
            ended_at: t,
            duration_ms: 0,
            resources: None,
        }
    }

    #[test]
    fn a_success_carries_the_result_and_no_error() {
        let text = envelope(
            DelegationStatus::Completed,
            Some(ErrorPart::Answer(r#"{"code":"x","message":"m"}"#)),
        )
        .render(&Redactor::new());
        let v: Value = serde_json::from_str(&text.replace("1e400", "1")).unwrap();
        assert_eq!(v["success"], true);
        assert_eq!(v["result"]["ok"], true);
        assert!(
            text.contains("1e400"),
            "the payload is copied as written: {text}"
        );
        assert!(v.get("error").is_none());
        assert_eq!(v["request"]["metadata"]["api_key"], "[redacted]");
        assert_eq!(v["events"][1]["event"], "host-delegation.completed");
        assert_eq!(v["events"][1]["provider"], "p");
        assert_eq!(v["events"][0].get("status"), None);
        assert_eq!(v["timings"]["started_at"], "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn a_failure_never_carries_the_result() {
        let body = ErrorBody::new(Code::ScopeMismatch, "m", None);
        let text =
            envelope(DelegationStatus::Failed, Some(ErrorPart::Own(body))).render(&Redactor::new());
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["success"], false);
        assert!(v.get("result").is_none(), "{text}");
        assert_eq!(
            v["error"]["code"],
            "wp_codebox_host_delegation_scope_mismatch"
        );
        assert_eq!(v["error"]["retryable"], false);
        assert_eq!(v["events"][1]["event"], "host-delegation.failed");
    }
}
