//! RocksDB on a full disk (a small tmpfs the test mounts; skipped, saying so, where mounting is not allowed):
//! writes fail with a 5xx, reads go on, and once space returns the same open store writes again (RocksDB resumes
//! by itself, and the store stops reporting the failure), nothing lost.

use std::sync::Arc;
use std::time::Duration;

use apiserver::storage::Storage;
use apiserver::storage::testing::disk_full::{SmallFs, check_disk_full};
use apiserver_storage_rocks::{RocksOptions, RocksStorage};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rocksdb_disk_full() {
    // RocksDB resumes once the disk has room for a memtable's flush (16 MiB, the store's `write_buffer_size`)
    // besides what the store holds.
    let Some(fs) = SmallFs::mount_or_skip("160m") else {
        return;
    };
    let report = check_disk_full(&fs, |dir| async move {
        let options = RocksOptions {
            compaction_interval: Duration::ZERO,
            ..RocksOptions::default()
        };
        let path = dir.join("db");
        // The previous store's background tasks may still hold the lock for a moment.
        for _ in 0..50 {
            match RocksStorage::open(&path, &options) {
                Ok(s) => return Arc::new(s) as Arc<dyn Storage>,
                Err(e) if e.to_string().contains("lock") => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(e) => panic!("open rocksdb: {e}"),
            }
        }
        panic!("rocksdb stayed locked");
    })
    .await;
    eprintln!("rocksdb disk full: {report:?}");
}
