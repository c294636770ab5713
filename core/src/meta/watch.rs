//! `WatchEvent`: one change in a watch stream, with the object already encoded.

use serde::{Deserialize, Deserializer, Serialize};

use super::json::{deserialize_raw_json, null_as_default, serialize_raw_json};

/// The values of [`WatchEvent::type_`].
pub mod event_type {
    /// An object was created (or is part of the initial state).
    pub const ADDED: &str = "ADDED";
    /// An object was changed.
    pub const MODIFIED: &str = "MODIFIED";
    /// An object was deleted; the event carries its last state.
    pub const DELETED: &str = "DELETED";
    /// No change: the stream has reached the object's `resourceVersion`.
    pub const BOOKMARK: &str = "BOOKMARK";
    /// The watch failed; the object is a `Status`.
    pub const ERROR: &str = "ERROR";
}

/// One event of a watch: its type and the object, encoded once in the response's format.
///
/// JSON: `{"type":"ADDED","object":{...}}` with the object's bytes embedded verbatim. Protobuf:
/// `type = 1`, `object = 2` as `runtime.RawExtension{raw = 1}` holding the object's full
/// protobuf encoding (with its `k8s\0` envelope).
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, prost::Message)]
pub struct WatchEvent {
    /// One of [`event_type`] (always emitted).
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub type_: String,
    /// The encoded object (always emitted).
    #[serde(default)]
    #[prost(message, required, tag = "2")]
    pub object: RawExtension,
}

impl WatchEvent {
    /// An event of the given type around an already encoded object.
    pub fn new(type_: &str, object: impl Into<Vec<u8>>) -> Self {
        WatchEvent {
            type_: type_.to_string(),
            object: RawExtension { raw: object.into() },
        }
    }
}

/// An object kept as its encoded bytes (`runtime.RawExtension`): JSON text in JSON documents,
/// the enveloped protobuf in protobuf ones. Empty bytes are JSON `null`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct RawExtension {
    /// The encoded object.
    #[prost(bytes = "vec", tag = "1")]
    pub raw: Vec<u8>,
}

impl Serialize for RawExtension {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_raw_json(&self.raw, s)
    }
}

impl<'de> Deserialize<'de> for RawExtension {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(RawExtension {
            raw: deserialize_raw_json(d)?,
        })
    }
}

impl RawExtension {
    /// Whether there is no object (JSON `null`).
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }
}
