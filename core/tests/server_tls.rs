//! TLS and protocols: HTTP/1.1 and HTTP/2 over ALPN on one port, the generated certificate verifies for the
//! loopback names against the CA and is reused on restart.

mod server_support;

use apiserver::server::Server;
use apiserver::server::tls::{CA_FILE, CERT_FILE, KEY_FILE};
use http::Version;
use server_support::{Protocol, TempDir, start_in};

#[tokio::test]
async fn http1_and_http2_are_negotiated() {
    let dir = TempDir::new();
    let server = start_in(&dir.0, Server::builder("test")).await;

    for (protocol, alpn, version) in [
        (Protocol::Http1, b"http/1.1".as_slice(), Version::HTTP_11),
        (Protocol::Http2, b"h2".as_slice(), Version::HTTP_2),
    ] {
        let client = server.client(protocol);
        let (mut conn, negotiated) = client.connect().await.unwrap();
        assert_eq!(negotiated.as_deref(), Some(alpn));
        // Two requests on the same connection.
        for _ in 0..2 {
            let request = client
                .request("GET", "/healthz")
                .body(Default::default())
                .unwrap();
            let reply = server_support::read(conn.send(request).await.unwrap()).await;
            assert_eq!(reply.version, version);
            assert_eq!(reply.status, 200);
            assert_eq!(reply.body, "ok");
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn generated_certificate_verifies_for_loopback_names_and_is_reused() {
    let dir = TempDir::new();
    let server = start_in(&dir.0, Server::builder("test")).await;
    for name in ["localhost", "127.0.0.1", "::1"] {
        let mut client = server.client(Protocol::Http2);
        client.server_name = name.to_string();
        let (_, alpn) = client
            .connect()
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(alpn.as_deref(), Some(b"h2".as_slice()));
    }
    // A name the certificate is not for is refused by the client.
    let mut client = server.client(Protocol::Http1);
    client.server_name = "example.com".into();
    assert!(client.connect().await.is_err());

    let ca = server.ca_pem.clone();
    assert_eq!(std::fs::read_to_string(dir.0.join(CA_FILE)).unwrap(), ca);
    let cert = std::fs::read(dir.0.join(CERT_FILE)).unwrap();
    let key = std::fs::read(dir.0.join(KEY_FILE)).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.0.join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the key is private");
    }
    server.stop().await;

    // Restart: same files, same CA, and an old client still trusts the server.
    let server = start_in(&dir.0, Server::builder("test")).await;
    assert_eq!(server.ca_pem, ca);
    assert_eq!(std::fs::read(dir.0.join(CERT_FILE)).unwrap(), cert);
    assert_eq!(std::fs::read(dir.0.join(KEY_FILE)).unwrap(), key);
    assert_eq!(
        server.client(Protocol::Http1).get("/livez").await.body,
        "ok"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_client_trusting_another_ca_is_refused() {
    let (dir_a, dir_b) = (TempDir::new(), TempDir::new());
    let a = start_in(&dir_a.0, Server::builder("a")).await;
    let b = start_in(&dir_b.0, Server::builder("b")).await;
    let mut client = a.client(Protocol::Http2);
    client.ca_pem = b.ca_pem.clone();
    assert!(client.connect().await.is_err());
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn certificate_files_from_flags_are_served() {
    let generated = TempDir::new();
    apiserver::server::ServingCertificate::load_or_generate(&generated.0).unwrap();
    let unused = TempDir::new();
    let mut options = apiserver::server::ServingOptions::loopback_ephemeral(&unused.0);
    options.tls_cert_file = Some(generated.0.join(CERT_FILE));
    options.tls_private_key_file = Some(generated.0.join(KEY_FILE));
    let server = Server::builder("files")
        .options(options)
        .bind()
        .await
        .unwrap();
    assert!(server.ca_pem().is_none(), "no CA is known for given files");
    let addr = server.local_addr();
    let signal = server.shutdown_signal();
    let handle = tokio::spawn(server.run(std::future::pending()));
    let client = server_support::Client {
        addr,
        ca_pem: std::fs::read_to_string(generated.0.join(CA_FILE)).unwrap(),
        protocol: Protocol::Http1,
        server_name: "localhost".into(),
    };
    assert_eq!(client.get("/readyz").await.body, "ok");
    // Nothing was generated into the default directory.
    assert!(!unused.0.join(CERT_FILE).exists());
    signal.initiate();
    handle.await.unwrap().unwrap();
}
