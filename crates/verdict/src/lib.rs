//! parent-tool-dispatch's verdict: what an answer means, or why there is none.
//!
//! - [`judge`]: one set of rules for every answer — a live adapter's stdout or result file, an
//!   HTTP body, a recorded fixture — giving one result envelope or a [`DispatchError`];
//! - [`DispatchError`]: every reason a main job ends without an answer of its own, one variant
//!   per failure carrying its data, mapped once and exhaustively to the stable code of SPEC §6.
//!
//! It sits above the wire, the ledger and the endpoint client, whose failures it carries, and
//! below the binary, which sequences the steps.

// Every `unsafe` block of the product lives in `ptd-sys` (ARCHITECTURE.md).
#![deny(unsafe_code)]
// Unit tests may read files, start processes and signal them directly; the product does that
// only through `ptd_sys::fs` and `ptd_sys::exec` (`disallowed-methods` in `clippy.toml`).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

mod failure;
pub mod judge;

pub use failure::DispatchError;
