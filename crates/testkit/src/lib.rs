//! Test only, never part of the product: the bodies of the fuzz targets (for `fuzz/` and the
//! root's `tests/cli/fuzz_regressions.rs`). The package's `ptd-test` binary is the test suite's
//! scripted adapter and MCP server.

// Fuzz bodies are test code: one long property may stay one function.
#![allow(clippy::too_many_lines)]

pub mod fuzzing;
pub mod procs;
