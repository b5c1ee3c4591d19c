//! Tool id mapping (SPEC §4.4): canonical Codebox ids outward to an adapter's own ids.
//!
//! The allowlist is always checked on the canonical id; only the adapter sees the external
//! one (in `request.tool` and `WP_CODEBOX_PARENT_TOOL_TOOL`), and the printed envelope always
//! carries the canonical id again.

use crate::json::{self, human_bytes, JsonIssue};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Largest `--tool-map` accepted, inline or from a file.
pub const MAX_BYTES: usize = 1 << 20;

/// Why a `--tool-map` value cannot be used. For humans: it names the file.
#[derive(Debug, thiserror::Error)]
pub enum ToolMapError {
    /// `@FILE` could not be read.
    #[error("reading tool map file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The text is not one JSON object (or is over [`MAX_BYTES`]).
    #[error("the tool map is not a JSON object of at most {limit}: {0}", limit = human_bytes(MAX_BYTES))]
    NotAnObject(JsonIssue),
    /// An external id is not a non-empty string.
    #[error("the tool map's id for {0:?} must be a non-empty string")]
    BadId(String),
}

/// How canonical ids map outward.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolMap {
    /// No mapping: the adapter sees the canonical id.
    #[default]
    Identity,
    /// `{canonical: external}`; ids not listed pass unchanged.
    Table(BTreeMap<String, String>),
    /// The upstream provider-safe rule.
    ProviderSafe,
}

impl ToolMap {
    /// Parse the `--tool-map` value: `provider-safe`, a JSON object, or `@FILE` holding one.
    pub fn parse(arg: &str) -> Result<ToolMap, ToolMapError> {
        if arg == "provider-safe" {
            return Ok(ToolMap::ProviderSafe);
        }
        let bytes = match arg.strip_prefix('@') {
            Some(path) => match ptd_sys::fs::read_file(Path::new(path), MAX_BYTES as u64) {
                Ok(bytes) => bytes,
                Err(ptd_sys::fs::ReadError::TooLarge { .. }) => {
                    return Err(ToolMapError::NotAnObject(JsonIssue::TooLarge {
                        limit: MAX_BYTES,
                    }))
                }
                Err(err) => {
                    return Err(ToolMapError::Read {
                        path: PathBuf::from(path),
                        source: err.into(),
                    })
                }
            },
            None => arg.as_bytes().to_vec(),
        };
        let map = json::parse_object(&bytes, MAX_BYTES).map_err(ToolMapError::NotAnObject)?;
        let mut table = BTreeMap::new();
        for (canonical, external) in map {
            match external {
                Value::String(s) if !s.is_empty() => {
                    table.insert(canonical, s);
                }
                _ => return Err(ToolMapError::BadId(canonical)),
            }
        }
        Ok(ToolMap::Table(table))
    }

    /// The id the adapter sees for `canonical`.
    pub fn external(&self, canonical: &str) -> String {
        match self {
            ToolMap::Identity => canonical.to_string(),
            ToolMap::Table(table) => table
                .get(canonical)
                .cloned()
                .unwrap_or_else(|| canonical.to_string()),
            ToolMap::ProviderSafe => provider_safe(canonical),
        }
    }
}

/// Runs of characters outside `[A-Za-z0-9_]` become one `_`; leading and trailing `_` are
/// trimmed (the upstream provider-safe rule): `workspace.read` → `workspace_read`.
pub(crate) fn provider_safe(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    let mut in_run = false;
    for c in id.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    out.trim_matches('_').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_safe_collapses_runs_and_trims() {
        assert_eq!(provider_safe("workspace.read"), "workspace_read");
        assert_eq!(provider_safe("..a--b..c__"), "a_b_c");
        assert_eq!(provider_safe("ws/é.grep"), "ws_grep");
    }

    #[test]
    fn table_maps_listed_ids_and_passes_others() {
        let map = ToolMap::parse(r#"{"workspace.search": "workspace_grep"}"#).unwrap();
        assert_eq!(map.external("workspace.search"), "workspace_grep");
        assert_eq!(map.external("workspace.read"), "workspace.read");
        assert!(ToolMap::parse(r#"{"a": 1}"#).is_err());
        assert!(ToolMap::parse("[1]").is_err());
        assert!(ToolMap::parse(r#"{"a":"x","a":"y"}"#).is_err());
    }

    #[test]
    fn a_tool_map_file_is_named_and_bounded() {
        let err = ToolMap::parse("@/nonexistent/map.json").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("reading tool map file /nonexistent/map.json: "),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.json");
        std::fs::write(&big, format!("{{\"a\":\"{}\"}}", "x".repeat(MAX_BYTES))).unwrap();
        let err = ToolMap::parse(&format!("@{}", big.display())).unwrap_err();
        assert!(
            matches!(err, ToolMapError::NotAnObject(JsonIssue::TooLarge { .. })),
            "{err}"
        );
    }
}
