#![no_main]
//! The `json` target: its body is `ptd_testkit::fuzzing::json`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/json/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::json(data));
