//! parent-tool-dispatch's ledger (SPEC §14): a request id runs once, a session's budgets hold,
//! and every decision lands in a tamper-evident audit chain — behind the `Store` trait, whose
//! implementation today is SQLite.
//!
//! It sees no command-line type: the binary parses the flags and hands over plain settings.

// Every `unsafe` block of the product lives in `ptd-sys` (ARCHITECTURE.md).
#![deny(unsafe_code)]
// Unit tests may read files, start processes and signal them directly; the product does that
// only through `ptd_sys::fs` and `ptd_sys::exec` (`disallowed-methods` in `clippy.toml`).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

mod ledger;
pub use ledger::*;
