//! Wire types of the three envelopes and the strict JSON reader they are read with.

use std::path::Path;

/// Read an envelope's bytes from a file, or from stdin for none or `-`, stopping one byte past
/// `max_bytes` so that an oversized input is detected without being read whole. A named file
/// goes through the one reader's stream mode ([`crate::fs::read_stream`]): never a wait in
/// `open(2)`, so a FIFO without a writer waits where the default SIGINT/SIGTERM end it.
pub fn read_input(path: Option<&Path>, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    let path = path.filter(|p| p.as_os_str() != "-");
    let none = crate::interrupt::Interrupts::none();
    Ok(crate::fs::read_stream(path, max_bytes.saturating_add(1), &none)?)
}

pub mod bridge;
pub mod canonical;
pub mod request;
pub mod result;
