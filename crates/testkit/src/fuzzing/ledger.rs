//! The body of the `ledger_flags` fuzz target: the ledger's option parsers (SPEC §14.2,
//! §14.3) on hostile text.

use ptd_ledger::{flags, parse_budget_flag, parse_since, Budgets};

/// The flags a case may name: the four budget flags, `--since`, and one nobody knows.
const FLAGS: [&str; 6] = [
    "--budget-calls",
    "--budget-tool",
    "--budget-adapter-ms",
    "--max-concurrent",
    "--since",
    "--budget-bogus",
];

/// `data` is a sequence of lines, each a flag picked by its first byte and a value (the rest
/// of the line), applied in order to one set of budgets, as a command line would. Every parse
/// returns instead of panicking; a refusal names its flag and leaves the budgets as they were;
/// what is accepted is exactly the value given (a count is its digits, a tool budget splits at
/// the last `=`, `--max-concurrent` is at least 1), and an accepted `--since` time prints back
/// as the same instant.
pub fn ledger_flags(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut budgets = Budgets::default();
    for line in text.split('\n') {
        let mut chars = line.chars();
        let Some(pick) = chars.next() else { continue };
        let flag = FLAGS[pick as usize % FLAGS.len()];
        let value = chars.as_str();
        if flag == "--since" {
            if let Ok(ms) = parse_since(value) {
                let printed = flags::format_rfc3339_ms(ms);
                assert_eq!(parse_since(&printed), Ok(ms), "{value:?} → {printed}");
            }
            assert_eq!(flags::since_value(value).ok(), parse_since(value).ok());
            continue;
        }
        let before = budgets.clone();
        match parse_budget_flag(&mut budgets, flag, value) {
            Err(err) => {
                assert_eq!(budgets, before, "a refused {flag} changed the budgets");
                let shown = err.to_string();
                if flag == "--budget-bogus" {
                    assert_eq!(err.flag, "budget");
                } else {
                    assert_eq!(err.flag, flag);
                    assert!(shown.contains(flag), "{shown}");
                }
                assert!(!shown.chars().any(char::is_control), "{shown:?}");
            }
            Ok(()) => {
                assert_ne!(flag, "--budget-bogus");
                check_accepted(&before, &budgets, flag, value);
            }
        }
    }
}

/// What an accepted flag must have changed, and nothing else.
fn check_accepted(before: &Budgets, after: &Budgets, flag: &str, value: &str) {
    let count = |text: &str| -> u64 {
        assert!(
            text.bytes().all(|b| b.is_ascii_digit()) && !text.is_empty(),
            "{text:?}"
        );
        text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"))
    };
    let mut expected = before.clone();
    match flag {
        "--budget-calls" => expected.calls = Some(count(value)),
        "--budget-adapter-ms" => expected.adapter_ms = Some(count(value)),
        "--max-concurrent" => {
            let n = count(value);
            assert!(n >= 1);
            expected.max_concurrent = Some(n);
        }
        _ => {
            let (tool, n) = value
                .rsplit_once('=')
                .unwrap_or_else(|| panic!("{value:?}"));
            assert!(!tool.is_empty() && tool.bytes().all(|b| b.is_ascii_graphic()));
            assert!(!before.tools.contains_key(tool));
            expected.tools.insert(tool.to_string(), count(n));
        }
    }
    assert_eq!(*after, expected, "{flag} {value:?}");
}
