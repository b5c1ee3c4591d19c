//! Running one process and checking it before it counts, and the statistics of its samples.

use super::{REQUEST_ID, TOOL};
use std::fs::File;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What one whole-process run cost.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    wall: Duration,
    /// User + system time of the process and everything it reaped.
    cpu: Duration,
    /// Peak resident set of the largest of them, bytes.
    pub(crate) max_rss: u64,
}

/// What a run must have printed to count.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expect {
    /// At least this many bytes on stdout (the big answer must have come through).
    pub(crate) min_stdout: usize,
    /// Text the end of the envelope must hold (`diagnostics.ledger`), if any.
    pub(crate) tail: Option<&'static str>,
}

/// Spawn `cmd` with `stdin` from a file, read its stdout to the end (keeping the first and
/// last bytes, counting the rest), wait for it with `wait4`, and check it before returning
/// what it cost.
// The child is reaped by `wait4` (not `Child::wait`), which also reports its resource usage.
#[allow(clippy::zombie_processes)]
pub(crate) fn run_checked(cmd: &mut Command, stdin: &Path, expect: Expect) -> Sample {
    let start = Instant::now();
    let mut child = cmd
        .stdin(File::open(stdin).expect("the request file opens"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("{cmd:?} cannot start: {err}"));
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    // stderr is small (empty on success); read it on a thread so that neither pipe can fill.
    let err_reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        text
    });
    let mut head = Vec::with_capacity(512);
    let mut tail = Vec::with_capacity(4096);
    let mut total = 0usize;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => panic!("reading stdout of {cmd:?}: {err}"),
        };
        total += n;
        let room = 512usize.saturating_sub(head.len());
        head.extend_from_slice(&buf[..n.min(room)]);
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 64 * 1024 {
            tail.drain(..tail.len() - 4096);
        }
    }
    let (status, usage) = wait4(child.id());
    let wall = start.elapsed();
    let err_text = err_reader.join().unwrap_or_default();
    let why = check(status, &head, &tail, total, expect);
    if let Some(why) = why {
        panic!(
            "a run did not do what it claims, so nothing is reported: {why}\n  command: {cmd:?}\n  stdout begins: {}\n  stderr: {}",
            String::from_utf8_lossy(&head),
            String::from_utf8_lossy(&err_text)
        );
    }
    Sample {
        wall,
        cpu: usage.0,
        max_rss: usage.1,
    }
}

/// Why a run does not count, if it does not.
fn check(
    status: ExitStatus,
    head: &[u8],
    tail: &[u8],
    total: usize,
    expect: Expect,
) -> Option<String> {
    if !status.success() {
        return Some(match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (_, Some(sig)) => format!("killed by signal {sig}"),
            _ => "no exit status".into(),
        });
    }
    let head = String::from_utf8_lossy(head);
    let wanted = [
        r#""schema":"wp-codebox/parent-tool-result/v1""#.to_string(),
        format!(r#""request_id":"{REQUEST_ID}""#),
        format!(r#""tool":"{TOOL}""#),
        r#""status":"succeeded""#.to_string(),
    ];
    if let Some(missing) = wanted.iter().find(|w| !head.contains(w.as_str())) {
        return Some(format!("stdout does not hold {missing}"));
    }
    if head.contains(r#""error":"#) {
        return Some("the envelope carries an error".into());
    }
    if !tail.ends_with(b"}\n") {
        return Some("stdout does not end with one complete envelope".into());
    }
    if let Some(wanted) = expect.tail {
        if !String::from_utf8_lossy(tail).contains(wanted) {
            return Some(format!("the end of stdout does not hold {wanted}"));
        }
    }
    if total < expect.min_stdout {
        return Some(format!(
            "stdout holds {total} bytes, fewer than the {} expected",
            expect.min_stdout
        ));
    }
    None
}

/// `wait4(pid)`: its exit status, and (CPU time, peak RSS in bytes) of it and everything it
/// reaped.
fn wait4(pid: u32) -> (ExitStatus, (Duration, u64)) {
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 writes to the two locals we own and pass by valid pointers; `pid` is
        // our own unreaped child (std's `Child` never waits on drop), so it names that child.
        let got = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
        if got == pid as libc::pid_t {
            break;
        }
        let err = std::io::Error::last_os_error();
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::Interrupted,
            "wait4({pid}): {err}"
        );
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    let cpu = time(usage.ru_utime) + time(usage.ru_stime);
    // ru_maxrss is in KiB on Linux.
    let rss = usage.ru_maxrss as u64 * 1024;
    (ExitStatus::from_raw(status), (cpu, rss))
}

// ---------------------------------------------------------------------------------------------
// Statistics.

/// Samples of one variant.
#[derive(Debug, Default)]
pub(crate) struct Series {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
    pub(crate) max_rss: u64,
}

impl Series {
    pub(crate) fn push(&mut self, s: Sample) {
        self.wall.push(s.wall);
        self.cpu.push(s.cpu);
        self.max_rss = self.max_rss.max(s.max_rss);
    }

    pub(crate) fn wall(&self) -> Stats {
        Stats::of(&self.wall)
    }

    pub(crate) fn cpu(&self) -> Stats {
        Stats::of(&self.cpu)
    }

    /// The median over the rounds of this series' wall time less `other`'s in the same round,
    /// in milliseconds: a difference less moved by load that changes from round to round.
    pub(crate) fn paired_difference(&self, other: &Series) -> f64 {
        let mut ms: Vec<f64> = self
            .wall
            .iter()
            .zip(&other.wall)
            .map(|(a, b)| (a.as_secs_f64() - b.as_secs_f64()) * 1e3)
            .collect();
        ms.sort_by(f64::total_cmp);
        ms[ms.len() / 2]
    }
}

/// Median, mean, 95th percentile and minimum, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stats {
    pub(crate) median: f64,
    pub(crate) mean: f64,
    pub(crate) p95: f64,
    pub(crate) min: f64,
}

impl Stats {
    fn of(samples: &[Duration]) -> Stats {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
        Stats {
            median: at(0.5),
            mean: ms.iter().sum::<f64>() / ms.len() as f64,
            p95: at(0.95),
            min: ms[0],
        }
    }
}

pub(crate) fn verdict(ratio: f64, target: f64) -> &'static str {
    if ratio <= target {
        "met"
    } else {
        "NOT met"
    }
}

/// The order to run `n` variants in, in round `round`: a different shuffle each round, so that
/// no variant always follows the same one (a run leaves the caches warm for the next run of
/// the same binary, which a fixed order would hand to the same variant every round).
pub(crate) fn order(n: usize, round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = (round as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    order
}
