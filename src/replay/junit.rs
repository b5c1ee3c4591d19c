//! `replay --junit FILE`: the run as JUnit XML, in the common form CI systems ingest (Jenkins,
//! GitLab, GitHub test reporters): one `<testsuites>` holding one `<testsuite>` whose
//! `tests` / `failures` / `errors` / `skipped` counts match its `<testcase>`s; a failed case
//! has one `<failure message="…" type="…">` whose text is the full account printed on stdout.
//!
//! Invariants: the document is well-formed XML 1.0 whatever a case's name, path or diff holds:
//! `&`, `<`, `>`, `"` and `'` are escaped, and characters XML 1.0 cannot carry at all (most
//! C0 controls) are written as visible `\u{…}` text instead, and so are the characters a CI page
//! would render raw to mislead (C1 and bidirectional controls, line and paragraph separators:
//! `ptd_wire::terminal`'s set). `time` attributes are seconds;
//! they are reported, never compared.
//!
//! It must not decide outcomes; it renders the reports it is given.

use super::{CaseReport, Outcome};
use std::fmt::Write as _;
use std::time::Duration;

/// The suite's name in the report.
pub(crate) const SUITE: &str = "parent-tool-dispatch replay";

/// The report as XML text.
pub fn render(reports: &[CaseReport], elapsed: Duration) -> String {
    let failures = reports.iter().filter(|r| r.failed()).count();
    let tests = reports.len();
    let time = seconds(elapsed);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" time=\"{time}\">",
        escape(SUITE)
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{time}\">",
        escape(SUITE)
    );
    for report in reports {
        let _ = write!(
            out,
            "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
            escape(&report.name),
            escape(&report.file),
            seconds(report.duration)
        );
        match &report.outcome {
            Outcome::Failed { .. } => {
                let lines = report.details();
                let _ = writeln!(
                    out,
                    ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                    escape(&report.summary()),
                    report.failure_type(),
                    escape(&lines.join("\n"))
                );
            }
            Outcome::Passed | Outcome::Blessed { .. } => {
                out.push_str("/>\n");
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

fn seconds(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// Text for an attribute value or element content.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Allowed as they are in content; in attributes they would be normalized away.
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            // Not XML 1.0 characters at all: not even as references. And what XML could carry
            // but a CI page would render raw (C1 and bidirectional controls, line separators:
            // a reference would be decoded back to them): visible, as on the terminal.
            c if (c as u32) < 0x20
                || c == '\u{FFFE}'
                || c == '\u{FFFF}'
                || ptd_wire::terminal::is_unsafe(c) =>
            {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_xml_cannot_hold_is_escaped_or_made_visible() {
        assert_eq!(
            escape("a<b>&\"c'\u{1b}\u{0}\n"),
            "a&lt;b&gt;&amp;&quot;c&apos;\\u{1b}\\u{0}&#10;"
        );
        assert_eq!(
            escape("ab\u{202e}cd\u{2028}\u{2066}\u{85}é"),
            "ab\\u{202e}cd\\u{2028}\\u{2066}\\u{85}é"
        );
    }
}
