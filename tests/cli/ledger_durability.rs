//! `--ledger-durability` (SPEC §14.4) through the binary: what `normal` changes — the claim's
//! and the outcome's commits are no longer synced, the checkpoint after the envelope syncs
//! them — what it keeps (idempotency, the audit chain, a file that stands alone after each
//! call), and how a choice that is not one is refused on the command line, in its variable and
//! in a policy. The syncs are counted with `strace`.

use super::*;
use crate::ledger_rules::Setup;
use std::os::unix::fs::PermissionsExt;

/// The main job on `s`'s ledger for `request_id`, with `args` after `--ledger`: see
/// [`traced_with`].
fn traced(s: &Setup, request_id: &str, args: &[&str], env: &[(&str, &str)]) -> (Value, usize) {
    let mut host = vec!["--ledger", s.path()];
    host.extend(args);
    traced_with(s, request_id, &host, env)
}

/// The main job with the host's options `host` (which name the ledger, or a policy that does)
/// for `request_id`, under `strace` counting its `fsync` and `fdatasync` calls (every thread
/// and child); checked: exit 0, one succeeded envelope, stderr empty. Returns the envelope and
/// the count.
fn traced_with(s: &Setup, request_id: &str, host: &[&str], env: &[(&str, &str)]) -> (Value, usize) {
    let log = s.dir.path().join(format!("strace-{request_id}.txt"));
    let mut req = request();
    req["request_id"] = json!(request_id);
    let mut cmd = Cmd::of(
        PathBuf::from("strace"),
        [
            "-f",
            "-qq",
            "-e",
            "trace=fsync,fdatasync",
            "-o",
            log.to_str().unwrap(),
        ],
    )
    .arg(bin())
    .args(host)
    .arg("--parent-tool-bridge")
    .arg(s.bridge(&["echo"]).to_string())
    .stdin(req.to_string());
    for (name, value) in env {
        cmd = cmd.env(name, value);
    }
    let out = cmd.run();
    let mut envelope = Value::Null;
    out.exit(0)
        .stderr_empty()
        .stdout_json(|v| envelope = v.clone());
    assert_eq!(envelope["status"], "succeeded", "{envelope}");
    assert_eq!(envelope["request_id"], request_id);
    (envelope, syncs_in(&log))
}

/// The `fsync` and `fdatasync` calls in `strace`'s log (its other lines are signals).
fn syncs_in(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("fsync(") || l.contains("fdatasync("))
        .count()
}

/// The size of the ledger's WAL: 0 once a checkpoint has moved everything into the file.
fn wal_bytes(s: &Setup) -> u64 {
    let wal = format!("{}-wal", s.path());
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

#[test]
fn normal_durability_syncs_only_at_the_checkpoint_and_keeps_every_rule() {
    require!(skip::program("strace", &["-V"]));
    let s = Setup::new();
    let policy = s.dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[ledger]\npath = {:?}\ndurability = \"normal\"\n",
            s.path()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The ledger is made by the first call; the counts below are of a new key each.
    traced(&s, "ptr_make", &[], &[]);
    let (_, full) = traced(&s, "ptr_full", &[], &[]);
    let (_, explicit_full) = traced(&s, "ptr_full_2", &["--ledger-durability", "full"], &[]);
    let (normal_envelope, normal) =
        traced(&s, "ptr_normal", &["--ledger-durability", "normal"], &[]);
    let (_, by_variable) = traced(
        &s,
        "ptr_variable",
        &[],
        &[("PARENT_TOOL_DISPATCH_LEDGER_DURABILITY", "normal")],
    );
    assert_eq!(full, explicit_full, "full is the default");
    // `full` syncs the WAL at the claim's and at the outcome's commit; `normal` does not, and
    // the checkpoint after the envelope still syncs the WAL and the file.
    assert_eq!(full, normal + 2, "full {full}, normal {normal}");
    assert!(normal >= 2, "the checkpoint syncs: {normal}");
    assert_eq!(by_variable, normal);
    // The policy's choice is the same one. Its ledger is the same file (the policy names it).
    let (_, by_policy) = traced_with(
        &s,
        "ptr_policy",
        &["--policy", policy.to_str().unwrap()],
        &[],
    );
    assert_eq!(by_policy, normal);
    // Every rule holds: the file stands alone after the call, the key replays without
    // running, and the chain is whole.
    assert_eq!(wal_bytes(&s), 0);
    let runs = s.runs();
    let (again, _) = traced(&s, "ptr_normal", &["--ledger-durability", "normal"], &[]);
    assert_eq!(again["diagnostics"]["ledger"]["replayed"], true);
    assert_eq!(
        normal_envelope["diagnostics"]["ledger"]["replayed"], false,
        "{normal_envelope}"
    );
    assert_eq!(s.runs(), runs, "a replay runs nothing");
    assert_eq!(wal_bytes(&s), 0);
    s.verify(7);
    // `policy explain` says which choice is in force.
    let explain = |json: bool| {
        let mut cmd = Cmd::new(["policy", "explain", "--policy", policy.to_str().unwrap()])
            .arg("--parent-tool-bridge")
            .arg(s.bridge(&["echo"]).to_string())
            .stdin(request().to_string());
        if json {
            cmd = cmd.arg("--json");
        }
        cmd.run()
    };
    let out = explain(true);
    out.exit(0).stderr_empty();
    assert_eq!(out.json()["ledger"]["durability"], "normal");
    explain(false)
        .exit(0)
        .stderr_empty()
        .stdout_contains(format!("ledger: {} (normal durability; answer: ", s.path()));
}

#[test]
fn a_durability_that_is_not_a_choice_is_refused_before_anything_runs() {
    let s = Setup::new();
    for (args, env) in [
        (&["--ledger-durability", "sometimes"][..], None),
        (&["--ledger-durability", "FULL"][..], None),
        (&[][..], Some("off")),
    ] {
        let mut run = s.dispatch(&["echo"]).args(args);
        if let Some(value) = env {
            run = run.env("PARENT_TOOL_DISPATCH_LEDGER_DURABILITY", value);
        }
        let value = env.unwrap_or_else(|| args[1]);
        run.run()
            .output()
            .exit(2)
            .stdout_empty()
            .stderr_contains(format!(
                "invalid value '{value}' for '--ledger-durability <CHOICE>'"
            ))
            .stderr_contains("[possible values: full, normal]");
    }
    assert_eq!(s.runs(), 0);
    assert!(!s.ledger.exists());
    // In a policy: `policy check` names the line; beside the flag, a usage error.
    let policy = s.dir.path().join("policy.toml");
    std::fs::write(&policy, "version = 1\n[ledger]\ndurability = \"off\"\n").unwrap();
    std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o600)).unwrap();
    Cmd::new(["policy", "check", policy.to_str().unwrap()])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_contains(":3:14: `durability`: `off` is not one of full, normal");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[ledger]\npath = {:?}\ndurability = \"full\"\n",
            s.path()
        ),
    )
    .unwrap();
    for (args, env) in [
        (&["--ledger-durability", "normal"][..], None),
        (&[][..], Some("normal")),
    ] {
        let mut run = Dispatch::with_bridge(s.bridge(&["echo"]))
            .args(&["--policy", policy.to_str().unwrap()])
            .args(args);
        if let Some(value) = env {
            run = run.env("PARENT_TOOL_DISPATCH_LEDGER_DURABILITY", value);
        }
        run.run()
            .output()
            .exit(2)
            .stdout_empty()
            .stderr_starts_with(
                "error[usage]: --ledger-durability (or PARENT_TOOL_DISPATCH_LEDGER_DURABILITY) \
             cannot be used with this policy: it sets [ledger] durability itself",
            );
    }
    assert_eq!(s.runs(), 0);
    assert!(!s.ledger.exists());
}
