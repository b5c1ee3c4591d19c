//! `adapters/python/parent_tool_adapter.py`, the helper for adapters written in Python: through
//! the binary (both transports, a failure, a bug of the handler) and on its own (a request it
//! refuses to hand to the handler).

use super::*;

/// An adapter script whose handler body is `body` (the request is `request`).
fn adapter(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("adapter.py");
    let script = format!(
        "import parent_tool_adapter as pta\n\ndef handle(request):\n    {body}\n\npta.serve(handle)\n"
    );
    std::fs::write(&path, script).unwrap();
    path
}

fn helper_folder() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("adapters/python")
        .display()
        .to_string()
}

/// The main job running `body` as the handler, with `transport`.
fn run(body: &str, transport: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let script = adapter(dir.path(), body).display().to_string();
    let pythonpath = helper_folder();
    let transport = transport.to_string();
    Dispatch::with_bridge(bridge(&[]))
        .bridge(move |b| {
            b["dispatcher"]["command"] = json!({
                "argv": ["/usr/bin/python3", script],
                "env": {"PYTHONPATH": pythonpath},
                "transport": transport,
            });
        })
        .run()
}

#[test]
fn a_handler_s_value_is_the_output_through_either_transport() {
    require!(skip::program("/usr/bin/python3", &["--version"]));
    for transport in ["stdin", "file"] {
        let run = run(
            "return {'path': request['input']['path'], 'n': 1}",
            transport,
        );
        run.expect("succeeded", None, 0);
        assert_eq!(
            run.envelope["output"],
            json!({"path": request()["input"]["path"], "n": 1}),
            "{transport}"
        );
    }
}

#[test]
fn a_failure_is_answered_with_its_status_code_and_details() {
    require!(skip::program("/usr/bin/python3", &["--version"]));
    let run = run(
        "raise pta.Failure('quota', 'over the quota', retryable=True, details={'left': 0}, status='denied')",
        "stdin",
    );
    run.expect("denied", Some("quota"), 77);
    assert_eq!(
        run.envelope["error"],
        json!({"code": "quota", "message": "over the quota", "retryable": true, "details": {"left": 0}})
    );
}

#[test]
fn a_bug_in_the_handler_is_a_failure_that_shows_no_text_of_it() {
    require!(skip::program("/usr/bin/python3", &["--version"]));
    let run = run(
        "raise RuntimeError('cannot open /srv/secret/key-4242')",
        "stdin",
    );
    run.expect("failed", Some("adapter_error"), 1);
    assert_eq!(
        run.envelope["error"]["message"],
        "the adapter failed (RuntimeError)"
    );
    assert!(!run.envelope.to_string().contains("key-4242"));
}

#[test]
fn a_request_that_is_not_the_one_passed_never_reaches_the_handler() {
    require!(skip::program("/usr/bin/python3", &["--version"]));
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = adapter(
        dir.path(),
        &format!("open({:?}, 'w').close()", marker.display().to_string()),
    );
    let mut req = request();
    let cases = [
        (
            req.to_string(),
            "ptr_other",
            "request_id is not the one the dispatcher passed",
        ),
        (
            req.to_string().replacen("{", "{\"tool\":\"x\",", 1),
            "ptr_123",
            "has the key 'tool' twice",
        ),
        ("[1]".to_string(), "ptr_123", "is not a JSON object"),
    ];
    req["schema"] = json!("other");
    let cases = cases
        .into_iter()
        .chain([(req.to_string(), "ptr_123", "schema is not")]);
    for (stdin, id, says) in cases {
        let out = Cmd::of(PathBuf::from("/usr/bin/python3"), [script.as_os_str()])
            .env("PYTHONPATH", helper_folder())
            .env("WP_CODEBOX_PARENT_TOOL_REQUEST_ID", id)
            .stdin(stdin)
            .run();
        out.exit(0).stderr_empty().stdout_json(|answer| {
            assert_eq!(answer["status"], "failed", "{answer}");
            assert_eq!(answer["error"]["code"], "request_invalid");
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(message.contains(says), "{message}");
        });
    }
    assert!(!marker.exists(), "the handler never ran");
}
