//! parent-tool-dispatch's `host_endpoint` client (SPEC §11): the URL and token from the
//! bridge's variables, resolution on the host's own terms (§11.1), TLS, one bounded POST.

// Every `unsafe` block of the product lives in `ptd-sys` (ARCHITECTURE.md).
#![deny(unsafe_code)]
// Unit tests may read files, start processes and signal them directly; the product does that
// only through `ptd_sys::fs` and `ptd_sys::exec` (`disallowed-methods` in `clippy.toml`).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

mod endpoint;
pub use endpoint::*;
