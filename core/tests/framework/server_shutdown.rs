//! Graceful shutdown: in-flight requests finish, streams end, `run` returns, and the drain is bounded.

use crate::server_support;

use std::time::{Duration, Instant};

use apiserver::server::{ServeError, Server, ServingOptions, ShutdownSignal};
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use futures::StreamExt;
use http_body_util::BodyExt;
use server_support::{Protocol, TempDir, start_in};
use tokio::sync::mpsc;

fn routes(started: mpsc::UnboundedSender<&'static str>) -> Router {
    let slow_started = started.clone();
    Router::new()
        .route(
            "/apis/x.example.com/v1/slow",
            get(move || {
                let started = slow_started.clone();
                async move {
                    let _ = started.send("slow");
                    tokio::time::sleep(Duration::from_millis(1000)).await;
                    "done"
                }
            }),
        )
        .route(
            // A watch-like stream: an event every 50 ms until the server drains.
            "/apis/x.example.com/v1/watch/things",
            get(move |shutdown: ShutdownSignal| {
                let _ = started.send("stream");
                let events = tokio_stream_interval(Duration::from_millis(50)).map(|i| {
                    Ok::<_, std::io::Error>(format!("{{\"type\":\"ADDED\",\"n\":{i}}}\n"))
                });
                async move { Body::from_stream(shutdown.end_with_drain(events)) }
            }),
        )
        .route(
            // A handler that selects on the signal itself.
            "/apis/x.example.com/v1/forever",
            get(|shutdown: ShutdownSignal| async move {
                let (tx, rx) = mpsc::channel::<Result<String, std::io::Error>>(1);
                tokio::spawn(async move {
                    let _ = tx.send(Ok("first\n".into())).await;
                    shutdown.draining().await;
                    let _ = tx.send(Ok("bye\n".into())).await;
                });
                Body::from_stream(tokio_stream_channel(rx))
            }),
        )
}

fn tokio_stream_interval(period: Duration) -> impl futures::Stream<Item = u64> {
    futures::stream::unfold(0u64, move |i| async move {
        tokio::time::sleep(period).await;
        Some((i, i + 1))
    })
}

fn tokio_stream_channel<T: Send + 'static>(
    mut rx: mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[tokio::test]
async fn in_flight_requests_finish_and_streams_end() {
    let dir = TempDir::new();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let server = start_in(
        &dir.0,
        Server::builder("test")
            .routes(routes(started_tx))
            .authorizer(apiserver::auth::AlwaysAllow),
    )
    .await;

    // A stream over HTTP/2 and one over HTTP/1.1.
    let mut streams = Vec::new();
    for (protocol, path) in [
        (Protocol::Http2, "/apis/x.example.com/v1/watch/things"),
        (Protocol::Http1, "/apis/x.example.com/v1/forever"),
    ] {
        let client = server.client(protocol);
        let (mut conn, _) = client.connect().await.unwrap();
        let request = client
            .request("GET", path)
            .body(Default::default())
            .unwrap();
        let response = conn.send(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert!(!first.is_empty());
        streams.push((conn, body));
    }
    assert_eq!(started.recv().await, Some("stream"));

    // A slow request in flight.
    let client = server.client(Protocol::Http1);
    let slow = tokio::spawn(async move { client.get("/apis/x.example.com/v1/slow").await });
    assert_eq!(started.recv().await, Some("slow"));

    let begun = Instant::now();
    server.signal.initiate();

    // The slow request completes normally.
    let reply = tokio::time::timeout(Duration::from_secs(10), slow)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((reply.status.as_u16(), reply.body.as_str()), (200, "done"));

    // Both streams end cleanly (end of body, no error).
    for (_conn, body) in streams {
        let rest = tokio::time::timeout(Duration::from_secs(10), body.collect())
            .await
            .expect("stream did not end")
            .expect("stream ended with an error")
            .to_bytes();
        let _ = rest;
    }

    // And `run` returns once everything has drained, well before the 60 s timeout.
    tokio::time::timeout(Duration::from_secs(10), server.handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(begun.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn the_forever_stream_says_goodbye() {
    let dir = TempDir::new();
    let (started_tx, _started) = mpsc::unbounded_channel();
    let server = start_in(
        &dir.0,
        Server::builder("test")
            .routes(routes(started_tx))
            .authorizer(apiserver::auth::AlwaysAllow),
    )
    .await;
    let client = server.client(Protocol::Http2);
    let (mut conn, _) = client.connect().await.unwrap();
    let request = client
        .request("GET", "/apis/x.example.com/v1/forever")
        .body(Default::default())
        .unwrap();
    let response = conn.send(request).await.unwrap();
    let signal = server.signal.clone();
    let reader = tokio::spawn(async move { response.into_body().collect().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    signal.initiate();
    let body = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .to_bytes();
    assert_eq!(&body[..], b"first\nbye\n");
    server.stop().await;
}

#[tokio::test]
async fn the_caller_future_stops_the_server_and_the_drain_is_bounded() {
    let dir = TempDir::new();
    let stuck = Router::new().route(
        "/apis/x.example.com/v1/stuck",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(300)).await;
            "never"
        }),
    );
    let server = Server::builder("test")
        .options(ServingOptions::loopback_ephemeral(&dir.0))
        .routes(stuck)
        .authorizer(apiserver::auth::AlwaysAllow)
        .shutdown_timeout(Duration::from_millis(300))
        .bind()
        .await
        .unwrap();
    let addr = server.local_addr();
    let ca_pem = server.ca_pem().unwrap().to_string();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(server.run(async {
        let _ = stop_rx.await;
    }));
    let client = server_support::Client {
        addr,
        ca_pem,
        protocol: Protocol::Http2,
        server_name: "127.0.0.1".into(),
    };
    let stuck = tokio::spawn(async move { client.get("/apis/x.example.com/v1/stuck").await });
    tokio::time::sleep(Duration::from_millis(200)).await;

    let begun = Instant::now();
    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "{:?}",
        begun.elapsed()
    );
    stuck.abort();
}

#[tokio::test]
async fn a_failing_post_start_hook_stops_the_server() {
    let dir = TempDir::new();
    let server = Server::builder("test")
        .options(ServingOptions::loopback_ephemeral(&dir.0))
        .post_start_hook("start-informers", |_| async {
            Err("no informers".to_string())
        })
        .bind()
        .await
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), server.run(std::future::pending()))
        .await
        .unwrap();
    match result {
        Err(ServeError::PostStartHook { name, message }) => {
            assert_eq!(name, "start-informers");
            assert_eq!(message, "no informers");
        }
        other => panic!("unexpected {other:?}"),
    }
}
