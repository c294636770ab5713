//! Objects and their types: group/version/kind names, the hub/versioned traits the derives implement,
//! field-by-field conversion, and the list wrapper.

mod columns;
mod convert;
mod gvk;
pub(crate) mod json_patch;
mod list;
mod patch;
mod resource;
#[cfg(feature = "testing")]
pub mod round_trip;
pub(crate) mod rules;
mod schema;
mod scheme;
mod versioned;

pub use convert::{Convert, convert_field};
pub use gvk::{GroupKind, GroupResource, GroupVersion, GroupVersionKind, GroupVersionResource};
pub use list::{List, ListWriter};
pub use patch::PatchMetadata;
#[doc(hidden)]
pub use patch::{
    AnnotateWithPatchMetadata, AnnotateWithoutPatchMetadata, PatchProbe, schema_property,
    set_list_type, set_map_type, set_patch_metadata,
};
pub use resource::{PrinterColumn, Resource, ScalePaths, Scope};
#[doc(hidden)]
pub use rules::{ValidationRule, add_validation_rule};
pub use schema::openapi_schema;
pub use scheme::{
    DecodeError, Decoded, EncodeError, KindDescription, ResourceCodec, SubresourceDescription,
    storage_version_hash,
};
pub use versioned::Versioned;
