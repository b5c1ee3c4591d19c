//! The MCP adapter: `parent-tool-dispatch adapter mcp [--tool-map …] -- SERVER_ARGV…`.
//!
//! A host adapter like the workspace adapter — one `wp-codebox/parent-tool-request/v1` on
//! stdin, exactly one `wp-codebox/parent-tool-result/v1` (compact JSON and `\n`) on stdout,
//! exit 0 whenever it printed one — that reaches a tool on an MCP server: it starts the server
//! over the MCP stdio transport, speaks whichever protocol revision the server does
//! (`client.rs`), calls the one tool (its id mapped by the `--tool-map` rules, `input` as its
//! `arguments`), turns the answer into the envelope and shuts the server down.
//!
//! Owns: the request side (reading, checking, mapping), the time budget, the server's
//! environment, the table of error codes ([`Code`]) and the envelope. The process and its
//! pipes live in `server.rs`, the JSON-RPC grammar in `wire.rs`, the session in `client.rs`;
//! the scripted server of the test suite is `ptd-test mcp-server` (`crates/testkit/src/bin/ptd-test/`).
//!
//! Invariants:
//! - the server is shut down on every path (the MCP stdio order: stdin closed, a wait,
//!   SIGTERM, a wait, SIGKILL, then every leftover killed and reaped) before the envelope is
//!   printed; an unwinding panic kills and sweeps it too, and is answered `internal_error`;
//! - the adapter answers before the dispatcher's deadline (`WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS`
//!   minus a margin that covers the shutdown, see [`Budget`]);
//! - the server's environment is rebuilt from the adapter's own, less the parent-tool
//!   metadata variables (see [`server_env`]); its working directory is the adapter's;
//! - everything the server says is bounded ([`limits`]) and read strictly; `output` and the
//!   tool's content are copied as the server wrote them (numbers exact);
//! - no message carries a host path of the adapter's own making; server text in messages is
//!   escaped for terminals and cut (the dispatcher redacts the rest).

mod client;
mod server;
/// The JSON-RPC grammar (public for the `mcp` fuzz target in `ptd_testkit::fuzzing`).
#[doc(hidden)]
pub mod wire;

/// For the `mcp` fuzz target (`ptd_testkit::fuzzing`).
#[doc(hidden)]
pub use client::{call_result, CallResult};
pub use client::{Revision, LEGACY, MODERN};

use ptd_sys::exec::SpawnError;
use ptd_sys::interrupt::Interrupts;
use ptd_wire::envelope::request::{Echo, Request};
use ptd_wire::error::{wire_table, Status};
use ptd_wire::json::raw;
use ptd_wire::json::Kind;
use ptd_wire::toolmap::ToolMap;
use serde_json::json;
use server::{Server, Step};
use std::time::{Duration, Instant};

/// Every bound the adapter keeps. Each is part of the documented behaviour.
pub mod limits {
    use std::time::Duration;

    /// Bytes read from stdin; a larger request is `request_too_large`.
    pub(crate) const MAX_REQUEST_BYTES: usize = 64 << 20;
    /// The longest line (one JSON-RPC message) read from the server; a longer one is
    /// `mcp_protocol_error`, noticed as soon as the cap is passed.
    pub(crate) const MAX_MESSAGE_BYTES: usize = 8 << 20;
    /// The server's stderr passed on to the adapter's stderr, and the end of it kept for
    /// `mcp_server_exited`.
    pub use super::server::{MAX_STDERR_FORWARD_BYTES, STDERR_TAIL_BYTES};
    /// The budget when `WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS` is unset (the bridge's default).
    pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(30_000);
    /// Larger timeouts are taken as this (a deadline must stay representable).
    pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 3600);
    /// How long the `server/discover` probe waits before taking the server for a legacy one
    /// (at most a third of the budget).
    pub(crate) const PROBE_WAIT: Duration = Duration::from_millis(2_000);
    /// Requests from the server answered during one call; more is `mcp_protocol_error`.
    pub(crate) const MAX_SERVER_REQUESTS: usize = 256;
    /// Retries of an `input_required` answer that asks only for its `requestState` back.
    pub(crate) const MAX_INPUT_ROUNDS: usize = 3;
    /// Pages of `tools/list` read to confirm that a tool does not exist.
    pub(crate) const MAX_LIST_PAGES: usize = 16;
    /// Server text in `error.message` (the tool's error text, a JSON-RPC message), in bytes.
    pub const MAX_ERROR_TEXT_BYTES: usize = 1024;
    /// The start of an offending line shown in `error.details.excerpt`.
    pub(crate) const EXCERPT_BYTES: usize = 200;
}

wire_table! {
    /// The adapter's error codes, in table order: each with the status of an envelope carrying
    /// it and whether the same call may succeed when retried unchanged.
    pub enum Code(status: Status) {
        /// The request is not a well-formed request envelope.
        RequestInvalid = ("request_invalid", Failed, false),
        /// The request is larger than [`limits::MAX_REQUEST_BYTES`].
        RequestTooLarge = ("request_too_large", Failed, false),
        /// `operation` is not `call`.
        UnknownOperation = ("unknown_operation", Failed, false),
        /// `input` is not a JSON object (MCP `arguments` must be one).
        InputInvalid = ("input_invalid", Failed, false),
        /// `--tool-map` cannot be read or parsed.
        ToolMapInvalid = ("tool_map_invalid", Unavailable, false),
        /// The server's program does not exist (or is not on `PATH`).
        McpServerNotFound = ("mcp_server_not_found", Unavailable, false),
        /// It exists but cannot be executed.
        McpServerNotExecutable = ("mcp_server_not_executable", Unavailable, false),
        /// The kernel refused to start it for another reason (resources).
        McpServerStartFailed = ("mcp_server_start_failed", Unavailable, true),
        /// The server speaks none of the supported protocol revisions.
        McpProtocolUnsupported = ("mcp_protocol_unsupported", Unavailable, false),
        /// The server wrote something that is not JSON-RPC, too long a line, an unknown id, or a
        /// malformed result.
        McpProtocolError = ("mcp_protocol_error", Failed, false),
        /// The server exited, or closed its stdout, before it answered.
        McpServerExited = ("mcp_server_exited", Unavailable, true),
        /// The server did not answer within the adapter's budget.
        McpTimeout = ("mcp_timeout", Timeout, true),
        /// The server answered `tools/call` with a JSON-RPC error.
        McpError = ("mcp_error", Failed, false),
        /// The server does not have the tool.
        UnknownTool = ("unknown_tool", Failed, false),
        /// The tool ran and reported an error (`isError: true`).
        ToolError = ("tool_error", Failed, false),
        /// The tool asked for client input (sampling, elicitation, roots) the adapter never gives.
        McpInputRequired = ("mcp_input_required", Failed, false),
        /// The server's confinement (`--fs-read`, `--limit-memory`, …, SPEC §13) cannot be
        /// put in place: the server was not started; `details.missing` names what is missing.
        ConfinementUnavailable = ("confinement_unavailable", Unavailable, false),
        /// The server ended without answering and a limit's own counter shows the limit was
        /// reached; `details.limit` names it.
        ResourceLimitExceeded = ("resource_limit_exceeded", Failed, false),
        /// The adapter received SIGINT, SIGTERM or SIGHUP.
        Interrupted = ("interrupted", Failed, true),
        /// A bug: the adapter panicked.
        InternalError = ("internal_error", Failed, false),
    }
}

/// The `after_help` of `adapter mcp`: its codes, from [`Code::ALL`].
pub fn after_help() -> String {
    super::codes_help(
        "Protocol revisions: 2026-07-28 (stateless, probed with server/discover), then the \
         initialize handshake of 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05.\n\n\
         Exit status: 0 whenever an envelope was printed (whatever its status), 1 when stdin \
         could not be read, 74 when stdout could not be written, 2 usage error.",
        Code::ALL
            .into_iter()
            .map(|c| (c.as_str(), c.status().as_str(), c.retryable())),
    )
}

/// A failed call: a code, one human sentence, optional details.
pub type Failure = super::Failure<Code>;
super::wire_code!(Code);

/// The adapter's time: when it must stop waiting for the server, and the shutdown ladder's
/// waits, all inside the dispatcher's deadline.
///
/// The reserve kept back from the timeout `T` is `T/5`, at least 400 ms and at most 3 s (but
/// never more than `T/2`). Of it, 250 ms cover the SIGKILL wait, the sweep and printing; the
/// rest is split evenly between the wait after closing the server's stdin and the SIGTERM
/// grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// How long after the start the adapter waits for the server at most.
    pub exchange: Duration,
    /// The wait for the server to exit once its stdin is closed.
    pub close_wait: Duration,
    /// The wait after SIGTERM, before SIGKILL.
    pub term_grace: Duration,
}

impl Budget {
    /// What is kept for the shutdown's fixed steps (SIGKILL wait, sweep) and printing: the
    /// dispatcher's own bound after its ladder.
    const FIXED: Duration = ptd_sys::exec::AFTER_LADDER;

    /// The budget for the dispatcher's timeout, as given in `WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS`
    /// (`None`, or not a positive integer: [`limits::DEFAULT_TIMEOUT`]; at most
    /// [`limits::MAX_TIMEOUT`]).
    pub(crate) fn from_timeout_ms(value: Option<&str>) -> Budget {
        let total = value
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&ms| ms > 0)
            .map_or(limits::DEFAULT_TIMEOUT, Duration::from_millis)
            .min(limits::MAX_TIMEOUT);
        let reserve = (total / 5)
            .clamp(Duration::from_millis(400), Duration::from_secs(3))
            .min(total / 2);
        let ladder = reserve.saturating_sub(Budget::FIXED);
        Budget {
            exchange: total - reserve,
            close_wait: ladder / 2,
            term_grace: ladder / 2,
        }
    }
}

/// [`server_env`] of this process's own environment (variables that are not UTF-8 are left
/// out).
fn server_env_of_process() -> Vec<(String, String)> {
    server_env(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    )
}

/// The server's environment: every variable of the adapter's own (under the dispatcher, that
/// is the base variables, the bridge's `command.env` and the `--pass-env` / `--secret-env`
/// ones) except the `WP_CODEBOX_PARENT_TOOL_*` metadata of the bridge protocol, which is not
/// the server's business. Variables that are not valid Unicode are left out.
pub(crate) fn server_env(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    vars.into_iter()
        .filter(|(name, _)| !name.starts_with("WP_CODEBOX_PARENT_TOOL_"))
        .collect()
}

/// What `adapter mcp` was given on its command line.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--tool-map`, unparsed.
    pub tool_map: Option<String>,
    /// The server's confinement (SPEC §13), checked.
    pub confine: ptd_sys::confine::Options,
    /// The server's argv (never empty).
    pub server: Vec<String>,
}

/// Everything one run needs besides the request.
pub struct Context<'a> {
    pub options: &'a Options,
    pub budget: Budget,
    /// When the adapter started: the budget counts from here.
    pub start: Instant,
    pub env: Vec<(String, String)>,
    pub interrupts: &'a Interrupts,
}

/// The whole answer to one request (`bytes` as read from stdin) as a result envelope.
pub fn respond(bytes: Vec<u8>, cx: &Context<'_>) -> String {
    let mut echo = Echo::default();
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve(bytes, cx, &mut echo)))
            .unwrap_or_else(|_| {
                Err(Failure::new(
                    Code::InternalError,
                    "the MCP adapter hit an internal error (a bug); the server was stopped",
                ))
            });
    envelope(echo, outcome)
}

/// The envelope (rendered) of a call's outcome: `output` as `succeeded`, a failure by its
/// code's status.
pub fn envelope(echo: Echo, outcome: Result<String, Failure>) -> String {
    super::render(echo, outcome)
}

fn serve(bytes: Vec<u8>, cx: &Context<'_>, echo: &mut Echo) -> Result<String, Failure> {
    let request = parse_request(bytes, echo)?;
    let tool_map = tool_map(cx.options)?;
    let (name, input) = call_target(&request, &tool_map)?;
    let arguments = raw::minify(input);
    if let Some(sig) = cx.interrupts.received() {
        return Err(Failure::new(
            Code::Interrupted,
            format!(
                "the adapter received signal {} before it started the MCP server",
                sig.raw()
            ),
        ));
    }
    call_server(cx, &name, &arguments)
}

/// The request envelope in `bytes`; `echo` gets what can be echoed of it even when it is
/// invalid.
fn parse_request(bytes: Vec<u8>, echo: &mut Echo) -> Result<Request, Failure> {
    super::read_request(bytes, limits::MAX_REQUEST_BYTES, echo).map_err(|unread| match unread {
        super::Unread::TooLarge(message) => Failure::new(Code::RequestTooLarge, message),
        super::Unread::Invalid(message, details) => {
            Failure::new(Code::RequestInvalid, message).with_details(details)
        }
    })
}

/// The adapter's `--tool-map`, or the identity map without one.
fn tool_map(options: &Options) -> Result<ToolMap, Failure> {
    match &options.tool_map {
        None => Ok(ToolMap::Identity),
        Some(arg) => ToolMap::parse(arg).map_err(|e| {
            Failure::new(
                Code::ToolMapInvalid,
                format!(
                    "the adapter's --tool-map is not usable: {}",
                    ptd_wire::terminal::escape(&e.to_string())
                ),
            )
        }),
    }
}

/// The MCP tool name and the arguments (the request's `input` object) of a `call` request.
fn call_target<'r>(request: &'r Request, tool_map: &ToolMap) -> Result<(String, &'r str), Failure> {
    if request.echo.operation != "call" {
        return Err(Failure::new(
            Code::UnknownOperation,
            format!(
                "unknown operation {}; an MCP tool is only ever called: use \"call\"",
                quoted(&request.echo.operation)
            ),
        ));
    }
    let input = request.document().get("input").unwrap_or("null");
    if Kind::of(input) != Kind::Object {
        return Err(Failure::new(
            Code::InputInvalid,
            format!(
                "input must be a JSON object (it becomes the MCP call's arguments), not {}",
                Kind::of(input).name()
            ),
        ));
    }
    let name = tool_map.external(&request.echo.tool);
    if name.is_empty() {
        return Err(Failure::new(
            Code::UnknownTool,
            format!(
                "the tool id {} maps to an empty MCP tool name",
                quoted(&request.echo.tool)
            ),
        ));
    }
    Ok((name, input))
}

/// Start the MCP server under the confinement asked for (SPEC §13): the prepared confinement
/// comes back with it, to keep until the server is reaped and to read its counters.
fn start_server(
    cx: &Context<'_>,
) -> Result<(Server, Option<std::sync::Arc<ptd_sys::confine::Prepared>>), Failure> {
    let mut env = cx.env.clone();
    let program = ptd_sys::exec::resolve_program(&cx.options.server[0]);
    let confinement =
        ptd_sys::exec::prepare_confinement(&cx.options.confine, &program, &mut env, None, None)
            .map_err(|refused| match refused {
                ptd_sys::exec::Unconfinable::Spawn(err) => spawn_failure(err),
                ptd_sys::exec::Unconfinable::Unavailable(unavailable) => {
                    confinement_unavailable(unavailable.missing)
                }
            })?;
    let server = Server::spawn(
        &cx.options.server,
        &env,
        limits::MAX_MESSAGE_BYTES,
        confinement.as_ref(),
    )
    .map_err(spawn_failure)?;
    Ok((server, confinement))
}

/// Start the MCP server, make the call and shut the server down, whatever the call's outcome.
fn call_server(cx: &Context<'_>, name: &str, arguments: &str) -> Result<String, Failure> {
    let (mut server, confinement) = start_server(cx)?;
    let deadline = cx.start + cx.budget.exchange;
    let outcome = {
        let mut client =
            client::Client::new(&mut server, cx.interrupts, deadline, cx.budget.exchange);
        client
            .connect()
            .and_then(|_| client.call_tool(name, arguments))
    };
    let termination = shut_down(server, cx);
    match (outcome, confinement) {
        (Err(failure), Some(prepared)) if server_failed(failure.code) => {
            let signal = match termination {
                ptd_sys::exec::Termination::Signaled(signal) => Some(signal.raw()),
                _ => None,
            };
            Err(match prepared.limit_hit(signal) {
                Some(limit) => Failure::new(
                    Code::ResourceLimitExceeded,
                    format!(
                        "the MCP server reached its {} limit ({}) and ended without an answer",
                        limit.as_str(),
                        limit.flag()
                    ),
                )
                .with_details(json!({ "limit": limit.as_str() })),
                None => {
                    confined_hint(&cx.options.confine);
                    failure
                }
            })
        }
        (outcome, _) => outcome,
    }
}

/// Say on stderr what a confined server that ended or hung without answering had: the
/// usual cause is a server that needs more than it got (`npx` fetching its package under
/// `--network none`).
fn confined_hint(options: &ptd_sys::confine::Options) {
    let network = match options.network {
        ptd_sys::confine::Network::Any => "the host's network",
        ptd_sys::confine::Network::None => "no network",
        ptd_sys::confine::Network::Allow => "the network only through the egress proxy",
    };
    stderr_line!(
        "adapter mcp: the MCP server ran confined ({network}; files: the base and its grants) \
         and did not answer: a server that needs more fails or hangs there — `npx` fetches its \
         package from the network: install the server first and run it directly \
         (docs/mcp.md); see its stderr with the dispatcher's -v"
    );
}

/// Failures that a server killed by a limit (or starved by one) leaves behind.
fn server_failed(code: Code) -> bool {
    matches!(
        code,
        Code::McpServerExited | Code::McpProtocolError | Code::McpTimeout
    )
}

/// SPEC §13 "Fail closed": the server was not started. Names only in the envelope; what each
/// is (it may name host paths) on stderr.
fn confinement_unavailable(missing: Vec<(String, String)>) -> Failure {
    for (_, message) in &missing {
        stderr_line!("adapter mcp: the MCP server cannot be confined: {message}");
    }
    let names: Vec<&str> = missing.iter().map(|(name, _)| name.as_str()).collect();
    Failure::new(
        Code::ConfinementUnavailable,
        format!(
            "the MCP server's confinement cannot be put in place on this host (missing: {}); \
             it was not started",
            names.join(", ")
        ),
    )
    .with_details(json!({ "missing": names }))
}

/// Close the server's stdin and escalate as needed, saying on stderr what it took; returns
/// how the server ended.
fn shut_down(server: Server, cx: &Context<'_>) -> ptd_sys::exec::Termination {
    // A signal cuts the ladder short: the dispatcher's own grace is running.
    let (close_wait, term_grace) = match cx.interrupts.received() {
        Some(_) => (
            cx.budget.close_wait.min(Duration::from_millis(100)),
            cx.budget.term_grace.min(Duration::from_millis(200)),
        ),
        None => (cx.budget.close_wait, cx.budget.term_grace),
    };
    let shutdown = server.shutdown(close_wait, term_grace);
    let note = match shutdown.step {
        Step::StdinClosed => None,
        Step::Terminated => Some("did not exit when its stdin closed; it was sent SIGTERM"),
        Step::Killed => Some("did not exit when its stdin closed nor on SIGTERM; it was killed"),
    };
    if let Some(note) = note {
        stderr_line!("adapter mcp: the MCP server {note}");
    }
    if shutdown.leaked_processes > 0 {
        stderr_line!(
            "adapter mcp: killed {} process(es) the MCP server left running",
            shutdown.leaked_processes
        );
    }
    shutdown.termination
}

fn spawn_failure(err: SpawnError) -> Failure {
    let why = |plain: &str, why: Option<ptd_sys::exec::Why>| match why {
        None => plain.to_string(),
        Some(why) => format!(
            "the MCP server program could not be started: {}",
            why.describe(true)
        ),
    };
    match err {
        SpawnError::NotFound(reason) => Failure::new(
            Code::McpServerNotFound,
            why("the MCP server program was not found", reason),
        ),
        SpawnError::NotExecutable(reason) => Failure::new(
            Code::McpServerNotExecutable,
            why("the MCP server program is not executable", reason),
        ),
        SpawnError::Other(kind) => Failure::new(
            Code::McpServerStartFailed,
            format!("the MCP server could not be started: {kind}"),
        ),
        SpawnError::Confinement(refused) => confinement_unavailable(vec![(
            refused.step.missing().to_string(),
            refused.to_string(),
        )]),
    }
}

/// A name from the request for a message: quoted, escaped, cut.
fn quoted(s: &str) -> String {
    let shown = crate::adapter::workspace::cut_at_char_boundary(s, 128);
    ptd_wire::terminal::escape(&format!("{shown:?}")).into_owned()
}

/// `adapter mcp --list-tools -- SERVER…`: start the server, list its tools, shut it down and
/// print {"tools": [{name, description, inputSchema}, …]} (pretty, members as the server wrote
/// them); exit 0, or 69 with `error[CODE]: …` on stderr when the listing failed, 74 when
/// stdout could not be written.
pub fn list_tools(options: Options) -> u8 {
    let start = Instant::now();
    let interrupts = Interrupts::install();
    let budget = Budget::from_timeout_ms(
        std::env::var(ptd_wire::envelope::vars::TIMEOUT_MS)
            .ok()
            .as_deref(),
    );
    let env = server_env_of_process();
    let cx = Context {
        options: &options,
        budget,
        start,
        env,
        interrupts: &interrupts,
    };
    let listed = start_server(&cx).and_then(|(mut server, _confinement)| {
        let deadline = cx.start + cx.budget.exchange;
        let outcome = {
            let mut client =
                client::Client::new(&mut server, cx.interrupts, deadline, cx.budget.exchange);
            client.connect().and_then(|_| client.list_tools())
        };
        shut_down(server, &cx);
        outcome
    });
    let tools = match listed {
        Ok(Some(tools)) => tools,
        Ok(None) => {
            let failure = Failure::new(
                Code::McpProtocolError,
                "the MCP server's tools/list was not a complete listing (an error, no tools \
                 array, or more pages than the adapter reads)",
            );
            return listing_failed(&failure);
        }
        Err(failure) => return listing_failed(&failure),
    };
    let mut text = String::new();
    let mut top = raw::ObjectWriter::new(&mut text);
    top.with("tools", |out| {
        out.push('[');
        for (i, tool) in tools.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let fields = raw::Fields::parse(tool).unwrap_or_default();
            let mut entry = raw::ObjectWriter::new(out);
            for key in [
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
            ] {
                if let Some(value) = fields.get(key) {
                    entry.raw(key, value);
                }
            }
            entry.finish();
        }
        out.push(']');
    });
    top.finish();
    let mut text = raw::pretty(&text);
    text.push('\n');
    ptd_wire::stdout::print(text.as_bytes(), "the tool list", 0)
}

/// The `error[CODE]:` line of a failed `--list-tools` (escaped), and exit 69.
fn listing_failed(failure: &Failure) -> u8 {
    stderr_line!(
        "{}",
        ptd_wire::terminal::error_line(failure.code.as_str(), &failure.message)
    );
    ptd_wire::error::exit::UNAVAILABLE
}

/// Serve one request from stdin with the server `options.server`, print one result envelope
/// on stdout; returns the exit status: 0 when the envelope was printed (any status), 1 when
/// stdin could not be read, 74 when stdout could not be written (`stdout.rs`).
pub fn run(options: Options) -> u8 {
    let start = Instant::now();
    let interrupts = Interrupts::install();
    let budget = Budget::from_timeout_ms(
        std::env::var(ptd_wire::envelope::vars::TIMEOUT_MS)
            .ok()
            .as_deref(),
    );
    let bytes = match super::read_stdin(limits::MAX_REQUEST_BYTES) {
        Ok(bytes) => bytes,
        Err(status) => return status,
    };
    let env = server_env_of_process();
    let cx = Context {
        options: &options,
        budget,
        start,
        env,
        interrupts: &interrupts,
    };
    let mut line = respond(bytes, &cx).into_bytes();
    line.push(b'\n');
    ptd_wire::stdout::print(&line, "the result", 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_table_is_consistent() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {}", code.as_str());
            let retryable = matches!(
                code,
                Code::McpServerStartFailed
                    | Code::McpServerExited
                    | Code::McpTimeout
                    | Code::Interrupted
            );
            assert_eq!(code.retryable(), retryable, "{}", code.as_str());
        }
        assert_eq!(Code::McpTimeout.status(), Status::Timeout);
        assert_eq!(Code::McpProtocolUnsupported.status(), Status::Unavailable);
    }

    #[test]
    fn the_budget_leaves_room_for_the_shutdown() {
        let ms = Duration::from_millis;
        let b = Budget::from_timeout_ms(Some("30000"));
        assert_eq!(b.exchange, ms(27_000));
        assert_eq!(b.close_wait + b.term_grace, ms(2_750));
        let b = Budget::from_timeout_ms(Some("2000"));
        assert_eq!(b.exchange, ms(1_600));
        assert_eq!((b.close_wait, b.term_grace), (ms(75), ms(75)));
        // A tiny timeout still leaves half of it; the ladder's waits shrink to nothing.
        let b = Budget::from_timeout_ms(Some("300"));
        assert_eq!(b.exchange, ms(150));
        assert_eq!(b.close_wait, Duration::ZERO);
        for bad in [
            None,
            Some(""),
            Some("0"),
            Some("-5"),
            Some("1.5"),
            Some("x"),
        ] {
            assert_eq!(Budget::from_timeout_ms(bad).exchange, ms(27_000), "{bad:?}");
        }
        let huge = Budget::from_timeout_ms(Some("18446744073709551615"));
        assert_eq!(huge.exchange, limits::MAX_TIMEOUT - Duration::from_secs(3));
        assert!(Instant::now().checked_add(huge.exchange).is_some());
        for total in [1u64, 10, 500, 1_000, 5_000, 60_000, 3_600_000] {
            let b = Budget::from_timeout_ms(Some(&total.to_string()));
            assert!(b.exchange < Duration::from_millis(total), "{total}");
        }
    }

    #[test]
    fn the_server_does_not_see_the_bridge_metadata() {
        let env = server_env([
            ("PATH".to_string(), "/bin".to_string()),
            (
                "WP_CODEBOX_PARENT_TOOL_REQUEST_ID".to_string(),
                "r".to_string(),
            ),
            ("GITHUB_TOKEN".to_string(), "t".to_string()),
        ]);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["PATH", "GITHUB_TOKEN"]);
    }
}
