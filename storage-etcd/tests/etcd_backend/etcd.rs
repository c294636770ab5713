//! etcd-specific behaviour beyond the conformance suite: several servers on one etcd, broken connections and
//! restarts under open watches, readiness, and the shared compactor.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use apiserver::storage::{
    AllowDeletion, EventType, GetOptions, ListOptions, ResourceVersionMatch, Storage, StorageError,
    StoredObject, WatchEvent, WatchOptions, WatchStream,
};
use apiserver_storage_etcd::etcd_client::GetOptions as RawGet;
use apiserver_storage_etcd::{COMPACT_REV_KEY, EtcdConfig, EtcdStorage};
use bytes::Bytes;
use futures::StreamExt;
use support::{EtcdServer, Proxy};

/// Generous: a loaded 2-core machine, and a watch that must reconnect with backoff.
const WAIT: Duration = Duration::from_secs(60);

async fn next_event(w: &mut WatchStream) -> WatchEvent {
    loop {
        match tokio::time::timeout(WAIT, w.next()).await {
            Ok(Some(ev)) if ev.event_type == EventType::Bookmark => continue,
            Ok(Some(ev)) => return ev,
            Ok(None) => panic!("watch ended"),
            Err(_) => panic!("no watch event within {WAIT:?}"),
        }
    }
}

fn from(rv: u64) -> WatchOptions {
    WatchOptions {
        resource_version: Some(rv),
        recursive: true,
        ..Default::default()
    }
}

fn recursive() -> ListOptions {
    ListOptions {
        recursive: true,
        ..Default::default()
    }
}

/// Creates `key`, retrying while the store cannot reach etcd yet.
async fn create_eventually(store: &dyn Storage, key: &str, value: &str) -> StoredObject {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout(
            Duration::from_secs(10),
            store.create(key, Bytes::from(value.to_string())),
        )
        .await
        {
            Ok(Ok(o)) => return o,
            Ok(Err(e)) if e.is_exists() => {
                return store.get(key, &GetOptions::default()).await.expect("get");
            }
            Ok(Err(e)) if tokio::time::Instant::now() > deadline => panic!("create {key}: {e}"),
            Err(_) if tokio::time::Instant::now() > deadline => panic!("create {key} timed out"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

async fn store_at(url: String) -> EtcdStorage {
    EtcdStorage::connect(EtcdConfig {
        compaction_interval: None,
        ..EtcdConfig::new([url], "/registry")
    })
    .await
    .expect("connect")
}

/// An unpaged list reads etcd in chunks (of 1,000 keys): larger than several chunks, it is still whole, in key order
/// and at one revision, also at a past revision with the keys changed since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpaged_lists_span_read_chunks_at_one_revision() {
    let etcd = EtcdServer::start().await;
    let store = etcd.store().await;
    let mut created = Vec::new();
    for i in 0..2_500 {
        let key = format!("/chunks/{i:05}");
        let value = Bytes::from(format!("v{i}"));
        created.push(store.create(&key, value).await.expect("create"));
    }
    let at = created.last().expect("created").revision;
    let whole = store.list("/chunks", &recursive()).await.expect("list");
    assert_eq!(whole.revision, at);
    assert_eq!(whole.items, created);
    assert_eq!(whole.evaluated, 2_500);

    // Changes in the first and the last chunk; the past revision still lists what was.
    store
        .delete("/chunks/00000", None, &mut AllowDeletion, None)
        .await
        .expect("delete");
    store
        .create("/chunks/99999", Bytes::from_static(b"late"))
        .await
        .expect("create");
    let past = ListOptions {
        resource_version: Some(at),
        resource_version_match: Some(ResourceVersionMatch::Exact),
        ..recursive()
    };
    let then = store
        .list("/chunks", &past)
        .await
        .expect("list at a past revision");
    assert_eq!(then.revision, at);
    assert_eq!(then.items, created);
    let now = store.list("/chunks", &recursive()).await.expect("list");
    assert_eq!(now.items.len(), 2_500);
    assert_eq!(now.items[0].key, "/chunks/00001");
    assert_eq!(now.items[2_499].key, "/chunks/99999");
}

/// Two servers on one etcd: a write through one is seen by a watch, a consistent list and a get on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_etcd_see_each_others_writes() {
    let etcd = EtcdServer::start().await;
    let a = etcd.store().await;
    let b = etcd.store().await;
    let start = b.current_revision().await.expect("rev");
    let mut w = b.watch("/two", &from(start)).await.expect("watch");
    let o = a
        .create("/two/x", Bytes::from_static(b"1"))
        .await
        .expect("create");
    let ev = next_event(&mut w).await;
    assert_eq!(
        (ev.event_type, ev.key.as_str(), ev.revision),
        (EventType::Added, "/two/x", o.revision)
    );
    let l = b.list("/two", &recursive()).await.expect("list");
    assert!(l.revision >= o.revision);
    assert_eq!(l.items, vec![o.clone()]);
    assert_eq!(
        b.get("/two/x", &GetOptions::default()).await.expect("get"),
        o
    );
    // And back: an update on B is a conflict-free CAS that A's suggestion-based update notices.
    let mut set2 = |_cur: Option<StoredObject>| async { Ok(Bytes::from_static(b"2")) };
    let u = b
        .guaranteed_update("/two/x", false, None, &mut set2, None)
        .await
        .expect("update on b");
    let seen = std::sync::Mutex::new(Vec::new());
    let mut set3 = |cur: Option<StoredObject>| {
        seen.lock().expect("lock").push(cur.expect("exists").value);
        async { Ok(Bytes::from_static(b"3")) }
    };
    // A's stale suggestion (the create) loses the txn, which reads the current value back for the retry.
    let u3 = a
        .guaranteed_update("/two/x", false, None, &mut set3, Some(o))
        .await
        .expect("update on a");
    assert_eq!(
        *seen.lock().expect("lock"),
        vec![Bytes::from_static(b"1"), Bytes::from_static(b"2")]
    );
    assert!(u3.revision > u.revision);
    let ev = next_event(&mut w).await;
    assert_eq!(
        (ev.event_type, ev.revision),
        (EventType::Modified, u.revision)
    );
    let ev = next_event(&mut w).await;
    assert_eq!(
        (ev.event_type, ev.revision),
        (EventType::Modified, u3.revision)
    );
}

/// The connection to etcd breaks under an open watch; the watch re-creates itself from the last revision it
/// delivered and sees what was written meanwhile, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resumes_after_the_connection_breaks() {
    let etcd = EtcdServer::start().await;
    let proxy = Proxy::start(etcd.addr()).await;
    let store = store_at(proxy.url()).await;
    let direct = etcd.store().await;
    let a = store
        .create("/resume/a", Bytes::from_static(b"a"))
        .await
        .expect("create");
    let mut w = store
        .watch("/resume", &from(a.revision))
        .await
        .expect("watch");
    proxy.cut();
    let b = direct
        .create("/resume/b", Bytes::from_static(b"b"))
        .await
        .expect("create b");
    proxy.resume();
    let ev = next_event(&mut w).await;
    assert_eq!(
        (ev.event_type, ev.key.as_str(), ev.revision),
        (EventType::Added, "/resume/b", b.revision)
    );
    let c = create_eventually(&store, "/resume/c", "c").await;
    let ev = next_event(&mut w).await;
    assert_eq!(
        (ev.event_type, ev.key.as_str(), ev.revision),
        (EventType::Added, "/resume/c", c.revision),
        "nothing twice, nothing missed"
    );
}

/// If the revision a broken watch must resume from was compacted meanwhile, the watch ends with a 410 error
/// event, and a relist works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_watch_over_compacted_history_ends_with_410() {
    let etcd = EtcdServer::start().await;
    let proxy = Proxy::start(etcd.addr()).await;
    let store = store_at(proxy.url()).await;
    let direct = etcd.store().await;
    let a = store
        .create("/gone/a", Bytes::from_static(b"a"))
        .await
        .expect("create");
    let mut w = store
        .watch("/gone", &from(a.revision))
        .await
        .expect("watch");
    proxy.cut();
    direct
        .create("/gone/b", Bytes::from_static(b"b"))
        .await
        .expect("create b");
    let rev = direct
        .create("/other/c", Bytes::from_static(b"c"))
        .await
        .expect("create c")
        .revision;
    direct.compact(rev).await.expect("compact");
    proxy.resume();
    let ev = next_event(&mut w).await;
    assert_eq!(ev.event_type, EventType::Error, "{ev:?}");
    let err = ev.error.expect("error");
    assert_eq!(err.status(), (410, "Expired"));
    assert!(
        tokio::time::timeout(WAIT, w.next())
            .await
            .expect("stream ends")
            .is_none()
    );
    let l = store.list("/gone", &recursive()).await.expect("relist");
    assert_eq!(l.items.len(), 2);
    assert!(store.compact_revision().await.expect("compact rev") >= rev);
}

/// etcd itself is killed and restarted (same data) under an open watch: the watch resumes, or ends with 410
/// and a relist shows the new state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_survives_etcd_restart() {
    let mut etcd = EtcdServer::start().await;
    let store = etcd.store().await;
    let a = store
        .create("/restart/a", Bytes::from_static(b"a"))
        .await
        .expect("create");
    let mut w = store
        .watch("/restart", &from(a.revision))
        .await
        .expect("watch");
    etcd.restart().await;
    let b = create_eventually(&store, "/restart/b", "b").await;
    let ev = next_event(&mut w).await;
    match ev.event_type {
        EventType::Added => {
            assert_eq!((ev.key.as_str(), ev.revision), ("/restart/b", b.revision));
            let c = create_eventually(&store, "/restart/c", "c").await;
            let ev = next_event(&mut w).await;
            assert_eq!((ev.key.as_str(), ev.revision), ("/restart/c", c.revision));
        }
        EventType::Error => {
            assert_eq!(ev.error.expect("error").code(), 410);
            let l = store.list("/restart", &recursive()).await.expect("relist");
            assert_eq!(l.items.len(), 2);
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// Readiness reads etcd: ready while reachable, not ready while the connection is cut, ready again after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_etcd_reachability() {
    let etcd = EtcdServer::start().await;
    let proxy = Proxy::start(etcd.addr()).await;
    let store = store_at(proxy.url()).await;
    store.readiness().await.expect("ready");
    proxy.cut();
    let err = store.readiness().await.expect_err("not ready while cut");
    assert!(
        matches!(
            err,
            StorageError::Timeout { .. } | StorageError::Unreachable { .. }
        ),
        "{err:?}"
    );
    proxy.resume();
    let deadline = tokio::time::Instant::now() + WAIT;
    while store.readiness().await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "not ready again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Two servers' compactors share one election through `compact_rev_key`: per round exactly one compacts, to
/// the revision seen one round earlier, and the first round never compacts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compactors_on_one_etcd_compact_once_per_round() {
    let etcd = EtcdServer::start().await;
    let s1 = etcd.store().await;
    let s2 = etcd.store().await;
    let (mut c1, mut c2) = (s1.compactor(), s2.compactor());
    let mut raw = etcd.client().await;

    // Bootstrap round: c1 wins the CAS but does not compact; c2 loses and adopts the version.
    assert_eq!(c1.run_once().await.expect("round"), None);
    let seen_by_c1 = s1.current_revision().await.expect("rev");
    assert_eq!(c2.run_once().await.expect("round"), None);
    let version = |r: &apiserver_storage_etcd::etcd_client::GetResponse| {
        r.kvs().first().map(|kv| kv.version()).unwrap_or(0)
    };
    assert_eq!(
        version(&raw.get(COMPACT_REV_KEY, None).await.expect("get")),
        1
    );

    s1.create("/c/x", Bytes::from_static(b"1"))
        .await
        .expect("w");
    // Next round: c1 still holds the current version and compacts to what it saw a round ago; c2 loses.
    assert_eq!(c1.run_once().await.expect("round"), Some(seen_by_c1));
    assert_eq!(c2.run_once().await.expect("round"), None);
    assert_eq!(
        version(&raw.get(COMPACT_REV_KEY, None).await.expect("get")),
        2
    );
    assert!(s1.compact_revision().await.expect("rev") >= seen_by_c1);
    let old = raw
        .get(
            "/c/x",
            Some(RawGet::new().with_revision(seen_by_c1 as i64 - 1)),
        )
        .await;
    assert!(old.is_err(), "history before the compaction is gone");
    // c2 now holds the current version: it wins the following round.
    assert!(c2.run_once().await.expect("round").is_some());
    assert_eq!(c1.run_once().await.expect("round"), None);
}

/// A store's own compactor runs on its interval and compacts history (after the bootstrap round).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_compaction_runs() {
    let etcd = EtcdServer::start().await;
    let store: Arc<dyn Storage> = Arc::new(
        EtcdStorage::connect(EtcdConfig {
            compaction_interval: Some(Duration::from_millis(300)),
            ..etcd.config("/registry")
        })
        .await
        .expect("connect"),
    );
    let o = store
        .create("/p/x", Bytes::from_static(b"1"))
        .await
        .expect("create");
    let deadline = tokio::time::Instant::now() + WAIT;
    while store.compact_revision().await.expect("rev") <= o.revision {
        assert!(tokio::time::Instant::now() < deadline, "never compacted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let err = store
        .watch("/p", &from(o.revision - 1))
        .await
        .err()
        .expect("compacted");
    assert_eq!(err.code(), 410);
}
