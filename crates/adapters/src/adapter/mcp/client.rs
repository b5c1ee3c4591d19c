//! The MCP client side of one call: pick the protocol revision the server speaks, call one
//! tool, and turn the answer into the envelope's `output` or a [`Failure`].
//!
//! Revisions (each from its published specification and schema):
//! - **2026-07-28**, stateless: no handshake; every request carries `params._meta` with
//!   `io.modelcontextprotocol/protocolVersion`, `…/clientInfo` and `…/clientCapabilities`.
//!   On stdio a dual-era client probes with `server/discover` first: a `DiscoverResult`
//!   (`supportedVersions`) or an `UnsupportedProtocolVersionError` (-32022, `data.supported`)
//!   means a modern server; any other error, or no answer within the probe wait, a legacy one.
//!   Results carry `resultType` (`complete`, absent = complete, or `input_required`).
//! - **2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05**, with a handshake: `initialize`
//!   (`protocolVersion`, `capabilities`, `clientInfo`) answered with the server's
//!   `protocolVersion`, then the `notifications/initialized` notification.
//!
//! Invariants: the client declares no optional capability (`{}` in both eras); it sends one
//! request at a time and waits for its id; a response to an id it never sent is a protocol
//! error, a late response to a request it gave up on (the probe) is not (what it says about
//! versions is kept, in case a modern server was slow to start); requests from the
//! server get "method not found" (`ping` an empty result); notifications are ignored; every
//! wait ends by the adapter's deadline.

use super::server::{Ending, Event, Server};
use super::wire::{self, Incoming, Outcome, ResponseId, RpcError};
use super::{limits, Code, Failure};
use crate::adapter::workspace::cut_at_char_boundary;
use ptd_sys::exec::Termination;
use ptd_sys::interrupt::Interrupts;
use ptd_wire::json::raw::{self, Fields, ObjectWriter};
use ptd_wire::json::{self, Kind};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// The stateless revision.
pub const MODERN: &str = "2026-07-28";
/// The handshake revisions, newest first: the first is offered in `initialize`.
pub const LEGACY: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// A revision both sides speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    Modern,
    Legacy(&'static str),
}

impl Revision {
    /// The best revision among those the server `offered`: the modern one, else the newest
    /// handshake revision.
    pub fn choose(offered: &[String]) -> Option<Revision> {
        if offered.iter().any(|v| v == MODERN) {
            return Some(Revision::Modern);
        }
        LEGACY
            .into_iter()
            .find(|l| offered.iter().any(|v| v == l))
            .map(Revision::Legacy)
    }
}

/// Every revision the adapter speaks, for messages.
fn all_revisions() -> String {
    std::iter::once(MODERN)
        .chain(LEGACY)
        .collect::<Vec<_>>()
        .join(", ")
}

enum Reply {
    Result(String),
    Error(RpcError),
    TimedOut,
}

/// One session with the server, for one call.
pub(super) struct Client<'s> {
    server: &'s mut Server,
    interrupts: &'s Interrupts,
    /// Every wait ends here.
    deadline: Instant,
    /// The whole budget, for messages.
    budget: Duration,
    revision: Option<Revision>,
    next_id: u64,
    /// Requests given up on (the probe): a late answer is not an error.
    abandoned: Vec<u64>,
    /// The versions a late answer to the probe listed (a modern server slow to start).
    late_versions: Option<Vec<String>>,
    /// Server-initiated requests answered so far.
    answered: usize,
    /// `TRACEPARENT` from this adapter's environment (the dispatcher's span, SPEC §20), when
    /// well formed: sent as `params._meta.traceparent` of `tools/call`.
    traceparent: Option<String>,
}

impl<'s> Client<'s> {
    /// A client for `server`; every exchange ends by `deadline` (`budget` after the start).
    pub(super) fn new(
        server: &'s mut Server,
        interrupts: &'s Interrupts,
        deadline: Instant,
        budget: Duration,
    ) -> Client<'s> {
        Client {
            server,
            interrupts,
            deadline,
            budget,
            revision: None,
            next_id: 1,
            abandoned: Vec::new(),
            late_versions: None,
            answered: 0,
            traceparent: ptd_sys::hostenv::HostEnv::process()
                .var("TRACEPARENT")
                .filter(|t| well_formed_traceparent(t)),
        }
    }

    /// Find the revision to speak: the `server/discover` probe, then the handshake if the
    /// server is a legacy one.
    pub(super) fn connect(&mut self) -> Result<Revision, Failure> {
        let probe_until = self
            .deadline
            .min(Instant::now() + limits::PROBE_WAIT.min(self.budget / 3));
        let params = self.params_with(Some(Revision::Modern), |_| {});
        match self.exchange("server/discover", &params, probe_until)?.1 {
            Reply::Result(result) => {
                let versions = Fields::parse(&result)
                    .and_then(|f| f.get("supportedVersions").and_then(wire::string_items));
                // A result that is not a DiscoverResult comes from a legacy server that
                // answers anything: fall back, as for an error.
                if let Some(versions) = versions {
                    return self.settle(versions);
                }
            }
            Reply::Error(err) if err.code == Some(wire::UNSUPPORTED_PROTOCOL_VERSION) => {
                return match err.supported_versions() {
                    Some(versions) => self.settle(versions),
                    None => Err(unsupported_by_error(&err)),
                };
            }
            Reply::Error(err) if err.code.is_some_and(|c| wire::MODERN_REFUSALS.contains(&c)) => {
                return Err(unsupported_by_error(&err));
            }
            Reply::Error(_) | Reply::TimedOut => {}
        }
        self.handshake(LEGACY[0])
    }

    fn settle(&mut self, versions: Vec<String>) -> Result<Revision, Failure> {
        match Revision::choose(&versions) {
            Some(Revision::Modern) => Ok(self.speak(Revision::Modern)),
            Some(Revision::Legacy(version)) => self.handshake(version),
            None => Err(unsupported_versions(&versions)),
        }
    }

    fn speak(&mut self, revision: Revision) -> Revision {
        self.revision = Some(revision);
        revision
    }

    /// `initialize` offering `version`, then `notifications/initialized`. A server that
    /// refuses the version but lists one the adapter speaks is asked once more with it.
    fn handshake(&mut self, mut version: &'static str) -> Result<Revision, Failure> {
        for attempt in 0..2 {
            let mut params = String::new();
            let mut w = ObjectWriter::new(&mut params);
            w.str("protocolVersion", version)
                .raw("capabilities", "{}")
                .raw("clientInfo", &client_info());
            w.finish();
            match self.exchange("initialize", &params, self.deadline)?.1 {
                Reply::TimedOut => return Err(self.timeout("initialize")),
                Reply::Result(result) => {
                    let answered = Fields::parse(&result)
                        .and_then(|f| f.get("protocolVersion").and_then(raw::string))
                        .map(|v| v.into_owned());
                    let Some(answered) = answered else {
                        return Err(protocol(
                            "the MCP server's initialize result has no protocolVersion string",
                            None,
                        ));
                    };
                    return match LEGACY.into_iter().find(|l| *l == answered) {
                        Some(agreed) => {
                            let done = wire::notification("notifications/initialized", None);
                            self.server.send(&done);
                            Ok(self.speak(Revision::Legacy(agreed)))
                        }
                        None => Err(unsupported_versions(&[answered])),
                    };
                }
                Reply::Error(err) => match err
                    .supported_versions()
                    .or_else(|| self.late_versions.take())
                    .and_then(|v| Revision::choose(&v))
                {
                    Some(Revision::Modern) => return Ok(self.speak(Revision::Modern)),
                    Some(Revision::Legacy(other)) if attempt == 0 && other != version => {
                        version = other;
                    }
                    _ => return Err(unsupported_by_error(&err)),
                },
            }
        }
        Err(unsupported_versions(&[version.to_string()]))
    }

    /// Call the tool `name` with `arguments` (a raw JSON object); the envelope's `output`
    /// (raw JSON) on success.
    pub(super) fn call_tool(&mut self, name: &str, arguments: &str) -> Result<String, Failure> {
        let mut state: Option<String> = None;
        for _ in 0..=limits::MAX_INPUT_ROUNDS {
            let traceparent = self.traceparent.as_deref();
            let params = self.params_meta(self.revision, traceparent, |w| {
                w.str("name", name).raw("arguments", arguments);
                if let Some(state) = &state {
                    w.raw("requestState", state);
                }
            });
            let (id, reply) = self.exchange("tools/call", &params, self.deadline)?;
            let result = match reply {
                Reply::TimedOut => {
                    self.cancel(id);
                    return Err(self.timeout("tools/call"));
                }
                Reply::Error(err) => return Err(self.call_error(name, err)),
                Reply::Result(result) => result,
            };
            match call_result(&result)? {
                CallResult::Output(output) => return Ok(output),
                CallResult::Again(next) => state = Some(next),
                CallResult::ToolError { message, details } => {
                    if let Some(names) = self.tool_is_absent(name)? {
                        return Err(unknown_tool(name, details, &names));
                    }
                    return Err(Failure::new(Code::ToolError, message).with_details(details));
                }
            }
        }
        Err(input_required(None))
    }

    /// A JSON-RPC error answering `tools/call`.
    fn call_error(&mut self, name: &str, err: RpcError) -> Failure {
        if err.code == Some(wire::UNSUPPORTED_PROTOCOL_VERSION) {
            return unsupported_by_error(&err);
        }
        if err.code == Some(wire::INVALID_PARAMS) {
            match self.tool_is_absent(name) {
                Ok(Some(names)) => return unknown_tool(name, error_details(&err), &names),
                Ok(None) => {}
                Err(failure) => return failure,
            }
        }
        Failure::new(
            Code::McpError,
            format!(
                "the MCP server answered tools/call with JSON-RPC error {}: {}",
                err.code_raw,
                bounded(&err.message)
            ),
        )
        .with_details(error_details(&err))
    }

    /// Whether a complete `tools/list` lacks `name`, with the names it lists (for "did you
    /// mean"). Anything short of a complete listing (an error, no `tools` array, too many
    /// pages, the deadline) leaves it unconfirmed: `None`.
    fn tool_is_absent(&mut self, name: &str) -> Result<Option<Vec<String>>, Failure> {
        let Some(tools) = self.list_tools()? else {
            return Ok(None);
        };
        let names: Vec<String> = tools
            .iter()
            .filter_map(|tool| Fields::parse(tool)?.get("name").and_then(raw::string))
            .map(|n| n.into_owned())
            .collect();
        Ok((!names.iter().any(|n| n == name)).then_some(names))
    }

    /// Every tool a complete `tools/list` names, each as the server wrote it (raw JSON), in
    /// its order; `None` when the listing is not complete (an error, no `tools` array, more
    /// than [`limits::MAX_LIST_PAGES`] pages).
    pub(super) fn list_tools(&mut self) -> Result<Option<Vec<String>>, Failure> {
        let mut cursor: Option<String> = None;
        let mut all = Vec::new();
        for _ in 0..limits::MAX_LIST_PAGES {
            let params = self.params(|w| {
                if let Some(cursor) = &cursor {
                    w.raw("cursor", cursor);
                }
            });
            let Reply::Result(result) = self.exchange("tools/list", &params, self.deadline)?.1
            else {
                return Ok(None);
            };
            let fields = Fields::parse(&result).unwrap_or_default();
            let is_array = fields.get("tools").is_some_and(|tools| {
                raw::for_each_item(tools, |_, tool| all.push(tool.to_string()))
            });
            if !is_array {
                return Ok(None);
            }
            match fields.get("nextCursor") {
                Some(next) if Kind::of(next) == Kind::String => cursor = Some(next.to_string()),
                _ => return Ok(Some(all)),
            }
        }
        Ok(None)
    }

    /// Tell the server to stop working on request `id` (sent before the shutdown).
    fn cancel(&mut self, id: u64) {
        let mut params = String::new();
        let mut w = ObjectWriter::new(&mut params);
        w.with("requestId", |o| o.push_str(&id.to_string()))
            .str("reason", "the parent-tool adapter's time budget ran out");
        w.finish();
        self.server.send(&wire::notification(
            "notifications/cancelled",
            Some(&params),
        ));
    }

    /// Params built by `build`, plus `_meta` when speaking the modern revision.
    fn params(&self, build: impl FnOnce(&mut ObjectWriter<'_>)) -> String {
        self.params_with(self.revision, build)
    }

    fn params_with(
        &self,
        revision: Option<Revision>,
        build: impl FnOnce(&mut ObjectWriter<'_>),
    ) -> String {
        self.params_meta(revision, None, build)
    }

    /// Params with `_meta`: the modern revision's members, and `traceparent` when given
    /// (W3C Trace Context in MCP's `_meta`, both revisions).
    fn params_meta(
        &self,
        revision: Option<Revision>,
        traceparent: Option<&str>,
        build: impl FnOnce(&mut ObjectWriter<'_>),
    ) -> String {
        let mut out = String::new();
        let mut w = ObjectWriter::new(&mut out);
        build(&mut w);
        let modern = revision == Some(Revision::Modern);
        if modern || traceparent.is_some() {
            w.with("_meta", |o| {
                let mut m = ObjectWriter::new(o);
                if modern {
                    m.str("io.modelcontextprotocol/protocolVersion", MODERN)
                        .raw("io.modelcontextprotocol/clientInfo", &client_info())
                        .raw("io.modelcontextprotocol/clientCapabilities", "{}");
                }
                if let Some(traceparent) = traceparent {
                    m.str("traceparent", traceparent);
                }
                m.finish();
            });
        }
        w.finish();
        out
    }

    /// Send a request and wait for its answer until `until`, answering the server's requests
    /// and skipping its notifications on the way. Returns the request's id and the reply.
    fn exchange(
        &mut self,
        method: &str,
        params: &str,
        until: Instant,
    ) -> Result<(u64, Reply), Failure> {
        let id = self.next_id;
        self.next_id += 1;
        self.server.send(&wire::request(id, method, params));
        loop {
            let line = match self.server.next(until, self.interrupts) {
                Event::Line(line) => line,
                Event::Oversized => {
                    return Err(protocol(
                        &format!(
                            "the MCP server wrote a message longer than the {} cap",
                            json::human_bytes(limits::MAX_MESSAGE_BYTES)
                        ),
                        None,
                    ))
                }
                Event::Ended(ending) => return Err(self.server_ended(ending, method)),
                Event::Deadline => {
                    self.abandoned.push(id);
                    return Ok((id, Reply::TimedOut));
                }
                Event::Interrupted(sig) => {
                    return Err(Failure::new(
                        Code::Interrupted,
                        format!(
                            "the adapter received signal {} while waiting for the MCP \
                             server's answer to {method}",
                            sig.raw()
                        ),
                    ))
                }
            };
            let excerpt = excerpt(&line);
            let incoming = wire::parse(line, limits::MAX_MESSAGE_BYTES).map_err(|m| {
                protocol(
                    &format!(
                        "the MCP server wrote something on stdout that is not a JSON-RPC \
                         message: {m}"
                    ),
                    Some(json!({ "excerpt": excerpt })),
                )
            })?;
            match incoming {
                Incoming::Response {
                    id: ResponseId::Number(n),
                    outcome,
                } if n == id => return Ok((id, reply(outcome))),
                Incoming::Response {
                    id: ResponseId::Null,
                    outcome: Outcome::Error(err),
                } => return Ok((id, Reply::Error(err))),
                Incoming::Response {
                    id: ResponseId::Number(n),
                    outcome,
                } if self.abandoned.contains(&n) => {
                    // The probe answered after the wait: keep what it says about versions, in
                    // case the handshake is refused by a modern server that was slow to start.
                    self.late_versions = match outcome {
                        Outcome::Result(result) => Fields::parse(&result)
                            .and_then(|f| f.get("supportedVersions").and_then(wire::string_items)),
                        Outcome::Error(err) => err.supported_versions(),
                    };
                }
                Incoming::Response { .. } => {
                    return Err(protocol(
                        "the MCP server answered a request the adapter never sent (an unknown \
                         or repeated id)",
                        Some(json!({ "excerpt": excerpt })),
                    ))
                }
                Incoming::Request { id: theirs, method } => self.answer(&theirs, &method)?,
                Incoming::Notification { .. } => {}
            }
        }
    }

    /// Answer a server-initiated request: `ping` with an empty result, everything else
    /// (sampling, roots, elicitation, …) with "method not found".
    fn answer(&mut self, id: &str, method: &str) -> Result<(), Failure> {
        self.answered += 1;
        if self.answered > limits::MAX_SERVER_REQUESTS {
            return Err(protocol(
                &format!(
                    "the MCP server sent more than {} requests of its own during one call",
                    limits::MAX_SERVER_REQUESTS
                ),
                None,
            ));
        }
        let text = if method == "ping" {
            wire::result_response(id, "{}")
        } else {
            wire::error_response(id, wire::METHOD_NOT_FOUND, "Method not found")
        };
        self.server.send(&text);
        Ok(())
    }

    fn server_ended(&self, ending: Ending, method: &str) -> Failure {
        let tail = self.server.stderr_tail();
        let mut details = Map::new();
        let how = match ending {
            Ending::Exited(Termination::Exited(code)) => {
                details.insert("exit_code".into(), code.into());
                format!("the MCP server exited with status {code}")
            }
            Ending::Exited(Termination::Signaled(sig)) => {
                details.insert("signal".into(), sig.raw().into());
                format!("the MCP server was killed by signal {}", sig.raw())
            }
            Ending::Exited(_) => "the MCP server ended".to_string(),
            Ending::StdoutClosed => "the MCP server closed its stdout".to_string(),
        };
        let mut message = format!("{how} before it answered {method}");
        if let Some(last) = tail.lines().rev().find(|l| !l.trim().is_empty()) {
            message.push_str(&format!(
                "; its stderr ends with: {}",
                bounded_to(last, 200)
            ));
        }
        details.insert("stderr_tail".into(), tail.into());
        Failure::new(Code::McpServerExited, message).with_details(Value::Object(details))
    }

    fn timeout(&self, method: &str) -> Failure {
        Failure::new(
            Code::McpTimeout,
            format!(
                "the MCP server did not answer {method} within the adapter's time budget \
                 ({} ms, which ends before the dispatcher's deadline)",
                self.budget.as_millis()
            ),
        )
        .with_details(json!({ "method": method, "budget_ms": self.budget.as_millis() as u64 }))
    }
}

/// What a `tools/call` result says, before anything more is asked of the server.
#[derive(Debug, Clone, PartialEq)]
pub enum CallResult {
    /// The envelope's `output` (raw JSON: `content`, and `structured_content` when present).
    Output(String),
    /// `input_required` with only a `requestState` (raw JSON string) to send back.
    Again(String),
    /// `isError: true`: the tool's message and the envelope's `details`; `unknown_tool`
    /// instead when `tools/list` confirms the tool is absent.
    ToolError { message: String, details: Value },
}

/// Interpret a `tools/call` result (a raw JSON object, as [`wire::parse`] keeps it) — the
/// `resultType` of the stateless revision and the `CallToolResult` of both. Pure: no I/O, so
/// the fuzz target drives it with any answer a server could write.
pub fn call_result(result: &str) -> Result<CallResult, Failure> {
    let fields = Fields::parse(result).unwrap_or_default();
    match fields.get("resultType").map(|t| (raw::string(t), t)) {
        None => {}
        Some((Some(t), _)) if t == "complete" => {}
        Some((Some(t), _)) if t == "input_required" => {
            if let Some(requests) = fields.get("inputRequests") {
                return Err(input_required(Some(requests)));
            }
            return match fields.get("requestState") {
                Some(s) if Kind::of(s) == Kind::String => Ok(CallResult::Again(s.to_string())),
                _ => Err(input_required(None)),
            };
        }
        Some((_, raw_type)) => {
            return Err(protocol(
                "the MCP server's tools/call result has a resultType this adapter does not \
                 know",
                Some(json!({ "result_type": value_of(raw_type) })),
            ))
        }
    }
    let content = fields
        .get("content")
        .filter(|c| Kind::of(c) == Kind::Array)
        .ok_or_else(|| {
            protocol(
                "the MCP server's tools/call result has no content array",
                None,
            )
        })?;
    let is_error = match fields.get("isError").map(raw::boolean) {
        None => false,
        Some(Some(b)) => b,
        Some(None) => {
            return Err(protocol(
                "the MCP server's tools/call result has an isError that is not a boolean",
                None,
            ))
        }
    };
    let structured = fields
        .get("structuredContent")
        .filter(|s| Kind::of(s) != Kind::Null);
    if !is_error {
        let mut out = String::with_capacity(content.len() + structured.map_or(0, str::len) + 48);
        let mut w = ObjectWriter::new(&mut out);
        w.raw("content", content);
        if let Some(structured) = structured {
            w.raw("structured_content", structured);
        }
        w.finish();
        return Ok(CallResult::Output(out));
    }
    let mut details = Map::new();
    details.insert("content".into(), value_of(content));
    if let Some(structured) = structured {
        details.insert("structured_content".into(), value_of(structured));
    }
    let text = first_text(content);
    let message = match text.as_deref() {
        Some(text) if !text.trim().is_empty() => bounded(text),
        _ => "the MCP tool reported an error without a text message".to_string(),
    };
    Ok(CallResult::ToolError {
        message,
        details: Value::Object(details),
    })
}

fn reply(outcome: Outcome) -> Reply {
    match outcome {
        Outcome::Result(result) => Reply::Result(result),
        Outcome::Error(err) => Reply::Error(err),
    }
}

/// `{"name":"parent-tool-dispatch","version":…}`.
fn client_info() -> String {
    let mut out = String::new();
    let mut w = ObjectWriter::new(&mut out);
    w.str("name", "parent-tool-dispatch")
        .str("version", env!("CARGO_PKG_VERSION"));
    w.finish();
    out
}

/// A raw JSON value as a tree for `error.details`; a number a tree cannot hold (`1e400`)
/// keeps the value as its text instead.
fn value_of(raw_value: &str) -> Value {
    json::parse_value(raw_value.as_bytes(), usize::MAX)
        .unwrap_or_else(|_| Value::String(raw_value.to_string()))
}

/// `{code, message, data?}` of a JSON-RPC error.
fn error_details(err: &RpcError) -> Value {
    let mut details = Map::new();
    details.insert("code".into(), value_of(&err.code_raw));
    details.insert("message".into(), err.message.clone().into());
    if let Some(data) = &err.data {
        details.insert("data".into(), value_of(data));
    }
    Value::Object(details)
}

/// The `text` of the first `{"type":"text"}` item of a content array.
fn first_text(content: &str) -> Option<String> {
    let mut found = None;
    raw::for_each_item(content, |_, item| {
        if found.is_some() {
            return;
        }
        if let Some(fields) = Fields::parse(item) {
            if fields.get("type").and_then(raw::string).as_deref() == Some("text") {
                found = fields
                    .get("text")
                    .and_then(raw::string)
                    .map(|t| t.into_owned());
            }
        }
    });
    found
}

/// Server text for a message: escaped for terminals, cut to [`limits::MAX_ERROR_TEXT_BYTES`].
fn bounded(text: &str) -> String {
    bounded_to(text, limits::MAX_ERROR_TEXT_BYTES)
}

fn bounded_to(text: &str, max: usize) -> String {
    let escaped = ptd_wire::terminal::escape(text);
    let cut = cut_at_char_boundary(&escaped, max);
    if cut.len() < escaped.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    }
}

/// The start of an offending line, for `details.excerpt`.
fn excerpt(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(&line[..line.len().min(limits::EXCERPT_BYTES)]);
    cut_at_char_boundary(&text, limits::EXCERPT_BYTES).to_string()
}

fn protocol(message: &str, details: Option<Value>) -> Failure {
    let failure = Failure::new(Code::McpProtocolError, message);
    match details {
        Some(details) => failure.with_details(details),
        None => failure,
    }
}

fn unsupported_versions(offered: &[String]) -> Failure {
    Failure::new(
        Code::McpProtocolUnsupported,
        format!(
            "the MCP server speaks none of the protocol revisions this adapter supports ({})",
            all_revisions()
        ),
    )
    .with_details(json!({ "server_versions": offered }))
}

fn unsupported_by_error(err: &RpcError) -> Failure {
    Failure::new(
        Code::McpProtocolUnsupported,
        format!(
            "the MCP server refused every protocol revision this adapter supports ({}): {}",
            all_revisions(),
            bounded(&err.message)
        ),
    )
    .with_details(json!({ "error": error_details(err) }))
}

/// How many of the server's tool names `unknown_tool` lists in `details.tools`.
const LISTED_NAMES: usize = 100;

/// `unknown_tool`, with the server's closest name ("did you mean") in the message and
/// `details.did_you_mean`, and its names (at most [`LISTED_NAMES`], each cut to 200 bytes) in
/// `details.tools`.
fn unknown_tool(name: &str, details: Value, names: &[String]) -> Failure {
    let near = ptd_wire::validate::did_you_mean(name, names.iter().map(String::as_str));
    let mut message = format!(
        "the MCP server has no tool named {}",
        bounded_to(&format!("{name:?}"), 200)
    );
    if let Some(near) = near {
        message.push_str(&format!(
            " (did you mean {}?)",
            bounded_to(&format!("{near:?}"), 200)
        ));
    }
    let mut details = match details {
        Value::Object(map) => map,
        Value::Null => serde_json::Map::new(),
        other => {
            let mut map = serde_json::Map::new();
            map.insert("server".into(), other);
            map
        }
    };
    let cut = |n: &str| ptd_wire::terminal::cut_at_char_boundary(n, 200).to_string();
    details.insert(
        "tools".into(),
        names.iter().take(LISTED_NAMES).map(|n| cut(n)).collect(),
    );
    if let Some(near) = near {
        details.insert("did_you_mean".into(), cut(near).into());
    }
    Failure::new(Code::UnknownTool, message).with_details(Value::Object(details))
}

fn input_required(requests: Option<&str>) -> Failure {
    let mut methods = Vec::new();
    if let Some(fields) = requests.and_then(Fields::parse) {
        for (_, request) in fields.iter() {
            if let Some(method) =
                Fields::parse(request).and_then(|r| r.get("method").and_then(raw::string))
            {
                methods.push(method.into_owned());
            }
        }
    }
    Failure::new(
        Code::McpInputRequired,
        "the MCP tool asked for more input (sampling, elicitation or roots), which this adapter \
         never gives: it declares no client capability",
    )
    .with_details(json!({ "requested": methods }))
}

/// A version-00 W3C `traceparent`: `00-` 32 and 16 lower-case hex digits, two flag digits.
/// Anything else in the environment is not passed on.
fn well_formed_traceparent(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    parts.len() == 4
        && parts[0] == "00"
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
        && parts[1].bytes().any(|b| b != b'0')
        && parts[2].bytes().any(|b| b != b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modern_revision_wins_then_the_newest_handshake() {
        let v = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            Revision::choose(&v(&["2024-11-05", MODERN])),
            Some(Revision::Modern)
        );
        assert_eq!(
            Revision::choose(&v(&["2024-11-05", "2025-06-18", "2030-01-01"])),
            Some(Revision::Legacy("2025-06-18"))
        );
        assert_eq!(Revision::choose(&v(&["2027-01-01", "1.0"])), None);
        assert_eq!(Revision::choose(&[]), None);
    }

    #[test]
    fn the_first_text_item_is_the_message() {
        let content = r#"[{"type":"image","data":"x"},{"type":"text","text":"bad \"path\""},{"type":"text","text":"2"}]"#;
        assert_eq!(first_text(content).as_deref(), Some("bad \"path\""));
        assert_eq!(first_text("[]"), None);
    }

    #[test]
    fn server_text_is_escaped_and_bounded() {
        assert_eq!(bounded("a\x1b[2Jb\nc"), "a\\x1b[2Jb\\nc");
        let long = "é".repeat(limits::MAX_ERROR_TEXT_BYTES);
        let cut = bounded(&long);
        assert!(cut.len() <= limits::MAX_ERROR_TEXT_BYTES + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn details_keep_values_a_tree_cannot_hold_as_text() {
        assert_eq!(value_of(r#"{"a":[1,"x"]}"#), json!({"a": [1, "x"]}));
        assert_eq!(value_of("1e400"), json!("1e400"));
    }

    #[test]
    fn a_call_result_is_interpreted_without_asking_the_server() {
        assert_eq!(
            call_result(
                r#"{"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1e400}}"#
            ),
            Ok(CallResult::Output(
                r#"{"content":[{"type":"text","text":"hi"}],"structured_content":{"n":1e400}}"#
                    .into()
            ))
        );
        assert_eq!(
            call_result(r#"{"resultType":"input_required","requestState":"s1"}"#),
            Ok(CallResult::Again(r#""s1""#.into()))
        );
        let long = "x".repeat(5000);
        let text =
            format!(r#"{{"content":[{{"type":"text","text":"\u001b[2J{long}"}}],"isError":true}}"#);
        match call_result(&text) {
            Ok(CallResult::ToolError { message, details }) => {
                assert!(message.starts_with("\\x1b[2J"), "{message}");
                assert!(message.ends_with('…'));
                assert!(message.len() <= limits::MAX_ERROR_TEXT_BYTES + 3);
                assert!(details["content"].is_array());
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            r#"{"resultType":7}"#,
            r#"{"content":{}}"#,
            r#"{"content":[],"isError":"yes"}"#,
        ] {
            assert_eq!(
                call_result(bad).map_err(|f| f.code),
                Err(Code::McpProtocolError),
                "{bad}"
            );
        }
    }
}
