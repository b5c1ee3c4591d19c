//! What reaches a human's terminal: escaping untrusted text, the `error[code]:` and
//! `warning[code]:` lines, and the hint shown when a request is read from an interactive stdin.
//!
//! Owns: the rule for which characters may reach a terminal raw. Invariant: every line this
//! module builds has passed through [`escape`], so an adapter's message, a request's path or a
//! mistyped argument cannot move the cursor, recolour, overwrite or forge a line on the host's
//! terminal. It must not decide *what* is printed (callers do) and never prints to stdout: stdout
//! belongs to the envelope.

use crate::validate::Issue;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::IsTerminal;

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary: how an
/// untrusted string (a key, a path, a line) is shortened before a message quotes it.
pub fn cut_at_char_boundary(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Whether `c` must not reach a terminal raw: C0 controls (tab and newline included), DEL, C1
/// controls, the Unicode bidirectional controls (which can reorder what a line appears to say)
/// and the line and paragraph separators (which some terminals and viewers break lines on).
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}' | '\u{200f}'
        | '\u{2028}' | '\u{2029}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// `s` with every character that could act on a terminal replaced by a visible escape:
/// `\n`, `\r`, `\t` for those three, `\x1b` style for the other C0 controls and DEL, and
/// `\u{202e}` style for C1 controls, bidi controls and line/paragraph separators. Everything
/// else (backslashes and printable Unicode included) is kept as is. Borrows when nothing needs
/// escaping.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The human line for a failure: `error[code]: message`, both parts escaped.
pub fn error_line(code: &str, message: &str) -> String {
    format!("error[{}]: {}", escape(code), escape(message))
}

/// A line that explains the failure above it: `  note: message`, escaped.
pub fn note_line(message: &str) -> String {
    format!("  note: {}", escape(message))
}

/// The human line for a warning issue: `warning[code]: path: message` (the path only when
/// non-empty), escaped.
pub fn warning_line(issue: &Issue) -> String {
    let text = crate::validate::summary(std::slice::from_ref(issue));
    format!("warning[{}]: {}", escape(&issue.code), escape(&text))
}

/// How many of the adapter's last stderr lines follow a failure's `error[..]` line.
pub const TAIL_LINES: usize = 10;
/// How much of each such line is shown (bytes of the line, before escaping).
pub const TAIL_LINE_BYTES: usize = 200;

/// The adapter's stderr under a failure's `error[..]` line: a heading, then the last
/// `max_lines` non-blank-ended lines of `tail` (the redacted `diagnostics.dispatch.stderr_tail`),
/// each cut to `max_width` bytes (`...` marks a cut) and escaped, after `  | `. Empty when
/// `tail` holds nothing but whitespace.
pub fn stderr_tail_lines(tail: &str, max_lines: usize, max_width: usize) -> Vec<String> {
    let lines: Vec<&str> = tail
        .trim_end_matches(['\n', '\r', ' ', '\t'])
        .split('\n')
        .collect();
    if lines.iter().all(|l| l.trim().is_empty()) {
        return Vec::new();
    }
    let shown = &lines[lines.len().saturating_sub(max_lines)..];
    let heading = if shown.len() < lines.len() {
        format!("  adapter stderr (its last {} lines):", shown.len())
    } else {
        "  adapter stderr:".to_string()
    };
    std::iter::once(heading)
        .chain(shown.iter().map(|line| stderr_line(line, max_width)))
        .collect()
}

/// One line of the adapter's stderr as this stderr shows it: cut to `max_width` bytes
/// (`...` marks a cut), escaped, after `  | `.
pub fn stderr_line(line: &str, max_width: usize) -> String {
    let cut = cut_at_char_boundary(line, max_width);
    let more = if cut.len() < line.len() { "..." } else { "" };
    format!("  | {}{more}", escape(cut))
}

/// Print one [`warning_line`] per issue on stderr.
pub fn print_warnings(warnings: &[Issue]) {
    for warning in warnings {
        stderr_line!("{}", warning_line(warning));
    }
}

/// The hint to print on stderr before reading a request from stdin, when stdin is a terminal
/// (someone ran the command by hand and it would otherwise just wait); `None` otherwise.
pub fn stdin_hint() -> Option<&'static str> {
    hint(std::io::stdin().is_terminal())
}

/// The same hint for `validate`, which reads bridges and results too.
pub fn stdin_hint_for(kind: &str) -> Option<String> {
    hint(std::io::stdin().is_terminal())
        .map(|_| format!("reading the {kind} from stdin (end with Ctrl-D)\u{2026}"))
}

fn hint(is_terminal: bool) -> Option<&'static str> {
    is_terminal.then_some("reading the request from stdin (end with Ctrl-D)\u{2026}")
}

/// Output cut into lines for a terminal, a line at a time: what came without its newline yet is
/// held (at most `piece` bytes), so a character or an escape sequence cut between two reads
/// is shown whole, and memory stays bounded whatever the writer sends. Used for an adapter's
/// stderr under `--verbose` and for an MCP server's stderr on a terminal.
#[derive(Debug, Default)]
pub struct HeldLines {
    held: Vec<u8>,
}

impl HeldLines {
    /// Take `bytes`; `show` gets each complete line (without its newline, and `true`) and each
    /// `piece`-byte part of a line longer than that (`false`).
    pub fn push(&mut self, bytes: &[u8], piece: usize, mut show: impl FnMut(&[u8], bool)) {
        let piece = piece.max(1);
        self.held.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(end) = self.held[start..].iter().position(|&b| b == b'\n') {
            show(&self.held[start..start + end], true);
            start += end + 1;
        }
        while self.held.len() - start >= piece {
            show(&self.held[start..start + piece], false);
            start += piece;
        }
        self.held.drain(..start);
    }

    /// What is held (a last line without its newline), taken; empty when nothing is.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_keeps_whole_characters_and_short_text_whole() {
        assert_eq!(cut_at_char_boundary("short", 10), "short");
        assert_eq!(cut_at_char_boundary("abcdef", 3), "abc");
        // "é" is two bytes: a cut in its middle steps back before it.
        assert_eq!(cut_at_char_boundary("aé", 2), "a");
        assert_eq!(cut_at_char_boundary("aé", 3), "aé");
        assert_eq!(cut_at_char_boundary("é", 0), "");
    }

    const HOSTILE: &str = "\x1b[2K\rerror[forged]: \x1b[31mfake line";

    #[test]
    fn hostile_message_is_escaped_visibly_on_one_line() {
        let out = escape(HOSTILE);
        assert_eq!(out, "\\x1b[2K\\rerror[forged]: \\x1b[31mfake line");
        assert!(!out.chars().any(|c| c.is_control()));
        assert_eq!(
            error_line("adapter_code", HOSTILE),
            "error[adapter_code]: \\x1b[2K\\rerror[forged]: \\x1b[31mfake line"
        );
    }

    #[test]
    fn every_class_of_unsafe_character_is_escaped() {
        for (raw, shown) in [
            ("\n", "\\n"),
            ("\r", "\\r"),
            ("\t", "\\t"),
            ("\0", "\\x00"),
            ("\x07", "\\x07"),
            ("\x7f", "\\x7f"),
            ("\u{85}", "\\u{85}"),
            ("\u{9b}", "\\u{9b}"),
            ("\u{202e}", "\\u{202e}"),
            ("\u{2066}", "\\u{2066}"),
            ("\u{200f}", "\\u{200f}"),
            ("\u{61c}", "\\u{61c}"),
            ("\u{2028}", "\\u{2028}"),
            ("\u{2029}", "\\u{2029}"),
        ] {
            assert_eq!(escape(raw), shown, "{raw:?}");
        }
    }

    #[test]
    fn safe_text_is_borrowed_unchanged() {
        for s in ["plain", "a\\x1b stays", "Grüße → 日本", "\u{a0}nbsp", ""] {
            assert!(matches!(escape(s), Cow::Borrowed(x) if x == s), "{s:?}");
        }
    }

    #[test]
    fn warning_line_names_path_code_and_message() {
        let issue = Issue::new("unknown_key", "/dispatcher/x\ny", "unknown key \"x\ny\"");
        assert_eq!(
            warning_line(&issue),
            "warning[unknown_key]: /dispatcher/x\\ny: unknown key \"x\\ny\""
        );
    }

    #[test]
    fn the_stderr_tail_shows_its_last_lines_cut_and_escaped() {
        assert!(stderr_tail_lines("", 10, 200).is_empty());
        assert!(stderr_tail_lines(" \n\n", 10, 200).is_empty());
        assert_eq!(
            stderr_tail_lines("one\ntwo\n", 10, 200),
            ["  adapter stderr:", "  | one", "  | two"]
        );
        let many: String = (1..=12).map(|i| format!("line {i}\n")).collect();
        let shown = stderr_tail_lines(&many, 3, 200);
        assert_eq!(
            shown,
            [
                "  adapter stderr (its last 3 lines):",
                "  | line 10",
                "  | line 11",
                "  | line 12"
            ]
        );
        let hostile = format!("{HOSTILE}\r\n{}", "é".repeat(200));
        let shown = stderr_tail_lines(&hostile, 10, 9);
        assert_eq!(shown[1], "  | \\x1b[2K\\rerro...");
        assert_eq!(shown[2], "  | éééé...");
        assert!(shown.iter().all(|l| !l.chars().any(is_unsafe)));
    }

    #[test]
    fn hint_only_for_a_terminal() {
        assert_eq!(hint(false), None);
        assert_eq!(
            hint(true),
            Some("reading the request from stdin (end with Ctrl-D)…")
        );
    }
}
