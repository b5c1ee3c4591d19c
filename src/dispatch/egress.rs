//! The egress proxy's part of one run (SPEC §17): started beside the adapter when its
//! confinement has one (`--network allow:`), finished after the adapter's tree is reaped,
//! and turned into `diagnostics.dispatch.network`. The main job and `delegation run` both
//! use it.
//!
//! Must not: decide what may be reached (`ptd_sys::confine::allow` and `ptd-egress` do),
//! outlive the run (every path that starts a proxy finishes it: [`Egress`] finishes on drop).

use ptd_egress::{Config, Proxy, Report};
use ptd_sys::confine::{Options, Prepared, Unavailable};
use ptd_sys::hostenv::HostEnv;
use ptd_verdict::DispatchError;
use ptd_wire::envelope::result::{ConnectionDiagnostics, NetworkDiagnostics};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the proxy may take past the run's own time: the kill ladder's grace and the reaping
/// (the run ends it sooner: [`Egress::finish`]).
const AFTER_DEADLINE: Duration = Duration::from_secs(5);

/// A running proxy; finished (and reported) once, or on drop.
pub(crate) struct Egress(Option<Proxy>);

/// Start the proxy for a run whose confinement `prepared` has one (`Ok(None)` otherwise); it
/// waits for the adapter's child to hand it the listener. `timeout_ms` is the run's own bound.
pub(crate) fn start(
    prepared: &Prepared,
    options: &Options,
    timeout_ms: u64,
    env: &HostEnv,
) -> Result<Option<Egress>, DispatchError> {
    let Some(receiver) = prepared.proxy_receiver() else {
        return Ok(None);
    };
    let receiver = Arc::new(receiver);
    let (waiting, cancelling) = (receiver.clone(), receiver);
    let bound = Duration::from_millis(timeout_ms) + AFTER_DEADLINE;
    let config = Config {
        allow: options.network_allow.clone(),
        max_bytes: options
            .network_max_bytes
            .unwrap_or(ptd_egress::DEFAULT_MAX_BYTES),
        max_connections: ptd_egress::DEFAULT_MAX_CONNECTIONS,
        deadline: Instant::now() + bound,
        sources: ptd_endpoint::sources(env),
    };
    let proxy = Proxy::pending(
        Box::new(move || waiting.receive(bound)),
        Box::new(move || cancelling.close()),
        config,
    )
    .map_err(|e| {
        DispatchError::from(Unavailable {
            missing: vec![(
                "network_proxy".into(),
                format!("cannot start the egress proxy: {e}"),
            )],
        })
    })?;
    Ok(Some(Egress(Some(proxy))))
}

impl Egress {
    /// Stop the proxy (every connection closed, every thread joined) and say what it did.
    pub(crate) fn finish(mut self) -> NetworkDiagnostics {
        let report = self.0.take().map(Proxy::finish).unwrap_or_default();
        diagnostics(report)
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        if let Some(proxy) = self.0.take() {
            let _ = proxy.finish();
        }
    }
}

/// `diagnostics.dispatch.network` of a proxy's report.
fn diagnostics(report: Report) -> NetworkDiagnostics {
    NetworkDiagnostics {
        mode: "allow",
        connections: report
            .connections
            .into_iter()
            .take(NetworkDiagnostics::LISTED)
            .map(|c| ConnectionDiagnostics {
                host: c.host,
                port: c.port,
                allowed: c.allowed,
                reason: c.reason,
                bytes_up: c.bytes_up,
                bytes_down: c.bytes_down,
            })
            .collect(),
        more: report.more,
        allowed: report.allowed,
        refused: report.refused,
    }
}
