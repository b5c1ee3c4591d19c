//! Processes by name, for the tests of what outlives a call: the scripted adapter's `named`
//! step looks in its own `/proc`, a test of the binary in the host's.

use std::path::Path;

/// The most `/proc` entries looked at.
const MAX_PROCESSES: usize = 65_536;

/// The live processes (not zombies) named `name` in this process's `/proc`, by pid: the
/// product's own readers (`ptd_sys::fs`, `ProcStat`). A process gone between the listing and
/// the look is not counted.
pub fn live_named(name: &str) -> Vec<i32> {
    let Ok((entries, _)) = ptd_sys::fs::list_dir_path(Path::new("/proc"), MAX_PROCESSES) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|e| std::str::from_utf8(&e.name).ok()?.parse::<i32>().ok())
        .filter(|pid| {
            let comm = Path::new("/proc").join(pid.to_string()).join("comm");
            ptd_sys::fs::read_text(&comm, 64).is_ok_and(|c| c.trim_end() == name)
                && ptd_sys::exec::ProcStat::read(*pid)
                    .ok()
                    .flatten()
                    .is_some_and(|s| s.live())
        })
        .collect()
}
