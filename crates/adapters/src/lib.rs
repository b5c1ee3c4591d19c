//! parent-tool-dispatch's built-in adapters (SPEC §8–§10): `adapter workspace`, `adapter git`
//! and `adapter mcp`. Each reads one request on stdin and writes one result envelope; none
//! sees a command-line type (the binary parses their options).

// Every `unsafe` block of the product lives in `ptd-sys` (ARCHITECTURE.md).
#![deny(unsafe_code)]
// Unit tests may read files, start processes and signal them directly; the product does that
// only through `ptd_sys::fs` and `ptd_sys::exec` (`disallowed-methods` in `clippy.toml`).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

#[macro_use]
extern crate ptd_wire;

mod adapter;
pub use adapter::*;
