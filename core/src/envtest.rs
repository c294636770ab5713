//! A real kube-apiserver and etcd on loopback for end-to-end tests (feature `testing`).
//!
//! An aggregated API server only proves itself behind the real aggregator: delegated authentication (TokenReview),
//! delegated authorization (SubjectAccessReview), the `extension-apiserver-authentication` ConfigMap, front-proxy
//! client certificates and APIService availability are all kube-apiserver's behaviour, not ours to imitate. A
//! [`Cluster`] starts etcd and kube-apiserver with the aggregation layer on, on free loopback ports with every
//! certificate generated into a temporary directory, and kills both when dropped.
//!
//! The binaries are found the way controller-runtime's envtest finds them: `$KUBEBUILDER_ASSETS` names a directory
//! holding `kube-apiserver` and `etcd` (see [`assets_dir`]). `scripts/test.sh` sets it up.
//!
//! ```ignore
//! let cluster = apiserver::envtest::Cluster::start().await?;
//! let token = cluster.service_account_token("pizza-system", "api").await?;
//! let kubeconfig = cluster.kubeconfig_for_token(&token)?;   // --authentication-kubeconfig for the server under test
//! let (cert, key, ca) = apiserver::envtest::sign_serving_cert(&["api.pizza-system.svc", "localhost", "127.0.0.1"])?;
//! // ... start the extension server with cert/key on `port`, then:
//! cluster.register_apiservice("restaurant.programming-kubernetes.info", "v1beta1", port, &ca, "pizza-system", "api").await?;
//! cluster.wait_apiservice_available("v1beta1.restaurant.programming-kubernetes.info", Duration::from_secs(60)).await?;
//! ```

use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, DnValue, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};
use serde_json::json;

/// How long etcd plus kube-apiserver may take to become ready on a loaded machine (about 5 s when idle).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The field manager of this harness's server-side applies.
const FIELD_MANAGER: &str = "envtest";

/// The audit policy: only delegated authentication and authorization reviews, at Metadata level, so tests can count
/// the reviews an extension server makes (its cache and its always-allow paths are observable that way).
const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: authentication.k8s.io
    resources: [tokenreviews]
  - group: authorization.k8s.io
    resources: [subjectaccessreviews]
- level: None
";

/// What went wrong starting or using a [`Cluster`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `$KUBEBUILDER_ASSETS` is unset or lacks a binary; the message says how to get them.
    #[error("{0}")]
    Assets(String),
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Generating or signing a certificate failed.
    #[error("certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// A request to the cluster failed.
    #[error("kube-apiserver request: {0}")]
    Kube(#[from] kube::Error),
    /// A kubeconfig could not be loaded into a client.
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// etcd or kube-apiserver exited or never became ready; the message carries their logs' tails.
    #[error("{0}")]
    Start(String),
    /// Something did not happen in time, or the cluster answered something unusable.
    #[error("{0}")]
    Unexpected(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// The directory holding `kube-apiserver` and `etcd`: `$KUBEBUILDER_ASSETS`, as in controller-runtime's envtest.
pub fn assets_dir() -> Result<PathBuf, String> {
    const HOW: &str = "set KUBEBUILDER_ASSETS to a directory holding the kube-apiserver and etcd binaries \
                       (`setup-envtest use -p path` prints one; scripts/test.sh unpacks them from \
                       ../shared/envtest/*.xz into $CARGO_TARGET_DIR/envtest-bin and sets it)";
    let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS").filter(|d| !d.is_empty()) else {
        return Err(format!("KUBEBUILDER_ASSETS is not set: {HOW}"));
    };
    let dir = PathBuf::from(dir);
    let missing: Vec<&str> = ["kube-apiserver", "etcd"]
        .into_iter()
        .filter(|b| !dir.join(b).is_file())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "KUBEBUILDER_ASSETS={} has no {}: {HOW}",
            dir.display(),
            missing.join(" and no ")
        ));
    }
    Ok(dir)
}

/// A certificate authority kept in memory: its certificate and what signs with it.
struct Authority {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    fn new(common_name: &str) -> Result<Authority, Error> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Authority {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// Signs `params` for a new ECDSA P-256 key: (certificate PEM, PKCS#8 key PEM).
    fn sign(&self, mut params: CertificateParams) -> Result<(String, String), Error> {
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    fn sign_server(&self, names: &[&str]) -> Result<(String, String), Error> {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        if let Some(first) = names.first() {
            params.distinguished_name.push(DnType::CommonName, *first);
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate: kube-apiserver takes the CN as the user name and each O as a group.
    ///
    /// rcgen keeps one value per attribute type, so the second organization is written under the same OID as a
    /// custom attribute type; Go (and so kube-apiserver) reads every O attribute of the subject. A third is
    /// impossible this way and is refused.
    fn sign_client(&self, common_name: &str, orgs: &[&str]) -> Result<(String, String), Error> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        match orgs {
            [] => {}
            [one] => params
                .distinguished_name
                .push(DnType::OrganizationName, *one),
            [one, two] => {
                params
                    .distinguished_name
                    .push(DnType::OrganizationName, *one);
                params.distinguished_name.push(
                    DnType::CustomDnType(vec![2, 5, 4, 10]),
                    DnValue::Utf8String(two.to_string()),
                );
            }
            _ => {
                return Err(Error::Unexpected(format!(
                    "a client certificate can carry at most two organizations here (rcgen), not {}: {orgs:?}",
                    orgs.len()
                )));
            }
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    /// A client certificate whose validity ended a day ago.
    fn sign_expired_client(&self, common_name: &str) -> Result<(String, String), Error> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(30);
        params.not_after = now - time::Duration::days(1);
        self.sign(params)
    }
}

/// A fresh CA and a serving certificate it signed for `dns_names` (IP addresses become IP SANs):
/// (certificate PEM, key PEM, CA PEM).
///
/// For an extension server behind the aggregator: the aggregator checks its certificate for
/// `<service>.<namespace>.svc` against the APIService's `caBundle`, so sign e.g. `api.pizza-system.svc`,
/// `localhost` and `127.0.0.1`, start the server with `--tls-cert-file`/`--tls-private-key-file`, and register it
/// with the CA as `caBundle`.
pub fn sign_serving_cert(dns_names: &[&str]) -> Result<(String, String, String), Error> {
    let ca = Authority::new("envtest-serving-ca")?;
    let (cert, key) = ca.sign_server(dns_names)?;
    Ok((cert, key, ca.cert_pem))
}

/// An HTTPS server on a free loopback port serving `router` (HTTP/1.1 and HTTP/2) with a certificate for
/// `dns_names` from a fresh CA: for the webhooks and other servers kube-apiserver or the server under test call.
/// It runs until the test's runtime stops.
pub struct HttpsServer {
    /// The port on 127.0.0.1.
    pub port: u16,
    /// The CA that signed its certificate (a `caBundle`).
    pub ca_pem: String,
}

impl HttpsServer {
    /// Starts the server.
    pub async fn start(router: axum::Router, dns_names: &[&str]) -> Result<HttpsServer, Error> {
        let (cert, key, ca_pem) = sign_serving_cert(dns_names)?;
        Self::start_with_certificate(router, &cert, &key, ca_pem).await
    }

    /// Starts the server with the certificate and key given (PEM); `ca_pem` is what clients should trust (the
    /// certificate itself when self-signed).
    pub async fn start_with_certificate(
        router: axum::Router,
        cert: &str,
        key: &str,
        ca_pem: String,
    ) -> Result<HttpsServer, Error> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};

        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let bad = |e: String| Error::Io {
            what: "the HTTPS test server's certificate".into(),
            source: std::io::Error::other(e),
        };
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(
                vec![
                    CertificateDer::from_pem_slice(cert.as_bytes())
                        .map_err(|e| bad(e.to_string()))?,
                ],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| bad(e.to_string()))?,
            )
            .map_err(|e| bad(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(io("binding the HTTPS test server"))?;
        let port = listener
            .local_addr()
            .map_err(io("the HTTPS test server's address"))?
            .port();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, router) = (acceptor.clone(), router.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper_util::service::TowerToHyperService::new(router);
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
                });
            }
        });
        Ok(HttpsServer { port, ca_pem })
    }
}

/// A temporary directory removed when dropped.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> Result<ScratchDir, Error> {
        let path = std::env::temp_dir().join(format!("envtest-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&path).map_err(io(format!("creating {}", path.display())))?;
        Ok(ScratchDir(path))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The child processes, killed (and reaped) when dropped.
struct Processes {
    etcd: Option<Child>,
    apiserver: Option<Child>,
    /// Kills the other two and removes the directory if this test process dies without dropping us (a panic that
    /// aborts, SIGKILL), so no kube-apiserver outlives a test run.
    watchdog: Option<Child>,
}

impl Processes {
    /// The first of the processes that has exited, with its status.
    fn exited(&mut self) -> Option<(&'static str, std::process::ExitStatus)> {
        for (name, child) in [
            ("etcd", &mut self.etcd),
            ("kube-apiserver", &mut self.apiserver),
        ] {
            if let Some(c) = child
                && let Ok(Some(status)) = c.try_wait()
            {
                return Some((name, status));
            }
        }
        None
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for mut child in [
            self.watchdog.take(),
            self.apiserver.take(),
            self.etcd.take(),
        ]
        .into_iter()
        .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A running etcd + kube-apiserver with the aggregation layer on, on loopback. Dropping it kills both and removes
/// its directory.
///
/// One cluster CA signs kube-apiserver's serving certificate and the client certificates it accepts
/// (`--client-ca-file`); a separate front-proxy CA signs the aggregator's client certificate `front-proxy-client`
/// (`--requestheader-client-ca-file`, `--proxy-client-cert-file`), as in a kubeadm cluster.
pub struct Cluster {
    // Held for its Drop, which runs first: the processes die before their directory goes.
    #[allow(dead_code)]
    processes: Processes,
    url: String,
    ca: Authority,
    front_proxy_ca: Authority,
    front_proxy_client: (String, String),
    admin_kubeconfig: PathBuf,
    client: kube::Client,
    audit_log: PathBuf,
    /// Numbers the kubeconfig files written for callers.
    files: AtomicU64,
    dir: ScratchDir,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("url", &self.url)
            .field("dir", &self.dir.0)
            .finish_non_exhaustive()
    }
}

/// Three distinct free loopback ports (etcd client, etcd peer, kube-apiserver), probed together so they differ.
fn free_ports() -> Result<[u16; 3], Error> {
    let listeners = [0; 3].map(|_| TcpListener::bind("127.0.0.1:0"));
    let mut ports = [0u16; 3];
    for (port, listener) in ports.iter_mut().zip(listeners) {
        *port = listener
            .and_then(|l| l.local_addr())
            .map_err(io("finding a free loopback port"))?
            .port();
    }
    Ok(ports)
}

/// The last `max` bytes of a log file, for error messages.
fn log_tail(path: &Path, max: u64) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return format!("({} is missing)", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

fn write(path: &Path, contents: &str) -> Result<(), Error> {
    std::fs::write(path, contents).map_err(io(format!("writing {}", path.display())))
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A condition of an APIService's status, e.g. `Available`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiServiceCondition {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason, e.g. `FailedDiscoveryCheck`.
    pub reason: String,
    /// What the availability controller saw.
    pub message: String,
}

fn apiservice_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
        "apiservices",
    )
}

impl Cluster {
    /// Starts etcd and kube-apiserver from [`assets_dir`] and waits until kube-apiserver's `/readyz` is ok and the
    /// `kube-system/extension-apiserver-authentication` ConfigMap is written (an extension server reads it at
    /// start). Free ports can be taken by another process between probing and binding: that is retried.
    pub async fn start() -> Result<Cluster, Error> {
        let assets = assets_dir().map_err(Error::Assets)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once(&assets).await {
                Err(Error::Start(log)) if attempt < 3 && log.contains("address already in use") => {
                    continue;
                }
                result => return result,
            }
        }
    }

    async fn start_once(assets: &Path) -> Result<Cluster, Error> {
        let dir = ScratchDir::new()?;
        let d = |name: &str| dir.0.join(name);

        let ca = Authority::new("envtest-ca")?;
        let (serving_cert, serving_key) = ca.sign_server(&[
            "127.0.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ])?;
        let admin = ca.sign_client("admin", &["system:masters"])?;
        let front_proxy_ca = Authority::new("envtest-front-proxy-ca")?;
        let front_proxy_client = front_proxy_ca.sign_client("front-proxy-client", &[])?;
        let service_account_key = KeyPair::generate()?;

        write(&d("ca.crt"), &ca.cert_pem)?;
        write(&d("apiserver.crt"), &serving_cert)?;
        write(&d("apiserver.key"), &serving_key)?;
        write(&d("front-proxy-ca.crt"), &front_proxy_ca.cert_pem)?;
        write(&d("front-proxy-client.crt"), &front_proxy_client.0)?;
        write(&d("front-proxy-client.key"), &front_proxy_client.1)?;
        // kube-apiserver verifies with the public key (it reads EC public keys from `PUBLIC KEY` blocks) and signs
        // with the PKCS#8 private key.
        write(&d("sa.pub"), &service_account_key.public_key_pem())?;
        write(&d("sa.key"), &service_account_key.serialize_pem())?;
        write(&d("audit-policy.yaml"), AUDIT_POLICY)?;

        let [etcd_port, peer_port, port] = free_ports()?;
        let url = format!("https://127.0.0.1:{port}");
        let admin_kubeconfig = d("admin.kubeconfig");
        write(
            &admin_kubeconfig,
            &kubeconfig(
                &url,
                &ca.cert_pem,
                json!({"client-certificate-data": b64(&admin.0), "client-key-data": b64(&admin.1)}),
            ),
        )?;

        let mut processes = Processes {
            etcd: None,
            apiserver: None,
            watchdog: None,
        };
        let log = |name: &str| {
            std::fs::File::create(d(name)).map_err(io(format!("creating {}", d(name).display())))
        };

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd_log = log("etcd.log")?;
        let mut etcd = Command::new(assets.join("etcd"));
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("ETCD") {
                etcd.env_remove(k);
            }
        }
        etcd.arg("--name=envtest")
            .arg(format!("--data-dir={}", d("etcd").display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=envtest={peer_url}"))
            .arg("--initial-cluster-state=new")
            // Test data is thrown away: no fsync makes etcd (and so kube-apiserver's writes) much faster.
            .arg("--unsafe-no-fsync")
            .arg("--logger=zap")
            .arg("--log-level=warn");
        processes.etcd = Some(
            etcd.stdin(Stdio::null())
                .stdout(etcd_log.try_clone().map_err(io("etcd log"))?)
                .stderr(etcd_log)
                .spawn()
                .map_err(io(format!("starting {}", assets.join("etcd").display())))?,
        );

        let deadline = Instant::now() + START_TIMEOUT;
        let logs = |dir: &Path| {
            format!(
                "--- etcd log (tail) ---\n{}\n--- kube-apiserver log (tail) ---\n{}",
                log_tail(&dir.join("etcd.log"), 4000),
                log_tail(&dir.join("kube-apiserver.log"), 8000)
            )
        };
        // kube-apiserver gives up on an etcd that refuses connections for too long; etcd takes about a second.
        loop {
            if let Some((name, status)) = processes.exited() {
                return Err(Error::Start(format!(
                    "{name} exited ({status}) during start\n{}",
                    logs(&dir.0)
                )));
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", etcd_port))
                .await
                .is_ok()
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Start(format!(
                    "etcd did not listen within {START_TIMEOUT:?}\n{}",
                    logs(&dir.0)
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        let apiserver_log = log("kube-apiserver.log")?;
        let path = |name: &str| d(name).display().to_string();
        let mut apiserver = Command::new(assets.join("kube-apiserver"));
        apiserver
            .args(Self::apiserver_flags(port, &etcd_url, path))
            .stdin(Stdio::null())
            .stdout(
                apiserver_log
                    .try_clone()
                    .map_err(io("kube-apiserver log"))?,
            )
            .stderr(apiserver_log);
        processes.apiserver = Some(apiserver.spawn().map_err(io(format!(
            "starting {}",
            assets.join("kube-apiserver").display()
        )))?);
        processes.watchdog = Self::watchdog(&processes, &dir.0);

        let config = kube::Config::from_custom_kubeconfig(
            Kubeconfig::read_from(&admin_kubeconfig)?,
            &KubeConfigOptions::default(),
        )
        .await?;
        let client = kube::Client::try_from(config)?;

        // Ready: /readyz is ok, then the authentication ConfigMap (written by a controller shortly after) exists.
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
        let mut ready = false;
        loop {
            if let Some((name, status)) = processes.exited() {
                return Err(Error::Start(format!(
                    "{name} exited ({status}) during start\n{}",
                    logs(&dir.0)
                )));
            }
            if !ready {
                let readyz = http::Request::get("/readyz").body(Vec::new());
                if let Ok(req) = readyz
                    && let Ok(Ok(body)) =
                        tokio::time::timeout(Duration::from_secs(5), client.request_text(req)).await
                {
                    ready = body.trim() == "ok";
                }
            }
            if ready
                && let Ok(Some(cm)) = configmaps
                    .get_opt("extension-apiserver-authentication")
                    .await
                && cm
                    .data
                    .is_some_and(|d| d.contains_key("requestheader-client-ca-file"))
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Start(format!(
                    "kube-apiserver on {url} was not ready (/readyz ok: {ready}) within {START_TIMEOUT:?}\n{}",
                    logs(&dir.0)
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        Ok(Cluster {
            processes,
            url,
            ca,
            front_proxy_ca,
            front_proxy_client,
            admin_kubeconfig,
            client,
            audit_log: d("audit.log"),
            files: AtomicU64::new(0),
            dir,
        })
    }

    /// kube-apiserver's flags: those `/work/shared/envtest/README.md` found necessary on loopback with the
    /// aggregation layer, plus the audit log.
    fn apiserver_flags(port: u16, etcd_url: &str, path: impl Fn(&str) -> String) -> Vec<String> {
        vec![
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            "--advertise-address=127.0.0.1".into(),
            // A loopback advertise address cannot go into the `kubernetes` Endpoints.
            "--endpoint-reconciler-type=none".into(),
            format!("--etcd-servers={etcd_url}"),
            format!("--cert-dir={}", path("certs")),
            format!("--client-ca-file={}", path("ca.crt")),
            format!("--tls-cert-file={}", path("apiserver.crt")),
            format!("--tls-private-key-file={}", path("apiserver.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", path("sa.pub")),
            format!("--service-account-signing-key-file={}", path("sa.key")),
            "--authorization-mode=Node,RBAC".into(),
            // API objects only: nothing is routed there.
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            format!(
                "--requestheader-client-ca-file={}",
                path("front-proxy-ca.crt")
            ),
            "--requestheader-allowed-names=front-proxy-client".into(),
            "--requestheader-username-headers=X-Remote-User".into(),
            "--requestheader-group-headers=X-Remote-Group".into(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
            format!(
                "--proxy-client-cert-file={}",
                path("front-proxy-client.crt")
            ),
            format!("--proxy-client-key-file={}", path("front-proxy-client.key")),
            // Proxy to the APIService's service (an ExternalName to localhost), not to endpoints.
            "--enable-aggregator-routing=false".into(),
            format!("--audit-policy-file={}", path("audit-policy.yaml")),
            format!("--audit-log-path={}", path("audit.log")),
            "--audit-log-format=json".into(),
            "--audit-log-mode=blocking".into(),
        ]
    }

    /// A shell that kills etcd and kube-apiserver and removes `dir` once this process is gone.
    fn watchdog(processes: &Processes, dir: &Path) -> Option<Child> {
        let pid = |c: &Option<Child>| c.as_ref().map(|c| c.id().to_string()).unwrap_or_default();
        Command::new("sh")
            .arg("-c")
            .arg(
                "while kill -0 \"$1\" 2>/dev/null; do sleep 1; done; \
                 kill -9 $2 $3 2>/dev/null; sleep 1; rm -rf \"$4\"",
            )
            .arg("envtest-watchdog")
            .arg(std::process::id().to_string())
            .arg(pid(&processes.etcd))
            .arg(pid(&processes.apiserver))
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()
    }

    /// kube-apiserver's URL, `https://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The cluster CA (PEM): it signed kube-apiserver's serving certificate and signs user client certificates.
    pub fn ca_pem(&self) -> &str {
        &self.ca.cert_pem
    }

    /// The CA kube-apiserver trusts for client certificates (`--client-ca-file`, the ConfigMap's
    /// `client-ca-file`): the same cluster CA as [`Cluster::ca_pem`].
    pub fn client_ca_pem(&self) -> &str {
        &self.ca.cert_pem
    }

    /// The front-proxy CA (PEM), `--requestheader-client-ca-file`: separate from the cluster CA.
    pub fn front_proxy_ca_pem(&self) -> &str {
        &self.front_proxy_ca.cert_pem
    }

    /// The aggregator's client certificate and key (PEM), `CN=front-proxy-client`: a test presents them to act as
    /// the aggregator towards an extension server.
    pub fn front_proxy_client_cert_and_key_pem(&self) -> (&str, &str) {
        (&self.front_proxy_client.0, &self.front_proxy_client.1)
    }

    /// A client as `admin` (group `system:masters`), by client certificate.
    pub fn admin_client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A kubeconfig file for `admin` (client certificate embedded), for kubectl.
    pub fn admin_kubeconfig_path(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The cluster's temporary directory (certificates, logs, kubeconfigs); removed with the cluster.
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// kube-apiserver's log so far.
    pub fn apiserver_log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("kube-apiserver.log")).unwrap_or_default()
    }

    /// A client certificate and key (PEM) signed by the cluster CA: kube-apiserver authenticates it as user `cn`
    /// in groups `orgs`. At most two organizations (rcgen writes one value per attribute type; the second goes
    /// under the same OID as a custom attribute); more are refused.
    pub fn sign_client_cert(&self, cn: &str, orgs: &[&str]) -> Result<(String, String), Error> {
        self.ca.sign_client(cn, orgs)
    }

    /// A client certificate signed by the cluster CA that has expired: it must authenticate nobody.
    pub fn sign_expired_client_cert(&self, cn: &str) -> Result<(String, String), Error> {
        self.ca.sign_expired_client(cn)
    }

    /// A client certificate signed by the front-proxy CA with another CN than the allowed
    /// `front-proxy-client`: an extension server must not believe its identity headers.
    pub fn sign_front_proxy_client_cert(&self, cn: &str) -> Result<(String, String), Error> {
        self.front_proxy_ca.sign_client(cn, &[])
    }

    fn next_file(&self, stem: &str) -> PathBuf {
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        self.dir.0.join(format!("{stem}-{n}.kubeconfig"))
    }

    /// A kubeconfig file for this cluster authenticating with a bearer `token`: for kubectl, or for an extension
    /// server's `--authentication-kubeconfig`/`--authorization-kubeconfig`.
    pub fn kubeconfig_for_token(&self, token: &str) -> Result<PathBuf, Error> {
        let path = self.next_file("token");
        write(
            &path,
            &kubeconfig(&self.url, &self.ca.cert_pem, json!({ "token": token })),
        )?;
        Ok(path)
    }

    /// A kubeconfig file for this cluster authenticating with a client certificate and key (PEM, embedded).
    pub fn kubeconfig_for_cert(&self, cert_pem: &str, key_pem: &str) -> Result<PathBuf, Error> {
        let path = self.next_file("cert");
        let user =
            json!({"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)});
        write(&path, &kubeconfig(&self.url, &self.ca.cert_pem, user))?;
        Ok(path)
    }

    /// A kube-rs client from a kubeconfig file (e.g. one of [`Cluster::kubeconfig_for_token`]).
    pub async fn client_for(&self, kubeconfig: &Path) -> Result<kube::Client, Error> {
        let config = kube::Config::from_custom_kubeconfig(
            Kubeconfig::read_from(kubeconfig)?,
            &KubeConfigOptions::default(),
        )
        .await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// Creates namespace `name` unless it exists.
    pub async fn ensure_namespace(&self, name: &str) -> Result<(), Error> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))
            .map_err(|e| Error::Unexpected(format!("namespace object: {e}")))?;
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(e) if is_conflict(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// A token for ServiceAccount `namespace/name` (both created when missing) from the TokenRequest API, valid
    /// for an hour for kube-apiserver's own audience: kube-apiserver authenticates it as
    /// `system:serviceaccount:<namespace>:<name>`.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, Error> {
        self.ensure_namespace(namespace).await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}}))
            .map_err(|e| Error::Unexpected(format!("service account object: {e}")))?;
        match accounts.create(&PostParams::default(), &sa).await {
            Ok(_) => {}
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(e.into()),
        }
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: Vec::new(),
                expiration_seconds: Some(3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let response = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await?;
        response
            .status
            .map(|s| s.token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                Error::Unexpected(format!(
                    "TokenRequest for {namespace}/{name} returned no token"
                ))
            })
    }

    /// Registers an extension server listening on `localhost:port` for `group`/`version`, idempotently (server-side
    /// apply): namespace `service_namespace`, a Service `service_name` of type ExternalName pointing to
    /// `localhost` (the aggregator then dials `https://localhost:<port>`), and the APIService
    /// `<version>.<group>` with `caBundle` = `ca_bundle_pem`, which must have signed the server's certificate for
    /// `<service_name>.<service_namespace>.svc`. Returns the APIService's name.
    pub async fn register_apiservice(
        &self,
        group: &str,
        version: &str,
        port: u16,
        ca_bundle_pem: &str,
        service_namespace: &str,
        service_name: &str,
    ) -> Result<String, Error> {
        self.ensure_namespace(service_namespace).await?;
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        let services: Api<Service> = Api::namespaced(self.client.clone(), service_namespace);
        let service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service_name, "namespace": service_namespace},
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        });
        services
            .patch(service_name, &apply, &Patch::Apply(&service))
            .await?;

        let name = format!("{version}.{group}");
        let apiservices: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &apiservice_resource());
        let apiservice = json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": name},
            "spec": {
                "group": group,
                "version": version,
                "service": {"namespace": service_namespace, "name": service_name, "port": port},
                "caBundle": b64(ca_bundle_pem),
                "groupPriorityMinimum": 1000,
                "versionPriority": 15,
            },
        });
        apiservices
            .patch(&name, &apply, &Patch::Apply(&apiservice))
            .await?;
        Ok(name)
    }

    /// Deletes APIService `name` (`<version>.<group>`); absent is fine.
    pub async fn delete_apiservice(&self, name: &str) -> Result<(), Error> {
        let apiservices: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &apiservice_resource());
        match apiservices.delete(name, &Default::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// APIService `name`'s condition of type `condition_type` (e.g. `Available`): `None` when the APIService or
    /// the condition does not exist (yet).
    pub async fn apiservice_condition(
        &self,
        name: &str,
        condition_type: &str,
    ) -> Result<Option<ApiServiceCondition>, Error> {
        let apiservices: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &apiservice_resource());
        let Some(object) = apiservices.get_opt(name).await? else {
            return Ok(None);
        };
        let conditions = object.data["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let text =
            |c: &serde_json::Value, field: &str| c[field].as_str().unwrap_or_default().to_string();
        Ok(conditions
            .iter()
            .find(|c| c["type"] == condition_type)
            .map(|c| ApiServiceCondition {
                status: text(c, "status"),
                reason: text(c, "reason"),
                message: text(c, "message"),
            }))
    }

    /// Waits until APIService `name` is `Available`; the error carries the condition's last reason and message
    /// (e.g. why the aggregator could not reach or trust the extension server).
    pub async fn wait_apiservice_available(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let condition = self.apiservice_condition(name, "Available").await?;
            if condition.as_ref().is_some_and(|c| c.status == "True") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Unexpected(match condition {
                    Some(c) => format!(
                        "APIService {name} not Available after {timeout:?}: {} ({}): {}",
                        c.status, c.reason, c.message
                    ),
                    None => {
                        format!("APIService {name} has no Available condition after {timeout:?}")
                    }
                }));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// How many `resource` requests (`tokenreviews` or `subjectaccessreviews`) made by `user` kube-apiserver has
    /// completed so far, from its audit log. The log line is written as the response is sent: poll (or use
    /// [`Cluster::wait_audit_events`]) rather than read once right after a request.
    pub fn count_audit_events(&self, resource: &str, user: &str) -> usize {
        let Ok(log) = std::fs::read_to_string(&self.audit_log) else {
            return 0;
        };
        log.lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|e| {
                e["stage"] == "ResponseComplete"
                    && e["objectRef"]["resource"] == resource
                    && e["user"]["username"] == user
            })
            .count()
    }

    /// Waits until [`Cluster::count_audit_events`] reaches `at_least`, and returns the count then.
    pub async fn wait_audit_events(
        &self,
        resource: &str,
        user: &str,
        at_least: usize,
        timeout: Duration,
    ) -> Result<usize, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let n = self.count_audit_events(resource, user);
            if n >= at_least {
                return Ok(n);
            }
            if Instant::now() > deadline {
                return Err(Error::Unexpected(format!(
                    "{n} audited {resource} by {user} after {timeout:?}, expected at least {at_least}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A kubeconfig (JSON, which kubectl and kube-rs read as YAML) for `url` trusting `ca_pem`, with `user`'s fields.
fn kubeconfig(url: &str, ca_pem: &str, user: serde_json::Value) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "envtest", "cluster": {"server": url, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": "envtest", "user": user}],
        "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "envtest"}}],
        "current-context": "envtest",
    })
    .to_string()
}
