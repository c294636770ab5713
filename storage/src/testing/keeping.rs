//! A store that owns what it depends on (a temporary directory, a database process), for conformance factories
//! whose store would otherwise outlive it.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::{
    GetOptions, ListOptions, ListResult, Preconditions, Stats, Storage, StorageError, StoredObject,
    TryUpdate, ValidateDeletion, WatchOptions, WatchStream,
};

/// `store`, keeping `guard` alive until the store is dropped (the store is dropped first):
/// `apiserver::storage_conformance!(|| async { let (store, dir) = open_in_temp_dir().await; keeping(store, dir) });`
pub fn keeping<S, G>(store: S, guard: G) -> Arc<dyn Storage>
where
    S: Storage + 'static,
    G: Send + Sync + 'static,
{
    Arc::new(Keeping {
        store,
        _guard: guard,
    })
}

/// Delegates every call to `store`; fields drop in order, so the store closes before its guard goes.
struct Keeping<S, G> {
    store: S,
    _guard: G,
}

#[async_trait]
impl<S: Storage, G: Send + Sync + 'static> Storage for Keeping<S, G> {
    async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
        self.store.create(key, value).await
    }
    async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
        self.store.get(key, opts).await
    }
    async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        self.store.list(key, opts).await
    }
    async fn guaranteed_update(
        &self,
        key: &str,
        ignore_not_found: bool,
        preconditions: Option<&Preconditions>,
        try_update: &mut dyn TryUpdate,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        self.store
            .guaranteed_update(
                key,
                ignore_not_found,
                preconditions,
                try_update,
                cached_existing,
            )
            .await
    }
    async fn delete(
        &self,
        key: &str,
        preconditions: Option<&Preconditions>,
        validate_deletion: &mut dyn ValidateDeletion,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        self.store
            .delete(key, preconditions, validate_deletion, cached_existing)
            .await
    }
    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream, StorageError> {
        self.store.watch(key, opts).await
    }
    async fn current_revision(&self) -> Result<u64, StorageError> {
        self.store.current_revision().await
    }
    async fn compact(&self, revision: u64) -> Result<(), StorageError> {
        self.store.compact(revision).await
    }
    async fn compact_revision(&self) -> Result<u64, StorageError> {
        self.store.compact_revision().await
    }
    async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
        self.store.stats(prefix).await
    }
    async fn readiness(&self) -> Result<(), StorageError> {
        self.store.readiness().await
    }
    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        self.store.request_watch_progress().await
    }
    fn reliable_progress(&self) -> bool {
        self.store.reliable_progress()
    }
}
