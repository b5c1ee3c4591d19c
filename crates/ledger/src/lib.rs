//! parent-tool-dispatch's ledger (SPEC §14): a request id runs once, a session's budgets hold,
//! and every decision lands in a tamper-evident audit chain — behind the `Store` trait, whose
//! implementation today is SQLite.
//!
//! It sees no command-line type: the binary parses the flags and hands over plain settings.

mod ledger;
pub use ledger::*;
