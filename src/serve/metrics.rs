//! `serve`'s `/metrics` (Prometheus text format 0.0.4) and its log lines: every stderr line is
//! one JSON object (SPEC §19.2), never a payload, a token or a host path.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The duration histogram's upper bounds, in seconds.
const BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// What `/metrics` shows.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    counts: Mutex<Counts>,
    in_flight: AtomicU64,
    connections: AtomicU64,
}

#[derive(Debug, Default)]
struct Counts {
    /// Dispatches answered, by envelope status and error code ("" when none).
    dispatches: BTreeMap<(String, String), u64>,
    /// Responses, by HTTP status.
    responses: BTreeMap<u16, u64>,
    /// The dispatch duration histogram: counts per bucket (not cumulative), the sum, the count.
    buckets: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
    ledger_errors: u64,
    reloads_refused: u64,
}

impl Metrics {
    /// One dispatch answered with an envelope of `status` and `code`, after `took`.
    pub(crate) fn dispatched(&self, status: &str, code: &str, took: Duration) {
        let Ok(mut counts) = self.counts.lock() else {
            return;
        };
        *counts
            .dispatches
            .entry((status.to_string(), code.to_string()))
            .or_default() += 1;
        let secs = took.as_secs_f64();
        if let Some(slot) = BUCKETS.iter().position(|le| secs <= *le) {
            counts.buckets[slot] += 1;
        }
        counts.sum += secs;
        counts.count += 1;
        if code == "ledger_unavailable" {
            counts.ledger_errors += 1;
        }
    }

    /// One HTTP response of `status`.
    pub(crate) fn responded(&self, status: u16) {
        if let Ok(mut counts) = self.counts.lock() {
            *counts.responses.entry(status).or_default() += 1;
        }
    }

    /// A reload that was refused (the old tokens kept).
    pub(crate) fn reload_refused(&self) {
        if let Ok(mut counts) = self.counts.lock() {
            counts.reloads_refused += 1;
        }
    }

    /// The gauge of dispatches in flight, moved by `delta`.
    pub(crate) fn in_flight(&self, up: bool) {
        if up {
            self.in_flight.fetch_add(1, Ordering::SeqCst);
        } else {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The gauge of open connections, moved up or down.
    pub(crate) fn connection(&self, up: bool) {
        if up {
            self.connections.fetch_add(1, Ordering::SeqCst);
        } else {
            self.connections.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The text of `/metrics`.
    pub(crate) fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let Ok(counts) = self.counts.lock() else {
            return out;
        };
        out.push_str("# HELP ptd_serve_dispatches_total Dispatches answered with an envelope, by its status and error code.\n# TYPE ptd_serve_dispatches_total counter\n");
        for ((status, code), n) in &counts.dispatches {
            let _ = writeln!(
                out,
                "ptd_serve_dispatches_total{{status=\"{status}\",code=\"{code}\"}} {n}"
            );
        }
        out.push_str("# HELP ptd_serve_http_responses_total HTTP responses, by status.\n# TYPE ptd_serve_http_responses_total counter\n");
        for (status, n) in &counts.responses {
            let _ = writeln!(
                out,
                "ptd_serve_http_responses_total{{code=\"{status}\"}} {n}"
            );
        }
        out.push_str("# HELP ptd_serve_dispatch_duration_seconds Time from the request's body read to its envelope.\n# TYPE ptd_serve_dispatch_duration_seconds histogram\n");
        let mut cumulative = 0;
        for (le, n) in BUCKETS.iter().zip(counts.buckets.iter()) {
            cumulative += n;
            let _ = writeln!(
                out,
                "ptd_serve_dispatch_duration_seconds_bucket{{le=\"{le}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "ptd_serve_dispatch_duration_seconds_bucket{{le=\"+Inf\"}} {}\nptd_serve_dispatch_duration_seconds_sum {}\nptd_serve_dispatch_duration_seconds_count {}",
            counts.count, counts.sum, counts.count
        );
        let gauges = [
            (
                "ptd_serve_in_flight",
                "Dispatches running now.",
                self.in_flight.load(Ordering::SeqCst),
            ),
            (
                "ptd_serve_connections",
                "Connections open now.",
                self.connections.load(Ordering::SeqCst),
            ),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        }
        let counters = [
            (
                "ptd_serve_ledger_errors_total",
                "Dispatches answered ledger_unavailable.",
                counts.ledger_errors,
            ),
            (
                "ptd_serve_reloads_refused_total",
                "SIGHUP reloads refused (the old tokens kept).",
                counts.reloads_refused,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        }
        out
    }
}

/// Print one log line: `fields` with the time and `event` first.
pub(crate) fn log(event: &str, fields: serde_json::Value) {
    let mut line = serde_json::Map::new();
    line.insert(
        "time".into(),
        humantime::format_rfc3339_millis(std::time::SystemTime::now())
            .to_string()
            .into(),
    );
    line.insert("event".into(), event.into());
    if let serde_json::Value::Object(fields) = fields {
        line.extend(fields);
    }
    stderr_line!("{}", serde_json::Value::Object(line));
}
