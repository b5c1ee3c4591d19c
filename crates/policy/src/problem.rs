//! A problem in a policy file, located: what `policy check` prints as
//! `error[policy]: FILE:LINE:COL: message` (load errors) or `warning[policy]: …` (lints).

use crate::model::Location;
use std::fmt;

/// One problem, at a line and column of the file (both 1-based; a problem of the whole file
/// is at 1:1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file as named.
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl Problem {
    /// A problem of `file` at `at`.
    pub fn new(file: &str, at: Location, message: impl Into<String>) -> Problem {
        Problem {
            file: file.to_string(),
            line: at.line,
            column: at.column,
            message: message.into(),
        }
    }

    /// Where it is.
    pub fn location(&self) -> Location {
        Location {
            line: self.line,
            column: self.column,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

/// Byte offsets of the text → lines and columns.
#[derive(Debug)]
pub(crate) struct Lines<'t> {
    text: &'t str,
    /// Byte offset of each line's start.
    starts: Vec<usize>,
}

impl<'t> Lines<'t> {
    pub(crate) fn new(text: &'t str) -> Lines<'t> {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Lines { text, starts }
    }

    /// The location of byte `offset` (clamped to the text; a column counts characters).
    pub(crate) fn locate(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let index = self.starts.partition_point(|start| *start <= offset);
        let line_start = self
            .starts
            .get(index.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        let column = self
            .text
            .get(line_start..offset)
            .map_or(offset - line_start, |s| s.chars().count());
        Location {
            line: index.max(1),
            column: column + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_and_character_columns() {
        let lines = Lines::new("ab\n\u{e9}x = 1\n");
        assert_eq!(lines.locate(0), Location { line: 1, column: 1 });
        assert_eq!(lines.locate(2), Location { line: 1, column: 3 });
        assert_eq!(lines.locate(3), Location { line: 2, column: 1 });
        // `é` is two bytes, one column.
        assert_eq!(lines.locate(5), Location { line: 2, column: 2 });
        assert_eq!(lines.locate(999), Location { line: 3, column: 1 });
    }

    #[test]
    fn a_problem_shows_as_file_line_column_message() {
        let p = Problem::new("p.toml", Location { line: 3, column: 7 }, "bad");
        assert_eq!(p.to_string(), "p.toml:3:7: bad");
    }
}
