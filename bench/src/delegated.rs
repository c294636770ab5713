//! Delegated authentication and authorization under load: a real kube-apiserver and etcd on loopback
//! (`apiserver::envtest`) that the pizza server asks TokenReviews and SubjectAccessReviews of, as it would behind a
//! cluster, and an ordinary user of that cluster for the load.
//!
//! The server runs as ServiceAccount `pizza-system/pizza-apiserver` with the RBAC of the deployment folder
//! (`examples/pizza/deploy/02-rbac.yaml`: `system:auth-delegator`, the authentication ConfigMap reader, namespaces).
//! The load runs as ServiceAccount `bench/loader`, allowed everything on pizzas and toppings and nothing else.
//! kube-apiserver audits only the reviews (see `apiserver::envtest`), so the reviews the server made in a phase are
//! counted from its audit log: the proof that the phases hit the server's caches, or did not.

use std::path::Path;

use apiserver::envtest::Cluster;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Serialize;
use serde_json::{Value, json};

use crate::report;

/// Where the server's ServiceAccount lives (the deployment folder's namespace).
pub const SERVER_NAMESPACE: &str = "pizza-system";
/// The server's ServiceAccount, named in the deployment folder's RBAC.
pub const SERVER_ACCOUNT: &str = "pizza-apiserver";
/// The load's ServiceAccount: `bench/loader`.
pub const LOADER_NAMESPACE: &str = "bench";
pub const LOADER_ACCOUNT: &str = "loader";
/// The ClusterRole (and its binding) that lets the load do anything to pizzas and toppings.
const LOADER_ROLE: &str = "apiserver-bench:loader";

/// The server's RBAC, as deployed.
const SERVER_RBAC: &str = include_str!("../../examples/pizza/deploy/02-rbac.yaml");

const FIELD_MANAGER: &str = "apiserver-bench";

/// Calls the `--auth admission` webhook answered.
static WEBHOOK_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The name of the webhook configuration, policy and binding of `--auth admission`.
const ADMISSION_NAME: &str = "apiserver-bench";

/// The reviews the server under test asked of the core cluster so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Reviews {
    pub token_reviews: usize,
    pub subject_access_reviews: usize,
}

impl std::ops::Sub for Reviews {
    type Output = Reviews;
    fn sub(self, before: Reviews) -> Reviews {
        Reviews {
            token_reviews: self.token_reviews.saturating_sub(before.token_reviews),
            subject_access_reviews: self
                .subject_access_reviews
                .saturating_sub(before.subject_access_reviews),
        }
    }
}

/// A core cluster set up for a delegated pizza server and its load.
pub struct CoreCluster {
    cluster: Cluster,
}

fn rbac_resource(kind: &str) -> Result<(ApiResource, bool), String> {
    let (plural, namespaced) = match kind {
        "ClusterRole" => ("clusterroles", false),
        "ClusterRoleBinding" => ("clusterrolebindings", false),
        "Role" => ("roles", true),
        "RoleBinding" => ("rolebindings", true),
        other => return Err(format!("{other}: not an RBAC kind this harness applies")),
    };
    let gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind);
    Ok((ApiResource::from_gvk_with_plural(&gvk, plural), namespaced))
}

impl CoreCluster {
    /// Starts kube-apiserver and etcd (binaries from `$KUBEBUILDER_ASSETS`), creates both ServiceAccounts and
    /// applies the server's and the load's RBAC.
    pub async fn start() -> Result<CoreCluster, String> {
        let cluster = Cluster::start()
            .await
            .map_err(|e| format!("starting the core cluster (kube-apiserver + etcd): {e}"))?;
        let core = CoreCluster { cluster };
        // Creates the namespaces and accounts; the tokens are asked for again per server.
        core.token(SERVER_NAMESPACE, SERVER_ACCOUNT).await?;
        core.token(LOADER_NAMESPACE, LOADER_ACCOUNT).await?;
        for document in SERVER_RBAC.split("\n---") {
            let (json, _) = apiserver::codec::yaml_to_json(document.as_bytes())
                .map_err(|e| format!("02-rbac.yaml: {e}"))?;
            let object: Value = serde_json::from_slice(&json).map_err(|e| e.to_string())?;
            if object.is_object() {
                core.apply(&object).await?;
            }
        }
        let group = pizza_apiserver::GROUP;
        core.apply(&json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": LOADER_ROLE},
            "rules": [{"apiGroups": [group], "resources": ["pizzas", "pizzas/status", "toppings"], "verbs": ["*"]}],
        }))
        .await?;
        core.apply(&json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": LOADER_ROLE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": LOADER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": LOADER_ACCOUNT, "namespace": LOADER_NAMESPACE}],
        }))
        .await?;
        Ok(core)
    }

    /// Server-side applies one RBAC object.
    async fn apply(&self, object: &Value) -> Result<(), String> {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let (resource, namespaced) = rbac_resource(kind)?;
        let client = self.cluster.admin_client();
        let api: Api<DynamicObject> = if namespaced {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default");
            Api::namespaced_with(client, namespace, &resource)
        } else {
            Api::all_with(client, &resource)
        };
        api.patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .map_err(|e| format!("applying {kind} {name}: {e}"))?;
        Ok(())
    }

    async fn token(&self, namespace: &str, name: &str) -> Result<String, String> {
        self.cluster
            .service_account_token(namespace, name)
            .await
            .map_err(|e| format!("token for ServiceAccount {namespace}/{name}: {e}"))
    }

    /// The pizza server's flags for delegated authentication and authorization: one kubeconfig with a fresh token
    /// (valid for an hour) of its ServiceAccount for the reviews and for the core cluster's namespaces.
    pub async fn server_args(&self) -> Result<Vec<String>, String> {
        let token = self.token(SERVER_NAMESPACE, SERVER_ACCOUNT).await?;
        let kubeconfig = self
            .cluster
            .kubeconfig_for_token(&token)
            .map_err(|e| e.to_string())?;
        let kubeconfig = kubeconfig.to_string_lossy().into_owned();
        Ok([
            "--authentication-kubeconfig",
            "--authorization-kubeconfig",
            "--kubeconfig",
        ]
        .into_iter()
        .flat_map(|flag| [flag.to_string(), kubeconfig.clone()])
        .collect())
    }

    /// A fresh token (valid for an hour) of the load's ServiceAccount.
    pub async fn loader_token(&self) -> Result<String, String> {
        self.token(LOADER_NAMESPACE, LOADER_ACCOUNT).await
    }

    /// The user the server's reviews come from.
    pub fn server_user() -> String {
        format!("system:serviceaccount:{SERVER_NAMESPACE}:{SERVER_ACCOUNT}")
    }

    /// The reviews the server has made so far, once kube-apiserver has audited all it answered: its audit log is
    /// written as each response completes, so it is read until two reads 100 ms apart agree.
    pub async fn reviews(&self) -> Reviews {
        let user = Self::server_user();
        let read = || Reviews {
            token_reviews: self.cluster.count_audit_events("tokenreviews", &user),
            subject_access_reviews: self
                .cluster
                .count_audit_events("subjectaccessreviews", &user),
        };
        let mut last = read();
        for _ in 0..50 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let now = read();
            if now == last {
                break;
            }
            last = now;
        }
        last
    }

    /// Configures admission in the cluster for the next server: one ValidatingAdmissionPolicy with a binding and,
    /// with `webhook`, one validating webhook (an HTTPS server in this process that allows everything at once),
    /// both on creates
    /// and updates of pizzas and toppings (the phases write toppings); the server sees them through its
    /// informers.
    pub async fn add_admission(&self, webhook: bool) -> Result<(), String> {
        use k8s_openapi::api::admissionregistration::v1::{
            ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
            ValidatingWebhookConfiguration,
        };
        use kube::api::PostParams;

        async fn allow(axum::Json(review): axum::Json<Value>) -> axum::Json<Value> {
            WEBHOOK_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            axum::Json(json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": review["request"]["uid"], "allowed": true},
            }))
        }
        let rule = json!({
            "apiGroups": [pizza_apiserver::GROUP], "apiVersions": ["*"],
            "resources": ["pizzas", "toppings"], "operations": ["CREATE", "UPDATE"],
        });
        let client = self.cluster.admin_client();
        let create = |e: kube::Error| format!("configuring admission: {e}");
        if webhook {
            let router = axum::Router::new().route("/allow", axum::routing::post(allow));
            let webhook = apiserver::envtest::HttpsServer::start(router, &["127.0.0.1"])
                .await
                .map_err(|e| format!("the webhook server: {e}"))?;
            use base64::Engine;
            let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&webhook.ca_pem);
            let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": ADMISSION_NAME},
            "webhooks": [{
                "name": "allow.bench.example.com",
                "clientConfig": {"url": format!("https://127.0.0.1:{}/allow", webhook.port), "caBundle": ca_bundle},
                "rules": [rule],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }],
        }))
        .map_err(|e| e.to_string())?;
            Api::<ValidatingWebhookConfiguration>::all(client.clone())
                .create(&PostParams::default(), &config)
                .await
                .map_err(create)?;
        }
        let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
            "metadata": {"name": ADMISSION_NAME},
            "spec": {
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [{"expression": "size(object.metadata.name) <= 253"}],
            },
        }))
        .map_err(|e| e.to_string())?;
        Api::<ValidatingAdmissionPolicy>::all(client.clone())
            .create(&PostParams::default(), &policy)
            .await
            .map_err(create)?;
        let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
            "metadata": {"name": ADMISSION_NAME},
            "spec": {"policyName": ADMISSION_NAME, "validationActions": ["Deny"]},
        }))
        .map_err(|e| e.to_string())?;
        Api::<ValidatingAdmissionPolicyBinding>::all(client)
            .create(&PostParams::default(), &binding)
            .await
            .map_err(create)?;
        Ok(())
    }

    /// Removes what [`CoreCluster::add_admission`] configured; the webhook calls it got are reported on stderr.
    pub async fn remove_admission(&self, webhook: bool) -> Result<(), String> {
        eprintln!(
            "apiserver-bench: the validating webhook answered {} calls",
            WEBHOOK_CALLS.swap(0, std::sync::atomic::Ordering::Relaxed)
        );
        use k8s_openapi::api::admissionregistration::v1::{
            ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
            ValidatingWebhookConfiguration,
        };
        use kube::api::DeleteParams;

        let client = self.cluster.admin_client();
        let delete = |e: kube::Error| format!("removing admission: {e}");
        let params = DeleteParams::default();
        Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
            .delete(ADMISSION_NAME, &params)
            .await
            .map_err(delete)?;
        Api::<ValidatingAdmissionPolicy>::all(client.clone())
            .delete(ADMISSION_NAME, &params)
            .await
            .map_err(delete)?;
        if webhook {
            Api::<ValidatingWebhookConfiguration>::all(client)
                .delete(ADMISSION_NAME, &params)
                .await
                .map_err(delete)?;
        }
        Ok(())
    }

    /// CPU seconds (user + system) kube-apiserver and etcd of this cluster have used so far: they share the
    /// machine with the server and the harness, so their work is part of what delegation costs here.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let pids = cluster_pids(self.cluster.dir());
        if pids.is_empty() {
            return None;
        }
        Some(pids.into_iter().filter_map(report::cpu_seconds).sum())
    }
}

/// The kube-apiserver and etcd processes whose command lines name files in `dir` (the cluster's directory).
fn cluster_pids(dir: &Path) -> Vec<u32> {
    let dir = dir.to_string_lossy();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let mut args = cmdline.split(|b| *b == 0);
            let program = args.next().unwrap_or_default();
            let program = String::from_utf8_lossy(program);
            let binary = program.rsplit('/').next().unwrap_or_default();
            (binary == "kube-apiserver" || binary == "etcd")
                && args.any(|a| String::from_utf8_lossy(a).contains(dir.as_ref()))
        })
        .collect()
}
