//! Host-local paths (SPEC §5): registered path prefixes and any `/home/<user>`,
//! `/Users/<user>`, `/root` prefix become `[host-path]`, the rest of the path stays.
//!
//! Invariants: matches respect path boundaries on both ends (`/work/main` never eats
//! `/work/mainframe`, `a/home/x` is not a home directory), and a path right after a marker is
//! never matched, so a second run changes nothing. It must not touch anything but paths.

use super::{Edits, Redactor, HOST_PATH};

impl Redactor {
    /// Host path prefixes and `/home/<user>`, `/Users/<user>`, `/root` → `[host-path]`.
    pub(super) fn scrub_paths(&self, s: &str, edits: &mut Edits<'_>) {
        let bytes = s.as_bytes();
        let mut pos = 0;
        while let Some(off) = memchr::memchr(b'/', &bytes[pos..]) {
            let at = pos + off;
            pos = at + 1;
            if at < edits.done || !path_may_start(s, at) {
                continue;
            }
            if let Some(len) = self.path_prefix_len(&s[at..]) {
                edits.replace(at, at + len, HOST_PATH);
                pos = at + len;
            }
        }
    }

    /// Length of the longest host-local prefix of `rest` (which starts with `/`), if any.
    fn path_prefix_len(&self, rest: &str) -> Option<usize> {
        let registered = self
            .host_paths
            .iter()
            .filter(|p| rest.starts_with(p.as_str()) && path_ends_at(rest, p.len()))
            .map(|p| p.len())
            .max();
        let generic = ["/home/", "/Users/"]
            .iter()
            .find_map(|prefix| {
                let user = rest.strip_prefix(prefix)?;
                let len = name_run_len(user);
                (len > 0).then_some(prefix.len() + len)
            })
            .or_else(|| (rest.starts_with("/root") && path_ends_at(rest, 5)).then_some(5));
        registered.max(generic)
    }
}

/// A character that continues a file name (so `/work/main` is not a prefix of `/work/mainframe`).
fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '~' | '+' | '@' | '%')
}

/// A path starts at `at` (a `/`) unless it continues a name (`a/home/x`) or follows a marker
/// (`[host-path]/root` must stay as it is for redaction to be idempotent).
fn path_may_start(s: &str, at: usize) -> bool {
    match s[..at].chars().next_back() {
        None => true,
        Some(prev) => !is_name_char(prev) && prev != ']',
    }
}

/// Whether a prefix of `rest` of length `len` ends at a path boundary: end of text, `/`, or a
/// character that cannot continue the name. Trailing dots are sentence punctuation (`/root.`).
/// `[` continues the name: later passes turn name characters into `[redacted]`
/// (`/root.AKIA…` → `/root.[redacted]`), and a second run must decide as the first did.
fn path_ends_at(rest: &str, len: usize) -> bool {
    match rest[len..].trim_start_matches('.').chars().next() {
        None => true,
        Some(c) => c == '/' || (!is_name_char(c) && c != '['),
    }
}

/// Length of the user-name segment at the start of `s`, without trailing dots.
fn name_run_len(s: &str) -> usize {
    let end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
    s[..end].trim_end_matches('.').len()
}
#[cfg(test)]
mod tests {
    use crate::redact::Redactor;

    #[test]
    fn host_paths_are_replaced_at_path_boundaries_only() {
        let mut r = Redactor::new();
        r.add_host_path("/work/main/");
        r.add_host_path("/work");
        r.add_host_path("/");
        r.add_host_path("");
        r.add_host_path("relative/dir");
        assert_eq!(r.host_paths, ["/work/main", "/work"]);
        for (input, expected) in [
            ("/work/main/src/lib.rs", "[host-path]/src/lib.rs"),
            ("/work/mainframe/x", "[host-path]/mainframe/x"),
            ("cd /work/main.", "cd [host-path]."),
            ("file:///work/main", "file://[host-path]"),
            ("/srv/work/main", "/srv/work/main"),
            ("/home/alice/x/y.txt", "[host-path]/x/y.txt"),
            ("/Users/bob", "[host-path]"),
            ("(/root/.ssh/id_rsa)", "([host-path]/.ssh/id_rsa)"),
            ("/root", "[host-path]"),
            ("/rootfs/x /homepage", "/rootfs/x /homepage"),
            ("/root.AKIAIOSFODNN7EXAMPLE=", "/root.[redacted]="),
        ] {
            assert_eq!(r.redact_str(input), expected, "{input}");
        }
    }
}
