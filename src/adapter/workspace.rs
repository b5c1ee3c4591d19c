//! PLACEHOLDER: the workspace adapter (SPEC §9), being written by a helper.

use std::path::PathBuf;

/// Serve one request from stdin, print one result envelope on stdout; returns the exit status.
pub fn run(_root: Option<PathBuf>) -> u8 {
    1
}
