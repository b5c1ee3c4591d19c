//! SIGINT, SIGTERM and SIGHUP to the dispatcher (SPEC §4.3).
//!
//! While the main job runs, these signals do not kill the dispatcher: they are recorded and
//! handed to whoever subscribed (the adapter supervisor, which forwards them to the adapter's
//! process group), so that the dispatcher can still print its `interrupted` envelope and leave
//! nothing running. It owns no process handling itself.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::sync::{Arc, Mutex};

type Callback = Box<dyn Fn(i32) + Send>;

#[derive(Default)]
struct Inner {
    received: Mutex<Option<i32>>,
    subscriber: Mutex<Option<Callback>>,
}

/// The dispatcher's record of termination signals.
#[derive(Clone, Default)]
pub struct Interrupts {
    inner: Arc<Inner>,
}

/// Unsubscribes when dropped.
pub struct Subscription {
    inner: Arc<Inner>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        *lock(&self.inner.subscriber) = None;
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Interrupts {
    /// Take over SIGINT, SIGTERM and SIGHUP for the rest of the process. If the handlers
    /// cannot be installed the default dispositions stay (the dispatcher still works, it just
    /// cannot report an interruption).
    pub fn install() -> Interrupts {
        let interrupts = Interrupts::default();
        if let Ok(mut signals) = Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            let inner = Arc::clone(&interrupts.inner);
            std::thread::spawn(move || {
                for sig in signals.forever() {
                    lock(&inner.received).get_or_insert(sig);
                    if let Some(callback) = lock(&inner.subscriber).as_ref() {
                        callback(sig);
                    }
                }
            });
        }
        interrupts
    }

    /// A record that never receives anything (for `replay` and tests).
    pub fn none() -> Interrupts {
        Interrupts::default()
    }

    /// The first signal received, if any.
    pub fn received(&self) -> Option<i32> {
        *lock(&self.inner.received)
    }

    /// Call `callback` for every signal from now on, until the subscription is dropped.
    pub fn subscribe(&self, callback: impl Fn(i32) + Send + 'static) -> Subscription {
        *lock(&self.inner.subscriber) = Some(Box::new(callback));
        Subscription {
            inner: Arc::clone(&self.inner),
        }
    }
}
