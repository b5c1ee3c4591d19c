//! `/healthz`'s ledger check (SPEC §19.2: "200 when it can serve: … ledger reachable"): the
//! configured ledger opened only to read, with a short deadline, on a blocking thread; its
//! answer kept for a moment so that a burst of probes opens it once.

use ptd_ledger::{Ledger, LedgerError, Location};
use ptd_sys::hostenv::HostEnv;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How long one open may take.
const DEADLINE: Duration = Duration::from_secs(2);
/// How long an answer is reused.
const KEEP: Duration = Duration::from_secs(1);

/// The ledger `/healthz` opens, and its last answer.
pub(super) struct LedgerCheck {
    location: RwLock<Option<Arc<Location>>>,
    last: Mutex<Option<(Instant, Result<(), Value>)>>,
}

impl LedgerCheck {
    pub(super) fn new(location: Option<Location>) -> LedgerCheck {
        LedgerCheck {
            location: RwLock::new(location.map(Arc::new)),
            last: Mutex::new(None),
        }
    }

    /// The ledger a reloaded policy names.
    pub(super) fn set(&self, location: Option<Location>) {
        if let Ok(mut slot) = self.location.write() {
            *slot = location.map(Arc::new);
        }
        if let Ok(mut last) = self.last.lock() {
            *last = None;
        }
    }

    /// Whether the ledger opens (always, when there is none); the error is the reply's JSON.
    pub(super) async fn check(&self) -> Result<(), Value> {
        let location = self.location.read().ok().and_then(|l| l.clone());
        let Some(location) = location else {
            return Ok(());
        };
        if let Ok(last) = self.last.lock() {
            if let Some((at, answer)) = last.as_ref() {
                if at.elapsed() < KEEP {
                    return answer.clone();
                }
            }
        }
        let answer = tokio::task::spawn_blocking(move || open(&location))
            .await
            .unwrap_or_else(|_| Err(json!({ "reason": "the ledger check failed" })));
        if let Ok(mut last) = self.last.lock() {
            *last = Some((Instant::now(), answer.clone()));
        }
        answer
    }
}

/// Open the ledger to read it, and let it go. A ledger file not made yet is fine: the first
/// call makes it. The reason names the ledger's error code, never its path or password.
fn open(location: &Location) -> Result<(), Value> {
    let env = HostEnv::process();
    match Ledger::open_existing_at(location, &env, Instant::now() + DEADLINE) {
        Ok(_) => Ok(()),
        Err(LedgerError::Missing) if matches!(location, Location::File(_)) => Ok(()),
        Err(err) => Err(json!({
            "reason": "the ledger cannot be reached",
            "code": err.code(),
            "retryable": err.is_unreachable(),
        })),
    }
}
