#![no_main]
//! The `endpoint` target: its body is `parent_tool_dispatch::fuzzing::endpoint`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/endpoint/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| parent_tool_dispatch::fuzzing::endpoint(data));
