//! `replay`'s confinement options (SPEC §7, §13): checked, then forwarded to the child
//! dispatcher of every `argv` case, so that case's adapter is confined; a case that confines
//! itself while replay does is refused (one place decides).

use super::replay::{replay_with, write_case};
use super::*;

/// An argv case whose adapter is `sh -c SCRIPT` (its request read first) and which expects
/// the adapter to exit with `exit_code`.
fn shell_case(name: &str, script: &str, exit_code: i32) -> Value {
    let mut req = request();
    req["request_id"] = json!("confine-1");
    json!({
        "schema": "parent-tool-dispatch/fixture/v1",
        "name": name,
        "bridge": bridge(&[]),
        "request": req,
        "adapter": {"argv": ["/bin/sh", "-c", format!("cat >/dev/null; {script}")]},
        "expect": {"status": "failed", "error_code": "adapter_exit_nonzero", "exit_code": 1,
            "result": {"diagnostics": {"dispatch": {"exit_code": exit_code}}}}
    })
}

#[test]
fn confinement_options_reach_the_dispatcher_of_an_argv_case_checked_and_canonical() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("f"), "x").unwrap();
    // The adapter cannot see its dispatcher (its own PID namespace, SPEC §13.2): it looks at
    // what it got instead — 7 when its limits are the values replay checked (a size in
    // bytes) and Landlock keeps it from a file outside the forwarded `--fs-read`, else 3.
    let script = format!(
        "grep -q '^Max open files *256 *256 ' /proc/self/limits && \
         grep -q '^Max file size *1048576 *1048576 ' /proc/self/limits && \
         ! cat '{}/f' 2>/dev/null && exit 7; exit 3",
        outside.path().display()
    );
    let path = write_case(
        tmp.path(),
        "forward.case.json",
        &shell_case("forwarded", &script, 7),
    );
    let case = path.to_str().unwrap();
    // A non-canonical spelling of the folder: forwarded resolved.
    let relative = format!("{}/.", tmp.path().display());
    replay_with(
        &[
            "--limit-open-files",
            "256",
            "--limit-file-size",
            "1M",
            "--fs-read",
            &relative,
            "--fs-read",
            "/usr",
            case,
        ],
        &[],
    )
    .exit(0)
    .stdout_eq("ok forwarded\n1 passed, 0 failed\n")
    .stderr_empty();
    // Without them the same case sees none (exit 3): the pass above was the forwarding.
    replay_with(&[case], &[])
        .exit(1)
        .stdout_contains("FAIL forwarded\n")
        .stdout_contains("/diagnostics/dispatch/exit_code")
        .stderr_empty();
    // From replay's own variables, too.
    replay_with(
        &[case],
        &[
            ("PARENT_TOOL_DISPATCH_LIMIT_OPEN_FILES", "256"),
            ("PARENT_TOOL_DISPATCH_LIMIT_FILE_SIZE", "1024K"),
            ("PARENT_TOOL_DISPATCH_FS_READ", &format!("/usr:{relative}")),
        ],
    )
    .exit(0)
    .stdout_eq("ok forwarded\n1 passed, 0 failed\n")
    .stderr_empty();
}

#[test]
fn a_case_that_confines_itself_while_replay_does_is_refused() {
    require!(confinable());
    require!(skip::cgroup(Controller::Pids));
    let tmp = tempfile::tempdir().unwrap();
    let mut by_option = shell_case("by option", "exit 5", 5);
    by_option["options"] = json!(["--limit-pids", "64"]);
    let mut by_env = shell_case("by env", "exit 5", 5);
    by_env["env"] = json!({"PARENT_TOOL_DISPATCH_NETWORK": "any"});
    write_case(tmp.path(), "a.case.json", &by_option);
    write_case(tmp.path(), "b.case.json", &by_env);
    let dir = tmp.path().to_str().unwrap();
    replay_with(&["--limit-open-files", "256", dir], &[])
        .exit(1)
        .stdout_contains("FAIL by option\n")
        .stdout_contains("FAIL by env\n")
        .stdout_contains("the case confines its adapter itself")
        .stdout_contains("0 passed, 2 failed\n")
        .stderr_empty();
    // Without replay's confinement the case's own options are the case's business.
    write_case(
        tmp.path(),
        "b.case.json",
        &shell_case("by env", "exit 5", 5),
    );
    replay_with(&[dir], &[])
        .exit(0)
        .stdout_eq("ok by option\nok by env\n2 passed, 0 failed\n")
        .stderr_empty();
}

#[test]
fn a_bad_confinement_option_is_a_usage_error_naming_it() {
    for (args, env, names) in [
        (
            vec!["--limit-memory", "12XB"],
            vec![],
            "error: --limit-memory: `12XB`",
        ),
        (vec!["--fs-write", "/"], vec![], "error: --fs-write: `/`"),
        (
            vec![],
            vec![("PARENT_TOOL_DISPATCH_NETWORK", "off")],
            "error: PARENT_TOOL_DISPATCH_NETWORK (--network): `off`",
        ),
    ] {
        let mut args = args;
        args.push("fixtures/cases");
        replay_with(&args, &env)
            .exit(2)
            .stdout_empty()
            .stderr_starts_with(names);
    }
}

#[test]
fn a_forwarded_fs_read_confinement_refuses_the_argv_cases_adapter_a_file_outside() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "host key").unwrap();
    let granted = tempfile::tempdir().unwrap();
    let cases = tempfile::tempdir().unwrap();
    // 9 when the read is refused, 4 when it works.
    let script = format!(
        "cat '{}' >/dev/null 2>&1 && exit 4; exit 9",
        secret.display()
    );
    let path = write_case(
        cases.path(),
        "outside.case.json",
        &shell_case("read outside", &script, 9),
    );
    let case = path.to_str().unwrap();
    replay_with(&["--fs-read", granted.path().to_str().unwrap(), case], &[])
        .exit(0)
        .stdout_eq("ok read outside\n1 passed, 0 failed\n")
        .stderr_empty();
    // Unconfined, the same adapter reads it.
    replay_with(&[case], &[])
        .exit(1)
        .stdout_contains("FAIL read outside\n")
        .stderr_empty();
}
