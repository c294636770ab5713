//! A flood of watches that never read, under writes of large objects: `--max-watches` turns the surplus away with
//! 429, and memory stays bounded by the distinct events kept, not by watchers × events (the watch cache shares one
//! encoding of an event between all its watchers, and each watcher's queue is bounded in bytes).
//!
//! One test in its own binary, so that the process's RSS is this server's and these clients' only.

mod support;

use serde_json::json;
use support::TestServer;

const PIZZAS: &str =
    "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/default/pizzas";

fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib / 1024
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_slow_watchers_is_limited_and_memory_stays_bounded() {
    const LIMIT: usize = 200;
    const WATCHES: usize = 260;
    const OBJECTS: usize = 200;
    const ANNOTATION: usize = 100 << 10;

    let limit = format!("--max-watches={LIMIT}");
    let server = TestServer::start(&["--storage-backend=memory", &limit]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], support::TOPPINGS);
    let before = rss_mib();

    // Watches that are never read: their connections' flow-control windows fill, and the server's queues with them.
    let mut open = Vec::new();
    let mut refused = 0;
    for _ in 0..WATCHES {
        let (code, response) = watch(&server).await;
        match code {
            200 => open.push(response),
            429 => refused += 1,
            other => panic!("watch answered {other}"),
        }
    }
    assert_eq!((open.len(), refused), (LIMIT, WATCHES - LIMIT));

    // 200 pizzas of ~100 KiB each: ~20 MiB of distinct events, ~4 GiB if every watcher kept its own copy.
    let big = "x".repeat(ANNOTATION);
    for i in 0..OBJECTS {
        let pizza = json!({
            "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
            "kind": "Pizza",
            "metadata": {"name": format!("big-{i}"), "annotations": {"big": big}},
            "spec": {"toppings": [{"name": "mozzarella", "quantity": 1}]},
        });
        let (code, _, body) = server
            .raw("POST", PIZZAS, &[], serde_json::to_vec(&pizza).unwrap())
            .await;
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    }
    let grown = rss_mib().saturating_sub(before);
    eprintln!(
        "RSS grew by {grown} MiB with {LIMIT} slow watchers and {OBJECTS} objects of 100 KiB"
    );
    assert!(grown < 400, "RSS grew by {grown} MiB");

    // The server still serves, and a watch fits again once the flood is gone.
    drop(open);
    let mut code = 0;
    for _ in 0..100 {
        (code, _) = watch(&server).await;
        if code == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(code, 200);
}

/// Opens a watch on a connection of its own, with a client that does not retry a 429 (kube-rs's default client
/// retries it with backoff); returns the status and the unread response.
async fn watch(server: &TestServer) -> (u16, http::Response<kube::client::Body>) {
    let kubeconfig = kube::config::Kubeconfig::read_from(&server.kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let request = http::Request::get(format!("{PIZZAS}?watch=1"))
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let response = client.send(request).await.unwrap();
    (response.status().as_u16(), response)
}
