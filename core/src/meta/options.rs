//! Query/body options of each verb (`ListOptions`, `DeleteOptions`, ...), as clients send them.
//!
//! Upstream embeds `TypeMeta` in each; we accept `kind`/`apiVersion` on input (ignored) and do not
//! write them (the codec adds them where a body needs them).

use serde::{Deserialize, Serialize};

use super::json::{is_false, is_zero_i64, null_as_default};

/// `dryRun=All`, the only dry-run value upstream accepts.
pub const DRY_RUN_ALL: &str = "All";

/// Options of a list or watch: selectors, consistency, paging, bookmarks.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct ListOptions {
    /// Label selector, e.g. `a=b,c in (d)`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "1")]
    pub label_selector: String,
    /// Field selector, e.g. `metadata.name=x`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "2")]
    pub field_selector: String,
    /// Watch instead of list.
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "null_as_default"
    )]
    #[prost(bool, required, tag = "3")]
    pub watch: bool,
    /// Ask for BOOKMARK events.
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "null_as_default"
    )]
    #[prost(bool, required, tag = "9")]
    pub allow_watch_bookmarks: bool,
    /// Resource version to read at (semantics depend on `resource_version_match`).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "4")]
    pub resource_version: String,
    /// `NotOlderThan` or `Exact` (see [`ListOptions::MATCH_NOT_OLDER_THAN`]).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "10")]
    pub resource_version_match: String,
    /// Time limit of a list or watch call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(int64, optional, tag = "5")]
    pub timeout_seconds: Option<i64>,
    /// Page size (0: no limit).
    #[serde(
        default,
        skip_serializing_if = "is_zero_i64",
        deserialize_with = "null_as_default"
    )]
    #[prost(int64, required, tag = "7")]
    pub limit: i64,
    /// Continue token of the previous page.
    #[serde(
        default,
        rename = "continue",
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "8")]
    pub continue_: String,
    /// Start a watch with synthetic ADDED events for the current state (watch-list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(bool, optional, tag = "11")]
    pub send_initial_events: Option<bool>,
    /// Which shard of the collection to return (alpha upstream).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "15")]
    pub shard_selector: String,
}

impl ListOptions {
    /// `resourceVersionMatch=NotOlderThan`: any state at least as new as `resourceVersion`.
    pub const MATCH_NOT_OLDER_THAN: &'static str = "NotOlderThan";
    /// `resourceVersionMatch=Exact`: the state at exactly `resourceVersion`.
    pub const MATCH_EXACT: &'static str = "Exact";
}

/// Options of a get: which resource version may be served.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct GetOptions {
    /// `""` (latest, from storage), `"0"` (any, cache) or a version.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "1")]
    pub resource_version: String,
}

/// Options of a delete: grace period, preconditions, how dependents are collected, dry run.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    /// Seconds before the object is deleted; 0 deletes at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(int64, optional, tag = "1")]
    pub grace_period_seconds: Option<i64>,
    /// Conditions that must hold for the delete to happen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(message, optional, tag = "2")]
    pub preconditions: Option<Preconditions>,
    /// Deprecated: use `propagation_policy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(bool, optional, tag = "3")]
    pub orphan_dependents: Option<bool>,
    /// `Orphan`, `Background` or `Foreground` (see [`DeleteOptions::PROPAGATION_ORPHAN`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(string, optional, tag = "4")]
    pub propagation_policy: Option<String>,
    /// `["All"]` for a dry run.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, repeated, tag = "5")]
    pub dry_run: Vec<String>,
    /// Delete even if the stored object cannot be decoded (dangerous).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(bool, optional, tag = "6")]
    pub ignore_store_read_error_with_cluster_breaking_potential: Option<bool>,
}

impl DeleteOptions {
    /// Leave dependents in place.
    pub const PROPAGATION_ORPHAN: &'static str = "Orphan";
    /// Delete the owner now and dependents in the background.
    pub const PROPAGATION_BACKGROUND: &'static str = "Background";
    /// Delete dependents first, then the owner.
    pub const PROPAGATION_FOREGROUND: &'static str = "Foreground";
}

/// What must still be true of the stored object for a delete (or update) to go ahead.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    /// The object's UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(string, optional, tag = "1")]
    pub uid: Option<String>,
    /// The object's resource version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(string, optional, tag = "2")]
    pub resource_version: Option<String>,
}

/// Options of a create.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct CreateOptions {
    /// `["All"]` for a dry run.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, repeated, tag = "1")]
    pub dry_run: Vec<String>,
    /// Who makes the change (managed fields).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "3")]
    pub field_manager: String,
    /// `Ignore`, `Warn` (default) or `Strict`: what to do with unknown or duplicate fields.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "4")]
    pub field_validation: String,
}

/// Options of a patch (including server-side apply).
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct PatchOptions {
    /// `["All"]` for a dry run.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, repeated, tag = "1")]
    pub dry_run: Vec<String>,
    /// Server-side apply: take over fields owned by other managers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(bool, optional, tag = "2")]
    pub force: Option<bool>,
    /// Who makes the change; required for apply.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "3")]
    pub field_manager: String,
    /// `Ignore`, `Warn` (default) or `Strict`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "4")]
    pub field_validation: String,
}

/// Options of an update.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct UpdateOptions {
    /// `["All"]` for a dry run.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, repeated, tag = "1")]
    pub dry_run: Vec<String>,
    /// Who makes the change (managed fields).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "2")]
    pub field_manager: String,
    /// `Ignore`, `Warn` (default) or `Strict`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "3")]
    pub field_validation: String,
}
