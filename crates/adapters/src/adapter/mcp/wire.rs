//! JSON-RPC 2.0 as the MCP stdio transport carries it: one message per line, read with the
//! crate's strict reader and sorted into requests, notifications and responses; and the few
//! messages the client writes, built as compact single-line text.
//!
//! Owns the message grammar and nothing about sessions or envelopes. Invariants: a line is
//! read once by [`ptd_wire::json::Document`] (size cap, UTF-8, one object, no duplicate
//! key, depth) and its values stay raw text, so a tool's numbers reach the envelope exactly as
//! the server wrote them; every message written is one line (raw pieces are minified, strings
//! escaped), so it can never break the framing.

use ptd_wire::json::raw::{self, Fields, ObjectWriter};
use ptd_wire::json::{Document, JsonIssue, Kind};

/// JSON-RPC's "method not found", the answer to every request the server sends but `ping`.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's "invalid params": what an unknown tool is reported as (MCP tools spec).
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// MCP 2026-07-28 `UnsupportedProtocolVersionError`; its `data.supported` lists versions.
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// MCP 2026-07-28 `HeaderMismatch` and `MissingRequiredClientCapability`: modern errors that
/// mean the server is modern and refused, not that it is a legacy server.
pub(crate) const MODERN_REFUSALS: [i64; 2] = [-32020, -32021];

/// A JSON-RPC error object, its parts kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// `code`, an integer (checked), as written.
    pub code_raw: String,
    /// `code` as a number, when it fits an `i64`.
    pub code: Option<i64>,
    /// `message`, decoded.
    pub message: String,
    /// `data`, raw JSON, when present.
    pub data: Option<String>,
}

impl RpcError {
    /// The `supported` versions of an error's `data` (`UnsupportedProtocolVersionError`, and
    /// the legacy handshake's version-mismatch error), when it lists any.
    pub fn supported_versions(&self) -> Option<Vec<String>> {
        let data = Fields::parse(self.data.as_deref()?)?;
        string_items(data.get("supported")?)
    }
}

/// Which request a response answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseId {
    /// One of the client's (always non-negative integers).
    Number(u64),
    /// `null`: the server could not read the request it answers (error responses only).
    Null,
    /// A string or another number: no request of this client ever had it.
    Foreign,
}

/// A response's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `result`, a raw JSON object.
    Result(String),
    Error(RpcError),
}

/// One message from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Response {
        id: ResponseId,
        outcome: Outcome,
    },
    /// A server-initiated request: `id` is raw JSON (a string or a number), echoed in the answer.
    Request {
        id: String,
        method: String,
    },
    Notification {
        method: String,
    },
}

/// Why a line is not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Malformed {
    /// The strict reader refused it (not JSON, two documents, a duplicate key, too deep…).
    Json(JsonIssue),
    /// JSON, but not a JSON-RPC 2.0 message: what is wrong with it.
    Shape(&'static str),
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::Json(issue) => write!(f, "{issue}"),
            Malformed::Shape(what) => f.write_str(what),
        }
    }
}

/// Read one line (without its newline) as a JSON-RPC message, at most `max_bytes` long.
pub fn parse(line: Vec<u8>, max_bytes: usize) -> Result<Incoming, Malformed> {
    let doc = Document::parse(line, max_bytes).map_err(Malformed::Json)?;
    if doc.get("jsonrpc").and_then(raw::string).as_deref() != Some("2.0") {
        return Err(Malformed::Shape("its \"jsonrpc\" member is not \"2.0\""));
    }
    if let Some(method) = doc.get("method") {
        let method = raw::string(method)
            .ok_or(Malformed::Shape("its \"method\" is not a string"))?
            .into_owned();
        return match doc.get("id") {
            None => Ok(Incoming::Notification { method }),
            Some(id) if matches!(Kind::of(id), Kind::String | Kind::Number) => {
                Ok(Incoming::Request {
                    id: raw::minify(id).into_owned(),
                    method,
                })
            }
            Some(_) => Err(Malformed::Shape(
                "it is a request whose \"id\" is neither a string nor a number",
            )),
        };
    }
    let id = match doc.get("id") {
        None => return Err(Malformed::Shape("it has neither \"method\" nor \"id\"")),
        Some(id) if Kind::of(id) == Kind::Null => ResponseId::Null,
        Some(id) => match raw::integer(id) {
            Some(n) => ResponseId::Number(n),
            None if matches!(Kind::of(id), Kind::String | Kind::Number) => ResponseId::Foreign,
            None => {
                return Err(Malformed::Shape(
                    "it is a response whose \"id\" is neither a string, a number nor null",
                ))
            }
        },
    };
    let outcome = match (doc.get("result"), doc.get("error")) {
        (Some(result), None) => {
            if Kind::of(result) != Kind::Object {
                return Err(Malformed::Shape("its \"result\" is not an object"));
            }
            if id == ResponseId::Null {
                return Err(Malformed::Shape("it is a result whose \"id\" is null"));
            }
            Outcome::Result(raw::minify(result).into_owned())
        }
        (None, Some(error)) => Outcome::Error(rpc_error(error)?),
        (Some(_), Some(_)) => {
            return Err(Malformed::Shape(
                "it is a response with both \"result\" and \"error\"",
            ))
        }
        (None, None) => {
            return Err(Malformed::Shape(
                "it is a response with neither \"result\" nor \"error\"",
            ))
        }
    };
    Ok(Incoming::Response { id, outcome })
}

fn rpc_error(raw_error: &str) -> Result<RpcError, Malformed> {
    let fields =
        Fields::parse(raw_error).ok_or(Malformed::Shape("its \"error\" is not an object"))?;
    let code_raw = fields
        .get("code")
        .map(|c| raw::minify(c).into_owned())
        .filter(|c| is_integer(c))
        .ok_or(Malformed::Shape("its \"error.code\" is not an integer"))?;
    let message = fields
        .get("message")
        .and_then(raw::string)
        .ok_or(Malformed::Shape("its \"error.message\" is not a string"))?
        .into_owned();
    Ok(RpcError {
        code: code_raw.parse().ok(),
        code_raw,
        message,
        data: fields.get("data").map(|d| raw::minify(d).into_owned()),
    })
}

/// An integer as JSON writes it: an optional minus sign and digits, nothing else.
fn is_integer(raw: &str) -> bool {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The strings of a raw JSON array; `None` when it is not an array of strings.
pub fn string_items(raw_array: &str) -> Option<Vec<String>> {
    let mut items = Vec::new();
    let mut all_strings = true;
    let is_array = raw::for_each_item(raw_array, |_, item| match raw::string(item) {
        Some(s) if Kind::of(item) == Kind::String => items.push(s.into_owned()),
        _ => all_strings = false,
    });
    (is_array && all_strings).then_some(items)
}

/// A request: `{"jsonrpc":"2.0","id":ID,"method":METHOD,"params":PARAMS}` (`params` raw).
pub fn request(id: u64, method: &str, params: &str) -> String {
    let mut out = String::with_capacity(64 + method.len() + params.len());
    let mut w = ObjectWriter::new(&mut out);
    w.str("jsonrpc", "2.0")
        .with("id", |o| o.push_str(&id.to_string()))
        .str("method", method)
        .raw("params", params);
    w.finish();
    out
}

/// A notification, with raw `params` when given.
pub(crate) fn notification(method: &str, params: Option<&str>) -> String {
    let mut out = String::new();
    let mut w = ObjectWriter::new(&mut out);
    w.str("jsonrpc", "2.0").str("method", method);
    if let Some(params) = params {
        w.raw("params", params);
    }
    w.finish();
    out
}

/// A result response to the server's request `id` (raw).
pub fn result_response(id: &str, result: &str) -> String {
    let mut out = String::new();
    let mut w = ObjectWriter::new(&mut out);
    w.str("jsonrpc", "2.0").raw("id", id).raw("result", result);
    w.finish();
    out
}

/// An error response to the server's request `id` (raw).
pub fn error_response(id: &str, code: i64, message: &str) -> String {
    let mut out = String::new();
    let mut w = ObjectWriter::new(&mut out);
    w.str("jsonrpc", "2.0").raw("id", id).with("error", |o| {
        let mut e = ObjectWriter::new(o);
        e.with("code", |o| o.push_str(&code.to_string()))
            .str("message", message);
        e.finish();
    });
    w.finish();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &str) -> Result<Incoming, Malformed> {
        parse(line.as_bytes().to_vec(), 1 << 20)
    }

    #[test]
    fn the_three_kinds_are_told_apart() {
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":7,"result":{"a": 1e400}}"#),
            Ok(Incoming::Response {
                id: ResponseId::Number(7),
                outcome: Outcome::Result(r#"{"a":1e400}"#.into())
            })
        );
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":"s-1","method":"roots/list"}"#),
            Ok(Incoming::Request {
                id: "\"s-1\"".into(),
                method: "roots/list".into()
            })
        );
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#),
            Ok(Incoming::Notification {
                method: "notifications/message".into()
            })
        );
    }

    #[test]
    fn a_carriage_return_before_the_newline_is_whitespace() {
        assert!(read("{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\r").is_ok());
    }

    #[test]
    fn errors_keep_their_parts_and_list_supported_versions() {
        let got = read(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32022,"message":"no","data":{"supported":["2025-06-18"],"requested":"x"}}}"#,
        )
        .unwrap();
        let Incoming::Response {
            id: ResponseId::Null,
            outcome: Outcome::Error(err),
        } = got
        else {
            panic!("{got:?}")
        };
        assert_eq!(err.code, Some(-32022));
        assert_eq!(err.message, "no");
        assert_eq!(err.supported_versions(), Some(vec!["2025-06-18".into()]));
    }

    #[test]
    fn ids_that_are_not_ours_are_foreign() {
        for id in [r#""1""#, "-1", "1.0", "1e2"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
            assert!(
                matches!(
                    read(&line),
                    Ok(Incoming::Response {
                        id: ResponseId::Foreign,
                        ..
                    })
                ),
                "{id}"
            );
        }
    }

    #[test]
    fn what_is_not_json_rpc_is_malformed() {
        for line in [
            "hello",
            "[]",
            r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
            r#"{"id":1,"result":{}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":[]}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":""}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
            r#"{"jsonrpc":"2.0","method":7}"#,
            r#"{"jsonrpc":"2.0"}"#,
        ] {
            assert!(read(line).is_err(), "{line}");
        }
        assert!(matches!(
            parse(vec![b'{'; 100], 10),
            Err(Malformed::Json(JsonIssue::TooLarge { .. }))
        ));
    }

    #[test]
    fn written_messages_are_one_line() {
        let params = "{\n  \"name\": \"a\\nb\",\n  \"arguments\": {\"x\": [1, 2]}\n}";
        let text = request(3, "tools/call", params);
        assert_eq!(
            text,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a\nb","arguments":{"x":[1,2]}}}"#
        );
        assert_eq!(
            error_response("\"s\"", METHOD_NOT_FOUND, "Method not found"),
            r#"{"jsonrpc":"2.0","id":"s","error":{"code":-32601,"message":"Method not found"}}"#
        );
        assert_eq!(
            result_response("4", "{}"),
            r#"{"jsonrpc":"2.0","id":4,"result":{}}"#
        );
        assert_eq!(
            notification("notifications/initialized", None),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        );
    }
}
