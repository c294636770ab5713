//! Health, version and root paths over a real TLS connection, in upstream's exact formats.

use crate::server_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use apiserver::server::{HealthCheck, Server, ServingOptions};
use server_support::{Protocol, TempDir, start_in, start_with_options};

#[tokio::test]
async fn healthz_livez_readyz() {
    let dir = TempDir::new();
    let storage_up = Arc::new(AtomicBool::new(true));
    let up = storage_up.clone();
    let (hook_tx, hook_rx) = tokio::sync::oneshot::channel::<()>();
    let server = start_in(
        &dir.0,
        Server::builder("test")
            .health_check(HealthCheck::new("etcd", move || {
                let up = up.load(Ordering::SeqCst);
                async move {
                    if up {
                        Ok(())
                    } else {
                        Err("connection refused".into())
                    }
                }
            }))
            .readyz_check(HealthCheck::new("informer-sync", || async { Ok(()) }))
            .post_start_hook("start-informers", |_signal| async move {
                hook_rx.await.map_err(|e| e.to_string())
            }),
    )
    .await;
    let client = server.client(Protocol::Http2);

    // Until the post-start hook has finished, its check fails.
    let reply = client.get("/healthz?verbose").await;
    assert_eq!(reply.status, 500);
    assert_eq!(
        reply.body,
        "[+]ping ok\n[+]log ok\n[+]etcd ok\n[-]poststarthook/start-informers failed: reason withheld\nhealthz check failed\n"
    );
    assert_eq!(
        client
            .get("/healthz/poststarthook/start-informers")
            .await
            .status,
        500
    );
    hook_tx.send(()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while client.get("/healthz").await.status != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "the hook never finished"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let reply = client.get("/healthz").await;
    assert_eq!((reply.status.as_u16(), reply.body.as_str()), (200, "ok"));
    assert_eq!(reply.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(reply.headers["x-content-type-options"], "nosniff");

    let reply = client.get("/healthz?verbose").await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body,
        "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]poststarthook/start-informers ok\nhealthz check passed\n"
    );
    assert_eq!(
        client.get("/livez?verbose").await.body,
        "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]poststarthook/start-informers ok\nlivez check passed\n"
    );
    assert_eq!(
        client.get("/readyz?verbose").await.body,
        "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]informer-sync ok\n[+]poststarthook/start-informers ok\n[+]shutdown ok\nreadyz check passed\n"
    );

    // Single checks.
    for path in [
        "/readyz/ping",
        "/healthz/log",
        "/livez/etcd",
        "/readyz/shutdown",
        "/readyz/informer-sync",
    ] {
        let reply = client.get(path).await;
        assert_eq!(
            (reply.status.as_u16(), reply.body.as_str()),
            (200, "ok"),
            "{path}"
        );
    }
    assert_eq!(client.get("/livez/informer-sync").await.status, 404);

    // A failing check: 500, the reason withheld; excluded, it passes.
    storage_up.store(false, Ordering::SeqCst);
    let reply = client.get("/readyz").await;
    assert_eq!(reply.status, 500);
    assert_eq!(
        reply.body,
        "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]informer-sync ok\n[+]poststarthook/start-informers ok\n[+]shutdown ok\nreadyz check failed\n"
    );
    let reply = client.get("/livez/etcd").await;
    assert_eq!(reply.status, 500);
    assert_eq!(reply.body, "internal server error: connection refused\n");
    let reply = client
        .get("/healthz?exclude=etcd&exclude=nope&verbose")
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body,
        "[+]ping ok\n[+]log ok\n[+]etcd excluded: ok\n[+]poststarthook/start-informers ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n"
    );
    server.stop().await;
}

#[tokio::test]
async fn version_and_not_found() {
    let dir = TempDir::new();
    let version = apiserver::server::VersionInfo {
        major: "1".into(),
        minor: "0".into(),
        ..Default::default()
    };
    // Allowed to reach anything, so that unserved paths answer 404 rather than 403.
    let server = start_in(
        &dir.0,
        Server::builder("test")
            .version(version)
            .authorizer(apiserver::auth::AlwaysAllow),
    )
    .await;
    let client = server.client(Protocol::Http1);

    let reply = client.get("/version").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-type"], "application/json");
    let v = reply.json();
    assert_eq!(v["major"], "1");
    assert_eq!(v["minor"], "0");
    for key in [
        "gitVersion",
        "gitCommit",
        "gitTreeState",
        "buildDate",
        "goVersion",
        "compiler",
        "platform",
    ] {
        assert!(v[key].is_string(), "{key} in {v}");
    }
    assert_eq!(v["compiler"], "rustc");
    assert!(v["platform"].as_str().unwrap().contains('/'));
    assert!(
        reply.body.starts_with("{\n  \"major\": \"1\""),
        "indented like upstream: {}",
        reply.body
    );

    for path in ["/nope", "/apis/nope.example.com/v1/things", "/healthz/nope"] {
        let reply = client.get(path).await;
        assert_eq!(reply.status, 404, "{path}");
        assert_eq!(reply.headers["content-type"], "application/json");
        assert_eq!(
            reply.body,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}"#,
            "{path}"
        );
    }

    let (mut conn, _) = client.connect().await.unwrap();
    let request = client
        .request("DELETE", "/version")
        .body(Default::default())
        .unwrap();
    let reply = server_support::read(conn.send(request).await.unwrap()).await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.json()["reason"], "MethodNotAllowed");
    server.stop().await;
}

#[tokio::test]
async fn readyz_fails_during_the_shutdown_delay_while_serving_continues() {
    let dir = TempDir::new();
    let mut options = ServingOptions::loopback_ephemeral(&dir.0);
    options.shutdown_delay_duration = Duration::from_secs(3);
    let server = start_with_options(options, Server::builder("test")).await;
    let client = server.client(Protocol::Http2);
    assert_eq!(client.get("/readyz").await.body, "ok");

    server.signal.initiate();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let reply = client.get("/readyz?verbose").await;
    assert_eq!(reply.status, 500);
    assert_eq!(
        reply.body,
        "[+]ping ok\n[+]log ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n"
    );
    // Liveness is unaffected and new connections are still served during the delay.
    assert_eq!(client.get("/livez").await.body, "ok");
    assert_eq!(client.get("/healthz").await.body, "ok");
    tokio::time::timeout(Duration::from_secs(10), server.handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // After the delay the listener is closed.
    assert!(client.connect().await.is_err());
}
