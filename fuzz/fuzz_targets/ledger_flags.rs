#![no_main]
//! The `ledger_flags` target: its body is `parent_tool_dispatch::fuzzing::ledger_flags`, which
//! the stable test `tests/cli/fuzz_regressions.rs` also runs on every file in
//! `fuzz/seeds/ledger_flags/` and `fuzz/regressions/ledger_flags/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| parent_tool_dispatch::fuzzing::ledger_flags(data));
