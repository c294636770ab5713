//! The envtest harness against the real kube-apiserver and etcd from `$KUBEBUILDER_ASSETS`: the cluster side that
//! the end-to-end tests of delegated authentication, authorization and aggregation stand on.

use std::time::Duration;

use apiserver::envtest::Cluster;
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_authenticates_authorizes_audits_and_registers_apiservices() {
    // Two clusters at once in one process: distinct ports, directories and CAs.
    let started = std::time::Instant::now();
    let (cluster, other) = tokio::join!(Cluster::start(), Cluster::start());
    let (cluster, other) = (cluster.unwrap(), other.unwrap());
    eprintln!("two clusters started in {:?}", started.elapsed());
    assert_ne!(cluster.url(), other.url());
    assert_ne!(cluster.dir(), other.dir());
    assert_ne!(cluster.front_proxy_ca_pem(), other.front_proxy_ca_pem());
    assert_ne!(
        cluster.ca_pem(),
        cluster.front_proxy_ca_pem(),
        "the front-proxy CA must be separate"
    );

    // The ConfigMap extension servers read their client and front-proxy CAs from.
    let client = cluster.admin_client();
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .get("extension-apiserver-authentication")
        .await
        .unwrap();
    let data = cm.data.unwrap();
    assert_eq!(
        data["requestheader-client-ca-file"].trim(),
        cluster.front_proxy_ca_pem().trim()
    );
    assert!(data["client-ca-file"].contains(cluster.client_ca_pem().trim()));
    assert_eq!(
        data["requestheader-allowed-names"],
        r#"["front-proxy-client"]"#
    );
    assert_eq!(
        data["requestheader-username-headers"],
        r#"["X-Remote-User"]"#
    );
    // The other cluster has its own front-proxy CA.
    let other_cm = Api::<ConfigMap>::namespaced(other.admin_client(), "kube-system")
        .get("extension-apiserver-authentication")
        .await
        .unwrap();
    assert_eq!(
        other_cm.data.unwrap()["requestheader-client-ca-file"].trim(),
        other.front_proxy_ca_pem().trim()
    );
    drop(other);

    // A ServiceAccount token authenticates: TokenReview by the admin.
    let ns = format!("envtest-{}", uuid::Uuid::new_v4().simple());
    let token = cluster
        .service_account_token(&ns, "reviewer")
        .await
        .unwrap();
    let review: TokenReview = serde_json::from_value(json!({"spec": {"token": token}})).unwrap();
    let review = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    let status = review.status.unwrap();
    assert_eq!(status.authenticated, Some(true), "{status:?}");
    let username = format!("system:serviceaccount:{ns}:reviewer");
    assert_eq!(
        status.user.unwrap().username.as_deref(),
        Some(username.as_str())
    );

    // An unknown token does not.
    let bogus: TokenReview =
        serde_json::from_value(json!({"spec": {"token": "not-a-token"}})).unwrap();
    let bogus = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &bogus)
        .await
        .unwrap();
    assert_ne!(bogus.status.unwrap().authenticated, Some(true));

    // RBAC: the ServiceAccount may not create pods; the admin may.
    let sar = |user: &str| -> SubjectAccessReview {
        serde_json::from_value(json!({"spec": {
            "user": user,
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
            "resourceAttributes": {"namespace": ns, "verb": "create", "resource": "pods"},
        }}))
        .unwrap()
    };
    let sars = Api::<SubjectAccessReview>::all(client.clone());
    let denied = sars
        .create(&PostParams::default(), &sar(&username))
        .await
        .unwrap();
    assert!(!denied.status.unwrap().allowed);
    let mut admin = sar("admin");
    admin.spec.groups = Some(vec!["system:masters".into()]);
    let allowed = sars.create(&PostParams::default(), &admin).await.unwrap();
    assert!(allowed.status.unwrap().allowed);

    // The audit log counts those reviews by who made them.
    assert_eq!(
        cluster
            .wait_audit_events("tokenreviews", "admin", 2, TIMEOUT)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        cluster
            .wait_audit_events("subjectaccessreviews", "admin", 2, TIMEOUT)
            .await
            .unwrap(),
        2
    );
    assert_eq!(cluster.count_audit_events("tokenreviews", &username), 0);

    // The kubeconfig files work with kubectl.
    let kubectl = |kubeconfig: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
            .expect("kubectl on PATH");
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(
        kubectl(
            cluster.admin_kubeconfig_path(),
            &["get", "namespace", &ns, "-o", "name"]
        ),
        format!("namespace/{ns}")
    );
    let token_kubeconfig = cluster.kubeconfig_for_token(&token).unwrap();
    assert_eq!(
        kubectl(
            &token_kubeconfig,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}"
            ]
        ),
        username
    );

    // The token and a signed client certificate work as kubeconfigs; the certificate's O is a group.
    let as_sa = cluster.client_for(&token_kubeconfig).await.unwrap();
    let forbidden = Api::<ConfigMap>::namespaced(as_sa, "kube-system")
        .get("extension-apiserver-authentication")
        .await
        .unwrap_err();
    assert!(
        matches!(&forbidden, kube::Error::Api(s) if s.code == 403),
        "{forbidden:?}"
    );
    let (cert, key) = cluster
        .sign_client_cert("alice", &["system:masters", "team-a"])
        .unwrap();
    let as_alice = cluster
        .client_for(&cluster.kubeconfig_for_cert(&cert, &key).unwrap())
        .await
        .unwrap();
    let whoami = as_alice
        .request::<serde_json::Value>(
            http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
                .header("content-type", "application/json")
                .body(
                    serde_json::to_vec(&json!({
                        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"
                    }))
                    .unwrap(),
                )
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(whoami["status"]["userInfo"]["username"], "alice");
    let groups = whoami["status"]["userInfo"]["groups"].as_array().unwrap();
    assert!(groups.contains(&json!("system:masters")), "{groups:?}");
    assert!(groups.contains(&json!("team-a")), "{groups:?}");
    assert!(cluster.sign_client_cert("bob", &["a", "b", "c"]).is_err());

    // An APIService whose server does not listen is registered but not Available.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_, _, serving_ca) = apiserver::envtest::sign_serving_cert(&[
        "api.envtest-system.svc",
        "localhost",
        "127.0.0.1",
    ])
    .unwrap();
    let name = cluster
        .register_apiservice(
            "envtest.example.com",
            "v1",
            closed,
            &serving_ca,
            "envtest-system",
            "api",
        )
        .await
        .unwrap();
    assert_eq!(name, "v1.envtest.example.com");
    // Registering again is fine (server-side apply).
    cluster
        .register_apiservice(
            "envtest.example.com",
            "v1",
            closed,
            &serving_ca,
            "envtest-system",
            "api",
        )
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + TIMEOUT;
    let condition = loop {
        let c = cluster
            .apiservice_condition(&name, "Available")
            .await
            .unwrap();
        if let Some(c) = c.filter(|c| c.status == "False") {
            break c;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no Available=False condition"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    eprintln!(
        "Available=False: {} {}",
        condition.reason, condition.message
    );
    let err = cluster
        .wait_apiservice_available(&name, Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not Available"), "{err}");
    cluster.delete_apiservice(&name).await.unwrap();
    assert_eq!(
        cluster
            .apiservice_condition(&name, "Available")
            .await
            .unwrap(),
        None
    );

    // Dropping the cluster kills kube-apiserver: its port stops answering.
    let port: u16 = cluster.url().rsplit(':').next().unwrap().parse().unwrap();
    let dir = cluster.dir().to_path_buf();
    drop(cluster);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(!dir.exists());
}

/// What the stand-in extension server saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    /// Whether the client presented a certificate the front-proxy CA signed (the verifier rejects any other).
    front_proxy_cert: bool,
    user: Option<String>,
    groups: Vec<String>,
}

/// A minimal HTTPS server standing in for an extension server: serves an empty APIResourceList at
/// `/apis/envtest.example.com/v1` (enough for the aggregator's availability check and a proxied GET), 404
/// elsewhere, asks for client certificates from `client_ca_pem`, and records every request.
async fn stand_in_extension_server(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: &str,
) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<Seen>>>) {
    use std::sync::{Arc, Mutex};

    use http_body_util::Full;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(client_ca_pem.as_bytes()).unwrap())
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, record) = (acceptor.clone(), record.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let front_proxy_cert = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .is_some_and(|c| !c.is_empty());
                let service =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let header = |name: &str| {
                            req.headers()
                                .get_all(name)
                                .iter()
                                .filter_map(|v| v.to_str().ok().map(str::to_string))
                                .collect::<Vec<_>>()
                        };
                        record.lock().unwrap().push(Seen {
                            path: req.uri().path().to_string(),
                            front_proxy_cert,
                            user: header("x-remote-user").into_iter().next(),
                            groups: header("x-remote-group"),
                        });
                        let response = if req.uri().path() == "/apis/envtest.example.com/v1" {
                            let body = json!({
                                "kind": "APIResourceList", "apiVersion": "v1",
                                "groupVersion": "envtest.example.com/v1", "resources": []
                            });
                            http::Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(bytes::Bytes::from(body.to_string())))
                        } else {
                            http::Response::builder()
                                .status(404)
                                .body(Full::new(bytes::Bytes::new()))
                        };
                        async move { response }
                    });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregator_reaches_an_extension_server_on_loopback() {
    let cluster = Cluster::start().await.unwrap();
    let (cert, key, ca) = apiserver::envtest::sign_serving_cert(&[
        "api.envtest-system.svc",
        "localhost",
        "127.0.0.1",
    ])
    .unwrap();
    let (port, seen) = stand_in_extension_server(&cert, &key, cluster.front_proxy_ca_pem()).await;
    let name = cluster
        .register_apiservice(
            "envtest.example.com",
            "v1",
            port,
            &ca,
            "envtest-system",
            "api",
        )
        .await
        .unwrap();
    cluster
        .wait_apiservice_available(&name, TIMEOUT)
        .await
        .unwrap();

    // A request through kube-apiserver arrives with the front-proxy client certificate and the caller's identity.
    let list = cluster
        .admin_client()
        .request::<serde_json::Value>(
            http::Request::get("/apis/envtest.example.com/v1")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(list["groupVersion"], "envtest.example.com/v1");
    let seen = seen.lock().unwrap().clone();
    let proxied = seen
        .iter()
        .find(|s| s.user.as_deref() == Some("admin"))
        .unwrap_or_else(|| panic!("no request as admin: {seen:?}"));
    assert_eq!(proxied.path, "/apis/envtest.example.com/v1");
    assert!(proxied.front_proxy_cert, "{proxied:?}");
    assert!(
        proxied.groups.iter().any(|g| g == "system:masters"),
        "{proxied:?}"
    );
    // The availability check ran as the aggregator, also with the front-proxy certificate.
    assert!(
        seen.iter()
            .any(|s| s.user.as_deref() == Some("system:kube-aggregator") && s.front_proxy_cert),
        "{seen:?}"
    );

    // A caBundle that did not sign the server's certificate makes the APIService unavailable.
    let (_, _, wrong_ca) =
        apiserver::envtest::sign_serving_cert(&["api.envtest-system.svc"]).unwrap();
    cluster
        .register_apiservice(
            "envtest.example.com",
            "v1",
            port,
            &wrong_ca,
            "envtest-system",
            "api",
        )
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let c = cluster
            .apiservice_condition(&name, "Available")
            .await
            .unwrap();
        if c.as_ref().is_some_and(|c| c.status == "False") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still {c:?} with a wrong caBundle"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Leader election through a `coordination.k8s.io/v1` Lease of the real kube-apiserver (the lock a server with a
/// core cluster uses): one of two candidates leads, the Lease names it, and when it shuts down it releases the
/// lease and the other takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_through_a_lease_in_the_core_cluster() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use apiserver::leader::{ClusterLock, Lead, LeaderElectionConfig, LeaderElector};
    use apiserver::server::ShutdownSignal;
    use k8s_openapi::api::coordination::v1::Lease;

    struct Leading(Arc<AtomicBool>);
    impl Drop for Leading {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }

    let cluster = Cluster::start().await.unwrap();
    let client = cluster.admin_client();
    let config = LeaderElectionConfig {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(300),
        namespace: "kube-system".into(),
        name: "test-apiserver".into(),
    };
    let candidate = |identity: &str| {
        let leading = Arc::new(AtomicBool::new(false));
        let flag = leading.clone();
        let lead: Lead = Box::new(move |signal: ShutdownSignal| {
            let flag = flag.clone();
            vec![Box::pin(async move {
                flag.store(true, Ordering::SeqCst);
                // Lowered however the controller ends: aborted (leadership lost or released) or returning.
                let _leading = Leading(flag);
                signal.initiated().await;
            })
                as apiserver::futures::future::BoxFuture<'static, ()>]
        });
        let lock = Arc::new(ClusterLock::new(
            client.clone(),
            "kube-system",
            "test-apiserver",
        ));
        let shutdown = ShutdownSignal::new();
        let elector = LeaderElector::new(lock, config.clone(), identity);
        let task = tokio::spawn(elector.run(shutdown.clone(), lead));
        (leading, shutdown, task)
    };
    let wait = |flag: Arc<AtomicBool>, what: &'static str| async move {
        for _ in 0..200 {
            if flag.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{what} within 10s");
    };
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-system");
    let holder = || async {
        let lease = leases.get("test-apiserver").await.unwrap();
        lease.spec.unwrap().holder_identity.unwrap_or_default()
    };

    let (a_leads, a_stop, a_task) = candidate("a");
    wait(a_leads.clone(), "a leads").await;
    let (b_leads, b_stop, b_task) = candidate("b");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!b_leads.load(Ordering::SeqCst), "b took a held lease");
    assert_eq!(holder().await, "a");

    let stopped = std::time::Instant::now();
    a_stop.initiate();
    a_task.await.unwrap();
    assert!(!a_leads.load(Ordering::SeqCst));
    wait(b_leads.clone(), "b takes over").await;
    eprintln!("takeover of a released Lease: {:?}", stopped.elapsed());
    assert!(stopped.elapsed() < Duration::from_secs(2));
    let lease = leases.get("test-apiserver").await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("b"));
    assert_eq!(lease.lease_transitions, Some(1));
    assert_eq!(lease.lease_duration_seconds, Some(4));
    b_stop.initiate();
    b_task.await.unwrap();
    assert_eq!(holder().await, "");
}
