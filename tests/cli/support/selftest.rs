//! The plumbing's own promises: a check a test forgets fails it, raw values need all three
//! stated, a hung child is killed by the watchdog, a signal reaches the child.

use super::*;
use crate::{assert_all_gone, Dispatch};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// The message of the panic `f` raised (it must raise one).
fn panic_message(f: impl FnOnce()) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("it must fail");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn an_exit_status_nobody_stated_must_be_zero() {
    let message = panic_message(|| {
        Cmd::new(["validate", "bridge"])
            .stdin("{}")
            .run()
            .stdout_contains("\"valid\":false")
            .stderr_starts_with("error[bridge_invalid]: ");
    });
    assert!(
        message.contains("exit status 65 (not stated, so 0)"),
        "{message}"
    );
}

#[test]
fn stderr_nobody_stated_must_be_empty() {
    let message = panic_message(|| {
        Cmd::new(["validate", "bridge"])
            .stdin("{}")
            .run()
            .exit(65)
            .stdout_contains("\"valid\":false");
    });
    assert!(
        message.contains("output on stderr (not stated, so none)"),
        "{message}"
    );
}

#[test]
fn stdout_nobody_stated_must_be_empty() {
    let message = panic_message(|| {
        Cmd::new(["--help"]).run().exit(0).stderr_empty();
    });
    assert!(
        message.contains("output on stdout (not stated, so none)"),
        "{message}"
    );
    // Stated, the same run passes.
    Cmd::new(["--help"])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_contains("Usage:");
}

#[test]
fn raw_values_need_all_three_stated() {
    let message = panic_message(|| {
        let out = Cmd::new(["--help"]).run();
        out.exit(0);
        let _ = out.stdout();
    });
    assert!(
        message.contains("state stdout, stderr before taking stdout raw"),
        "{message}"
    );
    let out = Cmd::new(["--help"]).run();
    out.exit(0).stderr_empty().stdout_contains("Usage:");
    assert!(out.stdout().starts_with("Host-side dispatcher"), "{out:?}");
    assert_eq!((out.code(), out.stderr()), (0, ""));
}

#[test]
fn a_dispatch_nobody_checked_must_have_succeeded_quietly() {
    let message = panic_message(|| {
        let run = Dispatch::adapter(&["exit:3"]).run();
        assert_eq!(run.code(), "adapter_exit_nonzero");
    });
    assert!(
        message.contains("exit status 1 (not stated, so 0)"),
        "{message}"
    );
    assert!(
        message.contains("output on stderr (not stated, so none)"),
        "{message}"
    );
    // `expect` states both.
    Dispatch::adapter(&["exit:3"])
        .run()
        .expect("failed", Some("adapter_exit_nonzero"), 1);
}

#[test]
fn the_watchdog_kills_a_hung_child_and_fails_the_test() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let message = panic_message(|| {
        let _ = Cmd::ptd_test(["adapter"])
            .arg(format!("pidfile:{}", pids.display()))
            .arg("sleep:60000")
            .watchdog(Duration::from_millis(1500))
            .run();
    });
    assert!(
        message.contains("was still running after 1.5s"),
        "{message}"
    );
    assert_eq!(crate::pids(&pids).len(), 1, "the child recorded itself");
    assert_all_gone(&pids);
}

#[test]
fn a_signal_reaches_the_child_and_held_stdin_stays_open() {
    // Without a signal the adapter would wait for its stdin until the watchdog.
    let running = Cmd::ptd_test(["adapter", "read-stdin", "echo"])
        .stdin_held()
        .watchdog(Duration::from_secs(20))
        .spawn();
    std::thread::sleep(Duration::from_millis(200));
    running.signal(rustix::process::Signal::KILL);
    let out = running.wait();
    out.exit(-1).stdout_empty().stderr_empty();
    assert!(out.elapsed() < Duration::from_secs(10), "{out:?}");
}

#[test]
fn sha256_hex_is_the_standard_digest() {
    assert_eq!(
        sha256_hex("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn json_line_wants_exactly_one_line() {
    assert_eq!(json_line("{\"a\":1}\n"), serde_json::json!({"a": 1}));
    // A number no tree holds is still one valid document.
    assert_eq!(json_line("{\"a\":1e400}\n"), Value::Null);
    for bad in ["{\"a\":1}", "{\"a\":1}\n\n", "{}\n{}\n", "{\"a\":}\n"] {
        let message = panic_message(|| {
            json_line(bad);
        });
        assert!(!message.is_empty(), "{bad:?}");
    }
}
