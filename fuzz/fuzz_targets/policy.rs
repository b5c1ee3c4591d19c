#![no_main]
//! The `policy` target: its body is `ptd_testkit::fuzzing::policy`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/seeds/policy/` and
//! `fuzz/regressions/policy/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::policy(data));
