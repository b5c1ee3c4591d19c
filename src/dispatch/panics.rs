//! The main job's panics (SPEC §3.1 `internal_error`): [`PanicNote`], which records what a
//! panic said instead of letting the default hook print it (the test hook that provokes one at
//! a chosen stage is `ptd_sys::fault`).

use super::DispatchError;

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
}
