//! The bridge's fields (SPEC §2.1), in the order the schema lists them: what
//! [`Bridge::from_json`](super::Bridge::from_json) checks and `schema bridge` publishes.

use super::DEFAULT_TIMEOUT_MS;
use crate::validate::Presence::{Optional, Required, When};
use crate::validate::{Condition, Expected, Fact, Field, Refusal, Shape, Spec, Type, ENV_NAME};

pub const SCHEMA: Field = Field::new(
    "schema",
    Required,
    Spec::string(&[Fact::Const(super::SCHEMA)]),
);
pub use crate::validate::VERSION;
const STRINGS: Type = Type::Array(Some(&Spec::STRING));
pub(crate) const ALLOWED_TOOLS: Field = Field::new(
    "allowed_tools",
    Required,
    Spec::of(STRINGS, &[Fact::Doc("Canonical tool ids the sandbox may call; duplicates are harmless, an empty list denies everything.")]),
);
/// A string that names an environment variable.
pub(crate) const ENV_NAME_SPEC: Spec = Spec::string(&[Fact::Pattern(&ENV_NAME)]);

pub(crate) const DISPATCHER: Field =
    Field::new("dispatcher", Required, Spec::object(&DISPATCHER_SHAPE));
pub(crate) const OWNER: Field = Field::new(
    "owner",
    Required,
    Spec::string(&[Fact::Const("wp-codebox")]),
);
pub(crate) const MODE: Field = Field::new(
    "mode",
    Required,
    Spec::string(&[Fact::OneOf(
        &["host_endpoint", "host_command"],
        Refusal::Says(|s| {
            format!("\"mode\" must be \"host_command\" or \"host_endpoint\", found {s:?}")
        }),
    )]),
);
pub const ENDPOINT: Field = Field::new(
    "endpoint",
    When(&MODE_IS_ENDPOINT),
    Spec::of(
        Type::Object(Some(&ENDPOINT_SHAPE)),
        &[Fact::Doc("Mode host_endpoint: NAMES of host variables holding the URL and the bearer token, never their values.")],
    ),
);
const MODE_IS_ENDPOINT: Condition = Condition {
    when: &MODE,
    value: "host_endpoint",
    negated: false,
    message: "\"endpoint\" is required when mode is \"host_endpoint\"",
};
pub const URL_ENV: Field = Field::new("url_env", Required, ENV_NAME_SPEC);
pub const METHOD: Field = Field::new("method", Optional, Spec::string(&[Fact::Supported("POST")]));
pub const TOKEN_ENV: Field = Field::new("token_env", Optional, ENV_NAME_SPEC);
pub(crate) const ENDPOINT_SHAPE: Shape = Shape::of(&[&URL_ENV, &METHOD, &TOKEN_ENV]);
pub const COMMAND: Field = Field::new(
    "command",
    When(&MODE_IS_COMMAND),
    Spec::of(
        Type::Object(Some(&COMMAND_SHAPE)),
        &[Fact::Doc("Mode host_command: the host adapter.")],
    ),
);
const MODE_IS_COMMAND: Condition = Condition {
    when: &MODE,
    value: "host_command",
    negated: false,
    message: "\"command\" is required when mode is \"host_command\"",
};
pub const ARGV: Field = Field::new(
    "argv",
    Required,
    Spec::of(
        STRINGS,
        &[
            Fact::Doc("Executed exactly as given, without a shell; argv[0] is resolved through PATH when it has no '/'."),
            Fact::NonEmpty,
            Fact::FirstNonEmpty,
        ],
    ),
);
pub(crate) const CWD_ENV: Field = Field::new("cwd_env", Optional, ENV_NAME_SPEC);
pub const ENV: Field = Field::new(
    "env",
    Optional,
    Spec::of(
        Type::Map {
            names: Some(&ENV_NAME),
            values: Some(&Spec::STRING),
        },
        &[],
    ),
);
pub(crate) const TRANSPORT: Field = Field::new(
    "transport",
    Optional,
    Spec::string(&[
        Fact::OneOf(&["stdin", "file"], Refusal::List),
        Fact::DefaultStr("stdin"),
    ]),
);
pub(crate) const COMMAND_SHAPE: Shape = Shape::of(&[&ARGV, &CWD_ENV, &ENV, &TRANSPORT]);
pub const REQUEST_SCHEMA: Field = Field::new(
    "request_schema",
    Required,
    Spec::string(&[Fact::Const(crate::envelope::request::SCHEMA)]),
);
pub const RESULT_SCHEMA: Field = Field::new(
    "result_schema",
    Required,
    Spec::string(&[Fact::Const(crate::envelope::result::SCHEMA)]),
);
pub const TIMEOUT_MS: Field = Field::new(
    "timeout_ms",
    Optional,
    Spec::of(
        Type::Integer,
        &[Fact::Min(1), Fact::DefaultInt(DEFAULT_TIMEOUT_MS)],
    )
    .refused(Expected::Says("expected an integer of at least 1")),
);
pub(crate) const DISPATCHER_SHAPE: Shape = Shape {
    fields: &[
        &OWNER,
        &MODE,
        &ENDPOINT,
        &COMMAND,
        &REQUEST_SCHEMA,
        &RESULT_SCHEMA,
        &TIMEOUT_MS,
    ],
    conditional: &[&COMMAND, &ENDPOINT],
};

pub(crate) const SANDBOX_ENV: Field =
    Field::new("sandbox_env", Required, Spec::object(&SANDBOX_ENV_SHAPE));
pub(crate) const SANDBOX_MODE: Field = Field::new(
    "mode",
    Optional,
    Spec::string(&[Fact::OneOf(&["metadata-only"], Refusal::List)]),
);
pub(crate) const VARIABLES: Field = Field::new(
    "variables",
    Optional,
    Spec::of(
        Type::Map {
            names: None,
            values: Some(&ENV_NAME_SPEC),
        },
        &[],
    ),
);
pub(crate) const SECRET_ENV: Field = Field::new(
    "secret_env",
    Optional,
    Spec::of(Type::Array(Some(&ENV_NAME_SPEC)), &[]).refused(Expected::Says(
        "expected an array of environment variable names",
    )),
);
pub(crate) const SANDBOX_ENV_SHAPE: Shape = Shape::of(&[&SANDBOX_MODE, &VARIABLES, &SECRET_ENV]);

pub(crate) const AUTHORIZATION: Field = Field::new(
    "authorization",
    Required,
    Spec::object(&AUTHORIZATION_SHAPE),
);
pub(crate) const AUTHORIZATION_MODE: Field = Field::new(
    "mode",
    Optional,
    Spec::string(&[Fact::OneOf(&["allowlist"], Refusal::List)]),
);
pub(crate) const FAILURE_STATUS: Field = Field::new(
    "failure_status",
    Optional,
    Spec::string(&[
        Fact::OneOf(&["denied", "unavailable"], Refusal::List),
        Fact::DefaultStr("denied"),
    ]),
);
pub(crate) const AUTHORIZATION_SHAPE: Shape = Shape::of(&[&AUTHORIZATION_MODE, &FAILURE_STATUS]);

pub const REDACTION: Field = Field::new("redaction", Required, Spec::object(&REDACTION_SHAPE));
pub(crate) const REDACTION_SHAPE: Shape = Shape::of(&[&Field::new(
    "transcript_artifact_refs",
    Optional,
    Spec::of(Type::Array(None), &[]).refused(Expected::Says("expected an array")),
)]);
pub(crate) const METADATA: Field = Field::new("metadata", Required, Spec::OBJECT);
/// The envelope.
pub const TOP: Shape = Shape::of(&[
    &SCHEMA,
    &VERSION,
    &ALLOWED_TOOLS,
    &DISPATCHER,
    &SANDBOX_ENV,
    &AUTHORIZATION,
    &REDACTION,
    &METADATA,
]);
