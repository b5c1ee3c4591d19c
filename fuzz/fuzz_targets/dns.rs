#![no_main]
//! The `dns` target: its body is `ptd_testkit::fuzzing::dns`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/seeds/dns/` and
//! `fuzz/regressions/dns/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptd_testkit::fuzzing::dns(data));
