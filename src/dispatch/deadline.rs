//! [`Deadline`]: how long one call's adapter (or endpoint) may take. It starts as the
//! bridge's `timeout_ms` and only ever gets shorter: the ledger step cuts it to what a wait
//! for another holder, or the session's adapter budget, left (SPEC §14.2). The bridge itself
//! keeps the timeout it was written with.

use ptd_sys::exec;
use ptd_wire::envelope::bridge::Bridge;
use std::time::Duration;

/// The time an admitted call's adapter run or endpoint exchange may take, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    timeout_ms: u64,
}

impl Deadline {
    /// The bridge's own timeout.
    pub fn of(bridge: &Bridge) -> Deadline {
        Deadline {
            timeout_ms: bridge.timeout_ms,
        }
    }

    /// This deadline, or `left_ms` (at least 1 ms) when that is shorter.
    pub fn cut_to(self, left_ms: u64) -> Deadline {
        Deadline {
            timeout_ms: self.timeout_ms.min(left_ms.max(1)),
        }
    }

    /// The time allowed, in milliseconds.
    pub fn timeout_ms(self) -> u64 {
        self.timeout_ms
    }

    /// Put this deadline on a planned run: its timeout and the adapter's
    /// `WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS` variable (the plan wrote the bridge's there).
    pub(super) fn impose(self, spec: &mut exec::Spec) {
        spec.timeout = Duration::from_millis(self.timeout_ms);
        let value = self.timeout_ms.to_string();
        for (name, old) in &mut spec.env {
            if name == crate::plan::vars::TIMEOUT_MS {
                old.clone_from(&value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_only_shortens_and_never_reaches_zero() {
        let deadline = Deadline { timeout_ms: 5_000 };
        assert_eq!(deadline.cut_to(9_000).timeout_ms(), 5_000);
        assert_eq!(deadline.cut_to(1_200).timeout_ms(), 1_200);
        assert_eq!(deadline.cut_to(0).timeout_ms(), 1);
    }

    #[test]
    fn imposed_on_a_spec_it_sets_the_timeout_and_the_adapters_variable() {
        let mut spec = exec::Spec {
            program: "/bin/true".into(),
            argv: vec!["true".into()],
            env: vec![
                ("PATH".into(), "/bin".into()),
                (crate::plan::vars::TIMEOUT_MS.into(), "30000".into()),
            ],
            cwd: None,
            stdin: None,
            timeout: Duration::from_secs(30),
            kill_grace: Duration::from_millis(100),
            max_stdout_bytes: 1,
            confinement: None,
            stderr_tap: None,
            stdout_watch: None,
        };
        Deadline { timeout_ms: 30_000 }
            .cut_to(750)
            .impose(&mut spec);
        assert_eq!(spec.timeout, Duration::from_millis(750));
        assert_eq!(
            spec.env,
            vec![
                ("PATH".to_string(), "/bin".to_string()),
                (crate::plan::vars::TIMEOUT_MS.to_string(), "750".to_string()),
            ]
        );
    }
}
