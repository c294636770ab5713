//! The delete flow (upstream `Store.Delete`, `rest.BeforeDelete` and `updateForGracefulDeletionAndFinalizers`):
//! preconditions, graceful deletion, finalizers (an object with some is marked as being deleted and stays until
//! they are gone) and the garbage collector's finalizers for propagation policies.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::meta::{DeleteOptions, Time};
use crate::runtime::{GroupResource, Resource};
use crate::storage::{self, NewValue, Preconditions, StorageError, StoredObject, TryUpdate};

use super::{AdmissionCheck, Store};
use crate::registry::{ApiError, GarbageCollectionPolicy, OPTIMISTIC_LOCK_ERROR_MSG};

impl<T: Resource> Store<T> {
    /// Deletes an object (upstream `Store.Delete`): checks preconditions, then either removes it, or, when it has
    /// finalizers, the delete asks for garbage collection finalizers, or the strategy deletes gracefully, marks it
    /// as being deleted (`deletionTimestamp`) and leaves it until its finalizers are gone. Validating admission
    /// sees the stored object; with `dry_run` everything runs but the writes.
    pub async fn delete(
        &self,
        namespace: Option<&str>,
        name: &str,
        request: &DeleteRequest,
        admission: &dyn AdmissionCheck<T>,
    ) -> Result<Deletion<T>, ApiError> {
        let key = self.key(namespace, name)?;
        let resource = self.resource();
        let current = self
            .storage
            .get(&key, &storage::GetOptions::default())
            .await
            .map_err(|e| ApiError::from_storage(e, &resource, name))?;
        let object = self.decode(&current)?;
        let mut grace = request.grace_period_seconds;
        let (graceful, pending_graceful) =
            self.before_delete(&mut object.clone(), name, request, &mut grace)?;
        // Finalizers cannot be changed through DeleteOptions once a graceful deletion is pending.
        if pending_graceful {
            return Ok(Deletion::AlreadyPending(object));
        }
        let pending_finalizers = !object.metadata().finalizers.is_empty();
        let gc_update = self.gc_finalizers(&object, request).is_some();
        let mut storage_preconditions = self.storage_preconditions(&request.preconditions)?;
        let mut last_existing = None;
        if graceful || pending_finalizers || gc_update {
            match self
                .update_for_deletion(
                    &key,
                    name,
                    request,
                    admission,
                    &storage_preconditions,
                    current.clone(),
                    &object,
                )
                .await?
            {
                DeletionUpdate::Pending(object) => return Ok(Deletion::Pending(object)),
                DeletionUpdate::AlreadyPending(object) => {
                    return Ok(Deletion::AlreadyPending(object));
                }
                DeletionUpdate::DeleteNow => {}
                DeletionUpdate::GraceExpired(updated) => {
                    if request.dry_run {
                        return Ok(Deletion::Deleted(updated));
                    }
                    // The update moved the object on: the delete is conditional on that state.
                    if request.preconditions.resource_version.is_some() {
                        storage_preconditions.resource_version =
                            updated.metadata().resource_version.parse().ok();
                    }
                    last_existing = Some(updated);
                }
            }
        }
        if request.dry_run {
            admission.validate_delete(&object).await?;
            return Ok(Deletion::Deleted(object));
        }
        let mut validate = |current: StoredObject| async move {
            let object = self.decode(&current).map_err(ApiError::into_storage)?;
            admission
                .validate_delete(&object)
                .await
                .map_err(ApiError::into_storage)
        };
        match self
            .storage
            .delete(
                &key,
                Some(&storage_preconditions),
                &mut validate,
                Some(current),
            )
            .await
        {
            Ok(deleted) => Ok(Deletion::Deleted(self.decode(&deleted)?)),
            // A graceless delete raced with another: the object is gone either way.
            Err(e) if e.is_not_found() && last_existing.is_some() => {
                Ok(Deletion::Deleted(last_existing.unwrap_or(object)))
            }
            Err(StorageError::InvalidObj { .. }) => Err(preconditions_conflict(
                &precondition_resource::<T>(self.codec.group()),
                name,
                &request.preconditions,
                &object,
            )),
            Err(other) => Err(ApiError::from_storage(other, &resource, name)),
        }
    }

    /// The storage preconditions of a delete.
    fn storage_preconditions(
        &self,
        preconditions: &DeletePreconditions,
    ) -> Result<Preconditions, ApiError> {
        let mut storage_preconditions = Preconditions::new();
        if let Some(rv) = &preconditions.resource_version {
            let rv = rv.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version in precondition: {rv:?}"))
            })?;
            storage_preconditions = storage_preconditions.with_resource_version(rv);
        }
        if let Some(uid) = &preconditions.uid {
            let codec = self.codec.clone();
            storage_preconditions = storage_preconditions.with_uid(
                uid.clone(),
                Arc::new(move |bytes: &[u8]| {
                    codec
                        .decode_stored(bytes)
                        .map(|o| o.metadata().uid.clone())
                        .map_err(|e| StorageError::Internal(e.to_string()))
                }),
            );
        }
        Ok(storage_preconditions)
    }

    /// Upstream `rest.BeforeDelete`: checks the preconditions, then says whether this delete is graceful (and
    /// marks `object` so: deletionTimestamp in the future, deletionGracePeriodSeconds, generation + 1) or a
    /// graceful deletion is already pending. `grace` is the requested period, updated as upstream updates
    /// `options.GracePeriodSeconds`.
    fn before_delete(
        &self,
        object: &mut T,
        name: &str,
        request: &DeleteRequest,
        grace: &mut Option<i64>,
    ) -> Result<(bool, bool), ApiError> {
        request
            .preconditions
            .check(object, name, self.codec.group())?;
        // Negative values are treated as 1 s on the delete path.
        if grace.is_some_and(|g| g < 0) {
            *grace = Some(1);
        }
        let meta = object.metadata_mut();
        if meta.deletion_grace_period_seconds.is_some_and(|g| g < 0) {
            meta.deletion_grace_period_seconds = Some(1);
        }
        if !self.strategy.graceful_delete_supported() {
            return Ok((false, false));
        }
        if let Some(timestamp) = meta.deletion_timestamp {
            // Already being deleted: only a shorter grace period changes anything; a stored grace of 0 (or none)
            // means the delete itself failed before, so it is retried at once.
            let current = match meta.deletion_grace_period_seconds {
                None | Some(0) => return Ok((false, false)),
                Some(current) => current,
            };
            let Some(mut period) = *grace else {
                *grace = Some(current);
                return Ok((false, true));
            };
            if period >= current {
                return Ok((false, true));
            }
            let mut shortened = Time(deletion_time(
                deletion_time(timestamp.0, current.checked_neg().unwrap_or(i64::MAX))?,
                period,
            )?);
            let now = Time::now();
            if shortened < now {
                shortened = now;
                if period != 0 {
                    period = 1;
                }
            }
            meta.deletion_timestamp = Some(shortened);
            meta.deletion_grace_period_seconds = Some(period);
            return Ok((true, false));
        }
        if !self.strategy.check_graceful_delete(object, grace) {
            return Ok((false, false));
        }
        let Some(period) = *grace else {
            return Err(ApiError::internal(
                "options.GracePeriodSeconds should not be nil",
            ));
        };
        let meta = object.metadata_mut();
        meta.deletion_timestamp = Some(Time::from(deletion_time(chrono::Utc::now(), period)?));
        meta.deletion_grace_period_seconds = Some(period);
        if meta.generation > 0 {
            meta.generation += 1;
        }
        Ok((true, false))
    }

    /// Upstream `deletionFinalizersForGarbageCollection`: the finalizers the object should have for the garbage
    /// collector (`orphan`, `foregroundDeletion`) after this delete, or `None` when they are already right.
    fn gc_finalizers(&self, object: &T, request: &DeleteRequest) -> Option<Vec<String>> {
        let policy = self.strategy.garbage_collection_policy();
        if policy == GarbageCollectionPolicy::Unsupported {
            return None;
        }
        let finalizers = &object.metadata().finalizers;
        let first_gc_finalizer = finalizers.iter().find_map(|f| match f.as_str() {
            FINALIZER_ORPHAN_DEPENDENTS => Some(true),
            FINALIZER_DELETE_DEPENDENTS => Some(false),
            _ => None,
        });
        let policy_says = request.propagation_policy.as_deref();
        let orphan = match (request.orphan_dependents, policy_says) {
            (Some(orphan), _) => orphan,
            (None, Some(p)) => p == DeleteOptions::PROPAGATION_ORPHAN,
            (None, None) => {
                first_gc_finalizer.unwrap_or(policy == GarbageCollectionPolicy::OrphanDependents)
            }
        };
        let foreground = match (request.orphan_dependents, policy_says) {
            (Some(_), _) => false,
            (None, Some(p)) => p == DeleteOptions::PROPAGATION_FOREGROUND,
            (None, None) => first_gc_finalizer == Some(false),
        };
        let mut wanted: Vec<String> = finalizers
            .iter()
            .filter(|f| *f != FINALIZER_ORPHAN_DEPENDENTS && *f != FINALIZER_DELETE_DEPENDENTS)
            .cloned()
            .collect();
        if orphan {
            wanted.push(FINALIZER_ORPHAN_DEPENDENTS.to_string());
        }
        if foreground {
            wanted.push(FINALIZER_DELETE_DEPENDENTS.to_string());
        }
        let old: std::collections::BTreeSet<&String> = finalizers.iter().collect();
        let new: std::collections::BTreeSet<&String> = wanted.iter().collect();
        (old != new).then_some(wanted)
    }

    /// Upstream `updateForGracefulDeletionAndFinalizers`: writes the deletion marks (and garbage collection
    /// finalizers) in an optimistic update and says what the delete does next.
    #[allow(clippy::too_many_arguments)]
    async fn update_for_deletion(
        &self,
        key: &str,
        name: &str,
        request: &DeleteRequest,
        admission: &dyn AdmissionCheck<T>,
        preconditions: &Preconditions,
        current: StoredObject,
        original: &T,
    ) -> Result<DeletionUpdate<T>, ApiError> {
        let mut deletion = DeletionLoop {
            store: self,
            name,
            request,
            admission,
            last: None,
        };
        let revision = current.revision;
        let (attempt, stored) = if request.dry_run {
            (deletion.attempt(Some(current)).await?, None)
        } else {
            let stored = self
                .storage
                .guaranteed_update(
                    key,
                    false,
                    Some(preconditions),
                    &mut deletion,
                    Some(current),
                )
                .await
                .map_err(|e| match e {
                    StorageError::InvalidObj { .. } => preconditions_conflict(
                        &precondition_resource::<T>(self.codec.group()),
                        name,
                        &request.preconditions,
                        original,
                    ),
                    other => ApiError::from_storage(other, &self.resource(), name),
                })?;
            // The storage acted on the last attempt's decision.
            let attempt = deletion
                .last
                .ok_or_else(|| ApiError::internal("the deletion update made no attempt"))?;
            (attempt, Some(stored))
        };
        let (bytes, pending) = match attempt {
            DeletionAttempt::AlreadyPending => {
                return Ok(DeletionUpdate::AlreadyPending(original.clone()));
            }
            DeletionAttempt::DeleteNow => return Ok(DeletionUpdate::DeleteNow),
            DeletionAttempt::Mark { bytes, pending } => (bytes, pending),
        };
        let object = match stored {
            Some(stored) => self.decode(&stored)?,
            // A dry run: the object as it would have been written.
            None => {
                let mut object = self
                    .codec
                    .decode_stored(&bytes)
                    .map_err(ApiError::internal)?;
                object.metadata_mut().resource_version = revision.to_string();
                object
            }
        };
        Ok(if pending {
            DeletionUpdate::Pending(object)
        } else {
            DeletionUpdate::GraceExpired(object)
        })
    }
}

/// The finalizer with which the garbage collector orphans an object's dependents (upstream
/// `metav1.FinalizerOrphanDependents`).
pub const FINALIZER_ORPHAN_DEPENDENTS: &str = "orphan";
/// The finalizer with which the garbage collector deletes an object's dependents first (upstream
/// `metav1.FinalizerDeleteDependents`).
pub const FINALIZER_DELETE_DEPENDENTS: &str = "foregroundDeletion";

/// What a delete asks for: upstream's `DeleteOptions` after validation.
#[derive(Clone, Debug, Default)]
pub struct DeleteRequest {
    /// `preconditions`: the UID and resource version the object must have.
    pub preconditions: DeletePreconditions,
    /// Seconds until a graceful deletion; only strategies that delete gracefully use it.
    pub grace_period_seconds: Option<i64>,
    /// Deprecated `orphanDependents`.
    pub orphan_dependents: Option<bool>,
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// `dryRun=All`: check and answer, but do not delete.
    pub dry_run: bool,
}

/// How a delete ended.
#[derive(Clone, Debug)]
pub enum Deletion<T> {
    /// The object is gone (or, in a dry run, would be): upstream answers a `Status` of success.
    Deleted(T),
    /// The object is marked as being deleted (finalizers pending or a graceful deletion under way): upstream
    /// answers the updated object.
    Pending(T),
    /// A graceful deletion was already under way and this delete changed nothing: upstream answers a `Status`
    /// of success.
    AlreadyPending(T),
}

impl<T> Deletion<T> {
    /// The object as the delete left it (its last state when it was removed).
    pub fn object(&self) -> &T {
        match self {
            Deletion::Deleted(o) | Deletion::Pending(o) | Deletion::AlreadyPending(o) => o,
        }
    }

    /// Whether the object was removed now.
    pub fn deleted(&self) -> bool {
        matches!(self, Deletion::Deleted(_))
    }
}

/// What the deletion update did, as [`Store::update_for_deletion`] reports it.
enum DeletionUpdate<T> {
    Pending(T),
    AlreadyPending(T),
    /// Not graceful and no finalizers left: delete now.
    DeleteNow,
    /// Written with a grace period of 0: delete now, tolerating that another delete got there first.
    GraceExpired(T),
}

/// What one attempt of the deletion update decided, from the object it found.
enum DeletionAttempt {
    /// Write the deletion marks (and garbage collection finalizers), encoded as `bytes`; `pending`: finalizers
    /// are left or a grace period runs, so the object stays.
    Mark { bytes: Bytes, pending: bool },
    /// A graceful deletion is already under way and this delete changes nothing.
    AlreadyPending,
    /// Not graceful and no finalizers: nothing to mark, delete now.
    DeleteNow,
}

/// The deletion update, handed to [`Storage::guaranteed_update`](crate::storage::Storage::guaranteed_update):
/// each attempt decides from the object found, and the last decision, the one the storage acted on, stays in
/// `last`.
struct DeletionLoop<'a, T: Resource> {
    store: &'a Store<T>,
    name: &'a str,
    request: &'a DeleteRequest,
    admission: &'a dyn AdmissionCheck<T>,
    last: Option<DeletionAttempt>,
}

#[async_trait]
impl<T: Resource> TryUpdate for DeletionLoop<'_, T> {
    async fn try_update(
        &mut self,
        current: Option<StoredObject>,
    ) -> Result<NewValue, StorageError> {
        self.last = None;
        let attempt = self
            .attempt(current)
            .await
            .map_err(ApiError::into_storage)?;
        let value = match &attempt {
            DeletionAttempt::Mark { bytes, .. } => NewValue::Write(bytes.clone()),
            DeletionAttempt::AlreadyPending | DeletionAttempt::DeleteNow => NewValue::Keep,
        };
        self.last = Some(attempt);
        Ok(value)
    }
}

impl<T: Resource> DeletionLoop<'_, T> {
    /// One attempt on `current` (`None`: the object is gone).
    async fn attempt(&self, current: Option<StoredObject>) -> Result<DeletionAttempt, ApiError> {
        let (store, name, request) = (self.store, self.name, self.request);
        let stored = current.ok_or_else(|| ApiError::not_found(&store.resource(), name))?;
        let mut existing = store.decode(&stored)?;
        self.admission.validate_delete(&existing).await?;
        let mut grace = request.grace_period_seconds;
        let (graceful, pending) = store.before_delete(&mut existing, name, request, &mut grace)?;
        if pending {
            return Ok(DeletionAttempt::AlreadyPending);
        }
        if let Some(finalizers) = store.gc_finalizers(&existing, request) {
            existing.metadata_mut().finalizers = finalizers;
        }
        let pending_finalizers = !existing.metadata().finalizers.is_empty();
        if !graceful {
            if !pending_finalizers {
                return Ok(DeletionAttempt::DeleteNow);
            }
            mark_as_deleting(existing.metadata_mut());
        }
        let last_graceful = if graceful { grace.unwrap_or(0) } else { 0 };
        Ok(DeletionAttempt::Mark {
            bytes: store.encode(&existing)?,
            pending: pending_finalizers || last_graceful > 0,
        })
    }
}

/// Upstream `markAsDeleting`: deletionTimestamp now (unless already earlier), grace period 0, and generation + 1
/// on the first deletion.
fn mark_as_deleting(meta: &mut crate::meta::ObjectMeta) {
    let now = Time::now();
    if meta.deletion_timestamp.is_none() && meta.generation > 0 {
        meta.generation += 1;
    }
    if meta.deletion_timestamp.is_none_or(|t| t > now) {
        meta.deletion_timestamp = Some(now);
    }
    meta.deletion_grace_period_seconds = Some(0);
}

/// `DeleteOptions.preconditions`.
#[derive(Clone, Debug, Default)]
pub struct DeletePreconditions {
    /// The object's `metadata.uid` must be this.
    pub uid: Option<String>,
    /// The object's `metadata.resourceVersion` must be this.
    pub resource_version: Option<String>,
}

impl DeletePreconditions {
    fn check<T: Resource>(&self, object: &T, name: &str, group: &str) -> Result<(), ApiError> {
        let resource = precondition_resource::<T>(group);
        if let Some(uid) = &self.uid
            && *uid != object.metadata().uid
        {
            return Err(preconditions_conflict(&resource, name, self, object));
        }
        if let Some(rv) = &self.resource_version
            && *rv != object.metadata().resource_version
        {
            return Err(preconditions_conflict(&resource, name, self, object));
        }
        Ok(())
    }
}

/// Upstream's `rest.BeforeDelete` names the kind where the resource belongs (`Pizza.restaurant...`).
fn precondition_resource<T: Resource>(group: &str) -> GroupResource {
    GroupResource {
        group: group.to_string(),
        resource: T::KIND.to_string(),
    }
}

/// Upstream's precondition messages (`rest.BeforeDelete`).
fn preconditions_conflict<T: Resource>(
    resource: &GroupResource,
    name: &str,
    preconditions: &DeletePreconditions,
    object: &T,
) -> ApiError {
    let meta = object.metadata();
    let why = match (&preconditions.uid, &preconditions.resource_version) {
        (Some(uid), _) if *uid != meta.uid => format!(
            "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
            meta.uid
        ),
        (_, Some(rv)) => format!(
            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
            meta.resource_version
        ),
        _ => OPTIMISTIC_LOCK_ERROR_MSG.to_string(),
    };
    ApiError::conflict(resource, name, &why)
}

/// `from` moved by `seconds`, for a deletion timestamp. A grace period whose time cannot be written (past the
/// year 9999, which RFC 3339 and Go's encoder stop at) is a bad request: it overflowed chrono and panicked (a 500)
/// before; upstream's Go arithmetic wraps silently or fails to encode the object.
fn deletion_time(
    from: chrono::DateTime<chrono::Utc>,
    seconds: i64,
) -> Result<chrono::DateTime<chrono::Utc>, ApiError> {
    use chrono::Datelike;
    chrono::TimeDelta::try_seconds(seconds)
        .and_then(|delta| from.checked_add_signed(delta))
        .filter(|t| (0..=9999).contains(&t.year()))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "gracePeriodSeconds: Invalid value: {seconds}: the deletion time would be outside the years 0 to 9999"
            ))
        })
}
