#![no_main]
//! The `endpoint` target: its body is `ptd_testkit::fuzzing::endpoint`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/endpoint/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::endpoint(data));
