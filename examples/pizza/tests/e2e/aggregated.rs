//! The pizza server behind a real kube-apiserver (from `$KUBEBUILDER_ASSETS`, see `apiserver::envtest`), started as
//! a deployment would start it: only `--authentication-kubeconfig`, `--authorization-kubeconfig` and `--kubeconfig`
//! for a ServiceAccount bound to the RBAC of `deploy/`, a serving certificate for `api.<ns>.svc`, and APIServices
//! with its CA as `caBundle`. kubectl goes through the aggregator; the bypass catalogue goes straight to the
//! server. Everything a cluster decides (TokenReview, SubjectAccessReview, RBAC, namespaces, the aggregator's
//! proxying) comes from the real kube-apiserver.
//!
//! One cluster for the whole file: the scenarios run in order inside one test.

mod cluster_controllers;
use crate::support;
mod webhooks;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use apiserver::envtest::{Cluster, sign_serving_cert};
use clap::Parser;
use pizza_apiserver::server::{Mode, Options, start};
use serde_json::{Value, json};

const GROUP: &str = "restaurant.programming-kubernetes.info";
const TOPPINGS: &str = "/apis/restaurant.programming-kubernetes.info/v1alpha1/toppings";
/// Where the test's Service and the server's ServiceAccount live (the deployment folder's namespace).
const SYSTEM_NAMESPACE: &str = "pizza-system";

fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn artifacts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("artifacts")
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs")
}

fn kubectl_stdin(kubeconfig: &Path, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin written");
    child.wait_with_output().expect("kubectl ends")
}

fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let out = kubectl(kubeconfig, args);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn kubectl_err(kubeconfig: &Path, args: &[&str]) -> String {
    let out = kubectl(kubeconfig, args);
    assert!(
        !out.status.success(),
        "kubectl {args:?} should have failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// How a direct request to the pizza server identifies itself.
#[derive(Clone, Copy)]
enum Credential<'a> {
    None,
    Token(&'a str),
    Cert(&'a str, &'a str),
}

/// Direct requests to the pizza server (not through the aggregator).
struct Direct {
    url: String,
    ca_pem: String,
}

impl Direct {
    async fn client(&self, credential: Credential<'_>) -> kube::Client {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let user = match credential {
            Credential::None => json!({}),
            Credential::Token(token) => json!({ "token": token }),
            Credential::Cert(cert, key) => json!({
                "client-certificate-data": b64(cert),
                "client-key-data": b64(key),
            }),
        };
        let kubeconfig = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "pizza", "cluster": {
                "server": self.url,
                "certificate-authority-data": b64(&self.ca_pem),
            }}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "pizza", "user": "u"}}],
            "current-context": "c",
        });
        let kubeconfig: kube::config::Kubeconfig = serde_json::from_value(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    async fn send(
        &self,
        credential: Credential<'_>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> (u16, Value) {
        support::send(&self.client(credential).await, method, path, headers, body).await
    }
}

fn topping(name: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": "Topping",
        "metadata": {"name": name},
        "spec": {"cost": 1.5}
    })
}

fn pizza(name: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1beta1"),
        "kind": "Pizza",
        "metadata": {"name": name},
        "spec": {"toppings": [{"name": "salami", "quantity": 1}]}
    })
}

/// A client certificate from a CA nobody trusts.
fn foreign_client_cert(cn: &str) -> (String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::default();
    ca.distinguished_name.push(DnType::CommonName, "foreign-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A pizza server started as the deployment starts it, in delegated mode, serving `cert`.
struct Pizza {
    url: String,
    port: u16,
    /// The serving certificate and key files, for rotating them.
    cert_file: PathBuf,
    key_file: PathBuf,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    audit_log: PathBuf,
    _dir: tempfile::TempDir,
}

async fn start_pizza(
    core_kubeconfig: &Path,
    authorization_kubeconfig: &Path,
    cert: &str,
    key: &str,
) -> Pizza {
    let dir = tempfile::tempdir().unwrap();
    let cert_file = dir.path().join("tls.crt");
    let key_file = dir.path().join("tls.key");
    std::fs::write(&cert_file, cert).unwrap();
    std::fs::write(&key_file, key).unwrap();
    let data_dir = dir.path().join("data");
    let audit_policy = dir.path().join("audit-policy.yaml");
    std::fs::write(
        &audit_policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources:\n  - group: restaurant.programming-kubernetes.info\n",
    )
    .unwrap();
    let audit_log = dir.path().join("audit.log");
    let path = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    // Mutating webhooks are called with a bearer token (`--admission-control-config-file`, upstream's format).
    let webhook_kubeconfig = dir.path().join("webhook-kubeconfig.yaml");
    std::fs::write(
        &webhook_kubeconfig,
        "apiVersion: v1\nkind: Config\nusers:\n- name: \"*\"\n  user:\n    token: webhook-secret\n",
    )
    .unwrap();
    let admission_config = dir.path().join("admission.yaml");
    std::fs::write(
        &admission_config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: MutatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            path(&webhook_kubeconfig)
        ),
    )
    .unwrap();
    let options = Options::parse_from([
        "pizza-apiserver".to_string(),
        "--secure-port=0".into(),
        "--storage-backend=memory".into(),
        format!("--data-dir={}", path(&data_dir)),
        format!("--tls-cert-file={}", path(&cert_file)),
        format!("--tls-private-key-file={}", path(&key_file)),
        format!("--authentication-kubeconfig={}", path(core_kubeconfig)),
        format!(
            "--authorization-kubeconfig={}",
            path(authorization_kubeconfig)
        ),
        format!("--kubeconfig={}", path(core_kubeconfig)),
        format!("--audit-policy-file={}", path(&audit_policy)),
        format!("--audit-log-path={}", path(&audit_log)),
        format!(
            "--admission-control-config-file={}",
            path(&admission_config)
        ),
        // As deploy/03-deployment.yaml: kube-apiserver enforces quotas only for what it serves.
        "--enable-admission-plugins=ResourceQuota".into(),
    ]);
    assert_eq!(options.mode(), Mode::Delegated);
    let started = start(options).await.expect("pizza server starts");
    assert_eq!(started.mode, Mode::Delegated);
    // The written kubeconfig holds no credential when delegating, and only its owner may read it.
    let written = std::fs::read_to_string(&started.kubeconfig).unwrap();
    assert!(!written.contains("token:"), "{written}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&started.kubeconfig)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let port = started.server.local_addr().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = started.server;
    let task = tokio::spawn(async move {
        server
            .run(async {
                let _ = stopped.await;
            })
            .await
            .expect("server runs");
    });
    Pizza {
        url: started.url,
        audit_log,
        port,
        cert_file,
        key_file,
        stop,
        task,
        _dir: dir,
    }
}

impl Pizza {
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn behind_kube_apiserver() {
    let cluster = Cluster::start().await.expect("kube-apiserver starts");
    let admin = cluster.admin_kubeconfig_path().to_path_buf();

    // The deployment folder's namespace, service account and RBAC, for real.
    for file in [
        "00-namespace.yaml",
        "01-serviceaccount.yaml",
        "02-rbac.yaml",
    ] {
        kubectl_ok(
            &admin,
            &["apply", "-f", manifests().join(file).to_str().unwrap()],
        );
    }
    let server_token = cluster
        .service_account_token(SYSTEM_NAMESPACE, "pizza-apiserver")
        .await
        .unwrap();
    let server_kubeconfig = cluster.kubeconfig_for_token(&server_token).unwrap();

    let (cert, key, serving_ca) = sign_serving_cert(&[
        "api.pizza-e2e.svc",
        "api.pizza-system.svc",
        "localhost",
        "127.0.0.1",
    ])
    .unwrap();
    let pizza = start_pizza(&server_kubeconfig, &server_kubeconfig, &cert, &key).await;
    let direct = Direct {
        url: pizza.url.clone(),
        ca_pem: serving_ca.clone(),
    };

    // The server becomes ready once the namespaces and the authentication ConfigMap are in.
    let mut ready = false;
    for _ in 0..100 {
        if direct
            .send(Credential::None, "GET", "/readyz", &[], None)
            .await
            .0
            == 200
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "the pizza server never became ready");

    for version in ["v1alpha1", "v1beta1"] {
        let name = cluster
            .register_apiservice(GROUP, version, pizza.port, &serving_ca, "pizza-e2e", "api")
            .await
            .unwrap();
        cluster
            .wait_apiservice_available(&name, Duration::from_secs(60))
            .await
            .unwrap();
    }

    through_the_aggregator(&cluster, &admin).await;
    users_roles_and_service_accounts(&cluster, &admin, &direct).await;
    impersonation(&cluster, &direct).await;
    audited(&cluster, &pizza.audit_log).await;
    bypass_catalogue(&cluster, &direct).await;
    reviews_are_cached(&cluster, &admin, &direct).await;
    delegated_metrics(&cluster, &direct).await;
    namespace_lifecycle(&admin).await;
    webhooks::admission_webhooks(&cluster, &admin, &direct).await;
    webhooks::admission_policies(&cluster, &admin, &direct).await;
    webhooks::authorizer_policies(&cluster, &admin).await;
    webhooks::mutating_policies(&cluster, &admin, &direct).await;
    cluster_controllers::namespace_deletion(&cluster).await;
    cluster_controllers::garbage_collection(&cluster).await;
    cluster_controllers::resource_quota(&cluster).await;
    deployment_folder_applies(&admin);
    authorization_fails_closed(&cluster, &server_kubeconfig, &cert, &key, &serving_ca).await;
    serving_certificate_rotation(&cluster, &admin, &pizza).await;

    pizza.stop().await;
}

/// The serving certificate rotated as cert-manager rotates a mounted Secret (new files renamed into place) to one
/// from a new CA: the running server serves it to new connections within its re-read interval, and once the
/// APIServices' `caBundle` names the new CA the aggregator finds them Available and proxies to the server again.
async fn serving_certificate_rotation(cluster: &Cluster, admin: &Path, pizza: &Pizza) {
    let (cert, key, ca) = sign_serving_cert(&[
        "api.pizza-e2e.svc",
        "api.pizza-system.svc",
        "localhost",
        "127.0.0.1",
    ])
    .unwrap();
    for (file, pem) in [(&pizza.key_file, &key), (&pizza.cert_file, &cert)] {
        let staged = file.with_extension("new");
        std::fs::write(&staged, pem).unwrap();
        std::fs::rename(&staged, file).unwrap();
    }
    let direct = Direct {
        url: pizza.url.clone(),
        ca_pem: ca.clone(),
    };
    let client = direct.client(Credential::None).await;
    let mut served = false;
    for _ in 0..100 {
        let request = http::Request::get("/livez")
            .body(kube::client::Body::from(Vec::new()))
            .unwrap();
        if client.send(request).await.is_ok() {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(served, "the new certificate is served within 20 s");
    for version in ["v1alpha1", "v1beta1"] {
        let name = cluster
            .register_apiservice(GROUP, version, pizza.port, &ca, "pizza-e2e", "api")
            .await
            .unwrap();
        cluster
            .wait_apiservice_available(&name, Duration::from_secs(60))
            .await
            .unwrap();
    }
    // The aggregator builds a new transport for the new caBundle: allow it a moment.
    let mut listed = String::new();
    for _ in 0..150 {
        let out = kubectl(admin, &["get", "toppings", "-o", "name"]);
        if out.status.success() {
            listed = String::from_utf8_lossy(&out.stdout).into_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        listed.contains("topping"),
        "proxied again after the rotation: {listed:?}"
    );
}

/// kubectl through kube-apiserver: discovery, create, get, list, explain, watch, the status subresource.
async fn through_the_aggregator(_cluster: &Cluster, admin: &Path) {
    let resources = kubectl_ok(
        admin,
        &["api-resources", "--api-group", GROUP, "-o", "name"],
    );
    assert!(resources.contains("pizzas.restaurant"), "{resources}");
    assert!(resources.contains("toppings.restaurant"), "{resources}");

    // A watch through the aggregator sees the toppings being created.
    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(admin)
        .args([
            "get",
            "toppings",
            "--watch",
            "-o",
            "name",
            "--request-timeout=60s",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;

    kubectl_ok(
        admin,
        &[
            "create",
            "-f",
            artifacts().join("toppings.yaml").to_str().unwrap(),
        ],
    );
    kubectl_ok(
        admin,
        &[
            "create",
            "-f",
            artifacts().join("margherita.yaml").to_str().unwrap(),
        ],
    );
    let pizzas = kubectl_ok(admin, &["get", "pizzas", "-n", "default", "-o", "name"]);
    assert!(pizzas.contains("margherita"), "{pizzas}");
    let margherita: Value = serde_json::from_str(&kubectl_ok(
        admin,
        &["get", "pizza", "margherita", "-n", "default", "-o", "json"],
    ))
    .unwrap();
    assert_eq!(margherita["apiVersion"], format!("{GROUP}/v1beta1"));
    let explained = kubectl_ok(admin, &["explain", "pizzas.spec"]);
    assert!(explained.contains("toppings"), "{explained}");

    // The status subresource through the aggregator (authorized as pizzas/status), and the cost controller: with
    // mozzarella at 1.9 the margherita (mozzarella and tomato at 0.1) costs 2.0, which is also what is written.
    kubectl_ok(
        admin,
        &[
            "patch",
            "topping",
            "mozzarella",
            "--type=merge",
            "-p",
            r#"{"spec":{"cost":1.9}}"#,
        ],
    );
    kubectl_ok(
        admin,
        &[
            "patch",
            "pizza",
            "margherita",
            "-n",
            "default",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"cost":2.0}}"#,
        ],
    );
    let mut status = Value::Null;
    for _ in 0..100 {
        status = serde_json::from_str(&kubectl_ok(
            admin,
            &[
                "get",
                "pizza",
                "margherita",
                "-n",
                "default",
                "--subresource=status",
                "-o",
                "json",
            ],
        ))
        .unwrap();
        if (status["status"]["cost"].as_f64().unwrap_or_default() - 2.0).abs() < 1e-9 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        (status["status"]["cost"].as_f64().unwrap_or_default() - 2.0).abs() < 1e-9,
        "{status}"
    );
    assert_eq!(status["metadata"]["generation"], 1, "{status}");

    // Server-side apply through the aggregator: kubectl reads the schema from the aggregated OpenAPI v3, two
    // managers share the toppings, a conflict is refused with upstream's message.
    let apply = |manager: &str, toppings: &str, extra: &[&str]| {
        let manifest = format!(
            "apiVersion: {GROUP}/v1beta1\nkind: Pizza\nmetadata:\n  name: applied\n  namespace: default\nspec:\n  toppings: {toppings}\n"
        );
        let mut args = vec![
            "apply",
            "--server-side",
            "--field-manager",
            manager,
            "-f",
            "-",
        ];
        args.extend_from_slice(extra);
        kubectl_stdin(admin, &args, &manifest)
    };
    let out = apply("alice", r#"[{name: mozzarella, quantity: 2}]"#, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = apply("bob", r#"[{name: tomato, quantity: 1}]"#, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = apply(
        "bob",
        r#"[{name: tomato, quantity: 1}, {name: mozzarella, quantity: 3}]"#,
        &[],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"Apply failed with 1 conflict: conflict with "alice": .spec.toppings[name="mozzarella"].quantity"#),
        "{stderr}"
    );
    let applied: Value = serde_json::from_str(&kubectl_ok(
        admin,
        &[
            "get",
            "pizza",
            "applied",
            "-n",
            "default",
            "-o",
            "json",
            "--show-managed-fields",
        ],
    ))
    .unwrap();
    let managers: Vec<&str> = applied["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, ["alice", "bob"], "{applied}");
    assert_eq!(
        applied["spec"]["toppings"].as_array().unwrap().len(),
        2,
        "{applied}"
    );

    // A finalizer holds a deletion through the aggregator too; kubectl wait sees the end of it.
    let pizza = |args: &[&str]| {
        let mut all = vec!["-n", "default"];
        all.extend_from_slice(args);
        kubectl_ok(admin, &all)
    };
    pizza(&[
        "patch",
        "pizza",
        "margherita",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/oven"]}}"#,
    ]);
    pizza(&["delete", "pizza", "margherita", "--wait=false"]);
    let held = pizza(&[
        "get",
        "pizza",
        "margherita",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(!held.is_empty(), "the pizza stays, marked");
    pizza(&[
        "patch",
        "pizza",
        "margherita",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    pizza(&["wait", "--for=delete", "pizza/margherita", "--timeout=20s"]);

    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = watch.kill();
    let out = watch.wait_with_output().unwrap();
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(
        seen.contains("topping.restaurant.programming-kubernetes.info/salami"),
        "{seen}"
    );
}

/// A user whose Role allows pizzas only, and a ServiceAccount, through the aggregator and directly.
async fn users_roles_and_service_accounts(cluster: &Cluster, admin: &Path, direct: &Direct) {
    kubectl_ok(admin, &["create", "namespace", "team"]);
    kubectl_ok(
        admin,
        &[
            "create",
            "role",
            "pizza-maker",
            "-n",
            "team",
            "--verb=*",
            "--resource=pizzas.restaurant.programming-kubernetes.info",
        ],
    );
    kubectl_ok(
        admin,
        &[
            "create",
            "rolebinding",
            "alice-makes-pizza",
            "-n",
            "team",
            "--role=pizza-maker",
            "--user=alice",
            "--serviceaccount=team:eater",
        ],
    );
    let (alice_cert, alice_key) = cluster.sign_client_cert("alice", &["cooks"]).unwrap();
    let alice = cluster
        .kubeconfig_for_cert(&alice_cert, &alice_key)
        .unwrap();
    let manifest = serde_json::to_string(&pizza("alices")).unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &manifest).unwrap();
    kubectl_ok(
        &alice,
        &["create", "-n", "team", "-f", file.path().to_str().unwrap()],
    );
    let err = kubectl_err(&alice, &["delete", "topping", "salami"]);
    assert!(err.contains("forbidden"), "{err}");

    // The same question asked of the pizza server itself, as the aggregator asks it: our SubjectAccessReview
    // says no, with upstream's text.
    let (proxy_cert, proxy_key) = cluster.front_proxy_client_cert_and_key_pem();
    let as_alice = [("X-Remote-User", "alice"), ("X-Remote-Group", "cooks")];
    let (code, status) = direct
        .send(
            Credential::Cert(proxy_cert, proxy_key),
            "POST",
            TOPPINGS,
            &as_alice,
            Some(topping("forbidden")),
        )
        .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "toppings.{GROUP} is forbidden: User \"alice\" cannot create resource \"toppings\" in API group \"{GROUP}\" at the cluster scope"
        )
    );
    let (code, _) = direct
        .send(
            Credential::Cert(proxy_cert, proxy_key),
            "GET",
            &format!("/apis/{GROUP}/v1beta1/namespaces/team/pizzas/alices"),
            &as_alice,
            None,
        )
        .await;
    assert_eq!(code, 200);

    // Issue 36: a user named `josé`. kube-apiserver sends `X-Remote-User` as raw UTF-8 (obs-text to HTTP), which
    // Go's net/http takes as it is; it was treated as absent here (401). Through the aggregator with kubectl's
    // `--as`, and straight to the server as the aggregator sends it and as `Impersonate-User`.
    kubectl_ok(
        admin,
        &[
            "create",
            "rolebinding",
            "jose-makes-pizza",
            "-n",
            "team",
            "--role=pizza-maker",
            "--user=josé",
        ],
    );
    let listed = kubectl_ok(
        admin,
        &["--as=josé", "get", "pizzas", "-n", "team", "-o", "name"],
    );
    assert!(listed.contains("alices"), "{listed}");
    let err = kubectl_err(admin, &["--as=josé", "get", "pizzas", "-n", "default"]);
    assert!(
        err.contains("User \"josé\" cannot list resource \"pizzas\""),
        "{err}"
    );
    for headers in [
        &[("X-Remote-User", "josé")][..],
        &[
            ("X-Remote-User", "admin"),
            ("X-Remote-Group", "system:masters"),
            ("Impersonate-User", "josé"),
        ],
    ] {
        let (code, list) = direct
            .send(
                Credential::Cert(proxy_cert, proxy_key),
                "GET",
                &format!("/apis/{GROUP}/v1beta1/namespaces/team/pizzas"),
                headers,
                None,
            )
            .await;
        assert_eq!(code, 200, "{headers:?}: {list}");
        let (code, status) = direct
            .send(
                Credential::Cert(proxy_cert, proxy_key),
                "GET",
                &format!("/apis/{GROUP}/v1beta1/namespaces/default/pizzas"),
                headers,
                None,
            )
            .await;
        assert_eq!(code, 403, "{headers:?}: {status}");
        assert_eq!(
            status["message"],
            format!(
                "pizzas.{GROUP} is forbidden: User \"josé\" cannot list resource \"pizzas\" in API group \"{GROUP}\" in the namespace \"default\""
            )
        );
    }

    // A ServiceAccount token: through the aggregator, and straight to the server (TokenReview + SAR by us).
    let token = cluster
        .service_account_token("team", "eater")
        .await
        .unwrap();
    let eater = cluster.kubeconfig_for_token(&token).unwrap();
    let listed = kubectl_ok(&eater, &["get", "pizzas", "-n", "team", "-o", "name"]);
    assert!(listed.contains("alices"), "{listed}");
    let (code, list) = direct
        .send(
            Credential::Token(&token),
            "GET",
            &format!("/apis/{GROUP}/v1beta1/namespaces/team/pizzas"),
            &[],
            None,
        )
        .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["items"][0]["metadata"]["name"], "alices");
    let (code, status) = direct
        .send(
            Credential::Token(&token),
            "GET",
            &format!("/apis/{GROUP}/v1beta1/namespaces/default/pizzas"),
            &[],
            None,
        )
        .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "pizzas.{GROUP} is forbidden: User \"system:serviceaccount:team:eater\" cannot list resource \"pizzas\" in API group \"{GROUP}\" in the namespace \"default\""
        )
    );
}

/// `Impersonate-User` is checked by SubjectAccessReview: alice may not; an admin may, and then is that user.
async fn impersonation(cluster: &Cluster, direct: &Direct) {
    let (proxy_cert, proxy_key) = cluster.front_proxy_client_cert_and_key_pem();
    let proxy = Credential::Cert(proxy_cert, proxy_key);
    let (code, status) = direct
        .send(
            proxy,
            "GET",
            TOPPINGS,
            &[("X-Remote-User", "alice"), ("Impersonate-User", "bob")],
            None,
        )
        .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    let admin = [
        ("X-Remote-User", "admin"),
        ("X-Remote-Group", "system:masters"),
    ];
    let mut as_alice = admin.to_vec();
    as_alice.push(("Impersonate-User", "alice"));
    let (code, status) = direct
        .send(
            proxy,
            "POST",
            TOPPINGS,
            &as_alice,
            Some(topping("impersonated")),
        )
        .await;
    assert_eq!(code, 403, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("User \"alice\" cannot create"),
        "{status}"
    );
    assert_stored(direct, cluster, "impersonated", false).await;
}

/// The audit log of the pizza server: a request through kube-apiserver is recorded under the audit ID the
/// client sees (the one it sent), as the user the aggregator vouched for; the impersonation above is recorded
/// with both users.
async fn audited(cluster: &Cluster, audit_log: &Path) {
    let request = http::Request::get(TOPPINGS)
        .header("Audit-ID", "e2e-audit-id")
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let response = cluster.admin_client().send(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["audit-id"], "e2e-audit-id");
    let events: Vec<Value> = std::fs::read_to_string(audit_log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ours: Vec<&Value> = events
        .iter()
        .filter(|e| e["auditID"] == "e2e-audit-id")
        .collect();
    assert_eq!(ours.len(), 2, "{ours:?}");
    assert_eq!(ours[0]["stage"], "RequestReceived");
    assert_eq!(ours[1]["stage"], "ResponseComplete");
    assert_eq!(ours[1]["user"]["username"], "admin");
    assert_eq!(ours[1]["sourceIPs"][0], "127.0.0.1");
    assert_eq!(ours[1]["responseStatus"]["code"], 200);
    assert_eq!(
        ours[1]["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    let impersonated = events
        .iter()
        .find(|e| e["impersonatedUser"]["username"] == "alice" && e["stage"] == "ResponseComplete")
        .expect("the impersonated create is audited");
    assert_eq!(impersonated["user"]["username"], "admin");
    assert_eq!(impersonated["verb"], "create");
    assert_eq!(impersonated["responseStatus"]["code"], 403);
    assert_eq!(
        impersonated["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
}

/// The pizza server's `/metrics`, read as an admin through the front proxy (the aggregator does not proxy it).
struct Metrics(String);

impl Metrics {
    async fn scrape(cluster: &Cluster, direct: &Direct) -> Metrics {
        let (proxy_cert, proxy_key) = cluster.front_proxy_client_cert_and_key_pem();
        let (code, text) = direct
            .send(
                Credential::Cert(proxy_cert, proxy_key),
                "GET",
                "/metrics",
                &[
                    ("X-Remote-User", "admin"),
                    ("X-Remote-Group", "system:masters"),
                ],
                None,
            )
            .await;
        assert_eq!(code, 200);
        Metrics(text.as_str().expect("the exposition as text").to_string())
    }

    /// The value of the first series starting with `prefix`, 0 when there is none.
    fn sample(&self, prefix: &str) -> f64 {
        self.0
            .lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }
}

/// The reviews asked of kube-apiserver are counted on the server's `/metrics` (read as an admin through the front
/// proxy: `/metrics` is not proxied by the aggregator).
async fn delegated_metrics(cluster: &Cluster, direct: &Direct) {
    let metrics = Metrics::scrape(cluster, direct).await;
    let sample = |prefix: &str| metrics.sample(prefix);
    let text = &metrics.0;
    assert!(
        sample(r#"apiserver_delegated_authz_request_total{code="201"}"#) >= 1.0,
        "{text}"
    );
    assert!(
        sample(r#"apiserver_delegated_authn_request_total{code="201"}"#) >= 1.0,
        "{text}"
    );
    assert!(sample(r#"authentication_token_cache_request_total{status="miss"}"#) >= 1.0);
    assert!(text.contains("apiserver_delegated_authz_request_duration_seconds_bucket"));
}

/// Whether a topping of that name is stored, read as the aggregator reading for an admin.
async fn assert_stored(direct: &Direct, cluster: &Cluster, name: &str, want: bool) {
    let (proxy_cert, proxy_key) = cluster.front_proxy_client_cert_and_key_pem();
    let (code, _) = direct
        .send(
            Credential::Cert(proxy_cert, proxy_key),
            "GET",
            &format!("{TOPPINGS}/{name}"),
            &[
                ("X-Remote-User", "admin"),
                ("X-Remote-Group", "system:masters"),
            ],
            None,
        )
        .await;
    assert_eq!(code == 200, want, "topping {name} stored: {}", code == 200);
}

/// Every way of getting in without the right credentials, straight to the server: the status, and that
/// nothing was stored.
async fn bypass_catalogue(cluster: &Cluster, direct: &Direct) {
    let spoofed = [
        ("X-Remote-User", "admin"),
        ("X-Remote-Group", "system:masters"),
    ];
    let (mallory_cert, mallory_key) = cluster.sign_front_proxy_client_cert("mallory").unwrap();
    let (foreign_cert, foreign_key) = foreign_client_cert("front-proxy-client");
    let (user_cert, user_key) = cluster.sign_client_cert("alice", &[]).unwrap();
    let (expired_cert, expired_key) = cluster.sign_expired_client_cert("alice").unwrap();
    // A real token of a ServiceAccount that no longer exists: TokenReview says no.
    let doomed = cluster
        .service_account_token("team", "doomed")
        .await
        .unwrap();
    kubectl_ok(
        cluster.admin_kubeconfig_path(),
        &["delete", "serviceaccount", "doomed", "-n", "team"],
    );

    let anonymous = "User \\\"system:anonymous\\\" cannot create";
    // (what, credential, headers, status, text in the answer)
    type Row<'a> = (
        &'a str,
        Credential<'a>,
        Vec<(&'a str, &'a str)>,
        u16,
        &'a str,
    );
    let rows: Vec<Row<'_>> = vec![
        ("no credentials", Credential::None, vec![], 403, anonymous),
        (
            "spoofed X-Remote-* headers without a certificate",
            Credential::None,
            spoofed.to_vec(),
            403,
            anonymous,
        ),
        (
            "request-header CA, CN not allowed",
            Credential::Cert(&mallory_cert, &mallory_key),
            spoofed.to_vec(),
            401,
            "Unauthorized",
        ),
        (
            "foreign CA with the front-proxy CN",
            Credential::Cert(&foreign_cert, &foreign_key),
            spoofed.to_vec(),
            401,
            "Unauthorized",
        ),
        (
            "a user certificate carrying X-Remote-User",
            Credential::Cert(&user_cert, &user_key),
            spoofed.to_vec(),
            403,
            "User \\\"alice\\\" cannot create",
        ),
        (
            "an expired certificate",
            Credential::Cert(&expired_cert, &expired_key),
            vec![],
            401,
            "Unauthorized",
        ),
        (
            "a bogus bearer token",
            Credential::None,
            vec![("Authorization", "Bearer not-a-token")],
            401,
            "Unauthorized",
        ),
        (
            "a bogus lower-case bearer token",
            Credential::None,
            vec![("Authorization", "bearer not-a-token")],
            401,
            "Unauthorized",
        ),
        (
            "an empty bearer token",
            Credential::None,
            vec![("Authorization", "Bearer ")],
            403,
            anonymous,
        ),
        (
            "a token the TokenReview denies",
            Credential::Token(&doomed),
            vec![],
            401,
            "Unauthorized",
        ),
    ];
    for (i, (what, credential, headers, want, text)) in rows.into_iter().enumerate() {
        let name = format!("bypass-{i}");
        let mut last = (0, Value::Null);
        // A deleted ServiceAccount's token may pass until the TokenReview sees the deletion: retry that row.
        for _ in 0..20 {
            last = direct
                .send(credential, "POST", TOPPINGS, &headers, Some(topping(&name)))
                .await;
            if last.0 == want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let (code, status) = last;
        assert_eq!(code, want, "{what}: {status}");
        assert!(status.to_string().contains(text), "{what}: {status}");
        assert_stored(direct, cluster, &name, false).await;
        // The same through a delete of everything.
        let (code, _) = direct
            .send(credential, "DELETE", TOPPINGS, &headers, None)
            .await;
        assert!(
            code == 401 || code == 403,
            "{what}: deletecollection got {code}"
        );
    }
    assert_stored(direct, cluster, "salami", true).await;
}

/// A second identical request within the TTL makes no second TokenReview or SubjectAccessReview: counted in
/// kube-apiserver's audit log.
async fn reviews_are_cached(cluster: &Cluster, admin: &Path, direct: &Direct) {
    kubectl_ok(
        admin,
        &[
            "create",
            "clusterrole",
            "topping-reader",
            "--verb=get,list",
            "--resource=toppings.restaurant.programming-kubernetes.info",
        ],
    );
    kubectl_ok(
        admin,
        &[
            "create",
            "clusterrolebinding",
            "cache-probe-reads",
            "--clusterrole=topping-reader",
            "--serviceaccount=team:cache-probe",
        ],
    );
    let token = cluster
        .service_account_token("team", "cache-probe")
        .await
        .unwrap();
    let server = format!("system:serviceaccount:{SYSTEM_NAMESPACE}:pizza-apiserver");
    let wait = Duration::from_secs(10);
    let token_reviews = cluster.count_audit_events("tokenreviews", &server);
    let access_reviews = cluster.count_audit_events("subjectaccessreviews", &server);
    let path = format!("{TOPPINGS}/salami");
    // Four identical requests well within the token's 10 s: the first asks the cluster, the rest are answered from
    // the caches.
    for _ in 0..4 {
        assert_eq!(
            direct
                .send(Credential::Token(&token), "GET", &path, &[], None)
                .await
                .0,
            200
        );
    }
    cluster
        .wait_audit_events("tokenreviews", &server, token_reviews + 1, wait)
        .await
        .unwrap();
    cluster
        .wait_audit_events("subjectaccessreviews", &server, access_reviews + 1, wait)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        cluster.count_audit_events("tokenreviews", &server),
        token_reviews + 1
    );
    assert_eq!(
        cluster.count_audit_events("subjectaccessreviews", &server),
        access_reviews + 1
    );
}

/// Namespaces come from the core cluster: none there, 404; terminating, 403.
async fn namespace_lifecycle(admin: &Path) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), serde_json::to_string(&pizza("lost")).unwrap()).unwrap();
    let err = kubectl_err(
        admin,
        &["create", "-n", "nope", "-f", file.path().to_str().unwrap()],
    );
    assert!(err.contains("namespaces \"nope\" not found"), "{err}");

    // Without a controller manager a deleted namespace stays Terminating.
    kubectl_ok(admin, &["create", "namespace", "doomed"]);
    kubectl_ok(admin, &["delete", "namespace", "doomed", "--wait=false"]);
    // The informer sees the namespace go Terminating shortly after the delete.
    let mut err = String::new();
    for _ in 0..50 {
        let out = kubectl(
            admin,
            &[
                "create",
                "-n",
                "doomed",
                "-f",
                file.path().to_str().unwrap(),
            ],
        );
        if out.status.success() {
            kubectl_ok(
                admin,
                &["delete", "pizza", "lost", "-n", "doomed", "--wait=false"],
            );
        } else {
            err = String::from_utf8_lossy(&out.stderr).into_owned();
            if err.contains("being terminated") {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        err.contains(
            "unable to create new content in namespace doomed because it is being terminated"
        ),
        "{err}"
    );
}

/// The deployment folder, with a serving certificate made by its script, applies cleanly to the real
/// kube-apiserver (server-side dry run).
fn deployment_folder_applies(admin: &Path) {
    let out = tempfile::tempdir().unwrap();
    let made = Command::new("bash")
        .arg(manifests().join("make-serving-cert.sh"))
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let apiservice = std::fs::read_to_string(out.path().join("05-apiservice.yaml")).unwrap();
    assert!(!apiservice.contains("CA_BUNDLE"), "{apiservice}");
    let applied = kubectl_ok(
        admin,
        &[
            "apply",
            "--dry-run=server",
            "-f",
            out.path().to_str().unwrap(),
        ],
    );
    for object in [
        "namespace/pizza-system",
        "serviceaccount/pizza-apiserver",
        "clusterrolebinding.rbac.authorization.k8s.io/pizza-apiserver:system:auth-delegator",
        "rolebinding.rbac.authorization.k8s.io/pizza-apiserver:extension-apiserver-authentication-reader",
        "deployment.apps/pizza-apiserver",
        "service/api",
        "apiservice.apiregistration.k8s.io/v1beta1.restaurant.programming-kubernetes.info",
        "apiservice.apiregistration.k8s.io/v1alpha1.restaurant.programming-kubernetes.info",
        "secret/pizza-apiserver-serving-cert",
    ] {
        assert!(applied.contains(object), "{object} in {applied}");
    }
}

/// With the SubjectAccessReview endpoint unreachable, requests fail closed (never allowed).
async fn authorization_fails_closed(
    cluster: &Cluster,
    server_kubeconfig: &Path,
    cert: &str,
    key: &str,
    serving_ca: &str,
) {
    // The same kubeconfig, pointing at a port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let unreachable = server_kubeconfig.with_extension("unreachable");
    let text = std::fs::read_to_string(server_kubeconfig)
        .unwrap()
        .replace(cluster.url(), &format!("https://127.0.0.1:{port}"));
    std::fs::write(&unreachable, text).unwrap();
    let pizza = start_pizza(server_kubeconfig, &unreachable, cert, key).await;
    let direct = Direct {
        url: pizza.url.clone(),
        ca_pem: serving_ca.to_string(),
    };
    let (proxy_cert, proxy_key) = cluster.front_proxy_client_cert_and_key_pem();
    let (code, body) = direct
        .send(
            Credential::Cert(proxy_cert, proxy_key),
            "POST",
            TOPPINGS,
            &[("X-Remote-User", "alice")],
            Some(topping("unreviewed")),
        )
        .await;
    assert!(code == 500 || code == 403, "{code}: {body}");
    // system:masters needs no review.
    let (code, _) = direct
        .send(
            Credential::Cert(proxy_cert, proxy_key),
            "GET",
            TOPPINGS,
            &[
                ("X-Remote-User", "admin"),
                ("X-Remote-Group", "system:masters"),
            ],
            None,
        )
        .await;
    assert_eq!(code, 200);
    pizza.stop().await;
    let _ = std::fs::remove_file(unreachable);
}
