//! Per-process limits (SPEC §13 `--limit-open-files`, `--limit-file-size`): `RLIMIT_NOFILE`
//! and `RLIMIT_FSIZE`, soft and hard alike, set by the child on itself (SPEC §13.1: after
//! joining the cgroups, before the namespaces). Inherited by everything the adapter starts.
//!
//! A process with `CAP_SYS_RESOURCE` (an adapter running as root) can raise its hard limits
//! again; the cgroup limits hold regardless. A file-size limit that is hit ends the writer with
//! `SIGXFSZ` (or `EFBIG` when it ignores the signal); an open-files limit only shows as
//! `EMFILE` inside the adapter.

use rustix::io::Errno;
use rustix::process::{setrlimit, Resource, Rlimit};

/// The per-process limits to set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rlimits {
    pub open_files: Option<u64>,
    pub file_size_bytes: Option<u64>,
}

impl Rlimits {
    /// Whether there is anything to set.
    pub fn is_empty(&self) -> bool {
        self.open_files.is_none() && self.file_size_bytes.is_none()
    }

    /// Set them on the calling process (child side: at most two `prlimit64` calls,
    /// async-signal-safe).
    pub fn apply(&self) -> Result<(), Errno> {
        let pairs = [
            (Resource::Nofile, self.open_files),
            (Resource::Fsize, self.file_size_bytes),
        ];
        for (resource, limit) in pairs {
            if let Some(n) = limit {
                setrlimit(
                    resource,
                    Rlimit {
                        current: Some(n),
                        maximum: Some(n),
                    },
                )?;
            }
        }
        Ok(())
    }
}
