//! The schemas of an OpenAPI document: each served kind and its list under upstream's CRD names
//! (`info.programming-kubernetes.restaurant.v1beta1.Pizza`), and the `meta.k8s.io` types the operations refer to.

use serde_json::{Map, Value, json};

use crate::meta::ListMeta;
use crate::runtime::{KindDescription, openapi_schema};

pub(super) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub(super) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(super) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(super) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

/// Upstream's schema name of a CRD kind: the group reversed, then version and kind.
pub(super) fn kind_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// A `$ref` to a component schema (v3 form; [`to_v2`] rewrites it).
pub(super) fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// The `meta.k8s.io` types every group-version document refers to.
pub(super) fn meta_schemas() -> Map<String, Value> {
    let mut schemas = Map::new();
    schemas.insert(LIST_META.into(), openapi_schema::<ListMeta>());
    schemas.insert(
        STATUS.into(),
        json!({
            "description": "Status is a return value for calls that don't return other objects.",
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "code": {"type": "integer", "format": "int32", "description": "Suggested HTTP return code for this status, 0 if not set."},
                "details": {"type": "object", "description": "Extended data associated with the reason."},
                "message": {"type": "string", "description": "A human-readable description of the status of this operation."},
                "metadata": {"allOf": [reference(LIST_META)], "description": "Standard list metadata."},
                "reason": {"type": "string", "description": "A machine-readable description of why this operation is in the \"Failure\" status."},
                "status": {"type": "string", "description": "Status of the operation. One of: \"Success\" or \"Failure\"."}
            },
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "Status", "version": "v1"}]
        }),
    );
    schemas.insert(
        DELETE_OPTIONS.into(),
        json!({
            "description": "DeleteOptions may be provided when deleting an API object.",
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "dryRun": {"type": "array", "items": {"type": "string", "default": ""}, "description": "When present, indicates that modifications should not be persisted. The only valid value is All."},
                "gracePeriodSeconds": {"type": "integer", "format": "int64"},
                "orphanDependents": {"type": "boolean"},
                "preconditions": {
                    "type": "object",
                    "description": "Must be fulfilled before a deletion is carried out.",
                    "properties": {"resourceVersion": {"type": "string"}, "uid": {"type": "string"}}
                },
                "propagationPolicy": {"type": "string"}
            },
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "DeleteOptions", "version": "v1"}]
        }),
    );
    schemas.insert(
        PATCH.into(),
        json!({
            "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
            "type": "object"
        }),
    );
    schemas
}

/// Adds `kind` in `version` and its list.
pub(super) fn add_kind(schemas: &mut Map<String, Value>, kind: &KindDescription, version: &str) {
    let name = kind_name(kind.group, version, kind.kind);
    if let Some(schema) = kind.schemas.get(version) {
        schemas.insert(name.clone(), schema.clone());
    }
    let list_kind = format!("{}List", kind.kind);
    schemas.insert(
        kind_name(kind.group, version, &list_kind),
        json!({
            "description": format!("{list_kind} is a list of {}", kind.kind),
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
                "items": {"type": "array", "items": reference(&name), "description": format!("List of {}.", kind.plural)},
                "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
                "metadata": {"allOf": [reference(LIST_META)], "description": "Standard list metadata."}
            },
            "x-kubernetes-group-version-kind": [{"group": kind.group, "kind": list_kind, "version": version}]
        }),
    );
}

/// A v3 schema in Swagger 2.0 form: `#/definitions/` references, no `nullable`, `allOf` wrappers of a single
/// reference flattened (2.0 allows no siblings next to `$ref`, which is what upstream emits there).
pub(super) fn to_v2(mut schema: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("nullable");
                if let Some(Value::Array(all)) = map.get("allOf")
                    && all.len() == 1
                    && let Some(r) = all[0].get("$ref").cloned()
                {
                    map.clear();
                    map.insert("$ref".into(), r);
                }
                if let Some(Value::String(r)) = map.get_mut("$ref") {
                    *r = r.replace("#/components/schemas/", "#/definitions/");
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut schema);
    schema
}
