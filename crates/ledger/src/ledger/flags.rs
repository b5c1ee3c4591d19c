//! The ledger's option values as pure parsers (SPEC §14.2, §14.3): `--budget-calls N`,
//! `--budget-tool TOOL=N`, `--budget-adapter-ms N`, `--max-concurrent N` and `audit export
//! --since RFC3339`. Each error names the flag, so clap (or any caller) can print it as it is.
//!
//! Nothing here reads the environment or a file; [`parse_budget_flag`] and [`parse_since`] take
//! any text and are the bodies of property tests that they never panic.

use super::Budgets;
use std::fmt;

/// A budget or `--since` value that cannot be used: which flag, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagError {
    /// The flag as typed on the command line, e.g. `--budget-tool`.
    pub flag: &'static str,
    /// What is wrong with the value.
    pub reason: String,
}

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid value for {}: {}", self.flag, self.reason)
    }
}

impl std::error::Error for FlagError {}

fn error(flag: &'static str, reason: impl Into<String>) -> FlagError {
    FlagError {
        flag,
        reason: reason.into(),
    }
}

/// The longest tool id `--budget-tool` accepts (the request's own bound on `tool`).
const MAX_TOOL_BYTES: usize = 256;

/// A decimal count: ASCII digits only (no sign, no spaces, no `0x`), at most `u64::MAX`.
fn count(flag: &'static str, text: &str) -> Result<u64, FlagError> {
    if text.is_empty() {
        return Err(error(flag, "expected a whole number, got nothing"));
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(error(
            flag,
            format!(
                "expected a whole number (digits only), got {:?}",
                ptd_wire::terminal::escape(text)
            ),
        ));
    }
    text.parse::<u64>()
        .map_err(|_| error(flag, "the number is too large"))
}

/// The longest `--session` id: the request's own bound on `request_id` (SPEC §2.2).
pub(crate) const MAX_SESSION_BYTES: usize = 256;

/// `--session ID`: the host's session, 1–[`MAX_SESSION_BYTES`] bytes without control
/// characters (it is written to the audit trail and compared with the request's
/// `sandbox_session.sandbox_session_id`).
pub fn parse_session(text: &str) -> Result<String, FlagError> {
    const FLAG: &str = "--session";
    if text.is_empty() {
        return Err(error(FLAG, "the session id is empty"));
    }
    if text.len() > MAX_SESSION_BYTES {
        return Err(error(
            FLAG,
            format!("the session id is longer than {MAX_SESSION_BYTES} bytes"),
        ));
    }
    if text.chars().any(char::is_control) {
        return Err(error(FLAG, "the session id holds a control character"));
    }
    Ok(text.to_string())
}

/// `--budget-calls N`: admitted calls per session. `0` is allowed (nothing may run).
pub fn parse_budget_calls(text: &str) -> Result<u64, FlagError> {
    count("--budget-calls", text)
}

/// `--budget-adapter-ms N`: total adapter wall time per session, in milliseconds.
pub(crate) fn parse_budget_adapter_ms(text: &str) -> Result<u64, FlagError> {
    count("--budget-adapter-ms", text)
}

/// `--max-concurrent N`: calls of one session in flight at once; at least 1 (0 would refuse
/// every call with a retryable error forever, which is a budget, not a concurrency limit).
pub(crate) fn parse_max_concurrent(text: &str) -> Result<u64, FlagError> {
    let n = count("--max-concurrent", text)?;
    if n == 0 {
        return Err(error(
            "--max-concurrent",
            "must be at least 1 (use --budget-calls 0 to admit nothing)",
        ));
    }
    Ok(n)
}

/// `--budget-tool TOOL=N`: the tool's canonical id, `=`, a count. The id is split at the LAST
/// `=` (a tool id cannot end in a count) and must be non-empty, printable ASCII without spaces.
pub(crate) fn parse_budget_tool(text: &str) -> Result<(String, u64), FlagError> {
    const FLAG: &str = "--budget-tool";
    let Some((tool, n)) = text.rsplit_once('=') else {
        return Err(error(FLAG, "expected TOOL=N, e.g. wp.posts.create=10"));
    };
    if tool.is_empty() {
        return Err(error(FLAG, "the tool id before '=' is empty"));
    }
    if tool.len() > MAX_TOOL_BYTES {
        return Err(error(
            FLAG,
            format!("the tool id is longer than {MAX_TOOL_BYTES} bytes"),
        ));
    }
    if !tool.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(error(
            FLAG,
            "the tool id must be printable ASCII without spaces",
        ));
    }
    Ok((tool.to_string(), count(FLAG, n)?))
}

/// One budget flag and its value, as the command line gives them, applied to `budgets`: the
/// fuzzable entry point of this module. A second `--budget-tool` for the same tool, or a
/// repeated single-valued flag, is an error naming the flag (two limits for one thing are a
/// mistake, not a choice).
pub fn parse_budget_flag(budgets: &mut Budgets, flag: &str, value: &str) -> Result<(), FlagError> {
    fn once(slot: &mut Option<u64>, flag: &'static str, n: u64) -> Result<(), FlagError> {
        if slot.is_some() {
            return Err(error(flag, "given more than once"));
        }
        *slot = Some(n);
        Ok(())
    }
    match flag {
        "--budget-calls" => once(
            &mut budgets.calls,
            "--budget-calls",
            parse_budget_calls(value)?,
        ),
        "--budget-adapter-ms" => once(
            &mut budgets.adapter_ms,
            "--budget-adapter-ms",
            parse_budget_adapter_ms(value)?,
        ),
        "--max-concurrent" => once(
            &mut budgets.max_concurrent,
            "--max-concurrent",
            parse_max_concurrent(value)?,
        ),
        "--budget-tool" => {
            let (tool, n) = parse_budget_tool(value)?;
            if budgets.tools.contains_key(&tool) {
                return Err(error(
                    "--budget-tool",
                    format!(
                        "tool {:?} given more than once",
                        ptd_wire::terminal::escape(&tool)
                    ),
                ));
            }
            budgets.tools.insert(tool, n);
            Ok(())
        }
        _ => Err(FlagError {
            flag: "budget",
            reason: format!("unknown budget flag {:?}", ptd_wire::terminal::escape(flag)),
        }),
    }
}

/// `--since RFC3339` → milliseconds since the Unix epoch: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`
/// (`t`/`z` and a space for `T` are accepted, as RFC 3339 allows). Fractions beyond
/// milliseconds are truncated; times before 1970 are refused (no record is older).
pub fn parse_since(text: &str) -> Result<u64, FlagError> {
    rfc3339_ms(text).map_err(|reason| error("--since", reason))
}

/// [`parse_since`] as a clap value parser: the reason alone (clap names the flag itself).
pub fn since_value(text: &str) -> Result<u64, String> {
    rfc3339_ms(text)
}

fn rfc3339_ms(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "expected an RFC 3339 time such as 2026-01-31T12:00:00Z, got {:?}",
            ptd_wire::terminal::escape(text)
        )
    };
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Result<u64, String> {
        let part = b.get(range).ok_or_else(bad)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        Ok(part.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
    };
    let sep = |at: usize, allowed: &[u8]| -> Result<(), String> {
        match b.get(at) {
            Some(c) if allowed.contains(c) => Ok(()),
            _ => Err(bad()),
        }
    };
    let year = digits(0..4)?;
    sep(4, b"-")?;
    let month = digits(5..7)?;
    sep(7, b"-")?;
    let day = digits(8..10)?;
    sep(10, b"Tt ")?;
    let hour = digits(11..13)?;
    sep(13, b":")?;
    let minute = digits(14..16)?;
    sep(16, b":")?;
    // RFC 3339 allows a leap second (60); it is read as the last millisecond of its minute.
    let second = digits(17..19)?;
    let mut at = 19;
    let mut millis = 0u64;
    if b.get(at) == Some(&b'.') {
        let start = at + 1;
        let mut end = start;
        while b.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        if end == start {
            return Err(bad());
        }
        for (i, d) in b[start..end.min(start + 3)].iter().enumerate() {
            millis += u64::from(d - b'0') * [100, 10, 1][i];
        }
        at = end;
    }
    let offset_minutes: i64 = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if at + 6 == b.len() => {
            let oh = digits(at + 1..at + 3)?;
            sep(at + 3, b":")?;
            let om = digits(at + 4..at + 6)?;
            if oh > 23 || om > 59 {
                return Err(format!(
                    "the UTC offset is out of range in {:?}",
                    ptd_wire::terminal::escape(text)
                ));
            }
            let total = i64::try_from(oh * 60 + om).map_err(|_| bad())?;
            if *sign == b'-' {
                -total
            } else {
                total
            }
        }
        _ => return Err(bad()),
    };
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(format!(
            "the date or time is out of range in {:?}",
            ptd_wire::terminal::escape(text)
        ));
    }
    let (second, millis) = if second == 60 {
        (59, 999)
    } else {
        (second, millis)
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400
        + i64::try_from(hour * 3600 + minute * 60 + second).map_err(|_| bad())?
        - offset_minutes * 60;
    let seconds =
        u64::try_from(seconds).map_err(|_| "times before 1970 are not accepted".to_string())?;
    Ok(seconds * 1000 + millis)
}

fn is_leap(year: u64) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
/// `year` has at most four digits, so every intermediate fits an `i64`.
fn days_from_civil(year: u64, month: u64, day: u64) -> i64 {
    let (y, m, d) = (year as i64, month as i64, day as i64);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds, for `audit export`.
pub fn format_rfc3339_ms(ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_are_digits_only_and_errors_name_the_flag() {
        assert_eq!(parse_budget_calls("0"), Ok(0));
        assert_eq!(parse_budget_adapter_ms("120000"), Ok(120_000));
        for bad in ["", "-1", "+1", " 1", "1 ", "0x10", "1e3", "١"] {
            let err = parse_budget_calls(bad).unwrap_err();
            assert_eq!(err.flag, "--budget-calls", "{bad:?}");
            assert!(err
                .to_string()
                .starts_with("invalid value for --budget-calls: "));
        }
        let err = parse_budget_adapter_ms("99999999999999999999999").unwrap_err();
        assert_eq!(err.reason, "the number is too large");
        assert_eq!(
            parse_max_concurrent("0").unwrap_err().flag,
            "--max-concurrent"
        );
        assert_eq!(parse_max_concurrent("3"), Ok(3));
    }

    #[test]
    fn a_session_id_is_one_to_256_bytes_without_control_characters() {
        assert_eq!(parse_session("sandbox_123"), Ok("sandbox_123".into()));
        assert_eq!(parse_session(&"é".repeat(128)).map(|s| s.len()), Ok(256));
        for (bad, says) in [("", "empty"), ("a\nb", "control"), ("\u{7f}", "control")] {
            let err = parse_session(bad).unwrap_err();
            assert_eq!(err.flag, "--session");
            assert!(err.reason.contains(says), "{bad:?}: {err}");
        }
        let err = parse_session(&"x".repeat(257)).unwrap_err();
        assert!(err.reason.contains("256 bytes"), "{err}");
    }

    #[test]
    fn budget_tool_splits_at_the_last_equals_sign() {
        assert_eq!(parse_budget_tool("wp.posts=3"), Ok(("wp.posts".into(), 3)));
        assert_eq!(parse_budget_tool("a=b=4"), Ok(("a=b".into(), 4)));
        for (bad, says) in [
            ("wp.posts", "expected TOOL=N"),
            ("=3", "empty"),
            ("wp posts=3", "printable ASCII"),
            ("wp.posts=", "got nothing"),
            ("wp.posts=x", "digits only"),
        ] {
            let err = parse_budget_tool(bad).unwrap_err();
            assert_eq!(err.flag, "--budget-tool");
            assert!(err.reason.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn budget_flags_fill_budgets_and_refuse_repeats() {
        let mut b = Budgets::default();
        parse_budget_flag(&mut b, "--budget-calls", "5").unwrap();
        parse_budget_flag(&mut b, "--budget-tool", "a=1").unwrap();
        parse_budget_flag(&mut b, "--budget-tool", "b=2").unwrap();
        parse_budget_flag(&mut b, "--budget-adapter-ms", "1000").unwrap();
        parse_budget_flag(&mut b, "--max-concurrent", "2").unwrap();
        assert_eq!(b.calls, Some(5));
        assert_eq!(b.tools.get("b"), Some(&2));
        assert_eq!(b.adapter_ms, Some(1000));
        assert_eq!(b.max_concurrent, Some(2));
        let err = parse_budget_flag(&mut b, "--budget-calls", "6").unwrap_err();
        assert_eq!(
            (err.flag, err.reason.as_str()),
            ("--budget-calls", "given more than once")
        );
        let err = parse_budget_flag(&mut b, "--budget-tool", "a=9").unwrap_err();
        assert!(err.reason.contains("more than once"), "{err}");
        assert!(parse_budget_flag(&mut b, "--budget-x", "1").is_err());
    }

    #[test]
    fn since_reads_rfc3339_with_offsets_and_fractions() {
        assert_eq!(parse_since("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_since("1970-01-01T00:00:01.5Z"), Ok(1500));
        assert_eq!(parse_since("1970-01-01 01:00:00.123456+01:00"), Ok(123));
        assert_eq!(parse_since("2000-03-01t00:00:00z"), Ok(951_868_800_000));
        assert_eq!(parse_since("2024-02-29T23:59:60Z"), Ok(1_709_251_199_999));
        assert_eq!(
            parse_since("2026-12-01T19:00:00-02:30"),
            parse_since("2026-12-01T21:30:00Z")
        );
        // Round trip through the export format.
        let ms = 1_764_615_600_123;
        assert_eq!(parse_since(&format_rfc3339_ms(ms)), Ok(ms));
        for bad in [
            "",
            "2026-12-01",
            "2026-12-01T19:00:00",
            "2026-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2026-12-01T24:00:00Z",
            "2026-12-01T19:00:00.Z",
            "2026-12-01T19:00:00+24:00",
            "2026-12-01T19:00:00+0100",
            "1969-12-31T23:59:59Z",
            "2026-12-01T19:00:00Zjunk",
        ] {
            let err = parse_since(bad).unwrap_err();
            assert_eq!(err.flag, "--since", "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn the_parsers_never_panic(flag in "(--budget-calls|--budget-tool|--budget-adapter-ms|--max-concurrent|.{0,12})", value in "\\PC{0,40}") {
            let mut b = Budgets::default();
            let _ = parse_budget_flag(&mut b, &flag, &value);
            let _ = parse_since(&value);
        }

        #[test]
        fn since_never_panics_on_near_misses(s in "[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,12})?([Zz]|[+-][0-9]{2}:[0-9]{2})?") {
            if let Ok(ms) = parse_since(&s) {
                prop_assert!(ms < 253_402_300_800_000);
            }
        }
    }
}
