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
    "abi",
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
    "cgroup",
    "code",
    "confinement",
    "details",
    "diagnostics",
    "dispatch",
    "duration_ms",
    "endpoint",
    "error",
    "evidence",
    "exit_code",
    "file_size_bytes",
    "finished_at",
    "fs_read",
    "fs_write",
    "gid",
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
    "max_rss_bytes",
    "mechanisms",
    "memory",
    "memory_bytes",
    "message",
    "metadata",
    "missing",
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
    "principal",
    "redaction",
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
    "transcript_error",
    "transcripts",
    "transport",
    "uid",
    "uri",
    "user_ms",
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
                stderr_bytes: 0,
                leaked_processes: 0,
                resources: Some(crate::envelope::result::Resources {
                    max_rss_bytes: 0,
                    user_ms: 0,
                    system_ms: 0,
                }),
            }),
            stdout_head: Some(String::new()),
            confinement: Some(crate::envelope::result::ConfinementDiagnostics {
                mechanisms: vec!["seccomp"],
                run_as: crate::envelope::result::RunAsDiagnostics {
                    uid: 65534,
                    gid: 65534,
                },
                landlock: Some(crate::envelope::result::LandlockDiagnostics {
                    abi: 7,
                    scoped: true,
                    fs_read: Vec::new(),
                    fs_write: Vec::new(),
                }),
                network: "none",
                limits: crate::envelope::result::LimitDiagnostics {
                    memory_bytes: Some(1),
                    pids: Some(1),
                    open_files: Some(1),
                    file_size_bytes: Some(1),
                },
                cgroup: [("memory", "v1"), ("pids", "v2")].into_iter().collect(),
            }),
            transcript_error: Some(String::new()),
            result_file_error: Some(String::new()),
            ..DispatchDiagnostics::default()
        };
        fn keys(v: &Value, into: &mut Vec<String>) {
            if let Value::Object(map) = v {
                into.extend(map.keys().cloned());
                map.values().for_each(|x| keys(x, into));
            }
        }
        let ledger = LedgerDiagnostics {
            replayed: true,
            attempt: Some(1),
            adapter_ms_left: Some(1),
            error: Some(String::new()),
        };
        keys(&serde_json::to_value(full).unwrap(), &mut names);
        keys(&serde_json::to_value(ledger).unwrap(), &mut names);
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
