//! The description of an envelope's fields, as data: each member's key, JSON type, presence
//! and the facts the contract states about it (non-empty, at most N bytes, a constant, one of
//! some values, a pattern, a minimum, a default). The envelopes in `envelope/` define their
//! fields with these types once; the checks below read a field's description to check it
//! (over [`View`], so a tree and raw text are checked alike), and `schema.rs` reads the same
//! descriptions to write the published JSON Schemas.
//!
//! What data cannot say stays code in the envelope's check, over the same view: the echo of
//! the request, NUL bytes in argv and env values, which typed values are kept. The order in
//! which an envelope checks its fields is that code's too (the issues come out in that
//! order); a [`Shape`] lists its fields in the order the schema states them.
//!
//! Checking a field checks its own value: its type, its facts and, for an array, every item.
//! The members of an object-typed field are checked when its envelope asks
//! ([`Checker::check_shape`] for all of them in order, [`Checker::check`] one by one).

use super::{codes, join, Checker, Members, ObjectOf, StrOf, View};
use crate::json::Kind;

/// One member of an object.
#[derive(Debug)]
pub struct Field {
    pub key: &'static str,
    pub presence: Presence,
    pub spec: Spec,
}

/// Whether a member must be there.
#[derive(Debug)]
pub enum Presence {
    /// Absent is a `missing` issue.
    Required,
    /// Absent is fine.
    Optional,
    /// Required by the published schema (upstream requires it), but the dispatcher fills it in
    /// when an answer leaves it out: absent is fine.
    Filled,
    /// Required when the condition holds; absent otherwise is fine.
    When(&'static Condition),
}

/// "Required when member `when` (itself valid) is, or is not, `value`."
#[derive(Debug)]
pub struct Condition {
    /// The member the condition reads; it counts only when it passes its own checks.
    pub when: &'static Field,
    pub value: &'static str,
    /// True for "is not `value`".
    pub negated: bool,
    /// The `missing` issue's message.
    pub message: &'static str,
}

/// What a value must be.
#[derive(Debug)]
pub struct Spec {
    pub ty: Type,
    /// In the order the schema states them and the check checks them.
    pub facts: &'static [Fact],
    /// How a value of another type is refused, when not in the type's usual words.
    pub expected: Option<Expected>,
}

/// The JSON type of a value, with what it holds.
#[derive(Debug)]
pub enum Type {
    /// Anything (opaque payload): never looked into.
    Any,
    String,
    Boolean,
    Integer,
    /// An object with the members of a shape (`None`: any members).
    Object(Option<&'static Shape>),
    /// An object whose keys are names: each key matches `names`, each value is `values`.
    Map {
        names: Option<&'static Pattern>,
        values: Option<&'static Spec>,
    },
    /// An array, each item `items` (`None`: any items).
    Array(Option<&'static Spec>),
    /// An object described once, under the schema's `$defs/NAME`; checked against `shape`
    /// when there is one (`None`: the dispatcher's own part, which it replaces unread).
    Ref(&'static str, Option<&'static Shape>),
}

/// One fact the contract states about a value.
#[derive(Debug)]
pub enum Fact {
    /// The schema's `description` (no check).
    Doc(&'static str),
    /// A string is not empty (`minLength`), an array has items (`minItems`): `empty`.
    NonEmpty,
    /// An array's first item is a non-empty string (`prefixItems`): `empty` at `/0`.
    FirstNonEmpty,
    /// A string has at most this many bytes of UTF-8 (the schema's `maxLength`, which counts
    /// characters, is the same bound or looser): `too_long`. A value over the limit is
    /// still read on, so that later rules see it.
    MaxBytes(usize),
    /// The value travels to the adapter in an environment variable: no NUL (`contains_nul`),
    /// else at most this many bytes (`too_long`). Checked by [`Checker::passable`], once the
    /// fields read together have been read.
    Passable(Option<usize>),
    /// A string equal to this (`const`): `wrong_value`.
    Const(&'static str),
    /// An integer equal to this (`const`): `wrong_value`; any other type is `wrong_type`.
    ConstInt(u64),
    /// A string among these (`enum`, `const` for one): `wrong_value`, worded as `Refusal` says.
    OneOf(&'static [&'static str], Refusal),
    /// The one value the dispatcher acts on (`const` in the schema). Any well-formed value
    /// passes the check: another one is refused where it would be used.
    Supported(&'static str),
    /// An integer of at least this (`minimum`): `out_of_range`.
    Min(u64),
    /// A string matching a pattern, with its own issue code.
    Pattern(&'static Pattern),
    /// The value used when the member is absent (`default`; no check).
    DefaultStr(&'static str),
    /// The value used when the member is absent (`default`; no check).
    DefaultInt(u64),
}

/// How a value outside a [`Fact::OneOf`] is refused.
#[derive(Debug)]
pub enum Refusal {
    /// `"key" must be one of ["a", "b"], found "x"`.
    List,
    /// The message for the value found.
    Says(fn(&str) -> String),
}

/// How a value of the wrong type is refused.
#[derive(Debug)]
pub enum Expected {
    /// `expected PHRASE, found <its type>`.
    Found(&'static str),
    /// This whole message.
    Says(&'static str),
}

/// A rule on a string that JSON Schema states as a `pattern`.
#[derive(Debug)]
pub struct Pattern {
    /// The ECMA-262 regular expression the schema states.
    pub regex: &'static str,
    /// The issue code of a value that breaks it.
    pub code: &'static str,
    /// The rule as the product checks it.
    pub test: fn(&str) -> bool,
    /// The issue's message for the value found.
    pub message: fn(&str) -> String,
}

/// The members of an object type, in the order the schema lists them.
#[derive(Debug)]
pub struct Shape {
    pub fields: &'static [&'static Field],
    /// The fields whose presence is [`Presence::When`], in the order the schema's `allOf`
    /// states their conditions.
    pub conditional: &'static [&'static Field],
}

/// `version`: the integer 1 in every envelope (not `1.0` or `"1"`).
pub const VERSION: Field = Field::new(
    "version",
    Presence::Required,
    Spec::of(Type::Integer, &[Fact::ConstInt(1)]),
);

impl Spec {
    /// Any string.
    pub(crate) const STRING: Spec = Spec::string(&[]);
    /// Any object.
    pub(crate) const OBJECT: Spec = Spec::of(Type::Object(None), &[]);
    /// Anything (opaque payload).
    pub const ANY: Spec = Spec::of(Type::Any, &[]);

    /// A value of type `ty` with `facts`, refused in the type's usual words.
    pub const fn of(ty: Type, facts: &'static [Fact]) -> Spec {
        Spec {
            ty,
            facts,
            expected: None,
        }
    }

    /// A string with `facts`.
    pub const fn string(facts: &'static [Fact]) -> Spec {
        Spec::of(Type::String, facts)
    }

    /// An object of `shape`.
    pub const fn object(shape: &'static Shape) -> Spec {
        Spec::of(Type::Object(Some(shape)), &[])
    }

    /// The same, refused as `expected` says when of another type.
    pub const fn refused(self, expected: Expected) -> Spec {
        Spec {
            expected: Some(expected),
            ..self
        }
    }

    /// `expected …` for a value of another type, in the type's usual words.
    fn wanted(&self) -> String {
        match self.ty {
            Type::String => "a string".into(),
            Type::Boolean => "a boolean".into(),
            Type::Integer => match self.facts.iter().find_map(|f| match f {
                Fact::ConstInt(n) => Some(n),
                _ => None,
            }) {
                Some(n) => format!("the integer {n}"),
                None => "an integer".into(),
            },
            Type::Array(Some(Spec {
                ty: Type::String, ..
            })) => "an array of strings".into(),
            Type::Array(_) => "an array".into(),
            Type::Any | Type::Object(_) | Type::Map { .. } | Type::Ref(..) => "an object".into(),
        }
    }
}

impl Shape {
    /// The members `fields`, none of them conditional.
    pub const fn of(fields: &'static [&'static Field]) -> Shape {
        Shape {
            fields,
            conditional: &[],
        }
    }
}

impl Field {
    /// A field.
    pub const fn new(key: &'static str, presence: Presence, spec: Spec) -> Field {
        Field {
            key,
            presence,
            spec,
        }
    }

    /// Whether the schema lists it under `required`.
    pub fn schema_requires(&self) -> bool {
        matches!(self.presence, Presence::Required | Presence::Filled)
    }
}

impl Condition {
    /// Whether it holds in `obj`: its member is there, passes its own checks and is (or is
    /// not) the value.
    fn holds<'v>(&self, obj: impl Members<'v>) -> bool {
        let Some(value) = obj.member(self.when.key) else {
            return false;
        };
        let valid = Checker::new().check_value(value, "", self.when.key, &self.when.spec);
        valid
            && value
                .as_str()
                .is_some_and(|s| (*s == *self.value) != self.negated)
    }
}

impl Checker {
    /// Check member `field.key` of `obj` (at `base`) as `field` describes it, and return its
    /// value when it is present and passed.
    pub fn check<'v, O: Members<'v>>(
        &mut self,
        obj: O,
        base: &str,
        field: &Field,
    ) -> Option<O::Value> {
        let path = join(base, field.key);
        let Some(value) = obj.member(field.key) else {
            match field.presence {
                Presence::Required => self.missing(&path, field.key),
                Presence::When(condition) if condition.holds(obj) => {
                    self.push(codes::MISSING, path, condition.message);
                }
                Presence::When(_) | Presence::Optional | Presence::Filled => {}
            }
            return None;
        };
        self.check_value(value, &path, field.key, &field.spec)
            .then_some(value)
    }

    /// [`check`](Self::check) a string field and return the string.
    pub(crate) fn check_str<'v, O: Members<'v>>(
        &mut self,
        obj: O,
        base: &str,
        field: &Field,
    ) -> Option<StrOf<'v, O>> {
        self.check(obj, base, field)?.as_str()
    }

    /// [`check`](Self::check) an object field and return the object.
    pub fn check_object<'v, O: Members<'v>>(
        &mut self,
        obj: O,
        base: &str,
        field: &Field,
    ) -> Option<ObjectOf<'v, O>> {
        self.check(obj, base, field)?.as_object()
    }

    /// [`check`](Self::check) every field of `shape` in `obj`, in the shape's order.
    pub(crate) fn check_shape<'v>(&mut self, obj: impl Members<'v>, base: &str, shape: &Shape) {
        for field in shape.fields {
            self.check(obj, base, field);
        }
    }

    /// Check `value` (member `key`, at `path`) as `spec` describes it: its type, its facts in
    /// order, every item of an array, the members of a [`Type::Ref`] object.
    pub(crate) fn check_value<'v, V: View<'v>>(
        &mut self,
        value: V,
        path: &str,
        key: &str,
        spec: &Spec,
    ) -> bool {
        let of_type = match spec.ty {
            Type::Any => true,
            Type::String => match value.as_str() {
                Some(s) => return self.string_facts(&s, path, key, spec.facts),
                None => false,
            },
            Type::Boolean => value.as_bool().is_some(),
            Type::Integer => match value.integer() {
                Some(n) => return self.integer_facts(&n, path, key, spec.facts),
                None => false,
            },
            Type::Object(_) | Type::Map { .. } | Type::Ref(..) => value.kind() == Kind::Object,
            Type::Array(_) => value.kind() == Kind::Array,
        };
        if !of_type {
            match spec.expected {
                Some(Expected::Says(message)) => self.push(codes::WRONG_TYPE, path, message),
                Some(Expected::Found(want)) => self.wrong_type(path, want, value),
                None => self.wrong_type(path, &spec.wanted(), value),
            }
            return false;
        }
        match spec.ty {
            Type::Array(items) => self.array(value, path, key, items, spec.facts),
            Type::Ref(_, Some(shape)) => {
                if let Some(object) = value.as_object() {
                    self.check_shape(V::members(&object), path, shape);
                }
                true
            }
            _ => true,
        }
    }

    /// The facts of type [`Fact::Passable`] of `field` on its string `value` (at `base`).
    pub(crate) fn passable(&mut self, base: &str, field: &Field, value: &str) {
        let key = field.key;
        for fact in field.spec.facts {
            let Fact::Passable(max) = *fact else {
                continue;
            };
            if value.contains('\0') {
                self.push(
                    codes::CONTAINS_NUL,
                    join(base, key),
                    format!(
                        "{key:?} contains a NUL character, which cannot be passed to the adapter"
                    ),
                );
            } else if let Some(max) = max {
                self.max_bytes(value, &join(base, key), key, max);
            }
        }
    }

    fn missing(&mut self, path: &str, key: &str) {
        self.push(
            codes::MISSING,
            path,
            format!("required key {key:?} is missing"),
        );
    }

    fn max_bytes(&mut self, s: &str, path: &str, key: &str, max: usize) {
        if s.len() > max {
            self.push(
                codes::TOO_LONG,
                path,
                format!("{key:?} is {} bytes, over the {max}-byte limit", s.len()),
            );
        }
    }

    fn string_facts(&mut self, s: &str, path: &str, key: &str, facts: &[Fact]) -> bool {
        for fact in facts {
            let ok = match fact {
                Fact::NonEmpty => self.non_empty(s, path, key).is_some(),
                Fact::MaxBytes(max) => {
                    self.max_bytes(s, path, key, *max);
                    true
                }
                Fact::Const(want) => self.equal(s, path, key, want),
                Fact::OneOf(values, Refusal::List) => self.one_of(s, path, key, values).is_some(),
                Fact::OneOf(values, Refusal::Says(message)) => {
                    let ok = values.contains(&s);
                    if !ok {
                        self.push(codes::WRONG_VALUE, path, message(s));
                    }
                    ok
                }
                Fact::Pattern(pattern) => self.pattern(s, path, pattern),
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        true
    }

    fn integer_facts(&mut self, n: &str, path: &str, key: &str, facts: &[Fact]) -> bool {
        for fact in facts {
            let ok = match *fact {
                Fact::ConstInt(want) => {
                    let ok = n == want.to_string();
                    if !ok {
                        self.push(
                            codes::WRONG_VALUE,
                            path,
                            format!("{key:?} must be {want}, found {n}"),
                        );
                    }
                    ok
                }
                Fact::Min(min) => {
                    let ok = n.parse::<u64>().is_ok_and(|v| v >= min);
                    if !ok {
                        self.push(
                            codes::OUT_OF_RANGE,
                            path,
                            format!("{key:?} must be at least {min}, found {n}"),
                        );
                    }
                    ok
                }
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        true
    }

    /// Every item as `items` says (each its own issue), then the array's own facts: those are
    /// reported, and the items kept, so that the rules an envelope checks on the items
    /// (argv's NUL bytes) still run.
    fn array<'v, V: View<'v>>(
        &mut self,
        value: V,
        path: &str,
        key: &str,
        items: Option<&Spec>,
        facts: &[Fact],
    ) -> bool {
        let (mut count, mut first_empty, mut ok) = (0, false, true);
        value.each_item(|i, item| {
            if let Some(spec) = items {
                ok &= self.check_value(item, &format!("{path}/{i}"), key, spec);
            }
            if i == 0 {
                first_empty = item.as_str().is_some_and(|s| s.is_empty());
            }
            count += 1;
        });
        if !ok {
            return false;
        }
        for fact in facts {
            match fact {
                Fact::NonEmpty if count == 0 => {
                    self.push(codes::EMPTY, path, format!("{key:?} must not be empty"));
                }
                Fact::FirstNonEmpty if first_empty => {
                    self.push(
                        codes::EMPTY,
                        format!("{path}/0"),
                        format!("{key}[0] must not be empty"),
                    );
                }
                _ => continue,
            }
            break;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::raw::Fields;
    use crate::validate::{code_paths, Issue, ENV_NAME};
    use serde_json::Value;

    const NAME: Field = Field::new(
        "name",
        Presence::Required,
        Spec::string(&[Fact::NonEmpty, Fact::MaxBytes(4), Fact::Passable(None)]),
    );
    const KIND: Field = Field::new(
        "kind",
        Presence::Optional,
        Spec::string(&[Fact::OneOf(&["a", "b"], Refusal::List)]),
    );
    const LIMIT: Field = Field::new(
        "limit",
        Presence::Optional,
        Spec::of(Type::Integer, &[Fact::Min(2)]),
    );
    const ITEM: Shape = Shape::of(&[&Field::new(
        "var",
        Presence::Required,
        Spec::string(&[Fact::Pattern(&ENV_NAME)]),
    )]);
    const LIST: Field = Field::new(
        "list",
        Presence::Filled,
        Spec::of(
            Type::Array(Some(&Spec::of(Type::Ref("item", Some(&ITEM)), &[]))),
            &[Fact::NonEmpty],
        ),
    );
    const ARGS: Field = Field::new(
        "args",
        Presence::Optional,
        Spec::of(
            Type::Array(Some(&Spec::STRING)),
            &[Fact::NonEmpty, Fact::FirstNonEmpty],
        ),
    );
    const BODY: Field = Field::new("body", Presence::When(&UNLESS_A), Spec::OBJECT);
    const UNLESS_A: Condition = Condition {
        when: &KIND,
        value: "a",
        negated: true,
        message: "a kind other than \"a\" needs a body",
    };
    const SHAPE: Shape = Shape {
        fields: &[&VERSION, &NAME, &KIND, &LIMIT, &LIST, &ARGS, &BODY],
        conditional: &[&BODY],
    };

    /// The issues of `text` checked as a tree and as text: they must be the same.
    fn issues(text: &str) -> Vec<Issue> {
        let tree: Value = serde_json::from_str(text).unwrap();
        let mut c = Checker::new();
        c.check_shape(tree.as_object().unwrap(), "", &SHAPE);
        let from_tree = c.into_issues();
        let fields = Fields::parse(text).unwrap();
        let mut c = Checker::new();
        c.check_shape(&fields, "", &SHAPE);
        let from_text = c.into_issues();
        assert_eq!(from_tree, from_text, "{text}");
        from_tree
    }

    #[test]
    fn a_valid_document_has_no_issues_and_absent_optional_members_are_fine() {
        assert_eq!(issues(r#"{"version": 1, "name": "ok", "kind": "a"}"#), []);
        let full = r#"{"version": 1, "name": "ok", "kind": "b", "limit": 2,
            "list": [{"var": "A_1"}], "args": ["x", ""], "body": {}}"#;
        assert_eq!(issues(full), []);
    }

    #[test]
    fn every_fact_reports_its_own_issue_in_the_fields_order() {
        let text = r#"{"version": 1.0, "name": "toolong", "kind": "c", "limit": 1,
            "list": [], "args": [""]}"#;
        let got = issues(text);
        assert_eq!(
            code_paths(&got),
            [
                ("wrong_type", "/version"),
                ("too_long", "/name"),
                ("wrong_value", "/kind"),
                ("out_of_range", "/limit"),
                ("empty", "/list"),
                ("empty", "/args/0"),
            ]
        );
        let messages: Vec<&str> = got.iter().map(|i| i.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "expected the integer 1, found a number",
                "\"name\" is 7 bytes, over the 4-byte limit",
                "\"kind\" must be one of [\"a\", \"b\"], found \"c\"",
                "\"limit\" must be at least 2, found 1",
                "\"list\" must not be empty",
                "args[0] must not be empty",
            ]
        );
    }

    #[test]
    fn items_and_referenced_shapes_are_checked_each_at_its_path() {
        let text = r#"{"version": 2, "name": "", "list": [{"var": "1X"}, {}, 3],
            "args": "x"}"#;
        assert_eq!(
            code_paths(&issues(text)),
            [
                ("wrong_value", "/version"),
                ("empty", "/name"),
                ("invalid_env_name", "/list/0/var"),
                ("missing", "/list/1/var"),
                ("wrong_type", "/list/2"),
                ("wrong_type", "/args"),
            ]
        );
    }

    #[test]
    fn a_conditional_member_is_missing_only_when_its_condition_holds() {
        let got = issues(r#"{"version": 1, "name": "n", "kind": "b"}"#);
        assert_eq!(code_paths(&got), [("missing", "/body")]);
        assert_eq!(got[0].message, "a kind other than \"a\" needs a body");
        assert_eq!(issues(r#"{"version": 1, "name": "n"}"#), []);
        assert_eq!(
            code_paths(&issues(r#"{"version": 1, "name": "n", "kind": 5}"#)),
            [("wrong_type", "/kind")]
        );
    }

    #[test]
    fn passable_values_hold_no_nul() {
        let fields = Fields::parse(r#"{"name": "a\u0000"}"#).unwrap();
        let mut c = Checker::new();
        let name = c.check_str(&fields, "", &NAME).unwrap();
        c.passable("", &NAME, &name);
        let got = c.into_issues();
        assert_eq!(code_paths(&got), [("contains_nul", "/name")]);
        assert_eq!(
            got[0].message,
            "\"name\" contains a NUL character, which cannot be passed to the adapter"
        );
    }
}
