#![no_main]
//! The `redact` target: its body is `ptd_testkit::fuzzing::redact`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/redact/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::redact(data));
