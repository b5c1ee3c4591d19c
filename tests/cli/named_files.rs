//! Files read by name (the bridge's `@FILE`, `--tool-map @FILE`, `--ca-cert`, a replay case's
//! `"bridge": "@FILE"`) go through the one reader: a FIFO, a device, a socket or a directory
//! there is refused at once with the structured error of its option, never waited on in
//! `open(2)` (where no signal could end the wait).

use super::*;

/// Far below the suite's default watchdog: a reader that waits in `open(2)` is a failure here,
/// not a stalled suite.
const HANG: Duration = Duration::from_secs(20);

/// A FIFO nobody ever writes to, in its own folder.
fn fifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &path,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    path
}

/// Each non-regular file a test offers, with the words the refusal uses for it.
fn not_regular(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    vec![
        (fifo(dir, "x.fifo"), "a FIFO"),
        (PathBuf::from("/dev/zero"), "a character device"),
        (dir.to_path_buf(), "a directory"),
    ]
}

#[test]
fn a_fifo_or_a_device_as_the_bridge_file_is_bridge_invalid_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for (path, words) in not_regular(dir.path()) {
        let arg = format!("@{}", path.display());
        let envelope = Cmd::new(["--parent-tool-bridge", &arg])
            .stdin(request().to_string())
            .watchdog(HANG)
            .run()
            .exit(69)
            .stderr_eq(format!(
                "error[bridge_invalid]: reading bridge file {}: it is {words}, not a regular file\n",
                path.display()
            ))
            .json();
        assert_eq!(envelope["status"], "unavailable", "{envelope}");
        assert_eq!(envelope["error"]["code"], "bridge_invalid");
        assert_eq!(envelope["request_id"], "ptr_123");
        let issues = &envelope["error"]["details"]["issues"];
        assert_eq!(issues[0]["code"], "unreadable", "{envelope}");
        assert_eq!(
            issues[0]["message"],
            format!("the bridge file could not be read: it is {words}, not a regular file")
        );
        assert!(!envelope.to_string().contains(dir.path().to_str().unwrap()));
    }
}

#[test]
fn a_fifo_or_a_device_as_the_tool_map_file_is_a_usage_error_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for (path, words) in not_regular(dir.path()) {
        let arg = format!("@{}", path.display());
        Cmd::new(["--parent-tool-bridge", &bridge(&["echo"]).to_string()])
            .args(["--tool-map", &arg])
            .stdin(request().to_string())
            .watchdog(HANG)
            .run()
            .exit(2)
            .stdout_empty()
            .stderr_contains(format!(
                "reading tool map file {}: it is {words}, not a regular file",
                path.display()
            ));
    }
}

#[test]
fn a_fifo_or_a_device_as_the_ca_cert_is_endpoint_unconfigured_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = bridge(&[]);
    b["dispatcher"]["mode"] = json!("host_endpoint");
    b["dispatcher"].as_object_mut().unwrap().remove("command");
    b["dispatcher"]["endpoint"] = json!({"url_env": "PTD_TEST_NAMED_URL", "method": "POST"});
    for (path, words) in not_regular(dir.path()) {
        let envelope = Cmd::new(["--parent-tool-bridge", &b.to_string()])
            .args(["--ca-cert", path.to_str().unwrap()])
            .env("PTD_TEST_NAMED_URL", "https://127.0.0.1:9/")
            .stdin(request().to_string())
            .watchdog(HANG)
            .run()
            .exit(69)
            .stderr_eq(format!(
                "error[endpoint_unconfigured]: the --ca-cert file {} could not be read: it is \
                 {words}, not a regular file\n",
                path.display()
            ))
            .json();
        assert_eq!(envelope["status"], "unavailable", "{envelope}");
        assert_eq!(envelope["error"]["code"], "endpoint_unconfigured");
        assert_eq!(
            envelope["error"]["message"],
            format!("the --ca-cert file could not be read: it is {words}, not a regular file")
        );
        assert!(!envelope.to_string().contains(dir.path().to_str().unwrap()));
    }
}

#[test]
fn a_fifo_or_a_device_as_a_replay_case_bridge_fails_that_case_at_once() {
    let dir = tempfile::tempdir().unwrap();
    fifo(dir.path(), "b.fifo");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("b.zero")).unwrap();
    let answer = json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "ptr_123", "tool": "workspace.read", "operation": "call",
        "status": "succeeded", "output": 1});
    for (name, bridge_file) in [("fifo", "b.fifo"), ("zero", "b.zero")] {
        let case = json!({
            "schema": "parent-tool-dispatch/fixture/v1",
            "name": name,
            "bridge": format!("@{bridge_file}"),
            "request": request(),
            "adapter": {"recorded": {"stdout": format!("{answer}\n"), "exit_code": 0}},
            "expect": {"status": "succeeded"}
        });
        std::fs::write(
            dir.path().join(format!("{name}.case.json")),
            case.to_string(),
        )
        .unwrap();
    }
    Cmd::new(["replay", dir.path().to_str().unwrap()])
        .watchdog(HANG)
        .run()
        .exit(1)
        .stderr_empty()
        .stdout_with(|stdout| {
            assert!(stdout.ends_with("0 passed, 2 failed\n"), "{stdout}");
            for (name, words) in [("fifo", "a FIFO"), ("zero", "a character device")] {
                let at = stdout
                    .find(&format!("FAIL {name}"))
                    .unwrap_or_else(|| panic!("no FAIL {name} in {stdout}"));
                let block = &stdout[at..];
                let block = &block[..block[1..].find("\nFAIL ").map_or(block.len(), |i| i + 1)];
                assert!(
                    block.contains(&format!(
                        "the bridge file could not be read: it is {words}, not a regular file"
                    )),
                    "{block}"
                );
            }
        });
}
