//! Leases (SPEC §14.1): who holds a `running` key — the boot, the pid and the process's start
//! time (field 22 of `/proc/<pid>/stat`, clock ticks since boot). A pid alone is not enough:
//! pids are reused, so a lease is live only while a process with that pid AND that start time
//! exists in this boot and is not a zombie. Leases assume one pid namespace for every
//! dispatcher sharing a ledger (the README says so).

use std::io;

/// The holder of a `running` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// `/proc/sys/kernel/random/boot_id`: start ticks count from boot, so after a reboot every
    /// older lease is dead.
    pub boot_id: String,
    /// The dispatcher's pid.
    pub pid: u32,
    /// Field 22 of `/proc/<pid>/stat`.
    pub start_ticks: u64,
}

/// What `/proc/<pid>/stat` says about a process: its state letter and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) state: u8,
    pub(crate) start_ticks: u64,
}

/// Parse `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may itself hold
/// spaces and `)`, so fields are counted after the LAST `)`.
pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // `state` is field 3; field 22 is 19 further on.
    let start_ticks = fields.nth(18)?.parse().ok()?;
    Some(ProcStat { state, start_ticks })
}

fn boot_id() -> io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?
        .trim()
        .to_string())
}

fn stat_of(pid: u32) -> io::Result<Option<ProcStat>> {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(text) => Ok(parse_stat(&text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Lease {
    /// The lease of this process.
    pub fn current() -> io::Result<Lease> {
        Lease::of(std::process::id())?
            .ok_or_else(|| io::Error::other("/proc/self/stat is unreadable"))
    }

    /// The lease a live process `pid` would hold now; `None` when there is no such process.
    pub fn of(pid: u32) -> io::Result<Option<Lease>> {
        let boot_id = boot_id()?;
        Ok(stat_of(pid)?.map(|st| Lease {
            boot_id,
            pid,
            start_ticks: st.start_ticks,
        }))
    }

    /// Whether the holder still runs: same boot, the pid exists with the same start time and
    /// is not a zombie (`Z`) or dead (`X`). When `/proc` cannot be read at all the lease is
    /// taken as live: declaring a running call dead on a doubt would let it run twice.
    pub fn is_live(&self) -> bool {
        match boot_id() {
            Ok(boot) if boot != self.boot_id => return false,
            Ok(_) => {}
            Err(_) => return true,
        }
        match stat_of(self.pid) {
            Ok(Some(st)) => st.start_ticks == self.start_ticks && !matches!(st.state, b'Z' | b'X'),
            Ok(None) => false,
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let fields: Vec<String> = (4..=52).map(|n| n.to_string()).collect();
        let text = format!("42 (a) b) (c) S {}\n", fields.join(" "));
        assert_eq!(
            parse_stat(&text),
            Some(ProcStat {
                state: b'S',
                start_ticks: 22
            })
        );
        assert_eq!(parse_stat("42 (x) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn this_process_is_live_and_a_changed_start_time_or_boot_is_not() {
        let me = Lease::current().unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.is_live());
        assert!(!Lease {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        }
        .is_live());
        assert!(!Lease {
            boot_id: "another-boot".into(),
            ..me.clone()
        }
        .is_live());
    }

    #[test]
    fn a_reaped_or_zombie_child_is_dead() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let lease = Lease::of(child.id()).unwrap().unwrap();
        assert!(lease.is_live());
        child.kill().unwrap();
        // Not reaped yet: a zombie, which can do nothing more.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while lease.is_live() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!lease.is_live());
        child.wait().unwrap();
        assert!(!lease.is_live());
        assert_eq!(Lease::of(child.id()).unwrap(), None);
    }
}
