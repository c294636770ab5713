//! The conformance suite through the watch cache: a store that puts a cache per resource prefix in front of any
//! backend.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;

use crate::storage::cache::{CacheConfig, WatchCache};
use crate::storage::{
    GetOptions, ListOptions, ListResult, Preconditions, Stats, Storage, StorageError, StoredObject,
    TryUpdate, ValidateDeletion, WatchOptions, WatchStream,
};

/// `inner` behind watch caches, for [`storage_conformance!`](crate::storage_conformance):
/// `apiserver::storage_conformance!(|| async { cached(my_fresh_store().await) });`
pub fn cached(inner: Arc<dyn Storage>) -> Arc<dyn Storage> {
    Arc::new(CachePerPrefix {
        inner,
        caches: Mutex::new(HashMap::new()),
    })
}

/// A [`Storage`] that puts one [`WatchCache`] in front of `inner` per top-level key segment, created on first
/// use, as a server creates one per resource: the conformance suite (each case under its own random prefix) then
/// runs through the cache.
pub struct CachePerPrefix {
    inner: Arc<dyn Storage>,
    caches: Mutex<HashMap<String, Arc<WatchCache>>>,
}

impl CachePerPrefix {
    fn cache(&self, key: &str) -> Result<Arc<WatchCache>, StorageError> {
        let segment = key
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or_default();
        let prefix = format!("/{segment}");
        let mut caches = self.caches.lock().expect("cache map");
        if let Some(cache) = caches.get(&prefix) {
            return Ok(cache.clone());
        }
        let cache = Arc::new(WatchCache::new(
            self.inner.clone(),
            &prefix,
            CacheConfig::default(),
        )?);
        caches.insert(prefix, cache.clone());
        Ok(cache)
    }
}

#[async_trait]
impl Storage for CachePerPrefix {
    async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
        self.cache(key)?.create(key, value).await
    }
    async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
        self.cache(key)?.get(key, opts).await
    }
    async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        self.cache(key)?.list(key, opts).await
    }
    async fn guaranteed_update(
        &self,
        key: &str,
        ignore_not_found: bool,
        preconditions: Option<&Preconditions>,
        try_update: &mut dyn TryUpdate,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        self.cache(key)?
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
        self.cache(key)?
            .delete(key, preconditions, validate_deletion, cached_existing)
            .await
    }
    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream, StorageError> {
        self.cache(key)?.watch(key, opts).await
    }
    async fn current_revision(&self) -> Result<u64, StorageError> {
        self.inner.current_revision().await
    }
    async fn compact(&self, revision: u64) -> Result<(), StorageError> {
        let caches: Vec<_> = self
            .caches
            .lock()
            .expect("cache map")
            .values()
            .cloned()
            .collect();
        self.inner.compact(revision).await?;
        for cache in caches {
            cache.compact(revision).await?;
        }
        Ok(())
    }
    async fn compact_revision(&self) -> Result<u64, StorageError> {
        self.inner.compact_revision().await
    }
    async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
        self.inner.stats(prefix).await
    }
    async fn readiness(&self) -> Result<(), StorageError> {
        self.inner.readiness().await
    }
    fn reliable_progress(&self) -> bool {
        self.inner.reliable_progress()
    }
    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        let caches: Vec<_> = self
            .caches
            .lock()
            .expect("cache map")
            .values()
            .cloned()
            .collect();
        for cache in caches {
            cache.request_watch_progress().await?;
        }
        Ok(())
    }
}
