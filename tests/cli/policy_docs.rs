//! The policies docs/policy.md shows keep loading (SPEC §16): the worked example and the
//! policy of "From flags to a policy" are taken from the document as written — the first
//! ```toml block after each heading — given host paths that exist on the test machine, and
//! checked with `policy check` against a bridge that allows their tools (`fixtures/bridge.json`
//! with its `allowed_tools` changed, as the document says). Exit status, stdout and stderr are
//! all stated, and the lines the document shows as this output are the ones printed.

use super::{bin, sha256_hex, Cmd};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const DOC: &str = include_str!("../../docs/policy.md");

/// The tools the worked example's bridge allows (docs/policy.md lists them).
const EXAMPLE_TOOLS: [&str; 10] = [
    "workspace.read",
    "workspace.search",
    "workspace.write",
    "workspace.edit",
    "git.status",
    "git.diff",
    "git.log",
    "git.commit",
    "github.issues.list",
    "github.issues.comment",
];

/// The first ```toml block after the heading `## {heading}`, within that section.
fn toml_block_after(heading: &str) -> String {
    let marker = format!("\n## {heading}\n");
    let start = DOC
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/policy.md has no heading `## {heading}`"));
    let section = &DOC[start + marker.len()..];
    let section = section.split("\n## ").next().unwrap();
    let open = "```toml\n";
    let at = section
        .find(&format!("\n{open}"))
        .unwrap_or_else(|| panic!("no ```toml block under `## {heading}`"));
    let body = &section[at + 1 + open.len()..];
    let end = body
        .find("\n```\n")
        .unwrap_or_else(|| panic!("the ```toml block under `## {heading}` is not closed"));
    body[..=end].to_string()
}

/// `text` with each host path of the document replaced by one of this machine; every one must
/// be in the text (a document that changed its paths must change this test too), and no host
/// path is left.
fn on_this_machine(text: &str, paths: &[(&str, &Path)]) -> String {
    let mut text = text.to_string();
    for (host, here) in paths {
        assert!(text.contains(host), "the policy no longer names {host}");
        text = text.replace(host, &here.display().to_string());
    }
    for host in ["/srv/", "/opt/", "/var/lib/"] {
        assert!(
            !text.contains(host),
            "a host path is left: {host} in\n{text}"
        );
    }
    text
}

/// Write `text` as `dir/policy.toml`, mode 0600 (writable by its owner alone, as a policy must
/// be), and `bridge` as `dir/bridge.json`.
fn write_host_files(dir: &Path, text: &str, bridge: &Value) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join("policy.toml"))
        .unwrap();
    file.write_all(text.as_bytes()).unwrap();
    std::fs::write(dir.join("bridge.json"), bridge.to_string()).unwrap();
}

/// `fixtures/bridge.json` allowing `tools`, with `dispatcher.timeout_ms` set when given.
fn bridge(tools: &[&str], timeout_ms: Option<u64>) -> Value {
    let mut bridge: Value =
        serde_json::from_str(include_str!("../../fixtures/bridge.json")).unwrap();
    bridge["allowed_tools"] = json!(tools);
    if let Some(ms) = timeout_ms {
        bridge["dispatcher"]["timeout_ms"] = json!(ms);
    }
    bridge
}

/// The binary under test run in `dir`, with the folder of the binary first on `PATH`: the
/// policies name their adapter `parent-tool-dispatch`, which must be found on `PATH` when the
/// policy is loaded. No ledger or session of the environment the tests run in.
fn in_host(dir: &Path, args: &[&str]) -> Cmd {
    let folder: PathBuf = bin().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(std::iter::once(folder).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    Cmd::new(args)
        .cwd(dir)
        .env("PATH", path)
        .env_remove("PARENT_TOOL_DISPATCH_LEDGER")
        .env_remove("PARENT_TOOL_DISPATCH_SESSION")
}

/// The worked example loads with its bridge, without a warning, and decides `git.commit` as
/// the document says: its entry asks a person (`approval_required`), and `policy explain`
/// makes no approval (nor the ledger).
///
/// Its host paths, replaced by ones that exist here: `/srv/ws` (the checkout the workspace and
/// git entries are granted; a grant must exist) by a temporary folder; the API adapter
/// `/opt/tools/github-adapter` by this dispatcher's own binary, an absolute program that
/// exists; the ledger `/var/lib/parent-tool-dispatch/ledger.db` by a path in another
/// temporary folder (no grant may cover the ledger's folder; `policy check` and `policy
/// explain` never create it). The notifier (`approval_notify`, a `curl` to a chat webhook) is
/// only checked for its form: `policy explain` never runs it.
#[test]
fn the_worked_example_loads() {
    let host = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let ledger = state.path().join("ledger.db");
    let adapter = bin();
    let text = on_this_machine(
        &toml_block_after("A worked example"),
        &[
            ("/srv/ws", ws.path()),
            ("/opt/tools/github-adapter", adapter.as_path()),
            ("/var/lib/parent-tool-dispatch/ledger.db", ledger.as_path()),
        ],
    );
    write_host_files(host.path(), &text, &bridge(&EXAMPLE_TOOLS, Some(60_000)));
    checked(
        host.path(),
        "policy.toml: valid, 4 [[tool]] entries, sha256 ",
        &text,
    )
    .stderr_empty();

    // `git.commit` is decided by its own entry (the line the document names), which asks a
    // person: an approval would be made, so the call would not run.
    // The `[[tool]]` header is the line just above its `match`: its 1-based number is the
    // 0-based index of the `match` line.
    let line = text
        .lines()
        .position(|l| l == "match = \"git.commit\"")
        .expect("an entry for git.commit");
    assert_eq!(text.lines().nth(line - 1), Some("[[tool]]"));
    assert!(
        DOC.contains(&format!("\"entry\":\"git.commit\",\"line\":{line}}}")),
        "docs/policy.md names another line for git.commit"
    );
    let entry = text
        .split("\n[[tool]]\n")
        .find(|e| e.starts_with("match = \"git.commit\"\n"));
    let entry = entry.expect("the git.commit entry");
    assert!(entry.contains("\ndecision = \"ask\"\n"), "{entry}");
    assert!(
        entry.contains("\napproval_notify = [\"/usr/bin/curl\""),
        "{entry}"
    );
    let mut request: Value =
        serde_json::from_str(include_str!("../../fixtures/request.json")).unwrap();
    request["tool"] = json!("git.commit");
    request["input"] = json!({"message": "Fix the greeting"});
    request["authorization"]["allowed_tools"] = json!(["git.commit"]);
    let out = in_host(
        host.path(),
        &[
            "policy",
            "explain",
            "--json",
            "--policy",
            "policy.toml",
            "--parent-tool-bridge",
            "@bridge.json",
        ],
    )
    .env("SANDBOX_SESSION_ID", "sandbox_123")
    .stdin(request.to_string())
    .run();
    out.exit(0).stderr_empty().stdout_with(|stdout| {
        let report: Value = serde_json::from_str(stdout).unwrap();
        assert_eq!(
            report["entry"],
            json!({"match": "git.commit", "line": line})
        );
        assert_eq!(
            report["decision"],
            json!({"runs": false, "code": "approval_required", "replays": false})
        );
        let answer = "ask a person: a new approval would be made";
        assert_eq!(report["ledger"]["answer"], answer);
        assert!(
            DOC.contains("\"code\": \"approval_required\"")
                && DOC.contains(&format!("\"answer\": \"{answer}\"")),
            "docs/policy.md shows another decision for git.commit"
        );
    });
    // Explaining asked nobody: no ledger was made, so no approval either.
    assert!(!ledger.exists(), "policy explain made the ledger");
    in_host(
        host.path(),
        &[
            "approvals",
            "list",
            "--ledger",
            &ledger.display().to_string(),
        ],
    )
    .run()
    .exit(69)
    .stdout_empty()
    .stderr_eq("error[ledger_unavailable]: the ledger file does not exist\n");
}

/// The policy that replaces the flags loads with its bridge; the two warnings are the ones the
/// document shows (the tools no entry covers run the bridge's command, as with the flags).
///
/// Its host paths, replaced: `/srv/ws` (granted in `[defaults]`) by a temporary folder, the
/// ledger by a path in another.
#[test]
fn the_policy_that_replaces_the_flags_loads() {
    let host = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let ledger = state.path().join("ledger.db");
    let text = on_this_machine(
        &toml_block_after("From flags to a policy"),
        &[
            ("/srv/ws", ws.path()),
            ("/var/lib/parent-tool-dispatch/ledger.db", ledger.as_path()),
        ],
    );
    let tools = ["workspace.read", "workspace.search", "workspace.write"];
    write_host_files(host.path(), &text, &bridge(&tools, None));
    let warning = |tool: &str| {
        format!(
            "warning[policy]: policy.toml:1:1: the bridge allows `{tool}`, which no entry \
             covers: it runs the bridge's dispatcher.command.argv under [defaults]\n"
        )
    };
    let stderr = format!(
        "{}{}",
        warning("workspace.read"),
        warning("workspace.search")
    );
    for line in stderr.lines() {
        assert!(DOC.contains(line), "docs/policy.md does not show {line}");
    }
    checked(
        host.path(),
        "policy.toml: valid, 1 [[tool]] entry, sha256 ",
        &text,
    )
    .stderr_eq(stderr);
}

/// `policy check policy.toml --parent-tool-bridge @bridge.json` in `host`: exit 0 and the
/// summary line the doc shows (`summary`, then the digest of `text`); stderr is the caller's
/// to state.
fn checked(host: &Path, summary: &str, text: &str) -> crate::support::Output {
    assert!(
        DOC.contains(summary),
        "docs/policy.md shows another summary"
    );
    let args = [
        "policy",
        "check",
        "policy.toml",
        "--parent-tool-bridge",
        "@bridge.json",
    ];
    let out = in_host(host, &args).run();
    out.exit(0)
        .stdout_eq(format!("{summary}{}\n", sha256_hex(text)));
    out
}
