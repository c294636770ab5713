//! Linearizability through the server: 8 concurrent HTTP clients create, get, update and delete a few pizzas
//! of a started pizza server, on each backend, and the recorded history must be linearizable (see `lin_http`).
//! `APISERVER_LIN_HISTORIES` sets how many histories per backend (default 1).

use crate::support;

use crate::etcd;
use crate::lin_http;
use crate::pg;

use lin_http::{check_one_history, histories, prepare};
use support::TestServer;

async fn check_backend(label: &str, args: &[&str]) {
    // Without the controllers: the cost controller writes each new pizza's status, a write no client made that
    // the history could not explain.
    let mut args = args.to_vec();
    args.push("--controllers=-pizza-cost,-oven");
    let server = TestServer::start(&args).await;
    prepare(&server).await;
    let first_seed = uuid::Uuid::new_v4().as_u64_pair().0;
    let (mut ops, mut ambiguous) = (0, 0);
    let n = histories();
    for h in 0..n {
        let (o, a) = check_one_history(&server, first_seed.wrapping_add(h * 1000)).await;
        ops += o;
        ambiguous += a;
    }
    eprintln!(
        "linearizability over HTTP ({label}): {n} histories checked, {ops} operations ({ambiguous} ambiguous), seed {first_seed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_history_is_linearizable_rocksdb() {
    check_backend("rocksdb", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_history_is_linearizable_sqlite() {
    check_backend("sqlite", &["--storage-backend", "sqlite"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_history_is_linearizable_memory() {
    check_backend("memory", &["--storage-backend", "memory"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_history_is_linearizable_postgres() {
    let url = pg::server().fresh_database().await;
    check_backend(
        "postgres",
        &["--storage-backend", "postgres", "--storage-url", &url],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_history_is_linearizable_etcd() {
    let etcd = etcd::EtcdServer::start().await;
    let url = etcd.url();
    check_backend(
        "etcd",
        &["--storage-backend", "etcd", "--etcd-servers", &url],
    )
    .await;
}
