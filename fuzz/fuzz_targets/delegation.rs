#![no_main]
//! The `delegation` target: its body is `ptd_testkit::fuzzing::delegation`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/regressions/delegation/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::delegation(data));
