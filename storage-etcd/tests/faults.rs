//! Fault injection with real processes: a 3-member etcd cluster on loopback under a write and watch load through
//! the etcd backend; the leader is killed (SIGKILL) and restarted, then a follower. Asserted: every request ends
//! within its timeout (errors, not hangs), the recorded history is linearizable (operations that failed
//! ambiguously may or may not have happened), no acknowledged write is lost (the final reads are part of the
//! history), and a watch that re-establishes itself after failures sees every revision once, in order, with no
//! gap, ending in the final state.

#[path = "support/cluster.rs"]
mod cluster;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use apiserver::storage::Storage;
use apiserver::storage::testing::linearizability::{
    Recorder, Workload, check_kv_history, check_watch, encode_value, follow_watch, read_finals,
    record_storage_history,
};
use apiserver_storage_etcd::{EtcdConfig, EtcdStorage};
use cluster::Cluster;

/// How long one storage call may take before the test counts it as a hang.
const OP_TIMEOUT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_and_follower_killed_under_load() {
    let mut cluster = Cluster::start(3).await;
    let store: Arc<dyn Storage> = EtcdStorage::connect(EtcdConfig {
        compaction_interval: None,
        ..EtcdConfig::new(cluster.urls(), "/registry")
    })
    .await
    .expect("connect")
    .into_dyn();
    let prefix = "/registry/faults".to_string();
    let from = store.current_revision().await.expect("revision");
    let sentinel = format!("{prefix}/sentinel");
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(follow_watch(
        store.clone(),
        prefix.clone(),
        from,
        sentinel.clone(),
        stop.clone(),
    ));
    let workload = Workload {
        clients: 8,
        keys: 4,
        op_timeout: OP_TIMEOUT,
        seed: uuid::Uuid::new_v4().as_u64_pair().0,
        duration: Some(Duration::from_secs(14)),
        ..Workload::default()
    };
    let rec = Recorder::new();
    let load = tokio::spawn({
        let (store, prefix, workload, rec) =
            (store.clone(), prefix.clone(), workload.clone(), rec.clone());
        async move { record_storage_history(store, &prefix, &workload, &rec).await }
    });

    tokio::time::sleep(Duration::from_secs(2)).await;
    let faults = cluster.kill_leader_then_follower().await;

    let stats = load.await.expect("load");
    let keys: Vec<String> = (0..workload.keys)
        .map(|k| format!("{prefix}/k{k}"))
        .collect();
    let finals = read_finals(store.as_ref(), &keys, &rec).await;
    store
        .create(&sentinel, encode_value("sentinel", 0))
        .await
        .expect("sentinel");
    let events = tokio::time::timeout(Duration::from_secs(60), watcher)
        .await
        .expect("the watch saw the sentinel")
        .expect("watcher");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);

    eprintln!(
        "etcd faults: {faults:?}; {} answered, {} errors, {} timeouts, longest call {:?}, {} watch events",
        stats.answered,
        stats.errors,
        stats.timeouts,
        stats.longest,
        events.len()
    );
    assert_eq!(
        stats.timeouts, 0,
        "calls hung past {OP_TIMEOUT:?} instead of failing"
    );
    assert!(
        stats.answered > 100,
        "too little load got through: {stats:?}"
    );
    let history = rec.history();
    let watch = check_watch(&events, &history, from, &finals, true);
    assert!(watch.is_empty(), "the watch disagrees: {watch:#?}");
    let report = tokio::task::spawn_blocking(move || check_kv_history(&history))
        .await
        .expect("checker");
    eprintln!("etcd faults: {report}");
    assert!(report.is_linearizable(), "{report}");
}
