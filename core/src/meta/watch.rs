//! `WatchEvent`: one event of a watch stream as it goes over the wire.

use serde::{Deserialize, Serialize};

/// An already-encoded object inside another message (`runtime.RawExtension`): JSON text inline in JSON, the
/// object's full `k8s\0` encoding in protobuf.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct RawExtension {
    #[prost(bytes = "vec", tag = "1")]
    pub raw: Vec<u8>,
}

impl Serialize for RawExtension {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = std::str::from_utf8(&self.raw).map_err(serde::ser::Error::custom)?;
        let raw: &serde_json::value::RawValue =
            serde_json::from_str(if text.is_empty() { "null" } else { text })
                .map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

impl<'de> Deserialize<'de> for RawExtension {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Ok(RawExtension {
            raw: serde_json::to_vec(&value).map_err(serde::de::Error::custom)?,
        })
    }
}

/// `{"type":"ADDED","object":{...}}`; `type` is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR (with a Status).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, prost::Message)]
pub struct WatchEvent {
    #[serde(rename = "type")]
    #[prost(string, tag = "1")]
    pub type_: String,
    #[prost(message, required, tag = "2")]
    pub object: RawExtension,
}
