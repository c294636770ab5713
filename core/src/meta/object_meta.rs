//! `TypeMeta`, `ObjectMeta`, `ListMeta` and what ObjectMeta holds (owner references, managed fields).
//!
//! JSON field names and omit-empty rules are upstream's json tags; protobuf tags are upstream's
//! `k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::Time;
use super::json::{deserialize_raw_json, is_zero_i64, null_as_default, serialize_raw_json};

/// `apiVersion` and `kind`: which schema a serialized object follows.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, prost::Message)]
pub struct TypeMeta {
    /// The kind, e.g. `Pizza`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "1")]
    pub kind: String,
    /// `group/version`, or `v1` for the core group.
    #[serde(
        default,
        rename = "apiVersion",
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "2")]
    pub api_version: String,
}

/// The metadata every persisted object has: identity, versioning, labels, ownership, lifecycle.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Unique within a namespace (or the cluster, for cluster-scoped kinds).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "1")]
    pub name: String,
    /// Prefix from which the server generates `name` when `name` is empty.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "2")]
    pub generate_name: String,
    /// The namespace; empty for cluster-scoped objects.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "3")]
    pub namespace: String,
    /// Deprecated upstream and no longer set; kept for clients that send it.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "4")]
    pub self_link: String,
    /// Unique in time and space; set by the server on create.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "5")]
    pub uid: String,
    /// Opaque version for optimistic concurrency and watches.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "6")]
    pub resource_version: String,
    /// Incremented by the server on each change of the desired state.
    #[serde(
        default,
        skip_serializing_if = "is_zero_i64",
        deserialize_with = "null_as_default"
    )]
    #[prost(int64, required, tag = "7")]
    pub generation: i64,
    /// Set on every stored object; omitted when unset (upstream's `omitzero`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(message, optional, tag = "8")]
    pub creation_timestamp: Option<Time>,
    /// When graceful deletion was requested; set by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    /// Seconds the object is given to terminate after `deletion_timestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(int64, optional, tag = "10")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// Identifying key/value pairs that selectors match.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(btree_map = "string, string", tag = "11")]
    pub labels: BTreeMap<String, String>,
    /// Non-identifying key/value pairs for tools.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(btree_map = "string, string", tag = "12")]
    pub annotations: BTreeMap<String, String>,
    /// Objects this one depends on (garbage collection).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReference>,
    /// Must all be removed before the object is deleted.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, repeated, tag = "14")]
    pub finalizers: Vec<String>,
    /// Which manager owns which fields (server-side apply).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "17")]
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

/// The metadata of a list: the revision it was read at and how to continue it.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    /// Deprecated upstream and no longer set.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "1")]
    pub self_link: String,
    /// The revision the list was read at; watch from it.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "2")]
    pub resource_version: String,
    /// Token for the next page; empty on the last page.
    #[serde(
        default,
        rename = "continue",
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "3")]
    pub continue_: String,
    /// Items after this page, when the server knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(int64, optional, tag = "4")]
    pub remaining_item_count: Option<i64>,
    /// Set when the list was read with a shard selector (alpha upstream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(message, optional, tag = "5")]
    pub shard_info: Option<ShardInfo>,
}

/// Which shard of a collection a list holds: the shard selector it was read with.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, prost::Message)]
pub struct ShardInfo {
    /// Always emitted (no `omitempty` upstream).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub selector: String,
}

/// A reference from a dependent to the object that owns it (garbage collection).
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// The owner's `apiVersion` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "5")]
    pub api_version: String,
    /// The owner's kind (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub kind: String,
    /// The owner's name (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "3")]
    pub name: String,
    /// The owner's UID (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "4")]
    pub uid: String,
    /// Whether the owner is the managing controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(bool, optional, tag = "6")]
    pub controller: Option<bool>,
    /// Whether foreground deletion of the owner waits for this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(bool, optional, tag = "7")]
    pub block_owner_deletion: Option<bool>,
}

/// Which manager owns which fields (server-side apply bookkeeping).
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct ManagedFieldsEntry {
    /// The manager's name, e.g. `kubectl`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "1")]
    pub manager: String,
    /// `Apply` or `Update`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "2")]
    pub operation: String,
    /// The version the fields are expressed in.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "3")]
    pub api_version: String,
    /// When the manager last changed these fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(message, optional, tag = "4")]
    pub time: Option<Time>,
    /// Format of `fields_v1`: `FieldsV1`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "6")]
    pub fields_type: String,
    /// The owned field set.
    #[serde(default, rename = "fieldsV1", skip_serializing_if = "Option::is_none")]
    #[prost(message, optional, tag = "7")]
    pub fields_v1: Option<FieldsV1>,
    /// The subresource the change went through, e.g. `status`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "8")]
    pub subresource: String,
}

/// A set of fields in the `FieldsV1` format: a JSON object kept verbatim (protobuf: its bytes in `Raw`).
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct FieldsV1 {
    /// The JSON text of the field set (empty reads as `null`).
    #[prost(bytes = "vec", tag = "1")]
    pub raw: Vec<u8>,
}

impl Serialize for FieldsV1 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_raw_json(&self.raw, s)
    }
}

impl<'de> Deserialize<'de> for FieldsV1 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(FieldsV1 {
            raw: deserialize_raw_json(d)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn empty_object_meta_is_empty_json() {
        assert_eq!(serde_json::to_string(&ObjectMeta::default()).unwrap(), "{}");
        let meta: ObjectMeta =
            serde_json::from_str(r#"{"labels":null,"finalizers":null,"name":null}"#).unwrap();
        assert_eq!(meta, ObjectMeta::default());
    }

    #[test]
    fn json_names_are_upstreams() {
        let meta = ObjectMeta {
            name: "margherita".into(),
            generate_name: "m-".into(),
            resource_version: "7".into(),
            deletion_grace_period_seconds: Some(30),
            labels: [("a".to_string(), "b".to_string())].into(),
            managed_fields: vec![ManagedFieldsEntry {
                manager: "kubectl".into(),
                fields_type: "FieldsV1".into(),
                fields_v1: Some(FieldsV1 {
                    raw: br#"{"f:spec":{}}"#.to_vec(),
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let json = serde_json::to_string(&meta).unwrap();
        assert_eq!(
            json,
            r#"{"name":"margherita","generateName":"m-","resourceVersion":"7","deletionGracePeriodSeconds":30,"labels":{"a":"b"},"managedFields":[{"manager":"kubectl","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]}"#
        );
        let back: ObjectMeta = serde_json::from_str(&json).unwrap();
        assert_eq!(back, meta);
        assert_eq!(
            ObjectMeta::decode(meta.encode_to_vec().as_slice()).unwrap(),
            meta
        );
    }

    #[test]
    fn list_meta_continue() {
        let meta = ListMeta {
            continue_: "abc".into(),
            remaining_item_count: Some(0),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&meta).unwrap(),
            r#"{"continue":"abc","remainingItemCount":0}"#
        );
    }
}
