//! What a human sees on stderr: causes instead of category names, the file that could not be
//! read, hints for common mistakes, warnings for bridge typos, and nothing that can drive the
//! terminal. stdout keeps its machine-readable shape throughout.

use super::subcommands::run_with_stdin;
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
    let (exit, stdout, stderr) = run_with_stdin(&["validate", "request"], &doc.to_string());
    assert_eq!(exit, 65);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert_eq!(report["issues"].as_array().unwrap().len(), 2);
    assert_eq!(
        stderr,
        "error[request_invalid]: /request_id: required key \"request_id\" is missing (and 1 more issue)\n"
    );

    let (exit, stdout, stderr) = run_with_stdin(&["validate", "bridge"], "{}");
    assert_eq!(exit, 65);
    assert!(stdout.starts_with("{\"valid\":false,"));
    assert!(
        stderr.starts_with(
            "error[bridge_invalid]: /schema: required key \"schema\" is missing (and "
        ) && stderr.ends_with(" more issues)\n"),
        "{stderr}"
    );

    let (exit, _, stderr) = run_with_stdin(&["validate", "result"], "[]");
    assert_eq!(exit, 65);
    assert_eq!(
        stderr,
        "error[result_invalid]: top level is an array, not an object\n"
    );

    // Valid: nothing on stderr.
    let (exit, _, stderr) = run_with_stdin(&["validate", "request"], &request().to_string());
    assert_eq!((exit, stderr.as_str()), (0, ""));
}

#[test]
fn validate_names_a_missing_file_on_stderr_but_not_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("brigde.json");
    let missing = missing.to_str().unwrap();
    let (exit, stdout, stderr) = run_with_stdin(&["validate", "bridge", missing], "");
    assert_eq!(exit, 65);
    assert_eq!(
        stderr,
        format!("error[bridge_invalid]: reading bridge file {missing}: No such file or directory (os error 2)\n")
    );
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["issues"][0]["code"], "unreadable");
    assert!(!stdout.contains(dir.path().to_str().unwrap()), "{stdout}");
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
    let (exit, stdout, stderr) =
        run_with_stdin(&["validate", "bridge"], &typo_bridge().to_string());
    assert_eq!(exit, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
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
    assert_eq!(
        stderr,
        "warning[unknown_key]: /dispatcher/timeout_sm: unknown key \"timeout_sm\" (did you mean \"timeout_ms\"?)\n\
         warning[unknown_key]: /dispatcher/transport: key \"transport\" belongs in dispatcher.command, not dispatcher; here it is ignored\n\
         warning[unknown_key]: /dispatcher/command/transprot: unknown key \"transprot\" (did you mean \"transport\"?)\n"
    );

    let (exit, stdout, stderr) = run_with_stdin(
        &["validate", "bridge", "--strict"],
        &typo_bridge().to_string(),
    );
    assert_eq!(exit, 65);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert_eq!(report["issues"].as_array().unwrap().len(), 3);
    assert!(report.get("warnings").is_none(), "{report}");
    assert_eq!(
        stderr,
        "error[bridge_invalid]: /dispatcher/timeout_sm: unknown key \"timeout_sm\" (did you mean \"timeout_ms\"?) (and 2 more issues)\n"
    );
}

#[test]
fn upstream_bridges_validate_clean_even_in_strict_mode() {
    for file in [
        "fixtures/upstream/example-bridge.host_command.json",
        "fixtures/bridge.json",
    ] {
        let (exit, stdout, stderr) =
            run_with_stdin(&["validate", "bridge", "--strict", &fixture(file)], "");
        assert_eq!((exit, stderr.as_str()), (0, ""), "{file}");
        assert_eq!(
            serde_json::from_str::<Value>(&stdout).unwrap(),
            json!({"valid": true, "issues": []})
        );
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
    let (exit, stdout, stderr) = run_with_stdin(&["sandbox-env", "--parent-tool-bridge", "{}"], "");
    assert_eq!((exit, stdout.as_str()), (69, ""));
    assert!(
        stderr.starts_with(
            "error[bridge_invalid]: /schema: required key \"schema\" is missing (and "
        ) && stderr.ends_with(" more issues)\n")
            && stderr.lines().count() == 1,
        "{stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("brigde.json");
    let (exit, stdout, stderr) = run_with_stdin(
        &[
            "sandbox-env",
            "--parent-tool-bridge",
            &format!("@{}", missing.display()),
        ],
        "",
    );
    assert_eq!((exit, stdout.as_str()), (69, ""));
    assert_eq!(
        stderr,
        format!(
            "error[bridge_invalid]: reading bridge file {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
}

#[test]
fn a_bridge_path_without_the_at_gets_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.json");
    std::fs::write(&path, bridge(&["echo"]).to_string()).unwrap();
    let arg = path.to_str().unwrap();
    let (exit, stdout, stderr) = run_with_stdin(&["sandbox-env", "--parent-tool-bridge", arg], "");
    assert_eq!((exit, stdout.as_str()), (69, ""));
    assert!(
        stderr
            .starts_with("error[bridge_invalid]: parsing the bridge JSON: invalid JSON at line 1")
            && stderr.ends_with(&format!(" (did you mean @{arg}?)\n")),
        "{stderr}"
    );
}

#[test]
fn sandbox_env_prints_bridge_warnings_and_still_answers() {
    let (exit, stdout, stderr) = run_with_stdin(
        &[
            "sandbox-env",
            "--parent-tool-bridge",
            &typo_bridge().to_string(),
        ],
        "",
    );
    assert_eq!(exit, 0);
    assert_eq!(stdout.lines().count(), 5);
    assert_eq!(stderr.lines().count(), 3);
    assert!(stderr
        .lines()
        .all(|l| l.starts_with("warning[unknown_key]: /dispatcher/")));
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
        let (exit, stdout, stderr) = run_with_stdin(line, "");
        assert_eq!(exit, 2, "{line:?}: {stderr}");
        assert_eq!(stdout, "", "no envelope");
        assert_eq!(
            stderr,
            format!(
                "error: unrecognized subcommand '{typed}'\n\n  did you mean '{meant}'?\n\n\
                 For more information, try '--help'.\n"
            )
        );
    }
    // Hostile input in the typo is escaped.
    let (exit, _, stderr) = run_with_stdin(&["valdat\u{1b}"], "");
    assert_eq!(exit, 2);
    assert!(
        stderr.starts_with("error: unrecognized subcommand 'valdat\\x1b'"),
        "{stderr}"
    );
    no_terminal_controls(&stderr);
}

#[test]
fn clap_errors_cannot_drive_the_terminal() {
    let flag = format!("--{HOSTILE}");
    let (exit, stdout, stderr) = run_with_stdin(&[&flag], "");
    assert_eq!((exit, stdout.as_str()), (2, ""));
    // clap drops the colour sequences itself; what is left is escaped.
    assert!(
        stderr.contains("'--\\rerror[forged]: fake line'"),
        "{stderr}"
    );
    no_terminal_controls(&stderr);
}

#[test]
fn hostile_keys_in_a_bridge_are_escaped_in_warnings() {
    let mut b = bridge(&["echo"]);
    b["dispatcher"][HOSTILE] = json!(1);
    let (exit, stdout, stderr) = run_with_stdin(&["validate", "bridge"], &b.to_string());
    assert_eq!(exit, 0);
    // The JSON report keeps the key exactly (JSON escapes it); stderr shows it escaped.
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["warnings"][0]["path"],
        format!("/dispatcher/{HOSTILE}")
    );
    assert!(
        stderr.starts_with(
            "warning[unknown_key]: /dispatcher/\\x1b[2K\\rerror[forged]: \\x1b[31mfake line: "
        ),
        "{stderr}"
    );
    no_terminal_controls(&stderr);
}

#[test]
fn workspace_adapter_messages_escape_hostile_request_paths() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request();
    req["input"] = json!({"path": HOSTILE});
    let (exit, stdout, _) = {
        use std::io::Write;
        let mut child = Command::new(bin())
            .args(["adapter", "workspace", "--root"])
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(req.to_string().as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    assert_eq!(exit, Some(0));
    let envelope: Value = serde_json::from_str(&stdout).unwrap();
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
        let (exit, stdout, stderr) = run_with_stdin(&["completions", shell], "");
        assert_eq!((exit, stderr.as_str()), (0, ""), "{shell}");
        assert!(
            !stdout.contains("test-adapter"),
            "{shell} offers __test-adapter"
        );
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
    let (exit, stdout, stderr) = run_with_stdin(&["--help"], "");
    assert_eq!((exit, stderr.as_str()), (0, ""));
    let section = stdout.split("Exit status").nth(1).unwrap();
    for row in parent_tool_dispatch::error::EXIT_STATUSES {
        let line = format!("{:>3} {}", row.code, row.label);
        assert!(section.contains(&line), "--help lacks {line:?}");
    }
}

#[test]
fn sandbox_env_help_promises_no_envelope() {
    let (exit, stdout, _) = run_with_stdin(&["sandbox-env", "--help"], "");
    assert_eq!(exit, 0);
    assert!(!stdout.contains("envelope;"), "{stdout}");
    assert!(stdout.contains("no envelope"), "{stdout}");
    assert!(stdout.contains("exit 69"), "{stdout}");
}

/// stdin is a terminal: the hint tells the human what the silent wait is, before anything is
/// read; the request typed (here: written to the pty) is then validated as usual.
#[test]
fn validate_hints_when_reading_from_a_terminal() {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    use std::io::Write;
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    let mut child = Command::new(bin())
        .args(["validate", "request"])
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut master = std::fs::File::from(master);
    // One line, then Ctrl-D at the start of the next: end of input in canonical mode.
    master
        .write_all(format!("{}\n\u{4}", request()).as_bytes())
        .unwrap();
    // Bounded: a hint-less build would still end, but a broken Ctrl-D must not hang the suite.
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("validate did not finish reading from the terminal");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    drop(master);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "reading the request from stdin (end with Ctrl-D)\u{2026}\n"
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!({"valid": true, "issues": []})
    );
}
