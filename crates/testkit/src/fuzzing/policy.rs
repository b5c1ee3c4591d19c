//! The `policy` target: the host policy's loader (SPEC §16) on any text.

use ptd_policy::{parse, LoadContext, Pattern};
use std::path::Path;

/// The loader never panics; every problem it reports is located (line and column from 1, the
/// file as named) and the problems come in file order; a policy it accepts routes each exact
/// `match` to its own entry, routes any name only to an entry that matches it (and its
/// compiled form routes every name the same), and lints without panicking.
pub fn policy(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let cx = LoadContext {
        bridge_timeout_ms: Some(30_000),
        ledger: Some("/var/lib/ptd-test-ledger/l.db".into()),
        path: Some("/usr/bin:/bin".into()),
    };
    let file = Path::new("fuzz.toml");
    match parse(file, text, &cx) {
        Err(problems) => {
            assert!(!problems.is_empty(), "a refusal names its problems");
            for p in &problems {
                assert!(p.line >= 1 && p.column >= 1, "{p}");
                assert_eq!(p.file, "fuzz.toml");
                assert!(!p.message.is_empty(), "{p}");
            }
            let at: Vec<(usize, usize)> = problems.iter().map(|p| (p.line, p.column)).collect();
            let mut sorted = at.clone();
            sorted.sort();
            assert_eq!(at, sorted, "problems come in file order");
        }
        Ok(policy) => {
            let mut names: Vec<String> = Vec::new();
            for tool in &policy.tools {
                let written = tool.pattern.as_written();
                if let Pattern::Exact(id) = &tool.pattern {
                    let route = policy.route(id);
                    let decider = route.entry.map(|t| t.pattern.as_written());
                    assert_eq!(decider.as_deref(), Some(written.as_str()), "{id}");
                }
                names.push(written.replace('*', "x.y"));
            }
            names.extend(["", "a", "workspace.read", "git.commit"].map(String::from));
            // The compiled form (what a call reads, and what the cache keeps) routes the same.
            let compiled = policy.compile();
            for name in &names {
                let route = policy.route(name);
                if let Some(entry) = route.entry {
                    assert!(entry.pattern.matches(name), "{name}");
                }
                let fast = compiled.route(name);
                assert_eq!(fast.effective, route.effective, "{name}");
                assert_eq!(fast.matched, route.entry.is_some(), "{name}");
            }
            let _ = policy.lints(Some(&names));
        }
    }
}
