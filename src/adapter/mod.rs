//! Reference host adapters, run as `parent-tool-dispatch adapter NAME`.

pub mod mcp;
pub mod workspace;
