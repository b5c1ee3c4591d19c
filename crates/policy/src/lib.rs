//! parent-tool-dispatch's host policy (SPEC §16): the TOML file the host owns that says, per
//! tool, which adapter runs and with what — its model ([`Policy`], [`Entry`], [`ToolEntry`]),
//! a strict loader ([`load`], [`parse`]) that reports every problem of the file at its
//! `FILE:LINE:COL`, routing ([`Policy::route`]), the lints of `policy check`
//! ([`Policy::lints`]) and the file's JSON Schema ([`schema`], which `schema policy` prints).
//!
//! One meaning per key: a confinement key becomes the command-line flag of the same name in a
//! `ptd_sys::confine::RawOptions` ([`Entry::confine_raw`]) and is checked by the same
//! `Options::parse`; the budget keys are read by the ledger's own parsers. Nothing here gives
//! a key a meaning of its own.
//!
//! Bounds: a file over [`MAX_FILE_BYTES`] (1 MiB) is refused unread, and a policy with more
//! than [`MAX_TOOLS`] (1,000) `[[tool]]` entries is refused with one problem (only the first
//! 1,000 are checked). The loader never panics on any input.
//!
//! It reads the file only through `ptd_sys::fs` and looks programs up with `ptd_sys::exec`'s
//! search. It must not start anything, print, or see a command-line type: the binary wires it
//! into the main job and `policy check`.

// Every `unsafe` block of the product lives in `ptd-sys` (ARCHITECTURE.md).
#![deny(unsafe_code)]
// Unit tests may read files, start processes and signal them directly; the product does that
// only through `ptd_sys::fs` and `ptd_sys::exec` (`disallowed-methods` in `clippy.toml`).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

mod cache;
mod compiled;
mod entry;
mod load;
mod model;
mod problem;
mod route;
mod schema;
mod value;

#[cfg(test)]
mod tests;

pub use cache::{load_cached, CACHE_DIR, MAX_AGE, SETTLE};
pub use compiled::{Compiled, Routed};
pub use entry::{key_of, parse_duration, ENTRY_KEYS};
pub use load::{
    access_problem, load, parse, LoadContext, LEDGER_KEYS, MAX_FILE_BYTES, MAX_TOOLS, TOP_KEYS,
};
pub use model::{
    entry_name, Decision, Entry, LedgerSection, Location, NetworkPolicy, Pattern, Policy, Route,
    ToolEntry, DEFAULTS_ENTRY,
};
pub use problem::Problem;
pub use schema::{schema, SCHEMA_ID};
