//! RFC 6902 JSON patch, applied as upstream applies it (evanphx/json-patch v4, which k8s.io/apiserver uses):
//! its pointer rules, negative array indices, and `AccumulatedCopySizeLimit`, which the server sets to the
//! request body limit so that `copy` cannot grow a document without bound.
//!
//! Written here rather than taken from the `json-patch` crate because every failure must be an error, never a
//! panic or an unbounded allocation: the copied bytes and the nesting depth a patch can build are both capped.

use serde_json::{Map, Value};

/// Upstream's `JSONPatchMaxCopyBytes` (the request body limit): the most bytes `copy` operations may add.
pub(crate) const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// How deep a patched document may nest. Deeper documents could not be decoded anyway (the JSON decoder stops
/// at 128 levels); the bound keeps serializing and dropping the patched value off deep recursion.
const MAX_DEPTH: usize = 1000;

/// Why a patch could not be applied. Upstream answers every such failure with the same 422 text; the detail is
/// for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct PatchError(String);

fn fail<T>(message: impl Into<String>) -> Result<T, PatchError> {
    Err(PatchError(message.into()))
}

/// A decoded patch: its operations as the client sent them (checked when applied, as upstream does).
#[derive(Debug)]
pub(crate) struct JsonPatch(Vec<Map<String, Value>>);

impl PatchError {
    /// Whether a `test` operation failed (MutatingAdmissionPolicy then leaves the object as it was).
    #[cfg(feature = "cluster")]
    pub fn failed_test(&self) -> bool {
        self.0.ends_with(": test failed")
    }
}

impl JsonPatch {
    /// A patch of operations already decoded.
    #[cfg(feature = "cluster")]
    pub fn from_operations(operations: Vec<Map<String, Value>>) -> Self {
        JsonPatch(operations)
    }

    /// Decodes a patch document: a JSON array of objects (`null` is an empty patch, as Go decodes it).
    pub fn decode(body: &[u8]) -> Result<Self, String> {
        let body = crate::codec::json::replace_invalid_unicode(body);
        let value: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        let items = match value {
            Value::Null => Vec::new(),
            Value::Array(items) => items,
            other => {
                return Err(format!(
                    "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                    go_kind(&other)
                ));
            }
        };
        let mut operations = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Value::Object(op) => operations.push(op),
                Value::Null => operations.push(Map::new()),
                other => {
                    return Err(format!(
                        "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                        go_kind(&other)
                    ));
                }
            }
        }
        Ok(JsonPatch(operations))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Applies every operation in order; the document is left partly patched on error (callers discard it).
    pub fn apply(&self, doc: &mut Value) -> Result<(), PatchError> {
        let mut state = Applying {
            copied: 0,
            depth: depth(doc),
        };
        for op in &self.0 {
            state.apply(doc, op)?;
        }
        Ok(())
    }
}

fn go_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

struct Applying {
    /// Bytes added by `copy` so far.
    copied: usize,
    /// An upper bound of the document's nesting depth.
    depth: usize,
}

impl Applying {
    fn apply(&mut self, doc: &mut Value, op: &Map<String, Value>) -> Result<(), PatchError> {
        let kind = match op.get("op") {
            Some(Value::String(kind)) => kind.as_str(),
            _ => "unknown",
        };
        match kind {
            "add" => {
                let path = string_field(op, "path")?;
                let value = op.get("value").cloned().unwrap_or(Value::Null);
                self.grow(segments(path) + depth(&value))?;
                add(doc, path, value)
            }
            "remove" => {
                let path = string_field(op, "path")?;
                let (container, key) = find(doc, path).ok_or_else(|| missing("remove", path))?;
                remove(container, &key).map(drop)
            }
            "replace" => {
                let path = string_field(op, "path")?;
                let value = op.get("value").cloned().unwrap_or(Value::Null);
                self.grow(segments(path) + depth(&value))?;
                replace(doc, path, value)
            }
            "move" => {
                let from = string_field(op, "from")?;
                let path = string_field(op, "path")?;
                let (container, key) = find(doc, from).ok_or_else(|| missing("move", from))?;
                get(container, &key)?;
                let value = remove(container, &key)?;
                // The moved subtree is at most as deep as what sat below `from`.
                let below = self.depth.saturating_sub(segments(from));
                self.grow(segments(path) + below)?;
                add(doc, path, value)
            }
            "copy" => {
                let from = string_field(op, "from")?;
                let path = string_field(op, "path")?;
                let (container, key) = find(doc, from).ok_or_else(|| missing("copy", from))?;
                // A missing object key copies as null, as upstream's v4 does.
                let value = get(container, &key)?.cloned().unwrap_or(Value::Null);
                find(doc, path).ok_or_else(|| missing("copy", path))?;
                self.copied = self.copied.saturating_add(json_size(&value));
                if self.copied > MAX_COPY_BYTES {
                    return fail(format!(
                        "Unable to complete the copy, the accumulated size increase of copy is {}, exceeding the limit {MAX_COPY_BYTES}",
                        self.copied
                    ));
                }
                self.grow(segments(path) + depth(&value))?;
                add(doc, path, value)
            }
            "test" => {
                let path = string_field(op, "path")?;
                test(doc, path, op.get("value"))
            }
            other => fail(format!("Unexpected kind: {other}")),
        }
    }

    fn grow(&mut self, depth: usize) -> Result<(), PatchError> {
        self.depth = self.depth.max(depth);
        if self.depth > MAX_DEPTH {
            return fail(format!(
                "the patched document would nest deeper than {MAX_DEPTH} levels"
            ));
        }
        Ok(())
    }
}

fn string_field<'a>(op: &'a Map<String, Value>, field: &str) -> Result<&'a str, PatchError> {
    match op.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(Value::Null) | None => fail(format!("operation missing {field} field")),
        Some(_) => fail(format!("{field} is not a string")),
    }
}

fn missing(kind: &str, path: &str) -> PatchError {
    PatchError(format!(
        "{kind} operation does not apply: doc is missing path: \"{path}\""
    ))
}

/// Path segments below the root: `/a/b` has 2.
fn segments(path: &str) -> usize {
    path.matches('/').count()
}

/// Nesting depth: 0 for a scalar, 1 + the deepest child for an object or array.
fn depth(value: &Value) -> usize {
    // Iterative, so that no input can recurse deeply here.
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, level)) = stack.pop() {
        match value {
            Value::Array(items) => {
                deepest = deepest.max(level + 1);
                stack.extend(items.iter().map(|v| (v, level + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(level + 1);
                stack.extend(map.values().map(|v| (v, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The length of a value's compact JSON (what upstream counts for the copy limit).
fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and a Value always serializes.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// RFC 6901 unescaping: `~1` is `/`, `~0` is `~`.
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// The container (object or array) holding the last token of `path`, and that token (upstream `findObject`:
/// the first segment is ignored, a path without `/` has no container).
fn find<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let tokens: Vec<&str> = path.split('/').collect();
    if tokens.len() < 2 {
        return None;
    }
    let mut current = doc;
    for token in &tokens[1..tokens.len() - 1] {
        let token = unescape(token);
        let next = match current {
            Value::Object(map) => map.get_mut(&token)?,
            Value::Array(items) => {
                let index = array_index(&token, items.len())?;
                items.get_mut(index)?
            }
            _ => return None,
        };
        if !matches!(next, Value::Object(_) | Value::Array(_)) {
            return None;
        }
        current = next;
    }
    Some((current, unescape(tokens[tokens.len() - 1])))
}

/// An existing element's index: Go's `Atoi`, negative counting from the end.
fn array_index(token: &str, len: usize) -> Option<usize> {
    let index: i64 = token.parse().ok()?;
    let len = i64::try_from(len).ok()?;
    let index = if index < 0 { index + len } else { index };
    (0..len).contains(&index).then_some(index as usize)
}

/// The value at `key` in `container`: `None` for a missing object key (not an error upstream), an error for a
/// bad array index.
fn get<'a>(container: &'a Value, key: &str) -> Result<Option<&'a Value>, PatchError> {
    match container {
        Value::Object(map) => Ok(map.get(key).filter(|v| !v.is_null())),
        Value::Array(items) => array_index(key, items.len())
            .map(|i| Some(&items[i]).filter(|v| !v.is_null()))
            .ok_or_else(|| PatchError(format!("Unable to access invalid index: {key}"))),
        _ => fail("not a container"),
    }
}

fn remove(container: &mut Value, key: &str) -> Result<Value, PatchError> {
    match container {
        Value::Object(map) => map
            .remove(key)
            .ok_or_else(|| PatchError(format!("Unable to remove nonexistent key: {key}"))),
        Value::Array(items) => array_index(key, items.len())
            .map(|i| items.remove(i))
            .ok_or_else(|| PatchError(format!("Unable to access invalid index: {key}"))),
        _ => fail("not a container"),
    }
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    let (container, key) = find(doc, path).ok_or_else(|| missing("add", path))?;
    match container {
        Value::Object(map) => {
            map.insert(key, value);
            Ok(())
        }
        Value::Array(items) => {
            if key == "-" {
                items.push(value);
                return Ok(());
            }
            let invalid = || PatchError(format!("Unable to access invalid index: {key}"));
            let index: i64 = key.parse().map_err(|_| invalid())?;
            let slots = i64::try_from(items.len() + 1).map_err(|_| invalid())?;
            let index = if index < 0 { index + slots } else { index };
            if !(0..slots).contains(&index) {
                return Err(invalid());
            }
            items.insert(index as usize, value);
            Ok(())
        }
        _ => fail("not a container"),
    }
}

fn replace(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        if !matches!(value, Value::Object(_) | Value::Array(_)) {
            return fail("replace operation value must be object or array");
        }
        *doc = value;
        return Ok(());
    }
    let (container, key) = find(doc, path).ok_or_else(|| missing("replace", path))?;
    match container {
        // Upstream's v4 replaces a missing object key as if it existed.
        Value::Object(map) => {
            map.insert(key, value);
            Ok(())
        }
        Value::Array(items) => {
            let index = array_index(&key, items.len())
                .ok_or_else(|| PatchError(format!("Unable to access invalid index: {key}")))?;
            items[index] = value;
            Ok(())
        }
        _ => fail("not a container"),
    }
}

fn test(doc: &mut Value, path: &str, expected: Option<&Value>) -> Result<(), PatchError> {
    let failed = || PatchError(format!("testing value {path} failed: test failed"));
    if path.is_empty() {
        return if expected == Some(&*doc) {
            Ok(())
        } else {
            Err(failed())
        };
    }
    let (container, key) = find(doc, path).ok_or_else(|| missing("test", path))?;
    let actual = get(container, &key)?;
    let expected = expected.filter(|v| !v.is_null());
    if actual == expected {
        Ok(())
    } else {
        Err(failed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patch(doc: Value, ops: Value) -> Result<Value, PatchError> {
        let patch = JsonPatch::decode(&serde_json::to_vec(&ops).unwrap()).unwrap();
        let mut doc = doc;
        patch.apply(&mut doc)?;
        Ok(doc)
    }

    #[test]
    fn rfc_operations() {
        let doc = json!({"a": {"b": [1, 2, 3]}, "c": "x"});
        let out = patch(
            doc,
            json!([
                {"op": "add", "path": "/a/b/1", "value": 9},
                {"op": "add", "path": "/a/b/-", "value": 4},
                {"op": "remove", "path": "/a/b/0"},
                {"op": "replace", "path": "/c", "value": "y"},
                {"op": "move", "from": "/c", "path": "/d"},
                {"op": "copy", "from": "/a/b", "path": "/e"},
                {"op": "test", "path": "/e", "value": [9, 2, 3, 4]},
                // Upstream's negative indices: -1 is the slot after the last element.
                {"op": "add", "path": "/a/b/-1", "value": 0},
                {"op": "test", "path": "/missing", "value": null},
                {"op": "add", "path": "/k~1x~0", "value": true}
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"a": {"b": [9, 2, 3, 4, 0]}, "d": "y", "e": [9, 2, 3, 4], "k/x~": true})
        );
    }

    #[test]
    fn failures_are_errors() {
        let doc = json!({"a": {"b": 1}, "l": [1]});
        for ops in [
            json!([{"op": "remove", "path": "/nope"}]),
            json!([{"op": "add", "path": "/x/y", "value": 1}]),
            json!([{"op": "add", "path": "a", "value": 1}]),
            json!([{"op": "add", "path": "/l/5", "value": 1}]),
            json!([{"op": "replace", "path": "/l/1", "value": 1}]),
            json!([{"op": "test", "path": "/a/b", "value": 2}]),
            json!([{"op": "move", "from": "/a", "path": "/a/b/c"}]),
            json!([{"op": "move", "from": "/nope", "path": "/x"}]),
            json!([{"op": "frobnicate", "path": "/a"}]),
            json!([{"path": "/a"}]),
            json!([null]),
            json!([{"op": "add"}]),
            json!([{"op": "copy", "from": "/l/-2", "path": "/x"}]),
        ] {
            assert!(patch(doc.clone(), ops.clone()).is_err(), "{ops}");
        }
        assert!(JsonPatch::decode(b"{}").is_err());
        assert!(JsonPatch::decode(b"[1]").is_err());
        assert_eq!(JsonPatch::decode(b"null").unwrap().len(), 0);
    }

    /// Probe finding B2: the `json-patch` crate panicked on this (a move of a child onto its parent, then a
    /// failing op); here it is an ordinary failure, and the move itself is valid.
    #[test]
    fn move_onto_parent_then_failure_does_not_panic() {
        let doc = json!({"metadata": {"name": "x", "labels": {"a": "b"}}});
        let moved = patch(
            doc.clone(),
            json!([{"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels"}]),
        )
        .unwrap();
        assert_eq!(moved, json!({"metadata": {"name": "x", "labels": "b"}}));
        let err = patch(
            doc,
            json!([
                {"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels"},
                {"op": "test", "path": "/metadata/name", "value": "no"}
            ]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "testing value /metadata/name failed: test failed"
        );
    }

    /// Probe finding B1: copying a map into itself doubles it each time; the accumulated copy size stops it.
    #[test]
    fn self_copies_stop_at_the_copy_limit() {
        let doc = json!({"metadata": {"annotations": {"a": "x".repeat(1000)}}});
        let ops: Vec<Value> = (0..30)
            .map(|i| {
                json!({"op": "copy", "from": "/metadata/annotations",
                       "path": format!("/metadata/annotations/k{i}")})
            })
            .collect();
        let err = patch(doc, Value::Array(ops)).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "Unable to complete the copy, the accumulated size increase of copy is"
            ),
            "{err}"
        );
    }

    #[test]
    fn nesting_is_bounded() {
        // Each copy puts an empty object one level deeper: few bytes, unbounded depth without the cap.
        let mut ops = vec![json!({"op": "add", "path": "/z", "value": {}})];
        let mut path = String::from("/a");
        ops.push(json!({"op": "add", "path": "/a", "value": {}}));
        for _ in 0..2000 {
            path.push_str("/n");
            ops.push(json!({"op": "copy", "from": "/z", "path": path}));
        }
        let err = patch(json!({}), Value::Array(ops)).unwrap_err();
        assert!(err.to_string().contains("nest deeper"), "{err}");
    }
}
