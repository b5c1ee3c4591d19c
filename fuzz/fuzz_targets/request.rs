#![no_main]
//! The `request` target: its body is `ptd_testkit::fuzzing::request`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/request/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::request(data));
