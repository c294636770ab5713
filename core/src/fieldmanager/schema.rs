//! What structured-merge-diff needs to know of a type, read from the OpenAPI v3 schema the server publishes for the
//! version (as kube-openapi's `schemaconv` does): which objects are structs (declared fields) and which are maps,
//! which lists are atomic, sets or maps by key (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, else a
//! `merge` patch strategy), and which maps are atomic (`x-kubernetes-map-type`). Parts without a schema
//! (`x-kubernetes-preserve-unknown-fields`) are deduced from the value: maps merge, lists are atomic.

use serde_json::{Map, Value};

/// A schema node, or none (deduced from the value).
#[derive(Clone, Copy, Debug)]
pub struct TypeRef<'a>(pub Option<&'a Value>);

/// How a list merges, from `x-kubernetes-list-type` (or a `merge` patch strategy).
#[derive(Clone, Debug, PartialEq)]
pub enum ListKind<'a> {
    /// Replaced as a whole; items are named by index (`i:`).
    Atomic,
    /// A set of scalars, each item its own path (`v:`).
    Set,
    /// Items identified by these key fields (`k:`).
    Map(Vec<&'a str>),
}

/// The shape of a schema node: a scalar, a list or a map.
#[derive(Clone, Debug)]
pub enum Atom<'a> {
    /// A string, number, boolean or null: owned as a whole.
    Scalar,
    /// A list.
    List {
        /// The type of its items.
        items: TypeRef<'a>,
        /// How it merges.
        kind: ListKind<'a>,
    },
    /// A struct (declared `fields`) or a map (`elements`), or both.
    Map {
        /// The declared fields (`properties`), if any.
        fields: Option<&'a Map<String, Value>>,
        /// The type of entries that are not declared fields (`additionalProperties`).
        elements: TypeRef<'a>,
        /// `x-kubernetes-map-type: atomic`: replaced as a whole.
        atomic: bool,
    },
}

impl<'a> TypeRef<'a> {
    /// No schema: the shape is deduced from the value.
    pub const DEDUCED: TypeRef<'static> = TypeRef(None);

    /// The schema itself, looking through `allOf`/`anyOf`/`oneOf` wrappers (nullable fields).
    fn resolved(&self) -> Option<&'a Value> {
        let schema = self.0?;
        let is_typed = |s: &Value| {
            ["properties", "items", "additionalProperties", "type"]
                .iter()
                .any(|k| s.get(*k).is_some())
        };
        if is_typed(schema) {
            return Some(schema);
        }
        ["allOf", "anyOf", "oneOf"]
            .iter()
            .find_map(|key| schema.get(*key)?.as_array()?.iter().find(|s| is_typed(s)))
    }

    /// What the node is; `value` decides where the schema does not.
    pub fn atom(&self, value: Option<&Value>) -> Atom<'a> {
        let Some(schema) = self.resolved() else {
            return deduce(value);
        };
        let extension = |name: &str| schema.get(name).and_then(Value::as_str);
        let properties = schema.get("properties").and_then(Value::as_object);
        match schema.get("type").and_then(Value::as_str) {
            Some("array") => Atom::List {
                items: TypeRef(schema.get("items")),
                kind: list_kind(schema),
            },
            Some("object") | None
                if properties.is_some() || schema.get("additionalProperties").is_some() =>
            {
                let elements = match schema.get("additionalProperties") {
                    Some(Value::Object(s)) if !s.is_empty() => {
                        TypeRef(schema.get("additionalProperties"))
                    }
                    _ => TypeRef::DEDUCED,
                };
                Atom::Map {
                    fields: properties,
                    elements,
                    atomic: extension("x-kubernetes-map-type") == Some("atomic"),
                }
            }
            Some("object") => match value {
                Some(Value::Object(_)) | None => Atom::Map {
                    fields: None,
                    elements: TypeRef::DEDUCED,
                    atomic: extension("x-kubernetes-map-type") == Some("atomic"),
                },
                other => deduce(other),
            },
            Some(_) => Atom::Scalar,
            None => deduce(value),
        }
    }

    /// The declared fields of a struct that allows no others (no `additionalProperties`, no
    /// `x-kubernetes-preserve-unknown-fields`).
    pub fn closed_fields(&self) -> Option<&'a Map<String, Value>> {
        let schema = self.resolved()?;
        let open = schema.get("additionalProperties").is_some()
            || schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        if open {
            return None;
        }
        schema.get("properties").and_then(Value::as_object)
    }

    /// The type of a map's entry `key`, and whether it is a declared (struct) field.
    pub fn field(
        fields: Option<&'a Map<String, Value>>,
        elements: TypeRef<'a>,
        key: &str,
    ) -> (TypeRef<'a>, bool) {
        match fields.and_then(|f| f.get(key)) {
            Some(schema) => (TypeRef(Some(schema)), true),
            None => (elements, false),
        }
    }
}

fn deduce(value: Option<&Value>) -> Atom<'static> {
    match value {
        Some(Value::Object(_)) => Atom::Map {
            fields: None,
            elements: TypeRef::DEDUCED,
            atomic: false,
        },
        Some(Value::Array(_)) => Atom::List {
            items: TypeRef::DEDUCED,
            kind: ListKind::Atomic,
        },
        _ => Atom::Scalar,
    }
}

fn list_kind(schema: &Value) -> ListKind<'_> {
    let extension = |name: &str| schema.get(name).and_then(Value::as_str);
    match extension("x-kubernetes-list-type") {
        Some("set") => return ListKind::Set,
        Some("map") => {
            let keys = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|keys| keys.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            return ListKind::Map(keys);
        }
        Some(_) => return ListKind::Atomic,
        None => {}
    }
    let merges = extension("x-kubernetes-patch-strategy")
        .is_some_and(|s| s.split(',').any(|s| s == "merge"));
    match extension("x-kubernetes-patch-merge-key") {
        Some(key) if merges => ListKind::Map(vec![key]),
        None if merges => ListKind::Set,
        _ => ListKind::Atomic,
    }
}
