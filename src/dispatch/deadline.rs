//! [`Deadline`]: how long one call's adapter (or endpoint) may take. It starts as the
//! bridge's `timeout_ms` and only ever gets shorter: the ledger step cuts it to what a wait
//! for another holder, or the session's adapter budget, left (SPEC §14.2). The bridge itself
//! keeps the timeout it was written with.

use ptd_wire::envelope::bridge::Bridge;

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
    pub(crate) fn cut_to(self, left_ms: u64) -> Deadline {
        Deadline {
            timeout_ms: self.timeout_ms.min(left_ms.max(1)),
        }
    }

    /// The time allowed, in milliseconds.
    pub fn timeout_ms(self) -> u64 {
        self.timeout_ms
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
}
