//! `ptd-test` itself: its usage and the two steps every other test leans on. Having an
//! integration test also makes `cargo test` build the binary, which the root package's
//! `tests/cli` then runs (it finds it next to `parent-tool-dispatch`).

#![allow(clippy::expect_used, clippy::disallowed_methods)]

use std::process::{Command, Stdio};

fn ptd_test(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ptd-test"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("ptd-test runs")
}

#[test]
fn without_a_mode_it_prints_its_usage_and_exits_2() {
    let out = ptd_test(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "usage: ptd-test adapter STEP… | ptd-test mcp-server SCRIPT…\n"
    );
}

#[test]
fn an_adapter_prints_and_exits_as_its_steps_say() {
    let out = ptd_test(&["adapter", "print:hello", "eprint:world", "exit:3"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(out.stdout, b"hello");
    assert_eq!(out.stderr, b"world");
}
