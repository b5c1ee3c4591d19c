//! Steps 4–5 in the `host_command` mode: plan the adapter's run, put its confinement in place
//! (SPEC §13, failing closed), run it under its deadline and limits, and keep what it left
//! for the judge. Nothing is printed here.

use super::{egress, judge_answer, report, Expected, Learned, Obtain, Outcome};
use crate::plan::{self, FileTransport, ResultFile};
use crate::settings::CallSettings;
use ptd_sys::exec::{self, Finished, Termination};
use ptd_verdict::judge::{Answer, Body, Ending};
use ptd_verdict::DispatchError;
use ptd_wire::envelope::bridge::{Bridge, CommandSpec, Mode};
use ptd_wire::envelope::result::Transport;
use std::path::PathBuf;

/// The `host_command` mode: plan and run the adapter. Confinement (SPEC §13) plugs in between
/// the plan and the run: [`confine_step`] prepares it (failing closed), the sequencer records
/// `diagnostics.dispatch.confinement` and its paths in `learned`, and the plan's spec goes to
/// `exec` with it.
pub(super) fn run_adapter(
    bridge: &Bridge,
    body: Vec<u8>,
    expected: Expected,
    settings: &CallSettings,
    run: &Obtain<'_>,
    learned: &mut Learned,
) -> Result<Ran, DispatchError> {
    let command = command_of(bridge)?;
    let timeout_ms = expected.deadline.timeout_ms();
    let planned = plan::Planned {
        timeout_ms,
        command,
        settings,
        run: &run.args.run,
    };
    let mut plan = plan::plan(&planned, &expected.sent, body, run.env)?;
    if let Some((context, state)) = learned.trace_context() {
        plan::pass_trace_context(&mut plan.spec.env, context.traceparent(), state);
    }
    for path in &plan.host_paths {
        learned.redactor.add_host_path(&path.to_string_lossy());
    }
    learned.dispatch.transport = Some(transport_of(command.transport));
    let program = planned.argv()[0].clone();
    let transport_dir = plan.files.as_ref().map(|f| f.folder().to_path_buf());
    let confine = &settings.confine;
    // The listed paths are host paths whether or not the confinement can be put in place.
    for path in confine.fs_read.iter().chain(&confine.fs_write) {
        learned.redactor.add_host_path(&path.to_string_lossy());
    }
    let confinement = confine_step(&mut plan.spec, confine, transport_dir.as_deref(), &program)?;
    if let Some(prepared) = &confinement {
        for path in confinement_paths(confine, prepared) {
            learned.redactor.add_host_path(&path.to_string_lossy());
        }
        learned.dispatch.confinement = Some(report::confinement_diagnostics(confine, prepared));
    }
    let mut spec = plan.spec;
    if run.args.messages.verbose {
        let live = report::LiveStderr::new(&learned.redactor);
        spec.stderr_tap = Some(exec::Tap(std::rc::Rc::new(live)));
    }
    // The answer on stdout is read while it arrives; a result file is read after the run.
    let prescan = plan
        .files
        .is_none()
        .then(std::rc::Rc::<Prescanning>::default);
    spec.stdout_watch = prescan.clone().map(|p| exec::Viewer(p));
    let (path_var, cwd) = (exec::path_var(&spec.env).cloned(), spec.cwd.clone());
    let program_path = spec.program.clone();
    let proxy = match &confinement {
        Some(prepared) => egress::start(prepared, confine, timeout_ms, run.env)?,
        None => None,
    };
    let finished = exec::run(spec, run.interrupts);
    // The adapter's tree is reaped: the proxy ends with it (SPEC §17).
    learned.dispatch.network = proxy.map(egress::Egress::finish);
    let finished = finished.map_err(|error| match error {
        exec::SpawnError::Confinement(refused) => {
            // Nothing was in force: the child gave up before the adapter ran.
            learned.dispatch.confinement = None;
            learned.dispatch.network = None;
            if let Some(note) = open_files_too_low(&refused, confine) {
                learned.notes.push(ptd_wire::terminal::note_line(&note));
            }
            DispatchError::from(refused)
        }
        error => DispatchError::Spawn { program, error },
    })?;
    if matches!(finished.termination, Termination::Exited(126 | 127)) {
        // `env` (or a shell) could not run what a CRLF `#!` line names: say why.
        let path_var = path_var.as_deref().map(std::ffi::OsStr::new);
        if let Some(why) = exec::crlf_shebang(&program_path, path_var, cwd.as_deref()) {
            learned.notes.push(ptd_wire::terminal::note_line(&format!(
                "the adapter program {}: {}",
                planned.argv()[0],
                why.describe(false)
            )));
        }
    }
    let silent = finished.stdout_bytes == 0 && plan.files.is_none();
    let ended_badly =
        finished.stopped.is_some() || !matches!(finished.termination, Termination::Exited(0));
    if confinement.is_some() && silent && ended_badly {
        // A confined program that needed more than it got often fails or hangs saying
        // nothing on stdout (npx fetching a package under `--network none`): say what it had.
        learned
            .notes
            .push(ptd_wire::terminal::note_line(&confined_silence(confine)));
    }
    learned.dispatch.adapter_started = finished.termination != Termination::NotStarted;
    learned.dispatch.run = Some(report::run_diagnostics(&finished, &learned.redactor));
    let result_file = match &plan.files {
        None => None,
        // Only read what an adapter that ran to its end left behind.
        Some(files) if finished.stopped.is_none() => Some(files.read_result(expected.max_bytes)),
        Some(_) => Some(ResultFile::Missing),
    };
    Ok(Ran {
        finished,
        files: plan.files,
        result_file,
        prescan: prescan.map(|p| p.0.take()),
        expected,
        confinement,
    })
}

/// The judge's prescan of the adapter's stdout, fed by the supervisor as stdout grows.
#[derive(Default)]
struct Prescanning(std::cell::RefCell<ptd_wire::json::Prescan>);

impl exec::StdoutWatch for Prescanning {
    fn grew(&self, kept: &[u8]) {
        self.0.borrow_mut().advance(kept);
    }
}

/// The confinement step (SPEC §13), between the plan and the run: prepare what `options` ask
/// for the spec's program, or fail closed before anything starts. `Ok(None)`: nothing asked.
pub(crate) fn confine_step(
    spec: &mut exec::Spec,
    options: &ptd_sys::confine::Options,
    transport_dir: Option<&std::path::Path>,
    program: &str,
) -> Result<Option<std::sync::Arc<ptd_sys::confine::Prepared>>, DispatchError> {
    spec.confine(options, transport_dir)
        .map_err(|refused| match refused {
            exec::Unconfinable::Spawn(error) => DispatchError::Spawn {
                program: program.to_string(),
                error,
            },
            exec::Unconfinable::Unavailable(unavailable) => DispatchError::from(unavailable),
        })
}

/// What a confined adapter that printed nothing was allowed, for the note under its failure:
/// the network and the grants, and where to look next.
/// Why a step after the rlimits one ran out of descriptors, when the open-files limit did it:
/// SPEC §13.1 sets the limits before the namespaces, while the dispatcher's own descriptors
/// are still open in the child (they close at `execve`), so a low limit leaves the set-up none.
pub(crate) fn open_files_too_low(
    refused: &ptd_sys::confine::ChildError,
    options: &ptd_sys::confine::Options,
) -> Option<String> {
    let limit = options.limit_open_files?;
    (refused.errno == rustix::io::Errno::MFILE && refused.step != ptd_sys::confine::Step::Rlimits)
        .then(|| {
            format!(
                "the open-files limit ({limit}: --limit-open-files, or limit_open_files in a \
                 policy) is in force from the rlimits step of the adapter's set-up on, while \
                 the dispatcher's own descriptors are still open there (they close when the \
                 adapter starts): it left the {} step none. Give 64 or more; the adapter \
                 itself starts with only stdin, stdout and stderr open",
                refused.step.as_str()
            )
        })
}

pub(crate) fn confined_silence(options: &ptd_sys::confine::Options) -> String {
    use ptd_sys::confine::Network;
    let network = match options.network {
        Network::Any => "the host's network".to_string(),
        Network::None => "no network".to_string(),
        Network::Allow => format!(
            "the network only through the egress proxy, to {}",
            options
                .network_allow
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let grants = |paths: &[PathBuf]| match paths.len() {
        0 => String::new(),
        n => format!(" and {n} granted folder{}", if n == 1 { "" } else { "s" }),
    };
    let files = if options.wants_landlock() {
        format!(
            "it could read only the base{} and write only its private TMPDIR{}",
            grants(&options.fs_read),
            grants(&options.fs_write)
        )
    } else {
        "its file access was not restricted".to_string()
    };
    format!(
        "the adapter ran confined and printed nothing: it had {network}; {files}. A program \
         that needs more (npx fetching a package, a file elsewhere) fails or hangs there: grant \
         it (--network, --fs-read, --fs-write, or the policy's keys: docs/confinement.md), and \
         see its stderr with -v"
    )
}

/// The host paths a confined run reveals (SPEC §13: they join §5's host paths): the listed
/// `--fs-*` paths and the private `TMPDIR`.
pub(crate) fn confinement_paths(
    options: &ptd_sys::confine::Options,
    prepared: &ptd_sys::confine::Prepared,
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = options
        .fs_read
        .iter()
        .chain(&options.fs_write)
        .cloned()
        .collect();
    paths.extend(prepared.tmpdir().map(std::path::Path::to_path_buf));
    paths
}

/// What a finished adapter run left to judge.
pub(super) struct Ran {
    finished: Finished,
    files: Option<FileTransport>,
    /// The result file's contents (file transport).
    result_file: Option<ResultFile>,
    /// What was read of stdout while it arrived (`None` with a result file).
    prescan: Option<ptd_wire::json::Prescan>,
    expected: Expected,
    /// The run's confinement: its counters name a limit that was hit. Dropped after the
    /// envelope (its private `TMPDIR` and cgroup go with it).
    confinement: Option<std::sync::Arc<ptd_sys::confine::Prepared>>,
}

impl Ran {
    /// Judge the answer (SPEC §4.5).
    pub(super) fn judge(&self) -> Outcome<'_> {
        let limits = self.expected.limits();
        // Over the cap is over the cap, whether the adapter exited before or after the
        // dispatcher noticed (SPEC §4.3).
        let overflowed =
            self.files.is_none() && self.finished.stdout_bytes > limits.max_bytes as u64;
        let ending = match (self.finished.stopped, self.finished.termination) {
            (Some(stop), _) => Ending::Stopped(stop),
            (None, _) if overflowed => Ending::Stopped(ptd_sys::exec::Stop::OutputCap),
            (None, Termination::Exited(code)) => Ending::Exited(code),
            (None, Termination::Signaled(signal)) => Ending::Signaled(signal),
            (None, Termination::Unreaped | Termination::NotStarted) => Ending::Unobserved,
        };
        let body = match (&self.result_file, &self.prescan) {
            (None, Some(prescan)) => Body::Prescanned(&self.finished.stdout, prescan),
            (None, None) => Body::Bytes(&self.finished.stdout),
            (Some(file), _) => match file {
                ResultFile::Read(bytes) => Body::Bytes(bytes),
                ResultFile::Missing => Body::Missing,
                ResultFile::TooLarge => Body::TooLarge,
                ResultFile::NotRegular(kind) => Body::NotRegular(ptd_sys::fs::describe(*kind)),
                ResultFile::Unreadable(kind) => Body::Unreadable(*kind),
            },
        };
        let outcome = judge_answer(
            Answer { ending, body },
            &self.finished.stdout,
            self.files.is_none(),
            self.expected.expect(),
            limits,
        );
        Outcome {
            verdict: outcome.verdict.map_err(|err| self.limit_hit(err)),
            stdout_kept: outcome.stdout_kept,
            replayed: None,
        }
    }

    /// A failure of the adapter's own without a valid failure envelope becomes
    /// `resource_limit_exceeded` when a limit's own counter shows the limit was reached
    /// (SPEC §13); the dispatcher's own stops (timeout, output cap, signal) stay what they are.
    fn limit_hit(&self, err: DispatchError) -> DispatchError {
        let adapters_own = matches!(
            err,
            DispatchError::AdapterSignaled { .. }
                | DispatchError::AdapterExitNonzero { .. }
                | DispatchError::ResultInvalid { .. }
                | DispatchError::ResultFileUnusable(_)
        );
        let signal = match self.finished.termination {
            Termination::Signaled(signal) => Some(signal.raw()),
            _ => None,
        };
        match self.confinement.as_ref().filter(|_| adapters_own) {
            Some(prepared) => match prepared.limit_hit(signal) {
                Some(limit) => DispatchError::ResourceLimitExceeded {
                    limit,
                    cause: Box::new(err),
                },
                None => err,
            },
            None => err,
        }
    }

    /// Remove the file transport's folder, within its budget; say so when something stays.
    pub(super) fn clean_up(self) {
        if let Some(files) = self.files {
            let folder = files.folder().display().to_string();
            if let Err(err) = files.cleanup(ptd_sys::fs::Budget::default()) {
                stderr_line!(
                    "warning[file_transport]: the private folder {folder} was not fully removed: \
                     {err}; what is left stays"
                );
            }
        }
    }
}

/// The bridge's command, when its mode is one that runs a command (`host_command`); every
/// other mode is `dispatch_mode_unsupported` here. `replay` asks the same question before it
/// stands a recorded answer in for the adapter's.
pub fn command_of(bridge: &Bridge) -> Result<&CommandSpec, DispatchError> {
    match (bridge.mode, &bridge.command) {
        (Mode::HostCommand, Some(command)) => Ok(command),
        (mode, _) => Err(DispatchError::ModeUnsupported { mode }),
    }
}

/// The transport as `diagnostics.dispatch` names it.
fn transport_of(t: ptd_wire::envelope::bridge::Transport) -> Transport {
    match t {
        ptd_wire::envelope::bridge::Transport::Stdin => Transport::Stdin,
        ptd_wire::envelope::bridge::Transport::File => Transport::File,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptd_sys::confine::{ChildError, Options, Step};
    use rustix::io::Errno;

    #[test]
    fn only_a_step_out_of_descriptors_under_an_open_files_limit_gets_the_note() {
        let limited = Options {
            limit_open_files: Some(12),
            ..Options::default()
        };
        let refused = |step, errno| ChildError { step, errno };
        let note = open_files_too_low(&refused(Step::PidNamespace, Errno::MFILE), &limited)
            .expect("a note");
        assert!(note.contains("(12: --limit-open-files"), "{note}");
        assert!(
            note.contains("it left the pid_namespace step none"),
            "{note}"
        );
        // Another errno, the limit's own step refused, or no limit asked for: no note.
        assert_eq!(
            open_files_too_low(&refused(Step::PidNamespace, Errno::PERM), &limited),
            None
        );
        assert_eq!(
            open_files_too_low(&refused(Step::Rlimits, Errno::MFILE), &limited),
            None
        );
        assert_eq!(
            open_files_too_low(
                &refused(Step::NetworkProxy, Errno::MFILE),
                &Options::default()
            ),
            None
        );
    }
}
