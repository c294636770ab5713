//! The storage conformance suite through the watch cache, over the in-memory backend.
//!
//! A watch cache covers one resource prefix; each conformance case writes under its own random prefix, so the
//! store under test creates one cache per top-level key segment on first use, as a server creates one per resource.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use apiserver::storage::{
    CacheConfig, GetOptions, ListOptions, ListResult, MemoryStorage, Preconditions, Stats, Storage,
    StorageError, StoredObject, TryUpdate, ValidateDeletion, WatchCache, WatchOptions, WatchStream,
};
use async_trait::async_trait;
use bytes::Bytes;

struct CachePerPrefix {
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

fn cached() -> Arc<dyn Storage> {
    Arc::new(CachePerPrefix {
        inner: MemoryStorage::new().into_dyn(),
        caches: Mutex::new(HashMap::new()),
    })
}

apiserver::storage_conformance!(|| async { cached() });
