//! Sensitive keys (SPEC §5): whether a JSON key or a `key=value` key names a credential.
//!
//! Invariants: keys are matched on whole segments (split on punctuation and camelCase), so
//! `sandbox_session_id` and `tokenizer_model` never match; the contract's own `*_env` keys hold
//! variable names and are exempt. It must not look at values.

use std::sync::OnceLock;

/// The sensitive terms, in `snake_case` (SPEC §5's list). A key matches when a run of its
/// segments, joined by `_` or run together, equals one of them (or its plural, except plain
/// `tokens`).
const SENSITIVE_TERMS: [&str; 19] = [
    "authorization",
    "cookie",
    "set_cookie",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "api_key",
    "apikey",
    "x_api_key",
    "private_key",
    "credential",
    "client_secret",
    "secret_key",
    "signing_key",
    "access_token",
    "refresh_token",
    "session_token",
];

/// No term, plural `s` included, is longer than this; longer runs are not looked at.
const MAX_TERM_BYTES: usize = 14;

/// A term spans at most this many segments (`x_api_key`, with one to spare).
const MAX_RUN_SEGMENTS: usize = 4;

/// Contract keys whose values are environment variable NAMES, never secrets.
const EXEMPT_KEYS: [&str; 4] = ["token_env", "url_env", "cwd_env", "secret_env"];

/// A segment right after a matched term that makes the key describe the secret rather than hold
/// it: `token_count`, `password_length`, `token_type`.
const DESCRIPTOR_SEGMENTS: [&str; 16] = [
    "count",
    "counts",
    "len",
    "length",
    "limit",
    "limits",
    "size",
    "type",
    "kind",
    "usage",
    "budget",
    "ttl",
    "expiry",
    "expires",
    "expiration",
    "estimate",
];

/// Whether `key` names a credential (SPEC §5), matched on whole segments: `x-api-key`,
/// `github_token`, `passwordHash`, `Set-Cookie`, `clientSecret`, `credentials`, `passphrase`,
/// `privateKey`, `signing_key` are sensitive; `sandbox_session_id`, `tokenizer_model`,
/// `max_tokens`, `token_count`, `token_env` are not.
///
/// Linear in the key and allocation-free: one pass over its segments, looking at the runs of
/// up to four segments that end at each one.
pub fn is_sensitive_key(key: &str) -> bool {
    if EXEMPT_KEYS.contains(&key) || !mentions_a_stem(key) {
        return false;
    }
    let key = key.as_bytes();
    // The last segments seen (byte ranges of `key`), oldest first.
    let mut recent: [(usize, usize); MAX_RUN_SEGMENTS] = [(0, 0); MAX_RUN_SEGMENTS];
    let mut seen = 0;
    for segment in Segments::new(key) {
        // A term ending at the previous segment counts unless this segment describes it.
        if seen > 0
            && ends_in_term(key, &recent, seen)
            && !is_descriptor(&key[segment.0..segment.1])
        {
            return true;
        }
        recent.rotate_left(1);
        recent[MAX_RUN_SEGMENTS - 1] = segment;
        seen += 1;
    }
    seen > 0 && ends_in_term(key, &recent, seen)
}

/// Whether a run of the last segments in `recent` spells a term.
fn ends_in_term(key: &[u8], recent: &[(usize, usize); MAX_RUN_SEGMENTS], seen: usize) -> bool {
    let mut letters = 0;
    for len in 1..=seen.min(MAX_RUN_SEGMENTS) {
        let run = &recent[MAX_RUN_SEGMENTS - len..];
        letters += run[0].1 - run[0].0;
        if letters > MAX_TERM_BYTES {
            return false; // longer runs only get longer
        }
        let mut joined = Spelling::default();
        let mut together = Spelling::default();
        for (i, &(start, end)) in run.iter().enumerate() {
            if i > 0 {
                joined.push(b'_');
            }
            for &b in &key[start..end] {
                joined.push(b.to_ascii_lowercase());
                together.push(b.to_ascii_lowercase());
            }
        }
        if joined.is_term() || (len > 1 && together.is_term()) {
            return true;
        }
    }
    false
}

/// A run of segments spelled out, lowercase, as long as it could still be a term.
#[derive(Default)]
struct Spelling {
    bytes: [u8; MAX_TERM_BYTES],
    len: usize,
    too_long: bool,
}

impl Spelling {
    fn push(&mut self, b: u8) {
        match self.bytes.get_mut(self.len) {
            Some(slot) => {
                *slot = b;
                self.len += 1;
            }
            None => self.too_long = true,
        }
    }

    /// A term, or the plural of one (`credentials`, `api_keys`), but not `tokens`, which in LLM
    /// payloads is a count (`max_tokens`).
    fn is_term(&self) -> bool {
        if self.too_long {
            return false;
        }
        let run = &self.bytes[..self.len];
        is_exact_term(run)
            || run
                .strip_suffix(b"s")
                .is_some_and(|r| r != b"token" && is_exact_term(r))
    }
}

/// A term as written, or run together without its underscores.
fn is_exact_term(run: &[u8]) -> bool {
    // The spellings, by length.
    static SPELLINGS: OnceLock<Vec<Vec<Vec<u8>>>> = OnceLock::new();
    let spellings = SPELLINGS.get_or_init(|| {
        let mut by_len = vec![Vec::new(); MAX_TERM_BYTES + 1];
        for term in SENSITIVE_TERMS {
            for spelling in [term.to_string(), term.replace('_', "")] {
                let spelling = spelling.into_bytes();
                if !by_len[spelling.len()].contains(&spelling) {
                    by_len[spelling.len()].push(spelling);
                }
            }
        }
        by_len
    });
    spellings
        .get(run.len())
        .is_some_and(|same_len| same_len.iter().any(|spelling| spelling == run))
}

fn is_descriptor(segment: &[u8]) -> bool {
    DESCRIPTOR_SEGMENTS
        .iter()
        .any(|d| d.as_bytes().eq_ignore_ascii_case(segment))
}

/// A cheap test that `key` could match at all: every term contains one of these stems.
fn mentions_a_stem(key: &str) -> bool {
    const STEMS: [&[u8]; 7] = [
        b"auth",
        b"cookie",
        b"pass",
        b"secret",
        b"token",
        b"key",
        b"credential",
    ];
    let mut squashed = [0u8; 256];
    let mut len = 0;
    for b in key.bytes().filter(u8::is_ascii_alphanumeric) {
        if len == squashed.len() {
            return true; // too long to squash here; let the full check decide
        }
        squashed[len] = b.to_ascii_lowercase();
        len += 1;
    }
    let squashed = &squashed[..len];
    STEMS
        .iter()
        .any(|stem| squashed.windows(stem.len()).any(|w| w == *stem))
}

/// The segments of a key, as byte ranges: split on anything but ASCII letters and digits, and
/// at camelCase boundaries (`passwordHash` → `password`, `Hash`; `APIKey` → `API`, `Key`).
struct Segments<'a> {
    key: &'a [u8],
    pos: usize,
}

impl<'a> Segments<'a> {
    fn new(key: &'a [u8]) -> Self {
        Segments { key, pos: 0 }
    }
}

impl Iterator for Segments<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        let key = self.key;
        while self.pos < key.len() && !key[self.pos].is_ascii_alphanumeric() {
            self.pos += 1;
        }
        let start = self.pos;
        if start == key.len() {
            return None;
        }
        let mut i = start + 1;
        while i < key.len() && key[i].is_ascii_alphanumeric() {
            let (prev, c) = (key[i - 1], key[i]);
            let next_is_lower = key.get(i + 1).is_some_and(u8::is_ascii_lowercase);
            let boundary = c.is_ascii_uppercase()
                && (prev.is_ascii_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_ascii_uppercase() && next_is_lower));
            if boundary {
                break;
            }
            i += 1;
        }
        self.pos = i;
        Some((start, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitive_keys_match_on_whole_segments() {
        for key in [
            "authorization",
            "Authorization",
            "cookie",
            "Set-Cookie",
            "set_cookie",
            "password",
            "passwd",
            "secret",
            "token",
            "api_key",
            "apikey",
            "APIKey",
            "x-api-key",
            "X-API-KEY",
            "private_key",
            "privateKey",
            "credential",
            "credentials",
            "client_secret",
            "clientSecret",
            "access_token",
            "refresh_token",
            "github_token",
            "GITHUB_TOKEN",
            "passwordHash",
            "db.password",
            "secrets",
            "passwords",
            "cookies",
            "api_keys",
            "access_tokens",
            "XAuthToken",
            "pass_word",
            "proxy-authorization",
            "secret_key",
        ] {
            assert!(is_sensitive_key(key), "{key} should be sensitive");
        }
        for key in [
            "sandbox_session_id",
            "tokenizer_model",
            "tokenizer",
            "max_tokens",
            "tokens",
            "prompt_tokens",
            "token_count",
            "token_type",
            "password_length",
            "keyboard",
            "primary_key",
            "key",
            "passage",
            "secretary",
            "author",
            "token_env",
            "url_env",
            "cwd_env",
            "secret_env",
            "authorized",
            "",
            "_-_",
            "monkey",
        ] {
            assert!(!is_sensitive_key(key), "{key} should not be sensitive");
        }
    }

    #[test]
    fn the_terms_added_to_spec_5_match_in_every_spelling() {
        for key in [
            "passphrase",
            "Passphrase",
            "PASSPHRASE",
            "key_passphrase",
            "gpgPassphrase",
            "passphrases",
            "private_key",
            "privatekey",
            "private-key",
            "privateKey",
            "PrivateKey",
            "PRIVATE_KEY",
            "ssh_private_key",
            "x-api-key",
            "X-Api-Key",
            "x_api_key",
            "xApiKey",
            "XAPIKEY",
            "secret_key",
            "secretKey",
            "SECRET-KEY",
            "aws_secret_key",
            "signing_key",
            "signingKey",
            "signing-key",
            "SIGNING_KEY",
            "jwt_signing_key",
            "signingkey",
            "session_token",
            "sessionToken",
            "session-token",
            "AWS_SESSION_TOKEN",
            "sessiontoken",
        ] {
            assert!(is_sensitive_key(key), "{key} should be sensitive");
        }
        for key in [
            "sandbox_session_id",
            "session_id",
            "session",
            "tokenizer_model",
            "passphrase_length",
            "private",
            "private_note",
            "privatekeys_count",
            "signing",
            "signing_algorithm",
            "signer_key_id_hint_xyz",
            "session_token_count",
            "session_token_ttl",
            "api_key_type",
            "x_api_keyboard",
            "keynote",
            "passage",
        ] {
            assert!(!is_sensitive_key(key), "{key} should not be sensitive");
        }
    }

    /// The definition of a sensitive key, written the obvious way (allocating every run).
    fn plain_definition(key: &str) -> bool {
        if EXEMPT_KEYS.contains(&key) {
            return false;
        }
        let segments: Vec<String> = Segments::new(key.as_bytes())
            .map(|(start, end)| key[start..end].to_ascii_lowercase())
            .collect();
        let exact = |r: &str| {
            SENSITIVE_TERMS
                .iter()
                .any(|t| *t == r || t.replace('_', "") == r)
        };
        let is_term = |r: &str| {
            exact(r)
                || r.strip_suffix('s')
                    .is_some_and(|r| r != "token" && exact(r))
        };
        (0..segments.len()).any(|start| {
            (start..segments.len().min(start + 4)).any(|end| {
                let run = &segments[start..=end];
                (is_term(&run.join("_")) || is_term(&run.concat()))
                    && !segments
                        .get(end + 1)
                        .is_some_and(|next| DESCRIPTOR_SEGMENTS.contains(&next.as_str()))
            })
        })
    }

    #[test]
    fn segments_split_on_punctuation_and_camel_case() {
        let split = |key: &str| -> Vec<String> {
            Segments::new(key.as_bytes())
                .map(|(start, end)| key[start..end].to_string())
                .collect()
        };
        assert_eq!(split("passwordHash"), ["password", "Hash"]);
        assert_eq!(split("APIKey"), ["API", "Key"]);
        assert_eq!(split("x-api-key"), ["x", "api", "key"]);
        assert_eq!(split("token2Value"), ["token2", "Value"]);
        assert_eq!(split("__é__ab.CD"), ["ab", "CD"]);
        assert!(split("").is_empty());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn key() -> impl Strategy<Value = String> {
            let parts = prop::sample::select(vec![
                "private",
                "Private",
                "PRIVATE",
                "key",
                "Key",
                "KEY",
                "keys",
                "x",
                "X",
                "api",
                "API",
                "token",
                "Token",
                "tokens",
                "session",
                "Session",
                "signing",
                "pass",
                "phrase",
                "Phrase",
                "passphrase",
                "secret",
                "count",
                "Count",
                "type",
                "id",
                "_",
                "-",
                ".",
                " ",
                "é",
                "2",
                "s",
                "set",
                "cookie",
                "env",
                "authorization",
                "word",
            ]);
            prop::collection::vec(parts, 0..8).prop_map(|parts| parts.concat())
        }

        proptest! {
            #[test]
            fn the_one_pass_matcher_agrees_with_the_plain_definition(key in key()) {
                prop_assert_eq!(is_sensitive_key(&key), plain_definition(&key), "{}", key);
            }

            #[test]
            fn any_key_is_judged_without_panicking(key in any::<String>()) {
                let _ = is_sensitive_key(&key);
                let long = key.repeat(40);
                prop_assert_eq!(is_sensitive_key(&long), plain_definition(&long));
            }
        }
    }
}
