//! The test suite's plumbing: the one way to run the binary ([`Cmd`], whose [`Output`] makes
//! every test state its exit status, stdout and stderr) and the small helpers every area needs
//! (SHA-256 in hex, stdout read as one JSON line, canonical JSON).
//!
//! Invariants: nothing here starts a process except [`Cmd::spawn`]; a run that a test did not
//! check fails on the strict defaults instead of passing. This module knows nothing of the
//! main job's envelopes beyond "one JSON line": the [`Dispatch`](super::Dispatch) builder in
//! `main.rs` adds those rules on top of [`Cmd`].

mod cmd;
mod selftest;

pub use cmd::{Cmd, Output, Running};
pub use ptd_sys::confine::cgroup::Controller;
pub use ptd_sys::skip::{self, Need};

/// Run the rest of the test only when the host meets `$need` (a probe of [`skip`], or of
/// this module); else report `skipped: TEST: REASON` — on the stderr descriptor, which the
/// harness does not capture, and in `target/debug/test-skips.txt` — and pass. Never a silent
/// `return`.
#[macro_export]
macro_rules! require {
    ($need:expr) => {
        if let Err(unmet) = $need {
            $crate::support::skip::report(&unmet);
            return;
        }
    };
}

/// What every confined run needs on this host: Landlock with scopes (ABI 6), and a network
/// namespace — directly as root, else through a user namespace of the test's user.
pub fn confinable() -> Need {
    skip::landlock(6)?;
    skip::network_namespace()
}

use serde_json::Value;

/// A new pseudo-terminal: (master, slave), the slave opened read-write.
pub fn pty() -> (std::fs::File, std::fs::File) {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    (std::fs::File::from(master), slave)
}

/// SHA-256 of `bytes`, in lower-case hex: the digests transcripts, refs and file names carry.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes.as_ref())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bridge ref the dispatcher computes, worked out independently: `sha256:` over the bridge
/// as compact JSON with every object's keys sorted.
pub fn bridge_ref(bridge: &Value) -> String {
    let canonical = serde_json::to_string(&sorted(bridge)).unwrap();
    format!("sha256:{}", sha256_hex(canonical))
}

/// A value rebuilt with every object's keys in sorted order.
pub fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<_> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// `text` as printed by a command whose stdout is one JSON document: exactly one line, ended by
/// its newline, holding one JSON value — parsed.
///
/// A number no tree can hold (`1e400`) is valid JSON the dispatcher passes through untouched:
/// such a line is checked with the product's own strict reader instead, and comes back as
/// `Value::Null` (a test that needs its text reads the raw line).
#[track_caller]
pub fn json_line(text: &str) -> Value {
    assert!(
        text.ends_with('\n') && text.matches('\n').count() == 1,
        "want exactly one line, ended by a newline; got: {}",
        cmd::excerpt(text)
    );
    serde_json::from_str(text).unwrap_or_else(|_| {
        ptd_wire::json::check_object(text.trim_end().as_bytes(), usize::MAX)
            .unwrap_or_else(|e| panic!("not one JSON document ({e:?}): {}", cmd::excerpt(text)));
        Value::Null
    })
}

/// The uid a confined adapter runs as when these tests run the dispatcher: `nobody` for a
/// root dispatcher (SPEC §13.2), else the dispatcher's own.
pub fn adapter_uid() -> u32 {
    let euid = rustix::process::geteuid().as_raw();
    if euid == 0 {
        65534
    } else {
        euid
    }
}

/// Give `path` (a folder or file a test made for a confined adapter) to the user the adapter
/// runs as: grants do not override file modes.
pub fn give_to_adapter(path: &std::path::Path) {
    let uid = adapter_uid();
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
}
