//! Compaction under churn: 10,000 updates to one key, then compaction leaves one row, and reads stay cheap
//! (counted in rows, not timed).

use crate::common;

use std::time::Duration;

use apiserver::storage::{GetOptions, ListOptions, Storage, StorageError, StoredObject};
use apiserver_storage_sql::SqlStorage;
use bytes::Bytes;
use futures::future::ready;

const UPDATES: u64 = 10_000;

async fn churn_then_compact(store: &SqlStorage) {
    let key = "/churn/one";
    let first = store.create(key, Bytes::from("0")).await.expect("create");
    // A second key that stays, so lists have something else to walk past.
    store
        .create("/churn/two", Bytes::from("2"))
        .await
        .expect("create");
    // Concurrent writers, each updating the same key (CAS retries included).
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..UPDATES / 4 {
                let mut inc = |cur: Option<StoredObject>| {
                    let n: u64 = cur
                        .and_then(|c| std::str::from_utf8(&c.value).ok()?.parse().ok())
                        .unwrap_or(0);
                    ready(Ok::<_, StorageError>(Bytes::from((n + 1).to_string())))
                };
                s.guaranteed_update("/churn/one", false, None, &mut inc, None)
                    .await
                    .expect("update");
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    let latest = store.get(key, &GetOptions::default()).await.expect("get");
    assert_eq!(latest.value, Bytes::from(UPDATES.to_string()));
    assert_eq!(
        store.log_rows().await.expect("rows"),
        UPDATES + 2,
        "one row per write before compaction"
    );
    // Reads at the latest revision only touch the latest row per key, even with 10,000 rows for the key.
    let l = store
        .list(
            "/churn",
            &ListOptions {
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    assert_eq!(l.items.len(), 2);

    let rev = store.current_revision().await.expect("rev");
    let mut report = store.compact_with_report(rev).await.expect("compact");
    // A compaction that ran out of time continues on the next call.
    let mut rounds = 0;
    while !report.complete {
        rounds += 1;
        assert!(rounds < 100, "compaction makes no progress: {report:?}");
        report = store.compact_with_report(rev).await.expect("compact");
    }
    eprintln!("compaction: {report:?}");
    assert_eq!(
        store.log_rows().await.expect("rows"),
        2,
        "one live row per key after compaction"
    );
    assert_eq!(
        store.get(key, &GetOptions::default()).await.expect("get"),
        latest
    );
    let l = store
        .list(
            "/churn",
            &ListOptions {
                recursive: true,
                limit: 1,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    assert_eq!(l.items, vec![latest.clone()]);
    assert_eq!(l.remaining_item_count, Some(1));
    // History before the compaction is gone, with a 410.
    let err = store
        .list(
            "/churn",
            &ListOptions {
                recursive: true,
                resource_version: Some(first.revision),
                resource_version_match: Some(apiserver::storage::ResourceVersionMatch::Exact),
                ..Default::default()
            },
        )
        .await
        .expect_err("compacted");
    assert_eq!(err.code(), 410);
    assert_eq!(store.compact_revision().await.expect("compacted"), rev);
    // Deleting and compacting removes the tombstone too.
    store
        .delete(key, None, &mut apiserver::storage::AllowDeletion, None)
        .await
        .expect("delete");
    let rev = store.current_revision().await.expect("rev");
    store.compact(rev).await.expect("compact");
    assert_eq!(store.log_rows().await.expect("rows"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_churn_then_compaction_leaves_one_row() {
    let t = common::sqlite_store_with(common::no_fsync).await;
    churn_then_compact(&t.store).await;
    // The WAL was checkpointed and truncated: steady churn does not grow it without bound.
    let wal = t.dir.path().join("state.db-wal");
    let wal_size = std::fs::metadata(&wal).map_or(0, |m| m.len());
    assert!(
        wal_size < 4 << 20,
        "WAL is {wal_size} bytes after compaction"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_churn_then_compaction_leaves_one_row() {
    let store = common::pg_store().await;
    churn_then_compact(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_is_time_bounded_and_resumes() {
    let t = common::sqlite_store_with(|o| {
        common::no_fsync(o);
        o.compaction_batch = 10;
        o.compaction_timeout = Duration::ZERO;
    })
    .await;
    let s = &t.store;
    s.create("/b/k", Bytes::from("0")).await.expect("create");
    for i in 1..=50 {
        let v = Bytes::from(i.to_string());
        let mut f = move |_: Option<StoredObject>| ready(Ok::<_, StorageError>(v.clone()));
        s.guaranteed_update("/b/k", false, None, &mut f, None)
            .await
            .expect("update");
    }
    let rev = s.current_revision().await.expect("rev");
    let r = s.compact_with_report(rev).await.expect("compact");
    assert!(!r.complete, "a zero budget stops before the first batch");
    // Reads before the revision are refused even though rows remain.
    assert_eq!(s.compact_revision().await.expect("rev"), rev);
    assert_eq!(s.log_rows().await.expect("rows"), 51);
    assert_eq!(s.last_compaction().expect("report").rows_deleted, 0);
    // Another store on the same file (as after a restart) with a budget finishes the job from the cursor.
    let url = format!("sqlite://{}", t.dir.path().join("state.db").display());
    let mut opts = apiserver_storage_sql::SqlStorageOptions::with_url(url);
    opts.compaction_batch = 10;
    let other = SqlStorage::open(&opts).await.expect("reopen");
    let r = other.compact_with_report(rev).await.expect("compact");
    assert!(r.complete, "{r:?}");
    assert_eq!(r.batches, rev.div_ceil(10), "{r:?}");
    assert_eq!(r.rows_deleted, 50);
    assert_eq!(s.log_rows().await.expect("rows"), 1);
}
