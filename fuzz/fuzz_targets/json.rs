#![no_main]
//! The `json` target: its body is `parent_tool_dispatch::fuzzing::json`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/json/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| parent_tool_dispatch::fuzzing::json(data));
