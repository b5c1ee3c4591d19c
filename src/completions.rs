//! Shell completion scripts: clap_complete's, with what it gets wrong for this binary repaired.
//!
//! - **bash**: for a binary name with a hyphen, clap_complete (4.6) spells the state of each
//!   subcommand one way where it walks the words (`parent__tool__dispatch__subcmd__schema`) and
//!   another in the `case` arms that complete it (`parent__subcmd__tool__subcmd__dispatch__…`),
//!   so nothing completes past the first word (clap-rs/clap#6421). The arms are respelt the
//!   walk's way. The options that take `JSON|@FILE` (`--parent-tool-bridge`, `--tool-map`)
//!   complete file names after `@`, and `--tool-map` its word `provider-safe`.
//! - **fish**: clap_complete offers no values for positional arguments; the kinds of `validate`
//!   and `schema` (and `completions`' shells) are added, from the command definitions.
//!
//! Other shells get clap_complete's script as it is. Each repair is a no-op once clap_complete
//! writes what it repairs correctly; the test suite sources the bash script in a real bash.

use clap_complete::Shell;

/// The binary's name, as the scripts register it.
pub(crate) const BIN: &str = "parent-tool-dispatch";

/// The options whose value is JSON text or `@FILE`, with the words they also take.
const AT_FILE_OPTIONS: &[(&str, &[&str])] = &[
    ("--parent-tool-bridge", &[]),
    ("--tool-map", &["provider-safe"]),
];

/// The completion script for `shell`.
pub(crate) fn script(shell: Shell, cmd: &mut clap::Command) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, cmd, BIN, &mut script);
    match shell {
        Shell::Bash => repair_bash(&String::from_utf8_lossy(&script)).into_bytes(),
        Shell::Fish => {
            script.extend_from_slice(fish_positional_values(cmd).as_bytes());
            script
        }
        _ => script,
    }
}

/// The bash function completing `@FILE`: file names of what follows the `@`, directories with
/// a `/` (and no space after a lone one), plus the option's own words when they match.
fn at_file_function() -> String {
    let name = at_file_function_name();
    format!(
        r#"
{name}() {{
    local word f
    COMPREPLY=()
    for word in "$@"; do
        [[ ${{word}} == "${{cur}}"* ]] && COMPREPLY+=("${{word}}")
    done
    if [[ -z ${{cur}} || ${{cur}} == @* ]]; then
        while IFS= read -r f; do
            [[ -d ${{f}} ]] && f="${{f}}/"
            COMPREPLY+=("@${{f}}")
        done < <(compgen -f -- "${{cur#@}}")
        if [[ ${{#COMPREPLY[@]}} -eq 1 && ${{COMPREPLY[0]}} == */ ]]; then
            compopt -o nospace 2>/dev/null
        fi
    fi
}}
"#
    )
}

fn at_file_function_name() -> String {
    format!("__{}_at_file", BIN.replace('-', "_"))
}

fn after_at_function_name() -> String {
    format!("__{}_after_at", BIN.replace('-', "_"))
}

/// The bash function completing a file name after an `@` that bash split off as a word of its
/// own: `@` is in bash's default `COMP_WORDBREAKS`, so `--parent-tool-bridge @fix` reaches the
/// completion function as `--parent-tool-bridge`, `@`, `fix` — while readline still replaces
/// `@fix` whole, so each answer keeps its `@`. Answers (and returns 0) only then.
fn after_at_function() -> String {
    let name = after_at_function_name();
    let options: Vec<&str> = AT_FILE_OPTIONS.iter().map(|(o, _)| *o).collect();
    let options = options.join("|");
    format!(
        r#"
{name}() {{
    local cword=${{COMP_CWORD}} f
    (( cword >= 2 )) || return 1
    [[ ${{COMP_WORDS[cword-1]}} == @ ]] || return 1
    case ${{COMP_WORDS[cword-2]}} in
        {options}) ;;
        *) return 1 ;;
    esac
    COMPREPLY=()
    while IFS= read -r f; do
        [[ -d ${{f}} ]] && f="${{f}}/"
        COMPREPLY+=("@${{f}}")
    done < <(compgen -f -- "${{COMP_WORDS[cword]}}")
    if [[ ${{#COMPREPLY[@]}} -eq 1 && ${{COMPREPLY[0]}} == */ ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}}
"#
    )
}

/// clap_complete's bash script with its `case` arms spelt as its word walk spells the states,
/// and the `@FILE` options completing `@` file names.
fn repair_bash(script: &str) -> String {
    let wrong = BIN.replace('-', "__subcmd__");
    let right = BIN.replace('-', "__");
    let script = script.replace(&wrong, &right);
    let mut out = String::with_capacity(script.len() + 1024);
    let mut lines = script.lines().peekable();
    let mut first_function = true;
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        // The completion function's first line: a file name after a split-off `@` first.
        if first_function && line.trim_start().starts_with("local i cur prev opts cmd") {
            first_function = false;
            out.push_str(&format!("    {} && return 0\n", after_at_function_name()));
        }
        let option = line.trim().strip_suffix(')');
        let Some((_, words)) = AT_FILE_OPTIONS.iter().find(|(o, _)| Some(*o) == option) else {
            continue;
        };
        // The arm's body: clap_complete's `COMPREPLY=($(compgen -f "${cur}"))`.
        if let Some(next) = lines.next_if(|l| l.trim() == r#"COMPREPLY=($(compgen -f "${cur}"))"#) {
            let indent = &next[..next.len() - next.trim_start().len()];
            out.push_str(indent);
            out.push_str(&at_file_function_name());
            for word in *words {
                out.push(' ');
                out.push_str(word);
            }
            out.push('\n');
        }
    }
    // The helper goes before the `complete` lines that register the function.
    let helpers = at_file_function() + &after_at_function();
    match out.find("\nif [[ \"${BASH_VERSINFO[0]}\"") {
        Some(at) => out.insert_str(at, &helpers),
        None => out.push_str(&helpers),
    }
    out
}

/// fish `complete` lines for the values of every positional argument that has a fixed set of
/// them, at the first two levels of subcommands (as deep as clap_complete's conditions go).
fn fish_positional_values(cmd: &clap::Command) -> String {
    let prefix = format!("__fish_{}", BIN.replace('-', "_"));
    let mut out = String::new();
    for sub in cmd.get_subcommands() {
        let condition = format!("{prefix}_using_subcommand {}", sub.get_name());
        fish_values_of(sub, &condition, &mut out);
        for inner in sub.get_subcommands() {
            let condition = format!(
                "{prefix}_using_subcommand {}; and __fish_seen_subcommand_from {}",
                sub.get_name(),
                inner.get_name()
            );
            fish_values_of(inner, &condition, &mut out);
        }
    }
    out
}

fn fish_values_of(cmd: &clap::Command, condition: &str, out: &mut String) {
    for arg in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let values: Vec<_> = arg
            .get_possible_values()
            .into_iter()
            .filter(|v| !v.is_hide_set())
            .collect();
        if values.is_empty() {
            continue;
        }
        let names: Vec<&str> = values.iter().map(|v| v.get_name()).collect();
        // Offered until one of them is on the command line.
        let when = format!(
            "{condition}; and not __fish_seen_subcommand_from {}",
            names.join(" ")
        );
        for value in &values {
            out.push_str(&format!(
                "complete -c {BIN} -n \"{when}\" -f -a \"{}\"",
                value.get_name()
            ));
            if let Some(help) = value.get_help() {
                out.push_str(&format!(" -d '{}'", fish_quoted(&help.to_string())));
            }
            out.push('\n');
        }
    }
}

/// Text for a fish single-quoted string: `\` and `'` escaped, one line.
fn fish_quoted(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('\'', "\\'")
        .replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bash_arms_are_spelt_as_the_walk_spells_them() {
        let script =
            String::from_utf8(script(Shell::Bash, &mut crate::completion_command())).unwrap();
        assert!(!script.contains("parent__subcmd__tool"));
        assert!(script.contains("        parent__tool__dispatch__subcmd__schema)\n"));
        assert!(script.contains("cmd=\"parent__tool__dispatch__subcmd__schema\""));
        // Every option taking @FILE completes through the helper, defined once.
        assert_eq!(
            script.matches("__parent_tool_dispatch_at_file()").count(),
            1
        );
        assert!(script.contains("__parent_tool_dispatch_at_file provider-safe\n"));
    }

    #[test]
    fn fish_values_are_quoted_for_fish() {
        assert_eq!(
            fish_quoted(r"it's a \ and a line"),
            r"it\'s a \\ and a line"
        );
        assert_eq!(fish_quoted("two\nlines"), "two lines");
    }
}
