use super::*;
use crate::json::{check_object_prescanned, check_object_with, JsonIssue, Member};
use proptest::prelude::*;
use std::ops::Range;

/// What the strict reader says of a document: its text and members, or the issue.
type Reading = Result<(String, Vec<(String, Range<usize>, bool)>), JsonIssue>;

fn members_of<'t>(
    check: impl FnOnce(&mut dyn FnMut(Member<'t>)) -> Result<&'t str, JsonIssue>,
) -> Reading {
    let mut members = Vec::new();
    let text = check(&mut |member| {
        if let Member::Key(key, span, canonical) = member {
            members.push((key.into_owned(), span, canonical));
        }
    })?;
    Ok((text.to_string(), members))
}

fn plain(bytes: &[u8]) -> Reading {
    members_of(|on| check_object_with(bytes, usize::MAX, on))
}

/// Feed `bytes` to a prescan in pieces of the given sizes (cycled), the way the supervisor
/// does: a buffer that grows, and may move when it does.
fn fed(bytes: &[u8], pieces: &[usize]) -> (Vec<u8>, Prescan) {
    fed_to(Prescan::new(), bytes, pieces)
}

fn fed_to(mut prescan: Prescan, bytes: &[u8], pieces: &[usize]) -> (Vec<u8>, Prescan) {
    let mut buf = Vec::new();
    let mut sizes = pieces.iter().copied().cycle();
    while buf.len() < bytes.len() {
        let take = sizes
            .next()
            .unwrap_or(1)
            .max(1)
            .min(bytes.len() - buf.len());
        buf.extend_from_slice(&bytes[buf.len()..buf.len() + take]);
        prescan.advance(&buf);
    }
    (buf, prescan)
}

fn prescanned(bytes: &[u8], pieces: &[usize]) -> (Reading, Vec<ReadString>) {
    let (buf, prescan) = fed(bytes, pieces);
    let reading = members_of(|on| check_object_prescanned(&buf, &prescan, usize::MAX, on));
    let read = prescan.strings(&buf).to_vec();
    (reading, read)
}

/// An envelope whose `output` is `inner` (already JSON-escaped).
fn envelope(inner: &str) -> String {
    format!(r#"{{"schema":"s","status":"succeeded","output":"{inner}","after":["x\/y",1]}}"#)
}

#[test]
fn a_long_string_fed_in_any_pieces_is_read_once_and_agrees_with_the_plain_reading() {
    let inner = "line of text\\n\\u00e9\\/\\ud83d\\ude00 ".repeat(300);
    let doc = envelope(&inner);
    let start = doc.find(r#""line"#).unwrap();
    let want = plain(doc.as_bytes());
    assert!(want.is_ok());
    for pieces in [&[1][..], &[7, 3], &[4096], &[65536], &[11, 12, 13, 5000]] {
        let (reading, read) = prescanned(doc.as_bytes(), pieces);
        assert_eq!(reading, want, "pieces {pieces:?}");
        assert_eq!(
            read,
            vec![ReadString {
                start,
                end: start + inner.len() + 2,
                escaped: true,
                // `\u00e9`, `\/` and the surrogate pair (one rewrite) per repeat.
                rewrites: 3 * 300,
            }],
            "pieces {pieces:?}"
        );
    }
}

#[test]
fn an_escape_just_before_the_end_of_the_stream_still_closes_its_string() {
    // The last escape is within the longest escape's length of the end: nothing more comes.
    let doc = format!(r#"{{"output":"{}\n"}}"#, "a".repeat(5000));
    let (reading, read) = prescanned(doc.as_bytes(), &[doc.len()]);
    assert_eq!(reading, plain(doc.as_bytes()));
    assert_eq!(read.len(), 1, "{read:?}");
    assert_eq!(read[0].end, doc.len() - 1);
}

#[test]
fn a_surrogate_pair_or_a_character_cut_between_reads_is_read_whole() {
    let inner = format!("{}\\ud83d\\ude00{}é", "a".repeat(4100), "b".repeat(10));
    let doc = envelope(&inner);
    let cut = doc.find("\\ude00").unwrap();
    let cut_char = doc.find('é').unwrap() + 1;
    for pieces in [vec![cut - 3, 2, 100_000], vec![cut_char, 1, 100_000]] {
        let (reading, read) = prescanned(doc.as_bytes(), &pieces);
        assert_eq!(reading, plain(doc.as_bytes()));
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].rewrites, 1);
    }
}

#[test]
fn short_strings_are_not_recorded() {
    let doc = envelope(&"a".repeat(LONG_STRING - 3));
    assert!(prescanned(doc.as_bytes(), &[100]).1.is_empty());
    let doc = envelope(&"a".repeat(LONG_STRING - 2));
    assert_eq!(prescanned(doc.as_bytes(), &[100]).1.len(), 1);
}

#[test]
fn bad_bytes_get_the_same_issue_with_or_without_the_prescan() {
    let long = "a".repeat(5000);
    let cases: Vec<Vec<u8>> = vec![
        // Not UTF-8, early and late, and a cut character at the very end.
        format!(r#"{{"output":"{long}"#)
            .into_bytes()
            .into_iter()
            .chain([0xFF, b'"', b'}'])
            .collect(),
        [b"{\"a\":\"\xC3".as_slice(), long.as_bytes(), b"\"}"].concat(),
        [format!(r#"{{"output":"{long}"}}"#).as_bytes(), b"\xE2\x82"].concat(),
        // An invalid escape, a lone surrogate, a raw control character, in a long string.
        envelope(&format!("{long}\\x")).into_bytes(),
        envelope(&format!("{long}\\ud800 tail")).into_bytes(),
        envelope(&format!("{long}\u{1}")).into_bytes(),
        // An unterminated string, a second document, a truncated one.
        format!(r#"{{"output":"{long}}}"#).into_bytes(),
        format!(r#"{{"output":"{long}"}} {{}}"#).into_bytes(),
        format!(r#"{{"output":"{long}"#).into_bytes(),
        // A quote where the grammar has none: the prescan takes the wrong bytes for strings.
        format!(r#"{{"a":1"{long}":2,"b":"{long}"}}"#).into_bytes(),
        format!(r#"{{"a":"x"{long}"}}"#).into_bytes(),
    ];
    for doc in cases {
        let want = plain(&doc);
        assert!(want.is_err(), "{:?}", String::from_utf8_lossy(&doc[..40]));
        for pieces in [&[1][..], &[3000], &[doc.len()]] {
            assert_eq!(prescanned(&doc, pieces).0, want, "pieces {pieces:?}");
        }
    }
}

#[test]
fn a_prescan_of_other_bytes_is_not_used() {
    let doc = envelope(&"a".repeat(5000));
    let (buf, prescan) = fed(doc.as_bytes(), &[1000]);
    assert_eq!(prescan.strings(&buf).len(), 1);
    // The same text elsewhere, a prefix of it, or other text: no string, and a full check.
    let copy = buf.clone();
    assert!(prescan.strings(&copy).is_empty());
    assert!(prescan.strings(&buf[..buf.len() - 1]).is_empty());
    let mut other = buf.clone();
    other[20] = 0xFF;
    assert_eq!(prescan.text(&other), Err(20));
    let reading = members_of(|on| check_object_prescanned(&copy, &prescan, usize::MAX, on));
    assert_eq!(reading, plain(doc.as_bytes()));
}

#[test]
fn a_buffer_that_shrank_stops_the_prescan() {
    let doc = envelope(&"a".repeat(5000));
    let (mut buf, mut prescan) = fed(doc.as_bytes(), &[3000]);
    buf.truncate(100);
    prescan.advance(&buf);
    assert!(prescan.strings(&buf).is_empty());
    assert!(prescan.text(&buf).is_ok());
}

fn long_text() -> impl Strategy<Value = String> {
    // Long enough to be recorded, with every kind of escape and some non-ASCII.
    prop::collection::vec(
        prop_oneof![
            Just("plain text ".to_string()),
            Just("\\n".to_string()),
            Just("\\/".to_string()),
            Just("\\u00e9".to_string()),
            Just("\\ud83d\\ude00".to_string()),
            Just("é€😀".to_string()),
            Just("\\\"".to_string()),
        ],
        0..900,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_prescanned_reading_is_the_plain_reading(
        inner in long_text(),
        pieces in prop::collection::vec(1usize..3000, 1..6),
        flip in prop::option::of((any::<prop::sample::Index>(), any::<u8>())),
    ) {
        let mut doc = envelope(&inner).into_bytes();
        if let Some((at, byte)) = flip {
            let at = at.index(doc.len());
            doc[at] = byte;
        }
        let (reading, read) = prescanned(&doc, &pieces);
        let want = plain(&doc);
        prop_assert_eq!(&reading, &want);
        // Recording every string, however short: still the same reading.
        let (buf, every) = fed_to(Prescan::recording_from(0), &doc, &pieces);
        let reading = members_of(|on| check_object_prescanned(&buf, &every, usize::MAX, on));
        prop_assert_eq!(reading, want);
        // Every string it offers is one: a valid string from its quote to its end.
        for s in read {
            let alone = [b"{\"k\":".as_slice(), &doc[s.start..s.end], b"}"].concat();
            prop_assert!(plain(&alone).is_ok());
            prop_assert_eq!(s.escaped, doc[s.start..s.end].contains(&b'\\'));
        }
    }
}
