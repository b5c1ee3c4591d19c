//! `serve`'s routes (SPEC §19.2): `POST /v1/dispatch`, `GET /healthz`, `GET /metrics`; every
//! other path 404, another method 405. The body is bounded before it is read (413 on a
//! `Content-Length` over the limit, without reading it) and while it is read (size and time).

use super::child::TraceHeaders;
use super::metrics::log;
use super::State;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use ptd_wire::envelope::request::Echo;
use serde_json::json;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// The response type of every route.
pub(super) type Reply = Response<Full<Bytes>>;

/// The one entry of every request.
pub(super) async fn handle(
    state: Arc<State>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Reply, Infallible> {
    let started = Instant::now();
    let (reply, logged) = route(&state, req).await;
    state.metrics.responded(reply.status().as_u16());
    let mut line = logged.unwrap_or_default();
    line.http_status = reply.status().as_u16();
    line.write(peer, started);
    Ok(reply)
}

/// What the request's log line says beyond the time, the peer and the duration.
#[derive(Debug, Default)]
struct Line {
    path: &'static str,
    http_status: u16,
    request_id: Option<String>,
    session: Option<String>,
    tool: Option<String>,
    status: Option<String>,
    code: Option<String>,
}

impl Line {
    fn write(self, peer: SocketAddr, started: Instant) {
        log(
            "request",
            json!({
                "route": self.path,
                "http_status": self.http_status,
                "request_id": self.request_id,
                "session": self.session,
                "tool": self.tool,
                "status": self.status,
                "code": self.code,
                "duration_ms": started.elapsed().as_millis() as u64,
                "peer": peer.to_string(),
            }),
        );
    }
}

async fn route(state: &Arc<State>, req: Request<Incoming>) -> (Reply, Option<Line>) {
    let path = req.uri().path();
    let (name, allowed): (&'static str, &'static str) = match path {
        "/v1/dispatch" => ("/v1/dispatch", "POST"),
        "/healthz" => ("/healthz", "GET, HEAD"),
        "/metrics" => ("/metrics", "GET, HEAD"),
        _ => return (plain(StatusCode::NOT_FOUND, "no such route"), None),
    };
    let line = Line {
        path: name,
        ..Line::default()
    };
    let method_ok = match name {
        "/v1/dispatch" => req.method() == Method::POST,
        _ => req.method() == Method::GET || req.method() == Method::HEAD,
    };
    if !method_ok {
        let mut reply = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
        reply
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static(allowed));
        return (reply, Some(line));
    }
    match name {
        "/healthz" => (healthz(state).await, Some(line)),
        "/metrics" => match state.authenticate(&req) {
            Some(_) => (metrics(state).await, Some(line)),
            None => (unauthorized(), Some(line)),
        },
        _ => dispatch(state, req, line).await,
    }
}

/// `GET /healthz`: 200 while the server serves and its ledger (if any) opens; 503 with the
/// reason otherwise.
async fn healthz(state: &State) -> Reply {
    let (status, body) = if !state.healthy() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "status": "unavailable", "reason": "the server is stopping" }),
        )
    } else {
        match state.ledger.check().await {
            Ok(()) => (StatusCode::OK, json!({ "status": "ok" })),
            Err(mut why) => {
                why["status"] = json!("unavailable");
                (StatusCode::SERVICE_UNAVAILABLE, why)
            }
        }
    };
    let mut reply = Response::new(Full::new(Bytes::from(body.to_string())));
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

async fn metrics(state: &State) -> Reply {
    let pending = match state.metrics.ledger() {
        Some(path) => tokio::task::spawn_blocking(move || super::metrics::approvals_pending(&path))
            .await
            .ok()
            .flatten(),
        None => None,
    };
    let mut reply = Response::new(Full::new(Bytes::from(state.metrics.render(pending))));
    reply.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    reply
}

/// `POST /v1/dispatch`: the checks of SPEC §19.2 in order (token, size, in-flight, body, one
/// JSON document, `Idempotency-Key`), then a child dispatcher.
async fn dispatch(
    state: &Arc<State>,
    req: Request<Incoming>,
    mut line: Line,
) -> (Reply, Option<Line>) {
    let Some(caller) = state.authenticate(&req) else {
        return (unauthorized(), Some(line));
    };
    let session = caller.session.or_else(|| state.default_session.clone());
    line.session = session.clone();
    let limit = state.max_request_bytes;
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return (too_large(), Some(line));
    }
    let Ok(permit) = state.in_flight.clone().try_acquire_owned() else {
        let mut reply = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many requests in flight",
        );
        reply
            .headers_mut()
            .insert("retry-after", HeaderValue::from_static("1"));
        return (reply, Some(line));
    };
    let key = req
        .headers()
        .get("idempotency-key")
        .map(|v| v.as_bytes().to_vec());
    let header = |name| req.headers().get(name).map(HeaderValue::as_bytes);
    let trace = TraceHeaders::of(header("traceparent"), header("tracestate"));
    let body = match read_body(state, req.into_body(), limit).await {
        Ok(body) => body,
        Err(reply) => return (reply, Some(line)),
    };
    if serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_err() {
        return (
            plain(
                StatusCode::BAD_REQUEST,
                "the body is not exactly one JSON document",
            ),
            Some(line),
        );
    }
    let echo = echo_of(&body);
    line.request_id = Some(echo.request_id.clone()).filter(|id| !id.is_empty());
    if key.is_some_and(|key| key != echo.request_id.as_bytes()) {
        return (
            plain(
                StatusCode::BAD_REQUEST,
                "the Idempotency-Key differs from request_id",
            ),
            Some(line),
        );
    }
    let started = Instant::now();
    let worker = Arc::clone(state);
    // The child runs to its end even when the client goes away: its permit and the gauge
    // are released by the task itself.
    let joined = tokio::task::spawn_blocking(move || {
        worker.metrics.in_flight(true);
        let answer =
            worker
                .launcher
                .dispatch(body, &echo, (session.as_deref(), &trace), &worker.stop);
        worker.metrics.in_flight(false);
        drop(permit);
        answer
    })
    .await;
    let Ok(answer) = joined else {
        return (
            plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
            Some(line),
        );
    };
    let outcome = Outcome::of(&answer.envelope);
    state.metrics.dispatched(
        outcome.tool.as_deref().unwrap_or(""),
        &outcome.status,
        &outcome.code,
        started.elapsed(),
    );
    line.tool = outcome.tool.clone().or(line.tool);
    line.status = Some(outcome.status);
    line.code = Some(outcome.code).filter(|c| !c.is_empty());
    if answer.made_here {
        log("child_failed", json!({"request_id": line.request_id}));
    }
    let mut reply = Response::new(Full::new(Bytes::from(answer.envelope)));
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    (reply, Some(line))
}

/// The body, bounded by `limit` bytes and the body timeout; the error is the reply.
async fn read_body(state: &State, body: Incoming, limit: u64) -> Result<Vec<u8>, Reply> {
    let limited = Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
    match tokio::time::timeout(state.body_timeout, limited.collect()).await {
        Err(_) => {
            let mut reply = plain(StatusCode::REQUEST_TIMEOUT, "the body took too long");
            reply
                .headers_mut()
                .insert("connection", HeaderValue::from_static("close"));
            Err(reply)
        }
        Ok(Err(err)) if err.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(plain(StatusCode::BAD_REQUEST, "the body could not be read")),
        Ok(Ok(collected)) => Ok(collected.to_bytes().to_vec()),
    }
}

/// The ids of a request for an envelope made here, and its `request_id` for the
/// `Idempotency-Key` check (empty strings when absent or not strings).
fn echo_of(body: &[u8]) -> Echo {
    #[derive(serde::Deserialize, Default)]
    struct Head {
        request_id: Option<serde_json::Value>,
        tool: Option<serde_json::Value>,
        operation: Option<serde_json::Value>,
    }
    let head: Head = serde_json::from_slice(body).unwrap_or_default();
    let text = |v: Option<serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => s,
        _ => String::new(),
    };
    Echo {
        request_id: text(head.request_id),
        tool: text(head.tool),
        operation: text(head.operation),
    }
}

/// What an answer's log line and metrics say of it.
struct Outcome {
    status: String,
    code: String,
    tool: Option<String>,
}

impl Outcome {
    fn of(envelope: &[u8]) -> Outcome {
        #[derive(serde::Deserialize, Default)]
        struct Error {
            code: Option<String>,
        }
        #[derive(serde::Deserialize, Default)]
        struct Head {
            status: Option<String>,
            tool: Option<String>,
            error: Option<Error>,
        }
        let head: Head = serde_json::from_slice(envelope).unwrap_or_default();
        Outcome {
            status: head.status.unwrap_or_else(|| "unknown".into()),
            code: head.error.and_then(|e| e.code).unwrap_or_default(),
            tool: head.tool,
        }
    }
}

/// A short JSON reply `{"error": MESSAGE}` with `status`.
fn plain(status: StatusCode, message: &str) -> Reply {
    let body = json!({ "error": message }).to_string();
    let mut reply = Response::new(Full::new(Bytes::from(body)));
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

fn unauthorized() -> Reply {
    let mut reply = plain(StatusCode::UNAUTHORIZED, "a valid bearer token is needed");
    reply
        .headers_mut()
        .insert("www-authenticate", HeaderValue::from_static("Bearer"));
    reply
}

fn too_large() -> Reply {
    let mut reply = plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        "the body is over the size limit",
    );
    reply
        .headers_mut()
        .insert("connection", HeaderValue::from_static("close"));
    reply
}

/// The bearer token of `req`'s `Authorization` header.
pub(super) fn bearer(req: &Request<Incoming>) -> Option<&str> {
    let value = req.headers().get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}
