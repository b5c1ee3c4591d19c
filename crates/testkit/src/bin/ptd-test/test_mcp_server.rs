//! `ptd-test mcp-server SCRIPT…`: a scriptable MCP server on the stdio transport, for the test
//! suite, so that every revision and every misbehaviour can be played without a runtime beyond
//! the Rust toolchain. Part of the test-only `ptd-test` binary, never of the product's.
//!
//! A script is a list of arguments: settings, and rules `on:METHOD` followed by the actions to
//! take when that method arrives (until the next `on:` or setting). Several rules for one
//! method are used in turn, the last one for every later request. `on:start` runs before
//! anything is read, `on:eof` when stdin ends (then the server exits 0, unless `ignore-eof`).
//!
//! | setting | effect |
//! |---|---|
//! | `era:legacy` / `era:modern` / `era:dual` | what it speaks (default `legacy`): the `initialize` handshake, the stateless `_meta` revision with `server/discover`, or both |
//! | `versions:V,V…` | the revisions it supports (default: every handshake revision for `legacy`, `2026-07-28` for `modern`, all for `dual`); `initialize` answers the requested one if listed, else the first |
//! | `tools:A,B…` | the tools `tools/list` names (in pages of `page-size:N`, default all); with it, `tools/call` of another name is JSON-RPC error -32602 "Unknown tool: NAME" |
//! | `page-size:N` | `tools/list` pages of N tools, with `nextCursor` |
//! | `log:PATH` | append every line read from stdin to PATH |
//! | `pidfile:PATH` | append its pid to PATH at start |
//! | `ignore-eof` | keep running (for a minute) when stdin ends |
//! | `ignore-term` | ignore SIGTERM, SIGINT and SIGHUP |
//!
//! | action | effect |
//! |---|---|
//! | `reply` | the default answer to the method (below) |
//! | `result:JSON` / `error:CODE:MESSAGE[:DATA]` | answer with this result object / JSON-RPC error |
//! | `text:TEXT` / `fail:TEXT` | a `CallToolResult` with one text item, `isError` false / true |
//! | `raw:TEMPLATE` | print TEMPLATE as a line, `{id}` replaced by the request's id |
//! | `wrong-id` / `null-id` | the default answer under id + 1000 / an error under id `null` |
//! | `silent` | no answer |
//! | `print:TEXT` / `eprint:TEXT` | a line on stdout / stderr |
//! | `eprint-env:NAME` | the value of NAME on stderr |
//! | `notify:METHOD` | a notification |
//! | `ask:METHOD` | a request of the server's own (id `"srv-N"`) |
//! | `huge:N` | a notification line of about N bytes |
//! | `flood-stderr:N` | N bytes on stderr |
//! | `sleep:MS` / `exit:N` / `raise:SIG` | sleep / exit / kill itself |
//! | `close-stdout` | close stdout (and go on) |
//! | `spawn:STEPS` | start `ptd-test adapter STEPS` (steps separated by `+`) sharing its stdout and stderr, without waiting |
//!
//! Default answers: `initialize` negotiates (legacy and dual; a modern-only server refuses it
//! with -32601); `server/discover` lists `versions` (modern and dual; -32601 for legacy);
//! `tools/call` echoes: one text item `called NAME` and `structuredContent` `{name, arguments,
//! meta, revision, env}` (`env`: the names of its environment variables); `tools/list` lists
//! `tools`; `ping` answers `{}`; anything else is -32601. A modern request must carry
//! `_meta` with a supported `io.modelcontextprotocol/protocolVersion` (else -32602 / -32022);
//! a legacy `tools/call` or `tools/list` before `initialize` and `notifications/initialized` is
//! -32600. Modern results carry `resultType: "complete"`.

use ptd_adapters::mcp::{LEGACY, MODERN};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    Legacy,
    Modern,
    Dual,
}

#[derive(Default)]
struct Script {
    era: Option<Era>,
    versions: Option<Vec<String>>,
    tools: Option<Vec<String>>,
    page_size: Option<usize>,
    log: Option<String>,
    ignore_eof: bool,
    /// method → its rules (each a list of actions), used in turn, the last one sticky.
    rules: HashMap<String, Vec<Vec<String>>>,
}

struct State {
    script: Script,
    era: Era,
    versions: Vec<String>,
    /// The negotiated legacy revision, once `initialize` was answered.
    legacy: Option<String>,
    initialized: bool,
    asked: usize,
}

/// Run the script; returns the exit status.
pub(crate) fn run(args: &[String]) -> u8 {
    let script = match parse(args) {
        Ok(script) => script,
        Err(message) => {
            eprintln!("ptd-test mcp-server: {message}");
            return 2;
        }
    };
    let era = script.era.unwrap_or(Era::Legacy);
    let versions = script.versions.clone().unwrap_or_else(|| {
        let legacy = LEGACY.iter().map(|v| v.to_string());
        match era {
            Era::Legacy => legacy.collect(),
            Era::Modern => vec![MODERN.to_string()],
            Era::Dual => std::iter::once(MODERN.to_string()).chain(legacy).collect(),
        }
    });
    let mut state = State {
        script,
        era,
        versions,
        legacy: None,
        initialized: false,
        asked: 0,
    };
    if let Some(code) = state.perform("start", None) {
        return code;
    }
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if let Some(path) = &state.script.log {
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(line.as_bytes()));
        }
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(method) = message["method"].as_str().map(str::to_string) else {
            continue; // an answer to one of ours
        };
        if message.get("id").is_none() {
            if method == "notifications/initialized" {
                state.initialized = true;
            }
            continue;
        }
        if let Some(code) = state.perform(&method, Some(&message)) {
            return code;
        }
    }
    if let Some(code) = state.perform("eof", None) {
        return code;
    }
    if state.script.ignore_eof {
        std::thread::sleep(Duration::from_secs(60));
    }
    0
}

fn parse(args: &[String]) -> Result<Script, String> {
    let mut script = Script::default();
    let mut current: Option<(String, Vec<String>)> = None;
    let list = |v: &str| {
        v.split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    for arg in args {
        let (name, value) = arg.split_once(':').unwrap_or((arg.as_str(), ""));
        let setting = match name {
            "era" => {
                script.era = Some(match value {
                    "legacy" => Era::Legacy,
                    "modern" => Era::Modern,
                    "dual" => Era::Dual,
                    _ => return Err(format!("unknown era {value:?}")),
                });
                true
            }
            "versions" => {
                script.versions = Some(list(value));
                true
            }
            "tools" => {
                script.tools = Some(list(value));
                true
            }
            "page-size" => {
                script.page_size = value.parse().ok();
                true
            }
            "log" => {
                script.log = Some(value.to_string());
                true
            }
            "pidfile" => {
                let line = format!("{}\n", std::process::id());
                let _ = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(value)
                    .and_then(|mut f| f.write_all(line.as_bytes()));
                true
            }
            "ignore-eof" => {
                script.ignore_eof = true;
                true
            }
            "ignore-term" => {
                for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
                    // SAFETY: installing SIG_IGN touches no Rust state.
                    unsafe {
                        libc::signal(sig, libc::SIG_IGN);
                    }
                }
                true
            }
            _ => false,
        };
        if setting {
            if let Some((method, actions)) = current.take() {
                script.rules.entry(method).or_default().push(actions);
            }
            continue;
        }
        if name == "on" {
            if let Some((method, actions)) = current.take() {
                script.rules.entry(method).or_default().push(actions);
            }
            current = Some((value.to_string(), Vec::new()));
            continue;
        }
        match &mut current {
            Some((_, actions)) => actions.push(arg.clone()),
            None => return Err(format!("action {arg:?} outside an on:METHOD rule")),
        }
    }
    if let Some((method, actions)) = current {
        script.rules.entry(method).or_default().push(actions);
    }
    Ok(script)
}

impl State {
    /// Run the rule for `method` (the default answer when there is none); `Some(code)` when
    /// the server must exit.
    fn perform(&mut self, method: &str, message: Option<&Value>) -> Option<u8> {
        let actions = match self.script.rules.get_mut(method) {
            Some(rules) if rules.len() > 1 => rules.remove(0),
            Some(rules) => rules[0].clone(),
            None if message.is_some() => vec!["reply".to_string()],
            None => Vec::new(),
        };
        let id = message.map(|m| m["id"].clone()).unwrap_or(Value::Null);
        for action in actions {
            let (name, arg) = action.split_once(':').unwrap_or((action.as_str(), ""));
            match name {
                "reply" => {
                    if let Some(m) = message {
                        let answer = self.default_answer(method, m);
                        self.answer(&id, answer);
                    }
                }
                "result" => {
                    let result = serde_json::from_str(arg).unwrap_or(json!({}));
                    self.answer(&id, Ok(result));
                }
                "error" => {
                    let mut parts = arg.splitn(3, ':');
                    let code: i64 = parts.next().unwrap_or("0").parse().unwrap_or(0);
                    let text = parts.next().unwrap_or("").to_string();
                    let data = parts.next().and_then(|d| serde_json::from_str(d).ok());
                    self.answer(&id, Err((code, text, data)));
                }
                "text" | "fail" => {
                    let mut result = json!({"content": [{"type": "text", "text": arg}]});
                    if name == "fail" {
                        result["isError"] = json!(true);
                    }
                    self.answer(&id, Ok(result));
                }
                "raw" => out(&arg.replace("{id}", &id.to_string())),
                "wrong-id" => {
                    let answer = message.map(|m| self.default_answer(method, m));
                    let wrong = json!(id.as_u64().unwrap_or(0) + 1000);
                    self.answer(&wrong, answer.unwrap_or(Ok(json!({}))));
                }
                "null-id" => {
                    self.answer(&Value::Null, Err((-32700, "Parse error".to_string(), None)))
                }
                "silent" => {}
                "print" => out(arg),
                "eprint" => eprintln!("{arg}"),
                "eprint-env" => eprintln!("{}", std::env::var(arg).unwrap_or_default()),
                "notify" => {
                    out(&json!({"jsonrpc": "2.0", "method": arg, "params": {}}).to_string())
                }
                "ask" => {
                    self.asked += 1;
                    let request = json!({"jsonrpc": "2.0", "id": format!("srv-{}", self.asked), "method": arg, "params": {}});
                    out(&request.to_string());
                }
                "huge" => {
                    let n: usize = arg.parse().unwrap_or(0);
                    let line = format!(
                        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"{}"}}}}"#,
                        "x".repeat(n)
                    );
                    out(&line);
                }
                "flood-stderr" => {
                    let n: usize = arg.parse().unwrap_or(0);
                    let chunk = vec![b'e'; 65536];
                    let mut left = n;
                    let mut err = std::io::stderr().lock();
                    while left > 0 {
                        let k = left.min(chunk.len());
                        if err.write_all(&chunk[..k]).is_err() {
                            break;
                        }
                        left -= k;
                    }
                }
                "sleep" => std::thread::sleep(Duration::from_millis(arg.parse().unwrap_or(0))),
                "exit" => return Some(arg.parse().unwrap_or(1)),
                "raise" => {
                    // SAFETY: signalling ourselves.
                    unsafe {
                        libc::kill(libc::getpid(), arg.parse().unwrap_or(libc::SIGKILL));
                    }
                    std::thread::sleep(Duration::from_secs(5));
                }
                "close-stdout" => {
                    // /dev/null in its place: fd 1 stays valid, the pipe's write end is closed.
                    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
                        let _ = rustix::stdio::dup2_stdout(null);
                    }
                }
                "spawn" => {
                    if let Ok(exe) = std::env::current_exe() {
                        let _ = std::process::Command::new(exe)
                            .arg("adapter")
                            .args(arg.split('+'))
                            .stdin(std::process::Stdio::null())
                            .spawn();
                    }
                }
                _ => {
                    eprintln!("ptd-test mcp-server: unknown action {action:?}");
                    return Some(2);
                }
            }
        }
        None
    }

    /// The built-in answer to `method`.
    fn default_answer(&mut self, method: &str, message: &Value) -> Reply {
        let params = &message["params"];
        let meta = &params["_meta"];
        let modern_request = meta
            .get("io.modelcontextprotocol/protocolVersion")
            .is_some();
        let speaks_modern = self.era != Era::Legacy;
        let speaks_legacy = self.era != Era::Modern;
        if speaks_modern && (modern_request || method == "server/discover") {
            let requested = meta["io.modelcontextprotocol/protocolVersion"].as_str();
            let Some(requested) = requested else {
                return Err((-32602, "Missing _meta protocol version".into(), None));
            };
            if meta
                .get("io.modelcontextprotocol/clientCapabilities")
                .is_none()
            {
                return Err((-32602, "Missing _meta client capabilities".into(), None));
            }
            if !self.versions.iter().any(|v| v == requested) {
                return Err((
                    -32022,
                    "Unsupported protocol version".into(),
                    Some(json!({"supported": self.versions, "requested": requested})),
                ));
            }
        }
        let revision = if modern_request && speaks_modern {
            MODERN.to_string()
        } else {
            self.legacy.clone().unwrap_or_default()
        };
        let complete = |mut result: Value| {
            if modern_request && speaks_modern {
                result["resultType"] = json!("complete");
            }
            Ok(result)
        };
        match method {
            "initialize" if speaks_legacy => {
                let requested = params["protocolVersion"].as_str().unwrap_or_default();
                let agreed = if self.versions.iter().any(|v| v == requested) {
                    requested.to_string()
                } else {
                    self.versions.first().cloned().unwrap_or_default()
                };
                self.legacy = Some(agreed.clone());
                Ok(json!({
                    "protocolVersion": agreed,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "test-mcp-server", "version": "1"}
                }))
            }
            "initialize" => Err((
                -32601,
                format!(
                    "initialize is not supported; this server speaks {}",
                    self.versions.join(", ")
                ),
                None,
            )),
            "server/discover" if speaks_modern => complete(json!({
                "supportedVersions": self.versions,
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "test-mcp-server", "version": "1"}}
            })),
            "ping" => complete(json!({})),
            "tools/call" | "tools/list" => {
                let stateless = modern_request && speaks_modern;
                let handshaken = self.legacy.is_some() && self.initialized;
                if !stateless && !handshaken {
                    return Err((-32600, "Server not initialized".into(), None));
                }
                if method == "tools/list" {
                    return complete(self.tools_page(params));
                }
                let name = params["name"].as_str().unwrap_or_default().to_string();
                if let Some(tools) = &self.script.tools {
                    if !tools.contains(&name) {
                        return Err((-32602, format!("Unknown tool: {name}"), None));
                    }
                }
                let env: Vec<String> = std::env::vars_os()
                    .map(|(k, _)| k.to_string_lossy().into_owned())
                    .collect();
                complete(json!({
                    "content": [{"type": "text", "text": format!("called {name}")}],
                    "structuredContent": {
                        "name": name,
                        "arguments": params.get("arguments").cloned().unwrap_or(Value::Null),
                        "meta": params.get("_meta").cloned().unwrap_or(Value::Null),
                        "revision": revision,
                        "env": env,
                    }
                }))
            }
            _ => Err((-32601, "Method not found".into(), None)),
        }
    }

    fn tools_page(&self, params: &Value) -> Value {
        let tools = self.script.tools.clone().unwrap_or_default();
        let start: usize = params["cursor"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let size = self.script.page_size.unwrap_or(usize::MAX).max(1);
        let end = tools.len().min(start.saturating_add(size));
        let page: Vec<Value> = tools[start.min(end)..end]
            .iter()
            .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
            .collect();
        let mut result = Map::new();
        result.insert("tools".into(), Value::Array(page));
        if end < tools.len() {
            result.insert("nextCursor".into(), json!(end.to_string()));
        }
        Value::Object(result)
    }

    fn answer(&self, id: &Value, reply: Reply) {
        let message = match reply {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message, data)) => {
                let mut error = json!({"code": code, "message": message});
                if let Some(data) = data {
                    error["data"] = data;
                }
                json!({"jsonrpc": "2.0", "id": id, "error": error})
            }
        };
        out(&message.to_string());
    }
}

type Reply = Result<Value, (i64, String, Option<Value>)>;

/// One line on stdout, flushed at once (the client waits for it).
fn out(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}
