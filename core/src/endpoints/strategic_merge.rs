//! Strategic merge patch (`application/strategic-merge-patch+json`), applied to a JSON document as k8s.io/apimachinery
//! `strategicpatch.StrategicMergeMapPatch` does on the server: maps merge key by key, `null` deletes, primitives
//! replace, and a list merges only where the schema says so (`x-kubernetes-patch-strategy: merge`, by
//! `x-kubernetes-patch-merge-key` for lists of objects, as a set for lists of primitives); every other list is
//! replaced whole. The directives: `$patch: replace|delete` in a map, `$patch: replace|delete` elements in a merging
//! list, `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` and `$retainKeys`.
//!
//! The patch metadata is read from the OpenAPI v3 schema the server publishes for the version (the schema kubectl
//! reads to compute its patches), so what a client computes with and what the server applies cannot differ.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value};

const DIRECTIVE: &str = "$patch";
const DELETE: &str = "delete";
const REPLACE: &str = "replace";
const MERGE: &str = "merge";
const RETAIN_KEYS_STRATEGY: &str = "retainKeys";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

/// Why a strategic merge patch could not be applied, with upstream's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrategicMergeError {
    /// A malformed directive (upstream's `mergepatch.ErrBadPatchFormatFor*`, `ErrBadJSONDoc`): 400 upstream.
    #[error("{0}")]
    BadRequest(String),
    /// A patch whose content does not fit the document or the schema: 422 upstream for lists of lists; upstream
    /// answers the others (unknown directives, missing merge keys, mixed element types) with a 500.
    #[error("{0}")]
    Invalid(String),
}

type Result<T> = std::result::Result<T, StrategicMergeError>;

/// A JSON value as a hash key, so that list elements are found by key in constant time rather than by a scan
/// (a list of n elements would otherwise cost n²). Equal values hash alike; lists and maps hash by size only, as
/// they rarely key a list.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Keyed<'a>(&'a Value);

impl Hash for Keyed<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self.0).hash(state);
        match self.0 {
            Value::Null => {}
            Value::Bool(b) => b.hash(state),
            Value::Number(n) => n.hash(state),
            Value::String(s) => s.hash(state),
            Value::Array(items) => items.len().hash(state),
            Value::Object(map) => map.len().hash(state),
        }
    }
}

/// The index of the first element of `list` with each merge key value (each value, for primitives): what
/// [`position`] finds by a scan, found by a hash lookup.
struct Positions<'a>(HashMap<Option<Keyed<'a>>, usize>);

impl<'a> Positions<'a> {
    fn new(list: &'a [Value], merge_key: &str, kind: ElementKind) -> Self {
        let mut map = HashMap::with_capacity(list.len());
        for (i, v) in list.iter().enumerate() {
            let key = match kind {
                ElementKind::Object => v.get(merge_key),
                ElementKind::Primitive => Some(v),
            };
            map.entry(key.map(Keyed)).or_insert(i);
        }
        Positions(map)
    }

    fn of(&self, item: &Value, merge_key: &str, kind: ElementKind) -> Option<usize> {
        let key = match kind {
            ElementKind::Object => item.get(merge_key),
            ElementKind::Primitive => Some(item),
        };
        self.0.get(&key.map(Keyed)).copied()
    }
}

/// A JSON value owned as a hash key (see [`Keyed`]).
struct OwnedKey(Value);

impl PartialEq for OwnedKey {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for OwnedKey {}

impl Hash for OwnedKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Keyed(&self.0).hash(state);
    }
}

/// The elements of a list of maps by merge key value, answering as a scan from the start would: the first element
/// with the value, or the error of the first element that is not a map, whichever comes first.
struct ByKey {
    first: HashMap<OwnedKey, usize>,
    not_a_map: Option<usize>,
}

impl ByKey {
    fn new(list: &[Value], merge_key: &str) -> Self {
        let mut first = HashMap::with_capacity(list.len());
        let mut not_a_map = None;
        for (i, item) in list.iter().enumerate() {
            match item {
                Value::Object(map) => {
                    if let Some(value) = map.get(merge_key) {
                        first.entry(OwnedKey(value.clone())).or_insert(i);
                    }
                }
                _ => {
                    not_a_map = Some(i);
                    break;
                }
            }
        }
        ByKey { first, not_a_map }
    }

    /// Records a map with this key value appended at `at`.
    fn append(&mut self, value: &Value, at: usize) {
        self.first.entry(OwnedKey(value.clone())).or_insert(at);
    }

    fn find(&self, value: &Value) -> Result<Option<usize>> {
        match (
            self.first.get(&OwnedKey(value.clone())).copied(),
            self.not_a_map,
        ) {
            (Some(i), Some(bad)) if bad < i => Err(not_a_map_at(bad)),
            (Some(i), _) => Ok(Some(i)),
            (None, Some(bad)) => Err(not_a_map_at(bad)),
            (None, None) => Ok(None),
        }
    }
}

fn not_a_map_at(i: usize) -> StrategicMergeError {
    invalid(format!("value for key {i} is not a map"))
}

fn invalid(message: impl Into<String>) -> StrategicMergeError {
    StrategicMergeError::Invalid(message.into())
}

fn bad_format_primitive_list() -> StrategicMergeError {
    StrategicMergeError::BadRequest("invalid patch format of primitive list".into())
}

fn bad_format_retain_keys() -> StrategicMergeError {
    StrategicMergeError::BadRequest("invalid patch format of retainKeys".into())
}

fn bad_format_set_element_order() -> StrategicMergeError {
    StrategicMergeError::BadRequest("invalid patch format of setElementOrder list".into())
}

fn no_list_of_lists() -> StrategicMergeError {
    invalid("lists of lists are not supported")
}

fn no_merge_key(map: &Map<String, Value>, key: &str) -> StrategicMergeError {
    invalid(format!(
        "map: {} does not contain declared merge key: {key}",
        go_format_map(map)
    ))
}

fn bad_patch_type(directive: &Value, map: &Map<String, Value>) -> StrategicMergeError {
    invalid(format!(
        "unknown patch type: {} in map: {}",
        go_format_s(directive),
        go_format_map(map)
    ))
}

fn bad_arg_type(expected: &str, actual: &Value) -> StrategicMergeError {
    invalid(format!(
        "expected a {expected}, but received a {}",
        go_type(actual)
    ))
}

const GO_MAP: &str = "map[string]interface {}";
const GO_SLICE: &str = "[]interface {}";

/// The Go type a decoded JSON value has upstream, as `reflect.TypeOf` prints it.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "%!s(<nil>)",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => GO_SLICE,
        Value::Object(_) => GO_MAP,
    }
}

/// A value as Go's `%v` prints a decoded JSON value (`map[a:1 b:[x y]]`).
fn go_format(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_format).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => go_format_map(map),
        other => other.to_string(),
    }
}

fn go_format_map(map: &Map<String, Value>) -> String {
    let fields: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k}:{}", go_format(v)))
        .collect();
    format!("map[{}]", fields.join(" "))
}

/// Go's `%s` of a value that should have been a string.
fn go_format_s(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => format!("%!s({}={})", go_type(other), go_format(other)),
    }
}

/// Where a field's patch metadata comes from: the OpenAPI v3 schema of the field (its `properties`, `items` and
/// `additionalProperties`, with `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key` beside them). A
/// part of the document the schema does not describe has no metadata: maps merge, lists are replaced.
#[derive(Clone, Copy, Debug)]
pub struct PatchSchema<'a> {
    schema: Option<&'a Value>,
    /// The field name, for the one error text that names it.
    name: &'a str,
}

impl<'a> PatchSchema<'a> {
    /// The schema of a whole object, e.g. a served version's `openapi_schema()`.
    pub fn new(schema: &'a Value) -> Self {
        PatchSchema {
            schema: Some(schema),
            name: "",
        }
    }

    /// No metadata anywhere: every list is replaced, every map merges (a JSON merge patch with directives).
    pub fn none() -> Self {
        PatchSchema {
            schema: None,
            name: "",
        }
    }

    /// The schema itself, or the first alternative that describes something when it is a wrapper
    /// (`allOf`/`anyOf`/`oneOf`, as generators emit for references and nullable fields).
    fn resolved(&self) -> Option<&'a Value> {
        let mut schema = self.schema?;
        for _ in 0..8 {
            let Value::Object(map) = schema else {
                return None;
            };
            if ["properties", "items", "additionalProperties", "type"]
                .iter()
                .any(|k| map.contains_key(*k))
            {
                return Some(schema);
            }
            let next = ["allOf", "anyOf", "oneOf"].iter().find_map(|k| {
                map.get(*k)?.as_array()?.iter().find(|s| {
                    s.get("type").and_then(Value::as_str) != Some("null")
                        && s.as_object().is_some_and(|m| !m.is_empty())
                })
            });
            schema = next?;
        }
        None
    }

    /// The schema of field `key` of this object (a declared property, else the map's value schema).
    fn field(&self, key: &'a str) -> PatchSchema<'a> {
        let resolved = self.resolved();
        let schema = resolved
            .and_then(|s| s.get("properties"))
            .and_then(|p| p.get(key))
            .or_else(|| {
                resolved
                    .and_then(|s| s.get("additionalProperties"))
                    .filter(|a| a.is_object())
            });
        PatchSchema { schema, name: key }
    }

    /// The schema of this list's elements.
    fn items(&self) -> PatchSchema<'a> {
        PatchSchema {
            schema: self.resolved().and_then(|s| s.get("items")),
            name: self.name,
        }
    }

    /// The extension on the field's own schema (or on the wrapper around it).
    fn extension(&self, name: &str) -> Option<&'a str> {
        self.schema
            .and_then(|s| s.get(name))
            .or_else(|| self.resolved().and_then(|s| s.get(name)))
            .and_then(Value::as_str)
    }

    fn merge_key(&self) -> &'a str {
        self.extension("x-kubernetes-patch-merge-key")
            .unwrap_or_default()
    }

    /// The strategy other than `retainKeys` (upstream's `extractRetainKeysPatchStrategy`).
    fn strategy(&self) -> Result<&'a str> {
        let Some(strategies) = self.extension("x-kubernetes-patch-strategy") else {
            return Ok("");
        };
        let strategies: Vec<&str> = strategies.split(',').collect();
        match strategies.as_slice() {
            [one] if *one == RETAIN_KEYS_STRATEGY => Ok(""),
            [one] => Ok(one),
            [a, b] if *a == RETAIN_KEYS_STRATEGY => Ok(b),
            [a, b] if *b == RETAIN_KEYS_STRATEGY => Ok(a),
            _ => Err(invalid(format!(
                "unexpected patch strategy: [{}]",
                strategies.join(" ")
            ))),
        }
    }
}

/// Applies strategic merge patch `patch` to `original`, both JSON objects. The document is changed only in the
/// returned value: on an error nothing is half-applied for the caller.
pub fn apply(original: Value, patch: Value, schema: PatchSchema<'_>) -> Result<Value> {
    let Value::Object(original) = original else {
        return Err(StrategicMergeError::BadRequest(
            "invalid JSON document".into(),
        ));
    };
    let Value::Object(patch) = patch else {
        return Err(StrategicMergeError::BadRequest(
            "invalid JSON document".into(),
        ));
    };
    merge_map(original, patch, schema).map(Value::Object)
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: PatchSchema<'_>,
) -> Result<Map<String, Value>> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some(REPLACE) => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some(DELETE) => Ok(Map::new()),
            _ => Err(bad_patch_type(directive, &patch)),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_set_element_order(&mut original, &mut patch, schema)?;

    for (key, patch_value) in patch {
        let (key, delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
            (
                extract_key(&key, DELETE_FROM_PRIMITIVE_LIST)?.to_string(),
                true,
            )
        } else {
            (key, false)
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(original_value) = original.remove(&key) else {
            if !delete_list {
                insert_patch_value(&mut original, key, patch_value);
            }
            continue;
        };
        if std::mem::discriminant(&original_value) != std::mem::discriminant(&patch_value) {
            if delete_list {
                original.insert(key, original_value);
            } else {
                insert_patch_value(&mut original, key, patch_value);
            }
            continue;
        }
        let field = schema.field(&key);
        match (original_value, patch_value) {
            (Value::Object(o), Value::Object(p)) => {
                let merged = if field.strategy()? == REPLACE {
                    p
                } else {
                    merge_map(o, p, field)?
                };
                original.insert(key, Value::Object(merged));
            }
            (Value::Array(o), Value::Array(p)) => {
                let strategy = field.strategy()?;
                let merged = if strategy == MERGE || delete_list {
                    merge_list(o, p, field, delete_list)?
                } else {
                    p
                };
                original.insert(key, Value::Array(merged));
            }
            (_, p) => {
                if let Some(v) = remove_directives(p) {
                    original.insert(key, v);
                }
            }
        }
    }
    Ok(original)
}

/// A value the original does not have (or has with another type) is taken from the patch without its `null`s and
/// directives.
fn insert_patch_value(original: &mut Map<String, Value>, key: String, mut value: Value) {
    discard_nulls(&mut value);
    if let Some(value) = remove_directives(value) {
        original.insert(key, value);
    }
}

fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(discard_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// Drops every map carrying `$patch` and keeps the rest; `None` when `value` itself is such a map.
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if map.contains_key(DIRECTIVE) {
                return None;
            }
            Some(Value::Object(
                map.into_iter()
                    .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                    .collect(),
            ))
        }
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// `$deleteFromPrimitiveList/field` → `field`.
fn extract_key<'k>(key: &'k str, prefix: &str) -> Result<&'k str> {
    match key.split_once('/') {
        Some((p, rest)) if p == prefix => Ok(rest),
        _ if prefix == DELETE_FROM_PRIMITIVE_LIST => Err(bad_format_primitive_list()),
        _ => Err(bad_format_set_element_order()),
    }
}

/// `$retainKeys: [a, b]`: every key of the original not listed goes; every key the patch sets must be listed.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(bad_format_retain_keys());
    };
    let retain: HashSet<&str> = retain.iter().filter_map(Value::as_str).collect();
    let retained = |key: &str| retain.contains(key);
    for (key, value) in patch.iter() {
        if value.is_null()
            || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || key.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !retained(key) {
            return Err(bad_format_retain_keys());
        }
    }
    original.retain(|key, _| retained(key));
    Ok(())
}

/// `$setElementOrder/field`: merges the field's list (if the patch has one) and then orders the result: the
/// listed elements in the given order, the server's other elements where they were relative to them.
fn merge_set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: PatchSchema<'_>,
) -> Result<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for key in keys {
        let Some(order) = patch.remove(&key) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(bad_arg_type(GO_SLICE, &order));
        };
        let field_key = extract_key(&key, SET_ELEMENT_ORDER)?.to_string();
        let original_list = match original.get(&field_key) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => return Err(bad_arg_type(GO_SLICE, other)),
        };
        let patch_list = match patch.get(&field_key) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => return Err(bad_arg_type(GO_SLICE, other)),
        };
        let field = schema.field(&field_key);
        let strategy = field.strategy()?;
        let merge_key = field.merge_key();
        validate_against_order(patch_list.as_deref().unwrap_or_default(), &order, merge_key)?;
        let merged = match (&original_list, &patch_list) {
            (Some(o), None) => o.clone(),
            (None, Some(p)) => match remove_directives(Value::Array(p.clone())) {
                Some(Value::Array(items)) => items,
                _ => continue,
            },
            (Some(o), Some(p)) => {
                if strategy == MERGE {
                    merge_list(o.clone(), p.clone(), field, false)?
                } else {
                    p.clone()
                }
            }
            (None, None) => continue,
        };
        let (patch_items, server_only) = partition(merged, &order, merge_key)?;
        let original_list = original_list.unwrap_or_default();
        let kind = element_kind(&[&original_list, patch_list.as_deref().unwrap_or_default()])?;
        let ordered = normalize_order(
            patch_items,
            server_only,
            &order,
            &original_list,
            merge_key,
            kind,
        )?;
        original.insert(field_key.clone(), Value::Array(ordered));
        patch.remove(&field_key);
    }
    Ok(())
}

/// The patch's list must follow the relative order of `$setElementOrder` (deletions aside).
fn validate_against_order(patch: &[Value], order: &[Value], merge_key: &str) -> Result<()> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let kept: Vec<&Value> = if merge_key.is_empty() {
        patch.iter().collect()
    } else {
        let mut kept = Vec::new();
        for item in patch {
            let Value::Object(map) = item else {
                return Err(bad_arg_type(GO_MAP, item));
            };
            if map.get(DIRECTIVE).and_then(Value::as_str) != Some(DELETE) {
                kept.push(item);
            }
        }
        kept
    };
    let (mut p, mut o) = (0, 0);
    while p < kept.len() && o < order.len() {
        if kept[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        if merge_key_equal(kept[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < kept.len() && o >= order.len() {
        return Err(invalid(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            go_format(&Value::Array(patch.to_vec())),
            go_format(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

fn merge_key_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    let Value::Object(l) = left else {
        return Err(bad_arg_type(GO_MAP, left));
    };
    let Value::Object(r) = right else {
        return Err(bad_arg_type(GO_MAP, right));
    };
    let lk = l.get(merge_key).ok_or_else(|| no_merge_key(l, merge_key))?;
    let rk = r.get(merge_key).ok_or_else(|| no_merge_key(r, merge_key))?;
    Ok(lk == rk)
}

/// What the elements of the lists are; all must be of one JSON type, and none a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ElementKind {
    Object,
    Primitive,
}

fn element_kind(lists: &[&[Value]]) -> Result<ElementKind> {
    let mut first: Option<&Value> = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        match first {
            None => {
                if item.is_array() {
                    return Err(no_list_of_lists());
                }
                first = Some(item);
            }
            Some(f) if go_type(f) != go_type(item) => {
                let lists: Vec<String> = lists
                    .iter()
                    .map(|l| go_format(&Value::Array(l.to_vec())))
                    .collect();
                return Err(invalid(format!(
                    "list element types are not identical: [{}]",
                    lists.join(" ")
                )));
            }
            Some(_) => {}
        }
    }
    match first {
        None => Err(invalid("no elements in any of the given slices")),
        Some(Value::Object(_)) => Ok(ElementKind::Object),
        Some(_) => Ok(ElementKind::Primitive),
    }
}

/// Merges a list with patch strategy `merge` (or applies a `$deleteFromPrimitiveList`).
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    schema: PatchSchema<'_>,
    delete_list: bool,
) -> Result<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = element_kind(&[&original, &patch])?;
    let merge_key = schema.merge_key();
    let items_schema = schema.items();
    let (original, patch, merged) = match kind {
        ElementKind::Primitive => {
            if delete_list {
                let deleted: HashSet<Keyed> = patch.iter().map(Keyed).collect();
                return Ok(original
                    .iter()
                    .filter(|v| !deleted.contains(&Keyed(v)))
                    .cloned()
                    .collect());
            }
            let mut seen = HashSet::with_capacity(original.len() + patch.len());
            let merged: Vec<Value> = original
                .iter()
                .chain(patch.iter())
                .filter(|item| seen.insert(Keyed(item)))
                .cloned()
                .collect();
            (original, patch, merged)
        }
        ElementKind::Object => {
            if merge_key.is_empty() {
                return Err(invalid(format!(
                    "cannot merge lists without merge key for {}",
                    schema.name
                )));
            }
            let (original, patch) = apply_list_directives(original, patch, merge_key)?;
            let merged = merge_by_key(original.clone(), &patch, merge_key, items_schema)?;
            (original, patch, merged)
        }
    };
    let (patch_items, server_only) = partition(merged, &patch, merge_key)?;
    normalize_order(patch_items, server_only, &patch, &original, merge_key, kind)
}

/// The `$patch` elements of a merging list of objects: `delete` removes the original's elements with that key,
/// `replace` makes the patch's other elements the whole list.
fn apply_list_directives(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    let mut deleted: HashSet<OwnedKey> = HashSet::new();
    for item in patch {
        let Value::Object(map) = &item else {
            return Err(bad_arg_type(GO_MAP, &item));
        };
        let Some(directive) = map.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some(DELETE) => {
                let value = map
                    .get(merge_key)
                    .ok_or_else(|| no_merge_key(map, merge_key))?;
                if deleted.is_empty()
                    && let Some(i) = original.iter().position(|o| !o.is_object())
                {
                    return Err(not_a_map_at(i));
                }
                deleted.insert(OwnedKey(value.clone()));
            }
            Some(REPLACE) => replace = true,
            Some(MERGE) => {
                return Err(invalid(
                    "merging lists cannot yet be specified in the patch",
                ));
            }
            _ => return Err(bad_patch_type(directive, map)),
        }
    }
    if !deleted.is_empty() {
        original.retain(|o| {
            o.get(merge_key)
                .is_none_or(|value| !deleted.contains(&OwnedKey(value.clone())))
        });
    }
    if replace {
        Ok((plain, Vec::new()))
    } else {
        Ok((original, plain))
    }
}

/// Each patch element merges into the original's element with its key, or is appended.
fn merge_by_key(
    mut original: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    schema: PatchSchema<'_>,
) -> Result<Vec<Value>> {
    // Where each key is, kept up to date as patch elements are appended (as the scan saw them).
    let mut index = ByKey::new(&original, merge_key);
    for item in patch {
        let Value::Object(map) = item else {
            return Err(bad_arg_type(GO_MAP, item));
        };
        let value = map
            .get(merge_key)
            .ok_or_else(|| no_merge_key(map, merge_key))?;
        match index.find(value)? {
            Some(i) => {
                let Value::Object(o) = std::mem::take(&mut original[i]) else {
                    unreachable!("ByKey found a map")
                };
                original[i] = Value::Object(merge_map(o, map.clone(), schema)?);
            }
            None => {
                index.append(value, original.len());
                original.push(item.clone());
            }
        }
    }
    Ok(original)
}

/// Splits `merged` into the elements `by` names and the others (the server's).
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut named = Vec::with_capacity(merged.len());
    let mut others = Vec::with_capacity(merged.len());
    let values: HashSet<Keyed> = if merge_key.is_empty() {
        by.iter().map(Keyed).collect()
    } else {
        HashSet::new()
    };
    let index = (!merge_key.is_empty()).then(|| ByKey::new(by, merge_key));
    for item in merged {
        let present = match &index {
            None => values.contains(&Keyed(&item)),
            Some(index) => {
                let Value::Object(map) = &item else {
                    return Err(bad_arg_type(GO_MAP, &item));
                };
                let value = map
                    .get(merge_key)
                    .ok_or_else(|| no_merge_key(map, merge_key))?;
                index.find(value)?.is_some()
            }
        };
        if present {
            named.push(item);
        } else {
            others.push(item);
        }
    }
    Ok((named, others))
}

/// The patch's elements in the patch's order, the server's in the server's, interleaved where the server's order
/// relates them (upstream's `normalizeElementOrder` and `mergeSortedSlice`).
fn normalize_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: ElementKind,
) -> Result<Vec<Value>> {
    let right = sort_by_order(patch_items, patch_order, merge_key, kind)?;
    let left = sort_by_order(server_only, server_order, merge_key, kind)?;
    let server_positions = Positions::new(server_order, merge_key, kind);
    let position = |item: &Value| server_positions.of(item, merge_key, kind);
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => out.extend(left.next()),
            (None, Some(_)) => out.extend(right.next()),
            (Some(l), Some(r)) => {
                let (li, ri) = (position(l), position(r));
                if matches!((li, ri), (Some(li), Some(ri)) if li < ri) {
                    out.extend(left.next());
                } else {
                    out.extend(right.next());
                }
            }
        }
    }
    Ok(out)
}

/// Sorts `items` by their place in `order` (stable; items not in it go last); `$patch: delete` elements last.
fn sort_by_order(
    items: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: ElementKind,
) -> Result<Vec<Value>> {
    let mut deleted = Vec::new();
    let mut items = if kind == ElementKind::Object {
        for item in items.iter().chain(order.iter()) {
            let Value::Object(map) = item else {
                return Err(bad_arg_type(GO_MAP, item));
            };
            if !map.contains_key(merge_key) {
                return Err(no_merge_key(map, merge_key));
            }
        }
        let (kept, gone): (Vec<Value>, Vec<Value>) = items
            .into_iter()
            .partition(|i| i.get(DIRECTIVE).and_then(Value::as_str) != Some(DELETE));
        deleted = gone;
        kept
    } else {
        items
    };
    let positions = Positions::new(order, merge_key, kind);
    items.sort_by_cached_key(|i| positions.of(i, merge_key, kind).unwrap_or(usize::MAX));
    items.extend(deleted);
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A schema like a pod's: `containers` merge by `name`, `finalizers` merge as a set, `args` atomic,
    /// `volumes` merge by `name` with retainKeys inside, `labels` a map.
    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "metadata": {
                    "type": "object",
                    "properties": {
                        "labels": { "type": "object", "additionalProperties": { "type": "string" } },
                        "finalizers": { "type": "array", "items": { "type": "string" }, "x-kubernetes-patch-strategy": "merge" }
                    }
                },
                "spec": {
                    "type": "object",
                    "nullable": true,
                    "properties": {
                        "containers": {
                            "type": "array",
                            "x-kubernetes-patch-strategy": "merge",
                            "x-kubernetes-patch-merge-key": "name",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "name": { "type": "string" },
                                    "args": { "type": "array", "items": { "type": "string" } },
                                    "ports": {
                                        "type": "array",
                                        "x-kubernetes-patch-strategy": "merge",
                                        "x-kubernetes-patch-merge-key": "port",
                                        "items": { "type": "object" }
                                    }
                                }
                            }
                        },
                        "tags": { "type": "array", "items": { "type": "string" } },
                        "replaced": { "type": "object", "x-kubernetes-patch-strategy": "replace" },
                        "strategy": { "type": "object", "x-kubernetes-patch-strategy": "retainKeys" }
                    }
                }
            }
        })
    }

    fn smp(original: Value, patch: Value) -> Result<Value> {
        let schema = schema();
        apply(original, patch, PatchSchema::new(&schema))
    }

    fn base() -> Value {
        json!({
            "metadata": { "name": "p", "labels": { "a": "1", "b": "2" }, "finalizers": ["x", "y"] },
            "spec": {
                "containers": [
                    { "name": "one", "image": "i1", "args": ["a", "b"] },
                    { "name": "two", "image": "i2" }
                ],
                "tags": ["t1", "t2"]
            }
        })
    }

    #[test]
    fn maps_merge_and_null_deletes() {
        let out = smp(
            base(),
            json!({ "metadata": { "labels": { "a": null, "c": "3" }, "x": null } }),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({ "b": "2", "c": "3" }));
        assert_eq!(out["metadata"]["name"], "p");
        assert_eq!(out["spec"], base()["spec"]);
    }

    #[test]
    fn primitives_and_lists_without_strategy_are_replaced() {
        let out = smp(
            base(),
            json!({ "spec": { "tags": ["t3"] }, "metadata": { "name": "q" } }),
        )
        .unwrap();
        assert_eq!(out["spec"]["tags"], json!(["t3"]));
        assert_eq!(out["metadata"]["name"], "q");
    }

    #[test]
    fn merge_key_list_adds_updates_and_keeps_others() {
        let out = smp(
            base(),
            json!({ "spec": { "containers": [
                { "name": "two", "image": "i2b" },
                { "name": "three", "image": "i3" }
            ] } }),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([
                { "name": "one", "image": "i1", "args": ["a", "b"] },
                { "name": "two", "image": "i2b" },
                { "name": "three", "image": "i3" }
            ])
        );
    }

    #[test]
    fn nested_list_in_merged_element_is_atomic_unless_declared() {
        let out = smp(
            base(),
            json!({ "spec": { "containers": [{ "name": "one", "args": ["c"] }] } }),
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"][0]["args"], json!(["c"]));
        assert_eq!(out["spec"]["containers"][0]["image"], "i1");
    }

    #[test]
    fn patch_delete_element_and_null_field_in_element() {
        let out = smp(
            base(),
            json!({ "spec": { "containers": [
                { "name": "one", "$patch": "delete" },
                { "name": "two", "image": null }
            ] } }),
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"], json!([{ "name": "two" }]));
    }

    #[test]
    fn patch_replace_element_replaces_the_list() {
        let out = smp(
            base(),
            json!({ "spec": { "containers": [{ "$patch": "replace" }, { "name": "z" }] } }),
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"], json!([{ "name": "z" }]));
    }

    #[test]
    fn patch_replace_and_delete_in_maps() {
        let out = smp(
            base(),
            json!({ "metadata": { "labels": { "$patch": "replace", "z": "9" } } }),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({ "z": "9" }));
        let out = smp(
            base(),
            json!({ "metadata": { "labels": { "$patch": "delete" } } }),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({}));
    }

    #[test]
    fn replace_strategy_on_a_map() {
        let mut original = base();
        original["spec"]["replaced"] = json!({ "a": 1, "b": 2 });
        let out = smp(original, json!({ "spec": { "replaced": { "c": 3 } } })).unwrap();
        assert_eq!(out["spec"]["replaced"], json!({ "c": 3 }));
    }

    #[test]
    fn primitive_set_merges_and_delete_from_primitive_list() {
        let out = smp(base(), json!({ "metadata": { "finalizers": ["y", "z"] } })).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["x", "y", "z"]));
        let out = smp(
            base(),
            json!({ "metadata": { "$deleteFromPrimitiveList/finalizers": ["x"] } }),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
    }

    #[test]
    fn set_element_order_orders_the_merged_list() {
        let out = smp(
            base(),
            json!({ "spec": {
                "$setElementOrder/containers": [{ "name": "two" }, { "name": "one" }],
                "containers": [{ "name": "two", "image": "new" }]
            } }),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{ "name": "two", "image": "new" }, { "name": "one", "image": "i1", "args": ["a", "b"] }])
        );
        let out = smp(
            base(),
            json!({ "metadata": { "$setElementOrder/finalizers": ["y", "x"] } }),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["y", "x"]));
    }

    #[test]
    fn retain_keys_clears_unlisted_fields() {
        let mut original = base();
        original["spec"]["strategy"] = json!({ "type": "Rolling", "rolling": { "max": 1 } });
        let out = smp(
            original.clone(),
            json!({ "spec": { "strategy": { "$retainKeys": ["type"], "type": "Recreate" } } }),
        )
        .unwrap();
        assert_eq!(out["spec"]["strategy"], json!({ "type": "Recreate" }));
        let err = smp(
            original,
            json!({ "spec": { "strategy": { "$retainKeys": ["type"], "other": 1 } } }),
        )
        .unwrap_err();
        assert_eq!(
            err,
            StrategicMergeError::BadRequest("invalid patch format of retainKeys".into())
        );
    }

    #[test]
    fn new_values_lose_nulls_and_directives() {
        let out = smp(
            json!({}),
            json!({ "spec": { "containers": [{ "name": "a", "x": null }, { "$patch": "delete", "name": "b" }] } }),
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"], json!([{ "name": "a" }]));
    }

    #[test]
    fn malformed_patches_are_refused_with_upstream_texts() {
        let err = smp(base(), json!({ "spec": { "$patch": "merge" } })).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown patch type: merge in map: map[$patch:merge]"
        );
        let err = smp(
            base(),
            json!({ "spec": { "containers": [{ "$patch": "merge", "name": "one" }] } }),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "merging lists cannot yet be specified in the patch"
        );
        let err = smp(
            base(),
            json!({ "spec": { "containers": [{ "image": "x" }] } }),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "map: map[image:x] does not contain declared merge key: name"
        );
        let err = smp(
            base(),
            json!({ "spec": { "containers": [{ "$patch": "delete" }] } }),
        )
        .unwrap_err();
        assert!(matches!(err, StrategicMergeError::Invalid(_)));
        let err = smp(
            base(),
            json!({ "metadata": { "$deleteFromPrimitiveList": ["x"] } }),
        )
        .unwrap_err();
        assert_eq!(
            err,
            StrategicMergeError::BadRequest("invalid patch format of primitive list".into())
        );
        let err = smp(
            base(),
            json!({ "metadata": { "$setElementOrder/finalizers": "x" } }),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "expected a []interface {}, but received a string"
        );
        let err = smp(
            json!({ "metadata": { "finalizers": [] } }),
            json!({ "metadata": { "finalizers": [["x"]] } }),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "lists of lists are not supported");
        let err = smp(base(), json!({ "metadata": { "finalizers": [1] } })).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("list element types are not identical"),
            "{err}"
        );
        let err = smp(base(), json!({ "metadata": { "$retainKeys": "name" } })).unwrap_err();
        assert_eq!(err.to_string(), "invalid patch format of retainKeys");
        let err = apply(json!({}), json!([1]), PatchSchema::none()).unwrap_err();
        assert!(matches!(err, StrategicMergeError::BadRequest(_)));
    }

    #[test]
    fn without_schema_lists_are_atomic() {
        let out = apply(
            base(),
            json!({ "spec": { "containers": [{ "name": "x" }] } }),
            PatchSchema::none(),
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"], json!([{ "name": "x" }]));
    }

    #[test]
    fn type_change_takes_the_patch_value() {
        let out = smp(base(), json!({ "spec": { "tags": "all" } })).unwrap();
        assert_eq!(out["spec"]["tags"], "all");
    }
}
