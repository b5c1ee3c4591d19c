#![no_main]
//! The `request` target: its body is `parent_tool_dispatch::fuzzing::request`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/request/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| parent_tool_dispatch::fuzzing::request(data));
