//! The per-type hooks of the generic store (upstream `rest.RESTCreateStrategy`, `RESTUpdateStrategy`, ...).

use crate::runtime::Resource;
use crate::validation::ErrorList;

/// What makes one resource different from another inside the generic [`Store`](super::Store): how objects are
/// prepared, validated and normalised on create and update. Every method has upstream's neutral default, so a
/// strategy implements only what its type needs.
pub trait Strategy<T: Resource>: Send + Sync + 'static {
    /// Clears or sets fields the server owns before a create (e.g. status, generation).
    fn prepare_for_create(&self, _object: &mut T) {}

    /// Carries over fields the client may not change on update (e.g. status), bumps generation on spec changes.
    fn prepare_for_update(&self, _new: &mut T, _old: &T) {}

    /// Validates a new object.
    fn validate(&self, _object: &T) -> ErrorList {
        ErrorList::default()
    }

    /// Validates an update. By default as a new object ([`Strategy::validate`]), so that an update cannot make
    /// what a create would refuse; override it for rules that compare with `old` (immutable fields).
    fn validate_update(&self, new: &T, _old: &T) -> ErrorList {
        self.validate(new)
    }

    /// Validates an update through the `status` subresource, after the store has carried everything but status
    /// over from the stored object (upstream's status strategy `ValidateUpdate`).
    fn validate_status_update(&self, _new: &T, _old: &T) -> ErrorList {
        ErrorList::default()
    }

    /// Warnings returned to the client (`Warning` headers) for a valid create.
    fn warnings_on_create(&self, _object: &T) -> Vec<String> {
        Vec::new()
    }

    /// Warnings returned to the client for a valid update.
    fn warnings_on_update(&self, _new: &T, _old: &T) -> Vec<String> {
        Vec::new()
    }

    /// Normalises an object after validation, before it is stored.
    fn canonicalize(&self, _object: &mut T) {}

    /// Whether PUT of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Whether PUT without `metadata.resourceVersion` overwrites whatever is stored.
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    /// Whether objects are deleted gracefully (upstream's strategy implementing `RESTGracefulDeleteStrategy`, as
    /// pods do): a delete then sets `deletionTimestamp` in the future and leaves the object for another actor to
    /// delete with a grace period of 0. The default deletes at once (when no finalizers are pending).
    fn graceful_delete_supported(&self) -> bool {
        false
    }

    /// Upstream `CheckGracefulDelete`, asked only when [`Strategy::graceful_delete_supported`]: whether this
    /// delete is graceful, setting `grace_period_seconds` (the request's, if any) to the period to use.
    fn check_graceful_delete(&self, _object: &T, _grace_period_seconds: &mut Option<i64>) -> bool {
        false
    }

    /// What the garbage collector does with dependents when a delete does not say (upstream
    /// `DefaultGarbageCollectionPolicy`).
    fn garbage_collection_policy(&self) -> GarbageCollectionPolicy {
        GarbageCollectionPolicy::DeleteDependents
    }
}

/// The garbage collection policy of a type (upstream `rest.GarbageCollectionPolicy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GarbageCollectionPolicy {
    /// Dependents are deleted (in the background unless the delete asks for the foreground); upstream's default.
    #[default]
    DeleteDependents,
    /// Dependents are orphaned unless the delete says otherwise: the `orphan` finalizer is added on delete.
    OrphanDependents,
    /// The type takes no part in garbage collection: deletes never add `orphan` or `foregroundDeletion`.
    Unsupported,
}

/// The strategy of a type with no special rules.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultStrategy;

impl<T: Resource> Strategy<T> for DefaultStrategy {}

/// A validation function is a strategy: `app.store(codec, validate_pizza)` for a type whose only rule is
/// `fn(&T) -> ErrorList`, checked on create and (as [`Strategy::validate_update`] does by default) on update.
impl<T: Resource, F: Fn(&T) -> ErrorList + Send + Sync + 'static> Strategy<T> for F {
    fn validate(&self, object: &T) -> ErrorList {
        self(object)
    }
}
