//! Fault injection with a real etcd cluster behind the pizza server: three etcd members on loopback, the server on
//! the etcd backend with all three in `--etcd-servers`, a concurrent HTTP load (creates, reads, conditional updates
//! and deletes of pizzas), and meanwhile the etcd leader killed (SIGKILL) and restarted, then a follower. Asserted:
//! no request hangs past its timeout (a failover is errors or slow answers, never a hang); requests succeed after
//! the faults; the recorded history is linearizable (requests that failed with 5xx may or may not have happened);
//! and the server stays ready with a quorum of etcd.
//!
//! A test binary of its own: three etcd processes and their elections are a heavy neighbour for other tests.

mod support;

#[path = "../../../storage-etcd/tests/support/cluster.rs"]
mod cluster;
#[path = "lin_http/mod.rs"]
mod lin_http;

use std::time::Duration;

use apiserver::storage::testing::linearizability::{Recorder, check_kv_history};
use cluster::Cluster;
use lin_http::{TIMEOUT, prepare, record_http_history, request};
use support::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_leader_and_follower_killed_under_http_load() {
    let mut cluster = Cluster::start(3).await;
    let servers = cluster.urls().join(",");
    // Without the controllers, whose status writes no client made (see tests/e2e/linearizability.rs).
    let server = TestServer::start(&[
        "--storage-backend",
        "etcd",
        "--etcd-servers",
        &servers,
        "--controllers=-pizza-cost,-oven",
    ])
    .await;
    prepare(&server).await;
    let probe = server.client().await;
    let rec = Recorder::new();
    let seed = uuid::Uuid::new_v4().as_u64_pair().0;

    let faults = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let faults = cluster.kill_leader_then_follower().await;
        (faults, rec.now())
    };
    let load = record_http_history(&server, seed, Some(Duration::from_secs(18)), &rec);
    let ((faults, recovered_at), longest) = tokio::join!(faults, load);
    let ready = request(&probe, "GET", "/readyz", "application/json", None)
        .await
        .map(|(status, _)| status);

    let history = rec.history();
    let answered_after = history
        .iter()
        .filter(|k| k.op.call > recovered_at && k.op.output.is_some())
        .count();
    let failed = history.iter().filter(|k| k.op.output.is_none()).count();
    eprintln!(
        "etcd faults through the server (seed {seed}): {faults:?}; {} requests, {failed} failed, \
         {answered_after} answered after the last restart; longest request {longest:?}; /readyz {ready:?}",
        history.len()
    );
    assert!(
        longest < TIMEOUT,
        "a request hung for {longest:?} (the client gives up at {TIMEOUT:?})"
    );
    assert!(
        answered_after > 0,
        "no request succeeded after the cluster recovered"
    );
    assert_eq!(
        ready,
        Some(200),
        "the server is not ready with a healthy etcd"
    );
    let report = tokio::task::spawn_blocking(move || check_kv_history(&history))
        .await
        .expect("checker");
    eprintln!("etcd faults through the server: {report}");
    assert!(report.is_linearizable(), "seed {seed}: {report}");
}
