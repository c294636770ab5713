//! Following a database another process owns: a RocksDB secondary instance reads the owner's files, catches up
//! with its manifest and write-ahead log when told to, and cannot write. Each catch-up publishes the log records
//! it brought to this process's watchers, so a backup or a migration can read and watch a store while its server
//! runs.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, RwLock, RwLockReadGuard};
use std::time::Duration;

use apiserver_storage::StorageError;

use crate::scan::Snapshot;
use crate::store::{Shared, db_err};
use crate::watch;

/// How often a follower catches up with the owner.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// The state of a secondary instance.
#[derive(Default)]
pub(crate) struct Secondary {
    /// Held for writing while the instance catches up and for reading by every read, so a read sees one state
    /// (secondary instances have no RocksDB snapshots).
    state: RwLock<()>,
    /// One catch-up at a time.
    catching_up: Mutex<()>,
}

impl Secondary {
    /// Keeps the database as it is until dropped.
    pub(crate) fn freeze(&self) -> RwLockReadGuard<'_, ()> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }
}

/// Catches up with the owner and publishes what it wrote since the last catch-up; returns the revision now
/// visible.
pub(crate) fn catch_up(shared: &Shared, secondary: &Secondary) -> Result<u64, StorageError> {
    let _one = secondary
        .catching_up
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    {
        let _moving = secondary.state.write().unwrap_or_else(|p| p.into_inner());
        shared.db.try_catch_up_with_primary().map_err(db_err)?;
    }
    let published = shared.committed.load(Ordering::Acquire);
    let snapshot = Snapshot::new(shared)?;
    let (revision, compacted) = (snapshot.revision, snapshot.compacted);
    shared.compacted.store(compacted, Ordering::Release);
    if revision <= published {
        return Ok(published);
    }
    if compacted > published {
        // The owner compacted writes not published here yet: no watcher can be told all that changed.
        drop(snapshot);
        let mut watchers = shared.lock_watchers();
        shared.committed.store(revision, Ordering::Release);
        watchers.expire();
        return Ok(revision);
    }
    let mut changes = Vec::new();
    watch::log_changes(&snapshot, published, |_| true, |c| changes.push(c))?;
    drop(snapshot);
    shared.publish(revision, &changes);
    Ok(revision)
}

#[cfg(test)]
mod tests {
    use apiserver_storage::{
        AllowDeletion, EventType, ListOptions, Storage, StoredObject, WatchEvent, WatchOptions,
    };
    use bytes::Bytes;
    use futures::StreamExt;

    use crate::{RocksOptions, RocksStorage};

    fn quiet() -> RocksOptions {
        RocksOptions {
            compaction_interval: std::time::Duration::ZERO,
            ..RocksOptions::default()
        }
    }

    async fn put(store: &RocksStorage, key: &str, value: &'static str) -> StoredObject {
        let mut set = move |_: Option<StoredObject>| {
            futures::future::ready(Ok(Bytes::from_static(value.as_bytes())))
        };
        store
            .guaranteed_update(key, true, None, &mut set, None)
            .await
            .unwrap()
    }

    async fn next(watch: &mut apiserver_storage::WatchStream) -> WatchEvent {
        tokio::time::timeout(std::time::Duration::from_secs(10), watch.next())
            .await
            .expect("an event")
            .expect("the watch goes on")
    }

    /// Catching up only when asked (no poll): each step is deterministic.
    fn follow(owner: &RocksStorage) -> RocksStorage {
        RocksStorage::follow(owner.path(), &quiet(), None).unwrap()
    }

    #[tokio::test]
    async fn a_follower_reads_and_watches_what_the_owner_writes_and_cannot_write() {
        let owner = RocksStorage::open_temporary(&quiet()).unwrap();
        put(&owner, "/p/a", "1").await;
        let b = put(&owner, "/p/b", "1").await;
        let follower = follow(&owner);
        assert_eq!(follower.current_revision().await.unwrap(), b.revision);
        let list = follower
            .list(
                "/p/",
                &ListOptions {
                    recursive: true,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(list.items.len(), 2);
        assert_eq!(list.revision, b.revision);

        let opts = WatchOptions {
            resource_version: Some(b.revision),
            recursive: true,
            ..Default::default()
        };
        let mut watch = follower.watch("/p/", &opts).await.unwrap();
        let c = put(&owner, "/p/c", "1").await;
        let a = put(&owner, "/p/a", "2").await;
        let gone = owner
            .delete("/p/b", None, &mut AllowDeletion, None)
            .await
            .unwrap();
        // Nothing is seen before the follower catches up; then everything, in order, at the owner's revisions.
        assert_eq!(follower.current_revision().await.unwrap(), gone.revision);
        let events: Vec<_> = [
            next(&mut watch).await,
            next(&mut watch).await,
            next(&mut watch).await,
        ]
        .into_iter()
        .map(|e| (e.event_type, e.key, e.revision))
        .collect();
        assert_eq!(
            events,
            vec![
                (EventType::Added, "/p/c".to_string(), c.revision),
                (EventType::Modified, "/p/a".to_string(), a.revision),
                (EventType::Deleted, "/p/b".to_string(), gone.revision),
            ]
        );
        let got = follower.get("/p/a", &Default::default()).await.unwrap();
        assert_eq!(got.value, Bytes::from_static(b"2"));
        // A list at a revision before the last writes reads history.
        let old = follower
            .list(
                "/p/",
                &ListOptions {
                    resource_version: Some(b.revision),
                    resource_version_match: Some(apiserver_storage::ResourceVersionMatch::Exact),
                    recursive: true,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(old.items.len(), 2);

        let refused = follower.create("/p/d", Bytes::from_static(b"1")).await;
        assert!(
            refused.unwrap_err().to_string().contains("only read here"),
            "a follower refuses writes"
        );
        assert!(follower.compact(c.revision).await.is_err());
        assert!(owner.get("/p/d", &Default::default()).await.is_err());
    }

    #[tokio::test]
    async fn watches_expire_when_the_owner_compacts_writes_not_yet_followed() {
        let owner = RocksStorage::open_temporary(&quiet()).unwrap();
        let first = put(&owner, "/p/a", "1").await;
        let follower = follow(&owner);
        let opts = WatchOptions {
            resource_version: Some(first.revision),
            recursive: true,
            ..Default::default()
        };
        let mut watch = follower.watch("/p/", &opts).await.unwrap();
        put(&owner, "/p/a", "2").await;
        let last = put(&owner, "/p/a", "3").await;
        owner.compact(last.revision).await.unwrap();
        assert_eq!(follower.current_revision().await.unwrap(), last.revision);
        let event = next(&mut watch).await;
        assert_eq!(event.event_type, EventType::Error);
        assert_eq!(
            event.error.unwrap().to_string(),
            apiserver_storage::StorageError::watch_expired().to_string()
        );
        assert_eq!(follower.compact_revision().await.unwrap(), last.revision);
    }

    #[test]
    fn following_nothing_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = RocksStorage::open_secondary(dir.path(), &quiet()).unwrap_err();
        assert!(err.to_string().contains("no database there"), "{err}");
    }
}
