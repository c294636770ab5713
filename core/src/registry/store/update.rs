//! The update flow (upstream `Store.Update` and `rest.BeforeUpdate`): PUT, PATCH and controller writes through the
//! storage's optimistic loop, each attempt a typed decision ([`Attempt`]) on the object it found. An update of an
//! object that does not exist may create it; one that empties the finalizers of an object being deleted deletes
//! it. [`Store::modify`] is the read-modify-write for controllers.

use async_trait::async_trait;
use bytes::Bytes;

use crate::runtime::Resource;
use crate::storage::{self, NewValue, Preconditions, StorageError, StoredObject, TryUpdate};
use crate::validation::{FieldError, Path};

use super::{AdmissionCheck, Store, UpdatedObject, WriteOptions, Written};
use crate::registry::object_meta::{
    fill_system_fields, validate_object_meta_update, wipe_system_fields,
};
use crate::registry::{ApiError, OPTIMISTIC_LOCK_ERROR_MSG};

impl<T: Resource> Store<T> {
    /// Upstream `rest.BeforeUpdate`: namespace, immutable system fields, strategy preparation and validation.
    fn before_update(
        &self,
        object: &mut T,
        old: &T,
        namespace: Option<&str>,
    ) -> Result<Vec<String>, ApiError> {
        Self::reconcile_namespace(object, namespace)?;
        if self.status_only {
            return self.before_status_update(object, old);
        }
        if T::has_status_subresource() {
            object.copy_status_from(old);
        }
        let old_meta = old.metadata();
        let meta = object.metadata_mut();
        meta.generation = old_meta.generation;
        if meta.uid.is_empty() {
            meta.uid = old_meta.uid.clone();
        }
        meta.creation_timestamp = old_meta.creation_timestamp;
        if old_meta.deletion_timestamp.is_some() {
            meta.deletion_timestamp = old_meta.deletion_timestamp;
        }
        if meta.deletion_grace_period_seconds.is_none() {
            meta.deletion_grace_period_seconds = old_meta.deletion_grace_period_seconds;
        }
        if self.desired_state(object)? != self.desired_state(old)? {
            object.metadata_mut().generation = old.metadata().generation + 1;
        }
        self.strategy.prepare_for_update(object, old);
        let mut errors =
            validate_object_meta_update(object.metadata(), old.metadata(), T::namespaced());
        errors.extend(self.strategy.validate_update(object, old));
        errors.extend(self.codec.rule_errors(object, Some(old)));
        if !errors.is_empty() {
            return Err(ApiError::invalid(
                &self.kind(),
                &object.metadata().name,
                &errors,
            ));
        }
        let warnings = self.strategy.warnings_on_update(object, old);
        self.strategy.canonicalize(object);
        Ok(warnings)
    }

    /// An update through the `status` subresource (upstream's CRD status strategy): the stored object with the
    /// new status and managed fields; every other change (spec, labels, annotations, finalizers) is dropped.
    fn before_status_update(&self, object: &mut T, old: &T) -> Result<Vec<String>, ApiError> {
        let mut merged = old.clone();
        merged.copy_status_from(object);
        merged.metadata_mut().managed_fields =
            std::mem::take(&mut object.metadata_mut().managed_fields);
        *object = merged;
        let mut errors =
            validate_object_meta_update(object.metadata(), old.metadata(), T::namespaced());
        errors.extend(self.strategy.validate_status_update(object, old));
        errors.extend(self.codec.rule_errors(object, Some(old)));
        if !errors.is_empty() {
            return Err(ApiError::invalid(
                &self.kind(),
                &object.metadata().name,
                &errors,
            ));
        }
        self.strategy.canonicalize(object);
        Ok(Vec::new())
    }

    /// Updates (or, where allowed, creates) an object with optimistic concurrency (upstream `Store.Update`).
    pub async fn update(
        &self,
        namespace: Option<&str>,
        name: &str,
        updated: &dyn UpdatedObject<T>,
        options: WriteOptions<'_, T>,
    ) -> Result<Written<T>, ApiError> {
        self.run_update(namespace, name, updated, options, false)
            .await
    }

    /// Changes an existing object with `change`, for controllers: reads it, applies `change` to it and writes it
    /// with optimistic concurrency, again on the object as it is then after a conflict (so `change` may run more
    /// than once). Nothing is written when `change` leaves the object as it was. `Ok(None)` when the object does
    /// not exist (deleted since the controller queued it). Call it on [`Store::status`] for a status write: there
    /// only the status of the changed object is written. No admission, no dry run (use [`Store::update`] with
    /// [`WriteOptions`] for those).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use apiserver::meta::ObjectMeta;
    /// # use apiserver::registry::{ApiError, DefaultStrategy, Store, WriteOptions};
    /// # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
    /// # #[resource(group = "inventory.example.com", kind = "Item", namespaced, status)]
    /// # pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec, pub status: ItemStatus }
    /// # #[derive(Clone, Debug, Default, PartialEq)]
    /// # pub struct ItemSpec { pub quantity: i64 }
    /// # #[derive(Clone, Debug, Default, PartialEq)]
    /// # pub struct ItemStatus { pub reserved: i64 }
    /// # mod v1 {
    /// #     use apiserver::meta::ObjectMeta;
    /// #     #[apiserver::served(hub = "crate::Item", version = "v1")]
    /// #     pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec, pub status: ItemStatus }
    /// #     #[apiserver::served(hub = "crate::ItemSpec")]
    /// #     pub struct ItemSpec { pub quantity: i64 }
    /// #     #[apiserver::served(hub = "crate::ItemStatus")]
    /// #     pub struct ItemStatus { pub reserved: i64 }
    /// # }
    /// # #[apiserver::tokio::main(crate = "apiserver::tokio", flavor = "current_thread")]
    /// # async fn main() -> Result<(), ApiError> {
    /// # let storage = Arc::new(apiserver::storage::MemoryStorage::new());
    /// # let codec = apiserver::runtime::ResourceCodec::new().version::<v1::Item>();
    /// # let json = apiserver::codec::MediaType::Json;
    /// # let items: Store<Item> = Store::new(storage, "/registry", codec, Arc::new(DefaultStrategy), json).unwrap();
    /// # let mut bolts = Item::default();
    /// # (bolts.metadata.name, bolts.spec.quantity) = ("bolts".into(), 12);
    /// # items.create(Some("shop"), bolts, WriteOptions::default()).await?;
    /// let reserve = |item: &mut Item| item.status.reserved = item.spec.quantity;
    /// let written = items.status().modify(Some("shop"), "bolts", reserve).await?;
    /// assert_eq!(written.map(|w| w.object.status.reserved), Some(12));
    ///
    /// // Nothing to change: nothing is written.
    /// let before = items.find(Some("shop"), "bolts").await?.expect("bolts exist");
    /// let again = items.status().modify(Some("shop"), "bolts", reserve).await?;
    /// assert_eq!(again.map(|w| w.object), Some(before));
    ///
    /// // No such item: `None`, not an error.
    /// assert!(items.status().modify(Some("shop"), "nails", reserve).await?.is_none());
    /// assert!(items.find(Some("shop"), "nails").await?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn modify(
        &self,
        namespace: Option<&str>,
        name: &str,
        change: impl Fn(&mut T) + Send + Sync,
    ) -> Result<Option<Written<T>>, ApiError> {
        let resource = self.resource();
        let updated = |current: Option<&T>| -> Result<T, ApiError> {
            let mut object = current
                .cloned()
                .ok_or_else(|| ApiError::not_found(&resource, name))?;
            change(&mut object);
            Ok(object)
        };
        let options = WriteOptions::default();
        match self
            .run_update(namespace, name, &updated, options, true)
            .await
        {
            Ok(written) => Ok(Some(written)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The update flow; `skip_unchanged`: an update whose object equals the current one writes nothing.
    async fn run_update(
        &self,
        namespace: Option<&str>,
        name: &str,
        updated: &dyn UpdatedObject<T>,
        options: WriteOptions<'_, T>,
        skip_unchanged: bool,
    ) -> Result<Written<T>, ApiError> {
        let WriteOptions {
            admission,
            dry_run,
            allow_create,
        } = options;
        let key = self.key(namespace, name)?;
        let mut update = UpdateLoop {
            store: self,
            namespace,
            name,
            updated,
            admission,
            allow_create,
            skip_unchanged,
            last: None,
        };
        if dry_run {
            let current = match self
                .storage
                .get(&key, &storage::GetOptions::default())
                .await
            {
                Ok(stored) => Some(stored),
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(ApiError::from_storage(e, &self.resource(), name)),
            };
            // Everything but the write (or the delete): the answer is the object that would be written.
            return Ok(match update.attempt(current.as_ref()).await? {
                Attempt::Write {
                    mut object,
                    created,
                    warnings,
                    ..
                } => {
                    if let Some(current) = &current {
                        object.metadata_mut().resource_version = current.revision.to_string();
                    }
                    Written {
                        object,
                        created,
                        warnings,
                    }
                }
                Attempt::Unchanged(object) => Written {
                    object,
                    created: false,
                    warnings: Vec::new(),
                },
                Attempt::Delete {
                    object, warnings, ..
                } => Written {
                    object,
                    created: false,
                    warnings,
                },
            });
        }
        let stored = self
            .storage
            .guaranteed_update(&key, true, None, &mut update, None)
            .await
            .map_err(|e| ApiError::from_storage(e, &self.resource(), name))?;
        // The storage acted on the last attempt's decision.
        match update.last {
            Some(Attempt::Write {
                created, warnings, ..
            }) => Ok(Written {
                object: self.decode(&stored)?,
                created,
                warnings,
            }),
            Some(Attempt::Unchanged(_)) => Ok(Written {
                object: self.decode(&stored)?,
                created: false,
                warnings: Vec::new(),
            }),
            // Upstream answers a PUT or PATCH that ends in a delete with the updated object.
            Some(Attempt::Delete {
                object,
                revision,
                warnings,
            }) => {
                self.delete_emptied(&key, name, revision).await?;
                Ok(Written {
                    object,
                    created: false,
                    warnings,
                })
            }
            None => Err(ApiError::internal("the update made no attempt")),
        }
    }

    /// Completes an update that emptied the finalizers of an object being deleted by deleting it (upstream
    /// `deleteWithoutFinalizers`), on the condition that it is still at `revision`, the state the update saw: a
    /// finalizer added meanwhile keeps the object.
    async fn delete_emptied(&self, key: &str, name: &str, revision: u64) -> Result<(), ApiError> {
        let preconditions = Preconditions::new().with_resource_version(revision);
        match self
            .storage
            .delete(key, Some(&preconditions), &mut storage::AllowDeletion, None)
            .await
        {
            Ok(_) => Ok(()),
            // Several updates may race to remove the last finalizer.
            Err(e) if e.is_not_found() => Ok(()),
            Err(StorageError::InvalidObj { .. }) => Err(ApiError::conflict(
                &self.resource(),
                name,
                OPTIMISTIC_LOCK_ERROR_MSG,
            )),
            Err(e) => Err(ApiError::from_storage(e, &self.resource(), name)),
        }
    }
}

/// What one attempt of an update decided, from the object it found.
enum Attempt<T> {
    /// Write `object`, encoded as `bytes` (the storage writes nothing when they are the stored bytes); `created`
    /// when the object did not exist.
    Write {
        object: T,
        bytes: Bytes,
        created: bool,
        warnings: Vec<String>,
    },
    /// The update changed nothing ([`Store::modify`]): nothing to write; this is the current object.
    Unchanged(T),
    /// The update emptied the finalizers of an object being deleted: it is deleted instead, on the condition that
    /// it is still at `revision`; the answer is `object`, the updated object.
    Delete {
        object: T,
        revision: u64,
        warnings: Vec<String>,
    },
}

/// One update, handed to [`Storage::guaranteed_update`](crate::storage::Storage::guaranteed_update): each
/// attempt decides from the object found, and the last decision, the one the storage acted on, stays in `last`.
struct UpdateLoop<'a, T: Resource> {
    store: &'a Store<T>,
    namespace: Option<&'a str>,
    name: &'a str,
    updated: &'a dyn UpdatedObject<T>,
    admission: &'a dyn AdmissionCheck<T>,
    allow_create: bool,
    skip_unchanged: bool,
    last: Option<Attempt<T>>,
}

#[async_trait]
impl<T: Resource> TryUpdate for UpdateLoop<'_, T> {
    async fn try_update(
        &mut self,
        current: Option<StoredObject>,
    ) -> Result<NewValue, StorageError> {
        self.last = None;
        let attempt = self
            .attempt(current.as_ref())
            .await
            .map_err(ApiError::into_storage)?;
        let value = match &attempt {
            Attempt::Write { bytes, .. } => NewValue::Write(bytes.clone()),
            Attempt::Unchanged(_) | Attempt::Delete { .. } => NewValue::Keep,
        };
        self.last = Some(attempt);
        Ok(value)
    }
}

impl<T: Resource> UpdateLoop<'_, T> {
    /// One attempt on `current` (`None`: the object does not exist).
    async fn attempt(&self, current: Option<&StoredObject>) -> Result<Attempt<T>, ApiError> {
        let (store, name) = (self.store, self.name);
        let existing = current.map(|c| store.decode(c)).transpose()?;
        let mut object = self.updated.updated(existing.as_ref()).await?;
        if self.skip_unchanged && existing.as_ref() == Some(&object) {
            return Ok(Attempt::Unchanged(object));
        }
        if object.metadata().name.is_empty() {
            object.metadata_mut().name = name.to_string();
        }
        if object.metadata().name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                object.metadata().name
            )));
        }
        let (Some(current), Some(old)) = (current, &existing) else {
            if store.status_only || (!store.strategy.allow_create_on_update() && !self.allow_create)
            {
                return Err(ApiError::not_found(&store.resource(), name));
            }
            wipe_system_fields(object.metadata_mut());
            object.metadata_mut().resource_version.clear();
            fill_system_fields(object.metadata_mut());
            let warnings = store.before_create(&mut object, self.namespace)?;
            self.admission.validate_create(&object).await?;
            return Ok(Attempt::Write {
                bytes: store.encode(&object)?,
                object,
                created: true,
                warnings,
            });
        };
        let requested = &object.metadata().resource_version;
        if requested.is_empty() {
            if !store.strategy.allow_unconditional_update() {
                let error = FieldError::invalid(
                    Path::new("metadata").child("resourceVersion"),
                    &0,
                    "must be specified for an update",
                );
                return Err(ApiError::invalid(&store.kind(), name, &vec![error].into()));
            }
        } else if *requested != old.metadata().resource_version {
            return Err(ApiError::conflict(
                &store.resource(),
                name,
                OPTIMISTIC_LOCK_ERROR_MSG,
            ));
        }
        let warnings = store.before_update(&mut object, old, self.namespace)?;
        self.admission.validate_update(&object, old).await?;
        if should_delete_during_update(&object, old) {
            return Ok(Attempt::Delete {
                object,
                revision: current.revision,
                warnings,
            });
        }
        Ok(Attempt::Write {
            bytes: store.encode(&object)?,
            object,
            created: false,
            warnings,
        })
    }
}

/// Upstream `ShouldDeleteDuringUpdate`: an update that leaves no finalizers on an object whose deletion was
/// requested (with no grace period left) deletes it.
fn should_delete_during_update<T: Resource>(new: &T, old: &T) -> bool {
    let (new, old) = (new.metadata(), old.metadata());
    new.finalizers.is_empty()
        && old.deletion_timestamp.is_some()
        && old.deletion_grace_period_seconds.is_none_or(|g| g == 0)
}
