//! parent-tool-dispatch's system layer: every call into the kernel the product makes, and every
//! `unsafe` block.
//!
//! - [`fs`]: the one file-system layer (`*at` calls, the one reader that refuses FIFOs and
//!   devices, private folders, atomic publication);
//! - [`signal`] and [`interrupt`]: signal names, and the handlers that turn a signal into a
//!   flag the main job polls;
//! - [`exec`]: starting a child (the one child-setup path), its process group, deadline, kill
//!   ladder and sweep;
//! - [`confine`]: the confinement mechanisms `exec` puts in the child's set-up (SPEC §13);
//! - [`probe`]: live proofs of each mechanism on the running kernel (what `doctor` runs),
//!   forked through `exec`;
//! - [`hostenv`]: the host's environment, read once;
//! - [`fault`]: the test-only fault hook (debug builds).
//!
//! Nothing here knows the wire format (JSON, envelopes, error codes) or the command line: the
//! layers above hand it plain settings and get plain results back.

// Unit tests may read files, start processes and signal them directly; the product does that
// only through `ptd_sys::fs` and `ptd_sys::exec` (`disallowed-methods` in `clippy.toml`).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

pub mod confine;
pub mod exec;
pub mod fault;
pub mod fs;
pub mod hostenv;
pub mod interrupt;
pub mod net;
/// A throwaway PostgreSQL cluster for the PostgreSQL ledger's tests (test scaffolding, as
/// [`skip`]).
#[cfg(any(test, feature = "test-support"))]
#[allow(clippy::disallowed_methods)] // it starts the cluster's programs directly
pub mod pgtest;
pub mod probe;
pub mod signal;
/// Test scaffolding (the unit tests here and, with `test-support`, the layers above): tests
/// that say what they did not do.
#[cfg(any(test, feature = "test-support"))]
#[allow(clippy::disallowed_methods)] // it probes the host directly
pub mod skip;
