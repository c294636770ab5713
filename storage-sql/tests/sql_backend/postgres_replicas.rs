//! Two stores (as two server replicas would) on one Postgres: writes through one reach watches on the other
//! through LISTEN/NOTIFY, not through the poll fallback.

use crate::common;

use std::time::{Duration, Instant};

use apiserver::storage::{EventType, Storage, WatchOptions};
use apiserver_storage_sql::{SqlStorage, SqlStorageOptions};
use bytes::Bytes;
use futures::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_on_one_replica_reaches_a_watch_on_the_other_within_100ms() {
    // A poll interval far above the bound, so only NOTIFY can deliver in time.
    let slow_poll = |o: &mut SqlStorageOptions| o.watch_poll_interval = Duration::from_secs(30);
    let (a, url) = common::pg_store_with(slow_poll).await;
    let mut opts = SqlStorageOptions::with_url(url);
    slow_poll(&mut opts);
    let b = SqlStorage::open(&opts).await.expect("second replica");
    // Let B's LISTEN connection come up before measuring.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let rev = b.current_revision().await.expect("rev");
    let mut w = b
        .watch(
            "/replicas",
            &WatchOptions {
                resource_version: Some(rev),
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("watch on B");
    let mut latencies = Vec::new();
    for i in 0..20 {
        let key = format!("/replicas/k{i}");
        let started = Instant::now();
        let o = a
            .create(&key, Bytes::from(format!("v{i}")))
            .await
            .expect("create on A");
        let ev = tokio::time::timeout(Duration::from_secs(30), w.next())
            .await
            .expect("event within 30 s")
            .expect("watch open");
        latencies.push(started.elapsed());
        assert_eq!(
            (ev.event_type, ev.key.as_str(), ev.revision),
            (EventType::Added, key.as_str(), o.revision)
        );
        // B's reads agree with A's write at once.
        let got = b.get(&key, &Default::default()).await.expect("get on B");
        assert_eq!(got, o);
    }
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    eprintln!(
        "write on A -> event on B: median {median:?}, max {:?}",
        latencies.last()
    );
    assert!(
        median <= Duration::from_millis(100),
        "median write->watch latency across replicas {median:?} > 100 ms ({latencies:?})"
    );
    // Even the slowest beats the 30 s poll: NOTIFY delivered every one.
    assert!(latencies.iter().all(|l| *l < Duration::from_secs(5)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_one_gap_free_revision_sequence() {
    let (a, url) = common::pg_store_with(|_| {}).await;
    let b = SqlStorage::connect(&url).await.expect("second replica");
    let start = a.current_revision().await.expect("rev");
    let mut w = a
        .watch(
            "/seq",
            &WatchOptions {
                resource_version: Some(start),
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("watch");
    let mut tasks = Vec::new();
    for (i, s) in [a.clone(), b.clone(), a.clone(), b.clone()]
        .into_iter()
        .enumerate()
    {
        tasks.push(tokio::spawn(async move {
            for j in 0..25 {
                s.create(&format!("/seq/{i}-{j}"), Bytes::from("x"))
                    .await
                    .expect("create");
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    let mut seen = Vec::new();
    while seen.len() < 100 {
        let ev = tokio::time::timeout(Duration::from_secs(30), w.next())
            .await
            .expect("event")
            .expect("open");
        assert_eq!(ev.event_type, EventType::Added, "{ev:?}");
        seen.push(ev.revision);
    }
    let want: Vec<u64> = (start + 1..=start + 100).collect();
    assert_eq!(seen, want, "revisions must be gap-free and in order");
}
