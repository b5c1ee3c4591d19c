#![no_main]
//! The `mcp` target: its body is `ptd_testkit::fuzzing::mcp`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/mcp/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::mcp(data));
