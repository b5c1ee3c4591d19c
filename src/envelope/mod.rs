//! Wire types of the three envelopes and the strict JSON reader they are read with.

use std::path::Path;

/// Read an envelope's bytes from a file, or from stdin for none or `-`, stopping one byte past
/// `max_bytes` so that an oversized input is detected without being read whole. A named file
/// goes through the one reader's stream mode ([`crate::fs::read_stream`]): never a wait in
/// `open(2)`, so a FIFO without a writer waits where the default SIGINT/SIGTERM end it.
pub fn read_input(path: Option<&Path>, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    let path = path.filter(|p| p.as_os_str() != "-");
    let none = crate::interrupt::Interrupts::none();
    Ok(crate::fs::read_stream(
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
    "adapter_ms_left",
    "adapter_started",
    "algorithm",
    "allowed_tools",
    "artifacts",
    "attempt",
    "authorization",
    "bridge_ref",
    "call_id",
    "caller_session_id",
    "capability",
    "code",
    "details",
    "diagnostics",
    "dispatch",
    "duration_ms",
    "endpoint",
    "error",
    "evidence",
    "exit_code",
    "finished_at",
    "http_status",
    "id",
    "input",
    "input_digest",
    "issues",
    "kind",
    "leaked_processes",
    "ledger",
    "message",
    "metadata",
    "operation",
    "output",
    "output_digest",
    "parent_tool_status",
    "path",
    "phase",
    "policy",
    "principal",
    "redaction",
    "replayed",
    "request",
    "request_id",
    "response_bytes",
    "result",
    "result_file_error",
    "retryable",
    "sandbox_session",
    "sandbox_session_id",
    "schema",
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
    "task_id",
    "timeout_ms",
    "tool",
    "tool_calls",
    "tool_name",
    "tool_type",
    "transcript_error",
    "transcripts",
    "transport",
    "uri",
    "value",
    "version",
];

pub mod bridge;
pub mod canonical;
pub mod request;
pub mod result;

#[cfg(test)]
mod tests {
    use super::OWN_KEYS;
    use crate::cli::SchemaKind;
    use crate::envelope::result::{
        DispatchDiagnostics, LedgerDiagnostics, RunDiagnostics, StdinError, Transport,
    };
    use serde_json::Value;

    fn property_names(v: &Value, into: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    into.extend(props.keys().cloned());
                }
                map.values().for_each(|x| property_names(x, into));
            }
            Value::Array(items) => items.iter().for_each(|x| property_names(x, into)),
            _ => {}
        }
    }

    #[test]
    fn own_keys_cover_the_schemas_and_every_dispatch_diagnostic() {
        let mut names = Vec::new();
        for kind in [
            SchemaKind::Result,
            SchemaKind::Request,
            SchemaKind::Transcript,
        ] {
            property_names(&crate::schema::schema(kind), &mut names);
        }
        let full = DispatchDiagnostics {
            timeout_ms: Some(1),
            transport: Some(Transport::Http),
            endpoint: Some(String::new()),
            http_status: Some(200),
            response_bytes: Some(1),
            run: Some(RunDiagnostics {
                exit_code: Some(0),
                signal: Some(String::new()),
                stdout_bytes: 0,
                stdin_bytes_written: 0,
                stdin_error: Some(StdinError::BrokenPipe),
                stderr_tail: String::new(),
                stderr_truncated: false,
                leaked_processes: 0,
            }),
            stdout_head: Some(String::new()),
            transcript_error: Some(String::new()),
            result_file_error: Some(String::new()),
            ..DispatchDiagnostics::default()
        };
        let ledger = LedgerDiagnostics {
            replayed: true,
            attempt: Some(1),
            adapter_ms_left: Some(1),
            error: Some(String::new()),
        };
        for value in [
            serde_json::to_value(full).unwrap(),
            serde_json::to_value(ledger).unwrap(),
        ] {
            match value {
                Value::Object(map) => names.extend(map.keys().cloned()),
                other => panic!("{other}"),
            }
        }
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| !OWN_KEYS.contains(&n.as_str()))
            .collect();
        assert!(missing.is_empty(), "not in OWN_KEYS: {missing:?}");
        assert!(
            OWN_KEYS.windows(2).all(|w| w[0] < w[1]),
            "sorted, no repeats"
        );
    }
}
