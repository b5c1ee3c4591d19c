//! Steps 4–5 in the `host_endpoint` mode (SPEC §11): check the endpoint as the host configured
//! it, POST the request, and keep the complete answer for the judge. Nothing is printed here.

use super::{DispatchArgs, DispatchError, Expected, Learned, Outcome};
use ptd_endpoint::{self as endpoint, Exchanged, Failure};
use ptd_sys::hostenv::HostEnv;
use ptd_sys::interrupt::Interrupts;
use ptd_verdict::judge::{self, Answer, Body, Ending};
use ptd_wire::envelope::bridge::Bridge;
use ptd_wire::envelope::result::Transport;

/// The `host_endpoint` mode (SPEC §11): check the endpoint as configured on the host, POST
/// the request, and keep the complete answer for the judge.
pub(super) fn call_endpoint(
    bridge: &Bridge,
    body: Vec<u8>,
    expected: Expected,
    args: &DispatchArgs,
    env: &HostEnv,
    interrupts: &Interrupts,
    learned: &mut Learned,
) -> Result<Answered, DispatchError> {
    // A valid `host_endpoint` bridge always has one.
    let spec = bridge
        .endpoint
        .as_ref()
        .ok_or(DispatchError::ModeUnsupported { mode: bridge.mode })?;
    let target = endpoint::target(
        spec,
        bridge.token_env.as_deref(),
        args.ca_cert.as_deref(),
        env,
    )
    .map_err(DispatchError::EndpointUnconfigured)?;
    let target = match learned.trace_context() {
        Some((context, state)) => target.with_trace_context(context.traceparent(), state),
        None => target,
    };
    // The URL is a secret when it carries more than its origin (a path or query may hold a
    // credential); only the origin is shown.
    for part in target.secret_parts() {
        learned.redactor.add_secret(&part);
    }
    learned.dispatch.transport = Some(Transport::Http);
    learned.dispatch.endpoint = Some(target.origin().to_string());
    let limits = expected.limits();
    let endpoint_limits = endpoint::Limits {
        timeout_ms: limits.timeout_ms,
        max_bytes: limits.max_bytes,
    };
    let request_id = &expected.sent.request_id;
    let Exchanged {
        outcome,
        http_status,
        response_bytes,
    } = endpoint::exchange(&target, body, request_id, endpoint_limits, interrupts);
    // What the exchange observed, also when it ended early.
    learned.dispatch.http_status = http_status;
    learned.dispatch.response_bytes = Some(response_bytes);
    let response = outcome.map_err(|failure| match failure {
        Failure::Timeout => DispatchError::EndpointTimeout {
            timeout_ms: limits.timeout_ms,
        },
        Failure::Interrupted(signal) => DispatchError::EndpointInterrupted { signal },
        Failure::TooLarge => DispatchError::EndpointTooLarge {
            max_bytes: limits.max_bytes,
        },
        Failure::Unreachable(cause) => DispatchError::EndpointUnreachable {
            origin: target.origin().to_string(),
            cause,
        },
        Failure::Unconfigured(why) => DispatchError::EndpointUnconfigured(why),
        Failure::Internal(what) => DispatchError::Internal(what),
    })?;
    Ok(Answered { response, expected })
}

/// A complete answer of the endpoint.
pub(super) struct Answered {
    response: endpoint::Response,
    expected: Expected,
}

impl Answered {
    /// Judge the body like an adapter's stdout, the HTTP status playing the exit status.
    pub(super) fn judge(&self) -> Outcome<'_> {
        let status = self.response.status;
        let ending = if (200..300).contains(&status) {
            Ending::Exited(0)
        } else {
            Ending::HttpStatus(status)
        };
        let body = Body::Bytes(&self.response.body);
        let expected = &self.expected;
        Outcome {
            verdict: judge::judge(
                Answer { ending, body },
                expected.expect(),
                expected.limits(),
            ),
            stdout_kept: None,
            replayed: None,
        }
    }
}
