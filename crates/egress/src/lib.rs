//! parent-tool-dispatch's egress proxy (SPEC §17, network egress by name): the HTTP proxy an
//! adapter in an empty network namespace reaches on `127.0.0.1:3128`, which connects — from the
//! dispatcher's own namespace — only to the hosts and ports an allow list names.
//!
//! It owns:
//! - reading a client's request head (httparse, at most 16 KiB and 100 headers): `CONNECT
//!   host:port` and absolute-form plain HTTP (`GET http://host[:port]/path`), nothing else;
//! - the checks before any connection, in order: the host as asked is listed with its port
//!   (`ptd_sys::confine::allow::allows`); a name is resolved on the host side
//!   (`ptd_endpoint::resolve`, SPEC §11.1) and every address it resolves to is public or
//!   listed literally (`address_refusal`); then a connection to the checked addresses only;
//! - relaying both ways, within the call's bounds: connections at once, bytes each way over the
//!   whole call, the call's deadline; and the [`Report`] of every connection.
//!
//! It must not:
//! - connect anywhere before the checks passed, look a name up twice, or resolve through the C
//!   library;
//! - make a system call of its own beyond std's networking and threads (`ptd-sys` owns them:
//!   waking the acceptor is `ptd_sys::confine::proxy::wake_acceptor`, a connect a stop
//!   interrupts `ptd_sys::net::connect_until`);
//! - leave a thread or a socket behind [`Proxy::finish`], or panic on any input;
//! - know the command line, the policy file, JSON or envelopes (the dispatcher turns the
//!   [`Report`] into `diagnostics.dispatch.network`).
//!
//! Plain HTTP is served one request per client connection: `Connection: close` is sent
//! upstream, and whatever the client sends after its request goes to the same server, raw.

#![deny(unsafe_code)]
// Unit tests may read files directly; the product does that only through `ptd_sys::fs`.
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

mod check;
mod conn;
mod head;
mod relay;
mod response;
mod state;

use conn::Slot;
use ptd_endpoint::resolve::Sources;
use ptd_sys::confine::allow::AllowRule;
use state::{lock, Shared, CALL_ENDED};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The bytes relayed each way, summed over the whole call, by default.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// The connections served at once, by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 32;
/// The connections the report lists (the rest are counted).
pub const MAX_REPORTED: usize = 64;
/// Connections refused for being one too many are answered (`503`, after their head is read)
/// by at most these many threads at once; past them a connection is closed at once.
const OVERFLOW_THREADS: usize = 4;
/// How long the acceptor waits after an `accept` that failed (out of descriptors, …).
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// What the proxy allows, and its bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The hosts and ports it may connect to.
    pub allow: Vec<AllowRule>,
    /// The most bytes relayed each way, over the whole call.
    pub max_bytes: u64,
    /// The most connections served at once.
    pub max_connections: usize,
    /// When every connection is cut and no more is accepted.
    pub deadline: Instant,
    /// Where names are looked up (the system's files in the product; tests point elsewhere).
    pub sources: Sources,
}

/// What happened to the proxy's connections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The first [`MAX_REPORTED`] connections, in order of arrival.
    pub connections: Vec<Connection>,
    /// Connections not listed.
    pub more: u64,
    /// Connections allowed (the checks passed), listed or not.
    pub allowed: u64,
    /// Connections refused, listed or not.
    pub refused: u64,
    /// The listener arrived (always, for [`Proxy::serve`]).
    pub listening: bool,
}

/// One client connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// The host as asked: lower case; for input that is not a host, a terminal-safe rendering
    /// of at most 255 bytes (empty when no request was read).
    pub host: String,
    /// The port asked for (0 when none was read).
    pub port: u16,
    /// The checks passed (the upstream may still have failed: see `reason`).
    pub allowed: bool,
    /// Why it was refused, or why it was cut (byte limit, deadline, the call's end, a failure
    /// upstream): one line.
    pub reason: Option<String>,
    /// Bytes relayed from the client upstream (a plain request's rewritten head included).
    pub bytes_up: u64,
    /// Bytes relayed from upstream to the client.
    pub bytes_down: u64,
}

/// Where a [`Proxy`] gets its listener.
type Receive = Box<dyn FnOnce() -> io::Result<Option<TcpListener>> + Send>;
type Cancel = Box<dyn Fn() + Send + Sync>;

/// The running proxy: its threads, until [`Proxy::finish`].
pub struct Proxy {
    shared: Arc<Shared>,
    server: Option<JoinHandle<bool>>,
    timer: Option<JoinHandle<()>>,
    cancel: Cancel,
}

impl Proxy {
    /// Serve on `listener` until `finish`.
    pub fn serve(listener: TcpListener, config: Config) -> io::Result<Proxy> {
        Proxy::pending(
            Box::new(move || Ok(Some(listener))),
            Box::new(|| ()),
            config,
        )
    }

    /// The listener arrives later: a thread first calls `receive` (which blocks until the
    /// listener is there, or returns `Ok(None)` when it never will), then serves; `finish`
    /// first calls `cancel` (which makes a blocked `receive` return).
    pub fn pending(receive: Receive, cancel: Cancel, config: Config) -> io::Result<Proxy> {
        let shared = Arc::new(Shared::new(config));
        let timer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("ptd-egress-timer".into())
                .spawn(move || shared.time())?
        };
        let mut proxy = Proxy {
            shared: Arc::clone(&shared),
            server: None,
            timer: Some(timer),
            cancel,
        };
        let server = std::thread::Builder::new()
            .name("ptd-egress".into())
            .spawn(move || match receive() {
                Ok(Some(listener)) => {
                    accept_loop(&shared, &listener);
                    true
                }
                Ok(None) | Err(_) => false,
            });
        // On a failure, dropping `proxy` stops and joins the timer.
        proxy.server = Some(server?);
        Ok(proxy)
    }

    /// Stop: no new connection, every open one closed (both sockets shut down), every thread
    /// joined; then what happened.
    pub fn finish(mut self) -> Report {
        let listening = self.stop();
        let tally = self.shared.tally();
        let listed = tally.connections.len() as u64;
        Report {
            connections: tally.connections,
            more: tally.arrived.saturating_sub(listed),
            allowed: tally.allowed,
            refused: tally.refused,
            listening,
        }
    }

    /// Stop and join every thread; whether the listener arrived.
    fn stop(&mut self) -> bool {
        (self.cancel)();
        self.shared.stop(CALL_ENDED);
        let listening = self
            .server
            .take()
            .is_some_and(|server| server.join().unwrap_or(false));
        if let Some(timer) = self.timer.take() {
            let _ = timer.join();
        }
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
        for thread in threads {
            let _ = thread.join();
        }
        listening
    }
}

impl Drop for Proxy {
    /// A proxy dropped without `finish` stops all the same.
    fn drop(&mut self) {
        if self.server.is_some() || self.timer.is_some() {
            self.stop();
        }
    }
}

/// Accept until the proxy stops, a thread for each connection.
fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    // An accepted socket is blocking whatever the listener is; a non-blocking listener would
    // make this loop spin.
    let _ = listener.set_nonblocking(false);
    if !shared.publish(listener) {
        return;
    }
    loop {
        if shared.stopped().is_some() {
            return;
        }
        match listener.accept() {
            Ok((client, _)) if shared.stopped().is_none() => admit(shared, client),
            Ok(_) => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) if shared.stopped().is_some() => return,
            Err(_) => std::thread::sleep(ACCEPT_RETRY),
        }
        shared.reap();
    }
}

/// Start a thread for `client`: to serve it, or — past `max_connections` — to refuse it.
fn admit(shared: &Arc<Shared>, client: TcpStream) {
    let id = shared.arrive();
    let slot = if shared.active.load(Ordering::Acquire) < shared.config.max_connections {
        shared.active.fetch_add(1, Ordering::AcqRel);
        Slot::Served
    } else if shared.overflow.load(Ordering::Acquire) < OVERFLOW_THREADS {
        shared.overflow.fetch_add(1, Ordering::AcqRel);
        Slot::Overflow
    } else {
        drop(client);
        let max = shared.config.max_connections;
        shared.record(
            id,
            closed(format!(
                "more than {max} connections at once (the proxy's bound)"
            )),
        );
        return;
    };
    let held = Held {
        shared: Arc::clone(shared),
        slot,
    };
    let thread = std::thread::Builder::new()
        .name("ptd-egress-conn".into())
        .spawn(move || {
            let connection = conn::serve(&held.shared, id, client, slot);
            held.shared.record(id, connection);
        });
    match thread {
        Ok(thread) => lock(&shared.threads).push(thread),
        // The closure, `held` with it, was dropped: its slot is free again.
        Err(e) => shared.record(
            id,
            closed(format!("the proxy could not start a thread: {e}")),
        ),
    }
}

/// A connection's slot, free again when its thread ends (however it ends).
struct Held {
    shared: Arc<Shared>,
    slot: Slot,
}

impl Drop for Held {
    fn drop(&mut self) {
        let counter = match self.slot {
            Slot::Served => &self.shared.active,
            Slot::Overflow => &self.shared.overflow,
        };
        counter.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The record of a connection closed at once, unread.
fn closed(reason: String) -> Connection {
    Connection {
        host: String::new(),
        port: 0,
        allowed: false,
        reason: Some(reason),
        bytes_up: 0,
        bytes_down: 0,
    }
}

#[cfg(test)]
mod tests {
    /// The dispatcher may keep the proxy on another thread than the one that started it.
    #[test]
    fn a_proxy_can_move_between_threads() {
        fn movable<T: Send + Sync>() {}
        movable::<super::Proxy>();
        movable::<super::Report>();
    }
}
