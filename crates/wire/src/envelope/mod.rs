//! Wire types of the three envelopes and the strict JSON reader they are read with.

use std::path::Path;

/// Read an envelope's bytes from a file, or from stdin for none or `-`, stopping one byte past
/// `max_bytes` so that an oversized input is detected without being read whole. A named file
/// goes through the one reader's stream mode ([`ptd_sys::fs::read_stream`]): never a wait in
/// `open(2)`, so a FIFO without a writer waits where the default SIGINT/SIGTERM end it.
pub fn read_input(path: Option<&Path>, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    let path = path.filter(|p| p.as_os_str() != "-");
    let none = ptd_sys::interrupt::Interrupts::none();
    Ok(ptd_sys::fs::read_stream(
        path,
        max_bytes.saturating_add(1),
        &none,
    )?)
}

/// Every object key of the documents the dispatcher writes — the result envelope (with
/// `diagnostics.dispatch` and its artifact refs), the request as a transcript embeds it, the
/// transcript itself, `diagnostics.ledger` — for [`crate::redact::Redactor::keep_keys`]: no registered secret may
/// rename one of them. A test keeps this list a superset of the JSON Schemas' property names
/// and of every key `diagnostics.dispatch` can carry.
pub const OWN_KEYS: &[&str] = &[
    "abi",
    "adapter_ms_left",
    "adapter_started",
    "algorithm",
    "allowed",
    "allowed_tools",
    "artifacts",
    "attempt",
    "authorization",
    "bridge_ref",
    "bytes_down",
    "bytes_up",
    "call_id",
    "caller_session_id",
    "capability",
    "cgroup",
    "code",
    "confinement",
    "connections",
    "details",
    "diagnostics",
    "dispatch",
    "duration_ms",
    "endpoint",
    "entry",
    "error",
    "evidence",
    "exit_code",
    "file_size_bytes",
    "finished_at",
    "fs_read",
    "fs_write",
    "gid",
    "host",
    "http_status",
    "id",
    "input",
    "input_digest",
    "issues",
    "kind",
    "landlock",
    "leaked_processes",
    "ledger",
    "limit",
    "limits",
    "line",
    "max_rss_bytes",
    "mechanisms",
    "memory",
    "memory_bytes",
    "message",
    "metadata",
    "missing",
    "mode",
    "more",
    "network",
    "open_files",
    "operation",
    "output",
    "output_digest",
    "parent_tool_status",
    "path",
    "phase",
    "pids",
    "policy",
    "port",
    "principal",
    "reason",
    "redaction",
    "refused",
    "replayed",
    "request",
    "request_id",
    "resources",
    "response_bytes",
    "result",
    "result_file_error",
    "retryable",
    "run_as",
    "sandbox_session",
    "sandbox_session_id",
    "schema",
    "scoped",
    "sha256",
    "signal",
    "started_at",
    "status",
    "stderr_tail",
    "stderr_truncated",
    "stdin_bytes_written",
    "stdin_error",
    "stdout_bytes",
    "stdout_head",
    "system_ms",
    "task_id",
    "timeout_ms",
    "tool",
    "tool_calls",
    "tool_name",
    "tool_type",
    "trace_id",
    "transcript_error",
    "transcripts",
    "transport",
    "uid",
    "uri",
    "user_ms",
    "value",
    "version",
];

/// The contract's metadata variables: what the adapter receives in its environment (SPEC §4.2).
pub mod vars {
    pub const REQUEST_ID: &str = "WP_CODEBOX_PARENT_TOOL_REQUEST_ID";
    pub const TOOL: &str = "WP_CODEBOX_PARENT_TOOL_TOOL";
    pub const OPERATION: &str = "WP_CODEBOX_PARENT_TOOL_OPERATION";
    pub const TIMEOUT_MS: &str = "WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS";
    pub const REQUEST_SCHEMA: &str = "WP_CODEBOX_PARENT_TOOL_REQUEST_SCHEMA";
    pub const RESULT_SCHEMA: &str = "WP_CODEBOX_PARENT_TOOL_RESULT_SCHEMA";
    pub const REQUEST_FILE: &str = "WP_CODEBOX_PARENT_TOOL_REQUEST_FILE";
    pub const RESULT_FILE: &str = "WP_CODEBOX_PARENT_TOOL_RESULT_FILE";
}

pub mod bridge;
pub mod canonical;
pub mod diagnostics;
pub mod request;
pub mod result;
