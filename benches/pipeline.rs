//! Benchmark: the main job's in-process steps on a large answer, in MB/s — what the
//! dispatcher adds per byte of `output` once the adapter has written it.
//!
//! Run with `cargo bench --bench pipeline` (release build). The answer is a result envelope
//! whose `output` is one 16 MiB string, in two flavours: `text` (prose with an escaped newline
//! every 64 bytes, what a file's contents look like) and `x` (one repeated byte, no escape:
//! the easiest case for every scanner). Steps:
//!
//! - `parse`: the strict reader (`json::check_object`: UTF-8, grammar, duplicate keys, depth);
//! - `validate`: the envelope checks on the accepted text (`ResultEnvelope::check`);
//! - `parse_and_validate`: both in the one scan judging an answer uses (`ResultEnvelope::read`,
//!   as `judge` calls it; target: 500 MB/s);
//! - `render_caller`: the envelope as printed on stdout (exact secrets scrubbed from
//!   `output`, the full rules elsewhere), with and without a registered secret;
//! - `render_transcript`: the envelope as a transcript holds it (the full rules on `output`).
//!
//! Nothing is asserted: timings belong to the machine (correctness is the test suite's).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench that cannot set up fails loudly

use divan::counter::BytesCount;
use divan::{black_box, Bencher};
use ptd_wire::envelope::request::Echo;
use ptd_wire::envelope::result::{Audience, Expect, ResultEnvelope};
use ptd_wire::json;
use ptd_wire::redact::Redactor;
use std::sync::OnceLock;

fn main() {
    divan::main();
}

const OUTPUT_BYTES: usize = 16 << 20;

fn echo() -> &'static Echo {
    static ECHO: OnceLock<Echo> = OnceLock::new();
    ECHO.get_or_init(|| Echo {
        request_id: "bench-call".into(),
        tool: "bench.tool".into(),
        operation: "call".into(),
    })
}

fn expect() -> Expect<'static> {
    Expect {
        sent: echo(),
        canonical_tool: "bench.tool",
    }
}

/// An answer with an `output` string of [`OUTPUT_BYTES`] bytes of JSON text made of `line`.
fn answer(line: &str) -> String {
    let mut text = String::with_capacity(OUTPUT_BYTES + 512);
    text.push_str(
        r#"{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"bench-call","tool":"bench.tool","operation":"call","status":"succeeded","output":""#,
    );
    let start = text.len();
    while text.len() - start + line.len() <= OUTPUT_BYTES {
        text.push_str(line);
    }
    text.push_str(r#"","diagnostics":{"adapter":"bench"},"metadata":{"trace":"t-1"}}"#);
    text
}

/// Prose with an escaped newline every 64 bytes.
fn text_answer() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| answer(r"The quick brown fox jumps over the lazy dog, line after line..\n"))
}

/// One byte repeated.
fn x_answer() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| answer(&"x".repeat(64)))
}

fn payload(name: &str) -> &'static str {
    match name {
        "x" => x_answer(),
        _ => text_answer(),
    }
}

const PAYLOADS: [&str; 2] = ["text", "x"];

fn checked(text: &str) -> ResultEnvelope<'_> {
    ResultEnvelope::check(text, Some(expect())).expect("the benchmark's answer is valid")
}

#[divan::bench(args = PAYLOADS, sample_count = 10, sample_size = 1)]
fn parse(bencher: Bencher, name: &str) {
    let text = payload(name);
    bencher.counter(BytesCount::of_str(text)).bench(|| {
        json::check_object(black_box(text.as_bytes()), usize::MAX)
            .unwrap()
            .len()
    });
}

#[divan::bench(args = PAYLOADS, sample_count = 10, sample_size = 1)]
fn validate(bencher: Bencher, name: &str) {
    let text = payload(name);
    bencher
        .counter(BytesCount::of_str(text))
        .bench(|| checked(black_box(text)).status);
}

#[divan::bench(args = PAYLOADS, sample_count = 10, sample_size = 1)]
fn parse_and_validate(bencher: Bencher, name: &str) {
    let text = payload(name);
    bencher.counter(BytesCount::of_str(text)).bench(|| {
        ResultEnvelope::read(black_box(text.as_bytes()), usize::MAX, Some(expect()))
            .expect("the benchmark's answer is valid")
            .status
    });
}

#[divan::bench(args = PAYLOADS, sample_count = 10, sample_size = 1)]
fn render_caller(bencher: Bencher, name: &str) {
    let text = payload(name);
    let envelope = checked(text);
    let redactor = Redactor::new();
    bencher.counter(BytesCount::of_str(text)).bench(|| {
        envelope
            .render(black_box(&redactor), Audience::Caller)
            .len()
    });
}

#[divan::bench(args = PAYLOADS, sample_count = 10, sample_size = 1)]
fn render_caller_with_a_secret(bencher: Bencher, name: &str) {
    let text = payload(name);
    let envelope = checked(text);
    let mut redactor = Redactor::new();
    redactor.add_secret("ghs_exampleSecretValue0123456789");
    bencher.counter(BytesCount::of_str(text)).bench(|| {
        envelope
            .render(black_box(&redactor), Audience::Caller)
            .len()
    });
}

#[divan::bench(args = PAYLOADS, sample_count = 10, sample_size = 1)]
fn render_transcript(bencher: Bencher, name: &str) {
    let text = payload(name);
    let envelope = checked(text);
    let redactor = Redactor::new();
    bencher.counter(BytesCount::of_str(text)).bench(|| {
        envelope
            .render(black_box(&redactor), Audience::Transcript)
            .len()
    });
}
