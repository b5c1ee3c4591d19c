//! The checker: collects every problem with its location, and reads TOML values as the types
//! the keys take. Each reader reports a wrong type at the value and returns `None`; nothing
//! here stops at the first problem or panics on any value.

use crate::model::Location;
use crate::problem::{Lines, Problem};
use std::ops::Range;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// A value as the parser gives it: with its byte span.
pub(crate) type Value<'i> = Spanned<DeValue<'i>>;
/// A key as the parser gives it.
pub(crate) type Key<'i> = Spanned<std::borrow::Cow<'i, str>>;

/// Where problems are collected.
#[derive(Debug)]
pub(crate) struct Checker<'t> {
    pub(crate) file: String,
    lines: Lines<'t>,
    pub(crate) problems: Vec<Problem>,
}

impl<'t> Checker<'t> {
    pub(crate) fn new(file: String, text: &'t str) -> Checker<'t> {
        Checker {
            file,
            lines: Lines::new(text),
            problems: Vec::new(),
        }
    }

    /// The location of the start of `span`.
    pub(crate) fn at(&self, span: &Range<usize>) -> Location {
        self.lines.locate(span.start)
    }

    /// A problem at the start of `span`.
    pub(crate) fn report(&mut self, span: &Range<usize>, message: impl Into<String>) {
        let at = self.at(span);
        self.report_at(at, message);
    }

    /// A problem at `at`.
    pub(crate) fn report_at(&mut self, at: Location, message: impl Into<String>) {
        self.problems.push(Problem::new(&self.file, at, message));
    }

    /// An unknown key, with the known key it most likely meant.
    pub(crate) fn unknown_key(&mut self, key: &Key<'_>, within: &str, known: &[&str]) {
        let name = key.get_ref().as_ref();
        let shown = escape(name);
        let message = match ptd_wire::validate::did_you_mean(name, known.iter().copied()) {
            Some(guess) => format!("unknown key `{shown}` in {within}: did you mean `{guess}`?"),
            None => format!(
                "unknown key `{shown}` in {within} (expected one of: {})",
                known.join(", ")
            ),
        };
        self.report(&key.span(), message);
    }

    fn wrong_type(&mut self, key: &str, value: &Value<'_>, expected: &str) {
        let found = a_type(value);
        self.report(
            &value.span(),
            format!("`{key}` must be {expected}, not {found}"),
        );
    }

    /// A string.
    pub(crate) fn string<'v>(&mut self, key: &str, value: &'v Value<'_>) -> Option<&'v str> {
        match value.get_ref() {
            DeValue::String(s) => Some(s.as_ref()),
            _ => {
                self.wrong_type(key, value, "a string");
                None
            }
        }
    }

    /// A non-empty string.
    pub(crate) fn nonempty<'v>(&mut self, key: &str, value: &'v Value<'_>) -> Option<&'v str> {
        let text = self.string(key, value)?;
        if text.is_empty() {
            self.report(&value.span(), format!("`{key}` must not be empty"));
            return None;
        }
        Some(text)
    }

    /// A boolean.
    pub(crate) fn boolean(&mut self, key: &str, value: &Value<'_>) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(key, value, "true or false");
                None
            }
        }
    }

    /// An integer, spelled in decimal as a command-line flag would take it (a negative one
    /// keeps its sign, for the flag's parser to refuse in its own words).
    pub(crate) fn integer_text(&mut self, key: &str, value: &Value<'_>) -> Option<String> {
        match value.get_ref() {
            DeValue::Integer(n) => match i128::from_str_radix(n.as_str(), n.radix()) {
                Ok(n) => Some(n.to_string()),
                Err(_) => {
                    self.report(&value.span(), format!("`{key}` is too large"));
                    None
                }
            },
            _ => {
                self.wrong_type(key, value, "an integer");
                None
            }
        }
    }

    /// A whole number of at least `min`.
    pub(crate) fn whole(&mut self, key: &str, value: &Value<'_>, min: u64) -> Option<u64> {
        let text = self.integer_text(key, value)?;
        match text.parse::<u64>() {
            Ok(n) if n >= min => Some(n),
            _ => {
                let message =
                    format!("`{key}` must be a whole number of at least {min}, not {text}");
                self.report(&value.span(), message);
                None
            }
        }
    }

    /// A size: a string as the flag takes it (`512M`), or an integer (bytes).
    pub(crate) fn size_text(&mut self, key: &str, value: &Value<'_>) -> Option<String> {
        match value.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            DeValue::Integer(_) => self.integer_text(key, value),
            _ => {
                self.wrong_type(key, value, "a size such as \"512M\" or an integer (bytes)");
                None
            }
        }
    }

    /// An array of strings, each reported where it is written when it is not one.
    pub(crate) fn strings<'v>(
        &mut self,
        key: &str,
        value: &'v Value<'_>,
    ) -> Option<Vec<(&'v str, Range<usize>)>> {
        let DeValue::Array(items) = value.get_ref() else {
            self.wrong_type(key, value, "an array of strings");
            return None;
        };
        // An item of another type is reported and left out: the rest are still checked.
        let mut out = Vec::with_capacity(items.len());
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => out.push((s.as_ref(), item.span())),
                _ => self.wrong_type(key, item, "an array of strings: this item"),
            }
        }
        Some(out)
    }

    /// An argv: a non-empty array of strings whose first is not empty.
    pub(crate) fn argv(&mut self, key: &str, value: &Value<'_>) -> Option<Vec<String>> {
        let items = self.strings(key, value)?;
        let written = match value.get_ref() {
            DeValue::Array(all) => all.len(),
            _ => 0,
        };
        if items.len() != written {
            // An item that is not a string: reported already.
            return None;
        }
        match items.first() {
            None => {
                let message = format!("`{key}` is an empty argv: it needs at least the program");
                self.report(&value.span(), message);
                None
            }
            Some(("", span)) => {
                self.report(span, format!("`{key}`: the program name is empty"));
                None
            }
            Some(_) => Some(items.iter().map(|(s, _)| (*s).to_string()).collect()),
        }
    }

    /// Variable names: an array of strings, each non-empty without `=` or NUL.
    pub(crate) fn var_names(&mut self, key: &str, value: &Value<'_>) -> Option<Vec<String>> {
        self.strings_that(
            key,
            value,
            is_var_name,
            "a variable name (non-empty, without `=`)",
        )
    }

    /// An array of strings each of which passes `fine`; every one that does not is reported
    /// as "`KEY`: `ITEM` is not WHAT", at the item.
    pub(crate) fn strings_that(
        &mut self,
        key: &str,
        value: &Value<'_>,
        fine: fn(&str) -> bool,
        what: &str,
    ) -> Option<Vec<String>> {
        let items = self.strings(key, value)?;
        let mut all = true;
        for (item, span) in &items {
            if !fine(item) {
                let message = format!("`{key}`: `{}` is not {what}", escape(item));
                self.report(span, message);
                all = false;
            }
        }
        all.then(|| items.iter().map(|(s, _)| (*s).to_string()).collect())
    }

    /// A table.
    pub(crate) fn table<'v, 'i>(
        &mut self,
        key: &str,
        value: &'v Value<'i>,
    ) -> Option<&'v DeTable<'i>> {
        match value.get_ref() {
            DeValue::Table(table) => Some(table),
            _ => {
                self.wrong_type(key, value, "a table");
                None
            }
        }
    }
}

/// A value's type with its article, for messages: "an integer", "a string".
pub(crate) fn a_type(value: &Value<'_>) -> String {
    let found = value.get_ref().type_str();
    let article = if found.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {found}")
}

/// A variable name the environment can carry.
pub(crate) fn is_var_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['=', '\0'])
}

/// Text from the file, safe to show on a terminal.
pub(crate) fn escape(text: &str) -> String {
    ptd_wire::terminal::escape(text).to_string()
}
