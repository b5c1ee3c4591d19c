//! The bodies of the fuzz targets: one `pub fn(&[u8])` per target, each feeding hostile bytes
//! to one parser or validator that faces a trust boundary and asserting what must hold for
//! *every* input — not only "no panic" but the invariants each module promises (agreement
//! between the readers, one valid envelope out of every answer, no secret in any redacted
//! output, no resolved path outside the workspace root).
//!
//! Two callers run exactly these functions: the libFuzzer crate in `fuzz/` (nightly, outside
//! the default build), and the stable test `tests/cli/fuzz_regressions.rs`, which replays every
//! minimized input committed under `fuzz/regressions/<target>/`. A violated invariant panics,
//! which is how libFuzzer recognises a finding.
//!
//! Not part of the product's interface (`#[doc(hidden)]`); it reads no file but the workspace
//! target's private fixture tree, starts no process and prints nothing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a fuzz target's assertions: a violated invariant must panic, which is how \
              libFuzzer and the regression replay recognise a finding"
)]

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use clap::Parser;
use parent_tool_dispatch::cli::{Cli, DispatchArgs};
use parent_tool_dispatch::delegation::checks;
use parent_tool_dispatch::dispatch::{Concluded, DispatchError};
use ptd_adapters::workspace::path::{PathError, RelPath, Resolver, Root};
use ptd_endpoint as endpoint;
use ptd_sys::hostenv::HostEnv;
use ptd_verdict::judge::{self, Answer, Body, Ending, Limits};
use ptd_wire::envelope::bridge::{Bridge, Mode};
use ptd_wire::envelope::request::{Echo, Request, MAX_REQUEST_ID_BYTES};
use ptd_wire::envelope::result::{Audience, Expect, ResultEnvelope};
use ptd_wire::error::Status;
use ptd_wire::json::raw::{self, Fields};
use ptd_wire::json::{self, Document, JsonIssue, Kind};
use ptd_wire::redact::{Redactor, Scope, HOST_PATH, REDACTED};
use ptd_wire::validate::{Issue, MAX_ISSUES};
use serde_json::Value;
use std::rc::Rc;
use std::sync::OnceLock;

mod ledger;
mod policy;
mod protocols;
pub use ledger::ledger_flags;
pub use policy::policy;
pub use protocols::{dns, endpoint, mcp};

/// Size cap the targets read with: far above what a fuzzer feeds, so the cap is never what
/// decides.
const MAX: usize = 1 << 22;

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target, by the name of its folder under `fuzz/regressions/` and its `fuzz/` binary.
pub const TARGETS: [(&str, Target); 12] = [
    ("json", json),
    ("bridge", bridge),
    ("request", request),
    ("result", result),
    ("redact", redact),
    ("workspace_path", workspace_path),
    ("delegation", delegation),
    ("endpoint", endpoint),
    ("mcp", mcp),
    ("ledger_flags", ledger_flags),
    ("dns", dns),
    ("policy", policy),
];

/// The strict reader: [`Document::parse`], [`json::check_object`], [`json::check`] and
/// [`json::parse_value`] agree with each other on every input, accept exactly what
/// `serde_json` accepts (save duplicate keys and nesting past the cap, which they refuse), and
/// what they accept reads back the same after minifying, pretty-printing and re-serializing.
pub fn json(data: &[u8]) {
    let checked = json::check(data, MAX);
    let object = json::check_object(data, MAX);
    let doc = Document::parse(data.to_vec(), MAX);
    match (&object, &doc) {
        (Ok(text), Ok(doc)) => assert_eq!(*text, doc.text()),
        (Err(a), Err(b)) => assert_eq!(a, b, "check_object and Document::parse disagree"),
        _ => panic!("check_object {object:?} but Document::parse {doc:?}"),
    }
    match (&checked, &object) {
        (Ok(text), Ok(_)) => assert_eq!(Kind::of(text), Kind::Object),
        (Ok(text), Err(JsonIssue::NotObject { found })) => {
            assert_ne!(Kind::of(text), Kind::Object);
            assert_eq!(*found, Kind::of(text).name());
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("check {checked:?} but check_object {object:?}"),
    }
    if let Ok(doc) = &doc {
        let fields = Fields::parse(doc.text()).expect("an accepted object has fields");
        let members: Vec<(&str, &str)> = doc.members().collect();
        let seen: Vec<(&str, &str)> = fields.iter().collect();
        assert_eq!(members, seen, "Document and Fields see different members");
        for (key, value) in &members {
            assert_eq!(doc.get(key), Some(*value));
            let span = doc.span(key).expect("a member has a span");
            assert_eq!(&doc.text()[span], *value);
            json::check(value.as_bytes(), MAX).expect("a member's value is one JSON value");
        }
    }
    let value = json::parse_value(data, MAX);
    match (&checked, &value) {
        (Err(a), Err(b)) => assert_eq!(a, b),
        (Err(a), Ok(_)) => panic!("parse_value accepted what check refused: {a:?}"),
        (Ok(_), Err(JsonIssue::Syntax { detail, .. })) => {
            // Only a number a tree cannot hold (1e400) parts the two.
            assert!(detail.contains("number is out of the range"), "{detail}");
        }
        (Ok(_), Err(other)) => panic!("check accepted what parse_value refused: {other:?}"),
        (Ok(text), Ok(tree)) => {
            let again = serde_json::to_string(tree).expect("a tree serializes");
            let back = json::parse_value(again.as_bytes(), MAX).expect("what serde writes reads");
            // serde_json reads floats to within one ulp, not exactly (no `float_roundtrip`):
            // only trees without floats must come back identical.
            if !has_float(tree) {
                assert_eq!(&back, tree);
            }
            let minified = raw::minify(text);
            let tree_of = |t: &str| json::parse_value(t.as_bytes(), MAX);
            assert_eq!(&tree_of(&minified).expect("minified reads back"), tree);
            let pretty = raw::pretty(&minified);
            assert_eq!(&tree_of(&pretty).expect("pretty reads back"), tree);
        }
    }
    // serde_json as the reference grammar (into a tree: it checks every escape, which its
    // skipping mode does not). Its depth limit (128) keeps it off the stack's edge; a depth or
    // number-range refusal on its side, a duplicate key or the depth cap on ours, ends the
    // comparison.
    let serde = std::str::from_utf8(data)
        .ok()
        .map(|text| serde_json::from_str::<Value>(text).map(|_| ()));
    match (&checked, serde) {
        (Ok(_), Some(Ok(()))) => {}
        (Ok(_), Some(Err(e))) => {
            let why = e.to_string();
            assert!(
                why.contains("recursion limit") || why.contains("number out of range"),
                "accepted what serde_json refuses: {why}"
            );
        }
        (Ok(_), None) => panic!("accepted bytes that are not UTF-8"),
        (Err(issue), None) => assert!(
            matches!(
                issue,
                JsonIssue::InvalidUtf8 { .. } | JsonIssue::ByteOrderMark
            ),
            "{issue:?}"
        ),
        (Err(issue), Some(Ok(()))) => assert!(
            matches!(
                issue,
                JsonIssue::DuplicateKey { .. } | JsonIssue::TooDeep { .. }
            ),
            "refused what serde_json accepts: {issue:?}"
        ),
        (Err(_), Some(Err(_))) => {}
    }
}

/// Bridge validation: [`Bridge::load`] on any text (never `@FILE`: the fuzzer must not choose
/// files) either yields a bridge that validates again from its own tree, with a well-formed
/// ref and a mode that matches its parts, or issues that are well-formed; every error renders.
pub fn bridge(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.starts_with('@') {
        return;
    }
    match Bridge::load(text) {
        Ok(bridge) => {
            let reference = bridge.bridge_ref();
            let hex = reference.strip_prefix("sha256:").expect("a ref is sha256:");
            assert!(is_lower_hex(hex, 64), "{reference}");
            assert!(bridge.timeout_ms >= 1);
            match bridge.mode {
                Mode::HostCommand => {
                    let command = bridge.command.as_ref().expect("host_command has a command");
                    assert!(!command.argv.is_empty() && !command.argv[0].is_empty());
                    assert!(parent_tool_dispatch::dispatch::command_of(&bridge).is_ok());
                }
                Mode::HostEndpoint => {
                    assert!(bridge.endpoint.is_some(), "host_endpoint has an endpoint");
                    assert!(parent_tool_dispatch::dispatch::command_of(&bridge).is_err());
                }
            }
            for tool in &bridge.allowed_tools {
                assert!(bridge.allows(tool));
            }
            let again = Bridge::from_json(bridge.raw.clone()).expect("a valid bridge revalidates");
            assert_eq!(again.bridge_ref(), reference);
            well_formed(&bridge.warnings);
        }
        Err(err) => {
            assert!(!err.issues().is_empty(), "a refusal says why");
            well_formed(err.issues());
            well_formed(err.warnings());
            let _ = err.to_string();
        }
    }
    // The other JSON argument of the main job goes through the same reader.
    if let Ok(map) = ptd_wire::toolmap::ToolMap::parse(text) {
        let _ = map.external("workspace.read");
    }
}

/// Request validation: [`Request::from_document`] on anything the strict reader accepts. A
/// valid request echoes its ids, and what the adapter receives ([`Request::for_adapter`]) is
/// one strict JSON line that is a valid request again, with only `tool` changed.
pub fn request(data: &[u8]) {
    let Ok(doc) = Document::parse(data.to_vec(), MAX) else {
        return;
    };
    let doc = Rc::new(doc);
    let echo = Echo::best_effort(Some(&doc));
    match Request::from_document(Rc::clone(&doc)) {
        Ok(request) => {
            assert_eq!(request.echo, echo);
            assert!(!echo.request_id.is_empty() && echo.request_id.len() <= MAX_REQUEST_ID_BYTES);
            assert!(!echo.tool.is_empty() && !echo.operation.is_empty());
            for mapped in [echo.tool.as_str(), "mapped_tool\u{1}\"\\"] {
                let sent = request.for_adapter(mapped);
                let line = sent.strip_suffix(b"\n").expect("ends with a newline");
                assert!(!line.contains(&b'\n'), "one line");
                let again = Rc::new(Document::parse(line.to_vec(), MAX).expect("strict JSON"));
                let keys: Vec<&str> = again.members().map(|(k, _)| k).collect();
                let before: Vec<&str> = doc.members().map(|(k, _)| k).collect();
                assert_eq!(keys, before);
                assert_eq!(
                    again.get("tool").and_then(raw::string).as_deref(),
                    Some(mapped)
                );
                for (key, value) in doc.members().filter(|(k, _)| *k != "tool") {
                    assert_eq!(again.get(key), Some(raw::minify(value).as_ref()));
                }
                let revalidated = Request::from_document(again);
                if mapped == echo.tool {
                    assert_eq!(revalidated.expect("still valid").echo, echo);
                }
            }
        }
        Err(issues) => {
            assert!(!issues.is_empty(), "a refusal says why");
            well_formed(&issues);
        }
    }
}

/// The bridge every pipeline run of the targets and properties uses: `workspace.read` allowed,
/// a recorded adapter.
pub const BRIDGE: &str = r#"{"schema":"wp-codebox/parent-tool-bridge/v1","version":1,"allowed_tools":["workspace.read"],"dispatcher":{"owner":"wp-codebox","mode":"host_command","command":{"argv":["recorded-adapter"]},"request_schema":"wp-codebox/parent-tool-request/v1","result_schema":"wp-codebox/parent-tool-result/v1","timeout_ms":10000},"sandbox_env":{"mode":"metadata-only","secret_env":[]},"authorization":{"mode":"allowlist"},"redaction":{"transcript_artifact_refs":[]},"metadata":{}}"#;

/// A valid request for [`BRIDGE`], with the ids the result target's answers are judged against.
pub const REQUEST: &str = r#"{"schema":"wp-codebox/parent-tool-request/v1","version":1,"request_id":"fuzz-1","tool":"workspace.read","operation":"call","input":{"path":"a.txt"},"sandbox_session":{"sandbox_session_id":"s"},"authorization":{"allowed_tools":["workspace.read"]},"metadata":{}}"#;

/// The main job's arguments for [`BRIDGE`] with `extra` options (the pipeline runs use
/// `--tool-map provider-safe`, so an answer may echo `workspace.read` or `workspace_read`).
pub fn dispatch_args(extra: &[&str]) -> DispatchArgs {
    let argv = ["parent-tool-dispatch", "--parent-tool-bridge", BRIDGE]
        .into_iter()
        .chain(extra.iter().copied());
    Cli::try_parse_from(argv)
        .expect("the fuzz bridge's options parse")
        .dispatch
}

/// The main job in process ([`parent_tool_dispatch::replay::runner::run_recorded`]) for `request` and a
/// recorded answer, with the checks every run must pass: exactly one valid result envelope,
/// on one line, whose status, error and exit status agree, and which is `succeeded` only when
/// the request was valid and the adapter exited 0 with a valid `succeeded` envelope that
/// echoes it. Returns what the main job concluded.
pub fn dispatch_recorded(request: &[u8], stdout: &[u8], exit_code: i32) -> Concluded {
    static ARGS: OnceLock<DispatchArgs> = OnceLock::new();
    let args = ARGS.get_or_init(|| {
        dispatch_args(&["--max-output-bytes", "65536", "--tool-map", "provider-safe"])
    });
    let env = HostEnv::with([]);
    let concluded = parent_tool_dispatch::replay::runner::run_recorded(
        args,
        &env,
        request.to_vec(),
        stdout,
        exit_code,
        b"",
    )
    .expect("no usage error");
    check_concluded(&concluded, request, stdout, exit_code);
    concluded
}

/// The checks of [`dispatch_recorded`] on a concluded run.
fn check_concluded(concluded: &Concluded, request: &[u8], stdout: &[u8], exit_code: i32) {
    let text = &concluded.envelope;
    assert!(!text.contains('\n'), "the envelope is one line");
    json::check_object(text.as_bytes(), usize::MAX).expect("the envelope is strict JSON");
    let envelope = ResultEnvelope::check(text, None)
        .unwrap_or_else(|issues| panic!("an invalid envelope {text}: {issues:?}"));
    assert_eq!(envelope.status, concluded.status);
    let code = envelope.error_code().map(|c| c.into_owned());
    assert_eq!(code.is_some(), envelope.status != Status::Succeeded);
    let dispatcher_code = code.as_deref().and_then(|c| {
        ptd_wire::error::ErrorCode::ALL
            .into_iter()
            .find(|e| e.as_str() == c)
    });
    // An adapter's own failure exits by its status; the dispatcher's by its code.
    let by_code = ptd_wire::error::exit_code_for(envelope.status, dispatcher_code);
    assert!(
        concluded.exit == envelope.status.exit_code() || concluded.exit == by_code,
        "exit {} for {text}",
        concluded.exit
    );
    // The ids are echoed whenever the request had them as strings, redacted like any name
    // (a host path in one becomes `[host-path]`, and the report knows more host paths than a
    // fresh redactor: compare ids without any).
    let doc = Document::parse(request.to_vec(), MAX).ok();
    let asked = Echo::best_effort(doc.as_ref());
    if !asked.request_id.contains('/') {
        assert_eq!(
            envelope.echo.request_id,
            Redactor::new().redact_str(&asked.request_id)
        );
    }
    if envelope.status == Status::Succeeded {
        let doc = Rc::new(doc.expect("succeeded only for a JSON request"));
        let valid = Request::from_document(doc).expect("succeeded only for a valid request");
        assert_eq!(exit_code, 0, "succeeded only after a clean exit");
        let answer = json::check_object(stdout, usize::MAX).expect("succeeded only on JSON");
        let sent = Echo {
            tool: ptd_wire::toolmap::ToolMap::ProviderSafe.external(&valid.echo.tool),
            ..valid.echo.clone()
        };
        let expect = Expect {
            sent: &sent,
            canonical_tool: &valid.echo.tool,
        };
        assert_eq!(envelope.echo.tool, valid.echo.tool, "the canonical tool id");
        let judged = ResultEnvelope::check(answer, Some(expect))
            .expect("succeeded only on a valid envelope that echoes the request");
        assert_eq!(judged.status, Status::Succeeded);
        assert!(concluded.stderr.iter().all(|l| !l.starts_with("error[")));
    } else {
        let errors = concluded
            .stderr
            .iter()
            .filter(|l| l.starts_with("error["))
            .count();
        assert_eq!(errors, 1, "one error line: {:?}", concluded.stderr);
    }
}

/// Result validation: an adapter's stdout (after one byte choosing how it ended) judged by
/// [`judge::judge`], then rendered and checked again; and the whole main job in process on
/// the same answer. `succeeded` only ever comes from a clean exit and a valid envelope, and
/// every outcome renders to exactly one valid envelope.
pub fn result(data: &[u8]) {
    let Some((&how, stdout)) = data.split_first() else {
        return;
    };
    let ending = match how % 8 {
        0..=3 => Ending::Exited(0),
        4 => Ending::Exited(1),
        5 => Ending::Exited(i32::from(how)),
        6 => Ending::Signaled(ptd_sys::signal::Signal::KILL),
        _ => Ending::HttpStatus(200 + u16::from(how)),
    };
    let sent = Echo {
        request_id: "fuzz-1".into(),
        tool: "workspace_read".into(),
        operation: "call".into(),
    };
    let expect = Expect {
        sent: &sent,
        canonical_tool: "workspace.read",
    };
    let limits = Limits {
        timeout_ms: 1000,
        max_bytes: MAX,
    };
    let clean = matches!(ending, Ending::Exited(0))
        || matches!(ending, Ending::HttpStatus(s) if (200..300).contains(&s));
    thread_local! {
        // Built once: the secret search is an automaton whose construction would dominate
        // every run.
        static REDACTOR: Redactor = {
            let mut r = Redactor::new();
            r.add_secret("fuzz-secret-value");
            r.add_host_path("/work/fuzz-host");
            r
        };
    }
    let answer = Answer {
        ending,
        body: Body::Bytes(stdout),
    };
    let verdict = judge::judge(answer, expect, limits);
    same_verdict_when_prescanned(stdout, how, ending, expect, limits, &verdict);
    let envelope = match verdict {
        Ok(envelope) => {
            let text = json::check_object(stdout, MAX).expect("judged valid, so strict JSON");
            let checked = ResultEnvelope::check(text, Some(expect)).expect("judged valid");
            assert_eq!(checked.status, envelope.status);
            assert!(clean || envelope.status != Status::Succeeded, "{ending:?}");
            assert_eq!(envelope.echo.tool, "workspace.read");
            envelope
        }
        Err(err) => {
            assert_ne!(err.status(), Status::Succeeded);
            let echo = Echo {
                tool: "workspace.read".into(),
                ..sent.clone()
            };
            err.envelope(&echo)
        }
    };
    REDACTOR.with(|redactor| check_rendering(&envelope, redactor, expect));
    if let Ending::Exited(code) = ending {
        dispatch_recorded(REQUEST.as_bytes(), stdout, code);
    }
}

/// The answer fed to a [`json::Prescan`] in pieces (their sizes from `how`), recording even
/// short strings, then judged with it: the same verdict, the same envelope.
fn same_verdict_when_prescanned(
    stdout: &[u8],
    how: u8,
    ending: Ending,
    expect: Expect,
    limits: Limits,
    plain: &Result<ResultEnvelope<'_>, DispatchError>,
) {
    let mut prescan = json::Prescan::recording_from(usize::from(how % 5));
    let mut buf = Vec::new();
    let piece = 1 + usize::from(how / 8);
    while buf.len() < stdout.len() {
        let end = stdout.len().min(buf.len() + piece);
        buf.extend_from_slice(&stdout[buf.len()..end]);
        prescan.advance(&buf);
    }
    let answer = Answer {
        ending,
        body: Body::Prescanned(&buf, &prescan),
    };
    let prescanned = judge::judge(answer, expect, limits);
    let describe = |verdict: &Result<ResultEnvelope<'_>, DispatchError>| match verdict {
        Ok(envelope) => format!("{:?}", envelope.render(&Redactor::new(), Audience::Caller)),
        Err(err) => format!("{err:?}"),
    };
    assert_eq!(describe(&prescanned), describe(plain));
}

/// Both renderings of `envelope` are valid envelopes that echo `expect`, carry its status and
/// error code, hold no registered secret, and render again to the same document.
fn check_rendering(envelope: &ResultEnvelope, redactor: &Redactor, expect: Expect) {
    for audience in [Audience::Caller, Audience::Transcript] {
        let text = envelope.render(redactor, audience);
        let again = ResultEnvelope::check(&text, Some(expect))
            .unwrap_or_else(|issues| panic!("rendered {text} is invalid: {issues:?}"));
        assert_eq!(again.status, envelope.status);
        assert_eq!(
            again.error_code().as_deref(),
            envelope.error_code().as_deref()
        );
        assert!(!text.contains("fuzz-secret-value"), "a secret in {text}");
        // Rendering is idempotent on its own output.
        let rendered_again = again.render(redactor, audience);
        assert_eq!(
            json::parse_value(rendered_again.as_bytes(), MAX).ok(),
            json::parse_value(text.as_bytes(), MAX).ok()
        );
    }
}

/// The redactor: `data` is a secret, a NUL byte, then a text. [`Redactor::redact_json`] (both
/// scopes) on a JSON document that holds the text and the secret planted in several of its
/// forms, and [`Redactor::redact_str`] on the text with the secret planted: the output is
/// valid JSON, redacting it again changes nothing, and no string or key in it holds the secret
/// in any form — except where the occurrence overlaps a marker (a secret made of marker
/// fragments, the one case the redactor documents it cannot cover).
pub fn redact(data: &[u8]) {
    let (secret, text) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b""[..]),
    };
    let secret = String::from_utf8_lossy(secret);
    let text = String::from_utf8_lossy(text);
    // Building the secret search dominates a run; inputs often share their secret.
    thread_local! {
        static CACHE: std::cell::RefCell<std::collections::HashMap<String, Redactor>> =
            Default::default();
    }
    let r = CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() > 256 {
            cache.clear();
        }
        cache
            .entry(secret.to_string())
            .or_insert_with(|| {
                let mut r = Redactor::new();
                r.add_secret(&secret);
                r.add_host_path("/work/fuzz-host");
                // Build the search now, so that every clone shares it.
                r.scrub_secrets_str("");
                r
            })
            .clone()
    });
    // Forms are only promised for what is registered: the value and its trimmed form, each
    // when it qualifies as a secret (8+ characters, not a number or a boolean).
    let mut forms: Vec<String> = Vec::new();
    for candidate in [secret.as_ref(), secret.trim()] {
        if ptd_wire::redact::qualifies_as_secret(candidate) {
            forms.extend(forms_of(candidate));
        }
    }
    forms.dedup();
    // A cut can split a marker, after which a form overlapping it no longer looks like one.
    let unbracketed: Vec<String> = forms
        .iter()
        .filter(|f| !f.contains(['[', ']']))
        .cloned()
        .collect();

    // Strings.
    let form = forms.get(data.len() % 7).cloned();
    let mixed = match &form {
        Some(form) => format!("{text}{form}{text}"),
        None => text.to_string(),
    };
    for out in [r.redact_str(&mixed), r.scrub_secrets_str(&mixed)] {
        assert_no_form(&out, &forms);
    }
    let once = r.redact_str(&mixed);
    assert_eq!(r.redact_str(&once), once, "redact_str is idempotent");
    let (tail, _) = r.redact_tail(mixed.as_bytes(), 64);
    assert!(tail.len() <= 64);
    assert_no_form(&tail, &unbracketed);
    let (head, _) = r.redact_head(mixed.as_bytes(), 64);
    assert!(head.len() <= 64);
    assert_no_form(&head, &unbracketed);

    // JSON: the text as a member when it is JSON, as a string otherwise, with the form
    // planted as a value, a key, part of a string, and under the structural `authorization`.
    let as_json = json::check(text.as_bytes(), MAX).ok().map(str::to_string);
    let quoted = raw::quote(&text);
    let planted = form.as_ref().map(|form| {
        let q = raw::quote(form);
        let mixed = raw::quote(&format!("{text}{form}"));
        format!(",\"p0\":{q},{q}:{mixed},\"authorization\":{{{q}:[{q}]}}")
    });
    let doc = [
        as_json.as_deref().zip(planted.as_deref()),
        as_json.as_deref().map(|m| (m, "")),
        Some(quoted.as_str()).zip(planted.as_deref()),
        Some((quoted.as_str(), "")),
    ]
    .into_iter()
    .flatten()
    .map(|(member, planted)| format!("{{\"fuzz\":{member}{planted}}}"))
    // Too deep once wrapped, or a form that repeats a key: plant less.
    .find(|doc| json::check(doc.as_bytes(), MAX).is_ok())
    .expect("a quoted string always makes a document");
    let tree: Option<Value> = serde_json::from_str(&doc).ok();
    for scope in [
        Scope::SecretsOnly,
        Scope::Full {
            envelope_root: true,
        },
        Scope::Full {
            envelope_root: false,
        },
    ] {
        let out = r
            .redact_json(&doc, scope)
            .unwrap_or_else(|e| panic!("valid JSON refused: {e}"));
        let value = json::parse_value(out.as_bytes(), MAX);
        json::check(out.as_bytes(), MAX).unwrap_or_else(|e| panic!("{out}: {e}"));
        assert!(!out.contains('\n'), "compact");
        assert_eq!(r.redact_json(&out, scope).unwrap(), out, "idempotent");
        if let Ok(value) = &value {
            for s in strings_in(value) {
                assert_no_form(&s, &forms);
            }
        }
        // The text pass and the tree walk agree, value for value.
        if let (Some(tree), Ok(value)) = (&tree, &value) {
            let mut walked = tree.clone();
            match scope {
                Scope::SecretsOnly => r.scrub_secrets_value(&mut walked),
                Scope::Full {
                    envelope_root: true,
                } => r.redact_value(&mut walked),
                Scope::Full {
                    envelope_root: false,
                } => continue,
            }
            assert_eq!(value, &walked, "text pass and tree walk differ on {doc}");
        }
    }
}

/// Forms of a secret as other software writes them, computed here independently of the
/// redactor's own list: as is, JSON-escaped, percent-encoded, base64 (both alphabets).
fn forms_of(secret: &str) -> Vec<String> {
    let json = serde_json::to_string(secret).unwrap_or_default();
    let mut percent = String::new();
    for &b in secret.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            percent.push(char::from(b));
        } else {
            percent.push_str(&format!("%{b:02X}"));
        }
    }
    vec![
        secret.to_string(),
        json[1..json.len() - 1].to_string(),
        percent,
        STANDARD.encode(secret),
        URL_SAFE_NO_PAD.encode(secret),
    ]
}

/// No form of the secret in `s`, unless that occurrence overlaps a marker.
fn assert_no_form(s: &str, forms: &[String]) {
    let markers: Vec<(usize, usize)> = [REDACTED, HOST_PATH]
        .iter()
        .flat_map(|m| s.match_indices(m).map(|(at, m)| (at, at + m.len())))
        .collect();
    for form in forms {
        let mut from = 0;
        while let Some(at) = s.get(from..).and_then(|rest| rest.find(form.as_str())) {
            let (start, end) = (from + at, from + at + form.len());
            let overlaps = markers.iter().any(|&(ms, me)| start < me && ms < end);
            assert!(overlaps, "the secret form {form:?} survived in {s:?}");
            from = start + s[start..].chars().next().map_or(1, char::len_utf8);
        }
    }
}

fn has_float(v: &Value) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Number(n) if n.is_f64() => return true,
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    false
}

pub(crate) use ptd_wire::redact::strings_in;

/// A workspace for [`workspace_path_in`]: `root/` holding files, folders and symlinks that
/// stay inside, leave it (`..`, absolute, into a sibling), loop, or dangle; `outside/` next to
/// it. Removed when dropped.
pub struct PathFixture {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    roots: [Root; 2],
}

impl PathFixture {
    /// Build the tree in a new temp folder and open its root with both resolvers.
    pub fn new() -> std::io::Result<PathFixture> {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir()?;
        let base = dir.path().canonicalize()?;
        let root = base.join("root");
        std::fs::create_dir_all(root.join("a/b"))?;
        std::fs::create_dir_all(base.join("outside"))?;
        std::fs::write(root.join("f.txt"), "f")?;
        std::fs::write(root.join("a/b/g.txt"), "g")?;
        std::fs::write(base.join("outside/secret.txt"), "secret")?;
        for (target, link) in [
            ("a", "in"),
            ("a/b/g.txt", "file_link"),
            ("..", "up"),
            ("../outside", "out"),
            ("../../../outside/secret.txt", "a/b/deep"),
            ("..", "a/b/back"),
            ("../..", "a/b/top"),
            ("/etc", "abs"),
            ("loop", "loop"),
            ("missing", "dangling"),
            ("in/b/back/../file_link", "maze"),
        ] {
            symlink(target, root.join(link))?;
        }
        // Absolute, even though it names the root itself.
        symlink(&root, root.join("abs_in"))?;
        let roots = [
            Root::open_with(&root, Resolver::Openat2)?,
            Root::open_with(&root, Resolver::Walk)?,
        ];
        Ok(PathFixture {
            _dir: dir,
            root,
            roots,
        })
    }
}

/// [`workspace_path_in`] on a tree made once per thread (a fuzzer's; the tree is left in the
/// temp folder when the process exits).
pub fn workspace_path(data: &[u8]) {
    thread_local! {
        static TREE: PathFixture = PathFixture::new().expect("the fixture tree");
    }
    TREE.with(|tree| workspace_path_in(tree, data));
}

/// The workspace adapter's containment: [`RelPath::parse`] keeps only relative, normalised
/// paths (idempotent on its own output), and whatever both resolvers open or locate in
/// `tree` lies beneath its root, whichever symlinks the path walks through; both resolvers
/// open the same file or refuse alike.
pub fn workspace_path_in(tree: &PathFixture, data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let rel = match RelPath::parse(raw) {
        Ok(rel) => rel,
        Err(PathError::Invalid(_) | PathError::OutsideRoot) => return,
        Err(other) => panic!("parse gave a resolution error: {other:?}"),
    };
    let shown = rel.display();
    assert!(!shown.starts_with('/') && !shown.contains('\0'));
    assert!(
        shown == "."
            || shown
                .split('/')
                .all(|p| !p.is_empty() && p != ".." && p != ".")
    );
    assert_eq!(RelPath::parse(&shown).expect("its own output parses"), rel);
    let inside = |fd: &std::os::fd::OwnedFd| {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let at = std::fs::read_link(&link).expect("a descriptor has a path");
        assert!(
            at.starts_with(&tree.root),
            "{raw:?} resolved outside: {at:?}"
        );
        std::fs::metadata(&link).ok().map(|m| (m.dev(), m.ino()))
    };
    let mut opened = Vec::new();
    for root in &tree.roots {
        let flags = ptd_sys::fs::OFlags::RDONLY | ptd_sys::fs::OFlags::CLOEXEC;
        opened.push(root.open_beneath(&rel, flags).ok().map(|fd| inside(&fd)));
        if let Ok(located) = root.locate(&rel, false, None) {
            inside(&located.parent);
        }
    }
    assert_eq!(
        opened[0], opened[1],
        "openat2 and the walk disagree on {raw:?}"
    );
}

/// The host delegation checks: `data` is a request, a NUL byte, an answer. Whatever the
/// strict reader accepts is checked without panicking; a scope only holds values that passed
/// their rule (a digest is 64 lowercase hex characters); an accepted answer found nothing.
pub fn delegation(data: &[u8]) {
    let (request, answer) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b""[..]),
    };
    let Ok(request) = json::check(request, MAX) else {
        return;
    };
    let (scope, findings) = checks::check_request(request);
    if let Some(digest) = &scope.source_digest {
        assert!(is_lower_hex(digest, 64), "{digest}");
    }
    if let Some(id) = &scope.request_id {
        assert!(!id.is_empty() && id.trim() == id);
    }
    assert_eq!(findings.is_clean(), findings.worst().is_none());
    well_formed(&findings.into_issues());
    for text in [request, std::str::from_utf8(answer).unwrap_or_default()] {
        if let Some(fields) = Fields::parse(text) {
            for (_, value) in fields.iter() {
                if let Ok(digest) = checks::digest(value) {
                    assert!(is_lower_hex(&digest, 64), "{digest}");
                }
            }
        }
    }
    let Ok(answer) = json::check(answer, MAX) else {
        return;
    };
    match checks::check_answer(answer, &scope) {
        Ok(accepted) => {
            for part in [accepted.result, accepted.error].into_iter().flatten() {
                assert!(matches!(Kind::of(part), Kind::Object | Kind::Null));
            }
        }
        Err(findings) => {
            assert!(!findings.is_clean());
            well_formed(&findings.into_issues());
        }
    }
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Issues as the envelope carries them: a code, a JSON Pointer (or the root), a message; at
/// most the cap plus its summary.
fn well_formed(issues: &[Issue]) {
    assert!(issues.len() <= MAX_ISSUES + 1, "{} issues", issues.len());
    for issue in issues {
        assert!(!issue.code.is_empty());
        assert!(
            issue.path.is_empty() || issue.path.starts_with('/'),
            "{issue:?}"
        );
        assert!(!issue.message.is_empty(), "{issue:?}");
    }
}
