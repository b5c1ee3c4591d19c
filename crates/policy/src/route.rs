//! Which entry decides a tool (SPEC §16), and the lints of `policy check`.

use crate::model::{Location, Pattern, Policy, Route};
use crate::problem::Problem;
use crate::value::escape;

impl Policy {
    /// The entry that decides `canonical_tool` and what the tool gets: an exact id beats every
    /// pattern; among patterns the longer literal prefix wins; no match: `[defaults]` alone.
    pub fn route(&self, canonical_tool: &str) -> Route<'_> {
        let entry = decider(self.tools.iter().map(|t| &t.pattern), canonical_tool)
            .map(|index| &self.tools[index]);
        let effective = match entry {
            Some(tool) => tool.entry.over(&self.defaults),
            None => self.defaults.clone(),
        };
        Route { entry, effective }
    }

    /// The problems of a policy whose `timeout_ms` values are above the bridge's
    /// `dispatcher.timeout_ms` (a policy narrows, never widens): one per value, at its place.
    /// The loader calls it when the bridge is known at load; the main job, which loads the
    /// policy before the bridge, once the bridge is read.
    pub fn above_bridge(&self, bridge_timeout_ms: u64) -> Vec<Problem> {
        above(&self.file, &self.timeouts, bridge_timeout_ms)
    }

    /// The warnings of `policy check` for a bridge that allows `bridge_allowed_tools`: a tool
    /// no entry covers (none when a `*` entry covers them all), an entry no allowed tool
    /// matches, an `unconfined = true` entry. Without a bridge (`None`), only the last. Sorted
    /// by location.
    pub fn lints(&self, bridge_allowed_tools: Option<&[String]>) -> Vec<Problem> {
        let file = self.file.display().to_string();
        let mut lints = Vec::new();
        let top = Location { line: 1, column: 1 };
        let bridge = bridge_allowed_tools.unwrap_or_default();
        for tool in bridge {
            if !self.tools.iter().any(|t| t.pattern.matches(tool)) {
                let message = format!(
                    "the bridge allows `{}`, which no entry covers: it runs the bridge's \
                     dispatcher.command.argv under [defaults]",
                    escape(tool)
                );
                lints.push(Problem::new(&file, top, message));
            }
        }
        for entry in self.tools.iter().filter(|_| bridge_allowed_tools.is_some()) {
            if !bridge.iter().any(|t| entry.pattern.matches(t)) {
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

/// The index of the pattern that decides `tool` (SPEC §16): an exact id beats every pattern;
/// among patterns the longer literal prefix wins; `None` when none matches. Two patterns are
/// never equal in a loaded policy, so lengths never tie.
pub(crate) fn decider<'p>(
    patterns: impl Iterator<Item = &'p Pattern> + Clone,
    tool: &str,
) -> Option<usize> {
    let exact = patterns
        .clone()
        .position(|p| matches!(p, Pattern::Exact(id) if id == tool));
    exact.or_else(|| {
        patterns
            .enumerate()
            .filter_map(|(index, p)| match p {
                Pattern::Prefix(literal) if tool.starts_with(literal.as_str()) => {
                    Some((literal.len(), index))
                }
                _ => None,
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, index)| index)
    })
}

/// One problem per `timeout_ms` of `timeouts` above the bridge's, at its place in `file`.
pub(crate) fn above(
    file: &std::path::Path,
    timeouts: &[(u64, Location)],
    bridge_timeout_ms: u64,
) -> Vec<Problem> {
    let file = file.display().to_string();
    timeouts
        .iter()
        .filter(|(ms, _)| *ms > bridge_timeout_ms)
        .map(|(ms, at)| {
            let message = format!(
                "`timeout_ms` = {ms} is above the bridge's dispatcher.timeout_ms \
                 ({bridge_timeout_ms})"
            );
            Problem::new(&file, *at, message)
        })
        .collect()
}
