//! Objects and their types: group/version/kind names, the hub/versioned traits the derives implement,
//! field-by-field conversion, and the list wrapper.

mod columns;
mod convert;
mod gvk;
pub(crate) mod json_patch;
mod list;
mod patch;
mod protobuf_tags;
mod resource;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod round_trip;
pub(crate) mod rules;
mod schema;
mod scheme;
mod versioned;

pub use convert::{ConversionError, ConversionResult, Convert, conversion_result, convert_field};
pub use gvk::{GroupKind, GroupResource, GroupVersion, GroupVersionKind, GroupVersionResource};
pub use list::{List, ListWriter};
pub use patch::PatchMetadata;
#[doc(hidden)]
pub use patch::{
    AnnotateWithPatchMetadata, AnnotateWithoutPatchMetadata, PatchProbe, schema_property,
    set_list_type, set_map_type, set_patch_metadata,
};
#[doc(hidden)]
pub use protobuf_tags::{NestedTags, NoNestedTags, TagProbe, tag_path};
pub use protobuf_tags::{ProtobufTags, check_protobuf_tags};
pub use resource::{PrinterColumn, Resource, ScalePaths, Scope};
#[doc(hidden)]
pub use rules::{ValidationRule, add_validation_rule};
pub use schema::openapi_schema;
pub use scheme::{
    DecodeError, Decoded, EncodeError, KindDescription, ResourceCodec, SubresourceDescription,
    storage_version_hash,
};
pub use versioned::Versioned;
