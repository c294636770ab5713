//! Strategic-merge-patch metadata of served versions: which lists merge (and by which key), published in the
//! OpenAPI schema as `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`, the extensions kubectl reads
//! to compute its patches and the server reads to apply them.

use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;

use serde_json::Value;

/// A type that adds its fields' patch metadata to its own OpenAPI schema.
///
/// Implemented by `#[derive(Versioned)]` for every versioned struct (from `#[versioned(patch_strategy = "...",
/// patch_merge_key = "...")]` on its fields, and recursively for fields of other derived types), and for lists,
/// options, boxes and maps of such types. A list without metadata is atomic: a strategic merge patch replaces it
/// whole (as for a custom resource's lists upstream).
pub trait PatchMetadata {
    /// Adds the extensions to `schema`, this type's OpenAPI v3 schema.
    fn annotate_schema(schema: &mut Value);

    /// Adds the extensions a list of this type has wherever it appears, to `list`, the list's schema (as every
    /// `conditions` list upstream is a map keyed by `type`). Attributes on the field come first and win. Nothing by
    /// default.
    fn annotate_list(list: &mut Value) {
        let _ = list;
    }
}

impl<T: PatchMetadata> PatchMetadata for Vec<T> {
    fn annotate_schema(schema: &mut Value) {
        for_each_alternative(schema, &mut |s| {
            T::annotate_list(s);
            if let Some(items) = s.get_mut("items") {
                T::annotate_schema(items);
            }
        });
    }
}

impl<T: PatchMetadata> PatchMetadata for Option<T> {
    fn annotate_schema(schema: &mut Value) {
        for_each_alternative(schema, &mut |s| T::annotate_schema(s));
    }
}

impl<T: PatchMetadata> PatchMetadata for Box<T> {
    fn annotate_schema(schema: &mut Value) {
        T::annotate_schema(schema);
    }
}

impl<K, T: PatchMetadata> PatchMetadata for BTreeMap<K, T> {
    fn annotate_schema(schema: &mut Value) {
        annotate_map_values::<T>(schema);
    }
}

impl<K, T: PatchMetadata, S> PatchMetadata for HashMap<K, T, S> {
    fn annotate_schema(schema: &mut Value) {
        annotate_map_values::<T>(schema);
    }
}

fn annotate_map_values<T: PatchMetadata>(schema: &mut Value) {
    for_each_alternative(schema, &mut |s| {
        if let Some(values) = s.get_mut("additionalProperties")
            && values.is_object()
        {
            T::annotate_schema(values);
        }
    });
}

/// Runs `f` on a schema, or on each alternative of a wrapper (`allOf`/`anyOf`/`oneOf`, as generators emit for
/// nullable fields).
fn for_each_alternative(schema: &mut Value, f: &mut dyn FnMut(&mut Value)) {
    let Value::Object(map) = schema else {
        return;
    };
    let mut wrapped = false;
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(alternatives)) = map.get_mut(key) {
            wrapped = true;
            alternatives.iter_mut().for_each(&mut *f);
        }
    }
    if !wrapped {
        f(schema);
    }
}

/// The schema of property `name` of an object schema (looking through wrappers); used by the derive.
#[doc(hidden)]
pub fn schema_property<'a>(schema: &'a mut Value, name: &str) -> Option<&'a mut Value> {
    let has = |s: &Value| s.get("properties").is_some_and(|p| p.get(name).is_some());
    if schema.get("properties").is_some() {
        return schema.get_mut("properties")?.get_mut(name);
    }
    let (key, index) = ["allOf", "anyOf", "oneOf"].iter().find_map(|key| {
        let alternatives = schema.get(*key)?.as_array()?;
        alternatives.iter().position(has).map(|i| (*key, i))
    })?;
    schema
        .get_mut(key)?
        .get_mut(index)?
        .get_mut("properties")?
        .get_mut(name)
}

/// Sets a field's patch strategy and merge key; used by the derive.
#[doc(hidden)]
pub fn set_patch_metadata(field: &mut Value, strategy: &str, merge_key: Option<&str>) {
    if let Value::Object(map) = field {
        map.insert("x-kubernetes-patch-strategy".into(), strategy.into());
        if let Some(key) = merge_key {
            map.insert("x-kubernetes-patch-merge-key".into(), key.into());
        }
    }
}

/// Sets a list field's `x-kubernetes-list-type` (and `x-kubernetes-list-map-keys` for a map list): how server-side
/// apply merges it and who owns its items; used by the derive.
#[doc(hidden)]
pub fn set_list_type(field: &mut Value, list_type: &str, keys: &[&str]) {
    if let Value::Object(map) = field {
        map.insert("x-kubernetes-list-type".into(), list_type.into());
        if !keys.is_empty() {
            map.insert("x-kubernetes-list-map-keys".into(), keys.into());
        }
    }
}

/// Sets a map or struct field's `x-kubernetes-map-type` (`atomic`: owned and replaced whole); used by the derive.
#[doc(hidden)]
pub fn set_map_type(field: &mut Value, map_type: &str) {
    if let Value::Object(map) = field {
        map.insert("x-kubernetes-map-type".into(), map_type.into());
    }
}

/// Lets the derive recurse into a field's type when (and only when) that type has [`PatchMetadata`]: the
/// by-reference impl below is found first when it applies, the fallback does nothing. Not for direct use.
#[doc(hidden)]
pub struct PatchProbe<T: ?Sized>(PhantomData<fn() -> Box<T>>);

/// A list of conditions is a map keyed by `type`, as upstream's `conditions` fields declare it (`patchStrategy=merge`,
/// `patchMergeKey=type`, `+listType=map`, `+listMapKey=type`); attributes on the field take precedence.
impl PatchMetadata for crate::meta::Condition {
    fn annotate_schema(_: &mut Value) {}

    fn annotate_list(list: &mut Value) {
        if let Value::Object(map) = list {
            for (key, value) in [
                ("x-kubernetes-patch-strategy", Value::from("merge")),
                ("x-kubernetes-patch-merge-key", Value::from("type")),
                ("x-kubernetes-list-type", Value::from("map")),
                ("x-kubernetes-list-map-keys", Value::from(vec!["type"])),
            ] {
                map.entry(key).or_insert(value);
            }
        }
    }
}

impl<T: ?Sized> PatchProbe<T> {
    #[doc(hidden)]
    pub fn new() -> Self {
        PatchProbe(PhantomData)
    }
}

impl<T: ?Sized> Default for PatchProbe<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[doc(hidden)]
pub trait AnnotateWithPatchMetadata {
    fn annotate_field(&self, schema: &mut Value);
}

impl<T: PatchMetadata> AnnotateWithPatchMetadata for &PatchProbe<T> {
    fn annotate_field(&self, schema: &mut Value) {
        T::annotate_schema(schema);
    }
}

#[doc(hidden)]
pub trait AnnotateWithoutPatchMetadata {
    fn annotate_field(&self, schema: &mut Value);
}

impl<T: ?Sized> AnnotateWithoutPatchMetadata for PatchProbe<T> {
    fn annotate_field(&self, _: &mut Value) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Element;
    impl PatchMetadata for Element {
        fn annotate_schema(schema: &mut Value) {
            if let Some(f) = schema_property(schema, "ports") {
                set_patch_metadata(f, "merge", Some("port"));
            }
        }
    }

    #[test]
    #[allow(clippy::needless_borrow)] // the double reference is how the probe picks its impl
    fn probe_recurses_only_into_types_with_metadata() {
        let mut schema = json!({ "type": "array", "items": { "type": "object", "properties": { "ports": { "type": "array" } } } });
        (&&PatchProbe::<Vec<Element>>::new()).annotate_field(&mut schema);
        assert_eq!(
            schema["items"]["properties"]["ports"]["x-kubernetes-patch-merge-key"],
            "port"
        );
        let before = schema.clone();
        (&&PatchProbe::<Vec<String>>::new()).annotate_field(&mut schema);
        assert_eq!(schema, before);
    }

    #[test]
    fn a_list_of_conditions_is_a_map_by_type() {
        let mut schema = serde_json::json!({ "type": "array", "items": {} });
        <Vec<crate::meta::Condition>>::annotate_schema(&mut schema);
        assert_eq!(schema["x-kubernetes-list-type"], "map");
        assert_eq!(
            schema["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"])
        );
        assert_eq!(schema["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(schema["x-kubernetes-patch-merge-key"], "type");
        // A field's own attributes win.
        let mut schema = serde_json::json!({ "type": "array", "x-kubernetes-list-type": "atomic" });
        <Vec<crate::meta::Condition>>::annotate_schema(&mut schema);
        assert_eq!(schema["x-kubernetes-list-type"], "atomic");
    }
}
