//! The man pages, rendered from the clap definitions (so `--help` and the pages never
//! disagree) plus the EXIT STATUS and ERROR CODES sections, rendered from `error.rs`.
//! `man/` holds the committed output; a test fails when it is stale.

use crate::cli::Cli;
use crate::error::{exit, ErrorCode};
use clap::CommandFactory;

/// Every page as (file name, roff bytes).
pub fn pages() -> Vec<(String, Vec<u8>)> {
    let cmd = Cli::command();
    let mut pages = vec![("parent-tool-dispatch.1".to_string(), main_page(cmd.clone()))];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("parent-tool-dispatch-{}", sub.get_name());
        let sub = sub
            .clone()
            .name(name.clone())
            .display_name(name.clone())
            .bin_name(name.clone());
        let mut buf = Vec::new();
        // Rendering into a Vec cannot fail.
        let _ = clap_mangen::Man::new(sub).render(&mut buf);
        pages.push((format!("{name}.1"), buf));
    }
    pages
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
    buf.extend_from_slice(exit_status_section().as_bytes());
    buf.extend_from_slice(error_codes_section().as_bytes());
    let _ = man.render_extra_section(&mut buf);
    let _ = man.render_version_section(&mut buf);
    buf
}

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
        s.push_str(&format!(
            ".TP\n{}\n{}, retryable {}, exit {}\n",
            code.as_str(),
            code.status(),
            code.retryable(),
            code.exit_code()
        ));
    }
    s
}
