//! One dispatch of `serve`: this same binary run as a child dispatcher (one adapter run per
//! process, ARCHITECTURE.md) through `exec::Watched`, the path `replay` runs its `argv` cases
//! on: the request on its stdin, its stdout the answer. Bounded by the bridge's timeout plus
//! the kill ladder, and stopped by the ladder at once when the server's drain runs out. A child
//! that dies or prints nothing becomes an `internal_error` envelope built by the main job's own
//! envelope code.

use crate::dispatch::DispatchError;
use ptd_sys::exec::{self, Target, Watch, Watched};
use ptd_wire::envelope::request::Echo;
use ptd_wire::envelope::result::Audience;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Past the child's own bound, how long it gets before the ladder (it prints its envelope
/// after its adapter's ladder).
const MARGIN: Duration = Duration::from_secs(5);
/// Room above `--max-output-bytes` for the envelope around an adapter's output.
const STDOUT_SLACK_BYTES: u64 = 1024 * 1024;
/// How much of a child's stderr is kept (never logged: only counted).
const STDERR_KEEP_BYTES: u64 = 64 * 1024;
/// How often a waiting dispatch looks at the drain's stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// How every child dispatcher of this server is started: fixed at start.
#[derive(Debug, Clone)]
pub(crate) struct Launcher {
    /// This binary.
    pub(crate) exe: PathBuf,
    /// Its argv: the name, then the server's host options.
    pub(crate) argv: Vec<OsString>,
    /// Its environment, without the session variable.
    pub(crate) env: Vec<(OsString, OsString)>,
    /// The variable the child reads its host session from (`--session`'s, or the policy's
    /// `session_env`).
    pub(crate) session_var: String,
    /// The child's whole bound, before the ladder.
    pub(crate) bound: Duration,
    /// The ladder's grace between SIGTERM and SIGKILL.
    pub(crate) grace: Duration,
    /// The most of the child's stdout kept.
    pub(crate) stdout_cap: u64,
}

/// The caller's W3C trace context (the request's `traceparent` and `tracestate` headers,
/// validated): the child dispatcher's `TRACEPARENT` and `TRACESTATE`, so that its call's
/// span is a child of the caller's (SPEC §20).
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceHeaders {
    pub(crate) traceparent: Option<String>,
    pub(crate) tracestate: Option<String>,
}

impl TraceHeaders {
    /// The context of `traceparent` and `tracestate` header values: a malformed
    /// `traceparent` is ignored (and the `tracestate` with it), as the main job ignores a
    /// malformed `TRACEPARENT`; a malformed `tracestate` alone is dropped.
    pub(crate) fn of(traceparent: Option<&[u8]>, tracestate: Option<&[u8]>) -> TraceHeaders {
        fn text(v: Option<&[u8]>) -> Option<&str> {
            v.and_then(|v| std::str::from_utf8(v).ok())
        }
        let Some(parent) = text(traceparent).and_then(ptd_telemetry::SpanContext::parse) else {
            return TraceHeaders::default();
        };
        TraceHeaders {
            traceparent: Some(parent.traceparent()),
            tracestate: text(tracestate).and_then(ptd_telemetry::tracestate),
        }
    }

    /// The child's environment: the server's own `TRACEPARENT`/`TRACESTATE` are never a
    /// request's parent; the caller's are set when it sent valid ones.
    fn apply(&self, env: &mut Vec<(OsString, OsString)>) {
        env.retain(|(k, _)| k != "TRACEPARENT" && k != "TRACESTATE");
        if let Some(parent) = &self.traceparent {
            env.push(("TRACEPARENT".into(), parent.into()));
            if let Some(state) = &self.tracestate {
                env.push(("TRACESTATE".into(), state.into()));
            }
        }
    }
}

/// What a dispatch answered: the envelope's bytes, exactly as the child printed them, and
/// whether it had to be made here instead (the child died or printed nothing).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) envelope: Vec<u8>,
    pub(crate) made_here: bool,
}

impl Launcher {
    /// The child's bound: the bridge's timeout and the kill ladder, as `exec::bound` counts
    /// them, plus a margin for its own start and conclusion.
    pub(crate) fn bound_for(timeout: Duration, grace: Duration) -> Duration {
        exec::bound(timeout, grace) + MARGIN
    }

    /// Run one request (`body`) for a caller of host session `session`, in the caller's
    /// trace context `trace`; `stop` turns true when the drain ran out. Call from a thread
    /// that may block (the child's parent-death signal is tied to it).
    pub(crate) fn dispatch(
        &self,
        body: Vec<u8>,
        echo: &Echo,
        (session, trace): (Option<&str>, &TraceHeaders),
        stop: &Arc<AtomicBool>,
    ) -> Answer {
        match self.run_child(body, session, trace, stop) {
            Ok(stdout) if !stdout.is_empty() => Answer {
                envelope: stdout,
                made_here: false,
            },
            Ok(_) => internal(echo, "the child dispatcher printed no envelope"),
            Err(why) => internal(echo, &why),
        }
    }

    fn run_child(
        &self,
        body: Vec<u8>,
        session: Option<&str>,
        trace: &TraceHeaders,
        stop: &Arc<AtomicBool>,
    ) -> Result<Vec<u8>, String> {
        let mut env = self.env.clone();
        trace.apply(&mut env);
        if let Some(session) = session {
            env.push((OsString::from(&self.session_var), OsString::from(session)));
        }
        let (mut child, pipes) = Watched::spawn(&self.exe, &self.argv, env, None)
            .map_err(|err| format!("the child dispatcher could not be started: {err}"))?;
        let (tx, rx) = mpsc::channel();
        if let Some(mut stdin) = pipes.stdin {
            // A child that stops reading (request too large) closes the pipe: not an error.
            std::thread::spawn(move || {
                let _ = stdin.write_all(&body);
            });
        }
        let (stdout, stderr) = (pipes.stdout, pipes.stderr);
        let cap = self.stdout_cap;
        let out_tx = tx.clone();
        std::thread::spawn(move || {
            let _ = out_tx.send((true, read_capped(stdout, cap)));
        });
        std::thread::spawn(move || {
            let _ = tx.send((false, read_capped(stderr, STDERR_KEEP_BYTES)));
        });
        let watch = self.wait(&mut child, stop);
        let stdout = receive_stdout(&rx, Duration::from_secs(2));
        match watch {
            Watch::Exited(status) if status.code().is_some() => match stdout {
                Some((out, false)) => Ok(out),
                Some((_, true)) => Err("the child dispatcher's answer was over its bound".into()),
                None => Err("the child dispatcher's stdout was left open".into()),
            },
            Watch::Exited(status) => Err(format!(
                "the child dispatcher was ended by {}",
                std::os::unix::process::ExitStatusExt::signal(&status)
                    .map(ptd_sys::signal::signal_name)
                    .unwrap_or_else(|| "a signal".into())
            )),
            Watch::Stopped(_) => Err(if stop.load(Ordering::SeqCst) {
                "the server stopped before the child dispatcher finished".into()
            } else {
                "the child dispatcher did not finish within its bound and was stopped".into()
            }),
        }
    }

    /// Wait for the child up to its bound, or until the drain runs out; then the ladder.
    fn wait(&self, child: &mut Watched, stop: &AtomicBool) -> Watch {
        let until = Instant::now() + self.bound;
        loop {
            let now = Instant::now();
            if now >= until || stop.load(Ordering::SeqCst) {
                return child.wait_within(Duration::ZERO, self.grace);
            }
            if child.wait_exit((now + STOP_POLL).min(until)) {
                return child.wait_within(Duration::ZERO, self.grace);
            }
        }
    }
}

/// The `internal_error` envelope for `echo`, rendered like every envelope of the main job.
fn internal(echo: &Echo, why: &str) -> Answer {
    let err = DispatchError::Internal(why.to_string());
    let redactor = ptd_wire::redact::Redactor::new();
    let mut envelope = err
        .envelope(echo)
        .render(&redactor, Audience::Caller)
        .into_bytes();
    envelope.push(b'\n');
    Answer {
        envelope,
        made_here: true,
    }
}

/// The child's stdout, as its reader thread sent it, waiting at most `wait`.
fn receive_stdout(
    rx: &mpsc::Receiver<(bool, (Vec<u8>, bool))>,
    wait: Duration,
) -> Option<(Vec<u8>, bool)> {
    let until = Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, out)) => return Some(out),
            Ok((false, _)) => continue,
            Err(_) => return None,
        }
    }
}

/// Read a pipe to its end, keeping at most `cap` bytes; the flag says whether more came.
/// Reading goes on past the cap so that the writer never blocks on a full pipe.
fn read_capped(mut pipe: impl Read, cap: u64) -> (Vec<u8>, bool) {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let (mut kept, mut dropped) = (Vec::new(), false);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                dropped |= n > room;
            }
        }
    }
    (kept, dropped)
}

/// The bound of a child's stdout for `--max-output-bytes`.
pub(crate) fn stdout_cap(max_output_bytes: u64) -> u64 {
    max_output_bytes.saturating_add(STDOUT_SLACK_BYTES)
}
