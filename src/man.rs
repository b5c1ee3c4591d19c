//! The man pages, rendered from the clap definitions (so `--help` and the pages never
//! disagree) plus the EXIT STATUS and ERROR CODES sections, rendered from `error.rs`.
//! `man/` holds the committed output; a test fails when it is stale.

use crate::cli::Cli;
use crate::error::{exit, ErrorCode};
use clap::CommandFactory;

/// Every page as (file name, roff bytes): the main page and one per visible subcommand, nested
/// ones included (`parent-tool-dispatch-adapter-workspace.1`).
pub fn pages() -> Vec<(String, Vec<u8>)> {
    let cmd = Cli::command();
    let mut pages = vec![("parent-tool-dispatch.1".to_string(), main_page(cmd.clone()))];
    sub_pages(&cmd, "parent-tool-dispatch", &mut pages);
    pages
}

fn sub_pages(cmd: &clap::Command, prefix: &str, pages: &mut Vec<(String, Vec<u8>)>) {
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let name = format!("{prefix}-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .display_name(name.clone())
            .bin_name(name.clone());
        let mut buf = Vec::new();
        // Rendering into a Vec cannot fail.
        let _ = clap_mangen::Man::new(page).render(&mut buf);
        pages.push((format!("{name}.1"), buf));
        sub_pages(sub, &name, pages);
    }
}

fn main_page(cmd: clap::Command) -> Vec<u8> {
    let man = clap_mangen::Man::new(cmd);
    let mut buf = Vec::new();
    let _ = man.render_title(&mut buf);
    let _ = man.render_name_section(&mut buf);
    let _ = man.render_synopsis_section(&mut buf);
    let _ = man.render_description_section(&mut buf);
    let _ = man.render_options_section(&mut buf);
    let _ = man.render_subcommands_section(&mut buf);
    buf.extend_from_slice(GUIDE_SECTIONS.as_bytes());
    buf.extend_from_slice(exit_status_section().as_bytes());
    buf.extend_from_slice(error_codes_section().as_bytes());
    let _ = man.render_extra_section(&mut buf);
    let _ = man.render_version_section(&mut buf);
    buf
}

/// What the options list does not say: the adapter's environment, the process guarantees,
/// transcripts and redaction. Kept short; the README has the long form.
const GUIDE_SECTIONS: &str = r#".SH ENVIRONMENT
.TP
PARENT_TOOL_DISPATCH_BRIDGE
The bridge, when --parent-tool-bridge is not given.
.TP
Adapter environment
Cleared, then rebuilt from PATH, HOME, LANG, LC_ALL, TZ, TMPDIR (when set), the bridge's command.env, every --pass-env and --secret-env variable, and WP_CODEBOX_PARENT_TOOL_REQUEST_ID, _TOOL, _OPERATION, _TIMEOUT_MS, _REQUEST_SCHEMA, _RESULT_SCHEMA (and _REQUEST_FILE, _RESULT_FILE for the file transport).
.SH "PROCESS HANDLING"
The adapter runs with no shell, in its own process group. At timeout_ms it gets SIGTERM, then SIGKILL after --kill-grace-ms; the dispatcher returns by timeout_ms + kill_grace_ms + 250 ms whatever its descendants do. After the adapter exits, descendants holding its pipes get 100 ms, then the group is killed; on Linux the dispatcher is a child subreaper and also kills descendants that left the group (diagnostics.dispatch.leaked_processes counts them). SIGINT, SIGTERM and SIGHUP are forwarded to the adapter's group and answered with a failed/interrupted envelope.
.SH "TRANSCRIPTS AND REDACTION"
With --artifact-dir, each dispatch writes one redacted wp-codebox/tool-call-transcript/v1 file under DIR/files/parent-tools/ (never overwriting, mode 0600, written atomically) and returns its path and sha256 in artifacts.transcripts. Exact secret values (from --secret-env, sensitive-named passed or bridge variables, token_env) and their JSON-escaped, URL-encoded and base64 forms are scrubbed from everything printed or written; the dispatcher's messages, diagnostics and transcripts also lose credentials under sensitive keys, bearer and basic credentials, cookies, URL userinfo, known token shapes, and host-local paths (replaced by [host-path]). The adapter's output is otherwise passed through unchanged.
"#;

/// The exit statuses of the main job, one line each.
pub const EXIT_STATUSES: [(u8, &str); 8] = [
    (exit::SUCCESS, "succeeded"),
    (exit::FAILED, "failed, reported by or caused by the adapter"),
    (
        exit::USAGE,
        "usage error (bad flags, no bridge); no envelope, message on stderr",
    ),
    (
        exit::DATA_INVALID,
        "the request envelope is invalid (request_invalid, request_too_large)",
    ),
    (
        exit::UNAVAILABLE,
        "unavailable (bridge invalid or unsupported, adapter missing, cwd missing)",
    ),
    (
        exit::INTERNAL,
        "internal error (a bug); the envelope is still written",
    ),
    (exit::DENIED, "denied"),
    (exit::TIMEOUT, "timeout"),
];

fn exit_status_section() -> String {
    let mut s = String::from(".SH \"EXIT STATUS\"\nThe envelope on stdout is the source of truth; the exit status follows its status, whoever produced it.\n");
    for (code, meaning) in EXIT_STATUSES {
        s.push_str(&format!(".TP\n{code}\n{meaning}\n"));
    }
    s
}

fn error_codes_section() -> String {
    let mut s = String::from(".SH \"ERROR CODES\"\nStable codes of the dispatcher's own failures (status, retryable, exit). An adapter's own codes pass through unchanged.\n");
    for code in ErrorCode::ALL {
        let [status, retryable, exit] = code.columns();
        s.push_str(&format!(
            ".TP\n{}\n{status}, retryable {retryable}, exit {exit}\n",
            code.as_str(),
        ));
    }
    s
}
