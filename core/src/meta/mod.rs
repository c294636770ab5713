//! Wire types of `meta.k8s.io/v1`: what every object, list and API response is made of.

mod object_meta;
mod status;
mod time;
mod watch;

pub use object_meta::{
    FieldsV1, ListMeta, ManagedFieldsEntry, ObjectMeta, OwnerReference, TypeMeta, null_as_default,
};
pub use status::{Status, StatusCause, StatusDetails, reason};
pub use time::{MicroTime, Time};
pub use watch::{RawExtension, WatchEvent};
