//! The test-only fault hook: a debug build may be told to panic at a named point of the main
//! job, to prove the panic boundary end to end (docs/robustness.md). It lives in this leaf so
//! that `exec`, which reaches one of the points, need not know the main job.

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
