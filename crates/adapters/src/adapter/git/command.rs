//! Every `git` the adapter runs, and the one place that decides how: the program, its argv
//! prefix, its environment and the configuration that neutralises everything a checkout could
//! make git run (SPEC §15.2). The tools only name a subcommand and its arguments.
//!
//! Invariants:
//! - git is started through `exec::run` (its own process group, no shell, bounded in time and
//!   output, everything it leaves behind killed), never by `std::process`;
//! - its environment is built here from nothing: the host's `GIT_*` variables (`GIT_DIR`,
//!   `GIT_CEILING_DIRECTORIES`, `GIT_EXEC_PATH`, `GIT_CONFIG_*`, `GIT_EXTERNAL_DIFF`, …) and
//!   `HOME` are never seen; the system and global configuration are not read;
//! - the configuration overrides travel in `GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` /
//!   `GIT_CONFIG_VALUE_n` — the command scope, which wins over every file and is inherited by
//!   the git processes git starts — so no key or value needs quoting;
//! - filter drivers and configured hooks are named by the checkout's own configuration, so
//!   [`Git::neutralise`] lists their names (`git config --name-only`) and disables each one;
//!   a filter is disabled by emptying its commands (git then stores the file's bytes as they
//!   are), never by pointing it at a program that fails or prints nothing.

use super::{limits, Code, Failure};
use ptd_sys::confine::landlock::Grant;
use ptd_sys::exec::{self, Spec, Stop, Termination};
use ptd_sys::interrupt::Interrupts;
use ptd_wire::redact::Redactor;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The oldest git whose knobs the adapter relies on: `GIT_CONFIG_COUNT` (2.31) and
/// `GIT_CONFIG_GLOBAL` / `GIT_CONFIG_SYSTEM` (2.32).
pub(super) const MIN_VERSION: (u32, u32) = (2, 32);

/// The SIGTERM → SIGKILL grace of one git run.
const KILL_GRACE: Duration = Duration::from_millis(100);

/// The most of git's stdout a small command (version, rev-parse, config) may print.
const SMALL_OUTPUT: u64 = 64 * 1024;

/// Every hook event of githooks(5): `hook.<event>.enabled=false` switches off the hooks a
/// configuration names for it (git 2.54 and later; older gits ignore the key), on top of
/// `core.hooksPath=/dev/null`, which leaves no hook directory.
const HOOK_EVENTS: [&str; 28] = [
    "applypatch-msg",
    "commit-msg",
    "fsmonitor-watchman",
    "p4-changelist",
    "p4-post-changelist",
    "p4-pre-submit",
    "p4-prepare-changelist",
    "post-applypatch",
    "post-checkout",
    "post-commit",
    "post-index-change",
    "post-merge",
    "post-receive",
    "post-rewrite",
    "post-update",
    "pre-applypatch",
    "pre-auto-gc",
    "pre-commit",
    "pre-merge-commit",
    "pre-push",
    "pre-rebase",
    "pre-receive",
    "prepare-commit-msg",
    "proc-receive",
    "push-to-checkout",
    "reference-transaction",
    "sendemail-validate",
    "update",
];

/// Configuration every git run gets, whatever the checkout says (command scope wins).
const FIXED_CONFIG: [(&str, &str); 21] = [
    // No hook directory: git looks for /dev/null/<hook>, which cannot exist.
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    // ":" is git's own "no editor" (it never starts one for it).
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("protocol.allow", "never"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    // No `git maintenance run --auto` / `gc --auto` after a commit, and no daemon.
    ("gc.auto", "0"),
    ("gc.autoDetach", "false"),
    ("maintenance.auto", "false"),
    ("status.submoduleSummary", "false"),
    ("diff.submodule", "short"),
    // Submodules are never entered (SPEC §15.3): no recursion, no look at their work trees.
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("color.ui", "false"),
    ("core.quotePath", "false"),
    ("i18n.logOutputEncoding", "UTF-8"),
    ("i18n.commitEncoding", "UTF-8"),
    // An unset identity is an error, never one made up from the host name.
    ("user.useConfigOnly", "true"),
];

/// Environment every git run gets (beside `PATH`, `TZ` and the repository's own variables).
const FIXED_ENV: [(&str, &str); 13] = [
    ("LC_ALL", "C"),
    ("LANG", "C"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_SYSTEM", "/dev/null"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_ATTR_NOSYSTEM", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    // Set and empty: no transport at all is allowed, whatever `protocol.<name>.allow` says.
    ("GIT_ALLOW_PROTOCOL", ""),
    ("GIT_PROTOCOL_FROM_USER", "0"),
    ("GIT_NO_LAZY_FETCH", "1"),
    ("GIT_NO_REPLACE_OBJECTS", "1"),
    ("GIT_LITERAL_PATHSPECS", "1"),
    ("GIT_ADVICE", "0"),
];

/// Whether a run may take git's optional locks (refreshing the index): only the tools that
/// write do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Locks {
    /// `GIT_OPTIONAL_LOCKS=0`: status and diff leave the repository as it was.
    ReadOnly,
    Write,
}

/// What one git run gave back: it exited; its stdout (at most the cap asked for), whether
/// the cap was hit, its exit status and the redacted end of its stderr.
#[derive(Debug)]
pub(super) struct Ran {
    pub stdout: Vec<u8>,
    pub truncated: bool,
    pub exit: i32,
    pub stderr: String,
}

/// The git of one call: where it runs and how.
pub(super) struct Git<'a> {
    /// The canonical root: git's working directory and work tree.
    root: PathBuf,
    /// The git program: `git` through `PATH`, or once located ([`Git::needs`]) its path.
    program: PathBuf,
    /// Set once the repository is located: the checked git directory.
    git_dir: Option<PathBuf>,
    path_var: String,
    tz: Option<String>,
    /// Configuration on top of [`FIXED_CONFIG`] (the per-name overrides, `safe.directory`).
    config: Vec<(String, String)>,
    deadline: Instant,
    interrupts: &'a Interrupts,
    redactor: Redactor,
}

impl<'a> Git<'a> {
    /// The git of a call on `root` (canonical), with the adapter's `PATH` and `TZ`, which must
    /// be done by `deadline`.
    pub(super) fn new(
        root: &Path,
        adapter_env: &[(String, String)],
        deadline: Instant,
        interrupts: &'a Interrupts,
    ) -> Git<'a> {
        let var = |name: &str| {
            adapter_env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let mut redactor = Redactor::new();
        redactor.add_host_path(&root.to_string_lossy());
        Git {
            root: root.to_path_buf(),
            program: PathBuf::from("git"),
            git_dir: None,
            path_var: var("PATH").unwrap_or_else(|| "/usr/bin:/bin".to_string()),
            tz: var("TZ"),
            // Ownership is not what keeps the adapter safe (nothing a checkout says runs), so
            // a checkout owned by another user (the sandbox's) is served too.
            config: vec![("safe.directory".into(), root.to_string_lossy().into_owned())],
            deadline,
            interrupts,
            redactor,
        }
    }

    /// The root git runs in.
    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    /// The environment of one run: [`FIXED_ENV`], the repository's variables, the
    /// configuration, then `extra`.
    fn env(
        &self,
        locks: Locks,
        hide_global: bool,
        literal: bool,
        extra: &[(String, String)],
    ) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = FIXED_ENV
            .iter()
            .filter(|(k, _)| hide_global || *k != "GIT_CONFIG_GLOBAL")
            .filter(|(k, _)| literal || *k != "GIT_LITERAL_PATHSPECS")
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.push(("PATH".into(), self.path_var.clone()));
        if let Some(tz) = &self.tz {
            env.push(("TZ".into(), tz.clone()));
        }
        if locks == Locks::ReadOnly {
            env.push(("GIT_OPTIONAL_LOCKS".into(), "0".into()));
        }
        // Never look above the root for a repository (the root is the repository).
        if let Some(parent) = self.root.parent() {
            env.push((
                "GIT_CEILING_DIRECTORIES".into(),
                parent.to_string_lossy().into_owned(),
            ));
        }
        if let Some(git_dir) = &self.git_dir {
            env.push(("GIT_DIR".into(), git_dir.to_string_lossy().into_owned()));
            // Also overrides a `core.worktree` (or `core.bare`) the checkout sets.
            env.push((
                "GIT_WORK_TREE".into(),
                self.root.to_string_lossy().into_owned(),
            ));
        }
        let hooks = HOOK_EVENTS
            .iter()
            .map(|event| (format!("hook.{event}.enabled"), "false".to_string()));
        let config: Vec<(String, String)> = FIXED_CONFIG
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain(hooks)
            .chain(self.config.iter().cloned())
            .collect();
        env.push(("GIT_CONFIG_COUNT".into(), config.len().to_string()));
        for (i, (key, value)) in config.into_iter().enumerate() {
            env.push((format!("GIT_CONFIG_KEY_{i}"), key));
            env.push((format!("GIT_CONFIG_VALUE_{i}"), value));
        }
        env.extend(extra.iter().cloned());
        env
    }

    /// Run `git ARGS` (after `--no-pager`) in the root, with `stdin` (or `/dev/null`), keeping
    /// at most `max_stdout` bytes of its stdout (a run past it is stopped and `truncated`).
    /// Fails only when git could not be run or did not finish: a non-zero exit is the caller's
    /// to judge (see [`Ran::success`]).
    pub(super) fn run(&self, args: &[&str], opts: RunOptions<'_>) -> Result<Ran, Failure> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timeout());
        }
        if let Some(sig) = self.interrupts.received() {
            return Err(interrupted(sig));
        }
        let mut argv = vec!["git".to_string(), "--no-pager".to_string()];
        argv.extend(args.iter().map(|a| a.to_string()));
        let spec = Spec {
            program: self.program.clone(),
            argv,
            env: self.env(
                opts.locks,
                !opts.host_global_config,
                !opts.pathspec_magic,
                opts.env,
            ),
            cwd: Some(self.root.clone()),
            stdin: opts.stdin,
            timeout: left,
            kill_grace: KILL_GRACE,
            max_stdout_bytes: opts.max_stdout,
            confinement: None,
            stderr_tap: None,
            stdout_watch: None,
        };
        let finished = exec::run(spec, self.interrupts).map_err(|err| match err {
            exec::SpawnError::NotFound(_) => Failure::new(
                Code::GitUnavailable,
                "git was not found on the adapter's PATH",
            ),
            exec::SpawnError::NotExecutable(_) => Failure::new(
                Code::GitUnavailable,
                "the git found on the adapter's PATH is not executable",
            ),
            exec::SpawnError::Other(kind) => Failure::new(
                Code::GitUnavailable,
                format!("git could not be started: {kind}"),
            ),
            // git runs unconfined (`confinement: None`): no step can be refused.
            exec::SpawnError::Confinement(err) => Failure::new(
                Code::GitUnavailable,
                format!("git could not be started: {err}"),
            ),
        })?;
        let (stderr, _) = self
            .redactor
            .redact_tail(&finished.stderr_tail, limits::STDERR_TAIL_BYTES);
        match finished.stopped {
            Some(Stop::Timeout) => return Err(timeout()),
            Some(Stop::Interrupted(sig)) => return Err(interrupted(sig)),
            Some(Stop::OutputCap) | None => {}
        }
        let truncated = finished.stopped == Some(Stop::OutputCap);
        let exit = match finished.termination {
            Termination::Exited(code) => code,
            // Stopped at the output cap: what was read is what the caller gets.
            _ if truncated => 0,
            Termination::Signaled(sig) => {
                return Err(Failure::new(
                    Code::GitFailed,
                    format!("git {} was killed by {}", args[0], sig.name()),
                )
                .with_details(json!({"stderr": stderr})))
            }
            Termination::Unreaped | Termination::NotStarted => {
                return Err(Failure::new(
                    Code::GitFailed,
                    format!("git {} did not finish", args[0]),
                ))
            }
        };
        Ok(Ran {
            stdout: finished.stdout,
            truncated,
            exit,
            stderr,
        })
    }

    /// [`Git::run`] for a small command that must succeed and fit [`SMALL_OUTPUT`].
    pub(super) fn run_small(&self, args: &[&str]) -> Result<Vec<u8>, Failure> {
        let ran = self.run(args, RunOptions::read(SMALL_OUTPUT))?;
        if ran.truncated {
            return Err(Failure::new(
                Code::GitFailed,
                format!("git {} printed more than {SMALL_OUTPUT} bytes", args[0]),
            ));
        }
        ran.success(args[0])
    }

    /// What git needs to run once the adapter confines itself to the root (SPEC §15.3): the
    /// base of SPEC §13.2 (`/usr`, the `/lib*` entries, `/bin`, `/sbin`, the allow list of
    /// `/etc`, the devices; not `/proc`), the program found on `PATH` (used from now on, so
    /// the git granted is the git run) and its interpreters, and its exec path (`git
    /// --exec-path`, which reads no repository). `host_files`: files git may read besides
    /// (the host's global configuration, for an identity).
    pub(super) fn needs(
        &mut self,
        host_files: &[PathBuf],
    ) -> Result<Vec<(PathBuf, Grant)>, Failure> {
        let env = [("PATH".to_string(), self.path_var.clone())];
        let program = exec::locate(Path::new("git"), &env, None).map_err(|err| match err {
            exec::SpawnError::NotFound(_) => Failure::new(
                Code::GitUnavailable,
                "git was not found on the adapter's PATH",
            ),
            _ => Failure::new(
                Code::GitUnavailable,
                "the git found on the adapter's PATH is not executable",
            ),
        })?;
        self.program = program.clone();
        let (mut grants, _) = ptd_sys::confine::landlock::base_grants();
        grants.retain(|(p, _)| p != Path::new("/proc"));
        let chain = ptd_sys::confine::interpreter::chain(&program, Some(self.path_var.as_ref()))
            .map_err(|err| {
                Failure::new(Code::GitUnavailable, format!("git cannot be run: {err}"))
            })?;
        for file in chain {
            grants.push((file, Grant::ReadExecute));
        }
        let ran = self.run_small(&["--exec-path"]).map_err(|f| {
            Failure::new(
                Code::GitUnavailable,
                format!("`git --exec-path` failed: {}", f.message),
            )
        })?;
        let exec_path = String::from_utf8_lossy(&ran).trim().to_string();
        if let Ok(dir) = std::fs::canonicalize(&exec_path) {
            grants.push((dir, Grant::ReadExecute));
        }
        for file in host_files {
            if let Ok(file) = std::fs::canonicalize(file) {
                grants.push((file, Grant::Read));
            }
        }
        Ok(grants)
    }

    /// The checked git directory and work tree from now on (see `repo.rs`).
    pub(super) fn set_git_dir(&mut self, git_dir: PathBuf) {
        self.redactor.add_host_path(&git_dir.to_string_lossy());
        self.git_dir = Some(git_dir);
    }

    /// Disable every filter driver and every configured hook the repository's configuration
    /// names (its files and what they include; the system and global ones are not read).
    pub(super) fn neutralise(&mut self) -> Result<(), Failure> {
        let ran = self.run(
            &[
                "config",
                "-z",
                "--name-only",
                "--get-regexp",
                r"^(filter|hook)\.",
            ],
            RunOptions::read(limits::MAX_CONFIG_NAMES_BYTES as u64),
        )?;
        // `git config --get-regexp` exits 1 when nothing matches.
        if ran.exit == 1 && ran.stdout.is_empty() {
            return Ok(());
        }
        if ran.truncated {
            return Err(too_many_names());
        }
        let stdout = ran.success("config")?;
        let names = driver_names(&stdout);
        if names.len() > limits::MAX_DRIVER_NAMES {
            return Err(too_many_names());
        }
        for (section, name) in names {
            if section == "filter" {
                // Empty commands: git applies no filter and stores the bytes as they are
                // (convert.c runs a driver only when its command is non-empty); `process`
                // set, even empty, also keeps `clean` and `smudge` from running.
                for key in ["clean", "smudge", "process"] {
                    self.config
                        .push((format!("filter.{name}.{key}"), String::new()));
                }
                self.config
                    .push((format!("filter.{name}.required"), "false".into()));
            } else {
                self.config
                    .push((format!("hook.{name}.enabled"), "false".into()));
            }
        }
        Ok(())
    }
}

/// How to run one git.
#[derive(Debug, Clone)]
pub(super) struct RunOptions<'e> {
    pub locks: Locks,
    pub stdin: Option<Vec<u8>>,
    pub max_stdout: u64,
    /// Read the host's global configuration too (only to look up an identity).
    pub host_global_config: bool,
    /// Pathspec magic is read (no `GIT_LITERAL_PATHSPECS`): the caller writes every pathspec
    /// with its magic, `:(literal)` for a request's path.
    pub pathspec_magic: bool,
    pub env: &'e [(String, String)],
}

impl RunOptions<'static> {
    /// A read-only run keeping `max_stdout` bytes.
    pub(super) fn read(max_stdout: u64) -> RunOptions<'static> {
        RunOptions {
            locks: Locks::ReadOnly,
            stdin: None,
            max_stdout,
            host_global_config: false,
            pathspec_magic: false,
            env: &[],
        }
    }

    /// A run that may write the repository.
    pub(super) fn write(max_stdout: u64) -> RunOptions<'static> {
        RunOptions {
            locks: Locks::Write,
            ..RunOptions::read(max_stdout)
        }
    }
}

impl Ran {
    /// stdout when git exited 0; else `git_failed` with git's own words.
    pub(super) fn success(self, subcommand: &str) -> Result<Vec<u8>, Failure> {
        if self.exit == 0 {
            return Ok(self.stdout);
        }
        Err(self.failure(subcommand))
    }

    /// `git_failed` for this run: the message has git's last `fatal:`/`error:` line (else
    /// the last line of its stdout: "nothing to commit, working tree clean"), `details` the
    /// exit status and the end of stderr.
    pub(super) fn failure(&self, subcommand: &str) -> Failure {
        let said = said(&self.stderr).or_else(|| {
            let out = String::from_utf8_lossy(&self.stdout);
            out.lines()
                .map(str::trim)
                .rfind(|l| !l.is_empty())
                .map(str::to_string)
        });
        let message = match said {
            Some(text) => format!(
                "git {subcommand} failed (exit status {}): {}",
                self.exit,
                ptd_wire::terminal::escape(ptd_wire::terminal::cut_at_char_boundary(
                    &text,
                    limits::MAX_MESSAGE_TEXT_BYTES
                ))
            ),
            None => format!("git {subcommand} failed (exit status {})", self.exit),
        };
        Failure::new(Code::GitFailed, message)
            .with_details(json!({"exit_status": self.exit, "stderr": self.stderr}))
    }
}

/// The line of git's stderr that says what went wrong: the last `fatal:` or `error:` line,
/// else the last non-empty one.
fn said(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .rev()
        .find(|l| l.starts_with("fatal:") || l.starts_with("error:"))
        .or(lines.last())
        .map(|l| l.to_string())
}

/// The distinct `(section, subsection)` pairs of `git config -z --name-only` output for
/// `filter.<name>.<key>` and `hook.<name>.<key>` (keys without a subsection, such as
/// `hook.jobs`, name nothing). The subsection keeps its case and may hold dots.
pub(super) fn driver_names(stdout: &[u8]) -> Vec<(&'static str, String)> {
    let mut names: Vec<(&'static str, String)> = Vec::new();
    for key in stdout.split(|&b| b == 0 || b == b'\n') {
        let key = String::from_utf8_lossy(key);
        let (section, rest) = match key.split_once('.') {
            Some(("filter", rest)) => ("filter", rest),
            Some(("hook", rest)) => ("hook", rest),
            _ => continue,
        };
        let Some((name, _)) = rest.rsplit_once('.') else {
            continue;
        };
        let pair = (section, name.to_string());
        if !names.contains(&pair) {
            names.push(pair);
        }
    }
    names
}

fn too_many_names() -> Failure {
    Failure::new(
        Code::GitFailed,
        format!(
            "the repository's configuration names more than {} filter drivers and hooks; \
             the adapter does not run git on it",
            limits::MAX_DRIVER_NAMES
        ),
    )
}

fn timeout() -> Failure {
    Failure::new(
        Code::GitTimeout,
        "git did not finish within the adapter's time (WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS less \
         the adapter's reserve)",
    )
}

fn interrupted(sig: ptd_sys::signal::Signal) -> Failure {
    Failure::new(
        Code::Interrupted,
        format!("the adapter received {}; git was stopped", sig.name()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_names_keep_case_and_dots_and_skip_plain_keys() {
        let out = b"filter.Evil.clean\0filter.Evil.process\0filter.a.b.smudge\0hook.jobs\0hook.lint.command\0hook.lint.event\0";
        assert_eq!(
            driver_names(out),
            [
                ("filter", "Evil".to_string()),
                ("filter", "a.b".to_string()),
                ("hook", "lint".to_string())
            ]
        );
        assert!(driver_names(b"").is_empty());
    }

    #[test]
    fn said_prefers_the_last_fatal_or_error_line() {
        assert_eq!(
            said("warning: x\nfatal: bad thing\nhint: y\n").as_deref(),
            Some("fatal: bad thing")
        );
        assert_eq!(said("just this\n").as_deref(), Some("just this"));
        assert_eq!(said("  \n"), None);
    }

    #[test]
    fn the_environment_hides_the_global_config_unless_asked_and_counts_its_config() {
        let interrupts = Interrupts::none();
        let mut git = Git::new(
            Path::new("/srv/root"),
            &[
                ("PATH".into(), "/bin".into()),
                ("HOME".into(), "/home/h".into()),
            ],
            Instant::now() + Duration::from_secs(5),
            &interrupts,
        );
        git.set_git_dir(PathBuf::from("/srv/root/.git"));
        let env = git.env(Locks::ReadOnly, true, true, &[]);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("GIT_CONFIG_GLOBAL"), Some("/dev/null"));
        assert_eq!(get("GIT_DIR"), Some("/srv/root/.git"));
        assert_eq!(get("GIT_WORK_TREE"), Some("/srv/root"));
        assert_eq!(get("GIT_CEILING_DIRECTORIES"), Some("/srv"));
        assert_eq!(get("GIT_OPTIONAL_LOCKS"), Some("0"));
        assert_eq!(get("HOME"), None);
        let count: usize = get("GIT_CONFIG_COUNT").unwrap().parse().unwrap();
        assert_eq!(count, FIXED_CONFIG.len() + HOOK_EVENTS.len() + 1);
        assert_eq!(
            get(&format!("GIT_CONFIG_KEY_{}", count - 1)),
            Some("safe.directory")
        );
        let env = git.env(Locks::Write, false, false, &[]);
        assert!(!env.iter().any(|(k, _)| k == "GIT_CONFIG_GLOBAL"));
        assert!(!env.iter().any(|(k, _)| k == "GIT_OPTIONAL_LOCKS"));
        assert!(!env.iter().any(|(k, _)| k == "GIT_LITERAL_PATHSPECS"));
    }
}
