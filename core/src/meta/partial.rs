//! `PartialObjectMetadata(List)`: objects reduced to their metadata, served for
//! `Accept: ...;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` (garbage collector, namespace
//! controller, metadata informers).

use serde::{Deserialize, Serialize};

use super::json::{null_as_default, typed_json};
use super::{ListMeta, ObjectMeta};

/// Any object, metadata only. JSON: `kind` `PartialObjectMetadata`, `apiVersion` `meta.k8s.io/v1`.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct PartialObjectMetadata {
    /// The object's metadata (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, required, tag = "1")]
    pub metadata: ObjectMeta,
}

typed_json!(
    PartialObjectMetadata,
    "PartialObjectMetadata",
    "meta.k8s.io/v1"
);

/// A list of objects, metadata only (each item carries its own `kind`/`apiVersion`, as upstream).
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct PartialObjectMetadataList {
    /// The list's metadata (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, required, tag = "1")]
    pub metadata: ListMeta,
    /// The items (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<PartialObjectMetadata>,
}

typed_json!(
    PartialObjectMetadataList,
    "PartialObjectMetadataList",
    "meta.k8s.io/v1"
);
