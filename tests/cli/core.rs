//! The core's guarantees found missing by attacking it: names are redacted like everything
//! else, what travels in environment variables is checked up front, opaque values keep their
//! exact text, memory stays a small multiple of the input. And the main job's stderr names
//! the cause.

use super::*;

const SECRET: &str = "hunter2-very-secret-value";

/// Every file under `dir`, recursively, as (name, contents).
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                out.push((name, std::fs::read_to_string(&path).unwrap_or_default()));
            }
        }
    }
    out
}

#[test]
fn a_secret_in_request_id_or_operation_reaches_no_output_no_file_name_no_record() {
    let artifacts = tempfile::tempdir().unwrap();
    let run = Dispatch::adapter(&["read-stdin", "echo"])
        .request(|r| {
            r["request_id"] = json!(format!("req-{SECRET}"));
            r["operation"] = json!(format!("op-{SECRET}"));
        })
        .env("PTD_TEST_SECRET", SECRET)
        .args(&["--secret-env", "PTD_TEST_SECRET"])
        .args(&["--artifact-dir", artifacts.path().to_str().unwrap()])
        .run();
    run.expect("succeeded", None, 0);
    assert!(!run.stdout.contains(SECRET), "{}", run.stdout);
    assert!(!run.stderr.contains(SECRET), "{}", run.stderr);
    assert_eq!(run.envelope["request_id"], "req-[redacted]");
    assert_eq!(run.envelope["operation"], "op-[redacted]");
    let reference = run.envelope["artifacts"]["transcripts"][0]["path"]
        .as_str()
        .unwrap();
    assert!(!reference.contains(SECRET), "{reference}");
    let files = files_under(artifacts.path());
    assert_eq!(files.len(), 1, "{files:?}");
    for (name, text) in &files {
        assert!(!name.contains(SECRET), "file name {name}");
        assert!(!text.contains(SECRET), "transcript {name}: {text}");
    }
    let doc: Value = serde_json::from_str(&files[0].1).unwrap();
    let call = &doc["tool_calls"][0];
    assert_eq!(call["call_id"], "req-[redacted]");
    assert_eq!(call["metadata"]["operation"], "op-[redacted]");
}

#[test]
fn pattern_rules_apply_to_names_and_redacted_names_stay_unique() {
    let artifacts = tempfile::tempdir().unwrap();
    let token = format!("ghp_{}", "a1B2".repeat(9));
    let mut paths = Vec::new();
    for _ in 0..2 {
        let run = Dispatch::adapter(&["read-stdin", "echo"])
            .request(|r| r["request_id"] = json!(token.clone()))
            .args(&["--artifact-dir", artifacts.path().to_str().unwrap()])
            .run();
        run.expect("succeeded", None, 0);
        // `output` is the adapter's payload (it echoes the request back): only the envelope's
        // own fields are the dispatcher's to redact.
        assert_eq!(run.envelope["request_id"], "[redacted]");
        paths.push(
            run.envelope["artifacts"]["transcripts"][0]["path"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_ne!(paths[0], paths[1], "two transcripts, two names");
    for (name, text) in files_under(artifacts.path()) {
        assert!(!name.contains(&token) && !text.contains(&token), "{name}");
        assert!(!name.starts_with('.'), "{name}");
    }
}

#[test]
fn a_nul_in_request_id_is_the_requests_fault_not_the_adapters() {
    let run = Dispatch::adapter(&["read-stdin", "echo"])
        .request(|r| r["request_id"] = json!("a\u{0}b"))
        .run();
    run.expect("failed", Some("request_invalid"), 65);
    assert_eq!(
        run.envelope["error"]["details"]["issues"][0]["path"],
        "/request_id"
    );
    assert_eq!(run.issue_codes(), ["contains_nul"]);
    assert_eq!(run.dispatch()["adapter_started"], false);
    assert!(
        run.stderr
            .starts_with("error[request_invalid]: /request_id: \"request_id\" contains a NUL"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_operation_too_long_for_the_environment_is_refused_with_its_path() {
    let run = Dispatch::adapter(&["read-stdin", "echo"])
        .request(|r| r["operation"] = json!("o".repeat(130 * 1024)))
        .run();
    run.expect("failed", Some("request_invalid"), 65);
    assert_eq!(run.issue_codes(), ["too_long"]);
    assert_eq!(
        run.envelope["error"]["details"]["issues"][0]["path"],
        "/operation"
    );
    assert_eq!(run.dispatch()["adapter_started"], false);
    assert!(run.stderr.contains("/operation: "), "{}", run.stderr);
}

#[test]
fn numbers_in_input_and_output_keep_their_exact_text() {
    let request = request().to_string().replace(
        r#""input":{"path":"README.md"}"#,
        r#""input":{"big":12345678901234567890123,"huge":1e400,"neg":-0.0,"frac":0.1000000000000000055511151231257827}"#,
    );
    assert!(request.contains("1e400"), "{request}");
    let run = Dispatch::adapter(&["read-stdin", "echo"])
        .stdin(request.clone())
        .run();
    run.expect("succeeded", None, 0);
    let received = run.envelope["output"]["stdin"].as_str().unwrap();
    assert!(
        received.contains(
            r#""input":{"big":12345678901234567890123,"huge":1e400,"neg":-0.0,"frac":0.1000000000000000055511151231257827}"#
        ),
        "{received}"
    );

    let answer = r#"{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"ptr_123","tool":"workspace.read","operation":"call","status":"succeeded","output":{"big":12345678901234567890123,"huge":1e400}}"#;
    let run = Dispatch::adapter(&["read-stdin", &format!("print:{answer}")]).run();
    assert_eq!(run.exit, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains(r#""output":{"big":12345678901234567890123,"huge":1e400}"#),
        "{}",
        run.stdout
    );
}

#[test]
fn a_request_of_many_tiny_items_does_not_multiply_memory() {
    // 8 MiB of `{},`: a tree of it took ~600 MB; the text itself is all that is kept.
    let items = "{},".repeat((8 << 20) / 3 - 200);
    let request = request()
        .to_string()
        .replace(r#"{"path":"README.md"}"#, &format!("[{}{{}}]", items));
    assert!(request.len() < 8 << 20);
    let run = Dispatch::adapter(&["echo:failed:small"])
        .stdin(request)
        .data_limit(256 << 20)
        .run();
    run.expect("failed", Some("small"), 1);
}

#[test]
fn an_answer_of_many_tiny_items_does_not_multiply_memory() {
    // 16 MiB of `{},` in `output`: a tree of it took ~430 MB, 1.2 GB with transcripts.
    let items = "{},".repeat((15 << 20) / 3);
    let answer = format!(
        r#"{{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"ptr_123","tool":"workspace.read","operation":"call","status":"succeeded","output":[{items}{{}}]}}"#
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("answer.json");
    std::fs::write(&file, &answer).unwrap();
    let artifacts = tempfile::tempdir().unwrap();
    let run = Dispatch::adapter(&["read-stdin"])
        .bridge(|b| {
            b["dispatcher"]["command"]["argv"] = json!(["/bin/cat", file.to_str().unwrap()]);
        })
        .args(&["--artifact-dir", artifacts.path().to_str().unwrap()])
        .data_limit(320 << 20)
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.stdout.len(), run.stdout.trim_end().len() + 1);
}

#[test]
fn the_first_issue_and_how_many_more_are_on_stderr() {
    let run = Dispatch::adapter(&["echo"])
        .request(|r| {
            let map = r.as_object_mut().unwrap();
            map.remove("request_id");
            map.remove("tool");
        })
        .run();
    run.expect("failed", Some("request_invalid"), 65);
    assert_eq!(
        run.stderr.trim_end(),
        r#"error[request_invalid]: /request_id: required key "request_id" is missing (and 1 more issue)"#
    );
}

#[test]
fn a_missing_request_file_is_named_on_stderr_and_not_in_the_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-request.json");
    let run = Dispatch::adapter(&["echo"])
        .args(&[missing.to_str().unwrap()])
        .run();
    run.expect("failed", Some("request_invalid"), 65);
    let expected = format!(
        "error[request_invalid]: reading the request file {}: No such file or directory",
        missing.display()
    );
    assert!(run.stderr.starts_with(&expected), "{}", run.stderr);
    assert!(!run.stdout.contains("no-such-request"), "{}", run.stdout);
}

#[test]
fn a_missing_adapter_is_named_with_how_its_path_was_resolved() {
    let run = Dispatch::adapter(&[])
        .bridge(|b| b["dispatcher"]["command"]["argv"] = json!(["./bin/no-such-adapter"]))
        .run();
    run.expect("unavailable", Some("adapter_not_found"), 69);
    assert!(
        run.stderr
            .contains("the adapter program ./bin/no-such-adapter was not found")
            && run
                .stderr
                .contains("relative path is resolved against the dispatcher's working directory"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("no-such-adapter"), "{}", run.stdout);

    let run = Dispatch::adapter(&[])
        .bridge(|b| b["dispatcher"]["command"]["argv"] = json!(["no-such-adapter-on-path"]))
        .run();
    run.expect("unavailable", Some("adapter_not_found"), 69);
    assert!(
        run.stderr
            .contains("the adapter program no-such-adapter-on-path was not found in PATH"),
        "{}",
        run.stderr
    );
}

#[test]
fn noise_before_the_answer_is_shown_where_it_was_found() {
    let answer = json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "ptr_123", "tool": "workspace.read", "operation": "call",
        "status": "succeeded"});
    let run =
        Dispatch::adapter(&["read-stdin", &format!("print:debug: got request\n{answer}")]).run();
    run.expect("failed", Some("result_invalid"), 1);
    assert!(
        run.dispatch()["stdout_head"]
            .as_str()
            .unwrap()
            .starts_with("debug: got request\n{"),
        "{}",
        run.dispatch()
    );
    assert!(
        run.stderr.contains("invalid JSON at line 1, column 1")
            && run
                .stderr
                .contains(r#"stdout begins with "debug: got request""#),
        "{}",
        run.stderr
    );
    assert!(run.envelope.get("output").is_none());

    let run = Dispatch::adapter(&["read-stdin"]).run();
    run.expect("failed", Some("result_invalid"), 1);
    assert!(run.stderr.contains("; stdout was empty"), "{}", run.stderr);
}

#[test]
fn limits_are_named_with_the_flag_that_raises_them() {
    let run = Dispatch::adapter(&["echo"])
        .args(&["--max-request-bytes", "1024"])
        .request(|r| r["input"] = json!("x".repeat(2048)))
        .run();
    run.expect("failed", Some("request_too_large"), 65);
    assert_eq!(
        run.envelope["error"]["message"],
        "the request is over the 1 KiB limit (--max-request-bytes)"
    );
    let run = Dispatch::adapter(&["read-stdin", "flood:300000"])
        .args(&["--max-output-bytes", "262144"])
        .run();
    run.expect("failed", Some("result_too_large"), 1);
    assert!(
        run.stderr
            .contains("more than the 256 KiB limit to stdout and was stopped (--max-output-bytes)"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_test_adapter_refuses_a_step_it_cannot_read() {
    for step in ["sleep:abc", "exit:", "flood:-1", "no-such-step"] {
        Cmd::ptd_test(["adapter", step])
            .run()
            .exit(2)
            .stdout_empty()
            .stderr_starts_with("ptd-test adapter: ");
    }
}

/// Run the binary with `args` and `stdin`, stdout on a pipe this test holds; checks exit 0
/// and an empty stderr, returns stdout and the pipe's buffer size after the run.
fn pipe_size_after(args: &[&str], stdin: &[u8]) -> (Value, usize) {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin).unwrap();
    drop(pipe);
    let mut stdout = child.stdout.take().unwrap();
    let mut text = String::new();
    stdout.read_to_string(&mut text).unwrap();
    let size = rustix::pipe::fcntl_getpipe_size(&stdout).unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "");
    (serde_json::from_str(&text).unwrap(), size)
}

/// The main job's `output` length for an answer of `bytes`, and the pipe's size after.
fn main_job_pipe(bytes: usize) -> (usize, usize) {
    let bridge = bridge(&[&format!("big-echo:{bytes}"), "read-stdin"]).to_string();
    let args = [
        "--parent-tool-bridge",
        &bridge,
        "--max-output-bytes",
        "8000000",
    ];
    let (envelope, size) = pipe_size_after(&args, request().to_string().as_bytes());
    assert_eq!(envelope["status"], "succeeded");
    (envelope["output"].as_str().unwrap().len(), size)
}

#[test]
fn a_large_envelope_widens_a_pipe_on_stdout_and_a_small_one_does_not() {
    let default = {
        let (read, _write) = rustix::pipe::pipe().unwrap();
        rustix::pipe::fcntl_getpipe_size(&read).unwrap()
    };
    assert!(default < 1 << 20, "this system's pipes are already 1 MiB");
    // 2 MiB: the write past the threshold asks for 1 MiB (the default limit of
    // /proc/sys/fs/pipe-max-size; root may always have it).
    assert_eq!(main_job_pipe(2 << 20), (2 << 20, 1 << 20));
    // A small envelope leaves the caller's pipe as it was.
    assert_eq!(main_job_pipe(1000), (1000, default));
    // The same for a command that prints through `stdout::write`: a 1 MiB workspace read.
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("big.txt"), "b".repeat(1 << 20)).unwrap();
    let request = super::workspace::request("workspace.read", "call", json!({"path": "big.txt"}));
    let root = root.path().to_str().unwrap();
    let (result, size) = pipe_size_after(&["adapter", "workspace", "--root", root], &request);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(size, 1 << 20);
}
