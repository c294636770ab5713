//! `/metrics` after a scripted mix of requests (every verb, errors, dry runs, an apply, a watch), parsed with a
//! Prometheus text parser: request counters and histogram counts equal the requests made, per label set, with
//! upstream's names, labels and buckets; the process metrics are there; anonymous clients may not read it.

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;
use support::{NO_COST_CONTROLLER, TestServer, call};

const GROUP: &str = "restaurant.programming-kubernetes.info";
const JSON: (&str, &str) = ("content-type", "application/json");

/// The samples of a scrape by metric name: (labels, value).
type Samples = HashMap<String, Vec<(HashMap<String, String>, f64)>>;

fn scrape(text: &str) -> Samples {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let parsed = prometheus_parse::Scrape::parse(lines).expect("Prometheus text");
    let mut out = Samples::new();
    for sample in parsed.samples {
        let value = match sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            prometheus_parse::Value::Histogram(buckets) => {
                // The +Inf bucket: the count.
                buckets.iter().map(|b| b.count).fold(0.0, f64::max)
            }
            prometheus_parse::Value::Summary(_) => continue,
        };
        let labels = sample
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        out.entry(sample.metric).or_default().push((labels, value));
    }
    out
}

/// The value of `metric` for the sample whose labels include all of `want`; 0 when there is none.
fn value(samples: &Samples, metric: &str, want: &[(&str, &str)]) -> f64 {
    samples
        .get(metric)
        .into_iter()
        .flatten()
        .filter(|(labels, _)| {
            want.iter()
                .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, v)| v)
        .sum()
}

async fn metrics_text(server: &TestServer) -> String {
    let (code, headers, body) = server.raw("GET", "/metrics", &[], vec![]).await;
    assert_eq!(code, 200);
    assert_eq!(
        headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("text/plain; version=0.0.4")
    );
    String::from_utf8(body).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_every_request_as_upstream_labels_them() {
    let server = TestServer::start(&["--storage-backend=memory", NO_COST_CONTROLLER]).await;
    let toppings = format!("/apis/{GROUP}/v1alpha1/toppings");
    let topping = |name: &str| json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Topping", "metadata": {"name": name}, "spec": {"cost": 1.0}});
    for name in ["a", "b", "c"] {
        let (code, _) = call(&server, "POST", &toppings, Some(JSON), topping(name)).await;
        assert_eq!(code, 201);
    }
    // Dry runs, an error, reads, an update, a patch, an apply, a delete.
    let (code, _) = call(
        &server,
        "POST",
        &format!("{toppings}?dryRun=All&dryRun=All"),
        Some(JSON),
        topping("d"),
    )
    .await;
    assert_eq!(code, 201);
    let (code, _) = call(&server, "POST", &toppings, Some(JSON), topping("a")).await;
    assert_eq!(code, 409);
    for _ in 0..2 {
        let (code, _) = call(
            &server,
            "GET",
            &format!("{toppings}/a"),
            None,
            serde_json::Value::Null,
        )
        .await;
        assert_eq!(code, 200);
    }
    let (code, _) = call(
        &server,
        "GET",
        &format!("{toppings}/nope"),
        None,
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(code, 404);
    let (code, _) = call(&server, "GET", &toppings, None, serde_json::Value::Null).await;
    assert_eq!(code, 200);
    let (code, _) = call(
        &server,
        "PATCH",
        &format!("{toppings}/a"),
        Some(("content-type", "application/merge-patch+json")),
        json!({"spec": {"cost": 2.0}}),
    )
    .await;
    assert_eq!(code, 200);
    let (code, _applied) = call(
        &server,
        "PATCH",
        &format!("{toppings}/b?fieldManager=tester"),
        Some(("content-type", "application/apply-patch+yaml")),
        topping("b"),
    )
    .await;
    assert_eq!(code, 200, "{_applied}");
    let (code, _) = call(
        &server,
        "DELETE",
        &format!("{toppings}/c"),
        None,
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    // A request for a resource the server does not serve is not counted (bounded labels).
    let (code, _) = call(
        &server,
        "GET",
        &format!("/apis/{GROUP}/v1alpha1/ovenz"),
        None,
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(code, 404);

    // A watch is long-running while it is open.
    let (code, _, _watch) = server
        .stream(
            &format!("{toppings}?watch=true&timeoutSeconds=30"),
            "application/json",
        )
        .await;
    assert_eq!(code, 200);
    let samples = scrape(&metrics_text(&server).await);
    let common = [
        ("group", GROUP),
        ("version", "v1alpha1"),
        ("resource", "toppings"),
        ("component", "apiserver"),
        ("subresource", ""),
    ];
    let count = |verb: &str, scope: &str, dry_run: &str, code: &str| {
        let mut want = common.to_vec();
        want.extend([
            ("verb", verb),
            ("scope", scope),
            ("dry_run", dry_run),
            ("code", code),
        ]);
        value(&samples, "apiserver_request_total", &want)
    };
    assert_eq!(count("POST", "resource", "", "201"), 3.0);
    assert_eq!(count("POST", "resource", "All", "201"), 1.0);
    assert_eq!(count("POST", "resource", "", "409"), 1.0);
    assert_eq!(count("GET", "resource", "", "200"), 2.0);
    assert_eq!(count("GET", "resource", "", "404"), 1.0);
    assert_eq!(count("LIST", "cluster", "", "200"), 1.0);
    assert_eq!(count("PATCH", "resource", "", "200"), 1.0);
    assert_eq!(count("APPLY", "resource", "", "200"), 1.0);
    assert_eq!(count("DELETE", "resource", "", "200"), 1.0);
    assert_eq!(count("WATCH", "cluster", "", "200"), 1.0);
    assert_eq!(
        value(
            &samples,
            "apiserver_request_total",
            &[("resource", "ovenz")]
        ),
        0.0
    );
    // Every request is in the latency histogram of its labels (the +Inf bucket counts all).
    let durations = |verb: &str, dry_run: &str| {
        let mut want = common.to_vec();
        want.extend([("verb", verb), ("dry_run", dry_run)]);
        value(&samples, "apiserver_request_duration_seconds", &want)
    };
    assert_eq!(durations("POST", ""), 4.0);
    assert_eq!(durations("GET", ""), 3.0);
    assert_eq!(durations("POST", "All"), 1.0);
    // Upstream's buckets.
    assert!(metrics_text(&server).await.contains(r#"apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="restaurant.programming-kubernetes.info",resource="toppings",scope="resource",subresource="",verb="GET",version="v1alpha1",le="0.005"}"#));
    let mut watching = common.to_vec();
    watching.push(("verb", "WATCH"));
    assert_eq!(
        value(&samples, "apiserver_longrunning_requests", &watching),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "apiserver_current_inflight_requests",
            &[("request_kind", "mutating")]
        ),
        0.0
    );
    assert!(value(&samples, "apiserver_response_sizes", &[("verb", "GET")]) >= 3.0);
    // A list is sent in pieces as its items are encoded: counted once it was all handed over, with its size.
    assert_eq!(durations("LIST", ""), 1.0);
    let mut listed = common.to_vec();
    listed.push(("verb", "LIST"));
    assert_eq!(value(&samples, "apiserver_response_sizes", &listed), 1.0);
    assert!(value(&samples, "process_resident_memory_bytes", &[]) > 0.0);
    assert!(samples.contains_key("process_cpu_seconds_total"));
    assert!(samples.contains_key("process_open_fds"));
    // The Tokio runtime's own figures.
    assert!(value(&samples, "tokio_runtime_workers", &[]) >= 1.0);
    assert!(value(&samples, "tokio_runtime_alive_tasks", &[]) >= 1.0);
    assert!(
        value(
            &samples,
            "tokio_runtime_worker_busy_seconds",
            &[("worker", "0")]
        ) > 0.0
    );

    // Storage calls by backend, operation and resource: four creates reached the backend (the dry run did not;
    // the second "a" did and was refused), none failed.
    let storage = |operation: &str| {
        value(
            &samples,
            "apiserver_storage_request_duration_seconds",
            &[
                ("backend", "memory"),
                ("operation", operation),
                ("type", "toppings"),
            ],
        )
    };
    assert_eq!(storage("create"), 4.0);
    assert_eq!(storage("delete"), 1.0);
    assert_eq!(
        value(&samples, "apiserver_storage_request_errors_total", &[]),
        0.0
    );
    assert!(!samples.contains_key("etcd_request_duration_seconds"));
    // Admission: PizzaToppings saw every create that was not refused before it, the dry run included.
    let admission = |step: &str| {
        value(
            &samples,
            "apiserver_admission_controller_admission_duration_seconds",
            &[
                ("name", "PizzaToppings"),
                ("operation", "CREATE"),
                ("type", step),
                ("rejected", "false"),
            ],
        )
    };
    assert_eq!(admission("admit"), 5.0);
    assert_eq!(admission("validate"), 5.0);
    assert!(
        value(
            &samples,
            "apiserver_admission_step_admission_duration_seconds",
            &[("operation", "CREATE"), ("type", "validate")],
        ) >= 5.0
    );
    let attempts = |metric: &str, result: &str| value(&samples, metric, &[("result", result)]);
    assert!(attempts("authentication_attempts", "success") >= 13.0);
    assert_eq!(attempts("authentication_attempts", "failure"), 0.0);
    assert!(attempts("authorization_attempts_total", "allowed") >= 13.0);
    assert!(samples.contains_key("authentication_duration_seconds"));

    // The open watch: registered, and its two ADDED events (a and b) counted as they are sent.
    let watch_labels = [
        ("group", GROUP),
        ("version", "v1alpha1"),
        ("kind", "Topping"),
    ];
    assert_eq!(
        value(&samples, "apiserver_registered_watchers", &watch_labels),
        1.0
    );
    let mut sent = 0.0;
    for _ in 0..100 {
        sent = value(
            &scrape(&metrics_text(&server).await),
            "apiserver_watch_events_total",
            &watch_labels,
        );
        if sent >= 2.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sent, 2.0);
    // Objects were counted at startup (none yet), by resource.
    let counted = [("group", GROUP), ("resource", "toppings")];
    assert_eq!(
        samples
            .get("apiserver_resource_objects")
            .into_iter()
            .flatten()
            .filter(|(labels, _)| counted
                .iter()
                .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v)))
            .count(),
        1
    );
    assert_eq!(value(&samples, "apiserver_resource_objects", &counted), 0.0);
    assert!(
        samples["apiserver_storage_objects"]
            .iter()
            .any(|(labels, _)| labels["resource"] == format!("toppings.{GROUP}"))
    );
    // A connection that is not TLS is a handshake error.
    let port = server.url.rsplit(':').next().unwrap().to_string();
    {
        use tokio::io::AsyncWriteExt;
        let mut tcp = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
            .await
            .unwrap();
        tcp.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        tcp.shutdown().await.unwrap();
    }
    let mut handshake_errors = 0.0;
    for _ in 0..100 {
        handshake_errors = value(
            &scrape(&metrics_text(&server).await),
            "apiserver_tls_handshake_errors_total",
            &[],
        );
        if handshake_errors >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(handshake_errors, 1.0);

    // The watch ends: no longer long-running.
    drop(_watch);
    let mut open = 1.0;
    for _ in 0..100 {
        open = value(
            &scrape(&metrics_text(&server).await),
            "apiserver_longrunning_requests",
            &watching,
        );
        if open == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(open, 0.0);
    assert_eq!(
        value(
            &scrape(&metrics_text(&server).await),
            "apiserver_registered_watchers",
            &watch_labels
        ),
        0.0
    );

    // Anonymous clients may not read it (standalone: the admin may).
    let anonymous = server.client_with_token(None).await;
    let (code, status) = support::send(&anonymous, "GET", "/metrics", &[], None).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
    );
    // OpenMetrics when asked for, as Prometheus asks.
    let (code, headers, body) = server
        .raw(
            "GET",
            "/metrics",
            &[(
                "accept",
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
            )],
            vec![],
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        headers["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let open = String::from_utf8(body).unwrap();
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert!(
        open.contains("# TYPE apiserver_request counter\n"),
        "{open}"
    );
    assert!(
        open.contains("# TYPE authentication_attempts counter\n"),
        "{open}"
    );
    assert!(
        open.lines()
            .any(|l| l.starts_with("apiserver_request_total{") && l.contains(r#"code="201""#)),
        "{open}"
    );
    assert!(open.contains("# TYPE apiserver_request_duration_seconds histogram\n"));
    assert!(open.contains(r#"le="+Inf"}"#));
    let bad = server.client_with_token(Some("not-a-token")).await;
    let (code, _) = support::send(&bad, "GET", "/metrics", &[], None).await;
    assert_eq!(code, 401);
    let samples = scrape(&metrics_text(&server).await);
    // A token no authenticator accepts is an authentication error, as upstream counts it.
    assert_eq!(
        value(&samples, "authentication_attempts", &[("result", "error")]),
        1.0
    );
    assert!(
        value(
            &samples,
            "authorization_attempts_total",
            &[("result", "no-opinion")]
        ) + value(
            &samples,
            "authorization_attempts_total",
            &[("result", "denied")]
        ) >= 1.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_cache_backend_lists_and_health_checks_are_measured() {
    let server = TestServer::start(&["--storage-backend=memory", NO_COST_CONTROLLER]).await;
    let toppings = format!("/apis/{GROUP}/v1alpha1/toppings");
    let resource = [("group", GROUP), ("resource", "toppings")];
    let before = scrape(&metrics_text(&server).await);
    assert_eq!(
        value(
            &before,
            "apiserver_watch_cache_initializations_total",
            &resource
        ),
        1.0
    );
    assert_eq!(value(&before, "watch_cache_capacity", &resource), 10_000.0);
    let counted = |samples: &Samples, metric: &str| value(samples, metric, &resource);

    let mut last_rv = String::new();
    for (name, tier) in [("a", "cheap"), ("b", "cheap"), ("c", "dear")] {
        let body = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Topping", "metadata": {"name": name, "labels": {"tier": tier}}, "spec": {"cost": 1.0}});
        let (code, created) = call(&server, "POST", &toppings, Some(JSON), body).await;
        assert_eq!(code, 201);
        last_rv = created["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
    }
    // A consistent list, a selective one and a page at an exact revision, all from memory.
    let get = |path: String| {
        let server = &server;
        async move {
            let (code, list) = call(server, "GET", &path, None, serde_json::Value::Null).await;
            assert_eq!(code, 200, "{list}");
            list
        }
    };
    assert_eq!(
        get(toppings.clone()).await["items"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let cheap = get(format!("{toppings}?labelSelector=tier%3Dcheap")).await;
    assert_eq!(cheap["items"].as_array().unwrap().len(), 2);
    let page = get(format!(
        "{toppings}?limit=1&resourceVersion={last_rv}&resourceVersionMatch=Exact"
    ))
    .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);

    let after = scrape(&metrics_text(&server).await);
    let delta = |metric: &str| counted(&after, metric) - counted(&before, metric);
    assert_eq!(delta("apiserver_cache_list_total"), 3.0);
    assert_eq!(delta("apiserver_cache_list_fetched_objects_total"), 7.0);
    assert_eq!(delta("apiserver_cache_list_returned_objects_total"), 6.0);
    assert_eq!(
        value(
            &after,
            "apiserver_cache_list_total",
            &[("group", GROUP), ("resource", "toppings"), ("index", "")]
        ),
        counted(&after, "apiserver_cache_list_total")
    );
    // The backend listed once, to fill the cache at startup; nothing since.
    assert!(counted(&before, "apiserver_storage_list_total") >= 1.0);
    assert_eq!(
        counted(&before, "apiserver_storage_list_fetched_objects_total"),
        counted(&before, "apiserver_storage_list_evaluated_objects_total")
    );
    assert_eq!(delta("apiserver_storage_list_total"), 0.0);
    let consistent = |success: &str, fallback: &str| {
        value(
            &after,
            "apiserver_watch_cache_consistent_read_total",
            &[
                ("group", GROUP),
                ("resource", "toppings"),
                ("success", success),
                ("fallback", fallback),
            ],
        ) - value(
            &before,
            "apiserver_watch_cache_consistent_read_total",
            &[
                ("group", GROUP),
                ("resource", "toppings"),
                ("success", success),
                ("fallback", fallback),
            ],
        )
    };
    assert_eq!(consistent("true", "false"), 2.0);
    assert_eq!(consistent("false", "true"), 0.0);
    assert!(delta("apiserver_watch_cache_read_wait_seconds") >= 2.0);
    assert_eq!(delta("apiserver_watch_cache_events_received_total"), 3.0);
    assert_eq!(delta("apiserver_watch_cache_events_dispatched_total"), 3.0);
    assert_eq!(
        counted(&after, "apiserver_watch_cache_resource_version"),
        last_rv.parse::<f64>().unwrap()
    );
    assert_eq!(delta("apiserver_terminated_watchers_total"), 0.0);

    // Every health check's result, at /metrics/slis, which needs the same authorization as /metrics.
    let (code, _, body) = server.raw("GET", "/readyz?verbose", &[], vec![]).await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!(code, 200, "{text}");
    for check in [
        "memory",
        "memory-readiness",
        "poststarthook/storage-readiness",
    ] {
        assert!(text.contains(&format!("[+]{check} ok\n")), "{text}");
    }
    let (code, _, body) = server.raw("GET", "/livez?verbose", &[], vec![]).await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!(code, 200, "{text}");
    assert!(
        text.contains("[+]memory ok\n") && !text.contains("memory-readiness"),
        "{text}"
    );
    let (code, _, body) = server.raw("GET", "/metrics/slis", &[], vec![]).await;
    assert_eq!(code, 200);
    let slis = scrape(&String::from_utf8(body).unwrap());
    assert_eq!(
        value(
            &slis,
            "kubernetes_healthcheck",
            &[("name", "memory-readiness"), ("type", "readyz")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &slis,
            "kubernetes_healthcheck",
            &[("name", "memory"), ("type", "livez")]
        ),
        1.0
    );
    assert!(
        value(
            &slis,
            "kubernetes_healthchecks_total",
            &[("name", "ping"), ("status", "success"), ("type", "readyz")]
        ) >= 1.0
    );
    assert!(!slis.contains_key("apiserver_request_total"));
    let anonymous = server.client_with_token(None).await;
    let (code, _) = support::send(&anonymous, "GET", "/metrics/slis", &[], None).await;
    assert_eq!(code, 403);
}

/// The cost controller finds the pizzas a topping change concerns as the watch cache holds them, as a Go controller
/// reads its informer: lists from memory, and no consistent read (a backend round trip on etcd before 3.5.13, a
/// revision query elsewhere) per topping created.
#[tokio::test(flavor = "multi_thread")]
async fn the_cost_controller_reads_pizzas_from_the_cache() {
    let server = TestServer::start(&["--storage-backend=memory"]).await;
    let toppings = format!("/apis/{GROUP}/v1alpha1/toppings");
    let pizzas = [("group", GROUP), ("resource", "pizzas")];
    let before = scrape(&metrics_text(&server).await);
    let cache_lists = |samples: &Samples| value(samples, "apiserver_cache_list_total", &pizzas);
    let consistent_reads = |samples: &Samples| {
        value(
            samples,
            "apiserver_watch_cache_consistent_read_total",
            &pizzas,
        )
    };

    for name in ["ham", "olives", "basil"] {
        let body = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Topping", "metadata": {"name": name}, "spec": {"cost": 1.0}});
        let (code, created) = call(&server, "POST", &toppings, Some(JSON), body).await;
        assert_eq!(code, 201, "{created}");
    }
    // The controller handles the three changes on its own time.
    let mut after = scrape(&metrics_text(&server).await);
    for _ in 0..100 {
        if cache_lists(&after) - cache_lists(&before) >= 3.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = scrape(&metrics_text(&server).await);
    }
    assert!(cache_lists(&after) - cache_lists(&before) >= 3.0);
    assert_eq!(consistent_reads(&after) - consistent_reads(&before), 0.0);
}
