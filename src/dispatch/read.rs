//! Steps 1–2 (SPEC §4.1): read the bridge and the request, bounded and interruptible, and
//! validate the request. Nothing is printed here but the stdin hint.

use super::{DispatchArgs, DispatchError};
use ptd_sys::interrupt::Interrupts;
use ptd_wire::envelope::bridge::Bridge;
use ptd_wire::envelope::request::Request;
use ptd_wire::json::{Document, JsonIssue};
use ptd_wire::validate::Issue;
use std::path::PathBuf;
use std::rc::Rc;

/// Read the request (file, or stdin for none / `-`), at most cap + 1 bytes, giving up when
/// the dispatcher is interrupted while waiting for a writer that never closes.
pub(crate) fn read_request(
    args: &DispatchArgs,
    interrupts: &Interrupts,
) -> Result<Vec<u8>, DispatchError> {
    let path = args.request.clone().filter(|p| p.as_os_str() != "-");
    if path.is_none() && !args.messages.quiet {
        if let Some(hint) = ptd_wire::terminal::stdin_hint() {
            stderr_line!("{hint}");
        }
    }
    read_interruptibly(path.clone(), args.run.max_request_bytes, interrupts).map_err(|stop| {
        match stop {
            ReadStop::Failed(source) => DispatchError::RequestUnreadable { path, source },
            ReadStop::Interrupted(signal) => DispatchError::Interrupted {
                signal,
                adapter_started: false,
            },
        }
    })
}

/// Why [`read_interruptibly`] returned no bytes.
#[derive(Debug)]
pub(crate) enum ReadStop {
    /// The file or stdin could not be read.
    Failed(std::io::Error),
    /// This signal arrived first.
    Interrupted(ptd_sys::signal::Signal),
}

/// Read an envelope's bytes (`path`, or stdin for `None`), at most `max_bytes + 1` of them,
/// with the one reader's stream mode ([`ptd_sys::fs::read_stream`]): a FIFO or a writer that
/// never closes waits in `poll(2)` together with the signal wake-up, never in `open(2)`.
pub(crate) fn read_interruptibly(
    path: Option<PathBuf>,
    max_bytes: u64,
    interrupts: &Interrupts,
) -> Result<Vec<u8>, ReadStop> {
    let path = path.filter(|p| p.as_os_str() != "-");
    ptd_sys::fs::read_stream(path.as_deref(), max_bytes.saturating_add(1), interrupts).map_err(
        |err| match err {
            ptd_sys::fs::ReadError::Interrupted(signal) => ReadStop::Interrupted(signal),
            other => ReadStop::Failed(other.into()),
        },
    )
}

/// The bridge from `--parent-tool-bridge` (or the environment), and its unknown-key warnings,
/// which go to stderr whether or not it is valid.
pub(super) fn load_bridge(args: &DispatchArgs) -> (Vec<Issue>, Result<Bridge, DispatchError>) {
    let text = args
        .bridge
        .parent_tool_bridge
        .as_deref()
        .unwrap_or_default();
    match Bridge::load(text) {
        Ok(bridge) => (bridge.warnings.clone(), Ok(bridge)),
        Err(err) => (
            err.warnings().to_vec(),
            Err(DispatchError::BridgeInvalid {
                issues: err.issues().to_vec(),
                human: Some(err.to_string()),
            }),
        ),
    }
}

pub(super) fn validate_request(
    parsed: Result<Rc<Document>, JsonIssue>,
    max_request: usize,
) -> Result<Request, DispatchError> {
    match parsed {
        Err(JsonIssue::TooLarge { .. }) => {
            Err(DispatchError::RequestTooLarge { limit: max_request })
        }
        Err(issue) => Err(DispatchError::RequestInvalid {
            issues: vec![Issue::from_json(&issue)],
        }),
        Ok(doc) => {
            Request::from_document(doc).map_err(|issues| DispatchError::RequestInvalid { issues })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_a_failure_not_a_wait() {
        let got = read_interruptibly(
            Some(PathBuf::from("/nonexistent/request.json")),
            100,
            &Interrupts::none(),
        );
        assert!(
            matches!(got, Err(ReadStop::Failed(e)) if e.kind() == std::io::ErrorKind::NotFound)
        );
    }
}
