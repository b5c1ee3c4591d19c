//! `ptd-test`: the test suite's scripted processes, so that the suite needs nothing beyond the
//! Rust toolchain to play every misbehaving adapter and MCP server:
//!
//! - `ptd-test adapter STEP…`: a host adapter (`test_adapter.rs`);
//! - `ptd-test mcp-server SCRIPT…`: an MCP server on the stdio transport (`test_mcp_server.rs`).
//!
//! Built only with the `test-support` feature, which `cargo test` and `cargo bench` turn on
//! (through the package's dev-dependency on itself) and `cargo build` never does: none of this
//! is part of the product's binary, whose command line has no such subcommands.
// A test tool's messages may panic on a broken stderr: the test that ran it fails either way.
// It misbehaves on purpose: it reads, forks and signals as it likes.
#![allow(
    clippy::disallowed_macros,
    clippy::disallowed_methods,
    clippy::too_many_lines
)]

mod test_adapter;
mod test_mcp_server;

use std::process::ExitCode;

const USAGE: &str = "usage: ptd-test adapter STEP… | ptd-test mcp-server SCRIPT…";

fn main() -> ExitCode {
    // A step or script argument that is not UTF-8 is a mistake in the test: said, exit 2.
    let args: Option<Vec<String>> = std::env::args_os()
        .skip(1)
        .map(|arg| arg.into_string().ok())
        .collect();
    let Some(args) = args else {
        eprintln!("ptd-test: arguments must be UTF-8\n{USAGE}");
        return ExitCode::from(2);
    };
    let rest = args.get(1..).unwrap_or_default();
    let code = match args.first().map(String::as_str) {
        Some("adapter") => test_adapter::run(rest),
        Some("mcp-server") => test_mcp_server::run(rest),
        _ => {
            eprintln!("{USAGE}");
            2
        }
    };
    ExitCode::from(code)
}
