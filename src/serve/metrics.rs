//! `serve`'s `/metrics` (Prometheus text format 0.0.4) and its log lines: every stderr line is
//! one JSON object (SPEC §19.2), never a payload, a token or a host path.

use ptd_telemetry::DURATION_BUCKETS;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most (tool, status) series of `gen_ai_execute_tool_duration_seconds`: a caller names
/// the tool, so past this many every new one is counted under the tool `[other]`.
const MAX_TOOL_SERIES: usize = 256;
/// The most codes of `parent_tool_calls_total` (an adapter words its own codes), the same way.
const MAX_CODE_SERIES: usize = 256;
/// How long a scrape waits for the ledger to count the pending approvals.
const LEDGER_WAIT: Duration = Duration::from_secs(1);

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
    /// `--ledger`: where `parent_tool_approvals_pending` is read at each scrape.
    ledger: Option<PathBuf>,
}

/// One histogram of SPEC §20's `gen_ai.execute_tool.duration`: counts per bucket (not
/// cumulative; the last is over every bound), the sum, the count.
#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: [u64; DURATION_BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        let slot = DURATION_BUCKETS
            .iter()
            .position(|le| secs <= *le)
            .unwrap_or(DURATION_BUCKETS.len());
        self.buckets[slot] += 1;
        self.sum += secs;
        self.count += 1;
    }
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
    /// `gen_ai_execute_tool_duration_seconds`, by tool and envelope status.
    tools: BTreeMap<(String, String), Histogram>,
    /// `parent_tool_calls_total`, by error code ("" when none).
    codes: BTreeMap<String, u64>,
}

/// `key`'s entry of `map`, or `other`'s once `map` holds `max` keys.
fn bounded<K: Ord, V: Default>(map: &mut BTreeMap<K, V>, key: K, other: K, max: usize) -> &mut V {
    let key = if map.len() >= max && !map.contains_key(&key) {
        other
    } else {
        key
    };
    map.entry(key).or_default()
}

impl Metrics {
    /// The metrics of a server with this `--ledger`.
    pub(crate) fn with_ledger(ledger: Option<PathBuf>) -> Metrics {
        Metrics {
            ledger,
            ..Metrics::default()
        }
    }

    /// One dispatch of `tool` answered with an envelope of `status` and `code`, after `took`.
    /// The labels are the envelope's, which the child dispatcher already redacted.
    pub(crate) fn dispatched(&self, tool: &str, status: &str, code: &str, took: Duration) {
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
        let series = (tool.to_string(), status.to_string());
        let other = ("[other]".to_string(), status.to_string());
        bounded(&mut counts.tools, series, other, MAX_TOOL_SERIES).observe(secs);
        *bounded(
            &mut counts.codes,
            code.to_string(),
            "[other]".into(),
            MAX_CODE_SERIES,
        ) += 1;
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

    /// The text of `/metrics`, with `approvals_pending` when the ledger was read.
    pub(crate) fn render(&self, approvals_pending: Option<u64>) -> String {
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
        render_tool_metrics(&mut out, &counts);
        if let Some(pending) = approvals_pending {
            let name = "parent_tool_approvals_pending";
            let _ = writeln!(
                out,
                "# HELP {name} Approvals pending in the ledger (not decided, not expired).\n# TYPE {name} gauge\n{name} {pending}"
            );
        }
        out
    }

    /// The ledger this server was given, if any (for [`approvals_pending`]).
    pub(crate) fn ledger(&self) -> Option<PathBuf> {
        self.ledger.clone()
    }
}

/// SPEC §20's metrics in Prometheus form: `gen_ai_execute_tool_duration_seconds` by tool and
/// status, `parent_tool_calls_total` by code.
fn render_tool_metrics(out: &mut String, counts: &Counts) {
    let name = "gen_ai_execute_tool_duration_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} The time of one tool call (gen_ai.execute_tool.duration), by tool and status.\n# TYPE {name} histogram"
    );
    for ((tool, status), h) in &counts.tools {
        let labels = format!(
            "gen_ai_tool_name=\"{}\",parent_tool_status=\"{}\"",
            label(tool),
            label(status)
        );
        let mut cumulative = 0;
        for (le, n) in DURATION_BUCKETS.iter().zip(h.buckets.iter()) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels},le=\"+Inf\"}} {}\n{name}_sum{{{labels}}} {}\n{name}_count{{{labels}}} {}",
            h.count, h.sum, h.count
        );
    }
    let name = "parent_tool_calls_total";
    let _ = writeln!(
        out,
        "# HELP {name} Tool calls, by the envelope's error code (empty when none).\n# TYPE {name} counter"
    );
    for (code, n) in &counts.codes {
        let _ = writeln!(out, "{name}{{code=\"{}\"}} {n}", label(code));
    }
}

/// A Prometheus label value: backslash, double quote and line feed escaped.
fn label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The approvals pending in the ledger at `path` (not decided, not expired), or `None` when it
/// cannot be read within [`LEDGER_WAIT`] (a ledger not made yet included). Blocks: call from
/// a thread that may.
pub(crate) fn approvals_pending(path: &std::path::Path) -> Option<u64> {
    let location = match path.to_str() {
        Some(text) => ptd_ledger::Location::parse(text).ok()?,
        None => ptd_ledger::Location::File(path.to_path_buf()),
    };
    let env = ptd_sys::hostenv::HostEnv::process();
    let mut ledger =
        ptd_ledger::Ledger::open_existing_at(&location, &env, Instant::now() + LEDGER_WAIT).ok()?;
    let filter = ptd_ledger::ApprovalFilter {
        pending_only: true,
        session_key: None,
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let approvals = ledger.approvals(&filter).ok()?;
    Some(approvals.iter().filter(|a| !a.expired_at(now_ms)).count() as u64)
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
