//! `adapter mcp --list-tools` (the MCP adapter's listing of a server's tools, and the same list
//! in an unknown tool's error), with the scripted server of `mcp.rs`: the tools as the server
//! wrote them, every page followed, a clear failure, and the server's stderr escaped on a
//! terminal.

use super::mcp::Server;
use super::*;

/// `adapter mcp --list-tools -- <ptd-test> mcp-server SCRIPT…` for this server.
fn list_tools(server: &Server, script: &[&str]) -> Output {
    let argv = server.argv(&["--list-tools"], script);
    let argv: Vec<String> = argv.as_array().unwrap()[1..]
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    Cmd::new(argv).run()
}

#[test]
fn list_tools_prints_the_server_s_tools_as_written_and_exits() {
    let server = Server::new();
    let listing = r#"raw:{"jsonrpc":"2.0","id":{id},"result":{"tools":[{"name":"read_file","description":"Read a file","inputSchema":{"type":"object","properties":{"path":{"type":"string"}},"maximum":1.50},"annotations":{"x":1}},{"name":"write_file"}]}}"#;
    let out = list_tools(&server, &["on:tools/list", listing]);
    out.exit(0)
        .stdout_with(|stdout| {
            let listed: Value = serde_json::from_str(stdout).unwrap();
            assert_eq!(
                listed,
                json!({"tools": [
                    {"name": "read_file", "description": "Read a file",
                     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                                     "maximum": 1.50}},
                    {"name": "write_file"}
                ]})
            );
        })
        .stderr_empty();
    // Numbers as the server wrote them; pretty-printed for a reader.
    assert!(out.stdout().contains("1.50"), "{}", out.stdout());
    assert!(out.stdout().lines().count() > 3);
    // No tools/call, and the server is gone.
    assert!(server
        .received()
        .iter()
        .all(|m| m["method"] != "tools/call"));
    server.assert_gone(1);
}

#[test]
fn list_tools_follows_every_page_and_fails_clearly() {
    let server = Server::new();
    list_tools(&server, &["era:modern", "tools:a,b,c", "page-size:1"])
        .exit(0)
        .stdout_with(|stdout| {
            let listed: Value = serde_json::from_str(stdout).unwrap();
            let names: Vec<&str> = listed["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, ["a", "b", "c"]);
        })
        .stderr_empty();
    server.assert_gone(1);
    let server = Server::new();
    list_tools(&server, &["on:tools/list", "error:-32000:no listing"])
        .exit(69)
        .stdout_empty()
        .stderr_eq(
            "error[mcp_protocol_error]: the MCP server's tools/list was not a complete listing \
             (an error, no tools array, or more pages than the adapter reads)\n",
        );
    server.assert_gone(1);
    Cmd::new([
        "adapter",
        "mcp",
        "--list-tools",
        "--",
        "/nonexistent/mcp-server",
    ])
    .run()
    .exit(69)
    .stdout_empty()
    .stderr_eq("error[mcp_server_not_found]: the MCP server program was not found\n");
}

#[test]
fn list_tools_on_a_terminal_shows_the_server_s_stderr_escaped() {
    use std::io::Read;
    let server = Server::new();
    let argv = server.argv(
        &["--list-tools"],
        &[
            "tools:a",
            "on:tools/list",
            "eprint:\u{1b}]0;owned\u{7}\u{1b}[2Jgone",
            "reply",
        ],
    );
    let argv: Vec<String> = argv.as_array().unwrap()[1..]
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let (mut master, slave) = super::support::pty();
    let out = std::process::Command::new(bin())
        .args(&argv)
        .stdin(std::process::Stdio::null())
        .stderr(slave)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"a\""));
    // Everything the server wrote is in the terminal's buffer by now: read it without waiting.
    rustix::io::ioctl_fionbio(&master, true).unwrap();
    let mut shown = Vec::new();
    let _ = master.read_to_end(&mut shown);
    let shown = String::from_utf8_lossy(&shown);
    assert!(
        shown.contains("\\x1b]0;owned\\x07\\x1b[2Jgone"),
        "{shown:?}"
    );
    assert!(!shown.contains('\u{1b}'), "{shown:?}");
    server.assert_gone(1);
}

#[test]
fn unknown_tool_names_the_close_tool_and_lists_the_server_s_tools() {
    let server = Server::new();
    let run = server
        .dispatch(&["tools:workspace_read,workspace_write,other"])
        .run();
    run.expect("failed", Some("unknown_tool"), 1);
    assert_eq!(
        run.envelope["error"]["message"],
        "the MCP server has no tool named \"workspace.read\" (did you mean \"workspace_read\"?)"
    );
    let details = &run.envelope["error"]["details"];
    assert_eq!(details["did_you_mean"], "workspace_read");
    assert_eq!(
        details["tools"],
        json!(["workspace_read", "workspace_write", "other"])
    );
    assert_eq!(details["code"], -32602);
    assert!(
        run.stderr.starts_with(
            "error[unknown_tool]: the MCP server has no tool named \"workspace.read\" (did you \
             mean \"workspace_read\"?)"
        ),
        "{}",
        run.stderr
    );
    server.assert_gone(1);
    // Nothing close: no suggestion, the names still listed.
    let server = Server::new();
    let run = server.dispatch(&["tools:zzz"]).run();
    run.expect("failed", Some("unknown_tool"), 1);
    assert_eq!(
        run.envelope["error"]["message"],
        "the MCP server has no tool named \"workspace.read\""
    );
    assert_eq!(run.envelope["error"]["details"]["tools"], json!(["zzz"]));
    assert_eq!(run.envelope["error"]["details"].get("did_you_mean"), None);
    server.assert_gone(1);
}
