//! Leader election among replicas on one Postgres database and on one etcd (where `--leader-elect` is on by
//! default), with short durations (lease 5s, renew deadline 3s, retry period 500ms) and the lease kept in the
//! servers' own storage (no core cluster): only the holder runs the cost controller (counted by its status writes
//! in each replica's storage metrics: the test itself never updates a pizza); a leader killed without a word (its
//! runtime dropped: nothing released) is replaced after the lease duration, not before; a leader stopped
//! gracefully releases the lease and is replaced within about a retry period. Each new leader reconciles a new
//! pizza.

mod support;

#[path = "../../../storage-etcd/tests/support/mod.rs"]
mod etcd;
#[path = "../../../storage-sql/tests/common/pg.rs"]
#[allow(dead_code)]
mod pg;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{MARGHERITA, TOPPINGS, TestServer};

const PIZZAS: &str =
    "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/default/pizzas";
const LEASE: Duration = Duration::from_secs(5);
const RETRY: Duration = Duration::from_millis(500);
const ELECTION: [&str; 3] = [
    "--leader-elect-lease-duration=5s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=500ms",
];

/// The two tests start four servers each and measure takeovers: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The value of the first `/metrics` series named `name` whose labels include all of `labels`.
async fn metric(server: &TestServer, name: &str, labels: &[&str]) -> Option<f64> {
    let (code, _, body) = server.raw("GET", "/metrics", &[], vec![]).await;
    assert_eq!(code, 200);
    let text = String::from_utf8_lossy(&body).into_owned();
    text.lines()
        .filter(|line| line.starts_with(&format!("{name}{{")))
        .find(|line| labels.iter().all(|l| line.contains(l)))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

async fn leading(server: &TestServer) -> bool {
    metric(
        server,
        "leader_election_master_status",
        &["name=\"pizza-apiserver\""],
    )
    .await
        == Some(1.0)
}

/// How many pizzas this replica's storage wrote with GuaranteedUpdate: the cost controller's status writes.
async fn pizza_updates(server: &TestServer, etcd: bool) -> f64 {
    let found = if etcd {
        metric(
            server,
            "etcd_request_duration_seconds_count",
            &["operation=\"update\"", "type=\"pizzas\""],
        )
        .await
    } else {
        metric(
            server,
            "apiserver_storage_request_duration_seconds_count",
            &["operation=\"update\"", "type=\"pizzas\""],
        )
        .await
    };
    found.unwrap_or(0.0)
}

/// Waits until `server` leads (true) or not; returns how long it took.
async fn wait_leading(server: &TestServer, within: Duration) -> Duration {
    let started = Instant::now();
    while !leading(server).await {
        assert!(
            started.elapsed() < within,
            "no leadership within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

fn create_pizza(server: &TestServer, name: &str) {
    server.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &MARGHERITA.replace("margherita", name),
    );
}

/// Waits for the cost controller to set the pizza's cost (mozzarella 1.0 + tomato 0.1).
async fn wait_cost(server: &TestServer, name: &str) {
    let mut pizza = Value::Null;
    for _ in 0..200 {
        let (code, _, body) = server
            .raw("GET", &format!("{PIZZAS}/{name}"), &[], vec![])
            .await;
        assert_eq!(code, 200);
        pizza = serde_json::from_slice(&body).unwrap();
        if (pizza["status"]["cost"].as_f64().unwrap_or_default() - 1.1).abs() < 1e-9 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the cost of {name} was not set within 10s: {pizza}");
}

async fn elect(backend: &str, args: &[&str]) {
    let etcd = backend == "etcd";
    let args: Vec<&str> = args.iter().chain(ELECTION.iter()).copied().collect();

    let a = TestServer::start_isolated(&args).await;
    wait_leading(&a, Duration::from_secs(10)).await;
    let b = TestServer::start_isolated(&args).await;

    // Everything is written through the follower; only the leader reconciles.
    b.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    let names: Vec<String> = (0..5).map(|i| format!("pizza-{i}")).collect();
    for name in &names {
        create_pizza(&b, name);
    }
    for name in &names {
        wait_cost(&b, name).await;
    }
    let (by_a, by_b) = (pizza_updates(&a, etcd).await, pizza_updates(&b, etcd).await);
    eprintln!("{backend}: status writes by the leader {by_a}, by the follower {by_b}");
    assert!(by_a >= names.len() as f64, "the leader wrote {by_a}");
    assert_eq!(by_b, 0.0, "the follower ran the cost controller");
    assert!(leading(&a).await);
    assert!(!leading(&b).await);

    // SIGKILL: nothing releases the lease; b waits for it to expire.
    a.kill();
    let took = wait_leading(&b, LEASE + 3 * RETRY + Duration::from_secs(5)).await;
    eprintln!("{backend}: takeover after the leader was killed: {took:?} (lease {LEASE:?})");
    assert!(
        took >= LEASE - RETRY.mul_f64(2.2) - Duration::from_millis(100),
        "took the lease of a leader that had renewed it {took:?} ago"
    );
    assert!(
        took <= LEASE + RETRY.mul_f64(2.2) + Duration::from_secs(2),
        "took {took:?}"
    );
    create_pizza(&b, "after-kill");
    wait_cost(&b, "after-kill").await;
    assert!(pizza_updates(&b, etcd).await >= 1.0);

    // A graceful stop releases the lease: c takes it at its next retry.
    let c = TestServer::start_isolated(&args).await;
    tokio::time::sleep(RETRY * 3).await;
    assert!(!leading(&c).await, "c took the lease from a live leader");
    let stopping = Instant::now();
    b.stop().await;
    let took = wait_leading(&c, LEASE).await;
    let total = stopping.elapsed();
    eprintln!(
        "{backend}: takeover after the leader stopped gracefully: {took:?} after the stop returned, {total:?} \
         after it began"
    );
    assert!(
        total < RETRY.mul_f64(2.2) + Duration::from_secs(1),
        "the released lease took {total:?} to be taken"
    );
    create_pizza(&c, "after-stop");
    wait_cost(&c, "after-stop").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_replicas_elect_one_leader() {
    let _serial = SERIAL.lock().await;
    let url = pg::server().fresh_database().await;
    elect(
        "postgres",
        &["--storage-backend", "postgres", "--storage-url", &url],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_replicas_elect_one_leader() {
    let _serial = SERIAL.lock().await;
    let etcd = etcd::EtcdServer::start().await;
    let url = etcd.url();
    elect(
        "etcd",
        &["--storage-backend", "etcd", "--etcd-servers", &url],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_backends_do_not_elect_unless_asked() {
    let server = TestServer::start(&["--storage-backend", "memory"]).await;
    assert_eq!(
        metric(&server, "leader_election_master_status", &[]).await,
        None
    );
    let server = TestServer::start(&["--storage-backend", "memory", "--leader-elect"]).await;
    wait_leading(&server, Duration::from_secs(10)).await;
}
