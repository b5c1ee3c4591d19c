//! `ptd-test`: the test suite's scripted processes, built only with the `test-support` feature
//! (which `cargo test` and `cargo bench` turn on through the dev-dependency on this package,
//! and the release build never does), so none of it is part of the product's binary.
//!
//! - `ptd-test __test-adapter STEP…`: a misbehaving host adapter (`test_adapter.rs`);
//! - `ptd-test __test-mcp-server SCRIPT…`: an MCP server on the stdio transport
//!   (`test_mcp_server.rs`).

// The two modules were the binary's hidden subcommands; these imports keep their paths.
use parent_tool_dispatch::adapter::mcp::{LEGACY, MODERN};
use parent_tool_dispatch::json;

mod test_adapter;
mod test_mcp_server;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or_default();
    let code = match args.first().map(String::as_str) {
        Some("__test-adapter") => test_adapter::run(rest),
        Some("__test-mcp-server") => test_mcp_server::run(rest),
        _ => {
            eprintln!("usage: ptd-test __test-adapter STEP… | __test-mcp-server SCRIPT…");
            2
        }
    };
    ExitCode::from(code)
}
