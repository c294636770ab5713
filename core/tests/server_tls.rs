//! TLS and protocols: HTTP/1.1 and HTTP/2 over ALPN on one port, the generated certificate verifies for the
//! loopback names against the CA and is reused on restart; certificate files rotated while serving, SNI
//! certificates, the minimum TLS version and the cipher suites.

mod server_support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::server::tls::{CA_FILE, CERT_FILE, KEY_FILE};
use apiserver::server::{Server, ServingOptions, SniCertKey, TlsVersion};
use bytes::Bytes;
use http::Version;
use http_body_util::Full;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{CipherSuite, ProtocolVersion, SupportedProtocolVersion};
use server_support::{Client, Protocol, TempDir, start_in, start_with_options};

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

/// A CA that issues serving certificates, every one with a fresh key.
struct TestCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate (PEM and DER) and its key (PEM).
struct Issued {
    cert_pem: String,
    der: CertificateDer<'static>,
    key_pem: String,
}

impl TestCa {
    fn new() -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "rotation-test-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        TestCa {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    fn issue(&self, names: &[&str]) -> Issued {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Issued {
            cert_pem: cert.pem(),
            der: cert.der().clone(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// A directory laid out as the kubelet lays out a Secret volume: `tls.crt` and `tls.key` are links through
/// `..data`, a link to a directory of the current contents that an update replaces with one rename.
struct SecretVolume {
    dir: PathBuf,
    version: usize,
}

impl SecretVolume {
    fn new(dir: &Path, pair: &Issued) -> Self {
        let mut volume = SecretVolume {
            dir: dir.to_path_buf(),
            version: 0,
        };
        volume.update(pair);
        for file in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{file}"), dir.join(file)).unwrap();
        }
        volume
    }

    /// Both files at once, as a Secret update.
    fn update(&mut self, pair: &Issued) {
        self.version += 1;
        let contents = self.dir.join(format!("..{}", self.version));
        std::fs::create_dir(&contents).unwrap();
        std::fs::write(contents.join("tls.crt"), &pair.cert_pem).unwrap();
        std::fs::write(contents.join("tls.key"), &pair.key_pem).unwrap();
        let link = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&contents, &link).unwrap();
        std::fs::rename(&link, self.dir.join("..data")).unwrap();
    }

    fn cert_file(&self) -> PathBuf {
        self.dir.join("tls.crt")
    }

    fn key_file(&self) -> PathBuf {
        self.dir.join("tls.key")
    }
}

/// What a TLS client saw of a handshake.
struct Handshake {
    certificate: CertificateDer<'static>,
    suite: CipherSuite,
    version: ProtocolVersion,
}

/// A TLS handshake with `name` as the server name, trusting `ca_pem`, offering only `versions` and (when not
/// empty) only `suites`, in that order.
async fn handshake(
    addr: SocketAddr,
    ca_pem: &str,
    name: &str,
    versions: &[&'static SupportedProtocolVersion],
    suites: &[CipherSuite],
) -> Result<Handshake, Box<dyn std::error::Error>> {
    let mut provider = rustls::crypto::ring::default_provider();
    if !suites.is_empty() {
        provider.cipher_suites = suites
            .iter()
            .filter_map(|s| provider.cipher_suites.iter().find(|p| p.suite() == *s))
            .copied()
            .collect();
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(name.to_string())?, tcp)
        .await?;
    let session = tls.get_ref().1;
    Ok(Handshake {
        certificate: session.peer_certificates().ok_or("no certificate")?[0].clone(),
        suite: session.negotiated_cipher_suite().ok_or("no suite")?.suite(),
        version: session.protocol_version().ok_or("no version")?,
    })
}

/// The certificate a new connection to `name` gets.
async fn served(addr: SocketAddr, ca_pem: &str, name: &str) -> CertificateDer<'static> {
    handshake(addr, ca_pem, name, rustls::DEFAULT_VERSIONS, &[])
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .certificate
}

/// Waits up to the re-read interval (10 s) and some for new connections to `name` to get `expected`.
async fn wait_until_served(addr: SocketAddr, ca_pem: &str, name: &str, expected: &Issued) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while served(addr, ca_pem, name).await != expected.der {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: the new certificate is not served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The server's log lines, captured for the whole test binary.
static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        LOGS.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        tracing_subscriber::fmt()
            .with_writer(|| LogWriter)
            .with_ansi(false)
            .init()
    });
}

fn log_lines_since(mark: usize) -> Vec<String> {
    String::from_utf8_lossy(&LOGS.lock().unwrap()[mark..])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Requests on new connections and on one connection opened before any rotation, until told to stop; counts
/// the ones that failed.
struct RequestLoop {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RequestLoop {
    async fn start(client: Client) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (sent, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (mut kept, _) = client.connect().await.unwrap();
        let request = move |client: &Client| {
            client
                .request("GET", "/healthz")
                .body(Full::new(Bytes::new()))
                .unwrap()
        };
        let count = |ok: bool, sent: &AtomicUsize, failed: &AtomicUsize| {
            sent.fetch_add(1, Ordering::Relaxed);
            if !ok {
                failed.fetch_add(1, Ordering::Relaxed);
            }
        };
        let new_connections = {
            let (client, stop, sent, failed) = (
                client.clone(),
                Arc::clone(&stop),
                Arc::clone(&sent),
                Arc::clone(&failed),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    // The error is not Send: not held across the request.
                    let ok = match client.connect().await.ok() {
                        Some((mut conn, _)) => conn
                            .send(request(&client))
                            .await
                            .is_ok_and(|r| r.status() == 200),
                        None => false,
                    };
                    count(ok, &sent, &failed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        let open_connection = {
            let (stop, sent, failed) = (Arc::clone(&stop), Arc::clone(&sent), Arc::clone(&failed));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let ok = kept
                        .send(request(&client))
                        .await
                        .is_ok_and(|r| r.status() == 200);
                    count(ok, &sent, &failed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        RequestLoop {
            stop,
            sent,
            failed,
            tasks: vec![new_connections, open_connection],
        }
    }

    /// Stops and returns (sent, failed).
    async fn finish(self) -> (usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.unwrap();
        }
        (
            self.sent.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// cert-manager rotates a Secret mounted as files: new connections get the new certificate within the re-read
/// interval, without a failed request; a pair whose key does not match is logged and the last good pair stays.
#[cfg(unix)]
#[tokio::test]
async fn rotated_certificate_files_are_served_without_a_restart() {
    capture_logs();
    let ca = TestCa::new();
    let (a, b, c, d) = (
        ca.issue(&["localhost"]),
        ca.issue(&["localhost"]),
        ca.issue(&["localhost"]),
        ca.issue(&["localhost"]),
    );
    let dir = TempDir::new();
    let mut volume = SecretVolume::new(&dir.0, &a);
    let unused = TempDir::new();
    let mut options = ServingOptions::loopback_ephemeral(&unused.0);
    options.tls_cert_file = Some(volume.cert_file());
    options.tls_private_key_file = Some(volume.key_file());
    let server = start_with_options(options, Server::builder("rotation")).await;
    let addr = server.addr;
    assert_eq!(served(addr, &ca.pem, "localhost").await, a.der);
    let mut client = server.client(Protocol::Http2);
    client.ca_pem = ca.pem.clone();
    let requests = RequestLoop::start(client).await;

    // A Secret update: both files replaced at once by a rename.
    volume.update(&b);
    wait_until_served(addr, &ca.pem, "localhost", &b).await;

    // Written in place, one file after the other.
    std::fs::write(volume.cert_file(), &c.cert_pem).unwrap();
    std::fs::write(volume.key_file(), &c.key_pem).unwrap();
    wait_until_served(addr, &ca.pem, "localhost", &c).await;

    // A certificate whose key is not the key file's: logged, and C keeps serving.
    let mark = LOGS.lock().unwrap().len();
    std::fs::write(volume.cert_file(), &d.cert_pem).unwrap();
    let cert_file = volume.cert_file().display().to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !log_lines_since(mark).iter().any(|line| {
        line.contains("WARN")
            && line.contains("keeping the previous serving certificate")
            && line.contains("key does not match certificate")
            && line.contains(&cert_file)
    }) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no warning about the mismatched pair: {:?}",
            log_lines_since(mark)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(served(addr, &ca.pem, "localhost").await, c.der);

    let (sent, failed) = requests.finish().await;
    assert!(sent > 20, "{sent} requests");
    assert_eq!(failed, 0, "{failed} of {sent} requests failed");
    server.stop().await;
}

/// The certificate follows the name a client asks for; other names get the default certificate. SNI files
/// are read again too.
#[cfg(unix)]
#[tokio::test]
async fn sni_certificates_are_chosen_by_name_and_follow_their_files() {
    let ca = TestCa::new();
    let default = ca.issue(&["localhost", "unknown.example.com"]);
    let named = ca.issue(&["a.example.com"]);
    let wildcard = ca.issue(&["*.b.example.com", "b.example.com"]);
    let dir = TempDir::new();
    let file = |name: &str, contents: &str| {
        let path = dir.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    };
    let unused = TempDir::new();
    let mut options = ServingOptions::loopback_ephemeral(&unused.0);
    options.tls_cert_file = Some(file("default.crt", &default.cert_pem));
    options.tls_private_key_file = Some(file("default.key", &default.key_pem));
    let named_dir = TempDir::new();
    let mut named_volume = SecretVolume::new(&named_dir.0, &named);
    options.tls_sni_cert_key = vec![
        format!(
            "{},{}:a.example.com",
            named_volume.cert_file().display(),
            named_volume.key_file().display()
        )
        .parse::<SniCertKey>()
        .unwrap(),
        // Names from the certificate.
        SniCertKey {
            cert_file: file("wildcard.crt", &wildcard.cert_pem),
            key_file: file("wildcard.key", &wildcard.key_pem),
            names: Vec::new(),
        },
    ];
    let server = start_with_options(options, Server::builder("sni")).await;
    let addr = server.addr;
    for (name, expected) in [
        ("a.example.com", &named),
        ("b.example.com", &wildcard),
        ("x.b.example.com", &wildcard),
        ("localhost", &default),
        ("unknown.example.com", &default),
    ] {
        assert_eq!(served(addr, &ca.pem, name).await, expected.der, "{name}");
    }

    let renewed = ca.issue(&["a.example.com"]);
    named_volume.update(&renewed);
    wait_until_served(addr, &ca.pem, "a.example.com", &renewed).await;
    assert_eq!(served(addr, &ca.pem, "b.example.com").await, wildcard.der);
    server.stop().await;
}

#[tokio::test]
async fn tls_min_version_13_refuses_a_tls_12_client() {
    let dir = TempDir::new();
    let mut options = ServingOptions::loopback_ephemeral(&dir.0);
    options.tls_min_version = Some(TlsVersion::Tls13);
    let server = start_with_options(options, Server::builder("tls13")).await;
    let tls12 = [&rustls::version::TLS12];
    assert!(
        handshake(server.addr, &server.ca_pem, "localhost", &tls12, &[])
            .await
            .is_err()
    );
    let tls13 = [&rustls::version::TLS13];
    let accepted = handshake(server.addr, &server.ca_pem, "localhost", &tls13, &[])
        .await
        .unwrap();
    assert_eq!(accepted.version, ProtocolVersion::TLSv1_3);
    server.stop().await;
}

#[tokio::test]
async fn tls_cipher_suites_restrict_the_negotiated_suite() {
    let (tls12, tls13) = ([&rustls::version::TLS12], [&rustls::version::TLS13]);
    let dir = TempDir::new();
    let mut options = ServingOptions::loopback_ephemeral(&dir.0);
    // The generated certificate has an ECDSA key.
    options.tls_cipher_suites = vec![
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    let server = start_with_options(options, Server::builder("suites")).await;
    let (addr, ca) = (server.addr, server.ca_pem.clone());
    // The client's preference (AES-128 first) is overruled.
    let accepted = handshake(addr, &ca, "localhost", &tls12, &[])
        .await
        .unwrap();
    assert_eq!(
        accepted.suite,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
    );
    let accepted = handshake(addr, &ca, "localhost", &tls13, &[])
        .await
        .unwrap();
    assert_eq!(accepted.suite, CipherSuite::TLS13_CHACHA20_POLY1305_SHA256);
    let aes_128 = [
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::TLS13_AES_128_GCM_SHA256,
    ];
    for versions in [&tls12[..], &tls13] {
        assert!(
            handshake(addr, &ca, "localhost", versions, &aes_128)
                .await
                .is_err()
        );
    }
    server.stop().await;

    // A list of TLS 1.2 suites leaves TLS 1.3's on, as in Go.
    let dir = TempDir::new();
    let mut options = ServingOptions::loopback_ephemeral(&dir.0);
    options.tls_cipher_suites = vec![CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256];
    let server = start_with_options(options, Server::builder("suites12")).await;
    let only_aes_128 = [CipherSuite::TLS13_AES_128_GCM_SHA256];
    let accepted = handshake(
        server.addr,
        &server.ca_pem,
        "localhost",
        &tls13,
        &only_aes_128,
    )
    .await
    .unwrap();
    assert_eq!(accepted.suite, CipherSuite::TLS13_AES_128_GCM_SHA256);
    let accepted = handshake(server.addr, &server.ca_pem, "localhost", &tls12, &[])
        .await
        .unwrap();
    assert_eq!(
        accepted.suite,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
    );
    server.stop().await;
}
