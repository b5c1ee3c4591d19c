//! Wire types of the three envelopes and the strict JSON reader they are read with.

use std::io::Read;
use std::path::Path;

/// Read an envelope's bytes from a file, or from stdin for none or `-`, stopping one byte past
/// `max_bytes` so that an oversized input is detected without being read whole.
pub fn read_input(path: Option<&Path>, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let limit = max_bytes.saturating_add(1);
    match path.filter(|p| p.as_os_str() != "-") {
        Some(path) => std::fs::File::open(path)?
            .take(limit)
            .read_to_end(&mut bytes)?,
        None => std::io::stdin()
            .lock()
            .take(limit)
            .read_to_end(&mut bytes)?,
    };
    Ok(bytes)
}

pub mod bridge;
pub mod canonical;
pub mod request;
pub mod result;
