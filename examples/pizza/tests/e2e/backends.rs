//! The pizza server on each persistent backend: objects survive a restart (SQLite), and two servers on one
//! database or etcd see each other's writes (Postgres, etcd), status and finalizer-held deletions included. The etcd and Postgres launchers are the storage
//! crates' own test harnesses.

use crate::support;

use crate::etcd;
use crate::pg;

use std::time::Duration;

use serde_json::{Value, json};
use support::{MARGHERITA, TOPPINGS, TestServer};

const PIZZAS: &str =
    "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/default/pizzas";

/// Creates the example toppings and pizza with kubectl and reads the pizza back in v1beta1.
async fn create_examples(server: &TestServer) {
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    server.kubectl_stdin_ok(&["create", "-f", "-"], MARGHERITA);
    assert_margherita(server).await;
}

async fn assert_margherita(server: &TestServer) {
    let (code, _, body) = server
        .raw("GET", &format!("{PIZZAS}/margherita"), &[], vec![])
        .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let pizza: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        pizza["spec"]["toppings"],
        json!([{"name": "mozzarella", "quantity": 1}, {"name": "tomato", "quantity": 1}])
    );
    let toppings = server.kubectl_ok(&["get", "toppings", "-o", "name"]);
    assert_eq!(toppings.lines().count(), 3, "{toppings}");
}

/// A write through `a` reaches a watch on `b` and a consistent list on `b`.
async fn assert_replicas_share(a: &TestServer, b: &TestServer) {
    let path = format!("{PIZZAS}?watch=1&resourceVersion=0&timeoutSeconds=10");
    let (code, _, mut stream) = b.stream(&path, "application/json").await;
    assert_eq!(code, 200);
    a.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &MARGHERITA.replace("margherita", "quattro"),
    );
    stream
        .read_until(
            Duration::from_secs(10),
            "the other server's write arrives",
            |buf| String::from_utf8_lossy(buf).contains("\"quattro\""),
        )
        .await;
    let names = b.kubectl_ok(&["get", "pizzas", "-o", "name"]);
    assert!(
        names.contains("pizza.restaurant.programming-kubernetes.info/quattro"),
        "{names}"
    );
}

/// The cost controller and a finalizer-held deletion, written through `a` and `b` in turn: a topping's new cost
/// written on `a` is in the pizza's status on `b` (the replica holding the leader election lease runs the controller,
/// see tests/leader_election.rs), the deletion marks written on
/// one are what the other serves, and removing the finalizer on `b` deletes the pizza.
async fn assert_status_and_finalizers(a: &TestServer, b: &TestServer) {
    // Margherita is one mozzarella and one tomato (0.1).
    a.kubectl_ok(&[
        "patch",
        "topping",
        "mozzarella",
        "--type=merge",
        "-p",
        r#"{"spec":{"cost":2}}"#,
    ]);
    let mut pizza = Value::Null;
    for _ in 0..200 {
        let (code, _, body) = b
            .raw("GET", &format!("{PIZZAS}/margherita"), &[], vec![])
            .await;
        assert_eq!(code, 200);
        pizza = serde_json::from_slice(&body).unwrap();
        if (pizza["status"]["cost"].as_f64().unwrap_or_default() - 2.1).abs() < 1e-9 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        (pizza["status"]["cost"].as_f64().unwrap_or_default() - 2.1).abs() < 1e-9,
        "{pizza}"
    );
    a.kubectl_ok(&[
        "patch",
        "pizza",
        "margherita",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/oven"]}}"#,
    ]);
    a.kubectl_ok(&["delete", "pizza", "margherita", "--wait=false"]);
    let (code, _, body) = b
        .raw(
            "GET",
            &format!("{PIZZAS}/margherita?resourceVersion=0"),
            &[],
            vec![],
        )
        .await;
    assert_eq!(code, 200);
    let pizza: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        pizza["metadata"]["deletionTimestamp"].is_string(),
        "{pizza}"
    );
    b.kubectl_ok(&[
        "patch",
        "pizza",
        "margherita",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let (code, _, _) = a
        .raw("GET", &format!("{PIZZAS}/margherita"), &[], vec![])
        .await;
    assert_eq!(code, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn default_backend_is_sqlite_and_keeps_objects_across_restarts() {
    let server = TestServer::start(&[]).await;
    create_examples(&server).await;
    assert!(server.dir.path().join("state.db").exists());
    assert!(!server.dir.path().join("rocksdb").exists());
    let dir = server.stop().await;
    let server = TestServer::start_in(dir, &[]).await;
    assert_margherita(&server).await;
    assert_status_and_finalizers(&server, &server).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rocksdb_keeps_objects_across_restarts() {
    let server = TestServer::start(&["--storage-backend", "rocksdb"]).await;
    create_examples(&server).await;
    assert!(server.dir.path().join("rocksdb").join("CURRENT").exists());
    let dir = server.stop().await;
    let server = TestServer::start_in(dir, &["--storage-backend", "rocksdb"]).await;
    assert_margherita(&server).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_replicas() {
    let url = pg::server().fresh_database().await;
    let args = ["--storage-backend", "postgres", "--storage-url", &url];
    let a = TestServer::start(&args).await;
    let b = TestServer::start(&args).await;
    create_examples(&a).await;
    assert_margherita(&b).await;
    assert_replicas_share(&a, &b).await;
    assert_status_and_finalizers(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_replicas() {
    let etcd = etcd::EtcdServer::start().await;
    let url = etcd.url();
    let args = ["--storage-backend", "etcd", "--etcd-servers", &url];
    let a = TestServer::start(&args).await;
    let b = TestServer::start(&args).await;
    create_examples(&a).await;
    assert_margherita(&b).await;
    assert_replicas_share(&a, &b).await;
    assert_status_and_finalizers(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unreachable_storage_is_not_ready_and_admission_waits() {
    // Nothing listens on this port: the caches never load.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let server =
        TestServer::start_unready(dir, &["--storage-backend", "etcd", "--etcd-servers", &url])
            .await;

    let (code, _, body) = server.raw("GET", "/readyz?verbose", &[], vec![]).await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!(code, 500, "{text}");
    for check in ["etcd", "etcd-readiness", "poststarthook/storage-readiness"] {
        assert!(text.contains(&format!("[-]{check} failed")), "{text}");
    }
    // As upstream, etcd is a liveness check too.
    let (code, _, body) = server.raw("GET", "/livez?verbose", &[], vec![]).await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!(code, 500, "{text}");
    assert!(text.contains("[-]etcd failed"), "{text}");
    assert!(!text.contains("etcd-readiness"), "{text}");

    let body = serde_json::to_vec(&serde_json::json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
        "kind": "Pizza",
        "metadata": {"name": "early"},
        "spec": {"toppings": [{"name": "salami", "quantity": 1}]}
    }))
    .unwrap();
    let (code, _, body) = server
        .raw(
            "POST",
            PIZZAS,
            &[("content-type", "application/json")],
            body,
        )
        .await;
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "pizzas.restaurant.programming-kubernetes.info \"early\" is forbidden: not yet ready to handle request"
    );
}
