//! Reference host adapters, run as `parent-tool-dispatch adapter NAME`.

pub mod git;
pub mod mcp;
pub mod workspace;

use ptd_wire::envelope::request::{Echo, Request};
use ptd_wire::envelope::result::{Audience, ErrorBody, ResultEnvelope};
use ptd_wire::error::Status;
use ptd_wire::json::{Document, JsonIssue};
use ptd_wire::redact::Redactor;
use ptd_wire::validate::Issue;
use serde_json::{json, Value};
use std::io::{self, Read};
use std::rc::Rc;

/// Why an adapter could not take its request: the adapter turns each into its own
/// `request_too_large` or `request_invalid` (message, `details.issues`).
pub(crate) enum Unread {
    /// Over the adapter's request cap.
    TooLarge(String),
    /// Not JSON, or not a valid request envelope: the message and `{issues}`.
    Invalid(String, Value),
}

/// The request envelope in `bytes` (at most `max_bytes`), checked by the dispatcher's own
/// request checks; `echo` gets what can be echoed of it even when it is invalid.
pub(crate) fn read_request(
    bytes: Vec<u8>,
    max_bytes: usize,
    echo: &mut Echo,
) -> Result<Request, Unread> {
    let doc = Document::parse(bytes, max_bytes).map_err(|e| match e {
        JsonIssue::TooLarge { .. } => Unread::TooLarge(e.to_string()),
        _ => Unread::Invalid(
            format!(
                "the request is not valid: {}",
                ptd_wire::terminal::escape(&e.to_string())
            ),
            json!({"issues": [Issue::from_json(&e)]}),
        ),
    })?;
    *echo = Echo::best_effort(Some(&doc));
    Request::from_document(Rc::new(doc)).map_err(|issues| {
        let first = issues
            .first()
            .map(|i| ptd_wire::terminal::escape(&i.message).into_owned())
            .unwrap_or_default();
        Unread::Invalid(
            format!("the request envelope is invalid: {first}"),
            json!({ "issues": issues }),
        )
    })
}

/// Read stdin up to one byte over `max_bytes` (enough to know a request is too large; the
/// rest is not read). `Err` is the exit status after saying why on stderr.
pub(crate) fn read_stdin(max_bytes: usize) -> Result<Vec<u8>, u8> {
    let mut bytes = Vec::new();
    match io::stdin()
        .lock()
        .take(max_bytes as u64 + 1)
        .read_to_end(&mut bytes)
    {
        Ok(_) => Ok(bytes),
        Err(err) => {
            stderr_line!("error[stdin]: could not read the request: {err}");
            Err(1)
        }
    }
}

/// The code list of an adapter's `after_help`: `intro`, then each code with its status and
/// whether it is retryable.
pub(crate) fn codes_help(
    intro: &str,
    codes: impl IntoIterator<Item = (&'static str, &'static str, bool)>,
) -> String {
    let mut s = format!("{intro}\n\nError codes (status, retryable):\n");
    for (code, status, retryable) in codes {
        s.push_str(&format!("  {code}\n      {status}, {retryable}\n"));
    }
    s.pop();
    s
}

/// An adapter's code table as the envelope needs it (each adapter's `wire_table!` `Code`).
pub trait WireCode: Copy {
    fn wire(self) -> &'static str;
    fn status(self) -> Status;
    fn retryable(self) -> bool;
}

/// A failed call: a code of the adapter's table, one human sentence, optional details.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure<C> {
    pub code: C,
    pub message: String,
    pub details: Option<Value>,
}

impl<C> Failure<C> {
    /// A failure without details.
    pub fn new(code: C, message: impl Into<String>) -> Failure<C> {
        Failure {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// Attach `error.details`.
    pub fn with_details(mut self, details: Value) -> Failure<C> {
        self.details = Some(details);
        self
    }
}

/// The envelope (rendered) of a call's outcome: `output` (JSON text) as `succeeded`, a
/// failure by its code's status.
pub fn render<C: WireCode>(echo: Echo, outcome: Result<String, Failure<C>>) -> String {
    let envelope = match outcome {
        Ok(output) => ResultEnvelope::new(echo, Status::Succeeded, Some(output.into()), None),
        Err(failure) => ResultEnvelope::failure(
            echo,
            failure.code.status(),
            ErrorBody {
                code: failure.code.wire().to_string(),
                message: failure.message,
                retryable: failure.code.retryable(),
                details: failure.details,
            },
        ),
    };
    // The dispatcher redacts what it passes on; an empty redactor here only normalises.
    envelope.render(&Redactor::new(), Audience::Caller)
}

/// [`WireCode`] for a `wire_table!` code with a status.
macro_rules! wire_code {
    ($code:ty) => {
        impl $crate::adapter::WireCode for $code {
            fn wire(self) -> &'static str {
                self.as_str()
            }
            fn status(self) -> ptd_wire::error::Status {
                <$code>::status(self)
            }
            fn retryable(self) -> bool {
                <$code>::retryable(self)
            }
        }
    };
}
pub(crate) use wire_code;
