//! Served versions of a hub type.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{ConversionError, Resource};

/// One served version of a hub type: the wire shape (serde and prost), its defaults, and its conversion to and from
/// the hub.
///
/// Implemented by `#[derive(Versioned)]` on the root struct of a version. Defaults run on the wire value before
/// conversion, and never when converting from the hub (as upstream).
///
/// Defaults and conversions may refuse a value with field errors ([`ConversionError`], paths relative to the
/// root object). A request body refused so is answered 422 `Invalid` naming each field and the value sent, and
/// nothing is written. An object that cannot be written in a version (`from_hub` fails: the hub holds what the
/// version cannot say) or a stored object that cannot be read (`to_hub` fails on what an older server stored) is
/// the server's fault: 500 `InternalError` naming the object and the field errors.
pub trait Versioned:
    Serialize + DeserializeOwned + prost::Message + Default + Clone + PartialEq + Send + Sync + 'static
{
    /// The hub type this version converts to and from.
    type Hub: Resource;
    /// The version name, e.g. `v1beta1`.
    const VERSION: &'static str;

    /// Whether this version keeps what it cannot express of the hub in an annotation, so that no object loses data
    /// by being written in this version (the storage version, or a client's) and read back in another
    /// (`#[versioned(lossless)]`). See [`ResourceCodec::version`](super::ResourceCodec::version).
    const LOSSLESS: bool = false;

    /// This version's printer columns (`#[apiserver::served(..., printcolumn(...))]`), as a CRD declares
    /// `additionalPrinterColumns` per version: a field may be absent or typed differently in another version.
    /// `None` uses the hub's ([`Resource::PRINTER_COLUMNS`]).
    const PRINTER_COLUMNS: Option<&'static [super::PrinterColumn]> = None;

    /// Applies this version's defaults to a value decoded from the wire.
    fn set_defaults(&mut self) -> Result<(), ConversionError> {
        Ok(())
    }

    /// This value converted to the hub.
    fn to_hub(&self) -> Result<Self::Hub, ConversionError>;
    /// `hub` converted to this version; no defaults are applied.
    fn from_hub(hub: &Self::Hub) -> Result<Self, ConversionError>;

    /// The protobuf tag of every field of this version by JSON path (`spec.toppings.quantity`), for
    /// [`protobuf_tags_test!`](crate::protobuf_tags_test); the derive lists them (from [`ProtobufTags`](super::ProtobufTags)).
    fn protobuf_tags() -> Vec<(String, u32)> {
        Vec::new()
    }

    /// `metadata.name` of this value, to name it in errors; empty when the type has no metadata.
    fn object_name(&self) -> &str {
        ""
    }

    /// The OpenAPI v3 schema of this version's root type (structural, as Kubernetes publishes). Without one a
    /// type is published as an object that keeps unknown fields.
    ///
    /// It is also this version's patch schema: its `x-kubernetes-patch-strategy` and
    /// `x-kubernetes-patch-merge-key` (from [`PatchMetadata`](super::PatchMetadata), which the derive adds) say how
    /// a strategic merge patch treats each field; without them every list is replaced whole.
    fn openapi_schema() -> serde_json::Value {
        serde_json::json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
    }

    /// The `apiVersion` of this version, e.g. `restaurant.programming-kubernetes.info/v1beta1`.
    fn api_version() -> String {
        <Self::Hub as Resource>::group_version(Self::VERSION).api_version()
    }
}
