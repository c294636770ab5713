//! Prefix scans, paging and compaction on disk.

use std::time::{Duration, Instant};

use apiserver::storage::{ListOptions, ResourceVersionMatch, Storage, StoredObject};
use apiserver_storage_rocks::{RocksOptions, RocksStorage};
use bytes::Bytes;

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

async fn keys(store: &RocksStorage, key: &str, opts: ListOptions) -> Vec<String> {
    store
        .list(key, &opts)
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|o| o.key)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_scans_stay_inside_the_prefix() {
    let store = RocksStorage::open_temporary(&options()).expect("open");
    for k in [
        "/r/a", "/r/a/x", "/r/a/y/z", "/r/ab", "/r/a0", "/r/b", "/s/a",
    ] {
        put(&store, k, "1").await;
    }
    let recursive = ListOptions {
        recursive: true,
        ..Default::default()
    };
    assert_eq!(
        keys(&store, "/r/a", recursive.clone()).await,
        ["/r/a/x", "/r/a/y/z"]
    );
    assert_eq!(
        keys(&store, "/r/a/", recursive.clone()).await,
        ["/r/a/x", "/r/a/y/z"]
    );
    assert_eq!(
        keys(&store, "/r", recursive.clone()).await,
        ["/r/a", "/r/a/x", "/r/a/y/z", "/r/a0", "/r/ab", "/r/b"]
    );
    assert_eq!(keys(&store, "/r/a", ListOptions::default()).await, ["/r/a"]);
    assert!(
        keys(&store, "/r/nothing", ListOptions::default())
            .await
            .is_empty()
    );
    // The same at an older revision, read from history.
    let rev = store.current_revision().await.expect("rev");
    put(&store, "/r/a/x", "2").await;
    put(&store, "/r/a/w", "1").await;
    let at = ListOptions {
        resource_version: Some(rev),
        resource_version_match: Some(ResourceVersionMatch::Exact),
        ..recursive.clone()
    };
    assert_eq!(
        keys(&store, "/r/a", at.clone()).await,
        ["/r/a/x", "/r/a/y/z"]
    );
    assert_eq!(
        keys(
            &store,
            "/r/a",
            ListOptions {
                recursive: false,
                ..at
            }
        )
        .await,
        ["/r/a"]
    );
    let s = store.stats("/r/a/").await.expect("stats");
    assert_eq!(s.object_count, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_at_an_old_revision_after_many_updates() {
    let store = RocksStorage::open_temporary(&options()).expect("open");
    for i in 0..50 {
        put(&store, &format!("/p/{i:03}"), "0").await;
    }
    let rev = store.current_revision().await.expect("rev");
    for i in (0..50).step_by(2) {
        put(&store, &format!("/p/{i:03}"), "1").await;
    }
    let mut opts = ListOptions {
        recursive: true,
        limit: 7,
        resource_version: Some(rev),
        resource_version_match: Some(ResourceVersionMatch::Exact),
        ..Default::default()
    };
    let mut all = Vec::new();
    loop {
        let page = store.list("/p", &opts).await.expect("page");
        assert_eq!(page.revision, rev);
        assert!(page.items.iter().all(|o| o.value.as_ref() == b"0"));
        all.extend(page.items.into_iter().map(|o| o.key));
        match page.continue_token {
            Some(t) => {
                opts.continue_token = Some(t);
                opts.resource_version = None;
                opts.resource_version_match = None;
            }
            None => break,
        }
    }
    let expected: Vec<String> = (0..50).map(|i| format!("/p/{i:03}")).collect();
    assert_eq!(all, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_the_current_state_across_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let final_state = {
        let store = RocksStorage::open(dir.path(), &options()).expect("open");
        for round in 0..20 {
            for k in 0..10 {
                put(&store, &format!("/c/{k}"), &round.to_string()).await;
            }
        }
        let rev = store.current_revision().await.expect("rev");
        store.compact(rev).await.expect("compact");
        // Compacting again, or to an older revision, is a no-op.
        store.compact(rev).await.expect("compact again");
        store.compact(rev - 5).await.expect("compact older");
        assert_eq!(store.compact_revision().await.expect("compacted"), rev);
        let err = store
            .compact(rev + 1)
            .await
            .expect_err("compacting the future");
        assert!(err.is_too_large_resource_version(), "{err}");
        store
            .list(
                "/c",
                &ListOptions {
                    recursive: true,
                    ..Default::default()
                },
            )
            .await
            .expect("list")
            .items
    };
    let store = RocksStorage::open(dir.path(), &options()).expect("reopen");
    let now = store
        .list(
            "/c",
            &ListOptions {
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("list")
        .items;
    assert_eq!(now, final_state);
    assert!(now.iter().all(|o| o.value.as_ref() == b"19"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_periodic_compactor_keeps_one_interval_of_history() {
    let store = RocksStorage::open_temporary(&RocksOptions {
        compaction_interval: Duration::from_millis(200),
        ..RocksOptions::default()
    })
    .expect("open");
    let first = put(&store, "/k/a", "1").await;
    put(&store, "/k/a", "2").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    // The compactor compacts to what it saw one interval earlier, so it reaches the writes above after two ticks.
    while store.compact_revision().await.expect("compacted") < first.revision + 1 {
        assert!(Instant::now() < deadline, "the compactor never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = store
        .list(
            "/k",
            &ListOptions {
                recursive: true,
                resource_version: Some(first.revision),
                resource_version_match: Some(ResourceVersionMatch::Exact),
                ..Default::default()
            },
        )
        .await
        .expect_err("compacted revision");
    assert_eq!(err.code(), 410);
}
