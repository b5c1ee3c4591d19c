//! Redaction (SPEC §5). PLACEHOLDER: being written by a helper; interface fixed below.

use serde_json::Value;

/// Collected secrets and host paths, applied to strings and JSON trees.
#[derive(Debug, Default, Clone)]
pub struct Redactor {}

impl Redactor {
    /// An empty redactor (still applies the pattern rules).
    pub fn new() -> Self {
        Redactor {}
    }
    /// Register an exact secret value (ignored when shorter than 8 chars, a boolean or a number).
    pub fn add_secret(&mut self, _value: &str) {}
    /// Register a host-local path prefix to become `[host-path]`.
    pub fn add_host_path(&mut self, _path: &str) {}
    /// Only the exact secret values (all their forms) → `[redacted]`.
    pub fn scrub_secrets_str(&self, s: &str) -> String {
        s.to_string()
    }
    /// Only the exact secret values, on every string and key of the tree.
    pub fn scrub_secrets_value(&self, _v: &mut Value) {}
    /// The full string rules.
    pub fn redact_str(&self, s: &str) -> String {
        s.to_string()
    }
    /// The full rules on a JSON tree (an envelope root: its top-level `authorization` object is
    /// structural).
    pub fn redact_value(&self, _v: &mut Value) {}
}

/// Whether a key names a secret (placeholder).
pub fn is_sensitive_key(_key: &str) -> bool {
    false
}
