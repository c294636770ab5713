//! OpenAPI schemas of served versions: derived with `schemars` from the wire structs (descriptions from doc
//! comments), shaped the way Kubernetes publishes them (inline, `nullable`, no JSON-Schema-only keywords).

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

use crate::meta::{ListMeta, MicroTime, ObjectMeta, Time};

/// The OpenAPI v3 schema of `T`, with every sub-schema inline.
pub fn openapi_schema<T: JsonSchema>() -> Value {
    let mut settings = SchemaSettings::openapi3();
    settings.inline_subschemas = true;
    let mut value = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Value::Object(map) = &mut value {
        for keyword in ["$schema", "title", "components", "$defs", "definitions"] {
            map.remove(keyword);
        }
    }
    strip_formats(&mut value);
    value
}

/// Kubernetes publishes `int32`/`int64`/`double` formats only; drop schemars' unsigned and `uint` variants.
fn strip_formats(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(format)) = map.get("format")
                && !matches!(
                    format.as_str(),
                    "int32" | "int64" | "double" | "float" | "date-time" | "byte"
                )
            {
                map.remove("format");
                map.remove("minimum");
            }
            map.values_mut().for_each(strip_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_formats),
        _ => {}
    }
}

impl JsonSchema for Time {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "format": "date-time",
            "description": "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON." })
    }
    fn inline_schema() -> bool {
        true
    }
}

impl JsonSchema for MicroTime {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "format": "date-time", "description": "MicroTime is version of Time with microsecond level precision." })
    }
    fn inline_schema() -> bool {
        true
    }
}

fn string_map(description: &str) -> Value {
    serde_json::json!({ "type": "object", "additionalProperties": { "type": "string" }, "description": description })
}

impl JsonSchema for ObjectMeta {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let string = |d: &str| serde_json::json!({ "type": "string", "description": d });
        let time = |d: &str| serde_json::json!({ "type": "string", "format": "date-time", "description": d });
        json_schema!({
            "type": "object",
            "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
            "properties": {
                "name": string("Name must be unique within a namespace."),
                "generateName": string("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
                "namespace": string("Namespace defines the space within which each name must be unique."),
                "selfLink": string("Deprecated: selfLink is a legacy read-only field that is no longer populated by the system."),
                "uid": string("UID is the unique in time and space value for this object. Populated by the system. Read-only."),
                "resourceVersion": string("An opaque value that represents the internal version of this object, used for optimistic concurrency. Populated by the system. Read-only."),
                "generation": { "type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state. Populated by the system. Read-only." },
                "creationTimestamp": time("CreationTimestamp is a timestamp representing the server time when this object was created. Populated by the system. Read-only."),
                "deletionTimestamp": time("DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted. Populated by the system. Read-only."),
                "deletionGracePeriodSeconds": { "type": "integer", "format": "int64", "description": "Number of seconds allowed for this object to gracefully terminate before it will be removed from the system. Read-only." },
                "labels": string_map("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
                "annotations": string_map("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
                "ownerReferences": {
                    "type": "array",
                    "description": "List of objects depended by this object.",
                    "x-kubernetes-list-map-keys": ["uid"],
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-patch-merge-key": "uid",
                    "x-kubernetes-patch-strategy": "merge",
                    "items": {
                        "type": "object",
                        "x-kubernetes-map-type": "atomic",
                        "required": ["apiVersion", "kind", "name", "uid"],
                        "properties": {
                            "apiVersion": string("API version of the referent."),
                            "kind": string("Kind of the referent."),
                            "name": string("Name of the referent."),
                            "uid": string("UID of the referent."),
                            "controller": { "type": "boolean", "description": "If true, this reference points to the managing controller." },
                            "blockOwnerDeletion": { "type": "boolean", "description": "If true, AND if the owner has the \"foregroundDeletion\" finalizer, then the owner cannot be deleted from the key-value store until this reference is removed." }
                        }
                    }
                },
                "finalizers": { "type": "array", "items": { "type": "string" }, "description": "Must be empty before the object is deleted from the registry.",
                    "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge" },
                "managedFields": {
                    "type": "array",
                    "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow.",
                    "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
                }
            }
        })
    }
    fn inline_schema() -> bool {
        true
    }
}

impl JsonSchema for ListMeta {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "ListMeta describes metadata that synthetic resources must have, including lists and various status objects.",
            "properties": {
                "resourceVersion": { "type": "string" },
                "continue": { "type": "string" },
                "remainingItemCount": { "type": "integer", "format": "int64" },
                "selfLink": { "type": "string" }
            }
        })
    }
    fn inline_schema() -> bool {
        true
    }
}
