//! How a ledger's commits reach the disk: `--ledger-durability` and the policy's
//! `[ledger] durability` (SPEC §14.4).

use serde::{Deserialize, Serialize};

/// When a commit of the main job is on the disk.
///
/// - [`Durability::Full`], the default: before the next step — a claim before its adapter
///   starts, an outcome before its envelope is printed — power loss included (SQLite
///   `synchronous = FULL`; PostgreSQL's `synchronous_commit` as the server has it).
/// - [`Durability::Normal`]: a commit is in the operating system's hands (a killed
///   dispatcher loses nothing) but not yet on the disk. On SQLite the checkpoint each
///   dispatcher runs after its envelope puts everything on the disk before it exits; on
///   PostgreSQL `synchronous_commit = off` leaves it to the server's WAL writer. A crash of
///   the host (or of the server) in between can lose the call's records: its claim — the same
///   key may then run again — its outcome, its audit records (the chain loses its tail, it
///   does not break) and what it added to the budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    #[default]
    Full,
    Normal,
}

impl Durability {
    /// Every choice, as written on the command line and in a policy.
    pub const NAMES: [&'static str; 2] = ["full", "normal"];

    /// The choice as written.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Full => "full",
            Durability::Normal => "normal",
        }
    }

    /// The choice written as `text` (exactly one of [`Durability::NAMES`]).
    pub fn parse(text: &str) -> Option<Durability> {
        match text {
            "full" => Some(Durability::Full),
            "normal" => Some(Durability::Normal),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_and_nothing_else_does() {
        for name in Durability::NAMES {
            assert_eq!(Durability::parse(name).map(Durability::name), Some(name));
        }
        for bad in ["", "FULL", "Normal", "off", "full ", "extra"] {
            assert_eq!(Durability::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Durability::default(), Durability::Full);
    }
}
