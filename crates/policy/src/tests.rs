//! The loader's rules, each with the exact location and message of its problem; routing;
//! lints; one meaning per key.

use super::*;
use ptd_sys::confine::{OptionName, Options, RawOptions};
use std::ffi::OsString;
use std::path::Path;

fn cx() -> LoadContext {
    LoadContext {
        bridge_timeout_ms: Some(30_000),
        ledger: None,
        path: Some(OsString::from("/usr/bin:/bin")),
    }
}

fn problems_with(text: &str, cx: &LoadContext) -> Vec<String> {
    match parse(Path::new("p.toml"), text, cx) {
        Ok(_) => Vec::new(),
        Err(problems) => problems.iter().map(ToString::to_string).collect(),
    }
}

fn problems(text: &str) -> Vec<String> {
    problems_with(text, &cx())
}

fn policy(text: &str) -> Policy {
    match parse(Path::new("p.toml"), text, &cx()) {
        Ok(policy) => policy,
        Err(problems) => panic!("{problems:#?}"),
    }
}

fn one(text: &str) -> String {
    let found = problems(text);
    assert_eq!(found.len(), 1, "{found:#?}");
    found[0].clone()
}

const EXAMPLE: &str = r#"version = 1

[defaults]
network = "none"
limit_memory = "512M"
limit_pids = 64
timeout_ms = 30000
decision = "allow"

[ledger]
path = "/var/lib/ptd-policy-test/ledger.db"
session_env = "SANDBOX_SESSION_ID"
budget_calls = 500
budget_adapter_ms = 600000
max_concurrent = 4

[[tool]]
match = "workspace.*"
adapter = ["sh", "-c", "true"]
fs_write = ["/tmp"]

[[tool]]
match = "git.commit"
adapter = ["/bin/sh"]
decision = "ask"

[[tool]]
match = "git.*"
adapter = ["/bin/sh"]
network = { allow = ["api.github.com:443"] }
secret_env = ["GITHUB_TOKEN"]
budget_calls = 50
approval_ttl = "15m"

[[tool]]
match = "*"
decision = "deny"
"#;

#[test]
fn the_spec_example_loads_into_the_model() {
    let p = policy(EXAMPLE);
    assert_eq!(
        p.sha256,
        ptd_wire::envelope::canonical::sha256_hex(EXAMPLE.as_bytes())
    );
    assert_eq!(p.sha256.len(), 64);
    assert_eq!(p.defaults.network, Some(NetworkPolicy::None));
    assert_eq!(p.defaults.limit_memory.as_deref(), Some("512M"));
    assert_eq!(p.defaults.limit_pids, Some(64));
    assert_eq!(p.defaults.decision, Some(Decision::Allow));
    let ledger = p.ledger.clone().unwrap();
    assert_eq!(
        ledger.path.as_deref(),
        Some("/var/lib/ptd-policy-test/ledger.db")
    );
    assert_eq!(ledger.session_env.as_deref(), Some("SANDBOX_SESSION_ID"));
    assert_eq!(
        (
            ledger.budget_calls,
            ledger.budget_adapter_ms,
            ledger.max_concurrent
        ),
        (Some(500), Some(600_000), Some(4))
    );
    assert_eq!(ledger.budgets().calls, Some(500));
    assert_eq!(p.tools.len(), 4);
    let git = &p.tools[2];
    assert_eq!(git.pattern, Pattern::Prefix("git.".into()));
    assert_eq!(git.line, 27);
    assert_eq!(
        git.match_at,
        Location {
            line: 28,
            column: 9
        }
    );
    assert_eq!(
        git.entry.network,
        Some(NetworkPolicy::Allow(vec!["api.github.com:443".into()]))
    );
    assert_eq!(git.entry.budget_calls, Some(50));
    assert_eq!(
        git.entry.approval_ttl,
        Some(std::time::Duration::from_secs(900))
    );
    assert_eq!(p.tools[1].pattern, Pattern::Exact("git.commit".into()));
    assert_eq!(p.tools[3].pattern, Pattern::Prefix(String::new()));
}

// ---- Strict: every problem, located ----

#[test]
fn an_unknown_key_is_located_with_a_did_you_mean() {
    assert_eq!(
        one("version = 1\n[defaults]\nrun_ass = \"nobody\"\n"),
        "p.toml:3:1: unknown key `run_ass` in [defaults]: did you mean `run_as`?"
    );
    assert_eq!(
        problems("version = 1\nfoo = 2\n[ledgr]\n[[tool]]\nmatch = \"a\"\nmatc = 1\n"),
        [
            "p.toml:2:1: unknown key `foo` in the policy (expected one of: version, defaults, \
             ledger, tool)",
            "p.toml:3:2: unknown key `ledgr` in the policy: did you mean `ledger`?",
            "p.toml:6:1: unknown key `matc` in [[tool]]: did you mean `match`?",
        ]
    );
    assert_eq!(
        one("version = 1\n[ledger]\npathh = \"/x\"\n"),
        "p.toml:3:1: unknown key `pathh` in [ledger]: did you mean `path`?"
    );
}

#[test]
fn version_1_is_required() {
    assert_eq!(one("[defaults]\n"), "p.toml:1:1: missing `version = 1`");
    assert_eq!(
        one("version = 2\n"),
        "p.toml:1:11: `version` 2 is not known: this dispatcher reads 1"
    );
}

#[test]
fn wrong_types_are_located_at_the_value() {
    assert_eq!(
        problems(
            "version = 1\n[defaults]\ntimeout_ms = \"5\"\nfs_read = [1]\nunconfined = \"yes\"\n\
             network = 3\n"
        ),
        [
            "p.toml:3:14: `timeout_ms` must be an integer, not a string",
            "p.toml:4:12: `fs_read` must be an array of strings: this item, not an integer",
            "p.toml:5:14: `unconfined` must be true or false, not a string",
            "p.toml:6:11: `network` must be \"none\", \"any\" or { allow = [\"host:port\", …] }, \
             not an integer",
        ]
    );
    assert_eq!(
        one("version = 1\ndefaults = 3\n"),
        "p.toml:2:12: `defaults` must be a table, not an integer"
    );
    assert_eq!(
        one("version = 1\ntool = 3\n"),
        "p.toml:2:8: `tool` must be an array of tables: write [[tool]]"
    );
}

#[test]
fn an_argv_must_not_be_empty() {
    assert_eq!(
        problems("version = 1\n[defaults]\nadapter = []\napproval_notify = [\"\"]\n"),
        [
            "p.toml:3:11: `adapter` is an empty argv: it needs at least the program",
            "p.toml:4:20: `approval_notify`: the program name is empty",
        ]
    );
}

#[test]
fn an_adapter_program_is_absolute_or_found_on_path() {
    assert_eq!(
        problems(
            "version = 1\n[defaults]\nadapter = [\"no-such-prog-zz\"]\n[[tool]]\nmatch = \"x\"\n\
             adapter = [\"./rel\", \"a\"]\n[[tool]]\nmatch = \"y\"\nadapter = [\"sh\"]\n\
             [[tool]]\nmatch = \"z\"\nadapter = [\"/no/such/but/absolute\"]\n"
        ),
        [
            "p.toml:3:12: `adapter`: the program `no-such-prog-zz` is neither absolute nor found \
             on PATH",
            "p.toml:6:12: `adapter`: the program `./rel` is neither absolute nor found on PATH",
        ]
    );
    let nowhere = LoadContext {
        path: Some(OsString::from("/nonexistent-dir-zz")),
        ..cx()
    };
    assert_eq!(
        problems_with("version = 1\n[defaults]\nadapter = [\"sh\"]\n", &nowhere),
        ["p.toml:3:12: `adapter`: the program `sh` is neither absolute nor found on PATH"]
    );
}

#[test]
fn two_entries_with_the_same_match_are_an_error() {
    assert_eq!(
        one("version = 1\n[[tool]]\nmatch = \"a.b\"\n[[tool]]\nmatch = \"a.b\"\n"),
        "p.toml:5:9: `match = \"a.b\"` again: the entry at line 2 has the same `match`"
    );
    assert_eq!(
        one("version = 1\n[[tool]]\nmatch = \"a.*\"\n[[tool]]\nmatch = \"a.*\"\n"),
        "p.toml:5:9: `match = \"a.*\"` again: the entry at line 2 has the same `match`"
    );
}

#[test]
fn a_match_is_an_id_or_a_prefix_ending_in_one_star() {
    let bad = |m: &str| {
        format!(
            "p.toml:3:9: `match = \"{m}\"`: expected a canonical tool id (`git.commit`) or a \
             prefix ending in one `*` (`git.*`, `*`)"
        )
    };
    for m in ["a*b*", "*.x", "a**", "", "a b", "git.*x"] {
        let text = format!("version = 1\n[[tool]]\nmatch = \"{m}\"\n");
        assert_eq!(problems(&text), [bad(m)], "{m}");
    }
    assert_eq!(
        one("version = 1\n[[tool]]\nadapter = [\"sh\"]\n"),
        "p.toml:2:1: a [[tool]] entry needs `match`"
    );
    for m in ["*", "git.*", "git.commit", "workspace.read_file"] {
        let text = format!("version = 1\n[[tool]]\nmatch = \"{m}\"\n");
        assert_eq!(problems(&text), Vec::<String>::new(), "{m}");
    }
}

#[test]
fn confinement_values_are_checked_as_their_flags_at_the_key() {
    assert_eq!(
        problems(
            "version = 1\n[defaults]\nlimit_memory = \"5MB\"\nlimit_pids = 0\n\
             network = \"some\"\nrun_as = \"no-such-user-zz\"\nlimit_file_size = \"x\"\n\
             limit_open_files = -2\n"
        ),
        [
            "p.toml:3:16: `limit_memory`: `5MB` has an ambiguous unit: sizes are binary, write \
             e.g. 256M or 256MiB",
            "p.toml:4:14: `limit_pids`: `0` would leave nothing able to run",
            "p.toml:5:11: `network`: `some` is not a network mode (expected `none`, `any` or \
             `allow:HOST:PORT,…`)",
            "p.toml:6:10: `run_as`: `no-such-user-zz`: there is no user `no-such-user-zz` on \
             this host",
            "p.toml:7:19: `limit_file_size`: `x` is not a size: digits (bytes), optionally \
             followed by K, M, G or T (binary units: 1K = 1024 bytes), e.g. 256M",
            "p.toml:8:20: `limit_open_files`: `-2` is not a whole number",
        ]
    );
    // The command line's `allow:` string is not the policy's spelling of an allow list.
    assert_eq!(
        one("version = 1\n[defaults]\nnetwork = \"allow:h:1\"\n"),
        "p.toml:3:11: `network`: `allow:…` is the command line's spelling: write network = \
         { allow = [\"host:port\", …] }"
    );
}

#[test]
fn a_grant_path_must_exist_and_confine_something() {
    assert_eq!(
        problems("version = 1\n[defaults]\nfs_write = [\"/tmp\", \"/nonexistent-zz\"]\nfs_read = [\"/\"]\n"),
        [
            "p.toml:3:21: `fs_write`: `/nonexistent-zz` cannot be used: No such file or \
             directory (os error 2)",
            "p.toml:4:12: `fs_read`: `/` is the whole file system: read access to it confines \
             nothing (list the folders the adapter reads)",
        ]
    );
}

#[test]
fn a_grant_that_covers_the_ledger_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let folder = std::fs::canonicalize(dir.path()).unwrap();
    let text = format!(
        "version = 1\n[ledger]\npath = \"{0}/ledger.db\"\n[defaults]\nfs_write = [\"{0}\"]\n",
        folder.display()
    );
    let found = problems(&text);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].starts_with(&format!(
            "p.toml:5:13: `fs_write`: `{0}` lies in the ledger's folder {0} ([ledger] path \
             `{0}/ledger.db`)",
            folder.display()
        )),
        "{found:#?}"
    );
    // Without `[ledger] path`, the command line's `--ledger` is the ledger, and named so.
    let text = format!(
        "version = 1\n[defaults]\nfs_write = [\"{}\"]\n",
        folder.display()
    );
    let cx = LoadContext {
        ledger: Some(folder.join("other.db")),
        ..cx()
    };
    let found = problems_with(&text, &cx);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains(&format!("(--ledger `{}/other.db`)", folder.display())),
        "{found:#?}"
    );
}

#[test]
fn timeout_ms_may_not_exceed_the_bridges() {
    assert_eq!(
        one("version = 1\n[[tool]]\nmatch = \"a\"\ntimeout_ms = 40000\n"),
        "p.toml:4:14: `timeout_ms` = 40000 is above the bridge's dispatcher.timeout_ms (30000)"
    );
    assert_eq!(
        one("version = 1\n[defaults]\ntimeout_ms = 0\n"),
        "p.toml:3:14: `timeout_ms` must be a whole number of at least 1, not 0"
    );
    let free = LoadContext {
        bridge_timeout_ms: None,
        ..cx()
    };
    assert!(problems_with("version = 1\n[defaults]\ntimeout_ms = 40000\n", &free).is_empty());
}

#[test]
fn ask_needs_a_ledger() {
    let text = "version = 1\n[defaults]\ndecision = \"ask\"\n[[tool]]\nmatch = \"a\"\n\
                decision = \"ask\"\n";
    let message = "`decision = \"ask\"` needs a ledger ([ledger] path or --ledger): approvals \
                   are kept there";
    assert_eq!(
        problems(text),
        [
            format!("p.toml:3:12: {message}"),
            format!("p.toml:6:12: {message}")
        ]
    );
    let given = LoadContext {
        ledger: Some("/var/lib/ptd-test-ledger/l.db".into()),
        ..cx()
    };
    assert!(problems_with(text, &given).is_empty());
    let with_section = format!("{text}[ledger]\npath = \"/tmp/x/l.db\"\n");
    assert!(problems(&with_section).is_empty());
    assert_eq!(
        one("version = 1\n[defaults]\ndecision = \"maybe\"\n"),
        "p.toml:3:12: `decision`: `maybe` is not one of allow, ask, deny"
    );
}

#[test]
fn ledger_budgets_are_read_by_the_ledgers_parsers() {
    assert_eq!(
        problems(
            "version = 1\n[ledger]\nbudget_calls = -1\nmax_concurrent = 0\n\
             session_env = \"A=B\"\npath = \"\"\n"
        ),
        [
            "p.toml:3:16: `budget_calls`: expected a whole number (digits only), got \"-1\"",
            "p.toml:4:18: `max_concurrent`: must be at least 1 (use --budget-calls 0 to admit \
             nothing)",
            "p.toml:5:15: `session_env`: `A=B` is not a variable name (non-empty, without `=`)",
            "p.toml:6:8: `path` must not be empty",
        ]
    );
}

#[test]
fn entry_values_network_ttl_budget_and_variables() {
    assert_eq!(
        problems(
            "version = 1\n[defaults]\nnetwork = { allow = [\"api.github.com:443\", \"x\"], \
             deny = 1 }\napproval_ttl = \"2d\"\nbudget_calls = -3\npass_env = [\"A=1\"]\n"
        ),
        [
            "p.toml:3:44: `network.allow`: `x`: no port: write `HOST:PORT`",
            "p.toml:3:50: unknown key `deny` in `network` (expected one of: allow)",
            "p.toml:4:16: `approval_ttl`: expected a duration from 1s to 31622400s, written \
             like 30s, 15m, 1h or as an integer number of seconds",
            "p.toml:5:16: `budget_calls`: expected a whole number (digits only), got \"-3\"",
            "p.toml:6:13: `pass_env`: `A=1` is not a variable name (non-empty, without `=`)",
        ]
    );
    for (ttl, seconds) in [
        ("\"30s\"", 30),
        ("\"15m\"", 900),
        ("\"1h\"", 3600),
        ("45", 45),
    ] {
        let p = policy(&format!("version = 1\n[defaults]\napproval_ttl = {ttl}\n"));
        assert_eq!(
            p.defaults.approval_ttl,
            Some(std::time::Duration::from_secs(seconds))
        );
    }
}

#[test]
fn a_syntax_error_is_located() {
    assert_eq!(
        problems("version = 1\nx = \n"),
        ["p.toml:2:5: string values must be quoted, expected literal string"]
    );
    assert_eq!(
        problems("version = 1\nversion = 1\n")[0],
        "p.toml:2:1: duplicate key"
    );
}

#[test]
fn every_problem_of_the_file_is_reported_in_order() {
    let found = problems(
        "version = 1\n[defaults]\nrun_ass = 1\ntimeout_ms = 99999\n[[tool]]\nmatch = \"a**\"\n\
         adapter = []\n",
    );
    let lines: Vec<&str> = found.iter().map(|p| &p[..p.find(": ").unwrap()]).collect();
    assert_eq!(
        lines,
        ["p.toml:3:1", "p.toml:4:14", "p.toml:6:9", "p.toml:7:11"]
    );
}

#[test]
fn more_than_1000_tools_is_one_problem() {
    let mut text = String::from("version = 1\n");
    for i in 0..1002 {
        text.push_str(&format!("[[tool]]\nmatch = \"t{i}\"\n"));
    }
    assert_eq!(
        problems(&text),
        ["p.toml:2002:1: more than 1000 [[tool]] entries: the most a policy may have"]
    );
}

// ---- The file: size, owner and mode ----

fn write(dir: &Path, text: &[u8], mode: u32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

#[test]
fn load_reads_the_file_and_hashes_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), EXAMPLE.as_bytes(), 0o644);
    let p = load(&path, &cx()).unwrap();
    assert_eq!(p.file, path);
    assert_eq!(
        p.sha256,
        ptd_wire::envelope::canonical::sha256_hex(EXAMPLE.as_bytes())
    );
}

#[test]
fn a_file_others_can_write_is_refused_with_its_other_problems() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), b"version = 1\nx = 1\n", 0o664);
    let found: Vec<String> = load(&path, &cx())
        .unwrap_err()
        .iter()
        .map(|p| format!("{}:{}: {}", p.line, p.column, p.message))
        .collect();
    assert_eq!(
        found,
        [
            "1:1: the policy file is writable by its group (mode 664): only its owner may write it",
            "2:1: unknown key `x` in the policy (expected one of: version, defaults, ledger, tool)",
        ]
    );
    assert_eq!(
        access_problem(0o100_646, 0, 0).as_deref(),
        Some("the policy file is writable by others (mode 646): only its owner may write it")
    );
    assert_eq!(
        access_problem(0o100_644, 1234, 0).as_deref(),
        Some(
            "the policy file belongs to uid 1234, another user than root or this dispatcher \
             (uid 0), who could write it"
        )
    );
    assert_eq!(access_problem(0o100_600, 1234, 1234), None);
    assert_eq!(access_problem(0o100_644, 0, 1234), None);
}

#[test]
fn a_file_over_1_mib_is_one_problem() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = b"version = 1\n".to_vec();
    text.resize((1 << 20) + 1, b'\n');
    let path = write(dir.path(), &text, 0o644);
    let found = load(&path, &cx()).unwrap_err();
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].to_string(),
        format!(
            "{}:1:1: the policy file is larger than 1048576 bytes (1 MiB), the most read",
            path.display()
        )
    );
    let missing = load(&dir.path().join("none.toml"), &cx()).unwrap_err();
    assert_eq!(
        missing[0].message,
        "the policy file cannot be read: No such file or directory (os error 2)"
    );
}

// ---- Routing ----

#[test]
fn an_exact_id_beats_every_pattern() {
    let p = policy(EXAMPLE);
    let route = p.route("git.commit");
    assert_eq!(route.entry.unwrap().line, 22);
    assert_eq!(route.effective.decision, Some(Decision::Ask));
    assert_eq!(route.effective.adapter, Some(vec!["/bin/sh".to_string()]));
    // `[defaults]` fills what the entry leaves out.
    assert_eq!(route.effective.limit_memory.as_deref(), Some("512M"));
    assert_eq!(route.effective.network, Some(NetworkPolicy::None));
}

#[test]
fn the_longer_literal_prefix_wins_and_star_matches_dots() {
    let p = policy(EXAMPLE);
    assert_eq!(p.route("git.push").entry.unwrap().line, 27);
    assert_eq!(
        p.route("git.push").effective.network,
        Some(NetworkPolicy::Allow(vec!["api.github.com:443".into()]))
    );
    assert_eq!(p.route("workspace.read.deep").entry.unwrap().line, 17);
    let other = p.route("other.tool");
    assert_eq!(other.entry.unwrap().pattern, Pattern::Prefix(String::new()));
    assert_eq!(other.effective.decision, Some(Decision::Deny));
    // Order in the file does not matter: a longer prefix written first still wins.
    let q = policy(
        "version = 1\n[[tool]]\nmatch = \"a.b.*\"\n[[tool]]\nmatch = \"a.*\"\n[[tool]]\n\
         match = \"a.b.c\"\n",
    );
    assert_eq!(q.route("a.b.x").entry.unwrap().line, 2);
    assert_eq!(q.route("a.x").entry.unwrap().line, 4);
    assert_eq!(q.route("a.b.c").entry.unwrap().line, 6);
    assert_eq!(q.route("a.b.c.d").entry.unwrap().line, 2);
}

#[test]
fn no_match_routes_to_the_defaults() {
    let p = policy("version = 1\n[defaults]\nlimit_pids = 8\n[[tool]]\nmatch = \"a\"\n");
    let route = p.route("b");
    assert!(route.entry.is_none());
    assert_eq!(route.effective, p.defaults);
    assert!(!Pattern::Exact("a".into()).matches("a.b"));
    assert!(Pattern::Prefix("a".into()).matches("a"));
}

// ---- Lints ----

#[test]
fn lints_name_uncovered_tools_unmatched_entries_and_unconfined_ones() {
    let p = policy(
        "version = 1\n[defaults]\nunconfined = true\n[[tool]]\nmatch = \"git.*\"\n\
         [[tool]]\nmatch = \"mcp.x\"\nunconfined = true\n",
    );
    let allowed = vec!["git.commit".to_string(), "workspace.read".to_string()];
    let found: Vec<String> = p
        .lints(Some(&allowed))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        [
            "p.toml:1:1: the bridge allows `workspace.read`, which no entry covers: it runs \
             the bridge's dispatcher.command.argv under [defaults]",
            "p.toml:3:1: `unconfined = true`: [defaults] runs its adapter without confinement \
             (SPEC §13.2)",
            "p.toml:7:9: `match = \"mcp.x\"` matches no tool the bridge allows",
            "p.toml:8:1: `unconfined = true`: the entry `mcp.x` runs its adapter without \
             confinement (SPEC §13.2)",
        ]
    );
    let star = policy("version = 1\n[[tool]]\nmatch = \"*\"\n");
    assert!(star.lints(Some(&allowed)).is_empty());
    // Without a bridge, only what the file alone says.
    let alone: Vec<String> = p.lints(None).iter().map(ToString::to_string).collect();
    assert_eq!(alone, [found[1].clone(), found[3].clone()]);
}

// ---- One meaning per key ----

#[test]
fn a_confinement_key_means_what_its_flag_means() {
    let dir = tempfile::tempdir().unwrap();
    let grant = dir.path().display().to_string();
    let p = policy(&format!(
        "version = 1\n[defaults]\nlimit_memory = \"64M\"\nnetwork = \"none\"\n\
         limit_open_files = 32\n[[tool]]\nmatch = \"a\"\nfs_read = [\"/usr\", \"{grant}\"]\n\
         fs_write = [\"{grant}\"]\nlimit_pids = 16\nlimit_file_size = 4096\nrun_as = \"nobody\"\n"
    ));
    let from_policy = Options::parse(&p.route("a").effective.confine_raw()).unwrap();
    let mut cli = RawOptions::default();
    cli.flag(OptionName::FsRead, "/usr")
        .flag(OptionName::FsRead, &grant)
        .flag(OptionName::FsWrite, &grant)
        .flag(OptionName::Network, "none")
        .flag(OptionName::LimitMemory, "64M")
        .flag(OptionName::LimitPids, "16")
        .flag(OptionName::LimitOpenFiles, "32")
        .flag(OptionName::LimitFileSize, "4096")
        .flag(OptionName::RunAs, "nobody");
    assert_eq!(from_policy, Options::parse(&cli).unwrap());
    assert_eq!(from_policy.limit_memory_bytes, Some(64 << 20));
    // An allow list (SPEC §17) is `--network allow:` with its entries, read by the same parser.
    let allow =
        policy("version = 1\n[defaults]\nnetwork = { allow = [\"h:1\", \"*.Example.org:443\"] }\n");
    let mut cli = RawOptions::default();
    cli.flag(OptionName::Network, "allow:h:1,*.example.org:443");
    let from_policy = Options::parse(&allow.defaults.confine_raw()).unwrap();
    assert_eq!(from_policy, Options::parse(&cli).unwrap());
    assert_eq!(from_policy.network.as_str(), "allow");
    assert_eq!(from_policy.network_allow.len(), 2);
    // `network_max_bytes` is `--network-max-bytes`, over `[defaults]`'s like every key.
    let mut entry = allow.defaults.clone();
    entry.network_max_bytes = Some("1M".into());
    let tool = Entry::default().over(&entry);
    let options = Options::parse(&tool.confine_raw()).unwrap();
    assert_eq!(options.network_max_bytes, Some(1 << 20));
    cli.flag(OptionName::NetworkMaxBytes, "1M");
    assert_eq!(options, Options::parse(&cli).unwrap());
    // Without an allow list there is no proxy to bound: a `[defaults]` bound is not passed on
    // to an entry that says `network = "none"`, and the same keys in one table are refused.
    let none = Entry {
        network: Some(NetworkPolicy::None),
        ..Entry::default()
    }
    .over(&entry);
    let options = Options::parse(&none.confine_raw()).unwrap();
    assert_eq!(options.network_max_bytes, None);
    assert_eq!(
        problems("version = 1\n[defaults]\nnetwork = \"any\"\nnetwork_max_bytes = \"1M\"\n"),
        [
            "p.toml:4:1: `network_max_bytes` bounds the egress proxy of `network = { allow = \
          [...] }`, and this table's `network` is not an allow list"
        ]
    );
    assert!(problems(
        "version = 1\n[defaults]\nnetwork = { allow = [\"a.b:1\"] }\nnetwork_max_bytes = 0\n"
    )[0]
    .contains("would leave nothing"));
}

// ---- Never panics ----

proptest::proptest! {
    #[test]
    fn parse_never_panics_on_any_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse(Path::new("p.toml"), &text, &cx());
    }

    #[test]
    fn parse_never_panics_on_toml_ish_text(
        lines in proptest::collection::vec(
            proptest::string::string_regex(
                "(\\[\\[tool\\]\\]|\\[defaults\\]|\\[ledger\\]|version = [0-9-]{1,3}|\
                 [a-z_]{1,16} = (\"[ -~]{0,12}\"|-?[0-9]{1,20}|true|\\[(\"[a-z./*]{0,8}\", ?){0,3}\\]|\\{ ?allow = \\[\"[a-z:0-9]{0,8}\"\\] ?\\}))"
            ).unwrap(),
            0..24,
        )
    ) {
        let text = lines.join("\n");
        let _ = parse(Path::new("p.toml"), &text, &cx());
    }
}

#[test]
fn unconfined_beside_a_confinement_key_is_refused_at_the_key() {
    assert_eq!(
        one("version = 1\n[[tool]]\nmatch = \"a\"\nunconfined = true\nlimit_pids = 4\n"),
        "p.toml:5:1: `limit_pids` confines nothing here: this entry runs unconfined \
         (`unconfined = true`); remove one of the two"
    );
    // Inherited from [defaults]: the entry's own key is refused, naming where it comes from.
    assert_eq!(
        one(
            "version = 1\n[defaults]\nunconfined = true\n[[tool]]\nmatch = \"a\"\n\
             fs_read = [\"/tmp\"]\n"
        ),
        "p.toml:6:1: `fs_read` confines nothing here: this entry runs unconfined \
         (`unconfined = true` in [defaults]); remove one of the two"
    );
    // An entry that says `unconfined = false` is confined again, with its own keys.
    assert!(problems(
        "version = 1\n[defaults]\nunconfined = true\n[[tool]]\nmatch = \"a\"\n\
         unconfined = false\nfs_read = [\"/tmp\"]\n"
    )
    .is_empty());
    // The defaults' keys are simply not applied to an unconfined entry: no problem.
    assert!(problems(
        "version = 1\n[defaults]\nlimit_pids = 4\n[[tool]]\nmatch = \"a\"\nunconfined = true\n"
    )
    .is_empty());
}

#[test]
fn budgets_need_a_ledger() {
    let text = "version = 1\n[[tool]]\nmatch = \"a\"\nbudget_calls = 3\n";
    assert_eq!(
        one(text),
        "p.toml:4:1: `budget_calls` needs a ledger ([ledger] path or --ledger): budgets are \
         counted there"
    );
    let given = LoadContext {
        ledger: Some("/var/lib/ptd-test-ledger/l.db".into()),
        ..cx()
    };
    assert!(problems_with(text, &given).is_empty());
}

#[test]
fn a_ledger_url_is_a_postgresql_ledger_checked_at_its_line() {
    let text = "version = 1\n[ledger]\npath = \"postgres://ptd@db.internal:5432/ptd\"\n\
                [[tool]]\nmatch = \"a\"\ndecision = \"ask\"\nfs_read = [\"/tmp\"]\n";
    assert!(problems(text).is_empty(), "{:?}", problems(text));
    assert_eq!(
        policy(text).ledger.unwrap().path.as_deref(),
        Some("postgres://ptd@db.internal:5432/ptd")
    );
    let secret = "version = 1\n[ledger]\npath = \"postgres://ptd:hunter2@db/ptd\"\n";
    let found = problems(secret);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("p.toml:3:8: `[ledger] path`: "),
        "{found:?}"
    );
    assert!(!found[0].contains("hunter2"), "{found:?}");
}

#[test]
fn timeouts_are_checked_against_a_bridge_known_later() {
    let free = LoadContext {
        bridge_timeout_ms: None,
        ..cx()
    };
    let text = "version = 1\n[defaults]\ntimeout_ms = 500\n[[tool]]\nmatch = \"a\"\n\
                timeout_ms = 9000\n";
    let Ok(loaded) = parse(Path::new("p.toml"), text, &free) else {
        panic!("loads without a bridge");
    };
    assert!(loaded.above_bridge(9000).is_empty());
    let found: Vec<String> = loaded
        .above_bridge(400)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        [
            "p.toml:3:14: `timeout_ms` = 500 is above the bridge's dispatcher.timeout_ms (400)",
            "p.toml:6:14: `timeout_ms` = 9000 is above the bridge's dispatcher.timeout_ms (400)"
        ]
    );
    assert_eq!(loaded.defaults_line, Some(2));
}

#[test]
fn the_compiled_form_routes_as_the_policy_does() {
    let p = policy(
        "version = 1\n[ledger]\npath = \"/var/lib/ptd-test-ledger/l.db\"\n\
         [defaults]\nlimit_pids = 4\npass_env = [\"API_TOKEN\", \"LANG2\"]\n\
         [[tool]]\nmatch = \"*\"\ndecision = \"deny\"\n\
         [[tool]]\nmatch = \"git.*\"\nsecret_env = [\"GH\"]\ntimeout_ms = 5\n\
         [[tool]]\nmatch = \"git.commit\"\nadapter = [\"/bin/true\", \"x\"]\n\
         [[tool]]\nmatch = \"git.com*\"\nbudget_calls = 2\n",
    );
    let compiled = p.compile();
    assert_eq!(compiled.len(), 4);
    for tool in [
        "git.commit",
        "git.commits",
        "git.status",
        "mcp.x",
        "",
        "git.",
    ] {
        let want = p.route(tool);
        let got = compiled.route(tool);
        assert_eq!(got.effective, want.effective, "{tool}");
        assert_eq!(got.matched, want.entry.is_some(), "{tool}");
        let name = want
            .entry
            .map_or(DEFAULTS_ENTRY.to_string(), |t| t.pattern.as_written());
        assert_eq!(got.entry, name, "{tool}");
        assert_eq!(got.line, want.entry.map(|t| t.line).or(p.defaults_line));
    }
    assert_eq!(compiled.secret_names, ["API_TOKEN", "GH"]);
    assert!(compiled.sets_pass_env && compiled.sets_secret_env && compiled.sets_budget_calls);
    assert_eq!(compiled.above_bridge(4), p.above_bridge(4));
    assert_eq!(compiled.above_bridge(4).len(), 1);
    let empty = policy("version = 1\n").compile();
    assert!(empty.is_empty());
    assert!(!empty.sets_pass_env && empty.secret_names.is_empty());
    assert_eq!(empty.route("a").entry, DEFAULTS_ENTRY);
    assert_eq!(empty.route("a").line, None);
}
