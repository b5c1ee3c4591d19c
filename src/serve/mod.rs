//! `parent-tool-dispatch serve` (SPEC §19.2): the other end of `host_endpoint`. An HTTP/1.1
//! server (hyper on a tokio runtime that exists only inside this subcommand: the main job
//! never builds one) whose every dispatch is a child dispatcher process (`child.rs`).
//!
//! Signals are tokio's (`tokio::signal::unix`), not `ptd_sys::interrupt`'s: the server is an
//! event loop that must wake on SIGTERM, SIGINT and SIGHUP while it waits for connections, and
//! tokio's handlers are streams that loop selects on; `interrupt.rs` records a signal for one
//! job's `exec` to forward to its adapter, which `serve` has none of (its children are
//! dispatchers in sessions of their own, stopped by the ladder). Only one of the two is ever
//! installed in a process: `serve` never calls `Interrupts::install`.

mod child;
mod health;
mod http;
mod metrics;
mod setup;
mod tokens;

use crate::cli::ServeArgs;
use child::Launcher;
use hyper::body::Incoming;
use hyper::Request;
use metrics::{log, Metrics};
use ptd_wire::error::exit;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokens::{Caller, Tokens};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::Semaphore;

/// What every connection shares.
pub(crate) struct State {
    tokens: RwLock<Arc<Tokens>>,
    launcher: Launcher,
    metrics: Metrics,
    in_flight: Arc<Semaphore>,
    max_request_bytes: u64,
    body_timeout: Duration,
    /// Turned on when the drain ran out: waiting dispatches start their child's ladder.
    stop: Arc<AtomicBool>,
    /// Off once the server is stopping.
    healthy: AtomicBool,
    default_session: Option<String>,
    /// The private copy of the policy the children read (`setup::PolicyCopy`).
    policy: Option<setup::PolicyCopy>,
    /// The ledger `/healthz` opens, and its last answer.
    ledger: health::LedgerCheck,
}

impl State {
    /// The caller `req`'s bearer token names, if any.
    fn authenticate(&self, req: &Request<Incoming>) -> Option<Caller> {
        let token = http::bearer(req)?;
        let tokens = self.tokens.read().ok()?.clone();
        tokens.check(token)
    }

    fn healthy(&self) -> bool {
        self.healthy.load(Ordering::SeqCst)
    }
}

/// `serve`: check everything, then serve until SIGTERM or SIGINT; exit 0 after the drain, 2
/// for anything refused at start (one JSON line says why), 70 when the runtime cannot be
/// built, 69 when the address cannot be listened on.
pub(crate) fn run(args: &ServeArgs) -> u8 {
    let ready = match setup::prepare(args) {
        Ok(ready) => ready,
        Err(why) => {
            log("refused", json!({ "error": why }));
            return exit::USAGE;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(args.max_in_flight as usize + 8)
        .enable_io()
        .enable_time()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            log("refused", json!({ "error": format!("no runtime: {err}") }));
            return exit::INTERNAL;
        }
    };
    let code = runtime.block_on(serve(args, ready));
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

/// Bind, serve, drain.
async fn serve(args: &ServeArgs, ready: setup::Ready) -> u8 {
    let listener = match TcpListener::bind(args.listen).await {
        Ok(listener) => listener,
        Err(err) => {
            log(
                "refused",
                json!({ "error": format!("cannot listen: {err}") }),
            );
            return exit::UNAVAILABLE;
        }
    };
    let signals = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    );
    let (Ok(term), Ok(int), Ok(hup)) = signals else {
        log(
            "refused",
            json!({ "error": "the signal handlers cannot be installed" }),
        );
        return exit::UNAVAILABLE;
    };
    let state = Arc::new(State {
        tokens: RwLock::new(Arc::new(ready.tokens)),
        launcher: ready.launcher,
        metrics: Metrics::with_ledger(args.ledger.ledger.clone()),
        in_flight: Arc::new(Semaphore::new(args.max_in_flight as usize)),
        max_request_bytes: args.run.max_request_bytes,
        body_timeout: Duration::from_millis(args.body_timeout_ms),
        stop: Arc::new(AtomicBool::new(false)),
        healthy: AtomicBool::new(true),
        default_session: args.ledger.session.clone(),
        policy: ready.policy,
        ledger: health::LedgerCheck::new(ready.ledger),
    });
    log(
        "start",
        json!({
            "listen": listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            "tls": ready.tls.is_some(),
            "tokens": state.tokens.read().map(|t| t.len()).unwrap_or(0),
            "max_connections": args.max_connections,
            "max_in_flight": args.max_in_flight,
            "pid": std::process::id(),
        }),
    );
    let accept = setup::Accept {
        listener,
        tls: ready.tls,
        connections: Arc::new(Semaphore::new(args.max_connections as usize)),
        header_timeout: Duration::from_millis(args.header_timeout_ms),
    };
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let signal = accept.run(&state, &graceful, (term, int, hup), args).await;
    drain(&state, graceful, args).await;
    log("stop", json!({ "signal": signal }));
    exit::SUCCESS
}

/// Stop: no more requests; what is in flight finishes within `--drain-ms`, then the children
/// still running get the ladder and their requests an `internal_error` envelope.
async fn drain(
    state: &State,
    graceful: hyper_util::server::graceful::GracefulShutdown,
    args: &ServeArgs,
) {
    state.healthy.store(false, Ordering::SeqCst);
    let shutdown = graceful.shutdown();
    tokio::pin!(shutdown);
    let drain = Duration::from_millis(args.drain_ms);
    if tokio::time::timeout(drain, &mut shutdown).await.is_ok() {
        return;
    }
    state.stop.store(true, Ordering::SeqCst);
    let ladder = Duration::from_millis(args.run.kill_grace_ms) + Duration::from_secs(2);
    let _ = tokio::time::timeout(ladder, &mut shutdown).await;
    // Requests still reading or waiting are cut; the children are gone (a blocking dispatch
    // that is not has its ladder running and is reaped before the runtime's shutdown ends).
    let until = tokio::time::Instant::now() + ladder;
    while state.in_flight.available_permits() < args.max_in_flight as usize
        && tokio::time::Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SIGHUP: the token file and the policy read again; a file that does not load is refused
/// and the old one kept (one log line either way).
fn reload(state: &State, args: &ServeArgs) {
    match Tokens::load(&args.token_file) {
        Ok(tokens) => {
            let count = tokens.len();
            if let Ok(mut slot) = state.tokens.write() {
                *slot = Arc::new(tokens);
            }
            log("reload", json!({ "what": "tokens", "tokens": count }));
        }
        Err(why) => {
            state.metrics.reload_refused();
            log(
                "reload_refused",
                json!({ "what": "tokens", "error": why, "kept": "the previous tokens" }),
            );
        }
    }
    // The children read the server's copy of the last policy that loaded: a new file that
    // does not load is refused and the copy kept, so calls go on under the old policy.
    if let Some(copy) = &state.policy {
        match copy.refresh(args) {
            Ok(checked) => {
                state.ledger.set(checked.ledger);
                log("reload", json!({ "what": "policy" }));
            }
            Err(why) => {
                state.metrics.reload_refused();
                log(
                    "reload_refused",
                    json!({ "what": "policy", "error": why, "kept": "the previous policy" }),
                );
            }
        }
    }
}
