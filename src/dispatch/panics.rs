//! The main job's panics (SPEC §3.1 `internal_error`): [`PanicNote`], which records what a
//! panic said instead of letting the default hook print it and catches the panics of each of
//! the main job's phases, and [`last_resort`], the envelope of a panic while concluding (the test
//! hook that provokes one at a chosen stage is `ptd_sys::fault`).

use super::{Concluded, DispatchError};
use ptd_wire::envelope::request::Echo;
use ptd_wire::envelope::result::Audience;

/// What the panics of the main job said. While the main job runs, a panic is recorded here
/// instead of printed by the default hook: it is reported once, on the `error[internal_error]`
/// line (scrubbed of secrets like every stderr line), not as loose text around it.
pub(super) struct PanicNote {
    note: &'static std::sync::Mutex<Option<String>>,
}

impl PanicNote {
    pub(super) fn install() -> PanicNote {
        static NOTE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
        std::panic::set_hook(Box::new(|info| {
            let payload = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_default();
            let thread = std::thread::current();
            let text = format!(
                "thread '{}' panicked{at}: {payload}",
                thread.name().unwrap_or("unnamed")
            );
            if let Ok(mut note) = NOTE.lock() {
                // The first panic is the cause; later ones are its consequences.
                note.get_or_insert(text);
            }
        }));
        PanicNote { note: &NOTE }
    }

    /// What the first panic said (taking it).
    pub(super) fn take(&self) -> String {
        self.note
            .lock()
            .ok()
            .and_then(|mut note| note.take())
            .unwrap_or_else(|| "a panic".into())
    }

    /// The failure a caught panic becomes.
    pub(super) fn error(&self) -> DispatchError {
        DispatchError::Panicked { what: self.take() }
    }

    /// Run one phase of the main job; a panic in it is caught and returned as
    /// [`DispatchError::Panicked`] with what it said. The main job's one panic boundary: it
    /// calls this once per phase and decides what a panic there becomes.
    pub(super) fn catch<T>(&self, phase: impl FnOnce() -> T) -> Result<T, DispatchError> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(phase)).map_err(|_| self.error())
    }
}

/// The envelope of a failure when building or printing the report itself panicked: no transcript and no
/// result file, the ids and the redaction known so far. Should rendering panic too, a fixed
/// envelope without ids is printed: one valid envelope, always.
pub fn last_resort(
    echo: &Echo,
    redactor: &ptd_wire::redact::Redactor,
    err: &DispatchError,
    pretty: bool,
) -> Concluded {
    let rendered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        err.envelope(echo).render(redactor, Audience::Caller)
    }));
    let compact = rendered.unwrap_or_else(|_| LAST_RESORT_ENVELOPE.to_string());
    let human = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        redactor.scrub_secrets_str(&err.human())
    }))
    .unwrap_or_else(|_| "the dispatcher hit an internal error; please report it".into());
    Concluded {
        envelope: if pretty {
            ptd_wire::json::raw::pretty(&compact)
        } else {
            compact
        },
        status: err.status(),
        exit: err.exit_code(),
        stderr: vec![ptd_wire::terminal::error_line(err.code().as_str(), &human)],
    }
}

/// The envelope printed when nothing else can be rendered.
const LAST_RESORT_ENVELOPE: &str = concat!(
    r#"{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"","tool":"","#,
    r#""operation":"","status":"failed","error":{"code":"internal_error","message":"the "#,
    r#"dispatcher hit an internal error; please report it","retryable":false},"artifacts":"#,
    r#"{"transcripts":[],"evidence":[]},"diagnostics":{},"metadata":{}}"#
);
