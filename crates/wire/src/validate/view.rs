//! One view of a JSON value, whichever way it was read: the checker asks a value its kind, its
//! string, its members or its items through [`View`] and [`Members`], and the same checks run
//! on a parsed tree (`&serde_json::Value`, for the small documents read whole: the bridge,
//! case files, the reference adapters' requests) and on JSON text looked into one level at a
//! time (`&str` of text the strict reader accepted, with [`Fields`] for objects: the request
//! and the result, whose opaque `input`/`output` must never become trees).
//!
//! Each representation answers with its own reading of numbers ([`View::integer`]): a tree
//! knows what serde_json made of the digits, text knows only the digits as written.

use crate::json::raw::{self, Fields};
use crate::json::Kind;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::ops::Deref;

/// A JSON value, as a tree or as text.
pub trait View<'v>: Copy {
    /// A string value: borrowed from a tree, decoded from text (borrowed unless it had escapes).
    type Str: Deref<Target = str>;
    /// An object value.
    type Object;
    /// How [`View::members`] sees an object.
    type Members<'o>: Members<'v, Value = Self>
    where
        Self: 'o;

    /// Its JSON type.
    fn kind(self) -> Kind;

    /// The string, when it is one.
    fn as_str(self) -> Option<Self::Str>;

    /// The boolean, when it is one.
    fn as_bool(self) -> Option<bool>;

    /// The object, when it is one.
    fn as_object(self) -> Option<Self::Object>;

    /// The members of an object [`View::as_object`] returned.
    fn members(object: &Self::Object) -> Self::Members<'_>;

    /// The integer as this representation spells it, when it is one: a tree's integer (what
    /// serde_json reads as an `i64` or `u64`) as serde_json prints it; text's `-?[0-9]+` as
    /// written.
    fn integer(self) -> Option<Cow<'v, str>>;

    /// Call `each` with the index and value of every item; false when it is not an array.
    fn each_item(self, each: impl FnMut(usize, Self)) -> bool;
}

/// The members of a JSON object, in document order: `&Map` of a tree, `&Fields` of text.
pub trait Members<'v>: Copy {
    /// The values' representation.
    type Value: View<'v>;

    /// The value of `key`, if present.
    fn member(self, key: &str) -> Option<Self::Value>;

    /// Call `each` with every key and value, in document order.
    fn each_member(self, each: impl FnMut(&str, Self::Value));
}

impl<'v> View<'v> for &'v Value {
    type Str = &'v str;
    type Object = &'v Map<String, Value>;
    type Members<'o>
        = &'v Map<String, Value>
    where
        Self: 'o;

    fn kind(self) -> Kind {
        match self {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }

    fn as_str(self) -> Option<&'v str> {
        Value::as_str(self)
    }

    fn as_bool(self) -> Option<bool> {
        Value::as_bool(self)
    }

    fn as_object(self) -> Option<&'v Map<String, Value>> {
        Value::as_object(self)
    }

    fn members<'o>(object: &'o &'v Map<String, Value>) -> &'v Map<String, Value> {
        object
    }

    fn integer(self) -> Option<Cow<'v, str>> {
        match self {
            Value::Number(n) if n.is_u64() || n.is_i64() => Some(Cow::Owned(n.to_string())),
            _ => None,
        }
    }

    fn each_item(self, mut each: impl FnMut(usize, Self)) -> bool {
        let Value::Array(items) = self else {
            return false;
        };
        for (i, item) in items.iter().enumerate() {
            each(i, item);
        }
        true
    }
}

impl<'v> Members<'v> for &'v Map<String, Value> {
    type Value = &'v Value;

    fn member(self, key: &str) -> Option<&'v Value> {
        self.get(key)
    }

    fn each_member(self, mut each: impl FnMut(&str, &'v Value)) {
        for (key, value) in self {
            each(key, value);
        }
    }
}

/// Text the strict reader accepted (or the crate wrote), one value.
impl<'v> View<'v> for &'v str {
    type Str = Cow<'v, str>;
    type Object = Fields<'v>;
    type Members<'o>
        = &'o Fields<'v>
    where
        Self: 'o;

    fn kind(self) -> Kind {
        Kind::of(self)
    }

    fn as_str(self) -> Option<Cow<'v, str>> {
        raw::string(self)
    }

    fn as_bool(self) -> Option<bool> {
        raw::boolean(self)
    }

    fn as_object(self) -> Option<Fields<'v>> {
        Fields::parse(self)
    }

    fn members<'o>(object: &'o Fields<'v>) -> &'o Fields<'v> {
        object
    }

    fn integer(self) -> Option<Cow<'v, str>> {
        let text = self.trim();
        let digits = text.strip_prefix('-').unwrap_or(text);
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then_some(Cow::Borrowed(text))
    }

    fn each_item(self, each: impl FnMut(usize, Self)) -> bool {
        raw::for_each_item(self, each)
    }
}

impl<'v> Members<'v> for &Fields<'v> {
    type Value = &'v str;

    fn member(self, key: &str) -> Option<&'v str> {
        self.get(key)
    }

    fn each_member(self, mut each: impl FnMut(&str, &'v str)) {
        for (key, value) in self.iter() {
            each(key, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both views of the same document answer alike.
    #[test]
    fn a_tree_and_its_text_are_seen_alike() {
        let text = r#"{"s": "a\nb", "b": true, "o": {"k": 1}, "a": [1, "x"], "n": null, "i": -7, "f": 1.5}"#;
        let tree: Value = serde_json::from_str(text).unwrap();
        let parsed = Fields::parse(text).unwrap();
        let fields = &parsed;
        let map = tree.as_object().unwrap();
        for key in ["s", "b", "o", "a", "n", "i", "f"] {
            let (t, r) = (map.member(key).unwrap(), fields.member(key).unwrap());
            assert_eq!(t.kind(), r.kind(), "{key}");
            assert_eq!(t.as_str(), View::as_str(r).as_deref(), "{key}");
            assert_eq!(t.as_bool(), r.as_bool(), "{key}");
            assert_eq!(t.integer(), r.integer(), "{key}");
            assert_eq!(t.as_object().is_some(), r.as_object().is_some(), "{key}");
            let (mut ti, mut ri) = (Vec::new(), Vec::new());
            assert_eq!(
                t.each_item(|i, v| ti.push((i, v.kind()))),
                r.each_item(|i, v| ri.push((i, v.kind())))
            );
            assert_eq!(ti, ri, "{key}");
        }
        let (mut tk, mut rk) = (Vec::new(), Vec::new());
        map.each_member(|k, _| tk.push(k.to_string()));
        fields.each_member(|k, _| rk.push(k.to_string()));
        assert_eq!(tk, rk);
    }

    /// Where the readings differ, each keeps its own: text does not know what serde_json would
    /// make of digits it cannot hold.
    #[test]
    fn integers_are_read_as_each_representation_reads_them() {
        let big = "99999999999999999999999";
        let tree: Value = serde_json::from_str(big).unwrap();
        assert_eq!((&tree).integer(), None);
        assert_eq!(big.integer().as_deref(), Some(big));
        assert_eq!(" 1 ".integer().as_deref(), Some("1"));
        assert_eq!("1.0".integer(), None);
        assert_eq!("-".integer(), None);
    }
}
