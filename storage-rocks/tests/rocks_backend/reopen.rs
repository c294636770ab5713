//! Reopening a database: revisions keep increasing from where they were, and the state, the history, the change
//! log and the compacted revision all survive.

use std::time::Duration;

use apiserver::storage::{
    AllowDeletion, EventType, GetOptions, ListOptions, ResourceVersionMatch, Storage, StoredObject,
    WatchOptions,
};
use apiserver_storage_rocks::{RocksOptions, RocksStorage};
use bytes::Bytes;
use futures::StreamExt;

fn options() -> RocksOptions {
    RocksOptions {
        compaction_interval: Duration::ZERO,
        ..RocksOptions::default()
    }
}

async fn put(store: &RocksStorage, key: &str, value: &str) -> StoredObject {
    let value = Bytes::from(value.to_string());
    let mut set = move |_cur: Option<StoredObject>| futures::future::ready(Ok(value.clone()));
    store
        .guaranteed_update(key, true, None, &mut set, None)
        .await
        .expect("put")
}

fn exact(rev: u64) -> ListOptions {
    ListOptions {
        resource_version: Some(rev),
        resource_version_match: Some(ResourceVersionMatch::Exact),
        recursive: true,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_keeps_revisions_increasing_and_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a1, a2, b, del, last) = {
        let store = RocksStorage::open(dir.path(), &options()).expect("open");
        assert_eq!(store.current_revision().await.expect("rev"), 0);
        let a1 = put(&store, "/r/a", "1").await;
        let a2 = put(&store, "/r/a", "2").await;
        let b = put(&store, "/r/b", "1").await;
        let del = store
            .delete("/r/b", None, &mut AllowDeletion, None)
            .await
            .expect("delete");
        let last = put(&store, "/r/c", "1").await;
        assert_eq!(
            [
                a1.revision,
                a2.revision,
                b.revision,
                del.revision,
                last.revision
            ],
            [1, 2, 3, 4, 5]
        );
        store.compact(a2.revision).await.expect("compact");
        (a1, a2, b, del, last)
    };

    let store = RocksStorage::open(dir.path(), &options()).expect("reopen");
    assert_eq!(store.current_revision().await.expect("rev"), last.revision);
    assert_eq!(
        store.compact_revision().await.expect("compact rev"),
        a2.revision
    );
    assert_eq!(
        store
            .get("/r/a", &GetOptions::default())
            .await
            .expect("get a"),
        a2
    );
    assert!(
        store
            .get("/r/b", &GetOptions::default())
            .await
            .expect_err("b is deleted")
            .is_not_found()
    );
    // History and compaction survived.
    assert_eq!(
        store
            .list("/r", &exact(b.revision))
            .await
            .expect("list")
            .items,
        vec![a2.clone(), b.clone()]
    );
    assert_eq!(
        store
            .list("/r", &exact(a1.revision))
            .await
            .expect_err("compacted")
            .code(),
        410
    );
    // The change log survived: a watch from before the restart replays it.
    let mut w = store
        .watch(
            "/r",
            &WatchOptions {
                resource_version: Some(b.revision),
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("watch");
    let ev = w.next().await.expect("delete event");
    assert_eq!(
        (ev.event_type, ev.key.as_str(), ev.revision),
        (EventType::Deleted, "/r/b", del.revision)
    );
    let ev = w.next().await.expect("create event");
    assert_eq!(
        (ev.event_type, ev.revision),
        (EventType::Added, last.revision)
    );
    // New writes continue the sequence, and reach the watch.
    let next = put(&store, "/r/d", "1").await;
    assert_eq!(next.revision, last.revision + 1);
    let ev = w.next().await.expect("live event");
    assert_eq!((ev.key.as_str(), ev.revision), ("/r/d", next.revision));
    drop(w);
    drop(store);

    // And once more, after a restart with nothing written in between.
    let store = RocksStorage::open(dir.path(), &options()).expect("reopen again");
    assert_eq!(store.current_revision().await.expect("rev"), next.revision);
    assert_eq!(put(&store, "/r/e", "1").await.revision, next.revision + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_is_opened_by_one_store_at_a_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = RocksStorage::open(dir.path(), &options()).expect("open");
    let err = RocksStorage::open(dir.path(), &options()).expect_err("second open");
    assert!(err.to_string().contains("cannot open RocksDB"), "{err}");
    let clone = store.clone();
    drop(store);
    // A clone keeps it open…
    assert!(RocksStorage::open(dir.path(), &options()).is_err());
    drop(clone);
    // …and the last one releases it.
    RocksStorage::open(dir.path(), &options()).expect("open after close");
}

#[test]
fn a_database_in_use_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = RocksStorage::open(dir.path(), &options()).expect("first open");
    let Err(second) = RocksStorage::open(dir.path(), &options()) else {
        panic!("a second open of the same directory succeeded");
    };
    let text = second.to_string();
    assert!(
        text.contains("cannot open RocksDB at") && text.contains("the database is already open"),
        "{text}"
    );
    drop(first);
    RocksStorage::open(dir.path(), &options()).expect("open again once the first store is closed");
}
