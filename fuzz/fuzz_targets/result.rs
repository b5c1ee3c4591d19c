#![no_main]
//! The `result` target: its body is `ptd_testkit::fuzzing::result`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/result/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::result(data));
