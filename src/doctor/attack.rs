//! `parent-tool-dispatch __doctor-probe ATTACK...`: the entry point of the probe `doctor`
//! starts inside the confinement (SPEC §13.2). The attacks themselves, and the line each one
//! prints, are `ptd_sys::confine::attack`'s; this only reads the arguments, prints the lines and
//! picks the exit status.

use std::io::Write as _;

pub use ptd_sys::confine::attack::{attempt, parse_line, Answer, Attack};

/// The first argument that starts the probe instead of the command line (`lib.rs` checks it
/// before clap, so it is no subcommand: not in `--help`, completions or man pages).
pub(crate) const PROBE_WORD: &str = "__doctor-probe";

/// The probe's entry point: run each attack of `args`, one line each; exit 0, or 2 for an
/// argument it does not know.
pub fn main(args: &[std::ffi::OsString]) -> u8 {
    let mut out = String::new();
    for arg in args {
        let Some(arg) = arg.to_str() else {
            return ptd_wire::error::exit::USAGE;
        };
        let (word, value) = arg.split_once(':').unwrap_or((arg, ""));
        let Some(attack) = Attack::from_word(word) else {
            return ptd_wire::error::exit::USAGE;
        };
        out.push_str(&format!("{word}={}\n", attempt(attack, value).text()));
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ptd_wire::error::exit::SUCCESS,
        Err(_) => ptd_wire::error::exit::IO_ERROR,
    }
}
