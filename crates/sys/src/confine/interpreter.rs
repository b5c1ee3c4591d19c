//! The chain of programs the kernel runs for one `execve`: the program, and for a script the
//! interpreter of its `#!` line (`/usr/bin/env NAME` resolved through the child's `PATH`, as
//! `env` will), and that interpreter's own interpreter when it is a script too — so that
//! Landlock can grant each (SPEC §13: "its own program and the program's interpreter").
//!
//! Read before the fork; nothing here runs in the child. The kernel reads at most 256 bytes
//! of a `#!` line (`BINPRM_BUF_SIZE`) and follows at most four interpreters deep; so does this.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// How much of a file the kernel reads for a `#!` line.
const SHEBANG_MAX: usize = 256;
/// How many interpreters deep the kernel follows (`BINPRM` recursion limit).
const MAX_DEPTH: usize = 4;

/// Why the program chain could not be worked out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpreterError {
    #[error("cannot read {path}: {error}")]
    Unreadable { path: PathBuf, error: String },
    #[error("the #! line of {script} names a relative interpreter `{interpreter}`; it would be resolved against the adapter's working directory")]
    Relative {
        script: PathBuf,
        interpreter: String,
    },
    #[error("the #! line of {script} runs `env` with an option this check does not follow: `{arguments}`")]
    UnsupportedEnvArguments { script: PathBuf, arguments: String },
    #[error("the #! line of {script} runs `env` without a program name")]
    EnvWithoutProgram { script: PathBuf },
    #[error("the #! line of {script} names `{name}`, which is not an executable file on the adapter's PATH")]
    NotOnPath { script: PathBuf, name: String },
    #[error("{script}: interpreters nest more than {MAX_DEPTH} deep")]
    TooDeep { script: PathBuf },
}

/// The programs one `execve` of `program` runs, canonical, the program first.
///
/// `path_var` is the child's `PATH` (not the dispatcher's): `#!/usr/bin/env python3` finds
/// `python3` where the adapter's `env` will.
pub fn chain(program: &Path, path_var: Option<&OsStr>) -> Result<Vec<PathBuf>, InterpreterError> {
    let mut current = canonical(program)?;
    let mut chain = vec![current.clone()];
    for _ in 0..=MAX_DEPTH {
        let Some(line) = shebang(&current)? else {
            return Ok(chain);
        };
        let next = interpreter_of(&current, &line, path_var)?;
        chain.extend(next.iter().cloned());
        match next.last() {
            Some(last) => current = last.clone(),
            None => return Ok(chain),
        }
    }
    Err(InterpreterError::TooDeep {
        script: program.to_path_buf(),
    })
}

fn canonical(path: &Path) -> Result<PathBuf, InterpreterError> {
    std::fs::canonicalize(path).map_err(|e| InterpreterError::Unreadable {
        path: path.to_path_buf(),
        error: e.to_string(),
    })
}

/// The `#!` line of `path` (without `#!` and the newline), or `None` for any other file.
fn shebang(path: &Path) -> Result<Option<Vec<u8>>, InterpreterError> {
    let unreadable = |e: std::io::Error| InterpreterError::Unreadable {
        path: path.to_path_buf(),
        error: e.to_string(),
    };
    // Through the one reader: a FIFO or a device named as a program is refused, not waited on.
    let head = crate::fs::read_head(path, SHEBANG_MAX as u64).map_err(|e| unreadable(e.into()))?;
    let Some(rest) = head.strip_prefix(b"#!") else {
        return Ok(None);
    };
    let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
    Ok(Some(line.to_vec()))
}

/// The interpreter(s) a `#!` line starts: the interpreter itself, plus the program `env`
/// looks up when the interpreter is `env`.
fn interpreter_of(
    script: &Path,
    line: &[u8],
    path_var: Option<&OsStr>,
) -> Result<Vec<PathBuf>, InterpreterError> {
    // As the kernel: blanks and tabs separate the interpreter from one optional argument,
    // which is the rest of the line.
    let is_blank = |b: &u8| *b == b' ' || *b == b'\t';
    let line = trim(line, is_blank);
    let end = line.iter().position(is_blank).unwrap_or(line.len());
    let (interpreter, argument) = line.split_at(end);
    let argument = trim(argument, is_blank);
    if interpreter.is_empty() {
        // An empty `#!` line: the kernel refuses to run it (ENOEXEC); nothing to grant.
        return Ok(Vec::new());
    }
    if !interpreter.starts_with(b"/") {
        return Err(InterpreterError::Relative {
            script: script.to_path_buf(),
            interpreter: String::from_utf8_lossy(interpreter).into_owned(),
        });
    }
    let interpreter = canonical(Path::new(OsStr::from_bytes(interpreter)))?;
    let mut found = vec![interpreter.clone()];
    if interpreter.file_name() == Some(OsStr::new("env")) {
        let name = env_program(script, argument)?;
        found.push(lookup(script, &name, path_var)?);
    }
    Ok(found)
}

fn trim(mut bytes: &[u8], blank: impl Fn(&u8) -> bool) -> &[u8] {
    while let [first, rest @ ..] = bytes {
        if !blank(first) {
            break;
        }
        bytes = rest;
    }
    while let [rest @ .., last] = bytes {
        if !blank(last) && *last != b'\r' {
            break;
        }
        bytes = rest;
    }
    bytes
}

/// The program `env ARGUMENT` runs: the first word that is neither an option nor a
/// `NAME=value` assignment. `-S` (split the rest) and `-i` are followed; options that take a
/// value or change the lookup (`-u`, `-C`, `-P`, …) are refused rather than guessed.
fn env_program(script: &Path, argument: &[u8]) -> Result<OsString, InterpreterError> {
    let unsupported = || InterpreterError::UnsupportedEnvArguments {
        script: script.to_path_buf(),
        arguments: String::from_utf8_lossy(argument).into_owned(),
    };
    for word in argument
        .split(|b| *b == b' ' || *b == b'\t')
        .filter(|w| !w.is_empty())
    {
        match word {
            b"-S" | b"--split-string" | b"-i" | b"-" | b"--ignore-environment" | b"--" => continue,
            _ if word.starts_with(b"-S") => {
                // `-Spython3`: the program follows the option letter.
                return Ok(OsStr::from_bytes(&word[2..]).to_os_string());
            }
            _ if word.starts_with(b"-") => return Err(unsupported()),
            _ if word.contains(&b'=') => continue,
            _ => return Ok(OsStr::from_bytes(word).to_os_string()),
        }
    }
    Err(InterpreterError::EnvWithoutProgram {
        script: script.to_path_buf(),
    })
}

/// `name` through `PATH` as `execvp` does it, absolute entries only (an empty or relative
/// entry would depend on the adapter's working directory; it is skipped).
fn lookup(
    script: &Path,
    name: &OsStr,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, InterpreterError> {
    let not_found = || InterpreterError::NotOnPath {
        script: script.to_path_buf(),
        name: name.to_string_lossy().into_owned(),
    };
    if name.as_bytes().contains(&b'/') {
        let path = Path::new(name);
        if !path.is_absolute() {
            return Err(InterpreterError::Relative {
                script: script.to_path_buf(),
                interpreter: name.to_string_lossy().into_owned(),
            });
        }
        return canonical(path);
    }
    let path_var = path_var.ok_or_else(not_found)?;
    for dir in path_var.as_bytes().split(|b| *b == b':') {
        if !dir.starts_with(b"/") {
            continue;
        }
        let candidate = Path::new(OsStr::from_bytes(dir)).join(name);
        let executable = std::fs::metadata(&candidate)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false);
        if executable {
            return canonical(&candidate);
        }
    }
    Err(not_found())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.canonicalize().unwrap()
    }

    fn sh() -> PathBuf {
        Path::new("/bin/sh").canonicalize().unwrap()
    }

    #[test]
    fn an_elf_program_is_its_own_chain() {
        let ls = Path::new("/bin/ls").canonicalize().unwrap();
        assert_eq!(chain(&ls, None).unwrap(), vec![ls]);
    }

    #[test]
    fn a_script_brings_its_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let s = script(dir.path(), "a", "#! /bin/sh -eu \t\nexit 0\n");
        assert_eq!(chain(&s, None).unwrap(), vec![s, sh()]);
    }

    #[test]
    fn env_is_resolved_through_the_childs_path_not_ours() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        // The "interpreter" on the child's PATH is itself a script: its interpreter follows.
        let tool = script(&bin, "mytool", "#!/bin/sh\n");
        let s = script(dir.path(), "adapter", "#!/usr/bin/env -S mytool -x\n");
        let path = format!("relative:{}:/usr/bin", bin.display());
        let env = Path::new("/usr/bin/env").canonicalize().unwrap();
        assert_eq!(
            chain(&s, Some(OsStr::new(&path))).unwrap(),
            vec![s.clone(), env, tool, sh()]
        );
        let err = chain(&s, Some(OsStr::new("/usr/bin"))).unwrap_err();
        assert!(matches!(err, InterpreterError::NotOnPath { ref name, .. } if name == "mytool"));
    }

    #[test]
    fn env_options_it_cannot_follow_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let s = script(dir.path(), "a", "#!/usr/bin/env -u HOME sh\n");
        assert!(matches!(
            chain(&s, Some(OsStr::new("/bin"))),
            Err(InterpreterError::UnsupportedEnvArguments { .. })
        ));
        let s = script(dir.path(), "b", "#!/usr/bin/env A=1\n");
        assert!(matches!(
            chain(&s, Some(OsStr::new("/bin"))),
            Err(InterpreterError::EnvWithoutProgram { .. })
        ));
        let s = script(dir.path(), "c", "#!/usr/bin/env LC_ALL=C sh\n");
        assert_eq!(
            chain(&s, Some(OsStr::new("/bin"))).unwrap().last(),
            Some(&sh())
        );
    }

    #[test]
    fn relative_and_looping_interpreters_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let s = script(dir.path(), "a", "#!sh\n");
        assert!(matches!(
            chain(&s, None),
            Err(InterpreterError::Relative { .. })
        ));
        let looping = script(dir.path(), "loop", "");
        std::fs::write(&looping, format!("#!{}\n", looping.display())).unwrap();
        assert!(matches!(
            chain(&looping, None),
            Err(InterpreterError::TooDeep { .. })
        ));
    }

    #[test]
    fn garbage_never_panics() {
        let dir = tempfile::tempdir().unwrap();
        for body in [
            &b"#!"[..],
            b"#!\n",
            b"#!   ",
            b"#!/\xff\xfe",
            b"\x7fELF",
            b"#!/usr/bin/env",
        ] {
            let path = dir.path().join("g");
            std::fs::write(&path, body).unwrap();
            let _ = chain(&path, Some(OsStr::new("/bin")));
        }
    }
}
