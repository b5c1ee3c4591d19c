//! Shell completion, tried in the shells themselves: an interactive bash under tmux completes a
//! typed line with its Tab; the bash script is also sourced in a real bash
//! and its completion function called as bash calls it (COMP_WORDS, COMP_CWORD), for the words
//! past the first; fish, where it is installed, answers `complete -C`.

use super::*;

/// The script `completions SHELL` prints, written to a file in `dir`.
fn script_file(shell: &str, dir: &Path) -> PathBuf {
    let path = dir.join(format!("completion.{shell}"));
    Cmd::new(["completions", shell])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_with(|script| std::fs::write(&path, script).unwrap());
    path
}

/// Sources the script, finds the function `complete -p` registered for the binary and calls it
/// for the command line `words` (the last word is the one being completed); prints COMPREPLY,
/// one item a line.
const BASH_DRIVER: &str = r#"
source "$1" || exit 90
shift
spec=$(complete -p parent-tool-dispatch) || exit 91
case $spec in *" -F "*) ;; *) exit 92 ;; esac
fn=${spec#* -F }
fn=${fn%% *}
COMP_WORDS=("$@")
COMP_CWORD=$(( $# - 1 ))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
"$fn" parent-tool-dispatch "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"#;

/// What bash offers for `words`, run from the repository root.
fn bash_offers(script: &Path, words: &[&str]) -> Vec<String> {
    let out = Cmd::of(
        PathBuf::from("bash"),
        ["--norc", "--noprofile", "-c", BASH_DRIVER],
    )
    .arg("bash")
    .arg(script)
    .args(words)
    .cwd(env!("CARGO_MANIFEST_DIR"))
    .run();
    let mut offered = Vec::new();
    out.exit(0).stderr_empty().stdout_with(|stdout| {
        offered = stdout
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
    });
    offered
}

fn assert_offers(script: &Path, words: &[&str], want: &[&str]) {
    let offered = bash_offers(script, words);
    for item in want {
        assert!(
            offered.iter().any(|o| o == item),
            "{words:?}: bash offers {offered:?}, not {item}"
        );
    }
}

#[test]
fn bash_completes_past_the_first_word() {
    let dir = tempfile::tempdir().unwrap();
    let script = script_file("bash", dir.path());
    // The first word, as before.
    assert_eq!(
        bash_offers(&script, &["parent-tool-dispatch", "sch"]),
        ["schema"]
    );
    // The kinds of `schema` and `validate`.
    assert_offers(
        &script,
        &["parent-tool-dispatch", "schema", ""],
        &[
            "bridge",
            "request",
            "result",
            "transcript",
            "fixture",
            "delegation-event",
            "policy",
        ],
    );
    assert_eq!(
        bash_offers(&script, &["parent-tool-dispatch", "validate", "re"]),
        ["request", "result"]
    );
    // A subcommand's options.
    assert_offers(
        &script,
        &["parent-tool-dispatch", "replay", "--"],
        &[
            "--parent-tool-bridge",
            "--junit",
            "--bless",
            "--filter",
            "--jobs",
        ],
    );
    assert_offers(
        &script,
        &["parent-tool-dispatch", "validate", "bridge", "--s"],
        &["--strict"],
    );
    // Two levels down.
    assert_offers(
        &script,
        &["parent-tool-dispatch", "adapter", "workspace", "--"],
        &["--root"],
    );
    assert_offers(
        &script,
        &["parent-tool-dispatch", "completions", ""],
        &["bash", "fish"],
    );
}

/// What an interactive bash shows after typing `line` and a Tab, with the script sourced: a
/// real bash under tmux (readline splits the words itself, `COMP_WORDBREAKS` and all).
fn interactive_bash_completes(script: &Path, line: &str) -> String {
    let socket = format!("ptd-completion-{}", std::process::id());
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(["-L", &socket])
            .args(args)
            .output()
            .unwrap()
    };
    let started = tmux(&[
        "new-session",
        "-d",
        "-x",
        "200",
        "-y",
        "10",
        "-c",
        env!("CARGO_MANIFEST_DIR"),
        "env -i PATH=/usr/bin:/bin TERM=xterm HOME=/nonexistent bash --norc --noprofile",
    ]);
    assert!(started.status.success(), "{started:?}");
    let setup = format!("source {}; clear", script.display());
    tmux(&["send-keys", &setup, "Enter"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    tmux(&["send-keys", "-l", line]);
    tmux(&["send-keys", "Tab"]);
    let mut screen = String::new();
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let shown = tmux(&["capture-pane", "-p"]);
        screen = String::from_utf8_lossy(&shown.stdout).into_owned();
        if screen
            .lines()
            .any(|l| l.contains(line) && l.trim_end() != line.trim_end())
        {
            break;
        }
    }
    tmux(&["kill-server"]);
    screen
}

#[test]
fn an_interactive_bash_completes_a_file_name_after_an_at() {
    require!(skip::program("tmux", &["-V"]));
    let dir = tempfile::tempdir().unwrap();
    let script = script_file("bash", dir.path());
    // `@` is in bash's COMP_WORDBREAKS: readline splits `@fixtures/bri` into `@` and
    // `fixtures/bri`, and only the part after the `@` is replaced.
    let screen = interactive_bash_completes(
        &script,
        "parent-tool-dispatch --parent-tool-bridge @fixtures/bri",
    );
    assert!(
        screen.contains("parent-tool-dispatch --parent-tool-bridge @fixtures/bridge.json"),
        "{screen}"
    );
}

#[test]
fn bash_completes_file_names_after_an_at() {
    let dir = tempfile::tempdir().unwrap();
    let script = script_file("bash", dir.path());
    assert_eq!(
        bash_offers(
            &script,
            &[
                "parent-tool-dispatch",
                "--parent-tool-bridge",
                "@fixtures/bri"
            ]
        ),
        ["@fixtures/bridge.json"]
    );
    // As bash splits it for the function (`@` is a word break); readline still replaces the
    // `@` with the rest, so the answer keeps it.
    assert_eq!(
        bash_offers(
            &script,
            &[
                "parent-tool-dispatch",
                "--parent-tool-bridge",
                "@",
                "fixtures/bri"
            ]
        ),
        ["@fixtures/bridge.json"]
    );
    // A folder ends in `/`, ready for the next level.
    assert_eq!(
        bash_offers(
            &script,
            &[
                "parent-tool-dispatch",
                "--parent-tool-bridge",
                "@fixtures/tutor"
            ]
        ),
        ["@fixtures/tutorial/"]
    );
    // Nothing typed yet: files, each with its `@`.
    let offered = bash_offers(
        &script,
        &["parent-tool-dispatch", "--parent-tool-bridge", ""],
    );
    assert!(offered.contains(&"@fixtures/".to_string()), "{offered:?}");
    assert!(offered.iter().all(|o| o.starts_with('@')), "{offered:?}");
    // Inline JSON is not a file name.
    assert_eq!(
        bash_offers(
            &script,
            &["parent-tool-dispatch", "--parent-tool-bridge", "{"]
        ),
        Vec::<String>::new()
    );
    // The same in a subcommand, and --tool-map's word.
    assert_eq!(
        bash_offers(
            &script,
            &[
                "parent-tool-dispatch",
                "sandbox-env",
                "--parent-tool-bridge",
                "@fixtures/bri"
            ]
        ),
        ["@fixtures/bridge.json"]
    );
    assert_eq!(
        bash_offers(&script, &["parent-tool-dispatch", "--tool-map", "pro"]),
        ["provider-safe"]
    );
    assert_offers(
        &script,
        &["parent-tool-dispatch", "--tool-map", "@fixtures/"],
        &["@fixtures/bridge.json"],
    );
}

#[test]
fn fish_offers_the_kinds_of_validate_and_schema() {
    let dir = tempfile::tempdir().unwrap();
    let script = script_file("fish", dir.path());
    let text = std::fs::read_to_string(&script).unwrap();
    for (sub, kinds) in [
        ("validate", &["bridge", "request", "result"][..]),
        (
            "schema",
            &["bridge", "fixture", "delegation-event", "policy"][..],
        ),
    ] {
        for kind in kinds {
            let line = format!(
                "complete -c parent-tool-dispatch -n \"__fish_parent_tool_dispatch_using_subcommand {sub}; and not __fish_seen_subcommand_from "
            );
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&line) && l.contains(&format!(" -f -a \"{kind}\""))),
                "fish has no {kind} for {sub}"
            );
        }
    }
    // Where fish is installed, ask it.
    let fish = ["/usr/bin/fish", "/usr/local/bin/fish", "/bin/fish"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    let Some(fish) = fish else { return };
    let ask = |line: &str| -> Vec<String> {
        let out = Cmd::of(fish.clone(), ["--no-config", "-c"])
            .arg(format!("source {}; complete -C '{line}'", script.display()))
            .env("HOME", dir.path())
            .env("XDG_CONFIG_HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path())
            .run();
        let mut offered = Vec::new();
        out.exit(0).stderr_empty().stdout_with(|stdout| {
            offered = stdout
                .lines()
                .map(|l| l.split('\t').next().unwrap().to_string())
                .collect();
        });
        offered
    };
    let offered = ask("parent-tool-dispatch schema ");
    for kind in ["bridge", "request", "fixture", "delegation-result"] {
        assert!(offered.iter().any(|o| o == kind), "fish offers {offered:?}");
    }
    assert_eq!(
        ask("parent-tool-dispatch validate re"),
        ["request", "result"]
    );
}
