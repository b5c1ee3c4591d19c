//! What git prints, read into the tools' outputs: `git status --porcelain=v2 --branch -z` and
//! `git log -z` with the adapter's own format. Pure functions on bytes: a record cut by the
//! output cap (or malformed) is dropped and reported as `truncated`, never guessed at.
//! Paths and text that are not UTF-8 are decoded lossily (U+FFFD).

use serde_json::{json, Map, Value};

/// `git status --porcelain=v2 --branch -z` → `{branch, head?, upstream?, ahead?, behind?,
/// entries: [{path, index, worktree, orig_path?}], truncated}`. At most `max_entries`
/// entries; `cut` says git's output was stopped at the cap.
pub(super) fn status(stdout: &[u8], cut: bool, max_entries: usize) -> Value {
    let mut records: Vec<&[u8]> = stdout.split(|&b| b == 0).collect();
    // The last piece follows the last NUL: empty when git finished the record.
    let unfinished = records.pop().is_some_and(|last| !last.is_empty());
    let mut truncated = cut || unfinished;
    let mut out = Map::new();
    out.insert("branch".into(), Value::Null);
    let mut entries = Vec::new();
    let mut i = 0;
    while i < records.len() {
        let record = String::from_utf8_lossy(records[i]);
        i += 1;
        if let Some(header) = record.strip_prefix("# ") {
            branch_header(header, &mut out);
            continue;
        }
        if entries.len() == max_entries {
            truncated = true;
            break;
        }
        let entry = match record.as_bytes().first() {
            Some(b'1') => changed(&record, 9),
            Some(b'u') => changed(&record, 11),
            Some(b'2') => {
                // A rename or copy: the original path is the next record.
                let orig = records
                    .get(i)
                    .map(|r| String::from_utf8_lossy(r).into_owned());
                i += 1;
                match (changed(&record, 10), orig) {
                    (Some(mut entry), Some(orig)) => {
                        entry["orig_path"] = Value::String(orig);
                        Some(entry)
                    }
                    _ => None,
                }
            }
            Some(b'?') | Some(b'!') => record.get(2..).map(|path| {
                let code = &record[..1];
                json!({"path": path, "index": code, "worktree": code})
            }),
            _ => None,
        };
        match entry {
            Some(entry) => entries.push(entry),
            None => truncated = true,
        }
    }
    out.insert("entries".into(), Value::Array(entries));
    out.insert("truncated".into(), Value::Bool(truncated));
    Value::Object(out)
}

/// One `# branch.*` header into `out`.
fn branch_header(header: &str, out: &mut Map<String, Value>) {
    let Some((key, value)) = header.split_once(' ') else {
        return;
    };
    match key {
        "branch.oid" if value != "(initial)" => {
            out.insert("head".into(), value.into());
        }
        "branch.head" if value != "(detached)" => {
            out.insert("branch".into(), value.into());
        }
        "branch.upstream" => {
            out.insert("upstream".into(), value.into());
        }
        "branch.ab" => {
            let mut counts = value.split(' ');
            let ahead = counts
                .next()
                .and_then(|a| a.strip_prefix('+')?.parse::<u64>().ok());
            let behind = counts
                .next()
                .and_then(|b| b.strip_prefix('-')?.parse::<u64>().ok());
            if let (Some(ahead), Some(behind)) = (ahead, behind) {
                out.insert("ahead".into(), ahead.into());
                out.insert("behind".into(), behind.into());
            }
        }
        _ => {}
    }
}

/// An ordinary (`1`, 9 fields), rename (`2`, 10) or unmerged (`u`, 11) entry: `XY` is the
/// second field and the path the last (it may hold spaces).
fn changed(record: &str, fields: usize) -> Option<Value> {
    let parts: Vec<&str> = record.splitn(fields, ' ').collect();
    if parts.len() != fields {
        return None;
    }
    let xy = parts[1].as_bytes();
    let path = parts[fields - 1];
    if xy.len() != 2 || path.is_empty() {
        return None;
    }
    Some(json!({
        "path": path,
        "index": (xy[0] as char).to_string(),
        "worktree": (xy[1] as char).to_string(),
    }))
}

/// The fields of one commit in [`LOG_FORMAT`], in order.
const LOG_FIELDS: [&str; 5] = [
    "commit",
    "author_name",
    "author_email",
    "author_date",
    "subject",
];

/// `git log -z --format=LOG_FORMAT`: the fields of [`LOG_FIELDS`], NUL-separated; `-z` ends
/// each commit with a NUL too.
pub(super) const LOG_FORMAT: &str = "--format=%H%x00%an%x00%ae%x00%aI%x00%s";

/// `git log -z --format=LOG_FORMAT` → `{commits: [{commit, author_name, author_email,
/// author_date, subject}], truncated}`.
pub(super) fn log(stdout: &[u8], cut: bool) -> Value {
    let mut fields: Vec<&[u8]> = stdout.split(|&b| b == 0).collect();
    let unfinished = fields.pop().is_some_and(|last| !last.is_empty());
    let whole = fields.len() / LOG_FIELDS.len();
    let truncated = cut || unfinished || !fields.len().is_multiple_of(LOG_FIELDS.len());
    let commits: Vec<Value> = fields
        .chunks_exact(LOG_FIELDS.len())
        .take(whole)
        .map(|chunk| {
            let map: Map<String, Value> = LOG_FIELDS
                .iter()
                .zip(chunk)
                .map(|(name, value)| {
                    (
                        name.to_string(),
                        Value::String(String::from_utf8_lossy(value).into_owned()),
                    )
                })
                .collect();
            Value::Object(map)
        })
        .collect();
    json!({"commits": commits, "truncated": truncated})
}

/// The paths of the gitlinks (submodules) in `git ls-files --stage -z` output: records
/// `<mode> <object> <stage>\t<path>\0`, mode `160000`.
pub(super) fn gitlinks(stdout: &[u8]) -> Vec<String> {
    let mut links: Vec<String> = stdout
        .split(|&b| b == 0)
        .filter_map(|record| {
            let rest = record.strip_prefix(b"160000 ")?;
            let tab = rest.iter().position(|&b| b == b'\t')?;
            Some(String::from_utf8_lossy(&rest[tab + 1..]).into_owned())
        })
        .collect();
    // An unmerged submodule has a record for each stage.
    links.dedup();
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitlinks_are_the_index_entries_of_mode_160000() {
        let out = b"100644 aaaa 0\ta.txt\x00160000 bbbb 0\tsub\x00100644 cccc 0\tsub2/160000 x\x00\
160000 dddd 1\tdeep/m\x00160000 eeee 2\tdeep/m\x00";
        assert_eq!(gitlinks(out), ["sub", "deep/m"]);
        assert!(gitlinks(b"").is_empty());
    }

    const OID: &str = "1111111111111111111111111111111111111111";

    #[test]
    fn status_reads_headers_and_every_kind_of_entry() {
        let out = format!(
            "# branch.oid {OID}\0# branch.head main\0# branch.upstream origin/main\0\
             # branch.ab +2 -1\0\
             1 .M N... 100644 100644 100644 {OID} {OID} a file.txt\0\
             2 R. N... 100644 100644 100644 {OID} {OID} R100 new name\0old name\0\
             u UU N... 100644 100644 100644 100644 {OID} {OID} {OID} both.txt\0\
             ? untracked dir/\0"
        );
        let v = status(out.as_bytes(), false, 100);
        assert_eq!(
            v,
            json!({
                "branch": "main", "head": OID, "upstream": "origin/main", "ahead": 2, "behind": 1,
                "entries": [
                    {"path": "a file.txt", "index": ".", "worktree": "M"},
                    {"path": "new name", "index": "R", "worktree": ".", "orig_path": "old name"},
                    {"path": "both.txt", "index": "U", "worktree": "U"},
                    {"path": "untracked dir/", "index": "?", "worktree": "?"},
                ],
                "truncated": false
            })
        );
    }

    #[test]
    fn an_unborn_detached_or_cut_status_says_so() {
        let v = status(b"# branch.oid (initial)\0# branch.head main\0", false, 10);
        assert_eq!(
            v,
            json!({"branch": "main", "entries": [], "truncated": false})
        );
        let v = status(
            format!("# branch.oid {OID}\0# branch.head (detached)\0").as_bytes(),
            false,
            10,
        );
        assert_eq!(v["branch"], Value::Null);
        assert_eq!(v["head"], OID);
        // Cut in the middle of a record, and a rename without its original path.
        let v = status(b"# branch.head m\0? a\0? b", true, 10);
        assert_eq!(
            v["entries"],
            json!([{"path": "a", "index": "?", "worktree": "?"}])
        );
        assert_eq!(v["truncated"], true);
        let v = status(
            format!("2 R. N... 100644 100644 100644 {OID} {OID} R100 new\0").as_bytes(),
            false,
            10,
        );
        assert_eq!(v["entries"], json!([]));
        assert_eq!(v["truncated"], true);
        let v = status(b"? a\0? b\0? c\0", false, 2);
        assert_eq!(v["entries"].as_array().unwrap().len(), 2);
        assert_eq!(v["truncated"], true);
    }

    #[test]
    fn log_reads_whole_commits_only() {
        let one = format!("{OID}\0Ann\0ann@example.org\02026-01-02T03:04:05+01:00\0Fix it\0");
        let v = log(format!("{one}{one}").as_bytes(), false);
        assert_eq!(v["truncated"], false);
        assert_eq!(
            v["commits"][1],
            json!({"commit": OID, "author_name": "Ann", "author_email": "ann@example.org",
                   "author_date": "2026-01-02T03:04:05+01:00", "subject": "Fix it"})
        );
        let cut = format!("{one}{OID}\0Bob");
        let v = log(cut.as_bytes(), true);
        assert_eq!(v["commits"].as_array().unwrap().len(), 1);
        assert_eq!(v["truncated"], true);
        assert_eq!(log(b"", false), json!({"commits": [], "truncated": false}));
    }

    proptest::proptest! {
        /// Whatever git (or a cut) prints, the readers answer without panicking, and never
        /// more entries than asked.
        #[test]
        fn any_bytes_read(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512), max in 0usize..8) {
            let v = status(&bytes, false, max);
            proptest::prop_assert!(v["entries"].as_array().unwrap().len() <= max);
            let v = log(&bytes, false);
            proptest::prop_assert!(v["commits"].is_array());
        }
    }
}
