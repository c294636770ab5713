//! Aggregated discovery (`apidiscovery.k8s.io/v2`): every group, version and resource in one
//! response to `GET /apis` with `Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`.

use serde::{Deserialize, Serialize};

use super::json::{null_as_default, typed_json};
use super::{ListMeta, ObjectMeta};

/// [`APIResourceDiscovery::scope`] of cluster-wide resources.
pub const SCOPE_CLUSTER: &str = "Cluster";
/// [`APIResourceDiscovery::scope`] of namespaced resources.
pub const SCOPE_NAMESPACE: &str = "Namespaced";
/// [`APIVersionDiscovery::freshness`]: the document is current.
pub const DISCOVERY_FRESHNESS_CURRENT: &str = "Current";
/// [`APIVersionDiscovery::freshness`]: the aggregator could not refresh it.
pub const DISCOVERY_FRESHNESS_STALE: &str = "Stale";

/// All groups. JSON: `kind` `APIGroupDiscoveryList`, `apiVersion` `apidiscovery.k8s.io/v2`.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct APIGroupDiscoveryList {
    /// The list's metadata (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, required, tag = "1")]
    pub metadata: ListMeta,
    /// One entry per group, in priority order (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<APIGroupDiscovery>,
}

typed_json!(
    APIGroupDiscoveryList,
    "APIGroupDiscoveryList",
    "apidiscovery.k8s.io/v2"
);

/// One group; its name is `metadata.name`. Writes no `kind` (list items have none upstream).
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct APIGroupDiscovery {
    /// Only `name` is set (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, required, tag = "1")]
    pub metadata: ObjectMeta,
    /// Versions, preferred first.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "2")]
    pub versions: Vec<APIVersionDiscovery>,
}

/// One version of a group and its resources.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct APIVersionDiscovery {
    /// e.g. `v1beta1` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub version: String,
    /// The resources (subresources are nested in them).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "2")]
    pub resources: Vec<APIResourceDiscovery>,
    /// [`DISCOVERY_FRESHNESS_CURRENT`] or [`DISCOVERY_FRESHNESS_STALE`].
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "3")]
    pub freshness: String,
}

/// One resource of a group version.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct APIResourceDiscovery {
    /// Plural name, e.g. `pizzas` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub resource: String,
    /// The kind served, e.g. `{group, version, kind: Pizza}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(message, optional, tag = "2")]
    pub response_kind: Option<GroupVersionKind>,
    /// [`SCOPE_NAMESPACE`] or [`SCOPE_CLUSTER`] (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "3")]
    pub scope: String,
    /// Singular name, e.g. `pizza` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "4")]
    pub singular_resource: String,
    /// Supported verbs (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, repeated, tag = "5")]
    pub verbs: Vec<String>,
    /// Short names.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, repeated, tag = "6")]
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, repeated, tag = "7")]
    pub categories: Vec<String>,
    /// Subresources, e.g. `status`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "8")]
    pub subresources: Vec<APISubresourceDiscovery>,
}

/// One subresource of a resource, e.g. `status` or `scale`.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct APISubresourceDiscovery {
    /// e.g. `status` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub subresource: String,
    /// The kind served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(message, optional, tag = "2")]
    pub response_kind: Option<GroupVersionKind>,
    /// Kinds accepted in request bodies, when they differ from `response_kind`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "3")]
    pub accepted_types: Vec<GroupVersionKind>,
    /// Supported verbs (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, repeated, tag = "4")]
    pub verbs: Vec<String>,
}

/// A group, version and kind on the wire (`meta/v1.GroupVersionKind`), as discovery names kinds.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct GroupVersionKind {
    /// Group; `""` for the core group (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub group: String,
    /// Version (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "2")]
    pub version: String,
    /// Kind (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "3")]
    pub kind: String,
}
