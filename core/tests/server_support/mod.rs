//! Shared by the `server_*` integration tests: start a real server on 127.0.0.1 port 0 with generated
//! certificates in a temporary directory, and talk to it over real TLS with HTTP/1.1 or HTTP/2.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use apiserver::server::{ServeError, ServerBuilder, ServingOptions, ShutdownSignal};
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("apiserver-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running server.
pub struct TestServer {
    pub addr: SocketAddr,
    pub ca_pem: String,
    pub signal: ShutdownSignal,
    pub handle: JoinHandle<Result<(), ServeError>>,
}

/// Binds `builder` on 127.0.0.1:0 with certificates in `cert_dir`, and runs it in the background.
pub async fn start_in(cert_dir: &Path, builder: ServerBuilder) -> TestServer {
    start_with_options(ServingOptions::loopback_ephemeral(cert_dir), builder).await
}

pub async fn start_with_options(options: ServingOptions, builder: ServerBuilder) -> TestServer {
    let server = builder.options(options).bind().await.unwrap();
    let addr = server.local_addr();
    assert!(addr.ip().is_loopback());
    // Empty when the certificate came from files: the test knows its CA.
    let ca_pem = server.ca_pem().unwrap_or_default().to_string();
    let signal = server.shutdown_signal();
    let handle = tokio::spawn(server.run(std::future::pending()));
    TestServer {
        addr,
        ca_pem,
        signal,
        handle,
    }
}

impl TestServer {
    /// Initiates shutdown and waits for `run` to return.
    pub async fn stop(self) {
        self.signal.initiate();
        tokio::time::timeout(std::time::Duration::from_secs(30), self.handle)
            .await
            .expect("server did not stop in time")
            .unwrap()
            .unwrap();
    }

    pub fn client(&self, protocol: Protocol) -> Client {
        Client {
            addr: self.addr,
            ca_pem: self.ca_pem.clone(),
            protocol,
            server_name: "localhost".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

/// A TLS client trusting only the server's generated CA.
#[derive(Clone)]
pub struct Client {
    pub addr: SocketAddr,
    pub ca_pem: String,
    pub protocol: Protocol,
    /// The name the certificate is verified for (also the SNI when it is a DNS name).
    pub server_name: String,
}

/// A connection with one protocol; several requests may go over it.
pub enum Connection {
    Http1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    Http2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

pub struct Reply {
    pub version: Version,
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl Client {
    pub fn tls_config(&self) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = vec![match self.protocol {
            Protocol::Http1 => b"http/1.1".to_vec(),
            Protocol::Http2 => b"h2".to_vec(),
        }];
        config
    }

    /// Connects and completes the TLS handshake, nothing sent yet: for tests that speak the protocol by hand.
    pub async fn tls(&self) -> Result<TlsStream<TcpStream>, Box<dyn std::error::Error>> {
        let tcp = TcpStream::connect(self.addr).await?;
        let connector = TlsConnector::from(Arc::new(self.tls_config()));
        let name = ServerName::try_from(self.server_name.clone())?;
        Ok(connector.connect(name, tcp).await?)
    }

    /// Connects and completes the TLS handshake; returns the negotiated ALPN protocol too.
    pub async fn connect(
        &self,
    ) -> Result<(Connection, Option<Vec<u8>>), Box<dyn std::error::Error>> {
        let tls = self.tls().await?;
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let io = TokioIo::new(tls);
        let connection = match self.protocol {
            Protocol::Http1 => {
                let (send, conn) = hyper::client::conn::http1::handshake(io).await?;
                tokio::spawn(conn);
                Connection::Http1(send)
            }
            Protocol::Http2 => {
                let (send, conn) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
                tokio::spawn(conn);
                Connection::Http2(send)
            }
        };
        Ok((connection, alpn))
    }

    /// Builds a request for `path` (with an authority, which HTTP/2 needs and HTTP/1.1 sends as `Host`).
    pub fn request(&self, method: &str, path: &str) -> http::request::Builder {
        Request::builder()
            .method(method)
            .uri(format!("https://localhost:{}{path}", self.addr.port()))
            .header("host", format!("localhost:{}", self.addr.port()))
    }

    /// One request on a new connection, the whole body read.
    pub async fn get(&self, path: &str) -> Reply {
        let (mut conn, _) = self.connect().await.unwrap();
        let request = self
            .request("GET", path)
            .body(Full::new(Bytes::new()))
            .unwrap();
        read(conn.send(request).await.unwrap()).await
    }

    /// One request with a body on a new connection, the whole response read.
    pub async fn send(&self, method: &str, path: &str, body: &str) -> Reply {
        let (mut conn, _) = self.connect().await.unwrap();
        let request = self
            .request(method, path)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        read(conn.send(request).await.unwrap()).await
    }
}

impl Connection {
    pub async fn send(
        &mut self,
        mut request: Request<Full<Bytes>>,
    ) -> hyper::Result<http::Response<Incoming>> {
        match self {
            Connection::Http1(s) => {
                // Origin form on the request line, as real HTTP/1.1 clients send it.
                let origin = request.uri().path_and_query().unwrap().clone();
                *request.uri_mut() = http::Uri::from(origin);
                s.ready().await?;
                s.send_request(request).await
            }
            Connection::Http2(s) => {
                // HTTP/2 carries the authority in the URI, not a Host header.
                request.headers_mut().remove("host");
                s.ready().await?;
                s.send_request(request).await
            }
        }
    }
}

pub async fn read(response: http::Response<Incoming>) -> Reply {
    let version = response.version();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        version,
        status,
        headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}
