#![no_main]
//! The `bridge` target: its body is `ptd_testkit::fuzzing::bridge`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/bridge/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::bridge(data));
