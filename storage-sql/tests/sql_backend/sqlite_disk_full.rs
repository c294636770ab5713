//! SQLite on a full disk (a small tmpfs the test mounts; skipped, saying so, where mounting is not allowed):
//! writes fail with a 5xx, reads go on, writes resume when space returns, and the database reopens intact.

use std::sync::Arc;

use apiserver::storage::Storage;
use apiserver::storage::testing::disk_full::{SmallFs, check_disk_full, use_up_reserves};
use apiserver_storage_sql::{SqlStorage, SqlStorageOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_disk_full() {
    let Some(fs) = SmallFs::mount_or_skip("4m") else {
        return;
    };
    let report = check_disk_full(&fs, |dir| async move {
        let opts =
            SqlStorageOptions::with_url(format!("sqlite://{}", dir.join("state.db").display()));
        Arc::new(SqlStorage::open(&opts).await.expect("open sqlite")) as Arc<dyn Storage>
    })
    .await;
    eprintln!("sqlite disk full: {report:?}");
}

/// Reads that need a new connection while the disk is full: opening one must not write (it did: every connection
/// set `auto_vacuum`, and that pragma writes the database header in a write transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn new_read_connections_work_on_a_full_disk() {
    let Some(fs) = SmallFs::mount_or_skip("4m") else {
        return;
    };
    let opts =
        SqlStorageOptions::with_url(format!("sqlite://{}", fs.path().join("state.db").display()));
    let store = Arc::new(SqlStorage::open(&opts).await.expect("open sqlite"));
    store
        .create("/registry/k", bytes::Bytes::from_static(b"v"))
        .await
        .expect("a write before the disk fills");
    let _filler = fs.fill();
    // Writes fail now (it panics if none does).
    use_up_reserves(store.as_ref()).await;
    // As many reads at once as the reader pool has connections: most need a new one.
    let reads = (0..opts.max_connections).map(|_| {
        let store = store.clone();
        async move { store.get("/registry/k", &Default::default()).await }
    });
    let results = futures::future::join_all(reads).await;
    let failures: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "reads failed on a full disk: {failures:?}"
    );
}
