#![no_main]
//! The `dns` target: its body is `parent_tool_dispatch::fuzzing::dns`, which the stable test
//! `tests/cli/fuzz_regressions.rs` also runs on every file in `fuzz/seeds/dns/` and
//! `fuzz/regressions/dns/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| parent_tool_dispatch::fuzzing::dns(data));
