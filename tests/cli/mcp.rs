//! `adapter mcp` (the MCP adapter) driven through the dispatcher, end to end: a bridge whose
//! argv is `[<binary>, "adapter", "mcp", …, "--", <ptd-test>, "mcp-server", SCRIPT…]`.
//! The scripted server records every line it reads (`log:`) and its pid (`pidfile:`), so each
//! test checks the envelope, the exit status, the dispatcher's stderr, what the server was
//! sent, and that nothing is left running. One opt-in test runs the reference filesystem
//! server from npm (`scripts/install-mcp-test-server`).

use super::*;

/// A scripted MCP server's folder: its log and its pidfile.
pub(super) struct Server {
    dir: tempfile::TempDir,
}

impl Server {
    pub(super) fn new() -> Server {
        Server {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("log")
    }

    fn pids(&self) -> PathBuf {
        self.dir.path().join("pids")
    }

    fn pid_step(&self) -> String {
        format!("pidfile:{}", self.pids().display())
    }

    /// The bridge's argv: the adapter with `adapter` options, the test server with `script`
    /// (after its log and pidfile settings).
    pub(super) fn argv(&self, adapter: &[&str], script: &[&str]) -> Value {
        let mut argv = vec![bin().display().to_string(), "adapter".into(), "mcp".into()];
        argv.extend(adapter.iter().map(|s| s.to_string()));
        argv.extend([
            "--".into(),
            test_bin().display().to_string(),
            "mcp-server".into(),
            format!("log:{}", self.log().display()),
            self.pid_step(),
        ]);
        argv.extend(script.iter().map(|s| s.to_string()));
        json!(argv)
    }

    pub(super) fn dispatch(&self, script: &[&str]) -> Dispatch {
        self.dispatch_with(&[], script)
    }

    fn dispatch_with(&self, adapter: &[&str], script: &[&str]) -> Dispatch {
        let argv = self.argv(adapter, script);
        Dispatch::adapter(&[]).bridge(move |b| b["dispatcher"]["command"]["argv"] = argv)
    }

    /// Every line the server read, parsed.
    pub(super) fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("the client writes JSON lines"))
            .collect()
    }

    /// The method of every request and notification the server read, in order.
    pub(super) fn methods(&self) -> Vec<String> {
        self.received()
            .iter()
            .filter_map(|m| m["method"].as_str().map(str::to_string))
            .collect()
    }

    /// The first message the server read for `method`.
    pub(super) fn first(&self, method: &str) -> Value {
        self.received()
            .into_iter()
            .find(|m| m["method"] == method)
            .unwrap_or_else(|| panic!("the server never got {method}"))
    }

    /// `expected` processes recorded themselves, and none is left running.
    pub(super) fn assert_gone(&self, expected: usize) {
        assert_eq!(pids(&self.pids()).len(), expected, "recorded processes");
        assert_all_gone(&self.pids());
    }
}

fn with_timeout(d: Dispatch, timeout_ms: u64) -> Dispatch {
    d.bridge(move |b| b["dispatcher"]["timeout_ms"] = json!(timeout_ms))
}

/// The adapter's notes and the server's stderr, as the dispatcher reports them.
fn adapter_stderr(run: &Run) -> &str {
    run.dispatch()["stderr_tail"].as_str().unwrap_or_default()
}

/// The dispatcher's one stderr line for a failure, then only the adapter's stderr under it.
fn assert_error_line(run: &Run, code: &str) {
    let mut lines = run.stderr.lines();
    assert!(
        lines
            .next()
            .unwrap_or_default()
            .starts_with(&format!("error[{code}]: "))
            && lines.all(|l| l.starts_with("  | ") || l.starts_with("  adapter stderr")),
        "stderr: {}",
        run.stderr
    );
}

fn assert_succeeded(run: &Run) {
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "", "the dispatcher says nothing on success");
    assert!(run.envelope.get("error").is_none());
}

const CLIENT_INFO_NAME: &str = "parent-tool-dispatch";

#[test]
fn each_handshake_revision_answers_a_call() {
    for version in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] {
        let server = Server::new();
        let run = server
            .dispatch(&["era:legacy", &format!("versions:{version}")])
            .run();
        assert_succeeded(&run);
        let output = &run.envelope["output"];
        assert_eq!(
            output["content"],
            json!([{"type": "text", "text": "called workspace.read"}])
        );
        let echoed = &output["structured_content"];
        assert_eq!(echoed["revision"], version);
        assert_eq!(echoed["name"], "workspace.read");
        assert_eq!(echoed["arguments"], json!({"path": "README.md"}));
        assert_eq!(
            echoed["meta"],
            Value::Null,
            "no _meta in a handshake revision"
        );
        assert_eq!(
            server.methods(),
            [
                "server/discover",
                "initialize",
                "notifications/initialized",
                "tools/call"
            ],
            "{version}"
        );
        let init = &server.first("initialize")["params"];
        assert_eq!(
            init["protocolVersion"], "2025-11-25",
            "the newest is offered"
        );
        assert_eq!(init["capabilities"], json!({}), "no optional capability");
        assert_eq!(init["clientInfo"]["name"], CLIENT_INFO_NAME);
        server.assert_gone(1);
    }
}

#[test]
fn the_stateless_revision_needs_no_handshake_and_carries_meta() {
    for era in ["era:modern", "era:dual"] {
        let server = Server::new();
        let run = server.dispatch(&[era]).run();
        assert_succeeded(&run);
        assert_eq!(
            run.envelope["output"]["structured_content"]["revision"],
            "2026-07-28"
        );
        assert_eq!(server.methods(), ["server/discover", "tools/call"], "{era}");
        for method in ["server/discover", "tools/call"] {
            let meta = &server.first(method)["params"]["_meta"];
            assert_eq!(
                meta["io.modelcontextprotocol/protocolVersion"],
                "2026-07-28"
            );
            assert_eq!(
                meta["io.modelcontextprotocol/clientCapabilities"],
                json!({})
            );
            assert_eq!(
                meta["io.modelcontextprotocol/clientInfo"]["name"],
                CLIENT_INFO_NAME
            );
        }
        server.assert_gone(1);
    }
}

#[test]
fn a_modern_server_listing_only_a_handshake_revision_gets_the_handshake() {
    let server = Server::new();
    let run = server.dispatch(&["era:dual", "versions:2025-06-18"]).run();
    assert_succeeded(&run);
    assert_eq!(
        run.envelope["output"]["structured_content"]["revision"],
        "2025-06-18"
    );
    assert_eq!(
        server.first("initialize")["params"]["protocolVersion"],
        "2025-06-18"
    );
    server.assert_gone(1);
}

#[test]
fn a_server_speaking_no_supported_revision_is_unavailable() {
    // A modern server of another version, a handshake server answering an unknown version, a
    // server refusing the handshake.
    let cases: [(&[&str], &str); 3] = [
        (&["era:modern", "versions:2027-01-01"], "server/discover"),
        (&["era:legacy", "versions:1999-01-01"], "initialize"),
        (
            &["era:legacy", "on:initialize", "error:-32600:go away"],
            "initialize",
        ),
    ];
    for (script, last) in cases {
        let server = Server::new();
        let run = server.dispatch(script).run();
        run.expect("unavailable", Some("mcp_protocol_unsupported"), 69);
        assert_error_line(&run, "mcp_protocol_unsupported");
        assert!(run.envelope.get("output").is_none());
        let methods = server.methods();
        assert_eq!(methods.last().map(String::as_str), Some(last), "{script:?}");
        assert!(!methods.contains(&"tools/call".to_string()));
        server.assert_gone(1);
    }
    let server = Server::new();
    let run = server
        .dispatch(&["era:modern", "versions:2027-01-01"])
        .run();
    run.expect("unavailable", Some("mcp_protocol_unsupported"), 69);
    assert_eq!(
        run.envelope["error"]["details"]["server_versions"],
        json!(["2027-01-01"])
    );
    assert!(run.envelope["error"]["message"]
        .as_str()
        .unwrap()
        .contains("2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"));
}

#[test]
fn a_silent_probe_falls_back_to_the_handshake() {
    let server = Server::new();
    let run = server
        .dispatch(&["era:legacy", "on:server/discover", "silent"])
        .run();
    assert_succeeded(&run);
    assert!(run.elapsed >= Duration::from_secs(2), "the probe waited");
    assert_eq!(
        server.methods(),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call"
        ]
    );
    server.assert_gone(1);
}

#[test]
fn a_modern_server_answering_the_probe_late_is_still_found() {
    // The probe answer comes after the wait; the modern-only server then refuses initialize.
    let server = Server::new();
    let run = server
        .dispatch(&["era:modern", "on:server/discover", "sleep:2500", "reply"])
        .run();
    assert_succeeded(&run);
    assert_eq!(
        server.methods(),
        ["server/discover", "initialize", "tools/call"]
    );
    server.assert_gone(1);
}

#[test]
fn the_tool_id_is_mapped_and_the_envelope_keeps_the_canonical_one() {
    for (map, name) in [
        ("provider-safe", "workspace_read"),
        (r#"{"workspace.read": "read_file"}"#, "read_file"),
    ] {
        let server = Server::new();
        let run = server
            .dispatch_with(&["--tool-map", map], &["era:modern"])
            .run();
        assert_succeeded(&run);
        assert_eq!(run.envelope["tool"], "workspace.read");
        assert_eq!(run.envelope["output"]["structured_content"]["name"], name);
        assert_eq!(server.first("tools/call")["params"]["name"], name);
    }
}

/// A request the adapter refuses before it starts the server: `member` set to `value` (none
/// when empty), with these adapter options.
fn assert_refused(member: &str, value: Value, adapter: &[&str], status: &str, code: &str) {
    let server = Server::new();
    let run = server
        .dispatch_with(adapter, &["era:modern"])
        .request(|r| {
            if !member.is_empty() {
                r[member] = value;
            }
        })
        .run();
    let exit = if status == "failed" { 1 } else { 69 };
    run.expect(status, Some(code), exit);
    assert_error_line(&run, code);
    assert!(pids(&server.pids()).is_empty(), "{code}: the server ran");
}

#[test]
fn request_problems_are_answered_without_starting_the_server() {
    assert_refused("input", json!([1]), &[], "failed", "input_invalid");
    assert_refused("input", Value::Null, &[], "failed", "input_invalid");
    assert_refused(
        "operation",
        json!("read"),
        &[],
        "failed",
        "unknown_operation",
    );
    let bad_map = ["--tool-map", "[1]"];
    assert_refused("", Value::Null, &bad_map, "unavailable", "tool_map_invalid");
}

#[test]
fn is_error_is_a_tool_error_with_the_first_text_as_its_message() {
    let server = Server::new();
    let run = server
        .dispatch(&[
            "tools:workspace.read",
            "on:tools/call",
            "fail:disk \u{1b}[31mfull",
        ])
        .run();
    run.expect("failed", Some("tool_error"), 1);
    let error = &run.envelope["error"];
    assert_eq!(error["message"], "disk \\x1b[31mfull");
    assert_eq!(error["retryable"], false);
    assert_eq!(
        error["details"]["content"],
        json!([{"type": "text", "text": "disk \u{1b}[31mfull"}])
    );
    assert!(run.envelope.get("output").is_none());
    assert_error_line(&run, "tool_error");
    assert!(!run.stderr.contains('\u{1b}'));
    // The tool is listed, so the failure stays the tool's.
    assert_eq!(server.methods().last().unwrap(), "tools/list");
    server.assert_gone(1);
}

#[test]
fn a_json_rpc_error_is_mcp_error_with_its_code_message_and_data() {
    let server = Server::new();
    let run = server
        .dispatch(&[
            "tools:workspace.read",
            "on:tools/call",
            r#"error:-32000:backend down:{"retry_after":5}"#,
        ])
        .run();
    run.expect("failed", Some("mcp_error"), 1);
    assert_eq!(
        run.envelope["error"]["details"],
        json!({"code": -32000, "message": "backend down", "data": {"retry_after": 5}})
    );
    assert_eq!(
        run.envelope["error"]["message"],
        "the MCP server answered tools/call with JSON-RPC error -32000: backend down"
    );
    assert!(!server.methods().contains(&"tools/list".to_string()));
    server.assert_gone(1);
}

#[test]
fn an_unknown_tool_is_confirmed_by_the_full_tools_list() {
    // -32602 from the server, and its list (two pages) lacks the tool.
    let server = Server::new();
    let run = server
        .dispatch(&["era:dual", "tools:other,another", "page-size:1"])
        .run();
    run.expect("failed", Some("unknown_tool"), 1);
    assert_eq!(run.envelope["error"]["details"]["code"], -32602);
    assert_eq!(
        run.envelope["error"]["message"],
        "the MCP server has no tool named \"workspace.read\""
    );
    let lists: Vec<Value> = server
        .received()
        .into_iter()
        .filter(|m| m["method"] == "tools/list")
        .collect();
    assert_eq!(lists.len(), 2);
    assert_eq!(lists[1]["params"]["cursor"], "1");
    assert!(lists[1]["params"]["_meta"].is_object());
    server.assert_gone(1);

    // The SDK style: an isError result, and the list lacks the tool.
    let server = Server::new();
    let run = server
        .dispatch(&[
            "tools:other",
            "on:tools/call",
            "fail:Tool workspace.read not found",
        ])
        .run();
    run.expect("failed", Some("unknown_tool"), 1);
    assert_eq!(
        run.envelope["error"]["details"]["content"][0]["text"],
        "Tool workspace.read not found"
    );

    // Invalid arguments for a listed tool stay the server's error.
    let server = Server::new();
    let run = server
        .dispatch(&[
            "tools:workspace.read",
            "on:tools/call",
            "error:-32602:Invalid arguments",
        ])
        .run();
    run.expect("failed", Some("mcp_error"), 1);
}

#[test]
fn the_server_exiting_before_it_answers_is_unavailable_with_its_stderr() {
    let server = Server::new();
    let run = server
        .dispatch(&["on:tools/call", "eprint:fatal: out of cheese", "exit:3"])
        .run();
    run.expect("unavailable", Some("mcp_server_exited"), 69);
    let error = &run.envelope["error"];
    assert_eq!(
        error["message"],
        "the MCP server exited with status 3 before it answered tools/call; its stderr ends \
         with: fatal: out of cheese"
    );
    assert_eq!(error["retryable"], true);
    assert_eq!(error["details"]["exit_code"], 3);
    assert_eq!(error["details"]["stderr_tail"], "fatal: out of cheese\n");
    assert_error_line(&run, "mcp_server_exited");
    // The server's stderr went to the adapter's, which the dispatcher reports.
    assert_eq!(adapter_stderr(&run), "fatal: out of cheese\n");
    server.assert_gone(1);

    let server = Server::new();
    let run = server.dispatch(&["on:initialize", "raise:9"]).run();
    run.expect("unavailable", Some("mcp_server_exited"), 69);
    assert_eq!(run.envelope["error"]["details"]["signal"], 9);
}

#[test]
fn a_server_closing_stdout_is_unavailable_and_is_stopped() {
    let server = Server::new();
    let run = server
        .dispatch(&["on:tools/call", "close-stdout", "sleep:60000"])
        .run();
    run.expect("unavailable", Some("mcp_server_exited"), 69);
    assert!(run.envelope["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("the MCP server closed its stdout before it answered tools/call"));
    assert!(
        adapter_stderr(&run).contains("did not exit when its stdin closed; it was sent SIGTERM"),
        "{}",
        adapter_stderr(&run)
    );
    server.assert_gone(1);
}

#[test]
fn stdout_that_is_not_json_rpc_is_a_protocol_error() {
    let cases: [&[&str]; 5] = [
        &["on:start", "print:Starting server..."],
        &["on:tools/call", "wrong-id"],
        &["on:tools/call", "raw:[1,2]"],
        &[
            "on:tools/call",
            r#"raw:{"jsonrpc":"2.0","id":{id},"result":{"content":[],"content":[]}}"#,
        ],
        &[
            "on:tools/call",
            r#"raw:{"jsonrpc":"2.0","id":{id},"result":{"isError":true}}"#,
        ],
    ];
    for script in cases {
        let server = Server::new();
        let run = server.dispatch(script).run();
        run.expect("failed", Some("mcp_protocol_error"), 1);
        assert_error_line(&run, "mcp_protocol_error");
        assert!(run.envelope.get("output").is_none(), "{script:?}");
        server.assert_gone(1);
    }
    let server = Server::new();
    let run = server
        .dispatch(&["on:start", "print:Starting server..."])
        .run();
    run.expect("failed", Some("mcp_protocol_error"), 1);
    assert_eq!(
        run.envelope["error"]["details"]["excerpt"],
        "Starting server..."
    );
}

#[test]
fn a_line_over_the_cap_is_a_protocol_error() {
    let server = Server::new();
    let run = server
        .dispatch(&["on:tools/call", "huge:9000000", "reply"])
        .run();
    run.expect("failed", Some("mcp_protocol_error"), 1);
    assert_eq!(
        run.envelope["error"]["message"],
        "the MCP server wrote a message longer than the 8 MiB cap"
    );
    server.assert_gone(1);
}

#[test]
fn server_requests_get_method_not_found_ping_an_answer_and_notifications_nothing() {
    let server = Server::new();
    let run = server
        .dispatch(&[
            "on:tools/call",
            "notify:notifications/progress",
            "notify:notifications/message",
            "ask:sampling/createMessage",
            "ask:roots/list",
            "ask:elicitation/create",
            "ask:ping",
            "reply",
        ])
        .run();
    assert_succeeded(&run);
    let answers: Vec<Value> = server
        .received()
        .into_iter()
        .filter(|m| m.get("method").is_none())
        .collect();
    let not_found = |id: &str| json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}});
    assert_eq!(
        answers,
        [
            not_found("srv-1"),
            not_found("srv-2"),
            not_found("srv-3"),
            json!({"jsonrpc": "2.0", "id": "srv-4", "result": {}}),
        ]
    );
    server.assert_gone(1);
}

/// The adapter alone (no dispatcher) with `argv` (whose program is the binary under test) and
/// the default request on stdin.
fn adapter_alone(argv: &Value) -> Cmd {
    let argv: Vec<String> = serde_json::from_value(argv.clone()).unwrap();
    assert_eq!(Path::new(&argv[0]), bin());
    Cmd::new(&argv[1..])
        .env_remove(parent_tool_dispatch::plan::vars::TIMEOUT_MS)
        .stdin(request().to_string())
}

#[test]
fn output_numbers_are_kept_as_the_server_wrote_them() {
    // The adapter alone: what it prints is what the dispatcher judges.
    let server = Server::new();
    let argv = server.argv(
        &[],
        &[
            "on:tools/call",
            r#"raw:{"jsonrpc":"2.0","id":{id},"result":{"content":[{"type":"text","text":"n"}],"structuredContent":{"big":12345678901234567890123,"f":1e400}}}"#,
        ],
    );
    adapter_alone(&argv)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_with(|stdout| {
            assert!(
                stdout.ends_with("}\n") && stdout.matches('\n').count() == 1,
                "{stdout}"
            );
            // Valid JSON, though no tree holds 1e400.
            json_line(stdout);
        })
        .stdout_contains(r#""structured_content":{"big":12345678901234567890123,"f":1e400}"#);
    server.assert_gone(1);
}

#[test]
fn a_slow_server_gets_the_adapters_timeout_and_a_cancellation() {
    let server = Server::new();
    let run = with_timeout(
        server.dispatch(&["era:modern", "on:tools/call", "silent"]),
        3000,
    )
    .run();
    run.expect("timeout", Some("mcp_timeout"), 124);
    assert_error_line(&run, "mcp_timeout");
    assert_eq!(run.envelope["error"]["retryable"], true);
    assert_eq!(run.envelope["error"]["details"]["budget_ms"], 2400);
    assert!(
        run.elapsed < Duration::from_millis(3000 + 1500),
        "{:?}",
        run.elapsed
    );
    let call_id = server.first("tools/call")["id"].clone();
    assert_eq!(
        server.first("notifications/cancelled")["params"]["requestId"],
        call_id
    );
    server.assert_gone(1);

    // A server stuck in the call is stopped by the ladder all the same.
    let server = Server::new();
    let run = with_timeout(server.dispatch(&["on:tools/call", "sleep:60000"]), 3000).run();
    run.expect("timeout", Some("mcp_timeout"), 124);
    assert!(adapter_stderr(&run).contains("it was sent SIGTERM"));
    server.assert_gone(1);
}

#[test]
fn the_shutdown_ladder_ends_with_sigkill_and_leaves_nothing() {
    // The server and the child in its group ignore stdin's end and SIGTERM.
    let server = Server::new();
    let spawn = format!("spawn:{}+ignore-term+sleep:60000", server.pid_step());
    let run = with_timeout(
        server.dispatch(&["ignore-eof", "ignore-term", "on:start", &spawn]),
        5000,
    )
    .run();
    assert_succeeded(&run);
    let notes = adapter_stderr(&run);
    assert!(
        notes.starts_with(
            "adapter mcp: the MCP server did not exit when its stdin closed nor on SIGTERM; it \
             was killed\n"
        ),
        "{notes}"
    );
    // The child died with the group's SIGKILL; the sweep may still have found it alive.
    for extra in notes.lines().skip(1) {
        assert_eq!(
            extra,
            "adapter mcp: killed 1 process(es) the MCP server left running"
        );
    }
    assert!(
        run.elapsed < Duration::from_millis(5000 + 1500),
        "{:?}",
        run.elapsed
    );
    server.assert_gone(2);
}

#[test]
fn what_the_server_leaves_behind_is_killed() {
    // The server exits when its stdin ends; its child keeps its stdout open and sleeps on.
    let server = Server::new();
    let spawn = format!("spawn:{}+sleep:60000", server.pid_step());
    // The pause lets the child record itself before the server is done.
    let run = server.dispatch(&["on:start", &spawn, "sleep:1500"]).run();
    assert_succeeded(&run);
    assert_eq!(
        adapter_stderr(&run),
        "adapter mcp: killed 1 process(es) the MCP server left running\n"
    );
    server.assert_gone(2);
}

#[test]
fn the_server_gets_the_adapters_environment_less_the_bridge_metadata() {
    let server = Server::new();
    let run = server
        .dispatch(&["on:tools/call", "eprint-env:MCP_TEST_SECRET", "reply"])
        .bridge(|b| b["dispatcher"]["command"]["env"] = json!({"MCP_TEST_PLAIN": "plain"}))
        .args(&["--secret-env", "MCP_TEST_SECRET"])
        .env("MCP_TEST_SECRET", "s3cr3t-value-for-the-server")
        .run();
    assert_succeeded(&run);
    let names: Vec<&str> = run.envelope["output"]["structured_content"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for wanted in ["PATH", "MCP_TEST_PLAIN", "MCP_TEST_SECRET"] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("WP_CODEBOX_PARENT_TOOL_")),
        "{names:?}"
    );
    // The server printed the secret on stderr; the dispatcher's report scrubs it.
    assert!(!run.stdout.contains("s3cr3t-value-for-the-server"));
    assert!(adapter_stderr(&run).contains("[redacted]"));
}

#[test]
fn input_required_is_retried_with_its_state_or_refused() {
    let server = Server::new();
    let run = server
        .dispatch(&[
            "era:modern",
            "on:tools/call",
            r#"result:{"resultType":"input_required","requestState":"st-1"}"#,
            "on:tools/call",
            "reply",
        ])
        .run();
    assert_succeeded(&run);
    let calls: Vec<Value> = server
        .received()
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1]["params"]["requestState"], "st-1");
    assert_ne!(calls[0]["id"], calls[1]["id"]);

    let server = Server::new();
    let run = server
        .dispatch(&[
            "era:modern",
            "on:tools/call",
            r#"result:{"resultType":"input_required","inputRequests":{"q":{"method":"sampling/createMessage","params":{}}}}"#,
        ])
        .run();
    run.expect("failed", Some("mcp_input_required"), 1);
    assert_eq!(
        run.envelope["error"]["details"]["requested"],
        json!(["sampling/createMessage"])
    );

    let server = Server::new();
    let run = server
        .dispatch(&[
            "era:modern",
            "on:tools/call",
            r#"result:{"resultType":"later","content":[]}"#,
        ])
        .run();
    run.expect("failed", Some("mcp_protocol_error"), 1);
}

#[test]
fn a_null_id_error_answers_the_pending_call() {
    let server = Server::new();
    let run = server.dispatch(&["on:tools/call", "null-id"]).run();
    run.expect("failed", Some("mcp_error"), 1);
    assert_eq!(run.envelope["error"]["details"]["code"], -32700);
    server.assert_gone(1);
}

#[test]
fn a_missing_server_program_is_unavailable() {
    let argv = json!([
        bin().display().to_string(),
        "adapter",
        "mcp",
        "--",
        "/nonexistent/mcp-server"
    ]);
    let run = Dispatch::adapter(&[])
        .bridge(move |b| b["dispatcher"]["command"]["argv"] = argv)
        .run();
    run.expect("unavailable", Some("mcp_server_not_found"), 69);
    assert_error_line(&run, "mcp_server_not_found");
}

#[test]
fn a_signal_to_the_adapter_stops_the_server_and_is_answered() {
    let server = Server::new();
    let running =
        adapter_alone(&server.argv(&[], &["era:modern", "on:tools/call", "silent"])).spawn();
    // Wait until the call reached the server, then interrupt the adapter.
    let until = Instant::now() + Duration::from_secs(10);
    while !server.methods().contains(&"tools/call".to_string()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let start = Instant::now();
    running.signal(rustix::process::Signal::TERM);
    let out = running.wait();
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    let envelope = out.exit(0).stderr_empty().json();
    assert_eq!(envelope["status"], "failed");
    assert_eq!(envelope["error"]["code"], "interrupted");
    assert_eq!(envelope["error"]["retryable"], true);
    server.assert_gone(1);
}

#[test]
fn the_docs_and_the_help_list_every_adapter_code() {
    let section =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/mcp.md")).unwrap();
    let help = ptd_adapters::mcp::after_help();
    for code in ptd_adapters::mcp::Code::ALL {
        assert!(
            section.contains(&format!("`{}`", code.as_str())),
            "docs/mcp.md misses {}",
            code.as_str()
        );
        assert!(
            help.contains(code.as_str()),
            "help misses {}",
            code.as_str()
        );
    }
}

#[test]
fn the_docs_bridge_example_is_valid_and_shown_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("fixtures/examples/mcp.bridge.json")).unwrap();
    let doc = std::fs::read_to_string(root.join("docs/mcp.md")).unwrap();
    assert!(doc.contains(&format!("```json\n{text}```\n")));
    let bridge: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        bridge["dispatcher"]["command"]["argv"],
        json!([
            "fixtures/bin/parent-tool-dispatch",
            "adapter",
            "mcp",
            "--tool-map",
            "provider-safe",
            "--",
            "some-mcp-server"
        ])
    );
    Cmd::new(["validate", "bridge", "--strict"])
        .arg(root.join("fixtures/examples/mcp.bridge.json"))
        .run()
        .exit(0)
        .stdout_eq("{\"valid\":true,\"issues\":[]}\n")
        .stderr_empty();
}

#[test]
fn a_server_that_stops_reading_cannot_block_the_adapter() {
    // The server answers the probe, then never reads again; the call's 4 MiB of arguments do
    // not fit the pipe. The adapter's writes wait in poll(2), not in write(2).
    let server = Server::new();
    let big = "x".repeat(4 << 20);
    let run = with_timeout(
        server.dispatch(&["era:modern", "on:server/discover", "reply", "sleep:60000"]),
        3000,
    )
    .request(move |r| r["input"] = json!({ "data": big }))
    .run();
    run.expect("timeout", Some("mcp_timeout"), 124);
    assert!(
        run.elapsed < Duration::from_millis(3000 + 1500),
        "{:?}",
        run.elapsed
    );
    server.assert_gone(1);
}

#[test]
fn the_servers_stderr_is_passed_on_up_to_its_cap() {
    let server = Server::new();
    let run = server
        .dispatch(&[
            "on:tools/call",
            "flood-stderr:1500000",
            "eprint:LAST",
            "reply",
        ])
        .run();
    assert_succeeded(&run);
    let tail = adapter_stderr(&run);
    // 1 MiB passed on, the rest (1,500,005 - 1,048,576 bytes) counted; LAST was not shown.
    // (The dispatcher's tail drops the partial line at its cut: the flood is one long line.)
    assert!(
        tail.ends_with(
            "adapter mcp: 451429 more bytes of the MCP server's stderr were not shown\n"
        ) && !tail.contains("LAST"),
        "{}",
        &tail[tail.len().saturating_sub(200)..]
    );
    server.assert_gone(1);
}

/// Where `scripts/install-mcp-test-server` (which `.ci/run` runs) puts the reference
/// filesystem server from npm.
fn filesystem_server_entry() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "target/mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    )
}

/// The reference filesystem server is installed and node runs.
fn filesystem_server() -> Need {
    let entry = filesystem_server_entry();
    if !entry.is_file() {
        return skip::unmet(
            "mcp-filesystem-server",
            format!(
                "needs the reference MCP filesystem server from npm, not installed at {} (run \
                 scripts/install-mcp-test-server; needs node and npm)",
                entry.display()
            ),
        );
    }
    skip::program("node", &["--version"]).map_err(|unmet| skip::Unmet {
        need: "mcp-filesystem-server",
        ..unmet
    })
}

/// The reference filesystem server from npm, through the dispatcher. `.ci/run` installs it
/// (`scripts/install-mcp-test-server`, node and npm); elsewhere it is reported skipped.
#[test]
fn real_filesystem_server_through_the_dispatcher() {
    require!(filesystem_server());
    let entry = filesystem_server_entry();
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().canonicalize().unwrap();
    std::fs::write(files.join("hello.txt"), "hello from MCP\n").unwrap();
    let map = r#"{"workspace.read": "read_text_file"}"#;
    let bridge_for = |map: &str| {
        let argv = json!([
            bin().display().to_string(),
            "adapter",
            "mcp",
            "--tool-map",
            map,
            "--",
            "node",
            entry.display().to_string(),
            files.display().to_string()
        ]);
        move |b: &mut Value| {
            b["dispatcher"]["command"]["argv"] = argv;
            b["dispatcher"]["timeout_ms"] = json!(30000);
            b["allowed_tools"] = json!(["workspace.read", "workspace.search"]);
        }
    };
    let call = |tool: &str, path: &str| {
        let path = path.to_string();
        let tool = tool.to_string();
        Dispatch::adapter(&[])
            .bridge(bridge_for(map))
            .request(move |r| {
                r["tool"] = json!(tool);
                r["authorization"]["allowed_tools"] = json!([tool]);
                r["input"] = json!({ "path": path });
            })
            .run()
    };

    let run = call(
        "workspace.read",
        &files.join("hello.txt").display().to_string(),
    );
    assert_succeeded(&run);
    assert_eq!(run.envelope["tool"], "workspace.read");
    assert_eq!(
        run.envelope["output"]["content"],
        json!([{"type": "text", "text": "hello from MCP\n"}])
    );
    assert_eq!(
        run.envelope["output"]["structured_content"],
        json!({"content": "hello from MCP\n"})
    );

    // Outside the server's allowed folder: the tool says no.
    let run = call("workspace.read", "/etc/hostname");
    run.expect("failed", Some("tool_error"), 1);
    assert_error_line(&run, "tool_error");

    // A tool the server does not have (the map does not name it): confirmed by tools/list.
    let run = call("workspace.search", ".");
    run.expect("failed", Some("unknown_tool"), 1);
    assert_eq!(run.envelope["tool"], "workspace.search");
}
