//! parent-tool-dispatch: the host side of the wp-codebox parent-tool bridge.
//!
//! Data flows one way, a module per step: the strict reader (`envelope::json`) reads the
//! bridge and the request; `envelope::{bridge, request}` validate them, collecting every issue
//! (`validate`); `authorize` checks the allowlists and the bridge ref; `exec` runs the adapter
//! in its own process group under a deadline and kills whatever it leaves behind; `outcome`
//! turns what happened into one `wp-codebox/parent-tool-result/v1` envelope with a stable error
//! code (`error`); `redact` scrubs secrets and host paths; `transcript` writes the redacted
//! record. `dispatch` sequences these steps for the main job; `main.rs` only calls [`main`].

pub mod adapter;
pub mod authorize;
pub mod cli;
pub mod dispatch;
pub mod envelope;
pub mod error;
pub mod exec;
pub mod fs;
pub mod hostenv;
pub mod interrupt;
pub mod judge;
pub mod plan;
pub mod redact;
pub mod signal;
pub mod test_adapter;
pub mod toolmap;
pub mod transcript;
pub mod validate;

use clap::{CommandFactory, Parser};
use cli::{Cli, Command};
use error::exit;
use std::process::ExitCode;

/// Parse the command line, run, and return the exit status.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            });
        }
    };
    ExitCode::from(run(cli))
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
        Some(Command::Completions { shell }) => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "parent-tool-dispatch",
                &mut std::io::stdout(),
            );
            exit::SUCCESS
        }
        Some(Command::Adapter(cli::AdapterCommand::Workspace { root })) => {
            adapter::workspace::run(root)
        }
        Some(Command::TestAdapter(args)) => test_adapter::run(&args.steps),
        Some(Command::Replay(args)) => replay::run(&args),
        Some(Command::Schema(args)) => schema::print(args.kind),
    }
}

pub mod commands;
pub mod man;
pub mod replay;
pub mod schema;
