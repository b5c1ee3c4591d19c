//! `serve`'s token file (SPEC §19.2): one bearer token a line, optionally with the host
//! session of its requests; loaded at start and on SIGHUP, checked whole (a file with one bad
//! line is refused, the old one kept), compared in constant time.

use sha2::{Digest, Sha256};
use std::path::Path;

/// The most a token file may hold.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The shortest token accepted.
const MIN_TOKEN_CHARS: usize = 16;

/// One token's digest and the host session its requests belong to.
#[derive(Debug, Clone)]
struct Token {
    digest: [u8; 32],
    session: Option<String>,
}

/// The tokens of one load of the file.
#[derive(Debug, Clone)]
pub(crate) struct Tokens {
    tokens: Vec<Token>,
}

/// Who a request's bearer token says it is.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The token's own `session=`, if it has one.
    pub(crate) session: Option<String>,
}

impl Tokens {
    /// Read and check the file at `path` (through `ptd_sys::fs`); the error is one line for
    /// the operator, naming the line at fault and never a token.
    pub(crate) fn load(path: &Path) -> Result<Tokens, String> {
        let (bytes, stat) = ptd_sys::fs::read_file_with_status(path, MAX_FILE_BYTES)
            .map_err(|err| format!("the token file cannot be read: {err}"))?;
        if stat.st_mode & 0o022 != 0 {
            return Err(format!(
                "the token file is writable by {} (mode {:o}): it must be writable by its owner alone",
                if stat.st_mode & 0o002 != 0 { "others" } else { "its group" },
                stat.st_mode & 0o7777
            ));
        }
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| "the token file is not UTF-8 text".to_string())?;
        Tokens::parse(text)
    }

    /// The tokens of `text` (see [`Tokens::load`]).
    pub(crate) fn parse(text: &str) -> Result<Tokens, String> {
        let mut tokens = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            tokens
                .push(parse_line(line).map_err(|why| format!("token file line {number}: {why}"))?);
        }
        if tokens.is_empty() {
            return Err("the token file holds no token".into());
        }
        Ok(Tokens { tokens })
    }

    /// How many tokens there are.
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }

    /// The caller whose token `presented` is: every token is compared (SHA-256 digests, byte
    /// by byte without an early exit), so the time taken says nothing of which matched or how
    /// much of one did.
    pub(crate) fn check(&self, presented: &str) -> Option<Caller> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for token in &self.tokens {
            let diff = token
                .digest
                .iter()
                .zip(digest.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if diff == 0 && found.is_none() {
                found = Some(Caller {
                    session: token.session.clone(),
                });
            }
        }
        found
    }
}

/// One line: `TOKEN` or `TOKEN session=ID`.
fn parse_line(line: &str) -> Result<Token, String> {
    let mut words = line.split_whitespace();
    let token = words.next().unwrap_or_default();
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(format!(
            "a token must be at least {MIN_TOKEN_CHARS} characters"
        ));
    }
    if !token.chars().all(|c| c.is_ascii_graphic()) {
        return Err("a token must be printable ASCII".into());
    }
    let session = match words.next() {
        None => None,
        Some(word) => match word.strip_prefix("session=") {
            Some(id) if valid_session(id) => Some(id.to_string()),
            Some(_) => return Err("the session must be 1-256 bytes of printable text".into()),
            None => return Err("after the token only `session=ID` may follow".into()),
        },
    };
    if words.next().is_some() {
        return Err("more than a token and `session=ID` on the line".into());
    }
    Ok(Token {
        digest: Sha256::digest(token.as_bytes()).into(),
        session,
    })
}

/// A host session as `--session` takes it: 1-256 bytes, no control characters.
fn valid_session(id: &str) -> bool {
    (1..=256).contains(&id.len()) && !id.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_checked_and_named() {
        let ok =
            Tokens::parse("abcdefghijklmnop\n\n# comment\nqrstuvwxyz0123456 session=s1\n").unwrap();
        assert_eq!(ok.len(), 2);
        assert!(ok.check("abcdefghijklmnop").unwrap().session.is_none());
        assert_eq!(
            ok.check("qrstuvwxyz0123456").unwrap().session.as_deref(),
            Some("s1")
        );
        assert!(ok.check("abcdefghijklmno").is_none());
        assert!(ok.check("").is_none());
        for (text, line) in [
            ("short\n", 1),
            ("abcdefghijklmnop\nabcdefghijklmnop session=\n", 2),
            ("abcdefghijklmnop other=1\n", 1),
            ("abcdefghijklmnop session=a b\n", 1),
            ("abcdefghijklmnopé\n", 1),
        ] {
            let err = Tokens::parse(text).unwrap_err();
            assert!(
                err.starts_with(&format!("token file line {line}:")),
                "{err}"
            );
            assert!(!err.contains("abcdefghijklmnop"), "{err}");
        }
        assert!(Tokens::parse("\n# only\n").is_err());
    }
}
