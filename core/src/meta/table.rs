//! `Table`: server-side printing (`kubectl get`), served for
//! `Accept: application/json;as=Table;g=meta.k8s.io;v=v1`.
//!
//! Upstream has no protobuf for these (`+protobuf=false`: cells are arbitrary JSON), so neither do
//! we, except [`TableOptions`].

use serde::{Deserialize, Serialize};

use super::ListMeta;
use super::RawExtension;
use super::json::{null_as_default, typed_json};

/// Rows of printable columns. JSON: `kind` `Table`, `apiVersion` `meta.k8s.io/v1`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct Table {
    /// The list's metadata (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ListMeta,
    /// The columns, in order (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    pub column_definitions: Vec<TableColumnDefinition>,
    /// One row per object (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    pub rows: Vec<TableRow>,
}

typed_json!(Table, "Table", "meta.k8s.io/v1");

/// One column: its name, OpenAPI type and format, description and priority.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TableColumnDefinition {
    /// Header, e.g. `Name` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// OpenAPI type: `string`, `integer`, `number`, `boolean`, ... (always emitted).
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub type_: String,
    /// OpenAPI format, e.g. `name` for the name column, `date-time` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    pub format: String,
    /// For humans (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    pub description: String,
    /// 0 is shown by default; higher only with `-o wide` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    pub priority: i32,
}

/// One row: the cells, conditions, and optionally the object itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TableRow {
    /// One value per column: string, number, boolean, map, list or null (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    pub cells: Vec<serde_json::Value>,
    /// e.g. `Completed` for an object that has run to completion.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub conditions: Vec<TableRowCondition>,
    /// The object (per `includeObject`: none, its `PartialObjectMetadata`, or all of it), encoded
    /// in the table's format; `null` when left out, as Go (`omitempty` does not omit structs).
    #[serde(default)]
    pub object: RawExtension,
}

/// A condition of a row (how clients may style it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TableRowCondition {
    /// The condition type, e.g. `Completed` (always emitted).
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub type_: String,
    /// `True`, `False` or `Unknown` (always emitted).
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: String,
    /// Machine-readable reason.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub reason: String,
    /// For humans.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub message: String,
}

/// Options of a Table request: whether rows carry the object.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct TableOptions {
    /// `None`, `Metadata` (default) or `Object` (see [`TableOptions::INCLUDE_NONE`]).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "1")]
    pub include_object: String,
}

impl TableOptions {
    /// Rows carry no object.
    pub const INCLUDE_NONE: &'static str = "None";
    /// Rows carry the object's `PartialObjectMetadata` (the default).
    pub const INCLUDE_METADATA: &'static str = "Metadata";
    /// Rows carry the whole object.
    pub const INCLUDE_OBJECT: &'static str = "Object";
}
