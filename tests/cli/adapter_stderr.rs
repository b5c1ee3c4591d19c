//! What a failing adapter's stderr and program file tell the host's terminal (issue 23 item 1,
//! docs/cli-notes.md): the tail under the `error[..]` line, `-v` streaming it live, `-q`
//! silencing stderr, and the precise reason an adapter program could not be started.

use super::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn the_adapter_s_last_stderr_lines_follow_the_error_line_redacted_and_escaped() {
    let run = Dispatch::adapter(&[
        "read-stdin",
        "eprint:starting\nTraceback (most recent call last):\n  token=hunter2-secret\n\x1b[31mValueError: boom\n",
        "exit:3",
    ])
    .bridge(|b| b["sandbox_env"]["secret_env"] = json!(["PTD_TEST_SECRET"]))
    .env("PTD_TEST_SECRET", "hunter2-secret")
    .args(&["--secret-env", "PTD_TEST_SECRET"])
    .run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    let tail = run.dispatch()["stderr_tail"].as_str().unwrap().to_string();
    assert!(!tail.contains("hunter2"), "{tail}");
    assert_eq!(
        run.stderr,
        "error[adapter_exit_nonzero]: the adapter exited with status 3 without a valid failure \
         envelope: document is empty; stdout was empty\n\
         \x20 adapter stderr:\n\
         \x20 | starting\n\
         \x20 | Traceback (most recent call last):\n\
         \x20 |   token=[redacted]\n\
         \x20 | \\x1b[31mValueError: boom\n"
    );
    // Each shown line is a line of the envelope's tail, escaped.
    for line in run.stderr.lines().filter_map(|l| l.strip_prefix("  | ")) {
        assert!(
            tail.contains(&line.replace("\\x1b", "\x1b")),
            "{line:?} in {tail:?}"
        );
    }
}

#[test]
fn only_the_last_ten_lines_are_shown_each_cut_to_a_bounded_width() {
    let mut text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    text.push_str(&"x".repeat(5000));
    let step = format!("eprint:{text}");
    let run = Dispatch::adapter(&["read-stdin", &step, "exit:1"]).run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines[1], "  adapter stderr (its last 10 lines):");
    assert_eq!(lines[2], "  | line 22");
    assert_eq!(lines[10], "  | line 30");
    assert_eq!(lines[11], format!("  | {}...", "x".repeat(200)));
    assert_eq!(lines.len(), 12);
}

#[test]
fn a_success_or_a_silent_adapter_prints_no_tail() {
    Dispatch::adapter(&["read-stdin", "eprint:progress\n", "echo"])
        .run()
        .expect("succeeded", None, 0)
        .output()
        .stderr_eq("");
    let run = Dispatch::adapter(&["read-stdin", "exit:4"]).run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

#[test]
fn verbose_streams_the_adapter_s_stderr_live_and_redacted() {
    // The first line is on stderr while the adapter still sleeps: streamed, not collected
    // at the end. (stderr goes to a file the test can read while the dispatcher runs.)
    let dir = tempfile::tempdir().unwrap();
    let stderr_path = dir.path().join("stderr");
    let bridge = bridge(&[
        "read-stdin",
        "eprint:first token=hunter2-secret\n",
        "sleep:60000",
    ]);
    let mut child = std::process::Command::new(bin())
        .args([
            "-v",
            "--secret-env",
            "PTD_TEST_SECRET",
            "--parent-tool-bridge",
        ])
        .arg(bridge.to_string())
        .env_remove("PARENT_TOOL_DISPATCH_BRIDGE")
        .env("PTD_TEST_SECRET", "hunter2-secret")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(request().to_string().as_bytes()).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = String::new();
    while Instant::now() < deadline && !seen.ends_with('\n') {
        std::thread::sleep(Duration::from_millis(20));
        seen = std::fs::read_to_string(&stderr_path).unwrap();
    }
    // Still running: the line came while the adapter slept.
    let still_running = child.try_wait().unwrap().is_none();
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    );
    let out = child.wait_with_output().unwrap();
    assert!(still_running);
    assert_eq!(seen, "  | first token=[redacted]\n");
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["error"]["code"], "interrupted", "{envelope}");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        stderr.starts_with("  | first token=[redacted]\nerror[interrupted]: "),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 2, "{stderr}");
    // A run to its end: the lines come before the error line, and are not repeated under it;
    // a last line without a newline is shown too.
    let run = Dispatch::adapter(&["read-stdin", "eprint:one\ntwo\nno newline", "exit:2"])
        .args(&["--verbose"])
        .run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    assert_eq!(
        run.stderr,
        "  | one\n  | two\n  | no newline\n\
         error[adapter_exit_nonzero]: the adapter exited with status 2 without a valid failure \
         envelope: document is empty; stdout was empty\n"
    );
}

#[test]
fn quiet_prints_nothing_on_stderr_but_usage_errors() {
    let run = Dispatch::adapter(&["read-stdin", "eprint:boom\n", "exit:3"])
        .args(&["-q"])
        .bridge(|b| b["dispatcher"]["timeout_sm"] = json!(1))
        .run();
    assert_eq!(run.code(), "adapter_exit_nonzero");
    run.output().exit(1).stderr_empty();
    // The envelope still has everything.
    assert_eq!(run.dispatch()["stderr_tail"], "boom\n");
    Dispatch::adapter(&["echo"])
        .args(&["-q", "--tool-map", "{bad"])
        .run()
        .output()
        .exit(2)
        .stdout_empty()
        .stderr_starts_with("error[usage]: the --tool-map value cannot be used");
    Cmd::new(["-q", "-v"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_contains("cannot be used with");
}

fn script(dir: &Path, name: &str, body: &[u8], mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn run_program(program: &Path) -> Run {
    Dispatch::with_bridge(bridge(&[]))
        .bridge(|b| b["dispatcher"]["command"]["argv"] = json!([program.display().to_string()]))
        .run()
}

#[test]
fn an_exec_failure_names_its_precise_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // (file, its bytes, its mode, code, details.reason, details.interpreter, stderr's words)
    type Case<'a> = (
        &'a str,
        &'a [u8],
        u32,
        &'a str,
        &'a str,
        Option<&'a str>,
        &'a str,
    );
    let cases: [Case; 5] = [
        (
            "missing.py",
            b"#!/usr/bin/python-no-such-version\nprint(1)\n",
            0o755,
            "adapter_not_found",
            "missing_interpreter",
            Some("python-no-such-version"),
            "could not be started: its #! line names the interpreter \
             /usr/bin/python-no-such-version, which does not exist",
        ),
        (
            "crlf.sh",
            b"#!/bin/sh\r\necho hi\r\n",
            0o755,
            "adapter_not_found",
            "crlf_shebang",
            Some("sh\r"),
            "could not be started: its #! line ends in a carriage return (the file has CRLF line \
             endings): it names `/bin/sh\\r`, carriage return included, which does not exist; \
             convert the file to LF line endings (e.g. dos2unix)",
        ),
        (
            "plain.sh",
            b"echo no shebang\n",
            0o755,
            "adapter_not_executable",
            "no_shebang",
            None,
            "could not be started: it has no #! line and is not a binary this system runs (a \
             script needs a first line such as #!/bin/sh)",
        ),
        (
            "noexec.sh",
            b"#!/bin/sh\necho hi\n",
            0o644,
            "adapter_not_executable",
            "no_execute_permission",
            None,
            "could not be started: it has no execute permission for this user (chmod +x)",
        ),
        (
            "empty.sh",
            b"#!\necho hi\n",
            0o755,
            "adapter_not_executable",
            "empty_shebang",
            None,
            "could not be started: its #! line names no interpreter",
        ),
    ];
    for (name, body, mode, code, reason, interpreter, says) in cases {
        let program = script(d, name, body, mode);
        let run = run_program(&program);
        run.expect("unavailable", Some(code), 69);
        let details = &run.envelope["error"]["details"];
        assert_eq!(details["reason"], reason, "{name}: {:#}", run.envelope);
        assert_eq!(details["interpreter"].as_str(), interpreter, "{name}");
        assert_eq!(
            run.stderr,
            format!(
                "error[{code}]: the adapter program {} {says}\n",
                program.display()
            ),
            "{name}"
        );
        // The envelope's message names no path.
        let message = run.envelope["error"]["message"].as_str().unwrap();
        assert!(!message.contains(&d.display().to_string()), "{message}");
        assert!(message.starts_with("the adapter program could not be started: "));
    }
    // A program that does not exist at all is still "not found", as before.
    let run = run_program(&d.join("absent"));
    run.expect("unavailable", Some("adapter_not_found"), 69);
    assert_eq!(run.envelope["error"].get("details"), None);
    assert!(run.stderr.contains("was not found"), "{}", run.stderr);
}

#[test]
fn a_crlf_shebang_through_env_is_named_under_the_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "env.sh",
        b"#!/usr/bin/env sh\r\necho hi\r\n",
        0o755,
    );
    let run = run_program(&program);
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        lines[1],
        format!(
            "  note: the adapter program {}: its #! line ends in a carriage return (the file \
             has CRLF line endings): it names `sh\\r`, carriage return included, which does \
             not exist; convert the file to LF line endings (e.g. dos2unix)",
            program.display()
        )
    );
    // env's own words follow, escaped as in the envelope's tail.
    assert!(lines[2].starts_with("  adapter stderr"), "{}", run.stderr);
    assert!(lines[3].contains("sh\\r"), "{}", run.stderr);
}

#[test]
fn verbose_on_a_terminal_shows_host_paths_but_never_a_secret() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let place = std::fs::canonicalize(dir.path()).unwrap();
    let line = format!(
        "eprint:Traceback: File \"{}/tool.py\", token hunter2-secret\n",
        place.display()
    );
    let bridge = bridge(&["read-stdin", &line, "echo"]);
    let (mut master, slave) = super::pty();
    let mut child = std::process::Command::new(bin())
        .args([
            "-v",
            "--secret-env",
            "PTD_TEST_SECRET",
            "--parent-tool-bridge",
        ])
        .arg(bridge.to_string())
        .current_dir(&place)
        .env_remove("PARENT_TOOL_DISPATCH_BRIDGE")
        .env("PTD_TEST_SECRET", "hunter2-secret")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(slave)
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(request().to_string().as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    // The terminal: the operator's own view, with the path, without the secret.
    let mut shown = vec![0u8; 4096];
    let n = master.read(&mut shown).unwrap();
    let shown = String::from_utf8_lossy(&shown[..n]).replace('\r', "");
    assert_eq!(
        shown,
        format!(
            "  | Traceback: File \"{}/tool.py\", token [redacted]\n",
            place.display()
        )
    );
    // The envelope keeps every rule: no path, no secret.
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tail = envelope["diagnostics"]["dispatch"]["stderr_tail"]
        .as_str()
        .unwrap();
    assert!(!tail.contains(place.to_str().unwrap()), "{tail}");
    assert!(tail.contains("[host-path]"), "{tail}");
    assert!(!tail.contains("hunter2-secret"), "{tail}");
}
