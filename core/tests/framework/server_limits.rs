//! Resource limits of a real server: open watches per server, per user and per connection, request header size, and
//! HTTP/2 streams per connection.

use crate::server_support;

use std::time::Duration;

use apiserver::auth::{AlwaysAllow, BearerTokens, User};
use apiserver::server::{Server, ServingOptions};
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::Full;
use server_support::{Client, Connection, Protocol, TempDir, read, start_with_options};

const PIZZAS: &str = "/apis/restaurant.example.com/v1/namespaces/ns1/pizzas";

/// A list that answers at once, and a "watch" whose body never ends (as a watch with nothing to say).
fn routes() -> Router {
    Router::new().route(
        "/apis/restaurant.example.com/v1/namespaces/{ns}/pizzas",
        get(|query: axum::extract::RawQuery| async move {
            if query.0.is_some_and(|q| q.contains("watch=1")) {
                Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>())
            } else {
                Body::from("listed")
            }
        }),
    )
}

async fn server(
    options: impl FnOnce(&mut ServingOptions),
) -> (server_support::TestServer, TempDir) {
    let dir = TempDir::new();
    let mut serving = ServingOptions::loopback_ephemeral(&dir.0);
    options(&mut serving);
    let server = start_with_options(
        serving,
        Server::builder("test")
            .routes(routes())
            .authorizer(AlwaysAllow),
    )
    .await;
    (server, dir)
}

fn get_request(client: &Client, path: &str) -> http::Request<Full<Bytes>> {
    client
        .request("GET", path)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// Opens a watch on `conn` and returns its status and the open response (dropping it ends the watch).
async fn watch(
    client: &Client,
    conn: &mut Connection,
) -> (u16, http::Response<hyper::body::Incoming>) {
    let response = conn
        .send(get_request(client, &format!("{PIZZAS}?watch=1")))
        .await
        .unwrap();
    (response.status().as_u16(), response)
}

#[tokio::test]
async fn watches_are_limited_per_server_and_per_connection() {
    let (server, _dir) = server(|o| {
        o.max_watches = 3;
        o.max_watches_per_connection = 2;
        // One (anonymous) user opens them all: no share per user here.
        o.max_watches_per_user = Some(0);
    })
    .await;
    let client = server.client(Protocol::Http2);
    let (mut a, _) = client.connect().await.unwrap();
    let (mut b, _) = client.connect().await.unwrap();
    let (mut c, _) = client.connect().await.unwrap();

    let (status, first) = watch(&client, &mut a).await;
    assert_eq!(status, 200);
    let (status, _second) = watch(&client, &mut a).await;
    assert_eq!(status, 200);
    // A third on the same connection: over the connection's limit.
    let (status, refused) = watch(&client, &mut a).await;
    assert_eq!(status, 429);
    let refused = read(refused).await;
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(refused.body, "Too many requests, please try again later.\n");
    // Another connection has room, until the server's limit.
    let (status, _third) = watch(&client, &mut b).await;
    assert_eq!(status, 200);
    let (status, _) = watch(&client, &mut c).await;
    assert_eq!(status, 429);
    // Other requests are not watches: still served.
    let listed = read(c.send(get_request(&client, PIZZAS)).await.unwrap()).await;
    assert_eq!(listed.status, 200);

    // A watch that ends gives its slots back.
    drop(first);
    let mut open = Vec::new();
    for _ in 0..100 {
        let (status, response) = watch(&client, &mut c).await;
        if status == 200 {
            open.push(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(open.len(), 1, "no room after a watch ended");
    let (status, _) = watch(&client, &mut a).await;
    assert_eq!(status, 429, "the server's limit again");
    drop((open, _second, _third, a, b, c));
    server.stop().await;
}

/// Opens a watch as the holder of `token`.
async fn watch_as(
    client: &Client,
    conn: &mut Connection,
    token: &str,
) -> (u16, http::Response<hyper::body::Incoming>) {
    let request = client
        .request("GET", &format!("{PIZZAS}?watch=1"))
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = conn.send(request).await.unwrap();
    (response.status().as_u16(), response)
}

/// One user filling its share of watches is refused more, with the server's 429; another user still watches,
/// and `system:masters` is not held to a share. A tenth of `--max-watches` by default.
#[tokio::test]
async fn watches_are_shared_between_users() {
    let user = |name: &str, groups: &[&str]| User {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..User::default()
    };
    let tokens = BearerTokens::new()
        .with("a", user("alice", &["system:authenticated"]))
        .with("b", user("bob", &["system:authenticated"]))
        .with("m", user("admin", &["system:masters"]));
    let dir = TempDir::new();
    let mut options = ServingOptions::loopback_ephemeral(&dir.0);
    options.max_watches = 20;
    assert_eq!(options.effective_max_watches_per_user(), 2);
    options.max_watches_per_user = Some(3);
    let server = start_with_options(
        options,
        Server::builder("test")
            .routes(routes())
            .authenticator(tokens)
            .authorizer(AlwaysAllow),
    )
    .await;
    let client = server.client(Protocol::Http2);
    let (mut conn, _) = client.connect().await.unwrap();

    let mut alices = Vec::new();
    for _ in 0..3 {
        let (status, response) = watch_as(&client, &mut conn, "a").await;
        assert_eq!(status, 200);
        alices.push(response);
    }
    let (status, refused) = watch_as(&client, &mut conn, "a").await;
    assert_eq!(status, 429);
    let refused = read(refused).await;
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(refused.body, "Too many requests, please try again later.\n");
    // Alice's full share does not touch Bob's, nor system:masters'.
    let mut others = Vec::new();
    for token in ["b", "b", "b", "m", "m", "m", "m", "m"] {
        let (status, response) = watch_as(&client, &mut conn, token).await;
        assert_eq!(status, 200, "{token}");
        others.push(response);
    }
    let (status, _) = watch_as(&client, &mut conn, "b").await;
    assert_eq!(status, 429, "bob's share is full too");
    // Alice's ended watch gives her slot back.
    alices.pop();
    let mut reopened = None;
    for _ in 0..100 {
        let (status, response) = watch_as(&client, &mut conn, "a").await;
        if status == 200 {
            reopened = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        reopened.is_some(),
        "no room for alice after her watch ended"
    );
    drop((alices, others, reopened, conn));
    server.stop().await;
}

#[tokio::test]
async fn request_headers_up_to_a_mebibyte_are_read_and_larger_ones_refused() {
    let (server, _dir) = server(|_| {}).await;
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let client = server.client(protocol);
        // 100 KiB of headers (a large token or many X-Remote-Extra headers): served, as by Go's servers.
        let (mut conn, _) = client.connect().await.unwrap();
        let request = client
            .request("GET", PIZZAS)
            .header("x-large", "a".repeat(100 << 10))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let reply = read(conn.send(request).await.unwrap()).await;
        assert_eq!(reply.status, 200, "{protocol:?}");

        // 2 MiB: refused before any handler sees it.
        let (mut conn, _) = client.connect().await.unwrap();
        let request = client
            .request("GET", PIZZAS)
            .header("x-large", "a".repeat(2 << 20))
            .body(Full::new(Bytes::new()))
            .unwrap();
        match conn.send(request).await {
            Ok(response) => assert_eq!(response.status(), 431, "{protocol:?}"),
            // HTTP/2 resets the stream (or the connection) instead.
            Err(e) => assert_eq!(protocol, Protocol::Http2, "{e}"),
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn http2_streams_per_connection_follow_the_flag() {
    let (server, _dir) = server(|o| {
        o.http2_max_streams_per_connection = 2;
        o.max_watches = 0;
    })
    .await;
    let client = server.client(Protocol::Http2);
    let (mut conn, _) = client.connect().await.unwrap();
    let (s1, first) = watch(&client, &mut conn).await;
    let (s2, _second) = watch(&client, &mut conn).await;
    assert_eq!((s1, s2), (200, 200));
    // A third stream waits for one of the two to end.
    let mut third = Box::pin(conn.send(get_request(&client, PIZZAS)));
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut third)
            .await
            .is_err(),
        "a third stream was served while two were open"
    );
    drop(first);
    let reply = tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("served once a stream ended")
        .unwrap();
    assert_eq!(reply.status(), 200);
    drop((_second, conn));
    server.stop().await;
}
