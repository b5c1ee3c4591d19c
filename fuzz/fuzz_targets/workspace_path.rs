#![no_main]
//! The `workspace_path` target: its body is `ptd_testkit::fuzzing::workspace_path`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/workspace_path/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::workspace_path(data));
