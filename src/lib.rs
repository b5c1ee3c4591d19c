pub mod adapter;
pub mod cli;
pub mod envelope;
pub mod error;
pub mod redact;
pub mod transcript;

use clap::Parser;
use std::process::ExitCode;

pub fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli.command {
        Some(cli::Command::Adapter(cli::AdapterCommand::Workspace { root })) => {
            ExitCode::from(adapter::workspace::run(root))
        }
        _ => ExitCode::from(2),
    }
}
