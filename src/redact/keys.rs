//! Sensitive keys (SPEC §5): whether a JSON key or a `key=value` key names a credential.
//!
//! Invariants: keys are matched on whole segments (split on punctuation and camelCase), so
//! `sandbox_session_id` and `tokenizer_model` never match; the contract's own `*_env` keys hold
//! variable names and are exempt. It must not look at values.

/// The sensitive terms, in `snake_case`. A key matches when a run of its segments, joined by
/// `_` or run together, equals one of them (or its plural, except plain `tokens`).
const SENSITIVE_TERMS: [&str; 14] = [
    "authorization",
    "cookie",
    "set_cookie",
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "private_key",
    "credential",
    "client_secret",
    "access_token",
    "refresh_token",
];

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
/// `github_token`, `passwordHash`, `Set-Cookie`, `clientSecret`, `credentials` are sensitive;
/// `sandbox_session_id`, `tokenizer_model`, `max_tokens`, `token_count`, `token_env` are not.
pub fn is_sensitive_key(key: &str) -> bool {
    if EXEMPT_KEYS.contains(&key) || !mentions_a_stem(key) {
        return false;
    }
    let segments = key_segments(key);
    for start in 0..segments.len() {
        for end in start..segments.len().min(start + 4) {
            let run = &segments[start..=end];
            if !is_term(&run.join("_")) && !is_term(&run.concat()) {
                continue;
            }
            let described = segments
                .get(end + 1)
                .is_some_and(|next| DESCRIPTOR_SEGMENTS.contains(&next.as_str()));
            if !described {
                return true;
            }
        }
    }
    false
}

fn is_term(run: &str) -> bool {
    let exact = |r: &str| {
        SENSITIVE_TERMS
            .iter()
            .any(|t| *t == r || (t.contains('_') && t.replace('_', "") == r))
    };
    // Plurals hold credentials too (`credentials`, `api_keys`), except `tokens`, which in LLM
    // payloads is a count (`max_tokens`).
    exact(run)
        || run
            .strip_suffix('s')
            .is_some_and(|r| r != "token" && exact(r))
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

/// Lowercase segments of a key: split on anything but ASCII letters and digits, and at
/// camelCase boundaries (`passwordHash` → `password`, `hash`; `APIKey` → `api`, `key`).
fn key_segments(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().collect();
    let mut segments = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                segments.push(std::mem::take(&mut current));
            }
            continue;
        }
        if c.is_ascii_uppercase() && !current.is_empty() {
            let prev = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let boundary = prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_is_lower);
            if boundary {
                segments.push(std::mem::take(&mut current));
            }
        }
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        segments.push(current);
    }
    segments
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
}
