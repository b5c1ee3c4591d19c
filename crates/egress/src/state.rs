//! What the proxy's threads share: the call's settings, the open sockets (so that a stop, a
//! deadline or a spent budget can shut them down from outside the thread blocked on them),
//! the byte counters of the whole call, and the record of every connection.

use crate::{Config, Connection, MAX_REPORTED};
use std::collections::HashMap;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

/// The reason of a connection cut because the call's deadline passed.
pub(crate) const DEADLINE_PASSED: &str = "the call's deadline passed";
/// The reason of a connection cut because the call ended (`Proxy::finish`).
pub(crate) const CALL_ENDED: &str = "the call ended";
/// The reason of a connection cut because a direction's bytes reached `max_bytes`.
pub(crate) const MAX_BYTES_REACHED: &str = "network_max_bytes reached";

/// A mutex's value even when a thread panicked holding it (nothing here is left half-changed
/// by a panic: every critical section is a few assignments).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The open sockets, by connection, and whether (and why) the proxy stopped.
#[derive(Default)]
pub(crate) struct Registry {
    pub(crate) stopped: Option<&'static str>,
    open: HashMap<u64, Open>,
}

#[derive(Default)]
struct Open {
    /// Clones of the connection's sockets (the same sockets: shutting one down shuts the
    /// other's down).
    streams: Vec<TcpStream>,
    /// Why the connection was cut from outside, first reason only.
    cut: Option<String>,
    /// The relay's directions that reached their end of file (client to upstream, upstream to
    /// client).
    up_ended: bool,
    down_ended: bool,
}

impl Open {
    /// Whether a stop for `reason` cut this connection: not when both directions had ended,
    /// nor — at the call's end — when the upstream's answer had ended (all that was left was
    /// the client's own close, which the call's end makes anyway).
    fn cut_by(&self, reason: &str) -> bool {
        !self.down_ended || (!self.up_ended && reason != CALL_ENDED)
    }
}

/// Every connection's record, and the counts.
#[derive(Default)]
struct Records {
    listed: Vec<Option<Connection>>,
    arrived: u64,
    allowed: u64,
    refused: u64,
}

/// What the report is built from once every thread is joined.
pub(crate) struct Tally {
    pub(crate) connections: Vec<Connection>,
    pub(crate) arrived: u64,
    pub(crate) allowed: u64,
    pub(crate) refused: u64,
}

pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) registry: Mutex<Registry>,
    /// Signalled when the proxy stops (the deadline's timer waits on it).
    pub(crate) stopping: Condvar,
    /// The listener, once it arrived: what a stop wakes.
    listener: Mutex<Option<TcpListener>>,
    /// Bytes relayed in each direction, over the whole call.
    pub(crate) up: AtomicU64,
    pub(crate) down: AtomicU64,
    /// A connection was cut for `max_bytes`: every later request is refused.
    spent: AtomicBool,
    /// Connections being served, and refused connections still being answered.
    pub(crate) active: AtomicUsize,
    pub(crate) overflow: AtomicUsize,
    records: Mutex<Records>,
    /// The connections' threads (reaped as they end, the rest joined at the stop).
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    pub(crate) fn new(config: Config) -> Shared {
        Shared {
            config,
            registry: Mutex::default(),
            stopping: Condvar::new(),
            listener: Mutex::default(),
            up: AtomicU64::new(0),
            down: AtomicU64::new(0),
            spent: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            overflow: AtomicUsize::new(0),
            records: Mutex::default(),
            threads: Mutex::default(),
        }
    }

    /// Why the proxy stopped, if it did.
    pub(crate) fn stopped(&self) -> Option<&'static str> {
        lock(&self.registry).stopped
    }

    /// Stop: no new connection, every open one cut with `reason` (unless it was cut already),
    /// the acceptor woken. Only the first stop's reason counts.
    pub(crate) fn stop(&self, reason: &'static str) {
        {
            let mut registry = lock(&self.registry);
            registry.stopped.get_or_insert(reason);
            for open in registry.open.values_mut() {
                if open.cut_by(reason) {
                    open.cut.get_or_insert_with(|| reason.to_string());
                }
                for stream in &open.streams {
                    let _ = stream.shutdown(Shutdown::Both);
                }
            }
        }
        self.stopping.notify_all();
        if let Some(listener) = lock(&self.listener).as_ref() {
            let _ = ptd_sys::confine::proxy::wake_acceptor(listener);
        }
    }

    /// Keep the listener to wake its acceptor at the stop; `false` when the proxy has stopped
    /// already (then nothing is to be accepted).
    pub(crate) fn publish(&self, listener: &TcpListener) -> bool {
        let mut slot = lock(&self.listener);
        if self.stopped().is_some() {
            return false;
        }
        match listener.try_clone() {
            Ok(clone) => {
                *slot = Some(clone);
                true
            }
            Err(_) => false,
        }
    }

    /// Let a stop or a cut shut `stream` down; refused (with the stop's reason) once the
    /// proxy has stopped.
    pub(crate) fn register(&self, id: u64, stream: &TcpStream) -> Result<(), String> {
        let clone = stream
            .try_clone()
            .map_err(|e| format!("the proxy could not keep the connection: {e}"))?;
        let mut registry = lock(&self.registry);
        if let Some(reason) = registry.stopped {
            return Err(reason.to_string());
        }
        registry.open.entry(id).or_default().streams.push(clone);
        Ok(())
    }

    /// Cut connection `id`: both of its sockets shut down both ways; `reason` is kept unless
    /// it was cut already.
    pub(crate) fn cut(&self, id: u64, reason: &str) {
        let mut registry = lock(&self.registry);
        if let Some(open) = registry.open.get_mut(&id) {
            open.cut.get_or_insert_with(|| reason.to_string());
            for stream in &open.streams {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }

    /// A direction of connection `id` reached its end of file (before its end is passed on).
    pub(crate) fn ended(&self, id: u64, down: bool) {
        if let Some(open) = lock(&self.registry).open.get_mut(&id) {
            if down {
                open.down_ended = true;
            } else {
                open.up_ended = true;
            }
        }
    }

    /// Forget connection `id`'s sockets (closing the clones); why it was cut, if it was.
    pub(crate) fn release(&self, id: u64) -> Option<String> {
        lock(&self.registry)
            .open
            .remove(&id)
            .and_then(|open| open.cut)
    }

    /// Take up to `n` bytes of a direction's budget; what was granted (less than `n` when the
    /// budget ran out, which spends it for every later request).
    pub(crate) fn reserve(&self, total: &AtomicU64, n: usize) -> usize {
        let max = self.config.max_bytes;
        let want = n as u64;
        let mut current = total.load(Ordering::Relaxed);
        let granted = loop {
            let granted = want.min(max.saturating_sub(current));
            if granted == 0 {
                break 0;
            }
            match total.compare_exchange_weak(
                current,
                current + granted,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break granted,
                Err(now) => current = now,
            }
        };
        if granted < want {
            self.spent.store(true, Ordering::Relaxed);
        }
        // `granted <= want == n`, so it fits.
        usize::try_from(granted).unwrap_or(n)
    }

    /// Whether a direction's bytes reached `max_bytes`: no more request is served.
    pub(crate) fn spent(&self) -> bool {
        let max = self.config.max_bytes;
        self.spent.load(Ordering::Relaxed)
            || self.up.load(Ordering::Relaxed) >= max
            || self.down.load(Ordering::Relaxed) >= max
    }

    /// A connection arrived: its number, in order of arrival.
    pub(crate) fn arrive(&self) -> u64 {
        let mut records = lock(&self.records);
        let id = records.arrived;
        records.arrived += 1;
        id
    }

    /// What happened to connection `id`.
    pub(crate) fn record(&self, id: u64, connection: Connection) {
        let mut records = lock(&self.records);
        if connection.allowed {
            records.allowed += 1;
        } else {
            records.refused += 1;
        }
        let Ok(at) = usize::try_from(id) else { return };
        if at < MAX_REPORTED {
            if records.listed.len() <= at {
                records.listed.resize(at + 1, None);
            }
            records.listed[at] = Some(connection);
        }
    }

    pub(crate) fn tally(&self) -> Tally {
        let mut records = lock(&self.records);
        Tally {
            connections: std::mem::take(&mut records.listed)
                .into_iter()
                .flatten()
                .collect(),
            arrived: records.arrived,
            allowed: records.allowed,
            refused: records.refused,
        }
    }

    /// Wait until the deadline, then stop — or return at once when the proxy stops first.
    pub(crate) fn time(&self) {
        let deadline = self.config.deadline;
        let mut registry = lock(&self.registry);
        loop {
            if registry.stopped.is_some() {
                return;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            registry = self
                .stopping
                .wait_timeout(registry, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(registry);
        self.stop(DEADLINE_PASSED);
    }

    /// Join the connections' threads that ended.
    pub(crate) fn reap(&self) {
        let mut threads = lock(&self.threads);
        let (ended, running): (Vec<_>, Vec<_>) = std::mem::take(&mut *threads)
            .into_iter()
            .partition(|t| t.is_finished());
        *threads = running;
        drop(threads);
        for thread in ended {
            let _ = thread.join();
        }
    }
}
