//! Legacy discovery: `/api` ([`APIVersions`]), `/apis` ([`APIGroupList`]), `/apis/<group>`
//! ([`APIGroup`]) and `/apis/<group>/<version>` ([`APIResourceList`]).

use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Serialize};

use super::json::{null_as_default, typed_json};

/// `/api`: the versions of the legacy core group. JSON: `kind` `APIVersions`, `apiVersion` `v1`.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct APIVersions {
    /// e.g. `["v1"]` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, repeated, tag = "1")]
    pub versions: Vec<String>,
    /// Where clients in each network should reach the server (always emitted).
    #[serde(
        default,
        rename = "serverAddressByClientCIDRs",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "2")]
    pub server_address_by_client_cidrs: Vec<ServerAddressByClientCIDR>,
}

typed_json!(APIVersions, "APIVersions", "v1");

/// `/apis`: every group the server serves. JSON: `kind` `APIGroupList`, `apiVersion` `v1`.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct APIGroupList {
    /// The groups (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, repeated, tag = "1")]
    pub groups: Vec<APIGroup>,
}

typed_json!(APIGroupList, "APIGroupList", "v1");

/// One API group and its versions (`/apis/<group>`).
///
/// Writes no `kind`: inside an [`APIGroupList`] upstream's items have none; served alone, the
/// codec adds `kind: APIGroup`, `apiVersion: v1`.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct APIGroup {
    /// The group name (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub name: String,
    /// Served versions, preferred first (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, repeated, tag = "2")]
    pub versions: Vec<GroupVersionForDiscovery>,
    /// The version clients should use (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, required, tag = "3")]
    pub preferred_version: GroupVersionForDiscovery,
    /// Where clients in each network should reach the server.
    #[serde(
        default,
        rename = "serverAddressByClientCIDRs",
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "4")]
    pub server_address_by_client_cidrs: Vec<ServerAddressByClientCIDR>,
}

/// Where clients whose address is in `client_cidr` should reach the server.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct ServerAddressByClientCIDR {
    /// A CIDR, e.g. `0.0.0.0/0` (always emitted).
    #[serde(default, rename = "clientCIDR", deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub client_cidr: String,
    /// `host:port` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "2")]
    pub server_address: String,
}

/// One version of a group: `group/version` and `version`.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct GroupVersionForDiscovery {
    /// `group/version` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub group_version: String,
    /// `version` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "2")]
    pub version: String,
}

/// `/apis/<group>/<version>`: the resources of one group version. JSON: `kind` `APIResourceList`, `apiVersion` `v1`.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct APIResourceList {
    /// `group/version` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub group_version: String,
    /// The resources and subresources (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, repeated, tag = "2")]
    pub resources: Vec<APIResource>,
}

typed_json!(APIResourceList, "APIResourceList", "v1");

/// One resource (or subresource, named `pizzas/status`) of a group version.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct APIResource {
    /// Plural name, e.g. `pizzas` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub name: String,
    /// Singular name, e.g. `pizza` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "6")]
    pub singular_name: String,
    /// Whether objects live in namespaces (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(bool, required, tag = "2")]
    pub namespaced: bool,
    /// Group, when it differs from the list's (subresources of another group).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "8")]
    pub group: String,
    /// Version, when it differs from the list's.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "9")]
    pub version: String,
    /// Kind, e.g. `Pizza` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "3")]
    pub kind: String,
    /// Supported verbs (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, required, tag = "4")]
    pub verbs: Verbs,
    /// Short names, e.g. `pz`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, repeated, tag = "5")]
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, repeated, tag = "7")]
    pub categories: Vec<String>,
    /// Hash of the storage version, so clients notice storage migrations.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "10")]
    pub storage_version_hash: String,
}

/// The verbs of an [`APIResource`]: a JSON array of strings; in protobuf a `Verbs` message
/// (`repeated string items = 1`), as upstream.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, prost::Message)]
#[serde(transparent)]
pub struct Verbs {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    #[prost(string, repeated, tag = "1")]
    pub items: Vec<String>,
}

impl Deref for Verbs {
    type Target = Vec<String>;
    fn deref(&self) -> &Vec<String> {
        &self.items
    }
}

impl DerefMut for Verbs {
    fn deref_mut(&mut self) -> &mut Vec<String> {
        &mut self.items
    }
}

impl From<Vec<String>> for Verbs {
    fn from(items: Vec<String>) -> Self {
        Verbs { items }
    }
}

impl<const N: usize> From<[&str; N]> for Verbs {
    fn from(items: [&str; N]) -> Self {
        Verbs {
            items: items.iter().map(|v| v.to_string()).collect(),
        }
    }
}
