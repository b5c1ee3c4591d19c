#![no_main]
//! The `ledger_flags` target: its body is `ptd_testkit::fuzzing::ledger_flags`, which
//! the stable test `tests/cli/fuzz_regressions.rs` also runs on every file in
//! `fuzz/seeds/ledger_flags/` and `fuzz/regressions/ledger_flags/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::ledger_flags(data));
