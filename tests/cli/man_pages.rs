//! The man pages, rendered from the clap definitions (so `--help` and the pages never disagree)
//! and from `error.rs` (EXIT STATUS, ERROR CODES). Only the test suite renders them, so the
//! binary does not carry `clap_mangen`; `generated.rs` compares them with the committed `man/`.
//!
//! One page per visible command, named like git's: `parent-tool-dispatch-adapter-workspace.1`
//! documents `parent-tool-dispatch adapter workspace`. Pages are plain ASCII roff (anything
//! else becomes a `\[uXXXX]` escape), with hyphenation off so that flags are never split.

use clap::CommandFactory;
use clap_mangen::roff::{bold, roman, Inline, Roff};
use parent_tool_dispatch::cli::{Cli, EXAMPLES};
use ptd_wire::error::{ErrorCode, EXIT_STATUSES};

const BIN: &str = "parent-tool-dispatch";

/// Every page as (file name, roff bytes): the main page and one per visible subcommand, nested
/// ones included.
pub(crate) fn pages() -> Vec<(String, Vec<u8>)> {
    let mut root = Cli::command();
    root.build();
    let mut pages = Vec::new();
    collect(&root, &[], &mut pages);
    pages
}

/// An option left out of the short `-h` (`hide_short_help`) and described in one paragraph has
/// no long help of its own: clap_mangen, which renders the long help and never a hidden short
/// one, would list it without a word. A page is the long help, so it gets its text.
fn long_help_of_its_own(arg: clap::Arg) -> clap::Arg {
    match arg.get_help().cloned() {
        Some(help) if arg.is_hide_short_help_set() && arg.get_long_help().is_none() => {
            arg.long_help(help)
        }
        _ => arg,
    }
}

/// Subcommands that get a page: not hidden, not clap's own `help`.
fn documented(cmd: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

fn collect(cmd: &clap::Command, words: &[&str], pages: &mut Vec<(String, Vec<u8>)>) {
    let page = Page { cmd, words };
    pages.push((format!("{}.1", page.name()), page.render()));
    for sub in documented(cmd) {
        let mut sub_words = words.to_vec();
        sub_words.push(sub.get_name());
        collect(sub, &sub_words, pages);
    }
}

/// One command's page; `words` are the subcommand names after the binary's.
struct Page<'a> {
    cmd: &'a clap::Command,
    words: &'a [&'a str],
}

impl Page<'_> {
    /// `parent-tool-dispatch-adapter-workspace`: the page name.
    fn name(&self) -> String {
        page_name(self.words)
    }

    /// `parent-tool-dispatch adapter workspace`: how it is invoked.
    fn invocation(&self) -> String {
        std::iter::once(BIN)
            .chain(self.words.iter().copied())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn render(&self) -> Vec<u8> {
        let is_main = self.words.is_empty();
        // The command as if it were its own program, so clap's usage and clap_mangen's
        // option list name the real invocation.
        let cmd = self
            .cmd
            .clone()
            .name(self.invocation())
            .bin_name(self.invocation())
            .display_name(self.invocation())
            .mut_args(long_help_of_its_own);
        let mut text = String::new();
        text.push_str(&format!(
            ".TH {} 1 \"\" \"{BIN} {}\" \"User Commands\"\n",
            self.name().to_uppercase(),
            env!("CARGO_PKG_VERSION")
        ));
        // No hyphenation and no justification: flags must never be split across lines.
        text.push_str(".nh\n.ad l\n");
        let mut roff = Roff::new();
        roff.control("SH", ["NAME"]);
        let about = self
            .cmd
            .get_about()
            .map(|a| a.to_string())
            .unwrap_or_default();
        roff.text([roman(format!("{} - {about}", self.name()))]);
        self.synopsis(&mut roff, &cmd);
        text.push_str(&roff.to_roff_with_apostrophes());

        text.push_str(&section(|w| {
            clap_mangen::Man::new(cmd.clone()).render_description_section(w)
        }));
        text.push_str(&section(|w| {
            clap_mangen::Man::new(cmd.clone()).render_options_section(w)
        }));

        let mut roff = Roff::new();
        self.subcommands(&mut roff);
        if is_main {
            guide(&mut roff);
            examples(&mut roff);
            exit_statuses(&mut roff);
            error_codes(&mut roff);
        } else if let Some(after) = self.cmd.get_after_long_help().or(self.cmd.get_after_help()) {
            // A subcommand's after-help (its exit statuses, its codes) as written, unfilled.
            roff.control("SH", ["NOTES"]);
            roff.control("nf", []);
            for line in after.to_string().lines() {
                roff.text([roman(line.to_string())]);
            }
            roff.control("fi", []);
        }
        self.see_also(&mut roff);
        text.push_str(&roff.to_roff_with_apostrophes());
        ascii(&text).into_bytes()
    }

    fn synopsis(&self, roff: &mut Roff, cmd: &clap::Command) {
        roff.control("SH", ["SYNOPSIS"]);
        let usage = cmd.clone().render_usage().to_string();
        let usage = usage.strip_prefix("Usage:").unwrap_or(&usage);
        let invocation = self.invocation();
        let mut line: Vec<Inline> = Vec::new();
        for (i, form) in usage.lines().map(str::trim).enumerate() {
            if i > 0 {
                line.push(Inline::LineBreak);
            }
            let rest = form.strip_prefix(invocation.as_str()).unwrap_or(form);
            line.push(bold(invocation.clone()));
            line.push(roman(rest.to_string()));
        }
        roff.text(line);
    }

    fn subcommands(&self, roff: &mut Roff) {
        let subs: Vec<_> = documented(self.cmd).collect();
        if subs.is_empty() {
            return;
        }
        roff.control("SH", ["SUBCOMMANDS"]);
        for sub in subs {
            let mut words = self.words.to_vec();
            words.push(sub.get_name());
            roff.control("TP", []);
            roff.text([bold(sub.get_name())]);
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let stop = if about.ends_with('.') { "" } else { "." };
            roff.text([
                roman(format!("{about}{stop} See ")),
                bold(page_name(&words)),
                roman("(1)."),
            ]);
        }
    }

    /// The parent's page, the main page and the pages of subcommands: all exist.
    fn see_also(&self, roff: &mut Roff) {
        let mut refs: Vec<String> = Vec::new();
        for n in 0..self.words.len() {
            refs.push(page_name(&self.words[..n]));
        }
        for sub in documented(self.cmd) {
            let mut words = self.words.to_vec();
            words.push(sub.get_name());
            refs.push(page_name(&words));
        }
        if refs.is_empty() {
            return;
        }
        roff.control("SH", ["SEE ALSO"]);
        let mut line = Vec::new();
        for (i, name) in refs.into_iter().enumerate() {
            if i > 0 {
                line.push(roman(", "));
            }
            line.push(bold(name));
            line.push(roman("(1)"));
        }
        roff.text(line);
    }
}

fn page_name(words: &[&str]) -> String {
    std::iter::once(BIN)
        .chain(words.iter().copied())
        .collect::<Vec<_>>()
        .join("-")
}

/// A section rendered by clap_mangen, without the preamble it repeats on every render.
fn section(render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut buf = Vec::new();
    render(&mut buf).expect("rendering into a Vec cannot fail");
    let text = String::from_utf8(buf).expect("clap_mangen writes UTF-8");
    text.strip_prefix(PREAMBLE)
        .expect("clap_mangen starts each section with the apostrophe preamble")
        .to_string()
}

/// What `roff` puts before every rendering (an `Aq` string for a straight apostrophe).
const PREAMBLE: &str = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";

trait RoffExt {
    /// The rendering without the preamble (the page has it once, at the top).
    fn to_roff_with_apostrophes(&self) -> String;
}

impl RoffExt for Roff {
    fn to_roff_with_apostrophes(&self) -> String {
        let text = self.render();
        text.strip_prefix(PREAMBLE).unwrap_or(&text).to_string()
    }
}

/// Anything outside ASCII as a groff `\[uXXXX]` escape; the preamble once, first.
fn ascii(text: &str) -> String {
    let mut out = String::from(PREAMBLE);
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            out.push_str(&format!("\\[u{:04X}]", c as u32));
        }
    }
    out
}

/// What the options list does not say. Kept short; docs/guide.md has the long form.
fn guide(roff: &mut Roff) {
    roff.control("SH", ["ENVIRONMENT"]);
    roff.control("TP", []);
    roff.text([bold("PARENT_TOOL_DISPATCH_BRIDGE")]);
    roff.text([roman("The bridge, when --parent-tool-bridge is not given.")]);
    roff.control("TP", []);
    roff.text([roman("Adapter environment")]);
    roff.text([roman(
        "Cleared, then rebuilt from PATH, HOME, LANG, LC_ALL, TZ, TMPDIR (when set), the \
         bridge's command.env, every --pass-env and --secret-env variable, and \
         WP_CODEBOX_PARENT_TOOL_REQUEST_ID, _TOOL, _OPERATION, _TIMEOUT_MS, _REQUEST_SCHEMA, \
         _RESULT_SCHEMA (and _REQUEST_FILE, _RESULT_FILE for the file transport).",
    )]);
    roff.control("SH", ["PROCESS HANDLING"]);
    roff.text([roman(
        "The adapter runs with no shell, in its own process group. At the bridge's \
         dispatcher.timeout_ms (30000 when absent) it gets SIGTERM, then SIGKILL after \
         --kill-grace-ms; the dispatcher returns by timeout_ms + kill_grace_ms + 250 ms whatever \
         its descendants do. After the adapter exits, descendants holding its pipes get 100 ms, \
         then the group is killed; on Linux the dispatcher is a child subreaper and also kills \
         descendants that left the group (diagnostics.dispatch.leaked_processes counts them). \
         SIGINT, SIGTERM and SIGHUP are forwarded to the adapter's group and answered with a \
         failed/interrupted envelope.",
    )]);
    roff.control("SH", ["TRANSCRIPTS AND REDACTION"]);
    roff.text([roman(
        "With --artifact-dir, each dispatch writes one redacted \
         wp-codebox/tool-call-transcript/v1 file under DIR/files/parent-tools/ (never \
         overwriting, mode 0600, written atomically) and returns its path and sha256 in \
         artifacts.transcripts. Exact secret values (from --secret-env, sensitive-named passed \
         or bridge variables, token_env) and their JSON-escaped, URL-encoded and base64 forms \
         are scrubbed from everything printed or written; the dispatcher's messages, \
         diagnostics and transcripts also lose credentials under sensitive keys, bearer and \
         basic credentials, cookies, URL userinfo, known token shapes, and host-local paths \
         (replaced by [host-path]). The adapter's output is otherwise passed through unchanged.",
    )]);
}

fn examples(roff: &mut Roff) {
    roff.control("SH", ["EXAMPLES"]);
    for (what, command) in EXAMPLES {
        roff.control("PP", []);
        roff.text([roman(what)]);
        roff.control("PP", []);
        roff.control("RS", ["4"]);
        roff.text([bold(command)]);
        roff.control("RE", []);
    }
}

fn exit_statuses(roff: &mut Roff) {
    roff.control("SH", ["EXIT STATUS"]);
    roff.text([roman(
        "The envelope on stdout is the source of truth; the exit status follows its status, \
         whoever produced it.",
    )]);
    for row in EXIT_STATUSES {
        roff.control("TP", []);
        roff.text([bold(row.code.to_string())]);
        roff.text([roman(row.meaning_plain())]);
    }
}

fn error_codes(roff: &mut Roff) {
    roff.control("SH", ["ERROR CODES"]);
    roff.text([roman(
        "Stable codes of the dispatcher's own failures (status, retryable, exit). An adapter's \
         own codes pass through unchanged.",
    )]);
    for code in ErrorCode::ALL {
        roff.control("TP", []);
        roff.text([bold(code.as_str())]);
        let [status, retryable, exit] = code.columns();
        roff.text([roman(format!(
            "{status}, retryable {retryable}, exit {exit}"
        ))]);
    }
}
