//! Test harness: stores on a temporary SQLite file, and on a throwaway Postgres 15 this process starts.
#![allow(dead_code)]

pub mod pg;

use std::sync::Arc;

use apiserver::storage::Storage;
use apiserver::storage::testing::keeping;
use apiserver_storage_sql::{SqlStorage, SqlStorageOptions, SqliteSynchronous};

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

/// A fresh SQLite store as the conformance suite takes it (it owns its temporary directory).
pub async fn sqlite_dyn_store() -> Arc<dyn Storage> {
    let t = sqlite_store().await;
    keeping(t.store, t.dir)
}
