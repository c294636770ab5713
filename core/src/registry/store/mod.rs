//! The generic store (upstream's `genericregistry.Store`): the [`Store`] type, its construction and the helpers
//! every flow shares (keys, encoding, namespaces, the desired state that bumps `metadata.generation`), and the
//! types its callers write with ([`WriteOptions`], [`UpdatedObject`], [`Written`]). The flows, written once for
//! every type, are in their own modules: `create`, `update` (PUT, PATCH, controller writes), `delete`
//! (finalizers, graceful deletion, propagation policies) and `read` (get, list, watch).

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::codec::MediaType;
use crate::runtime::{GroupKind, GroupResource, Resource, ResourceCodec};
use crate::storage::{self, Attrs, AttrsFn, ResourceKeys, Storage, StorageError, StoredObject};

use super::{ApiError, Strategy};

mod create;
mod delete;
mod read;
#[cfg(test)]
mod tests;
mod update;

pub use delete::{
    DeletePreconditions, DeleteRequest, Deletion, FINALIZER_DELETE_DEPENDENTS,
    FINALIZER_ORPHAN_DEPENDENTS,
};
pub use read::{ListRequest, ObjectList, WatchChange, WatchChanges, WatchItem, WatchItems};

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
///
/// A closure `Fn(Option<&T>) -> Result<T, ApiError>` is one (its argument's type written out, so that it takes any
/// borrow); for a change of an existing object, [`Store::modify`] is shorter.
///
/// ```
/// # use apiserver::registry::{ApiError, UpdatedObject};
/// # #[derive(Clone, Default)]
/// # struct Item { reserved: i64 }
/// # apiserver::tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let reserve = |current: Option<&Item>| -> Result<Item, ApiError> {
///     let mut item = current.cloned().unwrap_or_default();
///     item.reserved = 3;
///     Ok(item)
/// };
/// let update: &dyn UpdatedObject<Item> = &reserve;
/// assert_eq!(update.updated(None).await.unwrap().reserved, 3);
/// # });
/// ```
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

#[async_trait]
impl<T, F> UpdatedObject<T> for F
where
    T: Send + Sync,
    F: Fn(Option<&T>) -> Result<T, ApiError> + Send + Sync,
{
    async fn updated(&self, current: Option<&T>) -> Result<T, ApiError> {
        self(current)
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
