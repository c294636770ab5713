//! The generic store: upstream's create, update, delete, list and watch flows, written once for every type.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;

use crate::codec::MediaType;
use crate::meta::ListMeta;
use crate::runtime::{GroupKind, GroupResource, Resource, ResourceCodec};
use crate::storage::{
    self, Attrs, AttrsFn, EventType, FieldSelector, LabelSelector, Preconditions, Predicate,
    ResourceKeys, ResourceVersionMatch, Storage, StorageError, StoredObject,
};

use super::object_meta::{
    MAX_NAME_GENERATION_ATTEMPTS, fill_system_fields, generate_name, validate_object_meta,
    validate_object_meta_update, wipe_system_fields,
};
use super::{ApiError, GarbageCollectionPolicy, OPTIMISTIC_LOCK_ERROR_MSG, Strategy};
use crate::meta::{DeleteOptions, Time};
use crate::validation::{FieldError, Path};

/// The largest object the store writes: etcd's default request limit (`--max-request-bytes`, 1.5 MiB), so that
/// every backend holds what etcd would, and memory (history, watch cache) is bounded per object.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// Validating admission, handed to the store by the handler so that it runs at the right point of each flow
/// (after validation, inside the optimistic update loop) without the store knowing about admission.
#[async_trait]
pub trait AdmissionCheck<T>: Send + Sync {
    /// Checks an object about to be created; an error rejects the create.
    async fn validate_create(&self, _object: &T) -> Result<(), ApiError> {
        Ok(())
    }
    /// Checks an update of `old` to `new`; an error rejects the update.
    async fn validate_update(&self, _new: &T, _old: &T) -> Result<(), ApiError> {
        Ok(())
    }
    /// Checks a delete of `old`; an error rejects the delete.
    async fn validate_delete(&self, _old: &T) -> Result<(), ApiError> {
        Ok(())
    }
}

/// No validating admission.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoAdmission;

impl<T: Send + Sync> AdmissionCheck<T> for NoAdmission {}

/// How [`Store::create`] and [`Store::update`] write: the validating admission the object passes and whether the
/// write is a dry run (upstream's `createValidation`/`updateValidation`, `forceAllowCreate` and
/// `metav1.UpdateOptions.DryRun`). The default, for controllers: no admission, a real write, no create.
///
/// ```
/// # use apiserver::registry::WriteOptions;
/// # struct Pizza;
/// let options: WriteOptions<'_, Pizza> = WriteOptions {
///     dry_run: true,
///     ..WriteOptions::default()
/// };
/// # assert!(options.dry_run && !options.allow_create);
/// ```
pub struct WriteOptions<'a, T> {
    /// Validating admission, run after the strategy (and inside the optimistic update loop).
    pub admission: &'a dyn AdmissionCheck<T>,
    /// Everything runs but the write; the answer is the object that would have been written.
    pub dry_run: bool,
    /// An update of an object that does not exist creates it even where the strategy does not allow create on
    /// update (server-side apply). A create always creates.
    pub allow_create: bool,
}

impl<T: Send + Sync> Default for WriteOptions<'_, T> {
    fn default() -> Self {
        WriteOptions {
            admission: &NoAdmission,
            dry_run: false,
            allow_create: false,
        }
    }
}

impl<T> Clone for WriteOptions<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for WriteOptions<'_, T> {}

/// Computes the object an update writes from the current one (`None` when it does not exist): the request body for
/// PUT, the patched object for PATCH. It may run several times, once per conflict.
#[async_trait]
pub trait UpdatedObject<T>: Send + Sync {
    /// The object to write given the current one; an error ends the update with that error.
    async fn updated(&self, current: Option<&T>) -> Result<T, ApiError>;
}

/// An update that writes a given object (PUT).
pub struct Replace<T>(pub T);

#[async_trait]
impl<T: Clone + Send + Sync> UpdatedObject<T> for Replace<T> {
    async fn updated(&self, _current: Option<&T>) -> Result<T, ApiError> {
        Ok(self.0.clone())
    }
}

/// A written object and the warnings the strategy produced.
#[derive(Clone, Debug)]
pub struct Written<T> {
    /// The object as stored (in a dry run, as it would be).
    pub object: T,
    /// True when an update created the object (201 instead of 200).
    pub created: bool,
    /// Messages for the client, sent as `Warning` headers.
    pub warnings: Vec<String>,
}

/// What to read in a list or watch: upstream's `ListOptions` after parsing.
#[derive(Clone, Debug, Default)]
pub struct ListRequest {
    /// `labelSelector`: only objects whose labels match.
    pub label_selector: LabelSelector,
    /// `fieldSelector`: only objects whose fields match; a name in the path is added here as `metadata.name`.
    pub field_selector: FieldSelector,
    /// `limit`: the most items in one page; 0 for no limit.
    pub limit: u64,
    /// `continue`: the token from the previous page's `metadata.continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`: `None` when unset (the latest, read consistently), `Some(0)` for any.
    pub resource_version: Option<u64>,
    /// `resourceVersionMatch`: how `resource_version` is compared.
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// `sendInitialEvents`: whether a watch starts with the current objects as ADDED events.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`: whether a watch may send BOOKMARK events.
    pub allow_watch_bookmarks: bool,
}

/// One page of a list.
#[derive(Clone, Debug, Default)]
pub struct ObjectList<T> {
    /// `resourceVersion`, `continue` and `remainingItemCount` of the page.
    pub metadata: ListMeta,
    /// The objects of the page, in key order.
    pub items: Vec<T>,
}

/// One event of a typed watch.
#[derive(Clone, Debug)]
pub enum WatchItem<T> {
    /// ADDED, MODIFIED or DELETED with the object (for DELETED: its last state at the deletion revision).
    Object(EventType, T),
    /// A BOOKMARK at a revision; `initial_events_end` marks the end of the initial events.
    Bookmark {
        /// The revision the watch has reached.
        resource_version: u64,
        /// Whether the initial events of a `sendInitialEvents` watch end here.
        initial_events_end: bool,
    },
    /// The watch failed and ends.
    Error(ApiError),
}

/// A typed watch stream.
pub type WatchItems<T> = BoxStream<'static, WatchItem<T>>;

impl<T> WatchItem<T> {
    /// The type of the event this item is sent as.
    pub fn event_type(&self) -> EventType {
        match self {
            WatchItem::Object(kind, _) => *kind,
            WatchItem::Bookmark { .. } => EventType::Bookmark,
            WatchItem::Error(_) => EventType::Error,
        }
    }

    /// The same event with its object turned into another type (a provided kind computed from a stored one).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> WatchItem<U> {
        match self {
            WatchItem::Object(kind, object) => WatchItem::Object(kind, f(object)),
            WatchItem::Bookmark {
                resource_version,
                initial_events_end,
            } => WatchItem::Bookmark {
                resource_version,
                initial_events_end,
            },
            WatchItem::Error(err) => WatchItem::Error(err),
        }
    }
}

/// A watch event with the object as it was before a MODIFIED change, for code that applies selectors itself (the
/// watch of a provided resource): an object that stops matching is then DELETED and one that starts matching ADDED,
/// as the watch cache sends them.
#[derive(Clone, Debug)]
pub struct WatchChange<T> {
    /// The event.
    pub item: WatchItem<T>,
    /// For MODIFIED: the object before the change, when known.
    pub previous: Option<T>,
}

impl<T> WatchChange<T> {
    /// The same change with its objects turned into another type.
    pub fn map<U>(self, f: impl Fn(T) -> U) -> WatchChange<U> {
        WatchChange {
            previous: self.previous.map(&f),
            item: self.item.map(f),
        }
    }
}

impl<T> From<WatchItem<T>> for WatchChange<T> {
    fn from(item: WatchItem<T>) -> Self {
        WatchChange {
            item,
            previous: None,
        }
    }
}

/// A typed watch stream with previous objects.
pub type WatchChanges<T> = BoxStream<'static, WatchChange<T>>;

impl<T> From<Vec<T>> for ObjectList<T> {
    /// A list without resourceVersion or continue token.
    fn from(items: Vec<T>) -> Self {
        ObjectList {
            metadata: ListMeta::default(),
            items,
        }
    }
}

/// The generic registry of one resource (upstream `genericregistry.Store`): stores hub objects of `T` in a
/// [`Storage`] in the storage version, applying the strategy and upstream's rules for system fields, optimistic
/// concurrency, generated names and dry runs.
pub struct Store<T: Resource> {
    storage: Arc<dyn Storage>,
    codec: ResourceCodec<T>,
    strategy: Arc<dyn Strategy<T>>,
    keys: ResourceKeys,
    storage_format: MediaType,
    /// This store serves the `status` subresource: updates write only status (see [`Store::status`]).
    status_only: bool,
}

impl<T: Resource> Clone for Store<T> {
    fn clone(&self) -> Self {
        Store {
            storage: self.storage.clone(),
            codec: self.codec.clone(),
            strategy: self.strategy.clone(),
            keys: self.keys.clone(),
            storage_format: self.storage_format,
            status_only: self.status_only,
        }
    }
}

impl<T: Resource> Store<T> {
    /// A store under `<prefix>/<plural>/...`, writing `storage_format` (JSON is what Go servers write by default).
    pub fn new(
        storage: Arc<dyn Storage>,
        prefix: &str,
        codec: ResourceCodec<T>,
        strategy: Arc<dyn Strategy<T>>,
        storage_format: MediaType,
    ) -> Result<Self, StorageError> {
        Ok(Store {
            storage,
            codec,
            strategy,
            keys: ResourceKeys::new(prefix, T::PLURAL)?,
            storage_format,
            status_only: false,
        })
    }

    /// The same objects as served by the `status` subresource (upstream's second `Store` with a status strategy):
    /// an update keeps everything of the stored object but its status (and managed fields), validates with
    /// [`Strategy::validate_status_update`], never creates, and leaves `metadata.generation` alone.
    pub fn status(&self) -> Store<T> {
        Store {
            status_only: true,
            ..self.clone()
        }
    }

    /// Whether this store serves the `status` subresource.
    pub fn is_status(&self) -> bool {
        self.status_only
    }

    /// A store whose reads and watches are served from a [`WatchCache`](crate::storage::cache::WatchCache) of
    /// this resource over `backend`; writes go through to `backend`. The cache reports into `metrics` when given.
    /// Must be called within a tokio runtime.
    pub fn cached(
        backend: Arc<dyn Storage>,
        prefix: &str,
        codec: ResourceCodec<T>,
        strategy: Arc<dyn Strategy<T>>,
        storage_format: MediaType,
        metrics: Option<&crate::metrics::Metrics>,
    ) -> Result<Self, StorageError> {
        let keys = ResourceKeys::new(prefix, T::PLURAL)?;
        let resource = T::group_resource();
        let config = storage::cache::CacheConfig {
            metrics: metrics.map(|m| m.watch_cache(&resource.group, &resource.resource)),
            ..storage::cache::CacheConfig::default()
        };
        let cache = storage::cache::WatchCache::new(backend, keys.root(), config)?;
        Self::new(Arc::new(cache), prefix, codec, strategy, storage_format)
    }

    /// The versions and encodings this store serves.
    pub fn codec(&self) -> &ResourceCodec<T> {
        &self.codec
    }

    /// This store's objects served in API group `group` too: the same storage (and watch cache), read and written
    /// through [`ResourceCodec::in_group`], so objects carry that group's `apiVersion` and errors name the resource
    /// in it. Serve it beside the original with [`Api::resource`](crate::endpoints::Api::resource).
    pub fn in_group(&self, group: &'static str) -> Store<T> {
        Store {
            codec: self.codec.clone().in_group(group),
            ..self.clone()
        }
    }

    /// The storage objects are read from and written to (the watch cache, when the store has one).
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// How many objects are stored and their average size (for `apiserver_storage_objects`).
    pub async fn object_stats(&self) -> Result<crate::storage::Stats, StorageError> {
        self.storage.stats(self.keys.root()).await
    }

    /// The resource as errors name it: in the group this store serves (see [`Store::in_group`]).
    fn resource(&self) -> GroupResource {
        self.codec.group_resource()
    }

    fn kind(&self) -> GroupKind {
        GroupKind {
            group: self.codec.group().to_string(),
            kind: T::KIND.to_string(),
        }
    }

    pub(crate) fn key(&self, namespace: Option<&str>, name: &str) -> Result<String, ApiError> {
        let namespace = if T::namespaced() { namespace } else { None };
        let key = self
            .keys
            .object(namespace, name)
            .map_err(|e| ApiError::from_storage(e, &self.resource(), name))?;
        // A key no backend accepts (a NUL byte in the name) names nothing that can exist, as on etcd.
        if storage::validate_key(&key).is_err() {
            return Err(ApiError::not_found(&self.resource(), name));
        }
        Ok(key)
    }

    /// Decodes stored bytes and sets `metadata.resourceVersion` from the revision that wrote them.
    pub fn decode(&self, stored: &StoredObject) -> Result<T, ApiError> {
        let mut object = self
            .codec
            .decode_stored(&stored.value)
            .map_err(ApiError::internal)?;
        object.metadata_mut().resource_version = stored.revision.to_string();
        Ok(object)
    }

    /// Encodes for storage: without resourceVersion (the backend's revision is the resourceVersion). Larger than
    /// [`MAX_OBJECT_BYTES`]: 413.
    fn encode(&self, object: &T) -> Result<Bytes, ApiError> {
        let mut object = object.clone();
        object.metadata_mut().resource_version.clear();
        object.metadata_mut().self_link.clear();
        let bytes = self
            .codec
            .encode_stored(&object, self.storage_format)
            .map_err(ApiError::internal)?;
        if bytes.len() > MAX_OBJECT_BYTES {
            return Err(ApiError::request_entity_too_large(&format!(
                "the object is {} bytes in storage, limit is {MAX_OBJECT_BYTES}",
                bytes.len()
            )));
        }
        Ok(Bytes::from(bytes))
    }

    /// Reads an object's labels and selectable fields from stored bytes, for selectors.
    pub fn attrs_fn(&self) -> AttrsFn {
        let codec = self.codec.clone();
        Arc::new(move |bytes: &[u8]| {
            let object = codec
                .decode_stored(bytes)
                .map_err(|e| StorageError::Internal(e.to_string()))?;
            Ok(attrs_of(&object))
        })
    }

    /// Checks the namespace of the body against the request's (upstream `rest.BeforeCreate`/`BeforeUpdate`).
    fn reconcile_namespace(object: &mut T, namespace: Option<&str>) -> Result<(), ApiError> {
        let meta = object.metadata_mut();
        if !T::namespaced() {
            meta.namespace.clear();
            return Ok(());
        }
        let request_ns = namespace.unwrap_or_default();
        if meta.namespace.is_empty() {
            meta.namespace = request_ns.to_string();
        } else if !request_ns.is_empty() && meta.namespace != request_ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        Ok(())
    }

    /// Everything but metadata (and status, for a type with a status subresource), in the storage version: a change
    /// to it bumps `metadata.generation` (what upstream strategies do by comparing `spec`, and the CRD strategy by
    /// comparing everything but metadata and, with the subresource, status; done once here for every type).
    fn desired_state(&self, object: &T) -> Result<serde_json::Value, ApiError> {
        let json = self
            .codec
            .encode_stored(object, MediaType::Json)
            .map_err(ApiError::internal)?;
        let mut value: serde_json::Value =
            serde_json::from_slice(&json).map_err(ApiError::internal)?;
        if let Some(map) = value.as_object_mut() {
            for field in ["metadata", "apiVersion", "kind"] {
                map.remove(field);
            }
            if T::has_status_subresource() {
                map.remove("status");
            }
        }
        Ok(value)
    }

    /// Upstream `rest.BeforeCreate`: namespace, strategy preparation, generated name, validation, canonical form.
    fn before_create(
        &self,
        object: &mut T,
        namespace: Option<&str>,
    ) -> Result<Vec<String>, ApiError> {
        Self::reconcile_namespace(object, namespace)?;
        let meta = object.metadata_mut();
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        meta.generation = 1;
        if T::has_status_subresource() {
            // Status is the status subresource's to write (upstream's CRD strategy clears it on create).
            object.copy_status_from(&T::default());
        }
        self.strategy.prepare_for_create(object);
        let meta = object.metadata_mut();
        if meta.name.is_empty() && !meta.generate_name.is_empty() {
            meta.name = generate_name(&meta.generate_name);
        }
        let mut errors = validate_object_meta(object.metadata(), T::namespaced());
        errors.extend(self.strategy.validate(object));
        errors.extend(self.codec.rule_errors(object, None));
        if !errors.is_empty() {
            return Err(ApiError::invalid(
                &self.kind(),
                &object.metadata().name,
                &errors,
            ));
        }
        let warnings = self.strategy.warnings_on_create(object);
        self.strategy.canonicalize(object);
        Ok(warnings)
    }

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

    /// Creates an object (upstream `Store.Create`); with `options.dry_run` everything runs but the write.
    pub async fn create(
        &self,
        namespace: Option<&str>,
        mut object: T,
        options: WriteOptions<'_, T>,
    ) -> Result<Written<T>, ApiError> {
        let WriteOptions {
            admission, dry_run, ..
        } = options;
        wipe_system_fields(object.metadata_mut());
        object.metadata_mut().resource_version.clear();
        fill_system_fields(object.metadata_mut());
        let generated =
            object.metadata().name.is_empty() && !object.metadata().generate_name.is_empty();
        let attempts = if generated {
            MAX_NAME_GENERATION_ATTEMPTS
        } else {
            1
        };
        let mut last_error = None;
        for _ in 0..attempts {
            let mut candidate = object.clone();
            let warnings = self.before_create(&mut candidate, namespace)?;
            admission.validate_create(&candidate).await?;
            let name = candidate.metadata().name.clone();
            let key = self.key(namespace, &name)?;
            let result = if dry_run {
                self.dry_run_create(&key, &candidate).await
            } else {
                match self.storage.create(&key, self.encode(&candidate)?).await {
                    Ok(stored) => self.decode(&stored),
                    Err(e) => Err(self.create_error(e, &key, &name).await),
                }
            };
            match result {
                Ok(created) => {
                    return Ok(Written {
                        object: created,
                        created: true,
                        warnings,
                    });
                }
                Err(e) if generated && e.is_already_exists() => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| ApiError::internal("name generation failed")))
    }

    async fn dry_run_create(&self, key: &str, object: &T) -> Result<T, ApiError> {
        let name = &object.metadata().name;
        match self.storage.get(key, &storage::GetOptions::default()).await {
            Ok(_) => Err(ApiError::already_exists(&self.resource(), name)),
            Err(e) if e.is_not_found() => Ok(object.clone()),
            Err(e) => Err(ApiError::from_storage(e, &self.resource(), name)),
        }
    }

    /// AlreadyExists says "object is being deleted: " when the existing object has a deletionTimestamp.
    async fn create_error(&self, err: StorageError, key: &str, name: &str) -> ApiError {
        let mut api = ApiError::from_storage(err, &self.resource(), name);
        if api.is_already_exists()
            && let Ok(existing) = self.storage.get(key, &storage::GetOptions::default()).await
            && let Ok(existing) = self.decode(&existing)
            && existing.metadata().deletion_timestamp.is_some()
        {
            api.message = format!("object is being deleted: {}", api.message);
        }
        api
    }

    /// Reads one object; `resource_version` is a "not older than" bound.
    pub async fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<u64>,
    ) -> Result<T, ApiError> {
        let stored = self.get_stored(namespace, name, resource_version).await?;
        self.decode(&stored)
    }

    /// Like [`Store::get`], as stored (decode with [`Store::decode`]).
    pub async fn get_stored(
        &self,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<u64>,
    ) -> Result<StoredObject, ApiError> {
        let key = self.key(namespace, name)?;
        self.storage
            .get(&key, &storage::GetOptions { resource_version })
            .await
            .map_err(|e| ApiError::from_storage(e, &self.resource(), name))
    }

    /// Updates (or, where allowed, creates) an object with optimistic concurrency (upstream `Store.Update`).
    pub async fn update(
        &self,
        namespace: Option<&str>,
        name: &str,
        updated: &dyn UpdatedObject<T>,
        options: WriteOptions<'_, T>,
    ) -> Result<Written<T>, ApiError> {
        let WriteOptions {
            admission,
            dry_run,
            allow_create,
        } = options;
        let key = self.key(namespace, name)?;
        let outcome: Mutex<(bool, Vec<String>, Option<T>)> = Mutex::new((false, Vec::new(), None));
        let outcome_ref = &outcome;
        // The last try emptied the finalizers of an object being deleted: the object and its revision.
        let emptied: Mutex<Option<(T, u64)>> = Mutex::new(None);
        let emptied_ref = &emptied;
        let key_ref = &key;
        let mut try_update = |current: Option<StoredObject>| async move {
            let revision = current.as_ref().map(|c| c.revision);
            if let Ok(mut slot) = emptied_ref.lock() {
                *slot = None;
            }
            let run = async {
                let existing = current.as_ref().map(|c| self.decode(c)).transpose()?;
                let mut object = updated.updated(existing.as_ref()).await?;
                if object.metadata().name.is_empty() {
                    object.metadata_mut().name = name.to_string();
                }
                if object.metadata().name != name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({}) does not match the name on the URL ({name})",
                        object.metadata().name
                    )));
                }
                let (created, warnings) = match &existing {
                    None => {
                        if self.status_only
                            || (!self.strategy.allow_create_on_update() && !allow_create)
                        {
                            return Err(ApiError::not_found(&self.resource(), name));
                        }
                        wipe_system_fields(object.metadata_mut());
                        object.metadata_mut().resource_version.clear();
                        fill_system_fields(object.metadata_mut());
                        let warnings = self.before_create(&mut object, namespace)?;
                        admission.validate_create(&object).await?;
                        (true, warnings)
                    }
                    Some(old) => {
                        let requested = object.metadata().resource_version.clone();
                        if requested.is_empty() {
                            if !self.strategy.allow_unconditional_update() {
                                let error = FieldError::invalid(
                                    Path::new("metadata").child("resourceVersion"),
                                    &0,
                                    "must be specified for an update",
                                );
                                return Err(ApiError::invalid(
                                    &self.kind(),
                                    name,
                                    &vec![error].into(),
                                ));
                            }
                        } else if requested != old.metadata().resource_version {
                            return Err(ApiError::conflict(
                                &self.resource(),
                                name,
                                OPTIMISTIC_LOCK_ERROR_MSG,
                            ));
                        }
                        let warnings = self.before_update(&mut object, old, namespace)?;
                        admission.validate_update(&object, old).await?;
                        if should_delete_during_update(&object, old) {
                            if let Ok(mut slot) = emptied_ref.lock() {
                                *slot = Some((object, revision.unwrap_or_default()));
                            }
                            if let Ok(mut slot) = outcome_ref.lock() {
                                *slot = (false, warnings, None);
                            }
                            return Err(ApiError::internal("emptied finalizers"));
                        }
                        (false, warnings)
                    }
                };
                let bytes = self.encode(&object)?;
                Ok::<_, ApiError>((bytes, created, warnings, object))
            };
            match run.await {
                Ok((bytes, created, warnings, object)) => {
                    if let Ok(mut slot) = outcome_ref.lock() {
                        *slot = (created, warnings, Some(object));
                    }
                    let _ = key_ref;
                    Ok(bytes)
                }
                Err(e) => Err(e.into_storage()),
            }
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
            let current_revision = current.as_ref().map(|c| c.revision);
            let tried = try_update(current).await;
            if let Some(written) = self.emptied(&emptied, outcome_ref, None).await? {
                return Ok(written);
            }
            tried.map_err(|e| ApiError::from_storage(e, &self.resource(), name))?;
            let (created, warnings, object) = take(outcome)?;
            let mut object =
                object.ok_or_else(|| ApiError::internal("update produced no object"))?;
            if let Some(rv) = current_revision {
                object.metadata_mut().resource_version = rv.to_string();
            }
            return Ok(Written {
                object,
                created,
                warnings,
            });
        }
        let updated = self
            .storage
            .guaranteed_update(&key, true, None, &mut try_update, None)
            .await;
        if let Some(written) = self
            .emptied(&emptied, outcome_ref, Some((&key, name)))
            .await?
        {
            return Ok(written);
        }
        let stored = updated.map_err(|e| ApiError::from_storage(e, &self.resource(), name))?;
        let (created, warnings, _) = take(outcome)?;
        Ok(Written {
            object: self.decode(&stored)?,
            created,
            warnings,
        })
    }

    /// Completes an update that emptied the finalizers of an object being deleted by deleting it (upstream
    /// `deleteWithoutFinalizers`; `target` is `None` in a dry run). The answer is the updated object, as upstream
    /// answers a PUT or PATCH that ends in a delete. `None` when the update did not empty finalizers.
    async fn emptied(
        &self,
        emptied: &Mutex<Option<(T, u64)>>,
        outcome: &Mutex<(bool, Vec<String>, Option<T>)>,
        target: Option<(&str, &str)>,
    ) -> Result<Option<Written<T>>, ApiError> {
        let Some((object, revision)) = emptied.lock().ok().and_then(|mut slot| slot.take()) else {
            return Ok(None);
        };
        let warnings = outcome
            .lock()
            .map(|slot| slot.1.clone())
            .unwrap_or_default();
        if let Some((key, name)) = target {
            // Conditional on the state the update saw: a finalizer added meanwhile keeps the object.
            let preconditions = Preconditions::new().with_resource_version(revision);
            match self
                .storage
                .delete(key, Some(&preconditions), &mut storage::AllowDeletion, None)
                .await
            {
                Ok(_) => {}
                // Several updates may race to remove the last finalizer.
                Err(e) if e.is_not_found() => {}
                Err(StorageError::InvalidObj { .. }) => {
                    return Err(ApiError::conflict(
                        &self.resource(),
                        name,
                        OPTIMISTIC_LOCK_ERROR_MSG,
                    ));
                }
                Err(e) => return Err(ApiError::from_storage(e, &self.resource(), name)),
            }
        }
        Ok(Some(Written {
            object,
            created: false,
            warnings,
        }))
    }

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
        let resource = self.resource();
        let flow: Mutex<Option<DeletionFlow>> = Mutex::new(None);
        let flow_ref = &flow;
        let set = |value: DeletionFlow| {
            if let Ok(mut slot) = flow_ref.lock() {
                *slot = Some(value);
            }
        };
        let resource_ref = &resource;
        let mut try_update = |existing: Option<StoredObject>| async move {
            let run = async {
                if let Ok(mut slot) = flow_ref.lock() {
                    *slot = None;
                }
                let stored = existing.ok_or_else(|| ApiError::not_found(resource_ref, name))?;
                let mut existing = self.decode(&stored)?;
                admission.validate_delete(&existing).await?;
                let mut grace = request.grace_period_seconds;
                let (graceful, pending) =
                    self.before_delete(&mut existing, name, request, &mut grace)?;
                if pending {
                    set(DeletionFlow::AlreadyPending);
                    return Err(ApiError::internal("abort delete"));
                }
                if let Some(finalizers) = self.gc_finalizers(&existing, request) {
                    existing.metadata_mut().finalizers = finalizers;
                }
                let pending_finalizers = !existing.metadata().finalizers.is_empty();
                if !graceful {
                    if !pending_finalizers {
                        set(DeletionFlow::DeleteNow);
                        return Err(ApiError::internal("delete now"));
                    }
                    mark_as_deleting(existing.metadata_mut());
                }
                set(DeletionFlow::Written {
                    pending_finalizers,
                    last_graceful: if graceful { grace.unwrap_or(0) } else { 0 },
                });
                self.encode(&existing)
            };
            run.await.map_err(ApiError::into_storage)
        };
        let result = if request.dry_run {
            match try_update(Some(current.clone())).await {
                Ok(bytes) => self
                    .codec
                    .decode_stored(&bytes)
                    .map(|mut object| {
                        object.metadata_mut().resource_version = current.revision.to_string();
                        object
                    })
                    .map_err(ApiError::internal),
                Err(e) => Err(ApiError::from_storage(e, &resource, name)),
            }
        } else {
            self.storage
                .guaranteed_update(
                    key,
                    false,
                    Some(preconditions),
                    &mut try_update,
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
                    other => ApiError::from_storage(other, &resource, name),
                })
                .and_then(|stored| self.decode(&stored))
        };
        let flow = flow
            .into_inner()
            .map_err(|_| ApiError::internal("delete state poisoned"))?;
        match (result, flow) {
            (Err(_), Some(DeletionFlow::AlreadyPending)) => {
                Ok(DeletionUpdate::AlreadyPending(original.clone()))
            }
            (Err(_), Some(DeletionFlow::DeleteNow)) => Ok(DeletionUpdate::DeleteNow),
            (Err(e), _) => Err(e),
            (
                Ok(object),
                Some(DeletionFlow::Written {
                    pending_finalizers,
                    last_graceful,
                }),
            ) if pending_finalizers || last_graceful > 0 => Ok(DeletionUpdate::Pending(object)),
            (Ok(object), _) => Ok(DeletionUpdate::GraceExpired(object)),
        }
    }

    /// Lists objects (in one namespace, or all with `None`).
    pub async fn list(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<ObjectList<T>, ApiError> {
        let stored = self.list_stored(namespace, request).await?;
        let items = stored
            .items
            .iter()
            .map(|s| self.decode(s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ObjectList {
            metadata: stored.metadata,
            items,
        })
    }

    /// Like [`Store::list`], with the items as stored (decode each with [`Store::decode`]): for callers that keep
    /// encoded forms of objects by key and revision.
    pub async fn list_stored(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<ObjectList<StoredObject>, ApiError> {
        let key = self.list_key(namespace)?;
        let result = self
            .storage
            .list(
                &key,
                &storage::ListOptions {
                    resource_version: request.resource_version,
                    resource_version_match: request.resource_version_match,
                    recursive: true,
                    limit: request.limit,
                    continue_token: request.continue_token.clone(),
                    predicate: self.predicate(request),
                },
            )
            .await
            .map_err(|e| ApiError::from_storage(e, &self.resource(), ""))?;
        Ok(ObjectList {
            metadata: ListMeta {
                resource_version: result.revision.to_string(),
                continue_: result.continue_token.unwrap_or_default(),
                remaining_item_count: result.remaining_item_count,
                ..ListMeta::default()
            },
            items: result.items,
        })
    }

    fn list_key(&self, namespace: Option<&str>) -> Result<String, ApiError> {
        let namespace = if T::namespaced() {
            namespace.filter(|ns| !ns.is_empty())
        } else {
            None
        };
        self.keys
            .list(namespace)
            .map_err(|e| ApiError::from_storage(e, &self.resource(), ""))
    }

    fn predicate(&self, request: &ListRequest) -> Predicate {
        Predicate::new(
            request.label_selector.clone(),
            request.field_selector.clone(),
            self.attrs_fn(),
        )
    }

    /// Watches stored events (in one namespace, or all with `None`); [`Store::watch_item`] turns each into a
    /// typed item. Handlers that encode one event for many watchers start from these.
    pub async fn watch_events(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<storage::WatchStream, ApiError> {
        let key = self.list_key(namespace)?;
        self.storage
            .watch(
                &key,
                &storage::WatchOptions {
                    resource_version: request.resource_version,
                    recursive: true,
                    predicate: self.predicate(request),
                    send_initial_events: request.send_initial_events,
                    allow_watch_bookmarks: request.allow_watch_bookmarks,
                    progress_notify: request.allow_watch_bookmarks,
                },
            )
            .await
            .map_err(|e| ApiError::from_storage(e, &self.resource(), ""))
    }

    /// A stored watch event as a typed item; `None` for a bookmark the watcher did not ask for.
    pub fn watch_item(
        &self,
        event: storage::WatchEvent,
        allow_bookmarks: bool,
    ) -> Option<WatchItem<T>> {
        match event.event_type {
            EventType::Bookmark if !allow_bookmarks => None,
            EventType::Bookmark => Some(WatchItem::Bookmark {
                resource_version: event.revision,
                initial_events_end: event.initial_events_end,
            }),
            EventType::Error => Some(WatchItem::Error(match event.error {
                Some(e) => ApiError::from_storage(e, &self.resource(), ""),
                None => ApiError::internal("watch failed"),
            })),
            kind => Some(match self.decode(&event.stored_object()) {
                Ok(object) => WatchItem::Object(kind, object),
                Err(e) => WatchItem::Error(e),
            }),
        }
    }

    /// Watches objects (in one namespace, or all with `None`).
    pub async fn watch(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<WatchItems<T>, ApiError> {
        let events = self.watch_events(namespace, request).await?;
        let store = self.clone();
        let allow_bookmarks = request.allow_watch_bookmarks;
        Ok(events
            .filter_map(move |event| {
                futures::future::ready(store.watch_item(event, allow_bookmarks))
            })
            .boxed())
    }

    /// Like [`Store::watch`], with the previous object of each MODIFIED event.
    pub async fn watch_changes(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<WatchChanges<T>, ApiError> {
        let events = self.watch_events(namespace, request).await?;
        let store = self.clone();
        let allow_bookmarks = request.allow_watch_bookmarks;
        Ok(events
            .filter_map(move |event| {
                let previous = match (event.event_type, &event.prev_value) {
                    (EventType::Modified, Some(value)) => store.codec.decode_stored(value).ok(),
                    _ => None,
                };
                let change = store
                    .watch_item(event, allow_bookmarks)
                    .map(|item| WatchChange { item, previous });
                futures::future::ready(change)
            })
            .boxed())
    }

    /// The field selector keys this resource supports: `metadata.name`, `metadata.namespace` and the declared
    /// selectable fields.
    pub fn check_field_selector(selector: &FieldSelector) -> Result<(), ApiError> {
        for requirement in selector.requirements() {
            let field = requirement.field.as_str();
            if field != "metadata.name"
                && field != "metadata.namespace"
                && !T::SELECTABLE_FIELDS.contains(&field)
            {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
        }
        Ok(())
    }
}

fn take<T>(
    outcome: Mutex<(bool, Vec<String>, Option<T>)>,
) -> Result<(bool, Vec<String>, Option<T>), ApiError> {
    outcome
        .into_inner()
        .map_err(|_| ApiError::internal("update state poisoned"))
}

/// Labels and selectable fields of an object.
pub fn attrs_of<T: Resource>(object: &T) -> Attrs {
    let meta = object.metadata();
    let mut fields = std::collections::BTreeMap::new();
    fields.insert("metadata.name".to_string(), meta.name.clone());
    if T::namespaced() {
        fields.insert("metadata.namespace".to_string(), meta.namespace.clone());
    }
    for path in T::SELECTABLE_FIELDS {
        if let Some(value) = object.selectable_field(path) {
            fields.insert(path.to_string(), value);
        }
    }
    Attrs {
        labels: meta.labels.clone(),
        fields,
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

/// What the last try of the deletion update decided.
#[derive(Clone, Copy)]
enum DeletionFlow {
    Written {
        pending_finalizers: bool,
        last_graceful: i64,
    },
    AlreadyPending,
    DeleteNow,
}

/// Upstream `ShouldDeleteDuringUpdate`: an update that leaves no finalizers on an object whose deletion was
/// requested (with no grace period left) deletes it.
fn should_delete_during_update<T: Resource>(new: &T, old: &T) -> bool {
    let (new, old) = (new.metadata(), old.metadata());
    new.finalizers.is_empty()
        && old.deletion_timestamp.is_some()
        && old.deletion_grace_period_seconds.is_none_or(|g| g == 0)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::ObjectMeta;
    use crate::registry::DefaultStrategy;
    use crate::runtime::{PrinterColumn, Scope, Versioned};
    use crate::storage::memory::MemoryStorage;
    use serde::{Deserialize, Serialize};

    /// A hub with a spec and a status subresource, written by hand as `#[derive(Hub)]` with `status` would.
    #[derive(Clone, Debug, Default, PartialEq)]
    pub(super) struct Gadget {
        pub metadata: ObjectMeta,
        pub spec: i64,
        pub status: i64,
    }

    impl Resource for Gadget {
        const GROUP: &'static str = "example.com";
        const KIND: &'static str = "Gadget";
        const PLURAL: &'static str = "gadgets";
        const SINGULAR: &'static str = "gadget";
        const SCOPE: Scope = Scope::Namespaced;
        const SHORT_NAMES: &'static [&'static str] = &[];
        const CATEGORIES: &'static [&'static str] = &[];
        const PRINTER_COLUMNS: &'static [PrinterColumn] = &[];
        const SUBRESOURCES: &'static [&'static str] = &["status"];
        const SELECTABLE_FIELDS: &'static [&'static str] = &[];
        fn metadata(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn metadata_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
        fn copy_status_from(&mut self, other: &Self) {
            self.status = other.status;
        }
    }

    #[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
    pub(super) struct GadgetV1 {
        #[prost(message, required, tag = "1")]
        #[serde(default)]
        metadata: ObjectMeta,
        #[prost(int64, tag = "2")]
        #[serde(default)]
        spec: i64,
        #[prost(int64, tag = "3")]
        #[serde(default)]
        status: i64,
    }

    impl Versioned for GadgetV1 {
        type Hub = Gadget;
        const VERSION: &'static str = "v1";
        fn to_hub(&self) -> Result<Gadget, crate::runtime::ConversionError> {
            Ok(Gadget {
                metadata: self.metadata.clone(),
                spec: self.spec,
                status: self.status,
            })
        }
        fn from_hub(hub: &Gadget) -> Result<Self, crate::runtime::ConversionError> {
            Ok(GadgetV1 {
                metadata: hub.metadata.clone(),
                spec: hub.spec,
                status: hub.status,
            })
        }
    }

    pub(super) fn store() -> Store<Gadget> {
        Store::new(
            Arc::new(MemoryStorage::new()),
            "/registry/example.com",
            ResourceCodec::new().version::<GadgetV1>(),
            Arc::new(DefaultStrategy),
            MediaType::Json,
        )
        .unwrap()
    }

    pub(super) fn gadget(name: &str, spec: i64, status: i64) -> Gadget {
        Gadget {
            metadata: ObjectMeta {
                name: name.into(),
                namespace: "ns".into(),
                ..ObjectMeta::default()
            },
            spec,
            status,
        }
    }

    async fn update(store: &Store<Gadget>, object: Gadget) -> Result<Gadget, ApiError> {
        let name = object.metadata.name.clone();
        store
            .update(Some("ns"), &name, &Replace(object), WriteOptions::default())
            .await
            .map(|w| w.object)
    }

    #[tokio::test]
    async fn create_clears_status_and_main_update_keeps_it() {
        let store = store();
        let created = store
            .create(Some("ns"), gadget("g", 1, 7), WriteOptions::default())
            .await
            .unwrap()
            .object;
        assert_eq!((created.status, created.metadata.generation), (0, 1));

        let mut status_only = created.clone();
        status_only.status = 5;
        let updated = update(&store, status_only).await.unwrap();
        assert_eq!(updated.status, 0, "the main resource does not write status");
        assert_eq!(updated.metadata.generation, 1);

        let mut spec_change = updated.clone();
        spec_change.spec = 2;
        let updated = update(&store, spec_change).await.unwrap();
        assert_eq!((updated.spec, updated.metadata.generation), (2, 2));
    }

    #[tokio::test]
    async fn status_update_writes_only_status() {
        let store = store();
        let status = store.status();
        let created = store
            .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
            .await
            .unwrap()
            .object;
        let mut change = created.clone();
        change.spec = 9;
        change.status = 3;
        change.metadata.labels.insert("new".into(), "label".into());
        change
            .metadata
            .annotations
            .insert("new".into(), "note".into());
        change.metadata.finalizers.push("example.com/f".into());
        let updated = update(&status, change).await.unwrap();
        assert_eq!((updated.spec, updated.status), (1, 3));
        assert!(updated.metadata.labels.is_empty());
        assert!(updated.metadata.annotations.is_empty());
        assert!(updated.metadata.finalizers.is_empty());
        assert_eq!(
            updated.metadata.generation, 1,
            "status does not bump generation"
        );
        assert_ne!(
            updated.metadata.resource_version,
            created.metadata.resource_version
        );

        // Optimistic concurrency applies as on the main resource.
        let err = update(&status, created.clone()).await.unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            format!(
                "Operation cannot be fulfilled on gadgets.example.com \"g\": {OPTIMISTIC_LOCK_ERROR_MSG}"
            )
        );

        // The subresource never creates.
        let err = update(&status, gadget("missing", 1, 1)).await.unwrap_err();
        assert_eq!((err.code, err.reason), (404, "NotFound"));
    }

    fn with_finalizers(mut object: Gadget, finalizers: &[&str]) -> Gadget {
        object.metadata.finalizers = finalizers.iter().map(|f| f.to_string()).collect();
        object
    }

    async fn delete(
        store: &Store<Gadget>,
        name: &str,
        request: DeleteRequest,
    ) -> Result<Deletion<Gadget>, ApiError> {
        store.delete(Some("ns"), name, &request, &NoAdmission).await
    }

    async fn get(store: &Store<Gadget>, name: &str) -> Result<Gadget, ApiError> {
        store.get(Some("ns"), name, None).await
    }

    #[tokio::test]
    async fn finalizers_keep_a_deleted_object_until_removed() {
        let store = store();
        let created = store
            .create(
                Some("ns"),
                with_finalizers(gadget("g", 1, 0), &["example.com/f"]),
                WriteOptions::default(),
            )
            .await
            .unwrap()
            .object;
        let Deletion::Pending(pending) =
            delete(&store, "g", DeleteRequest::default()).await.unwrap()
        else {
            panic!("an object with finalizers stays");
        };
        assert!(pending.metadata.deletion_timestamp.is_some());
        assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(0));
        assert_eq!(
            pending.metadata.generation, 2,
            "the first deletion bumps generation"
        );
        assert_ne!(
            pending.metadata.resource_version,
            created.metadata.resource_version
        );
        assert_eq!(get(&store, "g").await.unwrap(), pending);

        // A second delete changes nothing and answers the object.
        let again = delete(&store, "g", DeleteRequest::default()).await.unwrap();
        assert!(
            matches!(&again, Deletion::Pending(o) if *o == pending),
            "{again:?}"
        );

        // No new finalizers once deleting.
        let added = with_finalizers(
            pending.clone(),
            &["example.com/f", "example.com/g", "a.io/b"],
        );
        let err = update(&store, added).await.unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "Gadget.example.com \"g\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"a.io/b\", \"example.com/g\"}"
        );
        // The deletion marks cannot be taken back.
        let mut undeleted = pending.clone();
        undeleted.metadata.deletion_grace_period_seconds = Some(5);
        let err = update(&store, undeleted).await.unwrap_err();
        assert!(
            err.message.contains(
                "metadata.deletionGracePeriodSeconds: Invalid value: 5: field is immutable"
            ),
            "{}",
            err.message
        );

        // Removing the last finalizer deletes it; the update answers the object. A dry run deletes nothing.
        let emptied = with_finalizers(pending.clone(), &[]);
        let dry = store
            .update(
                Some("ns"),
                "g",
                &Replace(emptied.clone()),
                WriteOptions {
                    dry_run: true,
                    ..WriteOptions::default()
                },
            )
            .await
            .unwrap();
        assert!(dry.object.metadata.finalizers.is_empty());
        assert_eq!(get(&store, "g").await.unwrap(), pending);
        let answer = update(&store, emptied).await.unwrap();
        assert!(answer.metadata.finalizers.is_empty());
        assert_eq!(get(&store, "g").await.unwrap_err().code, 404);
    }

    #[tokio::test]
    async fn deletion_without_finalizers_is_immediate_and_dry_run_changes_nothing() {
        let store = store();
        store
            .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
            .await
            .unwrap();
        store
            .create(
                Some("ns"),
                with_finalizers(gadget("h", 1, 0), &["example.com/f"]),
                WriteOptions::default(),
            )
            .await
            .unwrap();
        let dry = DeleteRequest {
            dry_run: true,
            ..DeleteRequest::default()
        };
        let before = get(&store, "g").await.unwrap();
        assert!(delete(&store, "g", dry.clone()).await.unwrap().deleted());
        assert_eq!(get(&store, "g").await.unwrap(), before);
        let before = get(&store, "h").await.unwrap();
        let Deletion::Pending(would) = delete(&store, "h", dry).await.unwrap() else {
            panic!("a dry run shows the pending object");
        };
        assert!(would.metadata.deletion_timestamp.is_some());
        assert_eq!(
            would.metadata.resource_version,
            before.metadata.resource_version
        );
        assert_eq!(get(&store, "h").await.unwrap(), before);

        // gracePeriodSeconds means nothing to a type without graceful deletion.
        let graceful = DeleteRequest {
            grace_period_seconds: Some(30),
            ..DeleteRequest::default()
        };
        assert!(delete(&store, "g", graceful).await.unwrap().deleted());
        assert_eq!(get(&store, "g").await.unwrap_err().code, 404);
    }

    #[tokio::test]
    async fn propagation_policies_add_garbage_collector_finalizers() {
        let store = store();
        for (name, policy, orphan, finalizer) in [
            ("o", Some("Orphan"), None, Some(FINALIZER_ORPHAN_DEPENDENTS)),
            (
                "f",
                Some("Foreground"),
                None,
                Some(FINALIZER_DELETE_DEPENDENTS),
            ),
            ("b", Some("Background"), None, None),
            ("d", None, Some(true), Some(FINALIZER_ORPHAN_DEPENDENTS)),
            ("n", None, None, None),
        ] {
            store
                .create(Some("ns"), gadget(name, 1, 0), WriteOptions::default())
                .await
                .unwrap();
            let request = DeleteRequest {
                propagation_policy: policy.map(str::to_string),
                orphan_dependents: orphan,
                ..DeleteRequest::default()
            };
            let deletion = delete(&store, name, request).await.unwrap();
            match finalizer {
                Some(f) => {
                    let Deletion::Pending(object) = deletion else {
                        panic!("{name}: {deletion:?}")
                    };
                    assert_eq!(object.metadata.finalizers, vec![f.to_string()], "{name}");
                    assert!(object.metadata.deletion_timestamp.is_some(), "{name}");
                }
                None => {
                    assert!(deletion.deleted(), "{name}: {deletion:?}");
                    assert_eq!(get(&store, name).await.unwrap_err().code, 404, "{name}");
                }
            }
        }
    }

    #[tokio::test]
    async fn delete_preconditions_conflict_with_upstream_texts() {
        let store = store();
        let created = store
            .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
            .await
            .unwrap()
            .object;
        let wrong_uid = DeleteRequest {
            preconditions: DeletePreconditions {
                uid: Some("other".into()),
                resource_version: None,
            },
            ..DeleteRequest::default()
        };
        let err = delete(&store, "g", wrong_uid).await.unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            format!(
                "Operation cannot be fulfilled on Gadget.example.com \"g\": the UID in the precondition (other) does not match the UID in record ({}). The object might have been deleted and then recreated",
                created.metadata.uid
            )
        );
        let wrong_rv = DeleteRequest {
            preconditions: DeletePreconditions {
                uid: None,
                resource_version: Some("12345".into()),
            },
            ..DeleteRequest::default()
        };
        let err = delete(&store, "g", wrong_rv).await.unwrap_err();
        assert_eq!(
            err.message,
            format!(
                "Operation cannot be fulfilled on Gadget.example.com \"g\": the ResourceVersion in the precondition (12345) does not match the ResourceVersion in record ({}). The object might have been modified",
                created.metadata.resource_version
            )
        );
        assert!(get(&store, "g").await.is_ok());
        let right = DeleteRequest {
            preconditions: DeletePreconditions {
                uid: Some(created.metadata.uid.clone()),
                resource_version: Some(created.metadata.resource_version.clone()),
            },
            ..DeleteRequest::default()
        };
        assert!(delete(&store, "g", right).await.unwrap().deleted());
    }

    /// Deletes gracefully, 30 s unless the request says otherwise.
    struct Graceful;

    impl Strategy<Gadget> for Graceful {
        fn graceful_delete_supported(&self) -> bool {
            true
        }
        fn check_graceful_delete(&self, _object: &Gadget, grace: &mut Option<i64>) -> bool {
            grace.get_or_insert(30);
            true
        }
    }

    #[tokio::test]
    async fn graceful_deletion_waits_for_a_zero_grace_delete() {
        let store = Store::new(
            Arc::new(MemoryStorage::new()),
            "/registry/example.com",
            ResourceCodec::new().version::<GadgetV1>(),
            Arc::new(Graceful),
            MediaType::Json,
        )
        .unwrap();
        store
            .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
            .await
            .unwrap();
        let Deletion::Pending(pending) =
            delete(&store, "g", DeleteRequest::default()).await.unwrap()
        else {
            panic!("a graceful delete leaves the object");
        };
        let meta = &pending.metadata;
        assert_eq!(meta.deletion_grace_period_seconds, Some(30));
        let left = meta.deletion_timestamp.unwrap().0 - chrono::Utc::now();
        assert!((28..=30).contains(&left.num_seconds()), "{left:?}");
        assert_eq!(meta.generation, 2);
        // A longer grace period changes nothing.
        let longer = DeleteRequest {
            grace_period_seconds: Some(60),
            ..DeleteRequest::default()
        };
        assert!(matches!(
            delete(&store, "g", longer).await.unwrap(),
            Deletion::AlreadyPending(_)
        ));
        assert_eq!(get(&store, "g").await.unwrap(), pending);
        // A shorter one moves the timestamp earlier.
        let shorter = DeleteRequest {
            grace_period_seconds: Some(10),
            ..DeleteRequest::default()
        };
        let Deletion::Pending(shortened) = delete(&store, "g", shorter).await.unwrap() else {
            panic!("still pending");
        };
        assert_eq!(shortened.metadata.deletion_grace_period_seconds, Some(10));
        assert!(shortened.metadata.deletion_timestamp < pending.metadata.deletion_timestamp);
        // Zero deletes.
        let now = DeleteRequest {
            grace_period_seconds: Some(0),
            ..DeleteRequest::default()
        };
        assert!(delete(&store, "g", now).await.unwrap().deleted());
        assert_eq!(get(&store, "g").await.unwrap_err().code, 404);
    }

    /// Issue 36: a grace period past chrono's range panicked (500 from the panic filter); it is a 400 and the
    /// object is left as it was.
    #[tokio::test]
    async fn a_grace_period_out_of_range_is_a_bad_request() {
        let store = Store::new(
            Arc::new(MemoryStorage::new()),
            "/registry/example.com",
            ResourceCodec::new().version::<GadgetV1>(),
            Arc::new(Graceful),
            MediaType::Json,
        )
        .unwrap();
        let created = store
            .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
            .await
            .unwrap();
        for grace in [i64::MAX, i64::MAX / 1000, 400_000_000_000] {
            let request = DeleteRequest {
                grace_period_seconds: Some(grace),
                ..DeleteRequest::default()
            };
            let err = delete(&store, "g", request).await.unwrap_err();
            assert_eq!((err.code, err.reason), (400, "BadRequest"), "{grace}");
            assert_eq!(
                err.message,
                format!(
                    "gracePeriodSeconds: Invalid value: {grace}: the deletion time would be outside the years 0 to 9999"
                )
            );
        }
        assert_eq!(get(&store, "g").await.unwrap(), created.object);
        // Once the delete is pending, a longer grace period, however large, changes nothing.
        let pending = DeleteRequest {
            grace_period_seconds: Some(60),
            ..DeleteRequest::default()
        };
        assert!(!delete(&store, "g", pending).await.unwrap().deleted());
        let longer = DeleteRequest {
            grace_period_seconds: Some(i64::MAX),
            ..DeleteRequest::default()
        };
        assert!(matches!(
            delete(&store, "g", longer).await.unwrap(),
            Deletion::AlreadyPending(_)
        ));
    }
}
