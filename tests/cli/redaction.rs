//! Secrets and host paths never leave (SPEC §5): not on stdout, not in a transcript.

use super::*;
use base64::Engine;

const SECRET: &str = "s3cr3t-\"quoted\"\\slash/plus+eq=amp&end";

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn forms(secret: &str) -> Vec<(&'static str, String)> {
    let escaped = serde_json::to_string(secret).unwrap();
    vec![
        ("plain", secret.to_string()),
        ("json-escaped", escaped[1..escaped.len() - 1].to_string()),
        ("url-encoded", url_encode(secret)),
        (
            "base64",
            base64::engine::general_purpose::STANDARD.encode(secret),
        ),
        (
            "base64url",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret),
        ),
    ]
}

fn assert_no_secret(text: &str, place: &str) {
    for (form, value) in forms(SECRET) {
        assert!(
            !text.contains(&value),
            "{form} form of the secret in {place}: {text}"
        );
    }
}

fn answer(status: &str, extra: Value) -> String {
    let mut v = json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "ptr_123", "tool": "workspace.read", "operation": "call", "status": status});
    for (k, val) in extra.as_object().unwrap() {
        v[k] = val.clone();
    }
    format!("print:{v}")
}

fn all_forms_in(prefix: &str) -> Value {
    let inner = json!({"k": SECRET}).to_string();
    json!({
        "plain": format!("{prefix} {SECRET}"),
        "embedded_json": inner,
        "url": format!("https://example.com/cb?q={}", url_encode(SECRET)),
        "b64": base64::engine::general_purpose::STANDARD.encode(SECRET),
        "b64url": base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(SECRET),
        "SECRET_KEY_AS_KEY": {SECRET: 1},
    })
}

fn stderr_with_all_forms() -> String {
    let escaped = serde_json::to_string(SECRET).unwrap();
    format!(
        "eprint:plain {SECRET}\nescaped {escaped}\nurl {}\nb64 {}\n",
        url_encode(SECRET),
        base64::engine::general_purpose::STANDARD.encode(SECRET)
    )
}

#[test]
fn a_planted_secret_reaches_neither_stdout_nor_the_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let run = Dispatch::adapter(&[
        "read-stdin",
        &stderr_with_all_forms(),
        &answer(
            "succeeded",
            json!({"output": all_forms_in("output"), "diagnostics": all_forms_in("diag")}),
        ),
    ])
    .env("PLANTED", SECRET)
    .args(&[
        "--secret-env",
        "PLANTED",
        "--artifact-dir",
        dir.path().to_str().unwrap(),
    ])
    .run();
    run.expect("succeeded", None, 0);
    assert_no_secret(&run.stdout, "stdout");
    assert!(run.stdout.contains("[redacted]"));
    let transcript =
        std::fs::read_to_string(dir.path().join("files/parent-tools/ptr_123.json")).unwrap();
    assert_no_secret(&transcript, "the transcript");
    // Still valid JSON after redaction.
    let _: Value = serde_json::from_str(&transcript).unwrap();
    // The adapter did receive the secret: --secret-env passes it.
    let run = Dispatch::adapter(&["echo"])
        .env("PLANTED", SECRET)
        .args(&["--secret-env", "PLANTED"])
        .run();
    assert_eq!(run.envelope["output"]["env"]["PLANTED"], "[redacted]");
    assert_no_secret(&run.stdout, "stdout of echo");
}

#[test]
fn a_planted_secret_in_a_failure_message_is_scrubbed() {
    let error = json!({"code": "boom", "message": format!("failed with {SECRET}"), "retryable": false,
        "details": all_forms_in("details")});
    let run = Dispatch::adapter(&["read-stdin", &answer("failed", json!({"error": error}))])
        .env("PLANTED", SECRET)
        .args(&["--secret-env", "PLANTED"])
        .run();
    run.expect("failed", Some("boom"), 1);
    assert_no_secret(&run.stdout, "stdout");
    assert_no_secret(&run.stderr, "the dispatcher's stderr");
}

#[test]
fn sensitive_pass_env_and_bridge_env_values_are_secrets_too() {
    let run = Dispatch::adapter(&["echo"])
        .bridge(|b| {
            b["dispatcher"]["command"]["env"] = json!({"SERVICE_API_KEY": "bridge-key-value-123"})
        })
        .env("GITHUB_TOKEN", "passed-token-value-456")
        .args(&["--pass-env", "GITHUB_TOKEN"])
        .run();
    run.expect("succeeded", None, 0);
    assert!(
        !run.stdout.contains("bridge-key-value-123"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("passed-token-value-456"),
        "{}",
        run.stdout
    );
    // A name that does not look sensitive is product data and passes through.
    let run = Dispatch::adapter(&["echo"])
        .env("PLAIN_SETTING", "plain-value-789")
        .args(&["--pass-env", "PLAIN_SETTING"])
        .run();
    assert_eq!(
        run.envelope["output"]["env"]["PLAIN_SETTING"],
        "plain-value-789"
    );
}

#[test]
fn each_redaction_class_is_applied_to_adapter_stderr() {
    let leaks = [
        (
            "Authorization: Bearer abcdefghijklmnopqrstuv",
            "abcdefghijklmnopqrstuv",
        ),
        (
            "Authorization: Basic dXNlcjpodW50ZXIyaHVudGVy",
            "dXNlcjpodW50ZXIyaHVudGVy",
        ),
        ("Cookie: session=abc123def456ghi", "abc123def456ghi"),
        ("Set-Cookie: id=zzz999yyy888; Path=/", "zzz999yyy888"),
        (
            "fetch https://deploy:hunter2pass@example.com/repo.git",
            "hunter2pass",
        ),
        (
            "GET https://example.com/cb?access_token=tok123456789xyz&x=1",
            "tok123456789xyz",
        ),
        (
            "key sk-abcdefghijklmnopqrstuvwx1234",
            "sk-abcdefghijklmnopqrstuvwx1234",
        ),
        (
            "gh ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        ),
        (
            "pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        ),
        (
            "slack xoxb-123456789012-abcdefghijkl",
            "xoxb-123456789012-abcdefghijkl",
        ),
        ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        (
            "gitlab glpat-abcdefghijklmnopqrst",
            "glpat-abcdefghijklmnopqrst",
        ),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
            "eyJzdWIiOiIxMjM0NSJ9",
        ),
        ("password=hunter2hunter2", "hunter2hunter2"),
        ("api_key: zzzzyyyyxxxxwwww", "zzzzyyyyxxxxwwww"),
        ("client_secret=\"two words secret\"", "two words secret"),
        ("open /home/alice/project/file.txt", "/home/alice"),
        ("open /Users/bob/Library/x", "/Users/bob"),
        ("open /root/.ssh/id_rsa", "/root/.ssh"),
    ];
    let prose = [
        "token validation passed",
        "the password is wrong",
        "sandbox_session_id=abc-123",
        "tokenizer_model: gpt-like",
        "see https://example.com/docs?page=2",
        "relative/path/file.txt",
    ];
    let text: String = leaks
        .iter()
        .map(|(l, _)| *l)
        .chain(prose)
        .collect::<Vec<_>>()
        .join("\n");
    let run = Dispatch::adapter(&["read-stdin", &format!("eprint:{text}"), "exit:3"]).run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    let tail = run.dispatch()["stderr_tail"].as_str().unwrap();
    for (line, secret) in leaks {
        assert!(
            !tail.contains(secret),
            "{line:?} leaked {secret:?}:\n{tail}"
        );
    }
    for line in prose {
        assert!(tail.contains(line), "prose changed: {line:?}\n{tail}");
    }
    assert!(tail.contains("[host-path]/project/file.txt"), "{tail}");
    assert!(tail.contains("[redacted]"));
}

#[test]
fn the_dispatchers_cwd_and_home_never_appear() {
    let cwd = tempfile::Builder::new()
        .prefix("cwd-marker-")
        .tempdir()
        .unwrap();
    let home = tempfile::Builder::new()
        .prefix("home-marker-")
        .tempdir()
        .unwrap();
    let cwd_s = std::fs::canonicalize(cwd.path())
        .unwrap()
        .display()
        .to_string();
    let home_s = home.path().display().to_string();
    let artifacts = tempfile::tempdir().unwrap();
    let says = format!("eprint:cannot open {cwd_s}/x and {home_s}/.config/y\n");
    let diag = json!({"diagnostics": {"where": format!("{cwd_s}/build"), "home": home_s.clone()},
        "error": {"code": "boom", "message": format!("no file at {home_s}/z"), "retryable": false}});
    let run = Dispatch::adapter(&["read-stdin", &says, &answer("failed", diag)])
        .cwd(cwd.path())
        .env("HOME", &home_s)
        .args(&["--artifact-dir", artifacts.path().to_str().unwrap()])
        .run();
    run.expect("failed", Some("boom"), 1);
    assert!(!run.stdout.contains(&cwd_s), "{}", run.stdout);
    assert!(!run.stdout.contains(&home_s), "{}", run.stdout);
    assert!(run.stdout.contains("[host-path]"));
    let transcript =
        std::fs::read_to_string(artifacts.path().join("files/parent-tools/ptr_123.json")).unwrap();
    assert!(!transcript.contains(&cwd_s) && !transcript.contains(&home_s));
    assert!(!transcript.contains(artifacts.path().to_str().unwrap()));
}

#[test]
fn output_is_passed_through_apart_from_exact_secrets() {
    let output =
        json!({"password": "product-data", "path": "/home/alice/x", "note": "Bearer abcdefghijkl"});
    let run = Dispatch::adapter(&[
        "read-stdin",
        &answer("succeeded", json!({"output": output.clone()})),
    ])
    .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.envelope["output"], output);
}

#[test]
fn the_adapters_program_path_and_working_directory_never_appear() {
    // Neither lies below the dispatcher's cwd (/), HOME or the temp folder: only the adapter
    // rules can hide them.
    let work = tempfile::Builder::new()
        .prefix("adapter-cwd-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let work_s = work.path().display().to_string();
    let program = test_bin().display().to_string();
    let path = format!(
        "{}:{}",
        test_bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let says = format!("eprint:running {program} in {work_s}/sub\n");
    let run = Dispatch::adapter(&["read-stdin", &says, "exit:3"])
        .bridge(|b| {
            b["dispatcher"]["command"]["argv"][0] = json!("ptd-test");
            b["dispatcher"]["command"]["cwd_env"] = json!("ADAPTER_CWD");
        })
        .env("ADAPTER_CWD", &work_s)
        .env("PATH", &path)
        .cwd(Path::new("/"))
        .run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    let tail = run.dispatch()["stderr_tail"].as_str().unwrap();
    assert!(
        !tail.contains(&program) && !tail.contains(&work_s),
        "{tail}"
    );
    assert!(tail.contains("[host-path]/sub"), "{tail}");
}

#[test]
fn values_of_the_names_spec_5_added_are_secrets() {
    for (name, value) in [
        ("GPG_PASSPHRASE", "passphrase-value-123"),
        ("JWT_SIGNING_KEY", "signing-key-value-456"),
        ("AWS_SESSION_TOKEN", "session-token-value-789"),
        ("SSH_PRIVATE_KEY", "private-key-value-000"),
        ("X_API_KEY", "x-api-key-value-111"),
    ] {
        let run = Dispatch::adapter(&["echo"])
            .env(name, value)
            .args(&["--pass-env", name])
            .run();
        run.expect("succeeded", None, 0);
        assert_eq!(run.envelope["output"]["env"][name], "[redacted]", "{name}");
        assert!(!run.stdout.contains(value), "{name}: {}", run.stdout);
        assert!(!run.stderr.contains(value), "{name}: {}", run.stderr);
    }
}

#[test]
fn host_paths_and_credentials_used_as_keys_are_redacted() {
    let diagnostics = json!({"files": {
        "/home/alice/project/a.rs": "changed",
        "token=keyed-credential-123": 1,
        "/home/bob": 2,
        "/home/carol": 3
    }});
    let run = Dispatch::adapter(&[
        "read-stdin",
        &answer("succeeded", json!({"diagnostics": diagnostics})),
    ])
    .run();
    run.expect("succeeded", None, 0);
    for leak in [
        "/home/alice",
        "/home/bob",
        "/home/carol",
        "keyed-credential-123",
    ] {
        assert!(!run.stdout.contains(leak), "{leak}: {}", run.stdout);
        assert!(!run.stderr.contains(leak), "{leak}: {}", run.stderr);
    }
    let files = &run.envelope["diagnostics"]["files"];
    assert_eq!(files["[host-path]/project/a.rs"], "changed", "{files}");
    // Still an assignment to `token` once redacted, so its value goes too.
    assert_eq!(files["token=[redacted]"], "[redacted]", "{files}");
    // Keys that come out the same stay apart.
    assert_eq!(files["[host-path]"], 2, "{files}");
    assert_eq!(files["[host-path]~2"], 3, "{files}");
}

#[test]
fn a_secret_equal_to_a_key_of_the_envelope_never_renames_that_key() {
    // `ranscript` is part of `transcripts` and `transcript_error`.
    let secrets = [
        ("S_TRANSCRIPTS", "transcripts"),
        ("S_STDOUT", "stdout_bytes"),
        ("S_RETRYABLE", "retryable"),
        ("S_PART", "ranscript"),
    ];
    let error = json!({"code": "boom", "message": "lost the transcripts and stdout_bytes",
        "retryable": false});
    for (status, extra) in [
        ("failed", json!({"error": error})),
        (
            "succeeded",
            json!({"output": {"transcripts": "my transcripts", "n": {"retryable": 1}}}),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut dispatch = Dispatch::adapter(&["read-stdin", &answer(status, extra)]);
        let mut args = vec!["--artifact-dir", dir.path().to_str().unwrap()];
        for (name, value) in secrets {
            dispatch = dispatch.env(name, value);
            args.extend(["--secret-env", name]);
        }
        let run = dispatch.args(&args).run();
        let transcript: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("files/parent-tools/ptr_123.json")).unwrap(),
        )
        .unwrap();
        let recorded = &transcript["tool_calls"][0]["metadata"]["result"];
        for envelope in [&run.envelope, recorded] {
            assert!(
                envelope["artifacts"]["transcripts"].is_array(),
                "{envelope}"
            );
            assert!(
                envelope["diagnostics"]["dispatch"]["stdout_bytes"].is_u64(),
                "{envelope}"
            );
        }
        assert!(run.envelope["artifacts"]["transcripts"][0]["path"].is_string());
        if status == "failed" {
            run.expect("failed", Some("boom"), 1);
            assert_eq!(
                run.output().stderr(),
                "error[boom]: lost the [redacted] and [redacted]\n"
            );
            for envelope in [&run.envelope, recorded] {
                assert_eq!(envelope["error"]["retryable"], false, "{envelope}");
                assert_eq!(
                    envelope["error"]["message"],
                    "lost the [redacted] and [redacted]"
                );
            }
        } else {
            run.expect("succeeded", None, 0);
            assert_eq!(run.stderr, "");
            // Keys stay, values are still scrubbed.
            assert_eq!(
                run.envelope["output"],
                json!({"transcripts": "my [redacted]", "n": {"retryable": 1}})
            );
        }
    }
}
