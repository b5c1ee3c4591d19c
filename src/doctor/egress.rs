//! `doctor`'s `egress` row (SPEC §17.3): the egress proxy of `--network allow:` proved the way
//! an adapter meets it. `doctor` listens on two ports of the host's loopback — an echo server
//! the allow list names, and another port it does not — prepares the confinement with that
//! one rule, starts the proxy exactly as a run does (`crate::dispatch::egress`), and runs the
//! dispatcher's own probe inside the namespace: `egress_proxy` must reach the echo server
//! through the proxy (the control), `egress_refused` must be answered `403`, and
//! `egress_direct` (a connect that ignores the proxy) must find nothing.
//!
//! [`judge_lines`] is the judging alone, pure, so a proxy that let the unlisted port through
//! is tested without a broken proxy. Only `127.0.0.1` is ever a target.

use super::attack::{self, Answer, Attack};
use super::{row, unavailable, Row};
use ptd_sys::confine::allow::AllowRule;
use ptd_sys::confine::{Network, Options, Step};
use ptd_sys::exec::{self, SpawnError, Unconfinable};
use ptd_sys::hostenv::HostEnv;
use ptd_sys::interrupt::Interrupts;
use ptd_sys::probe::{self, Outcome, Probe};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The row's name.
pub const NAME: &str = "egress";

/// What `error.details.missing` names when the row cannot be set up.
pub const MISSING: &str = "network_proxy";

/// What the probe tries.
pub const ATTEMPT: &str =
    "reach a port the allow list does not name through the proxy, or any port directly";

/// The most connections the echo server takes.
const ECHO_CONNECTIONS: usize = 4;

/// The `egress` row for `options` (the row is asked for with `--network allow:`).
pub(crate) fn examine(options: &Options) -> Row {
    let requested = options.network == Network::Allow;
    match run(options) {
        Ok((lines, detail)) => row_from(requested, detail, lines),
        Err(Setup { missing, reason }) => row(NAME, requested, None, unavailable(missing, reason)),
    }
}

struct Setup {
    missing: String,
    reason: String,
}

fn setup(reason: impl Into<String>) -> Setup {
    Setup {
        missing: MISSING.into(),
        reason: reason.into(),
    }
}

/// How the probe's run went, as the row needs it.
pub(crate) enum Lines {
    /// It ran: its stdout's answers.
    Ran(Vec<(Attack, Answer)>),
    /// The kernel refused a confinement step.
    Refused(Step, i32),
}

/// An echo server on the host's loopback; it stops (and is joined) when dropped, or by
/// itself within the probe's timeout.
struct Echo {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn echo_server() -> std::io::Result<Echo> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let thread = std::thread::Builder::new()
        .name("doctor-echo".into())
        .spawn(move || {
            let deadline = Instant::now() + probe::PROBE_TIMEOUT;
            let mut served = 0;
            while served < ECHO_CONNECTIONS
                && !stopping.load(Ordering::SeqCst)
                && Instant::now() < deadline
            {
                match listener.accept() {
                    Ok((stream, _)) => {
                        served += 1;
                        echo(stream, deadline);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })?;
    Ok(Echo {
        port,
        stop,
        thread: Some(thread),
    })
}

/// Echo what `stream` sends until it closes, fails or `deadline` passes.
fn echo(mut stream: std::net::TcpStream, deadline: Instant) {
    use std::io::{Read, Write};
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let mut buf = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        let _ = stream.set_write_timeout(Some(left));
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

/// Set up, run the probe, finish the proxy: the probe's answers and the row's detail.
fn run(options: &Options) -> Result<(Lines, String), Setup> {
    let served = echo_server().map_err(|e| setup(format!("cannot listen on the loopback: {e}")))?;
    // Another port of the host's loopback, listening but not listed.
    let other = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| Ok((l.local_addr()?.port(), l)))
        .map_err(|e| setup(format!("cannot listen on the loopback: {e}")))?;
    let rule = AllowRule::parse(&format!("127.0.0.1:{}", served.port))
        .map_err(|e| setup(format!("cannot make the allow rule: {e}")))?;
    let options = Options {
        network: Network::Allow,
        network_allow: vec![rule],
        ..super::adapter::probe_options(options)
    };
    let program = std::env::current_exe()
        .map_err(|e| setup(format!("cannot find the dispatcher's own program: {e}")))?;
    let (p, q) = (served.port, other.0);
    let argv = vec![
        "parent-tool-dispatch".into(),
        attack::PROBE_WORD.into(),
        format!("{}:{p}", Attack::EgressProxy.word()),
        format!("{}:{q}", Attack::EgressRefused.word()),
        format!("{}:{p}", Attack::EgressDirect.word()),
    ];
    let mut spec = super::adapter::probe_spec(program, argv);
    let prepared = match spec.confine(&options, None) {
        Ok(Some(prepared)) => prepared,
        Ok(None) => return Err(setup("no confinement was prepared")),
        Err(Unconfinable::Unavailable(u)) => {
            return Err(Setup {
                missing: u.missing().join(","),
                reason: u.to_string(),
            })
        }
        Err(Unconfinable::Spawn(e)) => return Err(setup(e.to_string())),
    };
    let timeout_ms = u64::try_from(probe::PROBE_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
    let proxy = match crate::dispatch::egress::start(
        &prepared,
        &options,
        timeout_ms,
        &HostEnv::process(),
    ) {
        Ok(Some(proxy)) => proxy,
        Ok(None) => return Err(setup("the confinement has no proxy")),
        Err(e) => return Err(setup(e.to_string())),
    };
    let result = exec::run(spec, &Interrupts::none());
    let _ = proxy.finish();
    drop(served);
    drop(other);
    let detail = format!(
        "through the proxy on the namespace's 127.0.0.1:{} to 127.0.0.1:{p} (listed), 127.0.0.1:{q} (not listed)",
        ptd_sys::confine::proxy::PROXY_PORT
    );
    match result {
        Ok(finished) => Ok((
            Lines::Ran(
                String::from_utf8_lossy(&finished.stdout)
                    .lines()
                    .filter_map(attack::parse_line)
                    .collect(),
            ),
            detail,
        )),
        Err(SpawnError::Confinement(e)) => {
            Ok((Lines::Refused(e.step, e.errno.raw_os_error()), detail))
        }
        Err(e) => Err(setup(format!("the probe could not be started: {e}"))),
    }
}

/// The row from the probe's answers.
pub(crate) fn row_from(requested: bool, detail: String, lines: Lines) -> Row {
    match judge_lines(&lines) {
        Ok(outcome) => {
            let missing = match lines {
                Lines::Refused(step, _) => step.missing(),
                Lines::Ran(_) => MISSING,
            };
            let probe = Probe {
                mechanism: NAME,
                attempt: ATTEMPT,
                outcome,
                counter: None,
            };
            super::ran(NAME, requested, Some(detail), probe, missing)
        }
        Err(reason) => row(NAME, requested, Some(detail), unavailable(MISSING, reason)),
    }
}

/// The outcome of the three answers: not refused when the unlisted port or the direct
/// connect worked; lost when an answer is missing; refused (the direct connect's errno) when
/// the control reached the echo server, the unlisted port was `403` and the direct connect
/// was refused. `Err` with the reason when nothing was proven (the control failed, …).
pub(crate) fn judge_lines(lines: &Lines) -> Result<Outcome, String> {
    let answers = match lines {
        Lines::Ran(answers) => answers,
        Lines::Refused(step, errno) => {
            return Ok(Outcome::SetupFailed {
                step: *step,
                errno: *errno,
            })
        }
    };
    let answer = |attack: Attack| {
        answers
            .iter()
            .find(|(a, _)| *a == attack)
            .map(|(_, answer)| *answer)
    };
    let (through, refused, direct) = (
        answer(Attack::EgressProxy),
        answer(Attack::EgressRefused),
        answer(Attack::EgressDirect),
    );
    if refused == Some(Answer::Worked) || direct == Some(Answer::Worked) {
        return Ok(Outcome::NotRefused { attempt: 0 });
    }
    let (Some(through), Some(refused), Some(direct)) = (through, refused, direct) else {
        return Ok(Outcome::Lost);
    };
    if through != Answer::Worked {
        return Err(format!(
            "the control (the listed echo server through the proxy) failed: egress_proxy={}",
            through.text()
        ));
    }
    if refused != Answer::Refused(403) {
        return Err(format!(
            "the proxy did not answer 403 for the port not listed: egress_refused={}",
            refused.text()
        ));
    }
    match direct {
        Answer::Refused(errno) => Ok(Outcome::Refused { errno }),
        other => Err(format!(
            "the direct connect could not be tried: egress_direct={}",
            other.text()
        )),
    }
}
