//! parent-tool-dispatch's wire: what crosses the trust boundary and how it is read, checked,
//! scrubbed and written.
//!
//! - [`json`]: the strict reader and scanner (opaque values stay text);
//! - [`envelope`] (bridge, request, result) and [`validate`]: the contract's documents, every
//!   issue collected;
//! - [`authorize`]: the bridge's allowlists and ref;
//! - [`error`]: the stable error codes, their status, retryability and exit status (and the
//!   endpoint client's failures, [`error::endpoint`]);
//! - [`redact`]: secrets and host paths out of everything written;
//! - [`transcript`]: the redacted record of a call;
//! - [`terminal`], [`stdout`]: text made safe for a terminal, and the one way output is written;
//! - [`toolmap`]: the tool-name map of the MCP adapter.
//!
//! It sees no command-line type; files and processes come from `ptd_sys`.

// Every `unsafe` block of the product lives in `ptd-sys` (ARCHITECTURE.md).
#![deny(unsafe_code)]
// Unit tests may read files, start processes and signal them directly; the product does that
// only through `ptd_sys::fs` and `ptd_sys::exec` (`disallowed-methods` in `clippy.toml`).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

/// A line on stderr that cannot panic. `eprintln!` panics when stderr cannot be written
/// (`/dev/full`, a reader gone), and a panic while the main job prints its messages would turn
/// a lost message into a lost envelope. Here only the line is lost: stdout and the exit status
/// still tell the outcome. Every message of the product goes through it (clippy refuses
/// `eprintln!` and `eprint!`, `clippy.toml`).
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod authorize;
pub mod envelope;
pub mod error;
pub mod json;
pub mod redact;
pub mod stdout;
pub mod terminal;
pub mod toolmap;
pub mod transcript;
pub mod validate;
