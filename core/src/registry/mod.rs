//! The registry: the generic [`Store`] over a hub type with per-type [`Strategy`] hooks, and the API errors its
//! flows produce. It knows hub types and storage, never HTTP.

mod error;
mod object_meta;
mod store;
mod strategy;

pub use error::{ApiError, Cause, Details, OPTIMISTIC_LOCK_ERROR_MSG};
pub use object_meta::{
    generate_name, validate_field_manager, validate_object_meta, validate_object_meta_update,
};
pub use store::{
    AdmissionCheck, DeletePreconditions, DeleteRequest, Deletion, FINALIZER_DELETE_DEPENDENTS,
    FINALIZER_ORPHAN_DEPENDENTS, ListRequest, MAX_OBJECT_BYTES, NoAdmission, ObjectList, Replace,
    Store, UpdatedObject, WatchChange, WatchChanges, WatchItem, WatchItems, WriteOptions, Written,
    attrs_of,
};
pub use strategy::{DefaultStrategy, GarbageCollectionPolicy, Strategy};
