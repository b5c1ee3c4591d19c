//! What a human sees on stderr: causes instead of category names, the file that could not be
//! read, hints for common mistakes, warnings for bridge typos, and nothing that can drive the
//! terminal. stdout keeps its machine-readable shape throughout.

use super::*;

/// The hostile adapter message of the review: erase the line, go home, print a forged line.
const HOSTILE: &str = "\u{1b}[2K\rerror[forged]: \u{1b}[31mfake line";

fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .display()
        .to_string()
}

fn no_terminal_controls(text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c))
        .collect();
    assert!(bad.is_empty(), "raw controls {bad:?} in {text:?}");
}

#[test]
fn validate_says_the_first_issue_and_how_many_more_on_stderr() {
    let mut doc = request();
    doc.as_object_mut().unwrap().remove("request_id");
    doc["tool"] = json!("");
    Cmd::new(["validate", "request"])
        .stdin(doc.to_string())
        .run()
        .exit(65)
        .stdout_json(|report| {
            assert_eq!(report["valid"], false);
            assert_eq!(report["issues"].as_array().unwrap().len(), 2);
        })
        .stderr_eq(
            "error[request_invalid]: /request_id: required key \"request_id\" is missing (and 1 more issue)\n",
        );

    Cmd::new(["validate", "bridge"])
        .stdin("{}")
        .run()
        .exit(65)
        .stdout_json(|report| assert_eq!(report["valid"], false))
        .stdout_with(|stdout| assert!(stdout.starts_with("{\"valid\":false,"), "{stdout}"))
        .stderr_with(|stderr| {
            assert!(
                stderr.starts_with(
                    "error[bridge_invalid]: /schema: required key \"schema\" is missing (and "
                ) && stderr.ends_with(" more issues)\n"),
                "{stderr}"
            )
        });

    Cmd::new(["validate", "result"])
        .stdin("[]")
        .run()
        .exit(65)
        .stdout_json(|report| assert_eq!(report["valid"], false))
        .stderr_eq("error[result_invalid]: top level is an array, not an object\n");

    // Valid: nothing on stderr.
    Cmd::new(["validate", "request"])
        .stdin(request().to_string())
        .run()
        .exit(0)
        .stdout_json(|report| assert_eq!(*report, json!({"valid": true, "issues": []})))
        .stderr_empty();
}

#[test]
fn validate_names_a_missing_file_on_stderr_but_not_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("brigde.json");
    let missing = missing.to_str().unwrap();
    Cmd::new(["validate", "bridge", missing])
        .run()
        .exit(65)
        .stderr_eq(format!(
            "error[bridge_invalid]: reading bridge file {missing}: No such file or directory (os error 2)\n"
        ))
        .stdout_json(|report| assert_eq!(report["issues"][0]["code"], "unreadable"))
        .stdout_lacks(dir.path().to_str().unwrap());
}

fn typo_bridge() -> Value {
    let mut b = bridge(&["echo"]);
    b["dispatcher"]["timeout_sm"] = json!(5000);
    b["dispatcher"]["transport"] = json!("file");
    b["dispatcher"]["command"]["transprot"] = json!("file");
    b
}

#[test]
fn validate_bridge_warns_about_typos_and_strict_refuses_them() {
    let out = Cmd::new(["validate", "bridge"])
        .stdin(typo_bridge().to_string())
        .run();
    out.exit(0);
    let report = out.json();
    assert_eq!(report["valid"], true);
    assert_eq!(report["issues"], json!([]));
    assert_eq!(
        report["warnings"],
        json!([
            {"code": "unknown_key", "path": "/dispatcher/timeout_sm",
             "message": "unknown key \"timeout_sm\" (did you mean \"timeout_ms\"?)"},
            {"code": "unknown_key", "path": "/dispatcher/transport",
             "message": "key \"transport\" belongs in dispatcher.command, not dispatcher; here it is ignored"},
            {"code": "unknown_key", "path": "/dispatcher/command/transprot",
             "message": "unknown key \"transprot\" (did you mean \"transport\"?)"}
        ])
    );
    out.stderr_eq(
        "warning[unknown_key]: /dispatcher/timeout_sm: unknown key \"timeout_sm\" (did you mean \"timeout_ms\"?)\n\
         warning[unknown_key]: /dispatcher/transport: key \"transport\" belongs in dispatcher.command, not dispatcher; here it is ignored\n\
         warning[unknown_key]: /dispatcher/command/transprot: unknown key \"transprot\" (did you mean \"transport\"?)\n",
    );

    Cmd::new(["validate", "bridge", "--strict"])
        .stdin(typo_bridge().to_string())
        .run()
        .exit(65)
        .stdout_json(|report| {
            assert_eq!(report["valid"], false);
            assert_eq!(report["issues"].as_array().unwrap().len(), 3);
            assert!(report.get("warnings").is_none(), "{report}");
        })
        .stderr_eq(
            "error[bridge_invalid]: /dispatcher/timeout_sm: unknown key \"timeout_sm\" (did you mean \"timeout_ms\"?) (and 2 more issues)\n",
        );
}

#[test]
fn upstream_bridges_validate_clean_even_in_strict_mode() {
    for file in [
        "fixtures/upstream/example-bridge.host_command.json",
        "fixtures/bridge.json",
    ] {
        Cmd::new(["validate", "bridge", "--strict", &fixture(file)])
            .run()
            .exit(0)
            .stderr_empty()
            .stdout_json(|v| assert_eq!(*v, json!({"valid": true, "issues": []})));
    }
}

#[test]
fn the_main_job_still_runs_a_bridge_with_typos_and_reports_bridge_files_as_before() {
    // A warning never changes the envelope: the run succeeds with the default timeout.
    let mut b = typo_bridge();
    b["dispatcher"]["command"]["argv"] = test_adapter(&["read-stdin", "echo"]);
    b["dispatcher"]
        .as_object_mut()
        .unwrap()
        .remove("timeout_ms");
    let run = Dispatch::with_bridge(b).run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.dispatch()["timeout_ms"], 30000);

    let dir = tempfile::tempdir().unwrap();
    let missing = format!("@{}", dir.path().join("brigde.json").display());
    let run = Dispatch::adapter(&["echo"])
        .raw_bridge(Some(&missing))
        .run();
    run.expect("unavailable", Some("bridge_invalid"), 69);
    assert_eq!(run.issue_codes(), ["unreadable"]);
    let message = run.envelope["error"]["details"]["issues"][0]["message"].to_string();
    assert!(
        message.contains("No such file or directory (os error 2)"),
        "{message}"
    );
    assert!(!run.stdout.contains(dir.path().to_str().unwrap()));
}

#[test]
fn sandbox_env_says_why_in_the_same_format_and_names_files() {
    Cmd::new(["sandbox-env", "--parent-tool-bridge", "{}"])
        .run()
        .exit(69)
        .stdout_empty()
        .stderr_with(|stderr| {
            assert!(
                stderr.starts_with(
                    "error[bridge_invalid]: /schema: required key \"schema\" is missing (and "
                ) && stderr.ends_with(" more issues)\n")
                    && stderr.lines().count() == 1,
                "{stderr}"
            )
        });

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("brigde.json");
    Cmd::new([
        "sandbox-env",
        "--parent-tool-bridge",
        &format!("@{}", missing.display()),
    ])
    .run()
    .exit(69)
    .stdout_empty()
    .stderr_eq(format!(
        "error[bridge_invalid]: reading bridge file {}: No such file or directory (os error 2)\n",
        missing.display()
    ));
}

#[test]
fn a_bridge_path_without_the_at_gets_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.json");
    std::fs::write(&path, bridge(&["echo"]).to_string()).unwrap();
    let arg = path.to_str().unwrap();
    Cmd::new(["sandbox-env", "--parent-tool-bridge", arg])
        .run()
        .exit(69)
        .stdout_empty()
        .stderr_starts_with(
            "error[bridge_invalid]: parsing the bridge JSON: invalid JSON at line 1",
        )
        .stderr_with(|stderr| {
            assert!(
                stderr.ends_with(&format!(" (did you mean @{arg}?)\n")),
                "{stderr}"
            )
        });
}

#[test]
fn sandbox_env_prints_bridge_warnings_and_still_answers() {
    Cmd::new([
        "sandbox-env",
        "--parent-tool-bridge",
        &typo_bridge().to_string(),
    ])
    .run()
    .exit(0)
    .stdout_with(|stdout| assert_eq!(stdout.lines().count(), 5, "{stdout}"))
    .stderr_with(|stderr| {
        assert_eq!(stderr.lines().count(), 3, "{stderr}");
        assert!(
            stderr
                .lines()
                .all(|l| l.starts_with("warning[unknown_key]: /dispatcher/")),
            "{stderr}"
        );
    });
}

#[test]
fn mistyped_subcommands_are_named_not_taken_for_the_request() {
    for (line, typed, meant) in [
        (&["valdate", "request", "x.json"][..], "valdate", "validate"),
        (
            &["sandbox_env", "--parent-tool-bridge", "{}"][..],
            "sandbox_env",
            "sandbox-env",
        ),
        (&["adaptr", "workspace"][..], "adaptr", "adapter"),
        (
            &["--pretty", "completion", "bash"][..],
            "completion",
            "completions",
        ),
    ] {
        // No envelope: nothing on stdout.
        Cmd::new(line)
            .run()
            .exit(2)
            .stdout_empty()
            .stderr_eq(format!(
                "error: unrecognized subcommand '{typed}'\n\n  did you mean '{meant}'?\n\n\
             For more information, try '--help'.\n"
            ));
    }
    // Hostile input in the typo is escaped.
    Cmd::new(["valdat\u{1b}"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_starts_with("error: unrecognized subcommand 'valdat\\x1b'")
        .stderr_with(no_terminal_controls);
}

#[test]
fn clap_errors_cannot_drive_the_terminal() {
    let flag = format!("--{HOSTILE}");
    Cmd::new([&flag])
        .run()
        .exit(2)
        .stdout_empty()
        // clap drops the colour sequences itself; what is left is escaped.
        .stderr_contains("'--\\rerror[forged]: fake line'")
        .stderr_with(no_terminal_controls);
}

#[test]
fn hostile_keys_in_a_bridge_are_escaped_in_warnings() {
    let mut b = bridge(&["echo"]);
    b["dispatcher"][HOSTILE] = json!(1);
    Cmd::new(["validate", "bridge"])
        .stdin(b.to_string())
        .run()
        .exit(0)
        // The JSON report keeps the key exactly (JSON escapes it); stderr shows it escaped.
        .stdout_json(|report| {
            assert_eq!(
                report["warnings"][0]["path"],
                format!("/dispatcher/{HOSTILE}")
            )
        })
        .stderr_starts_with(
            "warning[unknown_key]: /dispatcher/\\x1b[2K\\rerror[forged]: \\x1b[31mfake line: ",
        )
        .stderr_with(no_terminal_controls);
}

#[test]
fn workspace_adapter_messages_escape_hostile_request_paths() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request();
    req["input"] = json!({"path": HOSTILE});
    let out = Cmd::new(["adapter", "workspace", "--root"])
        .arg(dir.path())
        .stdin(req.to_string())
        .run();
    let envelope = out.exit(0).stderr_empty().json();
    assert_eq!(envelope["error"]["code"], "not_found");
    let message = envelope["error"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "`\\x1b[2K\\rerror[forged]: \\x1b[31mfake line` does not exist"
    );
    no_terminal_controls(message);
}

#[test]
fn completions_leave_hidden_subcommands_out() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = Cmd::new(["completions", shell]).run();
        // No hidden subcommand on offer.
        let stdout = out
            .exit(0)
            .stderr_empty()
            .stdout_lacks("test-adapter")
            .stdout();
        for visible in [
            "validate",
            "sandbox-env",
            "adapter",
            "workspace",
            "kill-grace-ms",
        ] {
            assert!(stdout.contains(visible), "{shell} lacks {visible}");
        }
    }
}

#[test]
fn help_prints_the_exit_status_table_from_error_rs() {
    let out = Cmd::new(["--help"]).run();
    let stdout = out
        .exit(0)
        .stderr_empty()
        .stdout_contains("Exit status")
        .stdout();
    let section = stdout.split("Exit status").nth(1).unwrap();
    for row in ptd_wire::error::EXIT_STATUSES {
        let line = format!("{:>3} {}", row.code, row.label);
        assert!(section.contains(&line), "--help lacks {line:?}");
    }
}

#[test]
fn sandbox_env_help_promises_no_envelope() {
    Cmd::new(["sandbox-env", "--help"])
        .run()
        .exit(0)
        .stdout_lacks("envelope;")
        .stdout_contains("no envelope")
        .stdout_contains("exit 69")
        .stderr_empty();
}

/// stdin is a terminal: the hint tells the human what the silent wait is, before anything is
/// read; the request typed (here: written to the pty) is then validated as usual.
#[test]
fn validate_hints_when_reading_from_a_terminal() {
    use std::io::Write;
    let (mut master, slave) = pty();
    // Bounded: a hint-less build would still end, but a broken Ctrl-D must not hang the suite.
    let running = Cmd::new(["validate", "request"])
        .stdin_file(slave)
        .watchdog(Duration::from_secs(20))
        .spawn();
    // One line, then Ctrl-D at the start of the next: end of input in canonical mode.
    master
        .write_all(format!("{}\n\u{4}", request()).as_bytes())
        .unwrap();
    let out = running.wait();
    drop(master);
    out.exit(0)
        .stderr_eq("reading the request from stdin (end with Ctrl-D)\u{2026}\n")
        .stdout_json(|v| assert_eq!(*v, json!({"valid": true, "issues": []})));
}
