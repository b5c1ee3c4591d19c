//! The small subcommands: `validate` and `sandbox-env`. Each reads, checks and prints; none
//! starts a process.

use crate::cli::{EnvFormat, EnvelopeKind, SandboxEnvArgs, ValidateArgs};
use crate::envelope::bridge::Bridge;
use crate::envelope::json::Document;
use crate::envelope::request::Request;
use crate::envelope::result::ResultEnvelope;
use crate::envelope::{bridge, json, request, result};
use crate::error::exit;
use crate::validate::{Issue, Report};
use serde_json::{Map, Value};
use std::path::Path;
use std::rc::Rc;

/// `validate bridge|request|result [FILE]`: print the report; exit 0 when valid, 65 otherwise.
pub fn validate(args: &ValidateArgs) -> u8 {
    let max = usize::try_from(args.max_bytes).unwrap_or(usize::MAX);
    let issues = match read_input(args.file.as_deref(), max) {
        Err(issue) => vec![issue],
        Ok(bytes) => match args.kind {
            EnvelopeKind::Bridge => match json::parse_object(&bytes, max) {
                Err(e) => vec![Issue::from_json(&e)],
                Ok(map) => Bridge::from_json(map).err().unwrap_or_default(),
            },
            EnvelopeKind::Request | EnvelopeKind::Result => match Document::parse(bytes, max) {
                Err(e) => vec![Issue::from_json(&e)],
                Ok(doc) if args.kind == EnvelopeKind::Request => {
                    Request::from_document(Rc::new(doc))
                        .err()
                        .unwrap_or_default()
                }
                Ok(doc) => ResultEnvelope::check(doc.text(), None)
                    .err()
                    .unwrap_or_default(),
            },
        },
    };
    let report = Report::from_issues(issues);
    println!("{}", serde_json::to_string(&report).unwrap_or_default());
    if report.valid {
        exit::SUCCESS
    } else {
        exit::DATA_INVALID
    }
}

fn read_input(path: Option<&Path>, max: usize) -> Result<Vec<u8>, Issue> {
    crate::envelope::read_input(path, max as u64).map_err(|e| {
        Issue::new(
            "unreadable",
            "",
            format!("the file could not be read: {}", e.kind()),
        )
    })
}

/// The upstream default variable names (SPEC §4.6).
pub const DEFAULT_VARIABLES: [(&str, &str); 5] = [
    ("bridge_ref", "WP_CODEBOX_PARENT_TOOL_BRIDGE_REF"),
    ("bridge_schema", "WP_CODEBOX_PARENT_TOOL_BRIDGE_SCHEMA"),
    ("dispatch_mode", "WP_CODEBOX_PARENT_TOOL_DISPATCH_MODE"),
    ("request_schema", "WP_CODEBOX_PARENT_TOOL_REQUEST_SCHEMA"),
    ("result_schema", "WP_CODEBOX_PARENT_TOOL_RESULT_SCHEMA"),
];

/// Why `sandbox-env` refused.
#[derive(Debug, thiserror::Error)]
pub enum SandboxEnvError {
    #[error("the parent-tool bridge is invalid: {0}")]
    BridgeInvalid(String),
    #[error("sandbox variable {0} collides with a secret or token variable name")]
    Collision(String),
}

/// The metadata-only variables for the sandbox, in a stable order.
pub fn sandbox_variables(bridge: &Bridge) -> Result<Vec<(String, String)>, SandboxEnvError> {
    let names: Vec<(&str, Option<String>)> = match &bridge.sandbox_variables {
        None => DEFAULT_VARIABLES
            .iter()
            .map(|(k, v)| (*k, Some(v.to_string())))
            .collect(),
        Some(v) => vec![
            ("bridge_ref", v.bridge_ref.clone()),
            ("bridge_schema", v.bridge_schema.clone()),
            ("dispatch_mode", v.dispatch_mode.clone()),
            ("request_schema", v.request_schema.clone()),
            ("result_schema", v.result_schema.clone()),
        ],
    };
    let mut out = Vec::new();
    for (key, name) in names {
        let Some(name) = name else { continue };
        if bridge.secret_env.contains(&name) || bridge.token_env.as_ref() == Some(&name) {
            return Err(SandboxEnvError::Collision(name));
        }
        let value = match key {
            "bridge_ref" => bridge.bridge_ref(),
            "bridge_schema" => bridge::SCHEMA.to_string(),
            "dispatch_mode" => bridge.mode.as_str().to_string(),
            "request_schema" => request::SCHEMA.to_string(),
            _ => result::SCHEMA.to_string(),
        };
        out.push((name, value));
    }
    Ok(out)
}

/// `sandbox-env`: print the variables; refusals exit 69 with the reason on stderr.
pub fn sandbox_env(args: &SandboxEnvArgs) -> u8 {
    let Some(text) = args.bridge.parent_tool_bridge.as_deref() else {
        eprintln!(
            "error[usage]: no bridge: pass --parent-tool-bridge '<json>|@FILE' or set {}",
            crate::cli::BRIDGE_ENV
        );
        return exit::USAGE;
    };
    let vars = load_bridge(text).and_then(|b| sandbox_variables(&b));
    match vars {
        Err(err) => {
            let code = match err {
                SandboxEnvError::BridgeInvalid(_) => "bridge_invalid",
                SandboxEnvError::Collision(_) => "sandbox_env_collision",
            };
            eprintln!("error[{code}]: {err}");
            exit::UNAVAILABLE
        }
        Ok(vars) => {
            match args.format {
                EnvFormat::Env => {
                    for (name, value) in vars {
                        println!("{name}={value}");
                    }
                }
                EnvFormat::Json => {
                    let map: Map<String, Value> = vars
                        .into_iter()
                        .map(|(k, v)| (k, Value::String(v)))
                        .collect();
                    println!("{}", Value::Object(map));
                }
            }
            exit::SUCCESS
        }
    }
}

/// Read and validate a bridge, with the first issue as the refusal reason.
pub fn load_bridge(text: &str) -> Result<Bridge, SandboxEnvError> {
    Bridge::load(text).map_err(|issues| {
        let first = issues
            .first()
            .map(|i| format!("{} at {:?}: {}", i.code, i.path, i.message));
        SandboxEnvError::BridgeInvalid(first.unwrap_or_default())
    })
}
