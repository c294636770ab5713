//! Fault injection with a real Postgres: the pizza server on the SQL backend over Postgres, under a concurrent
//! HTTP load, while Postgres is stopped (immediate shutdown: connections cut) and started again. Asserted: no
//! request hangs past its timeout; `/readyz` fails while Postgres is down and recovers after; requests succeed
//! again after the restart (connections re-established); and the recorded history is linearizable (requests
//! that failed with 5xx may or may not have happened).
//!
//! A test binary of its own: it stops the Postgres every test of its binary would share.

mod support;

#[path = "lin_http/mod.rs"]
mod lin_http;
#[path = "../../../storage-sql/tests/common/pg.rs"]
#[allow(dead_code)]
mod pg;

use std::time::{Duration, Instant};

use apiserver::storage::testing::linearizability::{Recorder, check_kv_history};
use lin_http::{TIMEOUT, prepare, record_http_history, request};
use support::TestServer;

/// `/readyz`'s status, or `None` when it did not answer within 10 seconds.
async fn readyz(client: &kube::Client) -> Option<u16> {
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        request(client, "GET", "/readyz", "application/json", None),
    )
    .await;
    r.ok().flatten().map(|(status, _)| status)
}

/// Polls `/readyz` until it answers `want` (or not 200, with `want` = `None`); returns how long that took.
async fn wait_readyz(client: &kube::Client, ready: bool, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let status = readyz(client).await;
        if (status == Some(200)) == ready && status.is_some() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "/readyz did not turn {} within {within:?} (last: {status:?})",
            if ready { "ready" } else { "unready" }
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_stopped_and_restarted_under_load() {
    let pg = pg::server();
    let url = pg.fresh_database().await;
    // Without the controllers, whose status writes no client made (see tests/e2e/linearizability.rs).
    let server = TestServer::start(&[
        "--storage-backend",
        "postgres",
        "--storage-url",
        &url,
        "--controllers=-pizza-cost,-oven",
    ])
    .await;
    prepare(&server).await;
    let probe = server.client().await;
    let rec = Recorder::new();
    let seed = uuid::Uuid::new_v4().as_u64_pair().0;

    let faults = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let stopped_at = rec.now();
        tokio::task::block_in_place(|| pg.stop());
        let unready_after = wait_readyz(&probe, false, Duration::from_secs(30)).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        tokio::task::block_in_place(|| pg.start_again());
        let restarted_at = rec.now();
        let ready_after = wait_readyz(&probe, true, Duration::from_secs(60)).await;
        (stopped_at, unready_after, restarted_at, ready_after)
    };
    let load = record_http_history(&server, seed, Some(Duration::from_secs(16)), &rec);
    let ((stopped_at, unready_after, restarted_at, ready_after), longest) =
        tokio::join!(faults, load);

    let history = rec.history();
    let answered_after_restart = history
        .iter()
        .filter(|k| k.op.call > restarted_at && k.op.output.is_some())
        .count();
    let failed_while_down = history
        .iter()
        .filter(|k| k.op.call > stopped_at && k.op.call < restarted_at && k.op.output.is_none())
        .count();
    eprintln!(
        "postgres faults (seed {seed}): /readyz failed {unready_after:?} after the stop and recovered \
         {ready_after:?} after the restart; {failed_while_down} requests failed while down, \
         {answered_after_restart} answered after the restart; longest request {longest:?}"
    );
    assert!(
        longest < TIMEOUT,
        "a request hung for {longest:?} (the client gives up at {TIMEOUT:?})"
    );
    assert!(
        answered_after_restart > 0,
        "no request succeeded after Postgres came back"
    );
    let report = tokio::task::spawn_blocking(move || check_kv_history(&history))
        .await
        .expect("checker");
    eprintln!("postgres faults: {report}");
    assert!(report.is_linearizable(), "seed {seed}: {report}");
}
