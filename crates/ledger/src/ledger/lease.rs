//! Leases (SPEC §14.1): who holds a `running` key — the boot, the pid and the process's start
//! time (field 22 of `/proc/<pid>/stat`, clock ticks since boot). A pid alone is not enough:
//! pids are reused, so a lease is live only while a process with that pid AND that start time
//! exists in this boot and is not a zombie. Leases assume one pid namespace for every
//! dispatcher sharing a ledger (the README says so).

use ptd_sys::exec::ProcStat;
use std::io;
use std::path::Path;
use std::time::Duration;

/// The holder of a `running` key.
///
/// Two leases are equal when they name the same holder (boot, pid, start time): the heartbeat
/// is when a store last saw the holder renew it, not part of who holds.
#[derive(Debug, Clone)]
pub struct Lease {
    /// `/proc/sys/kernel/random/boot_id`: start ticks count from boot, so after a reboot every
    /// older lease is dead.
    pub boot_id: String,
    /// The dispatcher's pid.
    pub pid: u32,
    /// Field 22 of `/proc/<pid>/stat`.
    pub start_ticks: u64,
    /// When the holder last renewed the lease (ms since the Unix epoch), as a store that
    /// keeps heartbeats read it (PostgreSQL, SPEC §19.1); `None` for a lease made here or
    /// read from a store without them (SQLite, one host). A holder on another host is
    /// judged by it alone ([`Lease::is_live_within`]).
    pub heartbeat_ms: Option<u64>,
}

impl PartialEq for Lease {
    fn eq(&self, other: &Lease) -> bool {
        self.boot_id == other.boot_id
            && self.pid == other.pid
            && self.start_ticks == other.start_ticks
    }
}

impl Eq for Lease {}

/// How long a holder on another host counts as alive after its last heartbeat, unless the
/// ledger is told otherwise (`lease_ttl`, SPEC §19.1).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

/// Whether a holder on another host is alive (pure): its heartbeat is younger than `ttl_ms`
/// at `now_ms`. No heartbeat (a store without them): not alive — as a lease of an older
/// boot of this host has always been judged.
pub fn foreign_alive(heartbeat_ms: Option<u64>, now_ms: u64, ttl_ms: u64) -> bool {
    heartbeat_ms.is_some_and(|beat| now_ms.saturating_sub(beat) < ttl_ms)
}

/// Where the kernel names this boot.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

fn boot_id() -> io::Result<String> {
    // A UUID and a newline; the bound only guards against a strange file there.
    Ok(ptd_sys::fs::read_text(Path::new(BOOT_ID), 4096)?
        .trim()
        .to_string())
}

/// `/proc/<pid>/stat` of `pid` (read and parsed by `exec::ProcStat`, the one reader of that
/// file); `None` when there is no such process.
fn stat_of(pid: u32) -> io::Result<Option<ProcStat>> {
    match i32::try_from(pid) {
        Ok(pid) => ProcStat::read(pid),
        Err(_) => Ok(None),
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
            heartbeat_ms: None,
        }))
    }

    /// [`Lease::is_live_within`] with [`DEFAULT_LEASE_TTL`].
    pub fn is_live(&self) -> bool {
        self.is_live_within(DEFAULT_LEASE_TTL)
    }

    /// Whether the holder still runs. On this boot: the pid exists with the same start time
    /// and is not a zombie (`Z`) or dead (`X`). On another boot — another host sharing a
    /// PostgreSQL ledger, or this host before a reboot — its heartbeat is younger than `ttl`
    /// ([`foreign_alive`]). When `/proc` cannot be read at all the lease is taken as live:
    /// declaring a running call dead on a doubt would let it run twice.
    pub fn is_live_within(&self, ttl: Duration) -> bool {
        match boot_id() {
            Ok(boot) if boot != self.boot_id => {
                let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
                return foreign_alive(self.heartbeat_ms, super::now_ms(), ttl_ms);
            }
            Ok(_) => {}
            Err(_) => return true,
        }
        match stat_of(self.pid) {
            Ok(Some(st)) => st.start_ticks == self.start_ticks && st.live(),
            Ok(None) => false,
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
