//! The filter chain through a real server: panic recovery, Audit-ID, request info and user in handlers,
//! warning headers, authentication and authorization answers.

use crate::server_support;

use apiserver::auth::{AlwaysAllow, AlwaysDeny, User};
use apiserver::request::RequestInfo;
use apiserver::server::{AuditId, Server, Warnings};
use axum::Router;
use axum::routing::get;
use server_support::{Protocol, TempDir, start_in};

fn routes() -> Router {
    Router::new()
        .route(
            "/apis/restaurant.example.com/v1/namespaces/{ns}/pizzas",
            get(|info: RequestInfo, user: User, audit: AuditId| async move {
                axum::Json(serde_json::json!({
                    "verb": info.verb,
                    "group": info.api_group,
                    "version": info.api_version,
                    "namespace": info.namespace,
                    "resource": info.resource,
                    "isResourceRequest": info.is_resource_request,
                    "user": user.name,
                    "groups": user.groups,
                    "auditID": audit.0,
                }))
            }),
        )
        .route(
            "/apis/restaurant.example.com/v1/panic",
            get(|| async {
                if true {
                    panic!("handler bug");
                }
                "unreachable"
            }),
        )
        .route(
            "/apis/restaurant.example.com/v1/warn",
            get(|warnings: Warnings| async move {
                warnings.add("spec.toppings[0]: \"salami\" is deprecated");
                warnings.add("second warning");
                warnings.add("second warning");
                warnings.add_with_agent("my-webhook", "from a webhook");
                "ok"
            }),
        )
}

#[tokio::test]
async fn panic_becomes_a_500_status_and_the_server_keeps_serving() {
    let dir = TempDir::new();
    let server = start_in(
        &dir.0,
        Server::builder("test")
            .routes(routes())
            .authorizer(AlwaysAllow),
    )
    .await;
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let client = server.client(protocol);
        let (mut conn, _) = client.connect().await.unwrap();
        let request = client
            .request("GET", "/apis/restaurant.example.com/v1/panic")
            .header("Audit-ID", "panic-1")
            .body(Default::default())
            .unwrap();
        let reply = server_support::read(conn.send(request).await.unwrap()).await;
        assert_eq!(reply.status, 500);
        assert_eq!(reply.headers["audit-id"], "panic-1");
        assert_eq!(
            reply.body,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"This request caused apiserver to panic. Look in the logs for details.","reason":"InternalError","code":500}"#
        );
        // The same connection still works, and so do new ones.
        let request = client
            .request("GET", "/healthz")
            .body(Default::default())
            .unwrap();
        let reply = server_support::read(conn.send(request).await.unwrap()).await;
        assert_eq!((reply.status.as_u16(), reply.body.as_str()), (200, "ok"));
        assert_eq!(client.get("/readyz").await.body, "ok");
    }
    server.stop().await;
}

#[tokio::test]
async fn audit_id_is_echoed_or_generated() {
    let dir = TempDir::new();
    let server = start_in(
        &dir.0,
        Server::builder("test")
            .routes(routes())
            .authorizer(AlwaysAllow),
    )
    .await;
    let client = server.client(Protocol::Http2);

    let reply = client.get("/healthz").await;
    let generated = reply.headers["audit-id"].to_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&generated).is_ok(), "{generated}");
    assert_ne!(
        client.get("/healthz").await.headers["audit-id"]
            .to_str()
            .unwrap(),
        generated
    );

    let (mut conn, _) = client.connect().await.unwrap();
    let request = client
        .request(
            "GET",
            "/apis/restaurant.example.com/v1/namespaces/ns1/pizzas",
        )
        .header("Audit-ID", "my-audit-id")
        .body(Default::default())
        .unwrap();
    let reply = server_support::read(conn.send(request).await.unwrap()).await;
    assert_eq!(reply.headers["audit-id"], "my-audit-id");
    assert_eq!(reply.json()["auditID"], "my-audit-id");
    // Also on 404s.
    assert!(client.get("/nope").await.headers.contains_key("audit-id"));
    server.stop().await;
}

#[tokio::test]
async fn handlers_read_request_info_and_the_anonymous_user() {
    let dir = TempDir::new();
    let server = start_in(
        &dir.0,
        Server::builder("test")
            .routes(routes())
            .authorizer(AlwaysAllow),
    )
    .await;
    let client = server.client(Protocol::Http1);
    let v = client
        .get("/apis/restaurant.example.com/v1/namespaces/ns1/pizzas?watch=true")
        .await
        .json();
    assert_eq!(v["verb"], "watch");
    assert_eq!(v["group"], "restaurant.example.com");
    assert_eq!(v["version"], "v1");
    assert_eq!(v["namespace"], "ns1");
    assert_eq!(v["resource"], "pizzas");
    assert_eq!(v["isResourceRequest"], true);
    assert_eq!(v["user"], "system:anonymous");
    assert_eq!(v["groups"], serde_json::json!(["system:unauthenticated"]));
    let v = client
        .get("/apis/restaurant.example.com/v1/namespaces/ns1/pizzas")
        .await
        .json();
    assert_eq!(v["verb"], "list");

    // A legacy watch path with nothing after the verb cannot be parsed: upstream's 500.
    let reply = client.get("/apis/restaurant.example.com/v1/watch").await;
    assert_eq!(reply.status, 500);
    assert_eq!(
        reply.json()["message"],
        "Internal Server Error: \"/apis/restaurant.example.com/v1/watch\": failed to create RequestInfo: unable to determine kind and namespace from url, /apis/restaurant.example.com/v1/watch"
    );
    server.stop().await;
}

#[tokio::test]
async fn warning_headers() {
    let dir = TempDir::new();
    let server = start_in(
        &dir.0,
        Server::builder("test")
            .routes(routes())
            .authorizer(AlwaysAllow),
    )
    .await;
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let reply = server
            .client(protocol)
            .get("/apis/restaurant.example.com/v1/warn")
            .await;
        let warnings: Vec<_> = reply
            .headers
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        assert_eq!(
            warnings,
            [
                r#"299 - "spec.toppings[0]: \"salami\" is deprecated""#,
                r#"299 - "second warning""#,
                r#"299 my-webhook "from a webhook""#,
            ]
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn authorization_denies_with_upstream_messages_but_not_on_always_allowed_paths() {
    let dir = TempDir::new();
    let server = start_in(
        &dir.0,
        Server::builder("test")
            .routes(routes())
            .authorizer(AlwaysDeny),
    )
    .await;
    let client = server.client(Protocol::Http2);

    let reply = client
        .get("/apis/restaurant.example.com/v1/namespaces/ns1/pizzas")
        .await;
    assert_eq!(reply.status, 403);
    assert_eq!(
        reply.body,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pizzas.restaurant.example.com is forbidden: User \"system:anonymous\" cannot list resource \"pizzas\" in API group \"restaurant.example.com\" in the namespace \"ns1\"","reason":"Forbidden","details":{"group":"restaurant.example.com","kind":"pizzas"},"code":403}"#
    );
    let reply = client.get("/metrics").await;
    assert_eq!(reply.status, 403);
    assert_eq!(
        reply.json()["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
    );
    for path in ["/healthz", "/livez/ping", "/readyz", "/version"] {
        assert_eq!(client.get(path).await.status, 200, "{path}");
    }
    // Always-allowed but not served: 404, not 403.
    assert_eq!(client.get("/apis").await.status, 404);
    server.stop().await;
}

#[tokio::test]
async fn without_anonymous_auth_requests_are_unauthorized() {
    let dir = TempDir::new();
    let server = start_in(&dir.0, Server::builder("test").anonymous(false)).await;
    let reply = server.client(Protocol::Http1).get("/healthz").await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.body,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
    );
    server.stop().await;
}

/// Upstream's max-in-flight: a second mutating request while one is being served is 429 with `Retry-After: 1`;
/// reads have their own pool, watches and `system:masters` are never limited.
#[tokio::test]
async fn max_in_flight_limits_mutating_and_read_only_requests() {
    use std::sync::Arc;
    use tokio::sync::Notify;

    let release = Arc::new(Notify::new());
    let entered = Arc::new(Notify::new());
    let (held, arrived) = (release.clone(), entered.clone());
    let routes = Router::new().route(
        "/apis/restaurant.example.com/v1/namespaces/{ns}/pizzas",
        get(|| async { "listed" }).post(move || {
            let (held, arrived) = (held.clone(), arrived.clone());
            async move {
                arrived.notify_one();
                held.notified().await;
                "created"
            }
        }),
    );
    let dir = TempDir::new();
    let mut options = apiserver::server::ServingOptions::loopback_ephemeral(&dir.0);
    options.max_requests_inflight = 1;
    options.max_mutating_requests_inflight = 1;
    let server = server_support::start_with_options(
        options,
        Server::builder("test")
            .routes(routes)
            .authorizer(AlwaysAllow),
    )
    .await;
    let client = server.client(Protocol::Http2);
    let path = "/apis/restaurant.example.com/v1/namespaces/ns1/pizzas";
    let first = {
        let client = client.clone();
        tokio::spawn(async move { client.send("POST", path, "{}").await })
    };
    // The first create now holds the only mutating slot.
    entered.notified().await;
    let limited = client.send("POST", path, "{}").await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.headers["retry-after"], "1");
    assert_eq!(limited.body, "Too many requests, please try again later.\n");
    // Reads have their own pool.
    assert_eq!(client.get(path).await.status, 200);
    release.notify_one();
    assert_eq!(first.await.unwrap().status, 200);
    server.stop().await;
}

/// A client that completes the TLS handshake and then says nothing is disconnected (upstream closes such
/// connections after its 32 s read-header timeout); so is one idle after its requests.
#[tokio::test]
async fn silent_and_idle_connections_are_closed() {
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    let dir = TempDir::new();
    let server = start_in(
        &dir.0,
        Server::builder("test")
            .connection_timeouts(Duration::from_millis(500), Duration::from_secs(1)),
    )
    .await;
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let client = server.client(protocol);
        let mut tls = client.tls().await.unwrap();
        let mut buf = Vec::new();
        // The server closes the connection (for h2 after its SETTINGS); reading to the end proves it.
        let read = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut buf)).await;
        assert!(
            read.is_ok(),
            "{protocol:?}: a silent connection stayed open"
        );

        // A connection that made a request and then idles is closed too, but not while a request is served.
        let (mut conn, _) = client.connect().await.unwrap();
        let request = client
            .request("GET", "/healthz")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        assert_eq!(conn.send(request).await.unwrap().status(), 200);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let request = client
            .request("GET", "/healthz")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        assert!(
            conn.send(request).await.is_err(),
            "{protocol:?}: an idle connection stayed open"
        );
    }
    server.stop().await;
}

/// HTTP/2 as kube-apiserver offers it: frames and stream windows of 256 KiB, and a connection window of that times
/// the streams allowed (1,000 by default), read from the server's first frames.
#[tokio::test]
async fn http2_settings_are_kube_apiservers() {
    use std::collections::HashMap;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = TempDir::new();
    let server = start_in(&dir.0, Server::builder("test")).await;
    let mut tls = server.client(Protocol::Http2).tls().await.unwrap();
    // The client's preface and an empty SETTINGS frame.
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    tls.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    let mut settings = HashMap::new();
    let mut connection_window_update = None;
    let read = async {
        while settings.is_empty() || connection_window_update.is_none() {
            let mut head = [0u8; 9];
            tls.read_exact(&mut head).await.unwrap();
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            let mut payload = vec![0u8; len];
            tls.read_exact(&mut payload).await.unwrap();
            match head[3] {
                // SETTINGS, not the acknowledgement of ours.
                4 if head[4] & 1 == 0 => {
                    for entry in payload.chunks_exact(6) {
                        settings.insert(
                            u16::from_be_bytes([entry[0], entry[1]]),
                            u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]),
                        );
                    }
                }
                // WINDOW_UPDATE of the connection.
                8 if stream == 0 => {
                    connection_window_update = Some(
                        u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                            & 0x7fff_ffff,
                    );
                }
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("SETTINGS and a WINDOW_UPDATE of the connection");
    assert_eq!(settings.get(&0x5), Some(&(256 * 1024)), "MAX_FRAME_SIZE");
    assert_eq!(
        settings.get(&0x4),
        Some(&(256 * 1024)),
        "INITIAL_WINDOW_SIZE"
    );
    assert_eq!(settings.get(&0x3), Some(&1000), "MAX_CONCURRENT_STREAMS");
    // The connection's window starts at 65,535 bytes.
    assert_eq!(connection_window_update, Some(256 * 1024 * 1000 - 65_535));
    // A connection still open would hold the server's graceful stop.
    drop(tls);
    server.stop().await;
}
