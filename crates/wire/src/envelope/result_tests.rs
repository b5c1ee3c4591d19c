//! Unit tests of `envelope/result.rs`.
use super::*;
use serde_json::json;

fn echo() -> Echo {
    Echo {
        request_id: "r1".into(),
        tool: "ext_tool".into(),
        operation: "call".into(),
    }
}

fn check_text(text: &str) -> Result<ResultEnvelope<'_>, Vec<Issue>> {
    let sent = Box::leak(Box::new(echo()));
    ResultEnvelope::check(
        text,
        Some(Expect {
            sent,
            canonical_tool: "canon.tool",
        }),
    )
}

fn rendered(env: &ResultEnvelope) -> Value {
    serde_json::from_str(&env.render(&Redactor::new(), Audience::Caller)).unwrap()
}

#[test]
fn the_status_field_lists_the_contracts_five_statuses() {
    let mut listed: Vec<Status> = fields::STATUSES
        .iter()
        .map(|s| Status::parse(s).unwrap())
        .collect();
    listed.sort_by_key(|s| s.as_str());
    let mut all = Status::ALL.to_vec();
    all.sort_by_key(|s| s.as_str());
    assert_eq!(listed, all);
}

#[test]
fn minimal_success_gets_its_containers() {
    let text = json!({
        "schema": SCHEMA, "version": 1, "request_id": "r1", "tool": "canon.tool",
        "operation": "call", "status": "succeeded", "output": [1]
    })
    .to_string();
    let env = check_text(&text).unwrap();
    assert_eq!(env.status, Status::Succeeded);
    let v = rendered(&env);
    assert_eq!(v["artifacts"], json!({"transcripts": [], "evidence": []}));
    assert_eq!(v["diagnostics"], json!({}));
    assert_eq!(v["metadata"], json!({}));
    assert_eq!(v["output"], json!([1]));
}

#[test]
fn echo_and_shape_errors_are_all_reported() {
    let text = json!({
        "schema": SCHEMA, "version": 1, "request_id": "other", "tool": "x",
        "operation": "read", "status": "failed", "error": {"code": "", "retryable": "no"},
        "artifacts": {"transcripts": [{"kind": "t", "path": "/etc/x", "sha256": "ABC"}]},
        "diagnostics": []
    })
    .to_string();
    let issues = check_text(&text).unwrap_err();
    let got = crate::validate::code_paths(&issues);
    assert_eq!(
        got,
        [
            ("request_id_mismatch", "/request_id"),
            ("tool_mismatch", "/tool"),
            ("operation_mismatch", "/operation"),
            ("empty", "/error/code"),
            ("missing", "/error/message"),
            ("wrong_type", "/error/retryable"),
            ("path_not_relative", "/artifacts/transcripts/0/path"),
            ("invalid_sha256", "/artifacts/transcripts/0/sha256"),
            ("wrong_type", "/diagnostics"),
        ]
    );
}

#[test]
fn non_success_needs_an_error_and_unknown_status_is_refused() {
    let base = json!({"schema": SCHEMA, "version": 1, "request_id": "r1", "tool": "ext_tool", "operation": "call"});
    let mut v = base.clone();
    v["status"] = json!("denied");
    let text = v.to_string();
    assert_eq!(check_text(&text).unwrap_err()[0].code, "missing");
    let mut v = base;
    v["status"] = json!("maybe");
    let text = v.to_string();
    assert_eq!(check_text(&text).unwrap_err()[0].code, "wrong_value");
}

#[test]
fn the_answer_is_passed_through_with_the_dispatchers_parts_added() {
    let text = r#"{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"r1",
        "tool":"ext_tool","operation":"call","status":"succeeded",
        "output":{"n":12345678901234567890123,"f":1e400},
        "artifacts":{"transcripts":[{"kind":"k"}],"extra":1},
        "diagnostics":{"mine":true,"dispatch":"forged"},"metadata":{"m":1},"x-unknown":[1]}"#;
    let mut env = check_text(text).unwrap();
    env.transcript_refs.push(ArtifactRef {
        kind: "tool-call-transcript",
        path: "files/parent-tools/r1.json".into(),
        sha256: "0".repeat(64),
    });
    env.dispatch = Some(DispatchDiagnostics::default());
    let out = env.render(&Redactor::new(), Audience::Caller);
    assert!(
        out.contains(r#""output":{"n":12345678901234567890123,"f":1e400}"#),
        "{out}"
    );
    crate::json::check(out.as_bytes(), usize::MAX).unwrap();
    // The rest, read as a tree once the unrepresentable number is out of the way.
    let v: Value = serde_json::from_str(&out.replace("1e400", "1")).unwrap();
    assert_eq!(v["artifacts"]["transcripts"].as_array().unwrap().len(), 2);
    assert_eq!(v["artifacts"]["extra"], 1);
    assert_eq!(v["artifacts"]["evidence"], json!([]));
    assert_eq!(v["diagnostics"]["mine"], true);
    assert_eq!(v["diagnostics"]["dispatch"]["adapter_started"], false);
    assert_eq!(v["metadata"], json!({"m": 1}));
    assert_eq!(v["x-unknown"], json!([1]));
    assert!(!out.contains('\n'));
}

#[test]
fn members_are_redacted_with_their_keys_in_view() {
    let text = json!({
        "schema": SCHEMA, "version": 1, "request_id": "r1", "tool": "canon.tool",
        "operation": "call", "status": "succeeded",
        "diagnostics": {"password": "hunter2-diag", "kept": "x", "nested": {"api_key": "k"}},
        "metadata": {"authorization": {"value": "raw-credential"}, "trace": "t"},
        "x-extra": {"authorization": "Bearer-less-secret"},
        "output": {"password": "payload stays"}
    })
    .to_string();
    let env = check_text(&text).unwrap();
    let v = rendered(&env);
    assert_eq!(v["diagnostics"]["password"], "[redacted]");
    assert_eq!(v["diagnostics"]["kept"], "x");
    assert_eq!(v["diagnostics"]["nested"]["api_key"], "[redacted]");
    assert_eq!(v["metadata"]["authorization"], "[redacted]");
    assert_eq!(v["metadata"]["trace"], "t");
    assert_eq!(v["x-extra"]["authorization"], "[redacted]");
    assert_eq!(v["output"]["password"], "payload stays");
    let transcript: Value =
        serde_json::from_str(&env.render(&Redactor::new(), Audience::Transcript)).unwrap();
    assert_eq!(transcript["output"]["password"], "[redacted]");
}

#[test]
fn dispatcher_failures_have_one_shape() {
    let env = ResultEnvelope::failure(
        echo(),
        Status::Denied,
        ErrorBody::new(ErrorCode::ToolNotAllowed, "no", Some(json!({"a": 1}))),
    );
    let v = rendered(&env);
    assert_eq!(
        v,
        json!({
            "schema": SCHEMA, "version": 1, "request_id": "r1", "tool": "ext_tool",
            "operation": "call", "status": "denied",
            "error": {"code": "tool_not_allowed", "message": "no", "retryable": false, "details": {"a": 1}},
            "artifacts": {"transcripts": [], "evidence": []}, "diagnostics": {}, "metadata": {}
        })
    );
    assert_eq!(env.error_code().as_deref(), Some("tool_not_allowed"));
}

#[test]
fn io_error_kinds_have_fixed_wire_names() {
    use std::io::ErrorKind as K;
    // The spellings `diagnostics.dispatch.stdin_error` has always had (once `{kind:?}` in
    // lower case): pinned here, whatever std's Debug output becomes.
    let pinned = [
        (K::NotFound, "notfound"),
        (K::PermissionDenied, "permissiondenied"),
        (K::ConnectionRefused, "connectionrefused"),
        (K::ConnectionReset, "connectionreset"),
        (K::HostUnreachable, "hostunreachable"),
        (K::NetworkUnreachable, "networkunreachable"),
        (K::ConnectionAborted, "connectionaborted"),
        (K::NotConnected, "notconnected"),
        (K::AddrInUse, "addrinuse"),
        (K::AddrNotAvailable, "addrnotavailable"),
        (K::NetworkDown, "networkdown"),
        (K::BrokenPipe, "brokenpipe"),
        (K::AlreadyExists, "alreadyexists"),
        (K::WouldBlock, "wouldblock"),
        (K::NotADirectory, "notadirectory"),
        (K::IsADirectory, "isadirectory"),
        (K::DirectoryNotEmpty, "directorynotempty"),
        (K::ReadOnlyFilesystem, "readonlyfilesystem"),
        (K::StaleNetworkFileHandle, "stalenetworkfilehandle"),
        (K::InvalidInput, "invalidinput"),
        (K::InvalidData, "invaliddata"),
        (K::TimedOut, "timedout"),
        (K::WriteZero, "writezero"),
        (K::StorageFull, "storagefull"),
        (K::NotSeekable, "notseekable"),
        (K::FileTooLarge, "filetoolarge"),
        (K::ResourceBusy, "resourcebusy"),
        (K::ExecutableFileBusy, "executablefilebusy"),
        (K::Deadlock, "deadlock"),
        (K::TooManyLinks, "toomanylinks"),
        (K::ArgumentListTooLong, "argumentlisttoolong"),
        (K::Interrupted, "interrupted"),
        (K::Unsupported, "unsupported"),
        (K::UnexpectedEof, "unexpectedeof"),
        (K::OutOfMemory, "outofmemory"),
        (K::Other, "other"),
    ];
    for (kind, name) in pinned {
        assert_eq!(io_kind_name(kind), name, "{kind:?}");
        assert_eq!(
            serde_json::to_value(StdinError::other(kind)).unwrap(),
            name,
            "{kind:?}"
        );
    }
    // An OS error std has no kind for (EBADF, EIO on a pipe) is uncategorized, as before.
    for errno in [libc::EBADF, libc::EIO] {
        let kind = std::io::Error::from_raw_os_error(errno).kind();
        assert_eq!(io_kind_name(kind), "uncategorized", "{kind:?}");
    }
}

#[test]
fn for_a_transcript_output_and_dispatch_are_the_members_as_they_stand_in_the_text() {
    let text = json!({
        "schema": SCHEMA, "version": 1, "request_id": "r1", "tool": "canon.tool",
        "operation": "call", "status": "succeeded",
        "output": {"password": "hunter2", "note": "sk-live-0123456789abcdef kept?", "n": 1.50},
        "diagnostics": {"token": "t0k", "mine": 1}
    })
    .to_string();
    let mut env = check_text(&text).unwrap();
    env.dispatch = Some(DispatchDiagnostics {
        stdout_head: Some("secret-value and /home/someone/x".into()),
        ..DispatchDiagnostics::default()
    });
    let mut redactor = Redactor::new();
    redactor.add_secret("secret-value");
    let parts = env.render_for_transcript(&redactor);
    assert_eq!(parts.text, env.render(&redactor, Audience::Transcript));
    let fields = Fields::parse(&parts.text).unwrap();
    assert_eq!(parts.output(), fields.get("output").unwrap());
    assert!(
        parts.output().contains(r#""password":"[redacted]""#),
        "{}",
        parts.output()
    );
    let diagnostics = Fields::parse(fields.get("diagnostics").unwrap()).unwrap();
    assert_eq!(parts.dispatch(), diagnostics.get("dispatch").unwrap());
    assert!(
        !parts.dispatch().contains("secret-value"),
        "{}",
        parts.dispatch()
    );

    // Without an output or a dispatch part, both are `null`, as a reader of the text finds.
    let failed = json!({
        "schema": SCHEMA, "version": 1, "request_id": "r1", "tool": "canon.tool",
        "operation": "call", "status": "failed",
        "error": {"code": "x", "message": "m", "retryable": false}
    })
    .to_string();
    let bare = check_text(&failed).unwrap();
    let parts = bare.render_for_transcript(&redactor);
    assert_eq!(parts.output(), "null");
    assert_eq!(parts.dispatch(), "null");
}
