//! The `wp-codebox/parent-tool-result/v1` envelope (SPEC §2.3, §4.5): its typed form, checking
//! an answer (an adapter's stdout, a result file, an HTTP body, a recorded fixture), building
//! the dispatcher's own envelopes, and rendering either as JSON text.
//!
//! What the dispatcher owns is typed (`ErrorBody`, `DispatchDiagnostics`, `ArtifactRef`,
//! derived `Serialize`). What the answer owns stays the text it was written in: `output`, the
//! adapter's `error`, `metadata`, its diagnostics and artifacts — copied through, never parsed
//! into a tree, so numbers are kept exactly and memory stays a small multiple of the answer.
//! Checking fills absent containers (`artifacts`, `diagnostics`, `metadata`) but never rewrites
//! the answer's `output` or `error`.
//!
//! Rendering is the only way an envelope becomes text, and it always redacts (SPEC §5): see
//! [`ResultEnvelope::render`].

use super::request::Echo;
use crate::error::{ErrorCode, Status};
use crate::json::raw::{self, Fields, ObjectWriter};
use crate::json::Kind;
use crate::redact::{Redactor, Scope};
use crate::validate::{codes, Checker, Issue};
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;

/// Schema id of the result.
pub const SCHEMA: &str = "wp-codebox/parent-tool-result/v1";

/// The result's fields (SPEC §2.3), in the order the schema lists them: what
/// [`ResultEnvelope::check`] checks and `schema result` publishes.
pub mod fields {
    use super::{is_relative_path, is_sha256};
    use crate::validate::Presence::{Filled, Optional, Required, When};
    use crate::validate::{
        codes, Condition, Expected, Fact, Field, Pattern, Refusal, Shape, Spec, Type,
    };

    pub const SCHEMA: Field = Field::new(
        "schema",
        Required,
        Spec::string(&[Fact::Const(super::SCHEMA)]),
    );
    pub use crate::validate::VERSION;
    pub const REQUEST_ID: Field = Field::new("request_id", Required, Spec::STRING);
    pub const TOOL: Field = Field::new("tool", Required, Spec::STRING);
    pub const OPERATION: Field = Field::new("operation", Required, Spec::STRING);
    /// The contract's five statuses, in the order upstream lists them.
    pub(crate) const STATUSES: &[&str] =
        &["succeeded", "failed", "denied", "unavailable", "timeout"];
    pub const STATUS: Field = Field::new(
        "status",
        Required,
        Spec::string(&[Fact::OneOf(
            STATUSES,
            Refusal::Says(|s| {
                format!("\"status\" must be one of succeeded, denied, unavailable, timeout, failed; found {s:?}")
            }),
        )]),
    );
    /// Opaque product payload.
    pub(crate) const OUTPUT: Field = Field::new("output", Optional, Spec::ANY);
    pub const ERROR: Field =
        Field::new("error", When(&UNLESS_SUCCEEDED), Spec::object(&ERROR_BODY));
    const UNLESS_SUCCEEDED: Condition = Condition {
        when: &STATUS,
        value: "succeeded",
        negated: true,
        message: "a non-succeeded result must carry \"error\"",
    };
    pub(crate) const ERROR_BODY: Shape = Shape::of(&[
        &Field::new(
            "code",
            Required,
            Spec::string(&[Fact::NonEmpty, Fact::Doc("Stable snake_case code.")]),
        ),
        &Field::new(
            "message",
            Required,
            Spec::string(&[Fact::Doc(
                "One human sentence, redacted, without host paths.",
            )]),
        ),
        &Field::new("retryable", Required, Spec::of(Type::Boolean, &[])),
        &Field::new("details", Optional, Spec::ANY),
    ]);
    pub(crate) const ARTIFACTS: Field =
        Field::new("artifacts", Filled, Spec::object(&ARTIFACT_LISTS));
    /// `artifacts.transcripts` and `artifacts.evidence`.
    const REFS: Spec = Spec::of(
        Type::Array(Some(&Spec::of(
            Type::Ref("artifact_ref", Some(&ARTIFACT_REF)),
            &[],
        ))),
        &[],
    )
    .refused(Expected::Found("an array of strings"));
    pub(crate) const ARTIFACT_LISTS: Shape = Shape::of(&[
        &Field::new("transcripts", Filled, REFS),
        &Field::new("evidence", Filled, REFS),
    ]);
    /// `{kind, path?, id?, uri?, sha256?, metadata?}`.
    pub const ARTIFACT_REF: Shape = Shape::of(&[
        &Field::new("kind", Required, Spec::string(&[Fact::NonEmpty])),
        &Field::new(
            "path",
            Optional,
            Spec::string(&[
                Fact::Doc(
                    "Relative to the artifact directory; never absolute, never escaping upward.",
                ),
                Fact::Pattern(&RELATIVE_PATH),
            ]),
        ),
        &Field::new("id", Optional, Spec::STRING),
        &Field::new("uri", Optional, Spec::STRING),
        &Field::new("sha256", Optional, Spec::string(&[Fact::Pattern(&SHA256)])),
        &Field::new("metadata", Optional, Spec::OBJECT),
    ]);
    /// A relative artifact path that stays below its folder: not `/…` or `\…`, no drive prefix
    /// (an ASCII character then `:`, as the product checks the second byte), no `..` segment
    /// (split on `/` and `\`).
    pub(crate) const RELATIVE_PATH: Pattern = Pattern {
        regex: r"^(?![/\\])(?![\x00-\x7F]:)(?!(?:[\s\S]*[/\\])?\.\.(?:[/\\]|$))[\s\S]+$",
        code: codes::PATH_NOT_RELATIVE,
        test: is_relative_path,
        message: |_| "artifact paths must be relative and stay below their folder".into(),
    };
    /// A lowercase hex SHA-256.
    pub const SHA256: Pattern = Pattern {
        regex: "^[0-9a-f]{64}$",
        code: codes::INVALID_SHA256,
        test: is_sha256,
        message: |_| "sha256 must be 64 lowercase hex characters".into(),
    };
    pub(crate) const DIAGNOSTICS: Field =
        Field::new("diagnostics", Filled, Spec::object(&DIAGNOSTICS_SHAPE));
    pub(crate) const DIAGNOSTICS_SHAPE: Shape = Shape::of(&[
        &Field::new(
            "dispatch",
            Optional,
            Spec::of(Type::Ref("dispatch_diagnostics", None), &[]),
        ),
        &Field::new(
            "ledger",
            Optional,
            Spec::of(Type::Ref("ledger_diagnostics", None), &[]),
        ),
    ]);
    pub(crate) const METADATA: Field = Field::new("metadata", Filled, Spec::OBJECT);
    /// The envelope.
    pub const TOP: Shape = Shape {
        fields: &[
            &SCHEMA,
            &VERSION,
            &REQUEST_ID,
            &TOOL,
            &OPERATION,
            &STATUS,
            &OUTPUT,
            &ERROR,
            &ARTIFACTS,
            &DIAGNOSTICS,
            &METADATA,
        ],
        conditional: &[&ERROR],
    };
}

/// What a result must echo: the request as the adapter saw it, and the canonical tool id
/// (which the adapter may echo instead of the mapped one, SPEC §4.4).
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    pub sent: &'a Echo,
    pub canonical_tool: &'a str,
}

/// The `error` object of an envelope the dispatcher (or a reference adapter) writes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorBody {
    /// Stable snake_case code.
    pub code: String,
    /// One human sentence; redacted when rendered.
    pub message: String,
    pub retryable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ErrorBody {
    /// A body for one of the dispatcher's own codes.
    pub fn new(code: ErrorCode, message: impl Into<String>, details: Option<Value>) -> ErrorBody {
        ErrorBody {
            code: code.as_str().to_string(),
            message: message.into(),
            retryable: code.retryable(),
            details,
        }
    }
}

pub use super::diagnostics::*;

/// A ref in `artifacts.transcripts` or `artifacts.evidence` that the dispatcher adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArtifactRef {
    pub kind: &'static str,
    /// Relative to the artifact directory.
    pub path: String,
    /// Lowercase hex SHA-256 of the file's bytes.
    pub sha256: String,
}

/// The `error` member: the dispatcher's own, or the answer's as written.
#[derive(Debug, Clone)]
pub enum ErrorPart<'a> {
    Dispatcher(ErrorBody),
    Answer(&'a str),
}

/// One result envelope. `'a` is the answer text the opaque parts are borrowed from.
#[derive(Debug, Clone)]
pub struct ResultEnvelope<'a> {
    pub echo: Echo,
    pub status: Status,
    /// `output`, raw JSON text; absent on every dispatcher-made failure.
    pub output: Option<Cow<'a, str>>,
    /// `output` as [`check`](Self::check) found it (see `output_is_checked`).
    checked_output: Option<CheckedOutput<'a>>,
    pub error: Option<ErrorPart<'a>>,
    /// `artifacts.transcripts` as the answer wrote it (a raw array), if it did.
    transcripts: Option<&'a str>,
    /// `artifacts.evidence` as the answer wrote it (a raw array), if it did.
    evidence: Option<&'a str>,
    /// Other members of the answer's `artifacts`.
    artifacts_extra: Vec<(Cow<'a, str>, &'a str)>,
    /// Refs the dispatcher adds to `artifacts.transcripts`.
    pub transcript_refs: Vec<ArtifactRef>,
    /// The answer's own diagnostics, without any `dispatch` member.
    diagnostics: Vec<(Cow<'a, str>, &'a str)>,
    /// `diagnostics.dispatch`, when the dispatcher reports.
    pub dispatch: Option<DispatchDiagnostics>,
    /// `diagnostics.ledger`, when the dispatcher runs with a ledger.
    pub ledger: Option<LedgerDiagnostics>,
    metadata: Option<&'a str>,
    /// Top-level members the contract does not name (allowed: forward compatibility).
    extra: Vec<(Cow<'a, str>, &'a str)>,
}

/// Which rules apply when an envelope is rendered (SPEC §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// stdout and `--result-file`: exact secrets scrubbed everywhere, `output` otherwise as
    /// the answer wrote it, the full rules on everything else.
    Caller,
    /// A transcript: the full rules everywhere, `output` included.
    Transcript,
}

/// The ids a result echoes (`[request_id, tool, operation]`, each when it is a string) must
/// be the request's; `tool` may also be the request's canonical tool id.
fn check_echo(c: &mut Checker, expect: &Expect, [request_id, tool, operation]: [Option<&str>; 3]) {
    let sent = expect.sent;
    if request_id.is_some_and(|id| id != sent.request_id) {
        c.push(
            codes::REQUEST_ID_MISMATCH,
            "/request_id",
            "the result's request_id does not echo the request's",
        );
    }
    if tool.is_some_and(|t| t != sent.tool && t != expect.canonical_tool) {
        c.push(
            codes::TOOL_MISMATCH,
            "/tool",
            "the result's tool does not echo the request's",
        );
    }
    if operation.is_some_and(|op| op != sent.operation) {
        c.push(
            codes::OPERATION_MISMATCH,
            "/operation",
            "the result's operation does not echo the request's",
        );
    }
}

impl<'a> ResultEnvelope<'a> {
    /// The one constructor of an envelope the dispatcher (or a reference adapter) writes:
    /// `status` with `error` when given, empty artifacts, diagnostics and metadata.
    pub fn new(
        echo: Echo,
        status: Status,
        output: Option<Cow<'a, str>>,
        error: Option<ErrorBody>,
    ) -> ResultEnvelope<'a> {
        ResultEnvelope {
            echo,
            status,
            output,
            checked_output: None,
            error: error.map(ErrorPart::Dispatcher),
            transcripts: None,
            evidence: None,
            artifacts_extra: Vec::new(),
            transcript_refs: Vec::new(),
            diagnostics: Vec::new(),
            dispatch: None,
            ledger: None,
            metadata: None,
            extra: Vec::new(),
        }
    }

    /// A dispatcher-made failure.
    pub fn failure(echo: Echo, status: Status, error: ErrorBody) -> ResultEnvelope<'static> {
        ResultEnvelope::new(echo, status, None, Some(error))
    }

    /// Check an answer — `text` is one JSON object the strict reader accepted — and return
    /// its envelope with absent containers filled, or every issue. With `expect`, the echo of
    /// `request_id`, `tool` and `operation` is checked too.
    pub fn check(text: &'a str, expect: Option<Expect>) -> Result<ResultEnvelope<'a>, Vec<Issue>> {
        let mut c = Checker::new();
        let Some(top) = c.as_object(text, "") else {
            return Err(c.into_issues());
        };
        Self::check_members(c, top, expect)
    }

    /// Read an answer's bytes with the strict reader (at most `max_bytes`; the reader's
    /// refusal is the one issue) and [`check`](Self::check) the object: what
    /// `json::check_object` and `check` do in turn, in one scan of the text.
    pub fn read(
        bytes: &'a [u8],
        max_bytes: usize,
        expect: Option<Expect>,
    ) -> Result<ResultEnvelope<'a>, Vec<Issue>> {
        Self::read_prescanned(bytes, None, max_bytes, expect)
    }

    /// [`ResultEnvelope::read`] on bytes `prescan` (if any) was fed as they arrived: the
    /// same verdict, with less left to do.
    pub fn read_prescanned(
        bytes: &'a [u8],
        prescan: Option<&crate::json::Prescan>,
        max_bytes: usize,
        expect: Option<Expect>,
    ) -> Result<ResultEnvelope<'a>, Vec<Issue>> {
        let (_, top) = Fields::read_object(bytes, prescan, max_bytes)
            .map_err(|e| vec![Issue::from_json(&e)])?;
        Self::check_members(Checker::new(), top, expect)
    }

    fn check_members(
        mut c: Checker,
        top: Fields<'a>,
        expect: Option<Expect>,
    ) -> Result<ResultEnvelope<'a>, Vec<Issue>> {
        c.check(&top, "", &fields::SCHEMA);
        c.check(&top, "", &fields::VERSION);
        let request_id = c.check_str(&top, "", &fields::REQUEST_ID);
        let tool = c.check_str(&top, "", &fields::TOOL);
        let operation = c.check_str(&top, "", &fields::OPERATION);
        if let Some(expect) = expect {
            let got = [&request_id, &tool, &operation].map(|s| s.as_deref());
            check_echo(&mut c, &expect, got);
        }
        let status = c
            .check_str(&top, "", &fields::STATUS)
            .and_then(|s| Status::parse(&s));
        if let Some(error) = c.check_object(&top, "", &fields::ERROR) {
            c.check_shape(&error, "/error", &fields::ERROR_BODY);
        }
        let artifacts = c.check_object(&top, "", &fields::ARTIFACTS);
        if let Some(artifacts) = &artifacts {
            c.check_shape(artifacts, "/artifacts", &fields::ARTIFACT_LISTS);
        }
        let diagnostics = c.check_object(&top, "", &fields::DIAGNOSTICS);
        c.check(&top, "", &fields::METADATA);
        let (Some(status), Some(request_id), Some(tool), Some(operation)) =
            (status, request_id, tool, operation)
        else {
            return Err(c.into_issues());
        };
        if !c.is_clean() {
            return Err(c.into_issues());
        }
        let list = |name| {
            artifacts
                .as_ref()
                .and_then(|a| a.get(name))
                .filter(|raw| Kind::of(raw) == Kind::Array)
        };
        let (transcripts, evidence) = (list("transcripts"), list("evidence"));
        let artifacts_extra = artifacts
            .as_ref()
            .map(|a| {
                a.iter()
                    .filter(|(k, _)| *k != "transcripts" && *k != "evidence")
                    .map(|(k, v)| (Cow::Owned(k.to_string()), v))
                    .collect()
            })
            .unwrap_or_default();
        Ok(ResultEnvelope {
            echo: Echo {
                request_id: request_id.into_owned(),
                tool: tool.into_owned(),
                operation: operation.into_owned(),
            },
            status,
            output: top.get("output").map(Cow::Borrowed),
            checked_output: top.get("output").map(|raw| CheckedOutput {
                raw,
                canonical: top.is_canonical("output"),
            }),
            error: top.get("error").map(ErrorPart::Answer),
            transcripts,
            evidence,
            artifacts_extra,
            transcript_refs: Vec::new(),
            diagnostics: diagnostics
                .map(|d| {
                    d.iter()
                        .filter(|(k, _)| *k != "dispatch" && *k != "ledger")
                        .map(|(k, v)| (Cow::Owned(k.to_string()), v))
                        .collect()
                })
                .unwrap_or_default(),
            dispatch: None,
            ledger: None,
            metadata: top.get("metadata"),
            extra: top
                .iter()
                .filter(|(k, _)| !fields::TOP.fields.iter().any(|f| f.key == *k))
                .map(|(k, v)| (Cow::Owned(k.to_string()), v))
                .collect(),
        })
    }

    /// The error code the envelope carries, if any (the dispatcher's, or the answer's when it
    /// is a string).
    pub fn error_code(&self) -> Option<Cow<'_, str>> {
        match self.error.as_ref()? {
            ErrorPart::Dispatcher(body) => Some(Cow::Borrowed(&body.code)),
            ErrorPart::Answer(raw) => Fields::parse(raw)?.get("code").and_then(raw::string),
        }
    }

    /// The error message the envelope carries, if any.
    pub fn error_message(&self) -> Option<Cow<'_, str>> {
        match self.error.as_ref()? {
            ErrorPart::Dispatcher(body) => Some(Cow::Borrowed(&body.message)),
            ErrorPart::Answer(raw) => Fields::parse(raw)?.get("message").and_then(raw::string),
        }
    }

    /// The envelope as compact JSON text, redacted for `audience` (SPEC §5). Every string
    /// the dispatcher did not write itself passes through `redactor`, names included
    /// (`request_id`, `tool`, `operation`).
    pub fn render(&self, redactor: &Redactor, audience: Audience) -> String {
        self.render_with_output_span(redactor, audience).0
    }

    /// [`render`](Self::render), and where in the text the value of `output` stands.
    fn render_with_output_span(
        &self,
        redactor: &Redactor,
        audience: Audience,
    ) -> (String, std::ops::Range<usize>) {
        let output = self.output.as_deref().map_or(0, str::len);
        self.render_around_output(
            redactor,
            256 + output + self.diagnostics_len(),
            |out| match (self.output_unchanged_for(redactor, audience), &self.output) {
                (Some(unchanged), _) => out.push_str(unchanged),
                (None, Some(output)) => redact_raw(redactor, output, output_scope(audience), out),
                (None, None) => {}
            },
        )
    }

    /// What a transcript embeds of this envelope (SPEC §7): the envelope rendered for
    /// [`Audience::Transcript`], with where its `output` stands in that text, and its
    /// `diagnostics.dispatch` redacted the same way. `diagnostics` and `dispatch` are not
    /// sensitive keys, so the member redacted on its own is the member as it stands in the
    /// text (as for every top-level member, [`Self::render_around_output`]): the transcript
    /// takes both, and digests them, without reading its own JSON back.
    pub fn render_for_transcript(&self, redactor: &Redactor) -> ForTranscript {
        let (text, span) = self.render_with_output_span(redactor, Audience::Transcript);
        let dispatch = self.dispatch.as_ref().map(|dispatch| {
            let raw = serde_json::to_string(dispatch).unwrap_or_else(|_| "null".into());
            let mut out = String::with_capacity(raw.len());
            redact_raw(redactor, &raw, FULL, &mut out);
            out
        });
        ForTranscript {
            output: self.output.is_some().then_some(span),
            text,
            dispatch,
        }
    }

    /// Write what [`render`](Self::render) returns to `out`, without holding it: everything
    /// but `output` is rendered first (it is small), and `output` is redacted straight into
    /// `out` in pieces when it is text the strict reader accepted and nothing in it can change
    /// (the caller's audience with no secret registered, [`Redactor::redact_json_pieces`]).
    /// Otherwise `output` is redacted whole first, as `render` does, so text the redactor
    /// cannot read is never passed on.
    pub fn write_to(
        &self,
        redactor: &Redactor,
        audience: Audience,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        let (text, span) =
            self.render_around_output(redactor, 256 + self.diagnostics_len(), |_| {});
        let at = span.start;
        out.write_all(&text.as_bytes()[..at])?;
        if let Some(unchanged) = self.output_unchanged_for(redactor, audience) {
            out.write_all(unchanged.as_bytes())?;
        } else if let Some(output) = &self.output {
            let scope = output_scope(audience);
            if self.output_checked().is_some() {
                let mut written = Ok(());
                let read = redactor.redact_json_pieces(output, scope, &mut |piece| {
                    if written.is_ok() {
                        written = out.write_all(piece.as_bytes());
                    }
                });
                written?;
                if read.is_err() {
                    // The strict reader and the redactor read the same grammar: this is a
                    // bug, and what was written so far is not a whole envelope.
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "the redactor could not read an output the strict reader accepted",
                    ));
                }
            } else {
                let mut redacted = String::with_capacity(output.len());
                redact_raw(redactor, output, scope, &mut redacted);
                out.write_all(redacted.as_bytes())?;
            }
        }
        out.write_all(&text.as_bytes()[at..])
    }

    /// What [`check`](Self::check) found about `output`, when `output` is still that span
    /// of text the strict reader accepted (not replaced since): it is one valid JSON value.
    fn output_checked(&self) -> Option<CheckedOutput<'a>> {
        match (&self.output, self.checked_output) {
            (Some(Cow::Borrowed(output)), Some(checked)) if std::ptr::eq(*output, checked.raw) => {
                Some(checked)
            }
            _ => None,
        }
    }

    /// The redacted `output` would be its text unchanged: the rules on it change nothing (the
    /// caller's audience, no secret registered) and it is already written in the canonical
    /// compact form the redactor writes.
    fn output_unchanged_for(&self, redactor: &Redactor, audience: Audience) -> Option<&'a str> {
        let checked = self.output_checked()?;
        let unchanged =
            audience == Audience::Caller && !redactor.has_secrets() && checked.canonical;
        unchanged.then_some(checked.raw)
    }

    /// The envelope as compact JSON text with `write_output` writing the value of `output`
    /// (when there is one), and where in the text that value stands.
    fn render_around_output(
        &self,
        redactor: &Redactor,
        capacity: usize,
        write_output: impl FnOnce(&mut String),
    ) -> (String, std::ops::Range<usize>) {
        let mut out = String::with_capacity(capacity);
        let mut at = 0..0;
        let mut w = ObjectWriter::new(&mut out);
        w.str("schema", SCHEMA)
            .with("version", |o| o.push('1'))
            .str("request_id", &redactor.redact_str(&self.echo.request_id))
            .str("tool", &redactor.redact_str(&self.echo.tool))
            .str("operation", &redactor.redact_str(&self.echo.operation))
            .str("status", self.status.as_str());
        // `output`, `error`, `artifacts`, `diagnostics` and `metadata` are not sensitive keys, so
        // redacting each value on its own is what a walk of the whole envelope would do; the
        // members of those objects are redacted with their keys in view.
        if self.output.is_some() {
            w.with("output", |o| {
                let start = o.len();
                write_output(o);
                at = start..o.len();
            });
        }
        match &self.error {
            None => {}
            Some(ErrorPart::Answer(raw)) => {
                w.with("error", |o| redact_raw(redactor, raw, FULL, o));
            }
            Some(ErrorPart::Dispatcher(body)) => {
                let text = serde_json::to_string(body).unwrap_or_else(|_| "{}".into());
                w.with("error", |o| redact_raw(redactor, &text, FULL, o));
            }
        }
        let artifacts = self.artifacts_text();
        w.with("artifacts", |o| redact_raw(redactor, &artifacts, FULL, o));
        let diagnostics = self.diagnostics_text();
        w.with("diagnostics", |o| {
            redact_raw(redactor, &diagnostics, FULL, o)
        });
        w.with("metadata", |o| {
            redact_raw(redactor, self.metadata.unwrap_or("{}"), FULL, o)
        });
        w.finish();
        if !self.extra.is_empty() {
            // Members the contract does not name, redacted as members of the envelope (its
            // top-level `authorization` object is structural), spliced in before the brace.
            let mut extra = String::new();
            let mut x = ObjectWriter::new(&mut extra);
            for (key, value) in &self.extra {
                x.raw(key, value);
            }
            x.finish();
            let mut redacted = String::new();
            redact_raw(
                redactor,
                &extra,
                Scope::Full {
                    envelope_root: true,
                },
                &mut redacted,
            );
            if let Some(members) = redacted
                .strip_prefix('{')
                .and_then(|r| r.strip_suffix('}'))
                .filter(|m| !m.is_empty())
            {
                out.pop();
                out.push(',');
                out.push_str(members);
                out.push('}');
            }
        }
        if self.output.is_none() {
            at = out.len()..out.len();
        }
        (out, at)
    }

    fn diagnostics_len(&self) -> usize {
        self.diagnostics.iter().map(|(_, v)| v.len()).sum()
    }

    /// `diagnostics` as JSON text, unredacted: the answer's members, then `dispatch`.
    fn diagnostics_text(&self) -> String {
        let mut out = String::with_capacity(self.diagnostics_len() + 1024);
        let mut d = ObjectWriter::new(&mut out);
        for (key, value) in &self.diagnostics {
            d.raw(key, value);
        }
        if let Some(dispatch) = &self.dispatch {
            d.value("dispatch", dispatch);
        }
        if let Some(ledger) = &self.ledger {
            d.value("ledger", ledger);
        }
        d.finish();
        out
    }

    /// `artifacts` as JSON text, unredacted, with the dispatcher's refs after the answer's.
    fn artifacts_text(&self) -> String {
        let mut out = String::new();
        let mut a = ObjectWriter::new(&mut out);
        a.with("transcripts", |o| {
            let answer = raw::minify(self.transcripts.unwrap_or("[]"));
            let start = o.len();
            o.push_str(&answer);
            if !self.transcript_refs.is_empty() {
                // Splice the dispatcher's refs in before the closing bracket.
                o.pop();
                for reference in &self.transcript_refs {
                    if o.len() > start + 1 {
                        o.push(',');
                    }
                    o.push_str(&serde_json::to_string(reference).unwrap_or_else(|_| "{}".into()));
                }
                o.push(']');
            }
        });
        a.raw("evidence", self.evidence.unwrap_or("[]"));
        for (key, value) in &self.artifacts_extra {
            a.raw(key, value);
        }
        a.finish();
        out
    }
}

/// `output` as [`ResultEnvelope::check`] found it in text the strict reader accepted.
#[derive(Debug, Clone, Copy)]
struct CheckedOutput<'a> {
    raw: &'a str,
    /// Written in the canonical compact form (see `Fields::is_canonical`).
    canonical: bool,
}

/// The full rules, on a value that is not an envelope's root.
const FULL: Scope = Scope::Full {
    envelope_root: false,
};

/// The rules on `output` for `audience`.
/// An envelope rendered for a transcript, and the two members the transcript also carries on
/// their own ([`ResultEnvelope::render_for_transcript`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForTranscript {
    /// The whole envelope, as the transcript embeds it.
    pub text: String,
    /// Where `output`'s value stands in [`Self::text`], when there is one.
    output: Option<std::ops::Range<usize>>,
    /// `diagnostics.dispatch`, redacted, when there is one.
    dispatch: Option<String>,
}

impl ForTranscript {
    /// `output`'s value as it stands in the text, or `null`.
    pub fn output(&self) -> &str {
        self.output.clone().map_or("null", |span| &self.text[span])
    }

    /// `diagnostics.dispatch`, or `null`.
    pub fn dispatch(&self) -> &str {
        self.dispatch.as_deref().unwrap_or("null")
    }
}

fn output_scope(audience: Audience) -> Scope {
    match audience {
        Audience::Caller => Scope::SecretsOnly,
        Audience::Transcript => FULL,
    }
}

/// Append `raw` (valid JSON) redacted for `scope`, compact. Text the redactor cannot read is
/// never passed on: it becomes `"[redacted]"` (fail closed).
pub fn redact_raw(redactor: &Redactor, raw: &str, scope: Scope, out: &mut String) {
    if redactor.redact_json_into(raw, scope, out).is_err() {
        out.push_str("\"[redacted]\"");
    }
}

/// `{kind, path?, …}` path: relative, below its folder (split on `/` and `\\`, no drive).
fn is_relative_path(path: &str) -> bool {
    let drive = path.len() >= 2 && path.as_bytes()[1] == b':';
    !path.is_empty()
        && !path.starts_with('/')
        && !path.starts_with('\\')
        && !drive
        && !path.split(['/', '\\']).any(|part| part == "..")
}

/// A lowercase hex SHA-256.
fn is_sha256(sha: &str) -> bool {
    sha.len() == 64
        && sha
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
#[path = "result_tests.rs"]
mod tests;
