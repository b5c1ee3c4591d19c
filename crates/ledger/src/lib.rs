//! parent-tool-dispatch's ledger (SPEC §14): a request id runs once, a session's budgets hold,
//! and every decision lands in a tamper-evident audit chain — behind the `Store` trait, with
//! two implementations: one SQLite file per host (`sqlite/`), or a PostgreSQL database many
//! hosts share (`pg/`, SPEC §19.1: SERIALIZABLE transactions retried on conflict, a versioned
//! schema only `migrate` changes, heartbeats for holders on other hosts). A [`Location`] names
//! which; nothing outside this crate knows what a store is made of.
//!
//! It sees no command-line type: the binary parses the flags and hands over plain settings.

// Every `unsafe` block of the product lives in `ptd-sys` (ARCHITECTURE.md).
#![deny(unsafe_code)]
// Unit tests may read files, start processes and signal them directly; the product does that
// only through `ptd_sys::fs` and `ptd_sys::exec` (`disallowed-methods` in `clippy.toml`).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

mod ledger;
pub use ledger::*;
