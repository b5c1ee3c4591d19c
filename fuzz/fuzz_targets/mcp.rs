#![no_main]
//! The `mcp` target: its body is `parent_tool_dispatch::fuzzing::mcp`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/mcp/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| parent_tool_dispatch::fuzzing::mcp(data));
