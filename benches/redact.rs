//! Benchmark: redaction throughput (MB/s) on 8 MiB inputs, text and JSON.
//!
//! Run with `cargo bench --bench redact` (release build). Inputs: ordinary log text, the
//! adversarial `token='x' ` repeated (quadratic before redaction was made linear), and a JSON
//! document of strings. The redactor holds a few secrets and host paths, as a dispatch would.
//! Nothing is asserted: timings belong to the machine (the linear-time bound is tested in
//! `crates/wire/src/redact/tests.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench that cannot set up fails loudly

use divan::counter::BytesCount;
use divan::{black_box, Bencher};
use ptd_wire::redact::{Redactor, Scope};
use std::sync::OnceLock;

fn main() {
    divan::main();
}

const SIZE: usize = 8 << 20;

fn redactor() -> Redactor {
    let mut r = Redactor::new();
    r.add_secret("ghs_exampleSecretValue0123456789");
    r.add_secret("another-secret-Value-42");
    r.add_host_path("/work/main");
    r.add_host_path("/home/runner");
    r
}

/// Log-like lines with an occasional credential, path or secret in them.
fn plain() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let lines = [
            "2024-05-01T10:00:00Z INFO request served in 12ms status=200 bytes=5120\n",
            "compiling module /work/main/src/lib.rs with 4 warnings; see the build log\n",
            "the quick brown fox jumps over the lazy dog, again and again, for testing\n",
            "auth: sent Authorization: Bearer abcDEF0123456789xyz to the upstream host\n",
            "retrying https://api.example.com/v1/items?page=3 after a 503 from upstream\n",
            "loaded another-secret-Value-42 from the environment (should be scrubbed)\n",
        ];
        fill(|i| lines[i % lines.len()].to_string())
    })
}

/// The shape that made redaction quadratic: a quoted value per ten bytes, on one line.
fn adversarial() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| fill(|_| "token='x' ".to_string()))
}

/// A JSON array of objects of strings (log lines as above, paths, credentials).
fn json_document() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let mut doc = String::from("[");
        let mut i = 0;
        while doc.len() < SIZE - 256 {
            if i > 0 {
                doc.push(',');
            }
            let line = serde_json::to_string(plain().lines().nth(i % 6).unwrap()).unwrap();
            doc.push_str(&format!(
                r#"{{"id":"item-{i}","path":"/home/runner/w/{i}.txt","message":{line},"token":"t{i}","n":{i}}}"#
            ));
            i += 1;
        }
        doc.push(']');
        doc
    })
}

/// `make(i)` concatenated until just under [`SIZE`] bytes.
fn fill(make: impl Fn(usize) -> String) -> String {
    let mut text = String::with_capacity(SIZE);
    let mut i = 0;
    loop {
        let piece = make(i);
        if text.len() + piece.len() > SIZE {
            return text;
        }
        text.push_str(&piece);
        i += 1;
    }
}

/// One JSON string holding `text`.
fn as_json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

const FULL: Scope = Scope::Full {
    envelope_root: false,
};

#[divan::bench(sample_count = 10, sample_size = 1)]
fn redact_str_plain(bencher: Bencher) {
    let (r, text) = (redactor(), plain());
    bencher
        .counter(BytesCount::of_str(text))
        .bench(|| r.redact_str(black_box(text)));
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn redact_str_adversarial(bencher: Bencher) {
    let (r, text) = (redactor(), adversarial());
    bencher
        .counter(BytesCount::of_str(text))
        .bench(|| r.redact_str(black_box(text)));
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn redact_json_plain_string(bencher: Bencher) {
    let (r, doc) = (redactor(), as_json_string(plain()));
    bencher
        .counter(BytesCount::of_str(&doc))
        .bench(|| r.redact_json(black_box(&doc), FULL).unwrap());
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn redact_json_adversarial_string(bencher: Bencher) {
    let (r, doc) = (redactor(), as_json_string(adversarial()));
    bencher
        .counter(BytesCount::of_str(&doc))
        .bench(|| r.redact_json(black_box(&doc), FULL).unwrap());
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn redact_json_document(bencher: Bencher) {
    let (r, doc) = (redactor(), json_document());
    bencher
        .counter(BytesCount::of_str(doc))
        .bench(|| r.redact_json(black_box(doc), FULL).unwrap());
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn redact_json_document_secrets_only(bencher: Bencher) {
    let (r, doc) = (redactor(), json_document());
    bencher
        .counter(BytesCount::of_str(doc))
        .bench(|| r.redact_json(black_box(doc), Scope::SecretsOnly).unwrap());
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn minify_json_document(bencher: Bencher) {
    let (r, doc) = (Redactor::new(), json_document());
    bencher
        .counter(BytesCount::of_str(doc))
        .bench(|| r.redact_json(black_box(doc), Scope::SecretsOnly).unwrap());
}

/// For comparison: what the JSON text pass replaces (parse, walk the tree, serialize).
#[divan::bench(sample_count = 10, sample_size = 1)]
fn tree_walk_json_document(bencher: Bencher) {
    let (r, doc) = (redactor(), json_document());
    bencher.counter(BytesCount::of_str(doc)).bench(|| {
        let mut tree: serde_json::Value = serde_json::from_str(black_box(doc)).unwrap();
        r.redact_value(&mut tree);
        serde_json::to_string(&tree).unwrap()
    });
}
