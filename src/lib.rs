//! parent-tool-dispatch: the host side of the wp-codebox parent-tool bridge.
//!
//! Data flows one way, a module per step: the strict reader (`json`) reads the
//! bridge and the request; `envelope::{bridge, request}` validate them, collecting every issue
//! (`validate`); `authorize` checks the allowlists and the bridge ref; `plan` prepares the
//! adapter run and `exec` runs it in its own process group under a deadline and kills whatever
//! it leaves behind (or `endpoint` makes the `host_endpoint` POST); `judge` turns the answer
//! into one `wp-codebox/parent-tool-result/v1` envelope, or into the reason there is none,
//! which becomes a stable error code (`error`); `redact` scrubs secrets and host paths;
//! `transcript` writes the redacted record. `dispatch` sequences these steps for the main job;
//! `main.rs` only calls [`main`]. The behaviour is specified in `docs/SPEC.md`, which the code
//! cites as `SPEC §N`.

// Every `unsafe` block of the product lives in `ptd-sys` (ARCHITECTURE.md).
#![deny(unsafe_code)]
// Unit tests may read files, start processes and signal them directly; the product does that
// only through `ptd_sys::fs` and `ptd_sys::exec` (`disallowed-methods` in `clippy.toml`).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

#[macro_use]
extern crate ptd_wire;

mod approvals_commands;
pub mod cli;
mod completions;
pub mod delegation;
pub mod dispatch;
pub mod doctor;
mod ledger_commands;
mod ledger_open;
mod ledger_status;
pub mod plan;
mod policy_commands;
pub mod replay;
pub mod schema;
mod serve;
pub mod settings;

use clap::{CommandFactory, FromArgMatches};
use cli::{Cli, Command};
pub use ptd_adapters as adapter;
use ptd_sys::{exec, hostenv, interrupt};
use ptd_wire::error::{self, exit};
use ptd_wire::{stdout, terminal, validate};
use std::ffi::OsString;
use std::process::ExitCode;

/// Parse the command line, run, and return the exit status.
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    // `doctor`'s probe, started by `doctor` itself inside the confinement (docs/doctor.md):
    // no command line of its own to parse, and nothing else of the dispatcher runs.
    if args.get(1).is_some_and(|a| a == doctor::attack::PROBE_WORD) {
        return ExitCode::from(doctor::attack::main(&args[2..]));
    }
    become_non_dumpable();
    if let Some(cli) = main_job_command_line(&args) {
        return ExitCode::from(run(cli));
    }
    // The command tree is built once per run (it is a good part of start-up): for the
    // mistyped-subcommand check and for parsing.
    let mut cmd = Cli::command();
    cmd.build();
    if let Some(message) = mistyped_in(&cmd, &args) {
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(message.as_bytes());
        return ExitCode::from(exit::USAGE);
    }
    let parsed = match cmd.try_get_matches_from_mut(&args) {
        Ok(mut matches) => Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd)),
        Err(err) => Err(err),
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) if err.use_stderr() => {
            // clap quotes the offending argument as typed: plain text, escaped line by line so
            // that an argument cannot drive the terminal (its own newlines stay line breaks).
            let text = err.render().to_string();
            for line in text.lines() {
                stderr_line!("{}", terminal::escape(line));
            }
            return ExitCode::from(exit::USAGE);
        }
        Err(err) => {
            // --help and --version: our own text, on stdout (clap colours it on a terminal);
            // lost, it is exit 74 like any other output (`stdout`).
            use std::io::Write;
            return ExitCode::from(match err.print().and_then(|()| std::io::stdout().flush()) {
                Ok(()) => exit::SUCCESS,
                Err(e) => stdout::failed("the help", &e),
            });
        }
    };
    ExitCode::from(run(cli))
}

/// The names a first word of the command line can be a subcommand by: each subcommand of
/// [`Cli`] and clap's own `help` (a test keeps this list equal to the command tree).
pub const SUBCOMMAND_NAMES: &[&str] = &[
    "validate",
    "sandbox-env",
    "schema",
    "completions",
    "request",
    "replay",
    "adapter",
    "delegation",
    "doctor",
    "audit",
    "ledger",
    "policy",
    "approvals",
    "serve",
    "help",
];

/// The main job's command line, parsed without building the whole command tree (every
/// subcommand's options and help texts, a good part of a call's start: docs/PERFORMANCE.md):
/// only the top-level options, with a name for each subcommand so that one is never taken for
/// the REQUEST. `None` — and the whole tree parses it, as before — for anything but a main job
/// that parses cleanly: a subcommand, `--help`, `--version`, a mistyped subcommand, any error.
/// The main job's arguments come from the same definition (`DispatchArgs`), so they are the
/// same values.
pub fn main_job_command_line(args: &[OsString]) -> Option<Cli> {
    use clap::{Args, FromArgMatches};
    let mut light = clap::Command::new("parent-tool-dispatch")
        .args_conflicts_with_subcommands(true)
        .subcommand_negates_reqs(true)
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(true)
        .subcommands(
            SUBCOMMAND_NAMES
                .iter()
                .map(|name| clap::Command::new(*name)),
        );
    light = cli::DispatchArgs::augment_args(light);
    light.build();
    if mistyped_in(&light, args).is_some() {
        return None;
    }
    let mut matches = light.try_get_matches_from_mut(args).ok()?;
    if matches.subcommand().is_some() {
        return None;
    }
    let dispatch = cli::DispatchArgs::from_arg_matches_mut(&mut matches).ok()?;
    Some(Cli {
        command: None,
        dispatch,
    })
}

/// Make this process non-dumpable before it starts anything (docs/guide.md, "What an adapter cannot
/// reach"): its `/proc/<pid>/` entries (`fd/`, `environ`, `mem`, …) then belong to root, so
/// what it starts — which runs as the same user — cannot re-open its stdout to forge an
/// envelope or read a host credential from its environment. No core dump is written either.
/// A process started by `execve` is dumpable again, so the adapter's own entries are as usual.
/// Root with `CAP_SYS_PTRACE` still passes the kernel's check: an adapter running as root can
/// still reach the dispatcher (only confinement keeps it out).
fn become_non_dumpable() {
    // PR_SET_DUMPABLE with 0 cannot fail on Linux (only an argument other than 0 or 1 can).
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
}

#[cfg(test)] // only the tests call it
/// The message for a first positional argument that is not an existing file but is close to a
/// visible subcommand's name (`valdate`, `sandbox_env`), or is spelled like a hidden one
/// (`__test-adapter`: the product has none, the test tools are a binary of their own; `main`
/// takes `doctor`'s probe word `__doctor-probe` as the first argument before this), which
/// clap would otherwise take as the REQUEST path and answer with a misleading error. `None`
/// when the command line looks fine.
pub(crate) fn mistyped_subcommand(args: &[OsString]) -> Option<String> {
    let mut cmd = Cli::command();
    cmd.build();
    mistyped_in(&cmd, args)
}

/// [`mistyped_subcommand`] with the command tree already built (building adds clap's own
/// `help` subcommand and flags, so they count too).
fn mistyped_in(cmd: &clap::Command, args: &[OsString]) -> Option<String> {
    let word = first_positional(cmd, args.get(1..).unwrap_or_default())?;
    let names: Vec<&str> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name())
        .collect();
    if names.contains(&word) || std::path::Path::new(word).exists() {
        return None;
    }
    if word.starts_with("__") {
        return Some(format!(
            "error: unrecognized subcommand '{}'\n\nFor more information, try '--help'.\n",
            terminal::escape(word)
        ));
    }
    let near = validate::did_you_mean(word, names.iter().copied())?;
    Some(format!(
        "error: unrecognized subcommand '{}'\n\n  did you mean '{near}'?\n\nFor more information, try '--help'.\n",
        terminal::escape(word)
    ))
}

/// The first argument of the top-level command that is neither an option nor an option's
/// value; `None` after `--`, or when it is not UTF-8 (then it cannot be a subcommand's name).
fn first_positional<'a>(cmd: &clap::Command, args: &'a [OsString]) -> Option<&'a str> {
    let takes_value = |arg: &clap::Arg| {
        arg.get_num_args()
            .map_or(arg.get_action().takes_values(), |n| n.takes_values())
    };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let arg = arg.to_str()?;
        if arg == "--" {
            return None;
        }
        if let Some(long) = arg.strip_prefix("--") {
            if !long.contains('=')
                && cmd
                    .get_arguments()
                    .any(|a| a.get_long() == Some(long) && takes_value(a))
            {
                iter.next();
            }
        } else if arg.len() > 1 && arg.starts_with('-') {
            // Short flags: the only value-taking ones would swallow the next argument.
            let last = arg.chars().last();
            if arg.len() == 2
                && cmd
                    .get_arguments()
                    .any(|a| a.get_short() == last && takes_value(a))
            {
                iter.next();
            }
        } else {
            return Some(arg);
        }
    }
    None
}

/// The command for shell completions: the real one with hidden subcommands and arguments left
/// out (clap_complete offers them otherwise), at every level.
pub(crate) fn completion_command() -> clap::Command {
    visible(&Cli::command())
}

/// `cmd` without its hidden subcommands and arguments, at every level.
fn visible(cmd: &clap::Command) -> clap::Command {
    let mut out = clap::Command::new(cmd.get_name().to_string())
        .args(cmd.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(visible),
        )
        .args_conflicts_with_subcommands(cmd.is_args_conflicts_with_subcommands_set())
        .subcommand_negates_reqs(cmd.is_subcommand_negates_reqs_set())
        .subcommand_required(cmd.is_subcommand_required_set());
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if let Some(about) = cmd.get_long_about() {
        out = out.long_about(about.clone());
    }
    if let Some(version) = cmd.get_version() {
        out = out.version(version.to_string());
    }
    out
}

/// Run a parsed command line; returns the exit status.
pub fn run(cli: Cli) -> u8 {
    match cli.command {
        None => {
            exec::become_subreaper();
            let interrupts = interrupt::Interrupts::install();
            dispatch::main_job(&cli.dispatch, &interrupts)
        }
        Some(Command::Validate(args)) => commands::validate(&args),
        Some(Command::SandboxEnv(args)) => commands::sandbox_env(&args),
        Some(Command::Request(args)) => commands::request(&args),
        Some(Command::Completions { shell }) => {
            // Rendered first: clap_complete panics when its writer fails.
            let script = completions::script(shell, &mut completion_command());
            stdout::print(&script, "the completions", exit::SUCCESS)
        }
        Some(Command::Adapter(cli::AdapterCommand::Workspace {
            root,
            allow_git_dir,
        })) => adapter::workspace::run(
            root,
            if allow_git_dir {
                adapter::workspace::GitDir::Allowed
            } else {
                adapter::workspace::GitDir::Protected
            },
        ),
        Some(Command::Adapter(cli::AdapterCommand::Git {
            root,
            allow_commit,
            author,
        })) => adapter::git::run(adapter::git::Options {
            root,
            allow_commit,
            author,
        }),
        Some(Command::Adapter(cli::AdapterCommand::Mcp {
            tool_map,
            list_tools,
            confine,
            server,
        })) => {
            let host = hostenv::HostEnv::process();
            match dispatch::confine_options(&confine, &host, None) {
                // The server of `adapter mcp` gets no egress proxy (SPEC §17): run the adapter
                // itself under `--network allow:` in the main job instead.
                Ok(confine) if confine.network == ptd_sys::confine::Network::Allow => {
                    stderr_line!(
                        "error[usage]: --network allow: is not available for adapter mcp's \
                         server: give it to the main job that runs adapter mcp (the server \
                         inherits its network)"
                    );
                    error::exit::USAGE
                }
                Ok(confine) => {
                    let options = adapter::mcp::Options {
                        tool_map,
                        confine,
                        server,
                    };
                    if list_tools {
                        adapter::mcp::list_tools(options)
                    } else {
                        adapter::mcp::run(options)
                    }
                }
                Err(message) => {
                    stderr_line!("error[usage]: {message}");
                    error::exit::USAGE
                }
            }
        }
        Some(Command::Delegation(command)) => delegation::main(&command),
        Some(Command::Replay(args)) => replay::run(&args),
        Some(Command::Schema(args)) => schema::print(args.kind),
        Some(Command::Audit(command)) => ledger_commands::main(&command),
        Some(Command::Ledger(command)) => ledger_commands::ledger(&command),
        Some(Command::Doctor(args)) => doctor::run(&args),
        Some(Command::Serve(args)) => serve::run(&args),
        Some(Command::Approvals(command)) => approvals_commands::main(&command),
        Some(Command::Policy(cli::PolicyCommand::Check(args))) => policy_commands::check(&args),
        Some(Command::Policy(cli::PolicyCommand::Explain(args))) => policy_commands::explain(&args),
    }
}

mod commands;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        // clap's own checks: conflicting names, bad defaults, missing value names, …
        Cli::command().debug_assert();
    }

    fn args(line: &[&str]) -> Vec<OsString> {
        std::iter::once("parent-tool-dispatch")
            .chain(line.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn completion_command_keeps_every_visible_item_and_drops_hidden_ones() {
        fn shape(cmd: &clap::Command, out: &mut Vec<String>, prefix: &str) {
            for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
                out.push(format!("{prefix} --{}", arg.get_id()));
            }
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                shape(sub, out, &format!("{prefix} {}", sub.get_name()));
            }
        }
        let (mut real, mut shown) = (Vec::new(), Vec::new());
        shape(&Cli::command(), &mut real, "");
        shape(&completion_command(), &mut shown, "");
        assert_eq!(real, shown);
        // The product has no hidden subcommand (the test tools are a binary of their own);
        // one added later is left out at any level, and so is a hidden argument.
        assert!(Cli::command().get_subcommands().all(|s| !s.is_hide_set()));
        let with_hidden = Cli::command()
            .arg(clap::Arg::new("secret").long("secret").hide(true))
            .mut_subcommand("adapter", |adapter| {
                adapter.subcommand(clap::Command::new("__hidden").hide(true))
            })
            .subcommand(clap::Command::new("__hidden").hide(true));
        let (mut with, mut without) = (Vec::new(), Vec::new());
        shape(&with_hidden, &mut with, "");
        shape(&visible(&with_hidden), &mut without, "");
        // (mut_subcommand moves `adapter` to the end: compare as sets.)
        real.sort();
        with.sort();
        without.sort();
        assert_eq!(with, real);
        assert_eq!(without, real);
        let names = |cmd: &clap::Command| -> Vec<String> {
            cmd.get_subcommands()
                .map(|s| s.get_name().to_string())
                .collect()
        };
        assert!(names(&with_hidden).contains(&"__hidden".to_string()));
        assert!(!names(&visible(&with_hidden)).contains(&"__hidden".to_string()));
        let adapter = visible(&with_hidden);
        let adapter = adapter.find_subcommand("adapter").unwrap();
        assert!(!names(adapter).contains(&"__hidden".to_string()));
        assert!(visible(&with_hidden)
            .get_arguments()
            .all(|a| a.get_id() != "secret"));
    }

    #[test]
    fn mistyped_subcommands_get_a_suggestion() {
        for (line, want) in [
            (&["valdate", "request", "x.json"][..], "validate"),
            (&["sandbox_env", "--format", "json"][..], "sandbox-env"),
            (&["--pretty", "adaptr", "workspace"][..], "adapter"),
            (
                &["--parent-tool-bridge", "{}", "completion", "bash"][..],
                "completions",
            ),
            (&["--parent-tool-bridge={}", "hepl"][..], "help"),
        ] {
            let message = mistyped_subcommand(&args(line)).unwrap_or_default();
            assert!(
                message.contains(&format!("did you mean '{want}'?")),
                "{line:?}: {message}"
            );
            assert!(message.starts_with(&format!(
                "error: unrecognized subcommand '{}'",
                line.iter()
                    .find(|a| !a.starts_with('-') && *a != &"{}")
                    .unwrap()
            )));
        }
    }

    #[test]
    fn a_hidden_looking_subcommand_is_unrecognized() {
        for line in [
            &["__test-adapter", "echo"][..],
            &["__test-mcp-server"][..],
            &["--parent-tool-bridge", "{}", "__test-adapter", "read-stdin"][..],
        ] {
            let word = line.iter().find(|a| a.starts_with("__")).unwrap();
            assert_eq!(
                mistyped_subcommand(&args(line)).as_deref(),
                Some(
                    format!(
                        "error: unrecognized subcommand '{word}'\n\nFor more information, try '--help'.\n"
                    )
                    .as_str()
                ),
                "{line:?}"
            );
        }
        // A request file of that name is still a request file.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("__request.json");
        std::fs::write(&file, "{}").unwrap();
        assert_eq!(mistyped_subcommand(&args(&[file.to_str().unwrap()])), None);
    }

    #[test]
    fn real_requests_and_subcommands_are_left_to_clap() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("valdate");
        std::fs::write(&file, "{}").unwrap();
        for line in [
            &["validate", "request", "x.json"][..],
            &["request.json"][..],
            &["--parent-tool-bridge", "valdate"][..],
            &["--", "valdate"][..],
            &[file.to_str().unwrap()][..],
            &["-"][..],
            &[][..],
        ] {
            assert_eq!(mistyped_subcommand(&args(line)), None, "{line:?}");
        }
    }

    #[test]
    fn a_hostile_mistyped_word_is_escaped() {
        let message = mistyped_subcommand(&args(&["valdate\x1b[2K"])).unwrap_or_default();
        assert_eq!(message, "");
        let message = mistyped_subcommand(&args(&["valdat\u{1b}"])).unwrap();
        assert!(message.contains("'valdat\\x1b'"), "{message}");
        assert!(!message.contains('\u{1b}'));
    }
}
