//! The main job's panics (SPEC §3.1 `internal_error`): [`PanicNote`], which records what a
//! panic said instead of letting the default hook print it and catches the panics of each of
//! the main job's phases, [`last_resort`], the envelope of a panic while concluding, and
//! [`panic_point`], the test hook that provokes one at a chosen stage.

use super::{Concluded, DispatchError};
use crate::envelope::request::Echo;
use crate::envelope::result::Audience;

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
    redactor: &crate::redact::Redactor,
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
            crate::json::raw::pretty(&compact)
        } else {
            compact
        },
        status: err.status(),
        exit: err.exit_code(),
        stderr: vec![crate::terminal::error_line(err.code().as_str(), &human)],
    }
}

/// The envelope printed when nothing else can be rendered.
const LAST_RESORT_ENVELOPE: &str = concat!(
    r#"{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"","tool":"","#,
    r#""operation":"","status":"failed","error":{"code":"internal_error","message":"the "#,
    r#"dispatcher hit an internal error; please report it","retryable":false},"artifacts":"#,
    r#"{"transcripts":[],"evidence":[]},"diagnostics":{},"metadata":{}}"#
);

/// Where a test may provoke a panic in the main job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanicPoint {
    /// In `exec::run`, right after the adapter's process group was spawned: the adapter runs.
    AdapterStarted,
    /// After the adapter ended, before its answer is judged.
    Judging,
    /// Before the report concludes (diagnostics, transcript, rendering).
    Concluding,
}

/// A test-only hook to prove panic safety end to end (docs/robustness.md): with
/// `PARENT_TOOL_DISPATCH_TEST_PANIC=adapter_started[:MS]|judging|concluding` in a **debug**
/// build, the main job panics at that point (after MS milliseconds at `adapter_started`, so
/// the adapter is well under way). Release builds never read the variable.
pub mod panic_point {
    use super::PanicPoint;
    use crate::hostenv::HostEnv;
    use std::sync::OnceLock;
    use std::time::Duration;

    /// The variable naming the point.
    pub const ENV: &str = "PARENT_TOOL_DISPATCH_TEST_PANIC";

    static ARMED: OnceLock<(PanicPoint, Duration)> = OnceLock::new();

    /// Read [`ENV`] (debug builds only); an unknown value arms nothing.
    pub fn arm(env: &HostEnv) {
        if !cfg!(debug_assertions) {
            return;
        }
        let Some(value) = env.var(ENV) else { return };
        let (name, ms) = value.split_once(':').unwrap_or((&value, "0"));
        let point = match name {
            "adapter_started" => PanicPoint::AdapterStarted,
            "judging" => PanicPoint::Judging,
            "concluding" => PanicPoint::Concluding,
            _ => return,
        };
        let delay = Duration::from_millis(ms.parse().unwrap_or(0));
        let _ = ARMED.set((point, delay));
    }

    /// Panic here when a test armed this point (the panic names the caller's location).
    #[track_caller]
    pub fn reach(point: PanicPoint) {
        if !cfg!(debug_assertions) {
            return;
        }
        if let Some(&(armed, delay)) = ARMED.get() {
            if armed == point {
                std::thread::sleep(delay);
                panic!("{ENV}: a panic provoked at {point:?}");
            }
        }
    }
}
