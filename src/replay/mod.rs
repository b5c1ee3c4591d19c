//! `replay PATH…`: fixture cases and transcripts as a regression suite (SPEC §7).
//!
//! The flow, a module per step: `walk` turns the arguments into a sorted list of files;
//! `cases` reads each one (bounded, strict) into cases — a file that yields none becomes a
//! failed case that says why; `runner` obtains what the main job does for a case, through the
//! main job's own pipeline; `diff` compares that with the case's expectation; `bless` rewrites
//! expectations; `junit` writes the XML report. This module runs files on `--jobs` threads and
//! prints their reports in the sorted order as soon as each one's turn comes.
//!
//! Invariants:
//! - Output is deterministic: the same files and results give the same bytes whatever
//!   `--jobs` is (reports are printed in sorted order, one file's lines at a time, never
//!   interleaved), and no duration or timestamp is ever compared.
//! - Fail closed: every file named or found is accounted for — a case that passed, a case that
//!   failed, or a failure saying why the file is no case; zero cases run is a failure too.
//! - A panic in one case fails that case; it never takes the suite down.
//! - `N passed, N failed` is the last line on stdout.
//!
//! It must not judge answers, redact, or validate envelopes itself: the main job does that.

pub mod bless;
pub mod cases;
pub mod diff;
pub mod junit;
pub mod runner;
pub mod walk;

use crate::cli::ReplayArgs;
use cases::{Case, Loaded, Origin};
use diff::Difference;
use ptd_wire::error::exit;
use runner::Actual;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use walk::Source;

/// What a replay needs besides the files.
#[derive(Debug, Clone, Default)]
pub(crate) struct Settings {
    /// The dispatcher binary that runs `argv` cases (normally this very binary).
    pub exe: Option<PathBuf>,
    /// The bridge transcripts are replayed against (`--parent-tool-bridge`).
    pub bridge: Option<String>,
    /// `--filter`.
    pub filter: Option<String>,
    /// `--bless`.
    pub bless: bool,
    /// The confinement flags every `argv` case's dispatcher gets (`Options::to_flags`).
    pub confine: Vec<std::ffi::OsString>,
}

/// How a case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed,
    /// It failed, and `--bless` rewrote its expectation: these were the differences.
    Blessed {
        differences: Vec<Difference>,
    },
    Failed {
        /// Why the case could not be compared at all (not a case, could not run), if so.
        problem: Vec<String>,
        differences: Vec<Difference>,
        /// What helps to understand the failure: the envelope's error, the main job's stderr.
        notes: Vec<String>,
    },
}

/// One case's report.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseReport {
    /// The case's name (control characters escaped).
    pub name: String,
    /// The file it comes from, as printed.
    pub file: String,
    pub outcome: Outcome,
    /// Wall time of the case; reported in JUnit, never compared.
    pub duration: Duration,
}

impl CaseReport {
    /// Whether it counts as failed.
    pub fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Failed { .. })
    }

    /// The account below the case's line: the file, then problems, differences and notes.
    pub fn details(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match &self.outcome {
            Outcome::Passed => {}
            Outcome::Blessed { differences } => {
                lines.push(format!("file: {} (expect rewritten)", self.file));
                lines.extend(diff::render(differences));
            }
            Outcome::Failed {
                problem,
                differences,
                notes,
            } => {
                lines.extend(problem.iter().cloned());
                lines.extend(diff::render(differences));
                lines.push(format!("file: {}", self.file));
                lines.extend(notes.iter().cloned());
            }
        }
        lines.iter().map(|l| escape_controls(l)).collect()
    }

    /// One line that says why it failed (the JUnit `failure/@message`).
    pub fn summary(&self) -> String {
        match &self.outcome {
            Outcome::Failed { problem, .. } if !problem.is_empty() => escape_controls(&problem[0]),
            Outcome::Failed { differences, .. } | Outcome::Blessed { differences } => {
                let places: Vec<&str> = differences.iter().map(|d| d.pointer.as_str()).collect();
                escape_controls(&format!(
                    "{} difference{} at {}",
                    places.len(),
                    if places.len() == 1 { "" } else { "s" },
                    places.join(", ")
                ))
            }
            Outcome::Passed => "passed".into(),
        }
    }

    /// The JUnit `failure/@type`.
    pub(crate) fn failure_type(&self) -> &'static str {
        match &self.outcome {
            Outcome::Failed { problem, .. } if !problem.is_empty() => "error",
            _ => "mismatch",
        }
    }

    /// The lines `replay` prints for this case.
    pub fn lines(&self) -> Vec<String> {
        let head = match self.outcome {
            Outcome::Passed => "ok",
            Outcome::Blessed { .. } => "blessed",
            Outcome::Failed { .. } => "FAIL",
        };
        let mut lines = vec![format!("{head} {}", self.name)];
        lines.extend(self.details().into_iter().map(|l| format!("    {l}")));
        lines
    }
}

/// `replay`: print one report per case and the closing line; exit 0 only if every case passed
/// (or was blessed), 1 otherwise — including when no case ran, or the JUnit report could not be
/// written — and 74 when stdout could not be written (`ptd_wire::stdout`).
pub fn run(args: &ReplayArgs) -> u8 {
    let confine = match args.confine.options() {
        Ok(options) => options.to_flags(),
        Err(e) => {
            stderr_line!("error: {}", ptd_wire::terminal::escape(&e.to_string()));
            return exit::USAGE;
        }
    };
    let mut warnings = Vec::new();
    let sources = walk::collect(&args.paths, &mut warnings);
    for warning in &warnings {
        stderr_line!("warning[replay]: {}", escape_controls(warning));
    }
    let settings = Settings {
        exe: std::env::current_exe().ok(),
        bridge: args.parent_tool_bridge.clone(),
        filter: args.filter.clone(),
        bless: args.bless,
        confine,
    };
    let jobs = args.jobs.map(|n| n as usize).unwrap_or_else(default_jobs);
    let started = Instant::now();
    let mut reports = Vec::new();
    let (mut passed, mut failed) = (0usize, 0usize);
    let stdout = std::io::stdout();
    // The first failed write to stdout; the suite still runs (and writes its JUnit report),
    // but nothing more is written to stdout.
    let mut lost: Option<std::io::Error> = None;
    let mut print = |lines: &[String]| {
        if lost.is_some() {
            return;
        }
        let mut out = stdout.lock();
        let written = lines
            .iter()
            .try_for_each(|line| writeln!(out, "{line}"))
            .and_then(|()| out.flush());
        lost = written.err();
    };
    run_sources(&sources, &settings, jobs, |file_reports| {
        let mut lines = Vec::new();
        for report in file_reports {
            if report.failed() {
                failed += 1;
            } else {
                passed += 1;
            }
            lines.extend(report.lines());
            reports.push(report);
        }
        print(&lines);
    });
    let elapsed = started.elapsed();
    let mut code = if failed == 0 {
        exit::SUCCESS
    } else {
        exit::FAILED
    };
    if passed + failed == 0 {
        stderr_line!(
            "error[replay]: no case ran: the paths hold no case file, or --filter matched none \
             (folders are searched for *.case.json; name transcripts as files, e.g. \
             out/files/parent-tools/*.json)"
        );
        code = exit::FAILED;
    }
    if let Some(path) = &args.junit {
        let xml = junit::render(&reports, elapsed);
        if let Err(err) = ptd_sys::fs::write_atomic(path, xml.as_bytes()) {
            stderr_line!(
                "error[replay]: the JUnit report {} was not written: {err}",
                walk::show(path)
            );
            code = exit::FAILED;
        }
    }
    print(&[format!("{passed} passed, {failed} failed")]);
    match lost {
        Some(err) => ptd_wire::stdout::failed("the replay report", &err),
        None => code,
    }
}

/// The number of CPUs, the default for `--jobs`.
pub(crate) fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Replay `sources` on `jobs` threads and hand each file's reports to `each`, in the order of
/// `sources`, as soon as every earlier file is done.
pub(crate) fn run_sources(
    sources: &[Source],
    settings: &Settings,
    jobs: usize,
    mut each: impl FnMut(Vec<CaseReport>),
) {
    let count = sources.len();
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Vec<CaseReport>>>> = Mutex::new((0..count).map(|_| None).collect());
    let ready = Condvar::new();
    let workers = jobs.clamp(1, count.max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                // Whatever happens to one file, its slot is filled: the printer waits for it.
                let source = &sources[i];
                let reports = std::panic::catch_unwind(|| replay_source(source, settings))
                    .unwrap_or_else(|_| {
                        let file = walk::show(&source.path);
                        vec![broken(
                            file.clone(),
                            file,
                            vec![
                                "internal error: replaying the file panicked; please report it"
                                    .into(),
                            ],
                        )]
                    });
                lock(&slots)[i] = Some(reports);
                ready.notify_all();
            });
        }
        for i in 0..count {
            let mut slots = lock(&slots);
            let reports = loop {
                match slots[i].take() {
                    Some(reports) => break reports,
                    None => slots = ready.wait(slots).unwrap_or_else(|e| e.into_inner()),
                }
            };
            drop(slots);
            each(reports);
        }
    });
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every report one file yields: its cases (those `--filter` keeps), or why it has none.
pub(crate) fn replay_source(source: &Source, settings: &Settings) -> Vec<CaseReport> {
    let file = walk::show(&source.path);
    if let Some(problem) = &source.problem {
        return vec![broken(file.clone(), file, vec![problem.clone()])];
    }
    let started = Instant::now();
    let loaded = std::panic::catch_unwind(|| cases::load(&source.path, settings.bridge.as_deref()))
        .unwrap_or_else(|_| {
            vec![Loaded::Broken {
                name: file.clone(),
                file: source.path.clone(),
                reasons: vec!["internal error: reading the file panicked; please report it".into()],
            }]
        });
    let mut reports = Vec::new();
    for entry in loaded {
        match entry {
            Loaded::Broken { name, reasons, .. } => {
                let mut report = broken(name, file.clone(), reasons);
                report.duration = started.elapsed();
                reports.push(report);
            }
            Loaded::Case(case) => {
                if settings
                    .filter
                    .as_deref()
                    .is_some_and(|f| !case.name.contains(f))
                {
                    continue;
                }
                reports.push(replay_case(&case, &file, settings));
            }
        }
    }
    reports
}

fn broken(name: String, file: String, problem: Vec<String>) -> CaseReport {
    CaseReport {
        name: escape_controls(&name),
        file,
        outcome: Outcome::Failed {
            problem,
            differences: Vec::new(),
            notes: Vec::new(),
        },
        duration: Duration::ZERO,
    }
}

/// Run one case, compare, and bless when asked.
pub(crate) fn replay_case(case: &Case, file: &str, settings: &Settings) -> CaseReport {
    let started = Instant::now();
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runner::run_with(case, settings.exe.as_deref(), &settings.confine)
    }))
    .unwrap_or_else(|_| Err(runner::RunError::Panicked));
    let outcome = match ran {
        Err(problem) => Outcome::Failed {
            problem: vec![format!("the case could not be run: {problem}")],
            differences: Vec::new(),
            notes: Vec::new(),
        },
        Ok(actual) => judge(case, &actual, settings),
    };
    CaseReport {
        name: escape_controls(&case.name),
        file: file.to_string(),
        outcome,
        duration: started.elapsed(),
    }
}

fn judge(case: &Case, actual: &Actual, settings: &Settings) -> Outcome {
    let (differences, problem) = match &case.expect {
        Some(expect) => (diff::compare(expect, actual), Vec::new()),
        None => (
            Vec::new(),
            vec!["the case has no \"expect\" yet (run with --bless to record one)".to_string()],
        ),
    };
    if differences.is_empty() && problem.is_empty() {
        return Outcome::Passed;
    }
    let mut notes = notes(actual);
    if settings.bless {
        match bless_case(case, actual) {
            Ok(()) => return Outcome::Blessed { differences },
            Err(why) => notes.push(format!("not blessed: {why}")),
        }
    }
    Outcome::Failed {
        problem,
        differences,
        notes,
    }
}

fn bless_case(case: &Case, actual: &Actual) -> Result<(), bless::BlessError> {
    if case.origin != Origin::CaseFile {
        return Err(bless::BlessError::Transcript);
    }
    let expect = bless::new_expect(case.expect_tree.as_ref(), actual)?;
    bless::rewrite(&case.file, &expect)
}

/// What the main job said, for a failed case: the envelope's error, its stderr.
fn notes(actual: &Actual) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(problem) = &actual.envelope_problem {
        notes.push(problem.clone());
    }
    if actual.envelope.is_none() && actual.envelope_problem.is_none() {
        notes.push("the main job printed no envelope".into());
    }
    if let Some(code) = actual.error_code() {
        let message = actual.error_message().unwrap_or_default();
        notes.push(format!(
            "envelope error: {code}: {}",
            diff::cut(message, 300)
        ));
    }
    for line in actual.stderr.iter().take(5) {
        notes.push(format!("stderr: {}", diff::cut(line, 300)));
    }
    if actual.stderr.len() > 5 {
        notes.push(format!(
            "stderr: … ({} more lines)",
            actual.stderr.len() - 5
        ));
    }
    notes
}

/// `s` as replay prints it anywhere (stdout, stderr, JUnit): with the terminal's escaping
/// (`ptd_wire::terminal::escape`), so that nothing a case file or an adapter holds — a control
/// character, a bidirectional control, a line separator — can move the cursor, reorder what a
/// line appears to say (Trojan Source) or forge a line of the report.
pub(crate) fn escape_controls(s: &str) -> String {
    ptd_wire::terminal::escape(s).into_owned()
}

/// Load the cases of one file (for tests: the schema checks read the suite's envelopes).
pub fn load_cases(path: &Path, bridge: Option<&str>) -> Vec<Loaded> {
    cases::load(path, bridge)
}
