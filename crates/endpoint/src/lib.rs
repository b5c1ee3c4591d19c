//! parent-tool-dispatch's `host_endpoint` client (SPEC §11): the URL and token from the
//! bridge's variables, resolution on the host's own terms (§11.1), TLS, one bounded POST.

mod endpoint;
pub use endpoint::*;
