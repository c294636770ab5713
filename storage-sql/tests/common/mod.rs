//! Test harness: stores on a temporary SQLite file, and on a throwaway Postgres 15 this process starts.
#![allow(dead_code)]

pub mod pg;

use std::sync::Arc;

use apiserver::storage::{
    GetOptions, ListOptions, ListResult, Preconditions, Stats, Storage, StorageError, StoredObject,
    TryUpdate, ValidateDeletion, WatchOptions, WatchStream,
};
use apiserver_storage_sql::{SqlStorage, SqlStorageOptions, SqliteSynchronous};
use async_trait::async_trait;
use bytes::Bytes;

/// A SQLite store that owns its temporary directory (removed when the store is dropped).
pub struct SqliteTestStore {
    pub store: SqlStorage,
    pub dir: tempfile::TempDir,
}

/// A fresh SQLite store on a temporary file, with full durability (the default).
pub async fn sqlite_store() -> SqliteTestStore {
    sqlite_store_with(|_| {}).await
}

/// A fresh SQLite store with adjusted options.
pub async fn sqlite_store_with(f: impl FnOnce(&mut SqlStorageOptions)) -> SqliteTestStore {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = SqlStorageOptions::with_url(format!(
        "sqlite://{}",
        dir.path().join("state.db").display()
    ));
    f(&mut opts);
    let store = SqlStorage::open(&opts).await.expect("open sqlite store");
    SqliteTestStore { store, dir }
}

/// Faster SQLite for tests that are not about durability.
pub fn no_fsync(o: &mut SqlStorageOptions) {
    o.sqlite_synchronous = SqliteSynchronous::Normal;
}

/// A store on a fresh database of the shared test Postgres.
pub async fn pg_store() -> SqlStorage {
    pg_store_with(|_| {}).await.0
}

/// A store on a fresh database with adjusted options; also returns the database URL.
pub async fn pg_store_with(f: impl FnOnce(&mut SqlStorageOptions)) -> (SqlStorage, String) {
    let url = pg::server().fresh_database().await;
    let mut opts = SqlStorageOptions::with_url(url.clone());
    f(&mut opts);
    let store = SqlStorage::open(&opts).await.expect("open postgres store");
    (store, url)
}

#[async_trait]
impl Storage for SqliteTestStore {
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
    fn reliable_progress(&self) -> bool {
        self.store.reliable_progress()
    }
    async fn readiness(&self) -> Result<(), StorageError> {
        self.store.readiness().await
    }
    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        self.store.request_watch_progress().await
    }
}

/// The store as the conformance suite takes it.
pub fn dyn_store<S: Storage>(s: S) -> Arc<dyn Storage> {
    Arc::new(s)
}
