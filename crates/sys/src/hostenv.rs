//! The host's environment variables, as the main job sees them.
//!
//! Everything that reads a host variable (secret and pass-through names, `cwd_env`, the
//! endpoint's `url_env` and `token_env`, the base variables given to the adapter) reads it
//! through [`HostEnv`], so that a run can be given a different environment without touching
//! the process's own — `replay` runs many cases in one process, each with its `env`.

use std::collections::BTreeMap;
use std::ffi::OsString;

/// Where host variables come from.
#[derive(Debug, Clone, Default)]
pub struct HostEnv {
    /// Variables that override the process's (a replay case's `env`).
    overlay: BTreeMap<String, String>,
}

impl HostEnv {
    /// The process's own environment.
    pub fn process() -> HostEnv {
        HostEnv::default()
    }

    /// The process's environment with `vars` set on top.
    pub fn with(vars: impl IntoIterator<Item = (String, String)>) -> HostEnv {
        HostEnv {
            overlay: vars.into_iter().collect(),
        }
    }

    /// A variable's value when it is set and valid Unicode.
    pub fn var(&self, name: &str) -> Option<String> {
        match self.overlay.get(name) {
            Some(value) => Some(value.clone()),
            None => std::env::var(name).ok(),
        }
    }

    /// A variable's value when it is set, whatever its bytes.
    pub fn var_os(&self, name: &str) -> Option<OsString> {
        match self.overlay.get(name) {
            Some(value) => Some(value.into()),
            None => std::env::var_os(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overlay_wins_and_the_rest_comes_from_the_process() {
        let env = HostEnv::with([("PTD_TEST_ONLY_OVERLAY".to_string(), "x".to_string())]);
        assert_eq!(env.var("PTD_TEST_ONLY_OVERLAY").as_deref(), Some("x"));
        assert_eq!(HostEnv::process().var("PTD_TEST_ONLY_OVERLAY"), None);
        assert_eq!(env.var("PATH"), std::env::var("PATH").ok());
    }
}
