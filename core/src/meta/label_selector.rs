//! `LabelSelector`: the structured label query objects embed (selectors in specs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::json::null_as_default;

/// A label query: all `match_labels` and all `match_expressions` must hold; empty matches everything.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// `key: value` pairs that must all be present.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(btree_map = "string, string", tag = "1")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements that must all hold.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "2")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One set-based requirement: `key <operator> values`.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    /// The label key.
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist` (see [`LabelSelectorRequirement::IN`]).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "2")]
    pub operator: String,
    /// Values for `In`/`NotIn`; empty for `Exists`/`DoesNotExist`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, repeated, tag = "3")]
    pub values: Vec<String>,
}

impl LabelSelectorRequirement {
    /// The label's value is one of `values`.
    pub const IN: &'static str = "In";
    /// The label is absent or its value is not one of `values`.
    pub const NOT_IN: &'static str = "NotIn";
    /// The label is present.
    pub const EXISTS: &'static str = "Exists";
    /// The label is absent.
    pub const DOES_NOT_EXIST: &'static str = "DoesNotExist";
}
