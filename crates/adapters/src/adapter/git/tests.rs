use super::*;

#[test]
fn code_table_is_consistent() {
    let mut seen = std::collections::HashSet::new();
    for code in Code::ALL {
        assert!(seen.insert(code.as_str()), "duplicate {}", code.as_str());
        let expected = match code {
            Code::OperationNotPermitted | Code::PathOutsideRoot => Status::Denied,
            Code::RootUnavailable | Code::GitUnavailable => Status::Unavailable,
            Code::GitTimeout => Status::Timeout,
            _ => Status::Failed,
        };
        assert_eq!(code.status(), expected, "{}", code.as_str());
        assert_eq!(
            code.retryable(),
            matches!(code, Code::GitTimeout | Code::Interrupted),
            "{}",
            code.as_str()
        );
    }
}

#[test]
fn authors_parse_strictly() {
    assert_eq!(
        Author::parse("Ann Example <ann@example.org>"),
        Ok(Author {
            name: "Ann Example".into(),
            email: "ann@example.org".into()
        })
    );
    for bad in [
        "Ann",
        "<ann@example.org>",
        "Ann <>",
        "Ann <a<b>",
        "Ann\n <a@b>",
        "Ann <a@b> x",
    ] {
        assert!(Author::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn commit_messages_are_checked() {
    assert!(check_message("Fix #12\n\nbody").is_ok());
    for bad in ["", " \n\t ", "a\0b"] {
        assert_eq!(
            check_message(bad).unwrap_err().code,
            Code::InvalidInput,
            "{bad:?}"
        );
    }
    let long = "x".repeat(limits::MAX_COMMIT_MESSAGE_BYTES + 1);
    assert_eq!(check_message(&long).unwrap_err().code, Code::InvalidInput);
}

#[test]
fn diff_batches_are_sorted_without_repeats_or_covered_paths_and_bounded() {
    let paths: Vec<String> = ["b", "a/x", "a", "a-b", "b", "c/d/e", "c/d"]
        .map(String::from)
        .to_vec();
    assert_eq!(diff_batches(&paths), [vec!["a", "a-b", "b", "c/d"]]);
    let all: Vec<String> = ["x", ".", "y"].map(String::from).to_vec();
    assert_eq!(diff_batches(&all), [vec!["."]]);
    let long: Vec<String> = (0..1000)
        .map(|i| format!("{i:04}{}", "p".repeat(4000)))
        .collect();
    let batches = diff_batches(&long);
    assert!(batches.len() > 1);
    assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), 1000);
    for batch in &batches {
        let bytes: usize = batch.iter().map(|p| p.len() + 1).sum();
        assert!(bytes <= DIFF_BATCH_BYTES, "{bytes}");
    }
    assert_eq!(nul_separated(&paths[..2]), b"b\0a/x\0");
}

#[test]
fn paths_are_normalised_and_escapes_refused() {
    let ok = lexical_paths(&["./a//b".into(), ".".into()], "paths").unwrap();
    assert_eq!(ok, ["a/b", "."]);
    for (bad, code) in [
        ("../x", Code::PathOutsideRoot),
        ("/etc/passwd", Code::PathOutsideRoot),
        ("a/../../x", Code::PathOutsideRoot),
        ("", Code::InvalidInput),
        ("a\0b", Code::InvalidInput),
    ] {
        let err = lexical_paths(&[bad.into()], "paths").unwrap_err();
        assert_eq!(err.code, code, "{bad:?}");
    }
}
