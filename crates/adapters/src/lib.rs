//! parent-tool-dispatch's built-in adapters (SPEC §8–§10): `adapter workspace`, `adapter git`
//! and `adapter mcp`. Each reads one request on stdin and writes one result envelope; none
//! sees a command-line type (the binary parses their options).

#[macro_use]
extern crate ptd_wire;

mod adapter;
pub use adapter::*;
