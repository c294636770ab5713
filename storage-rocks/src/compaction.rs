//! Compaction: dropping history older than a revision, and the periodic compactor.
//!
//! Compacting to `c` first records `c` (so new reads and watches before it get 410 at once), then walks the log
//! records at or below `c` in bounded batches: each write there makes the version it replaced unreachable, and a
//! deletion at or below `c` leaves nothing to keep, so both are deleted from `history` along with the record. The
//! cost is proportional to the writes since the last compaction, not to the size of the database. A crash midway
//! leaves records that the next compaction finishes. Reads in progress keep their snapshots and are unaffected.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use apiserver_storage::StorageError;
use rocksdb::{IteratorMode, ReadOptions, WriteBatch, WriteOptions};

use crate::encoding::{
    CF_HISTORY, CF_LOG, LogRecord, META_COMPACTED, META_PURGED, WriteKind, decode_u64, history_key,
};
use crate::scan::meta;
use crate::store::{Shared, db_err};
use crate::ticker::Ticker;

/// Log records handled per batch, so one compaction never builds a huge batch.
const CHUNK: usize = 4096;

/// Compacts history to `revision` (blocking).
pub(crate) fn compact(shared: &Shared, revision: u64) -> Result<(), StorageError> {
    let _serial = shared
        .compaction_lock
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let committed = shared.committed.load(Ordering::Acquire);
    if revision > committed {
        return Err(StorageError::TooLargeResourceVersion {
            requested: revision,
            current: committed,
        });
    }
    let compacted = meta(shared.db.get(META_COMPACTED), "compacted")?;
    if revision > compacted {
        let mut sync = WriteOptions::default();
        sync.set_sync(true);
        shared
            .db
            .put_opt(META_COMPACTED, revision.to_be_bytes(), &sync)
            .map_err(db_err)?;
        shared.compacted.fetch_max(revision, Ordering::AcqRel);
    }
    // Also finishes the work of an interrupted earlier compaction.
    purge(shared, revision.max(compacted))
}

/// Removes the history that log records at or below `revision` made unreachable, and those records, starting
/// after the last record a previous run finished (`purged`, written with each batch).
fn purge(shared: &Shared, revision: u64) -> Result<(), StorageError> {
    let log = shared.cf(CF_LOG)?;
    let history = shared.cf(CF_HISTORY)?;
    let Some(end) = revision.checked_add(1) else {
        return Ok(());
    };
    let mut purged = meta(shared.db.get(META_PURGED), "purged")?;
    let mut removed = 0usize;
    while purged < revision {
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(end.to_be_bytes().to_vec());
        let from = (purged + 1).to_be_bytes();
        let mut batch = WriteBatch::default();
        let mut n = 0;
        let mut last = purged;
        let iter = shared.db.iterator_cf_opt(
            log,
            ro,
            IteratorMode::From(&from, rocksdb::Direction::Forward),
        );
        for item in iter {
            let (k, v) = item.map_err(db_err)?;
            let rev = decode_u64("log key", &k)?;
            let record = LogRecord::decode(rev, &v)?;
            if record.prev_revision != 0 {
                batch.delete_cf(history, history_key(&record.key, record.prev_revision));
            }
            if record.kind == WriteKind::Delete {
                batch.delete_cf(history, history_key(&record.key, rev));
            }
            batch.delete_cf(log, &k);
            last = rev;
            n += 1;
            if n == CHUNK {
                break;
            }
        }
        if n < CHUNK {
            last = revision;
        }
        batch.put(META_PURGED, last.to_be_bytes());
        shared.db.write(batch).map_err(db_err)?;
        removed += n;
        purged = last;
    }
    if removed > 0 {
        tracing::debug!(revision, removed, "rocksdb history compacted");
    }
    Ok(())
}

/// Starts the periodic compactor: every interval it compacts to the revision it saw one interval earlier
/// (upstream's etcd compactor), so at least one interval of history stays readable for watches and paged lists.
pub(crate) fn spawn(shared: Arc<Shared>, interval: Duration) -> std::io::Result<Ticker> {
    let mut previous: Option<u64> = None;
    Ticker::spawn("rocksdb-compactor", interval, move || {
        if let Some(rev) = previous
            && rev > shared.compacted.load(Ordering::Acquire)
            && let Err(e) = compact(&shared, rev)
        {
            tracing::warn!(error = %e, revision = rev, "rocksdb compaction failed");
        }
        previous = Some(shared.committed.load(Ordering::Acquire));
    })
}

#[cfg(test)]
mod tests {
    use apiserver_storage::{AllowDeletion, Storage, StoredObject};
    use bytes::Bytes;

    use crate::encoding::{CF_HISTORY, CF_LOG, decode_u64, split_history_key};
    use crate::{RocksOptions, RocksStorage};

    fn history(store: &RocksStorage) -> Vec<(String, u64)> {
        let shared = store.shared();
        let cf = shared.cf(CF_HISTORY).unwrap();
        shared
            .db
            .iterator_cf(cf, rocksdb::IteratorMode::Start)
            .map(|kv| {
                let (k, _) = kv.unwrap();
                let (key, rev) = split_history_key(&k).unwrap();
                (key.to_string(), rev)
            })
            .collect()
    }

    fn log(store: &RocksStorage) -> Vec<u64> {
        let shared = store.shared();
        let cf = shared.cf(CF_LOG).unwrap();
        shared
            .db
            .iterator_cf(cf, rocksdb::IteratorMode::Start)
            .map(|kv| decode_u64("log", &kv.unwrap().0).unwrap())
            .collect()
    }

    async fn put(store: &RocksStorage, key: &str, value: &'static str) -> StoredObject {
        let mut set = move |_c: Option<StoredObject>| {
            futures::future::ready(Ok(Bytes::from_static(value.as_bytes())))
        };
        store
            .guaranteed_update(key, true, None, &mut set, None)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn compaction_removes_exactly_the_unreachable_versions() {
        let store = RocksStorage::open_temporary(&RocksOptions {
            compaction_interval: std::time::Duration::ZERO,
            ..RocksOptions::default()
        })
        .unwrap();
        put(&store, "/a", "1").await; // 1
        put(&store, "/a", "2").await; // 2
        put(&store, "/a", "3").await; // 3
        put(&store, "/b", "1").await; // 4
        store
            .delete("/b", None, &mut AllowDeletion, None)
            .await
            .unwrap(); // 5
        put(&store, "/c", "1").await; // 6
        put(&store, "/b", "2").await; // 7: recreated after its deletion
        assert_eq!(history(&store).len(), 7);

        store.compact(5).await.unwrap();
        let s = |k: &str, r: u64| (k.to_string(), r);
        assert_eq!(history(&store), vec![s("/a", 3), s("/b", 7), s("/c", 6)]);
        assert_eq!(log(&store), vec![6, 7]);

        put(&store, "/a", "4").await; // 8
        store
            .delete("/c", None, &mut AllowDeletion, None)
            .await
            .unwrap(); // 9
        store.compact(9).await.unwrap();
        assert_eq!(history(&store), vec![s("/a", 8), s("/b", 7)]);
        assert!(log(&store).is_empty());
    }
}
