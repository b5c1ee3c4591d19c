//! Which entry decides a tool (SPEC §16), and the lints of `policy check`.

use crate::model::{Location, Pattern, Policy, Route, ToolEntry};
use crate::problem::Problem;
use crate::value::escape;

impl Policy {
    /// The entry that decides `canonical_tool` and what the tool gets: an exact id beats every
    /// pattern; among patterns the longer literal prefix wins; no match: `[defaults]` alone.
    pub fn route(&self, canonical_tool: &str) -> Route<'_> {
        let entry = self.decider(canonical_tool);
        let effective = match entry {
            Some(tool) => tool.entry.over(&self.defaults),
            None => self.defaults.clone(),
        };
        Route { entry, effective }
    }

    fn decider(&self, tool: &str) -> Option<&ToolEntry> {
        let exact = self
            .tools
            .iter()
            .find(|t| matches!(&t.pattern, Pattern::Exact(id) if id == tool));
        exact.or_else(|| {
            self.tools
                .iter()
                .filter_map(|t| match &t.pattern {
                    Pattern::Prefix(literal) if tool.starts_with(literal.as_str()) => {
                        Some((literal.len(), t))
                    }
                    _ => None,
                })
                // Two entries with the same `match` are a load error: lengths never tie.
                .max_by_key(|(len, _)| *len)
                .map(|(_, t)| t)
        })
    }

    /// The warnings of `policy check` for a bridge that allows `bridge_allowed_tools`: a tool
    /// no entry covers (none when a `*` entry covers them all), an entry no allowed tool
    /// matches, an `unconfined = true` entry. Sorted by location.
    pub fn lints(&self, bridge_allowed_tools: &[String]) -> Vec<Problem> {
        let file = self.file.display().to_string();
        let mut lints = Vec::new();
        let top = Location { line: 1, column: 1 };
        for tool in bridge_allowed_tools {
            if !self.tools.iter().any(|t| t.pattern.matches(tool)) {
                let message = format!(
                    "the bridge allows `{}`, which no entry covers: it runs the bridge's \
                     dispatcher.command.argv under [defaults]",
                    escape(tool)
                );
                lints.push(Problem::new(&file, top, message));
            }
        }
        for entry in &self.tools {
            if !bridge_allowed_tools
                .iter()
                .any(|t| entry.pattern.matches(t))
            {
                let message = format!(
                    "`match = \"{}\"` matches no tool the bridge allows",
                    escape(&entry.pattern.as_written())
                );
                lints.push(Problem::new(&file, entry.match_at, message));
            }
        }
        let unconfined = self
            .defaults_unconfined_at
            .iter()
            .map(|at| (*at, "[defaults]".to_string()))
            .chain(self.tools.iter().filter_map(|t| {
                let name = format!("the entry `{}`", escape(&t.pattern.as_written()));
                t.unconfined_at.map(|at| (at, name))
            }));
        for (at, name) in unconfined {
            let message = format!(
                "`unconfined = true`: {name} runs its adapter without confinement (SPEC §13.2)"
            );
            lints.push(Problem::new(&file, at, message));
        }
        lints.sort_by_key(Problem::location);
        lints
    }
}
