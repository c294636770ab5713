//! Admission configured in the real kube-apiserver applies to pizzas. Webhooks: a validating webhook refusing
//! some pizzas (called in the version its rule names, only in namespaces its selector picks, not for pizzas its
//! CEL match condition exempts), a mutating webhook reached through a Service adding a label, a webhook that
//! times out under `failurePolicy: Fail` and `Ignore`; they are an in-test HTTPS server on loopback that records
//! what it was sent. ValidatingAdmissionPolicies: a denying policy with a ConfigMap parameter and a warning one, and
//! one asking the CEL `authorizer` ([`authorizer`]).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::envtest::{Cluster, HttpsServer};
use axum::Json;
use axum::extract::State;
use axum::routing::post;
use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{Direct, GROUP, Metrics, kubectl, kubectl_ok, pizza};

mod authorizer;
pub use authorizer::authorizer_policies;

/// The AdmissionReview requests the webhooks got, with the webhook's path.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(&'static str, Value)>>>);

impl Seen {
    fn record(&self, webhook: &'static str, review: &Value) {
        self.0
            .lock()
            .unwrap()
            .push((webhook, review["request"].clone()));
    }

    /// How many requests `webhook` got about the object `name`.
    fn count(&self, webhook: &str, name: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(w, r)| *w == webhook && r["object"]["metadata"]["name"] == name)
            .count()
    }

    /// The last request `webhook` got about the object `name`.
    fn last(&self, webhook: &str, name: &str) -> Option<Value> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(w, r)| *w == webhook && r["object"]["metadata"]["name"] == name)
            .map(|(_, r)| r.clone())
    }
}

fn answer(request: &Value, response: Value) -> Json<Value> {
    let mut response = response;
    response["uid"] = request["request"]["uid"].clone();
    Json(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    }))
}

/// Refuses pizzas named `pineapple*` with 403 and a message; warns on every call.
async fn deny(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
    seen.record("deny", &review);
    let name = review["request"]["object"]["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    let allowed = !name.starts_with("pineapple");
    answer(
        &review,
        json!({
            "allowed": allowed,
            "status": {"code": 403, "message": "no pineapple on pizza"},
            "warnings": ["checked by the deny webhook"],
        }),
    )
}

/// Adds the label `webhook: mutated` with a JSON patch.
async fn label(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
    seen.record("label", &review);
    let labels = &review["request"]["object"]["metadata"]["labels"];
    let patch = if labels.is_object() {
        json!([{"op": "add", "path": "/metadata/labels/webhook", "value": "mutated"}])
    } else {
        json!([{"op": "add", "path": "/metadata/labels", "value": {"webhook": "mutated"}}])
    };
    let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
    answer(
        &review,
        json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}),
    )
}

/// Allows, and records what it saw, with the credentials it was called with.
async fn record(
    State(seen): State<Seen>,
    headers: http::HeaderMap,
    Json(review): Json<Value>,
) -> Json<Value> {
    let mut recorded = review.clone();
    recorded["request"]["authorization"] = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .into();
    seen.record("record", &recorded);
    answer(&review, json!({"allowed": true}))
}

/// Answers after three seconds.
async fn slow(Json(review): Json<Value>) -> Json<Value> {
    tokio::time::sleep(Duration::from_secs(3)).await;
    answer(&review, json!({"allowed": true}))
}

fn webhook_rule(versions: &[&str]) -> Value {
    json!({
        "apiGroups": [GROUP],
        "apiVersions": versions,
        "resources": ["pizzas"],
        "operations": ["CREATE", "UPDATE"],
    })
}

/// Creates `pizza` in `namespace` through kube-apiserver; kubectl's output (stdout and stderr) and success.
fn create(admin: &Path, namespace: &str, pizza: &Value) -> (bool, String) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), pizza.to_string()).unwrap();
    let out = kubectl(
        admin,
        &[
            "create",
            "-n",
            namespace,
            "-f",
            file.path().to_str().unwrap(),
        ],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Creates pizzas named `<prefix>-<n>` until `done` says the configuration took effect (the server's informer
/// sees configurations a moment after kube-apiserver stored them).
async fn until(
    admin: &Path,
    namespace: &str,
    prefix: &str,
    labels: Value,
    done: impl Fn(bool, &str) -> bool,
) -> String {
    for attempt in 0..100 {
        let mut p = pizza(&format!("{prefix}-{attempt}"));
        p["metadata"]["labels"] = labels.clone();
        let (ok, text) = create(admin, namespace, &p);
        if done(ok, &text) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the webhook configuration never took effect for {prefix}");
}

pub async fn admission_webhooks(cluster: &Cluster, admin: &Path, direct: &Direct) {
    let seen = Seen::default();
    let router = axum::Router::new()
        .route("/deny", post(deny))
        .route("/label", post(label))
        .route("/slow", post(slow))
        .with_state(seen.clone());
    let server = HttpsServer::start(router, &["webhook.pizza-e2e.svc", "localhost", "127.0.0.1"])
        .await
        .unwrap();
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&server.ca_pem);
    let url = |path: &str| format!("https://127.0.0.1:{}{path}", server.port);

    for (namespace, label) in [("webhooks-on", "on"), ("webhooks-off", "off")] {
        kubectl_ok(admin, &["create", "namespace", namespace]);
        kubectl_ok(
            admin,
            &[
                "label",
                "namespace",
                namespace,
                &format!("webhooks={label}"),
            ],
        );
    }
    // The mutating webhook is reached through a Service, resolved as the aggregator resolves one.
    cluster.ensure_namespace("pizza-e2e").await.unwrap();
    kubectl_ok(
        admin,
        &[
            "create",
            "service",
            "externalname",
            "webhook",
            "-n",
            "pizza-e2e",
            "--external-name",
            "localhost",
        ],
    );

    let client = cluster.admin_client();
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone());
    let deny_config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": "pizza-deny"},
        "webhooks": [{
            "name": "deny.pizza.example.com",
            "clientConfig": {"url": url("/deny"), "caBundle": ca_bundle},
            // Only v1beta1 is named: a v1alpha1 request is converted (matchPolicy Equivalent, the default).
            "rules": [webhook_rule(&["v1beta1"])],
            "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
            // A CEL match condition: pizzas labelled `exempt` are not sent.
            "matchConditions": [{
                "name": "not-exempt",
                "expression": "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)",
            }],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    }))
    .unwrap();
    validating
        .create(&PostParams::default(), &deny_config)
        .await
        .unwrap();
    let label_config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": "pizza-label"},
        "webhooks": [{
            "name": "label.pizza.example.com",
            "clientConfig": {
                "service": {"namespace": "pizza-e2e", "name": "webhook", "path": "/label", "port": server.port},
                "caBundle": ca_bundle,
            },
            "rules": [webhook_rule(&["*"])],
            "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1", "v1beta1"],
        }],
    }))
    .unwrap();
    mutating
        .create(&PostParams::default(), &label_config)
        .await
        .unwrap();

    // A v1alpha1 pineapple is refused with the webhook's code and message, and nothing is stored.
    let refused = until(admin, "webhooks-on", "pineapple", json!({}), |ok, _| !ok).await;
    assert!(
        refused.contains(
            "admission webhook \"deny.pizza.example.com\" denied the request: no pineapple on pizza"
        ),
        "{refused}"
    );
    // The webhook's Status had no reason: kubectl shows none, as with upstream.
    assert!(refused.contains("Error from server: "), "{refused}");
    let mut alpha = pizza("pineapple-alpha");
    alpha["apiVersion"] = json!(format!("{GROUP}/v1alpha1"));
    alpha["spec"] = json!({"toppings": ["salami"]});
    let (ok, text) = create(admin, "webhooks-on", &alpha);
    assert!(!ok, "{text}");
    let out = kubectl(
        admin,
        &["get", "pizza", "pineapple-alpha", "-n", "webhooks-on"],
    );
    assert!(!out.status.success(), "a refused pizza was stored");

    // What the webhook was sent: the request in v1beta1, converted from v1alpha1.
    let request = seen
        .last("deny", "pineapple-alpha")
        .expect("the webhook saw the request");
    assert_eq!(
        request["kind"],
        json!({"group": GROUP, "version": "v1beta1", "kind": "Pizza"})
    );
    assert_eq!(request["requestKind"]["version"], "v1alpha1");
    assert_eq!(request["resource"]["resource"], "pizzas");
    assert_eq!(request["requestResource"]["version"], "v1alpha1");
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(request["namespace"], "webhooks-on");
    assert_eq!(request["userInfo"]["username"], "admin");
    assert!(
        request["userInfo"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:masters")),
        "{request}"
    );
    assert_eq!(request["object"]["apiVersion"], format!("{GROUP}/v1beta1"));
    assert_eq!(request["object"]["spec"]["toppings"][0]["name"], "salami");
    assert_eq!(request["dryRun"], false);
    assert_eq!(request["options"]["kind"], "CreateOptions");

    // Server-side dry run calls webhooks without side effects, and is refused the same way.
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), pizza("pineapple-dry").to_string()).unwrap();
    let out = kubectl(
        admin,
        &[
            "create",
            "--dry-run=server",
            "-n",
            "webhooks-on",
            "-f",
            file.path().to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    assert_eq!(seen.last("deny", "pineapple-dry").unwrap()["dryRun"], true);

    // A pizza the match condition exempts is not sent to the deny webhook.
    let mut exempt = pizza("pineapple-exempt");
    exempt["metadata"]["labels"] = json!({"exempt": "yes"});
    let (ok, text) = create(admin, "webhooks-on", &exempt);
    assert!(ok, "{text}");
    assert!(seen.last("label", "pineapple-exempt").is_some());
    assert!(seen.last("deny", "pineapple-exempt").is_none());

    // Outside the selected namespaces, no webhook is called.
    let (ok, text) = create(admin, "webhooks-off", &pizza("pineapple-off"));
    assert!(ok, "{text}");
    assert!(seen.last("deny", "pineapple-off").is_none());
    assert!(seen.last("label", "pineapple-off").is_none());
    let labels = kubectl_ok(
        admin,
        &[
            "get",
            "pizza",
            "pineapple-off",
            "-n",
            "webhooks-off",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    );
    assert!(!labels.contains("mutated"), "{labels}");

    // An allowed pizza gets the mutating webhook's label, and the deny webhook's warning reaches kubectl.
    let (ok, text) = create(admin, "webhooks-on", &pizza("margherita-hooked"));
    assert!(ok, "{text}");
    assert!(
        text.contains("Warning: checked by the deny webhook"),
        "{text}"
    );
    let labels = kubectl_ok(
        admin,
        &[
            "get",
            "pizza",
            "margherita-hooked",
            "-n",
            "webhooks-on",
            "-o",
            "jsonpath={.metadata.labels.webhook}",
        ],
    );
    assert_eq!(labels, "mutated");
    // The validating webhook ran after the mutation: it saw the label.
    let validated = seen.last("deny", "margherita-hooked").unwrap();
    assert_eq!(
        validated["object"]["metadata"]["labels"]["webhook"],
        "mutated"
    );

    // An update is sent with the old object.
    kubectl_ok(
        admin,
        &[
            "label",
            "pizza",
            "margherita-hooked",
            "-n",
            "webhooks-on",
            "fresh=yes",
        ],
    );
    let update = seen.last("deny", "margherita-hooked").unwrap();
    assert_eq!(update["operation"], "UPDATE");
    assert_eq!(update["oldObject"]["metadata"]["name"], "margherita-hooked");
    assert_eq!(update["object"]["metadata"]["labels"]["fresh"], "yes");
    assert!(update["oldObject"]["metadata"]["labels"]["fresh"].is_null());

    // A webhook that does not answer within its timeout: refused under failurePolicy Fail ...
    let slow_config = |policy: &str| -> ValidatingWebhookConfiguration {
        serde_json::from_value(json!({
            "metadata": {"name": "pizza-slow"},
            "webhooks": [{
                "name": "slow.pizza.example.com",
                "clientConfig": {"url": url("/slow"), "caBundle": ca_bundle},
                "rules": [webhook_rule(&["*"])],
                "objectSelector": {"matchLabels": {"slow": "yes"}},
                "timeoutSeconds": 1,
                "failurePolicy": policy,
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }],
        }))
        .unwrap()
    };
    validating
        .create(&PostParams::default(), &slow_config("Fail"))
        .await
        .unwrap();
    let failed = until(
        admin,
        "webhooks-off",
        "slow",
        json!({"slow": "yes"}),
        |ok, _| !ok,
    )
    .await;
    assert!(
        failed.contains("failed calling webhook \"slow.pizza.example.com\""),
        "{failed}"
    );
    assert!(failed.contains("context deadline exceeded"), "{failed}");
    assert!(failed.contains("InternalError"), "{failed}");
    // ... allowed under Ignore.
    validating
        .patch(
            "pizza-slow",
            &PatchParams::default(),
            &Patch::Strategic(json!({"webhooks": [{"name": "slow.pizza.example.com", "failurePolicy": "Ignore"}]})),
        )
        .await
        .unwrap();
    until(
        admin,
        "webhooks-off",
        "slow-ignored",
        json!({"slow": "yes"}),
        |ok, _| ok,
    )
    .await;

    // The calls in upstream's metrics, on the server's /metrics.
    let metrics = Metrics::scrape(cluster, direct).await;
    for (series, what) in [
        (
            r#"apiserver_admission_webhook_request_total{code="200",name="deny.pizza.example.com",operation="CREATE",rejected="false",type="validating"}"#,
            "allowed validating calls",
        ),
        (
            r#"apiserver_admission_webhook_request_total{code="200",name="label.pizza.example.com",operation="CREATE",rejected="false",type="admit"}"#,
            "mutating calls",
        ),
        (
            r#"apiserver_admission_webhook_rejection_count{error_type="no_error",name="deny.pizza.example.com",operation="CREATE",rejection_code="403",type="validating"}"#,
            "refusals",
        ),
        (
            r#"apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="slow.pizza.example.com",operation="CREATE",rejection_code="0",type="validating"}"#,
            "failed calls under Fail",
        ),
        (
            r#"apiserver_admission_webhook_fail_open_count{name="slow.pizza.example.com",type="validating"}"#,
            "failed calls under Ignore",
        ),
    ] {
        assert!(metrics.sample(series) >= 1.0, "no {what}: {series}");
    }
    assert!(
        metrics
            .0
            .contains("apiserver_admission_webhook_admission_duration_seconds_bucket")
    );

    for name in ["pizza-deny", "pizza-slow"] {
        validating
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    mutating
        .delete("pizza-label", &DeleteParams::default())
        .await
        .unwrap();
}

/// A pizza with `count` toppings (of those the artifacts create).
fn pizza_with(name: &str, count: usize) -> Value {
    let mut p = pizza(name);
    let toppings: Vec<Value> = ["salami", "mozzarella", "tomato"]
        .iter()
        .take(count)
        .map(|t| json!({"name": t, "quantity": 1}))
        .collect();
    p["spec"]["toppings"] = json!(toppings);
    p
}

/// ValidatingAdmissionPolicies with bindings in the real kube-apiserver apply to pizzas: a policy with a
/// ConfigMap parameter, a variable and a message expression denies, another only warns; bindings select
/// namespaces by label.
pub async fn admission_policies(cluster: &Cluster, admin: &Path, direct: &Direct) {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    use k8s_openapi::api::core::v1::ConfigMap;

    let client = cluster.admin_client();
    kubectl_ok(admin, &["create", "namespace", "policies-on"]);
    kubectl_ok(admin, &["label", "namespace", "policies-on", "policies=on"]);
    let limits: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "pizza-limits", "namespace": "default"},
        "data": {"maxToppings": "2"},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &limits)
        .await
        .unwrap();
    let policies = Api::<ValidatingAdmissionPolicy>::all(client.clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone());
    let policy = |name: &str, spec: Value| -> ValidatingAdmissionPolicy {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    let binding = |name: &str, spec: Value| -> ValidatingAdmissionPolicyBinding {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    let rules = json!({"resourceRules": [webhook_rule(&["v1beta1"])]});
    policies
        .create(
            &PostParams::default(),
            &policy(
                "max-toppings",
                json!({
                    "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "matchConstraints": rules,
                    "variables": [{"name": "count", "expression": "size(object.spec.toppings)"}],
                    "validations": [{
                        "expression": "variables.count <= int(params.data.maxToppings)",
                        "messageExpression": "'a pizza may have at most ' + params.data.maxToppings + ' toppings, this one has ' + string(variables.count)",
                        "reason": "Forbidden",
                    }],
                    "failurePolicy": "Fail",
                }),
            ),
        )
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "max-toppings-binding",
                json!({
                    "policyName": "max-toppings",
                    "paramRef": {"name": "pizza-limits", "namespace": "default", "parameterNotFoundAction": "Deny"},
                    "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": {"matchLabels": {"policies": "on"}}},
                }),
            ),
        )
        .await
        .unwrap();
    policies
        .create(
            &PostParams::default(),
            &policy(
                "short-names",
                json!({
                    "matchConstraints": rules,
                    "validations": [{"expression": "size(object.metadata.name) <= 12", "message": "names are short"}],
                }),
            ),
        )
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "short-names-binding",
                json!({"policyName": "short-names", "validationActions": ["Warn"]}),
            ),
        )
        .await
        .unwrap();

    // Three toppings are one too many: refused with the message expression's text, as 403 (reason Forbidden).
    let mut denied = String::new();
    for attempt in 0..100 {
        let (ok, text) = create(
            admin,
            "policies-on",
            &pizza_with(&format!("loaded-{attempt}"), 3),
        );
        if !ok {
            denied = text;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        denied.contains("ValidatingAdmissionPolicy 'max-toppings' with binding 'max-toppings-binding' denied request: a pizza may have at most 2 toppings, this one has 3"),
        "{denied}"
    );
    assert!(denied.contains("(Forbidden)"), "{denied}");
    // Two are fine; outside the bound namespaces three are too.
    let (ok, text) = create(admin, "policies-on", &pizza_with("two", 2));
    assert!(ok, "{text}");
    let (ok, text) = create(admin, "webhooks-off", &pizza_with("three", 3));
    assert!(ok, "{text}");
    // The Warn binding only warns (the name is longer than 12 characters).
    let (ok, text) = create(admin, "policies-on", &pizza_with("a-rather-long-name", 1));
    assert!(ok, "{text}");
    assert!(
        text.contains("Warning: Validation failed for ValidatingAdmissionPolicy 'short-names' with binding 'short-names-binding': names are short"),
        "{text}"
    );
    // The parameter is read live: raising the limit admits three toppings.
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .patch(
            "pizza-limits",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"maxToppings": "3"}})),
        )
        .await
        .unwrap();
    // Parameters come from an informer: the change arrives a moment later.
    let mut admitted = (false, String::new());
    for attempt in 0..100 {
        admitted = create(
            admin,
            "policies-on",
            &pizza_with(&format!("three-{attempt}"), 3),
        );
        if admitted.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(admitted.0, "{}", admitted.1);
    // Without its parameter the binding denies (parameterNotFoundAction: Deny).
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .delete("pizza-limits", &DeleteParams::default())
        .await
        .unwrap();
    let mut refused = (true, String::new());
    for attempt in 0..100 {
        refused = create(
            admin,
            "policies-on",
            &pizza_with(&format!("unlimited-{attempt}"), 1),
        );
        if !refused.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (ok, text) = refused;
    assert!(!ok, "{text}");
    assert!(
        text.contains("failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{text}"
    );

    // Upstream's policy metrics: denials and warnings, by policy, binding and action.
    let metrics = Metrics::scrape(cluster, direct).await;
    assert!(
        metrics.sample(r#"apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="invalid_error",policy="max-toppings",policy_binding="max-toppings-binding"}"#) >= 1.0,
        "{}",
        metrics.0
    );
    assert!(
        metrics.sample(r#"apiserver_validating_admission_policy_check_total{enforcement_action="warn",error_type="invalid_error",policy="short-names",policy_binding="short-names-binding"}"#) >= 1.0
    );
    assert!(metrics.0.contains("apiserver_validating_admission_policy_check_duration_seconds_bucket{enforcement_action=\"deny\""));

    for name in ["max-toppings-binding", "short-names-binding"] {
        bindings
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    for name in ["max-toppings", "short-names"] {
        policies
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// Applies a manifest (JSON) with kubectl as the cluster admin.
fn apply(admin: &Path, manifest: Value) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), manifest.to_string()).unwrap();
    kubectl_ok(admin, &["apply", "-f", file.path().to_str().unwrap()]);
}

/// MutatingAdmissionPolicies (admissionregistration.k8s.io/v1, GA in 1.36) with bindings in the real
/// kube-apiserver mutate pizzas: a JSON patch adds a label, an apply configuration merges an annotation into
/// those already there; a policy whose expression fails refuses under `failurePolicy: Fail`, with upstream's text.
pub async fn mutating_policies(cluster: &Cluster, admin: &Path, direct: &Direct) {
    // A mutating webhook with `reinvocationPolicy: IfNeeded`, called after the policies: the chain's second pass
    // (the IfNeeded policy changed the object again) calls it once more.
    let seen = Seen::default();
    let router = axum::Router::new()
        .route("/record", post(record))
        .with_state(seen.clone());
    let server = HttpsServer::start(router, &["localhost", "127.0.0.1"])
        .await
        .unwrap();
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&server.ca_pem);
    apply(
        admin,
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "pizza-record"},
            "webhooks": [{
                "name": "record.pizza.example.com",
                "clientConfig": {"url": format!("https://127.0.0.1:{}/record", server.port), "caBundle": ca_bundle},
                "rules": [webhook_rule(&["v1beta1"])],
                "namespaceSelector": {"matchLabels": {"mutations": "on"}},
                "reinvocationPolicy": "IfNeeded",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }],
        }),
    );
    kubectl_ok(admin, &["create", "namespace", "mutations-on"]);
    kubectl_ok(
        admin,
        &["label", "namespace", "mutations-on", "mutations=on"],
    );
    let rules = json!({"resourceRules": [webhook_rule(&["v1beta1"])]});
    let policy = |name: &str, spec: Value| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
               "metadata": {"name": name}, "spec": spec})
    };
    let binding = |name: &str, policy: &str, resources: Value| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": policy, "matchResources": resources}})
    };
    let on = json!({"namespaceSelector": {"matchLabels": {"mutations": "on"}}});
    apply(
        admin,
        policy(
            "baked-by",
            json!({
                "matchConstraints": rules,
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "mutations": [{
                    "patchType": "JSONPatch",
                    "jsonPatch": {"expression": "has(object.metadata.labels) ? [JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('example.com/baked-by'), value: 'policy'}] : [JSONPatch{op: 'add', path: '/metadata/labels', value: {'example.com/baked-by': 'policy'}}]"},
                }],
            }),
        ),
    );
    apply(admin, binding("baked-by-binding", "baked-by", on.clone()));
    // Bound first (bindings run in name order), before the label exists: it runs again, with
    // `reinvocationPolicy: IfNeeded`, once the later policy added the label.
    apply(
        admin,
        policy(
            "label-count",
            json!({
                "matchConstraints": rules,
                "reinvocationPolicy": "IfNeeded",
                "mutations": [{
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": "Object{metadata: Object.metadata{annotations: {'example.com/labels': string(has(object.metadata.labels) ? size(object.metadata.labels) : 0)}}}"},
                }],
            }),
        ),
    );
    apply(
        admin,
        binding("a-label-count-binding", "label-count", on.clone()),
    );
    apply(
        admin,
        policy(
            "extra-cheese",
            json!({
                "matchConstraints": rules,
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "variables": [{"name": "count", "expression": "size(object.spec.toppings)"}],
                "mutations": [{
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": "Object{metadata: Object.metadata{annotations: {'example.com/cheese': 'extra', 'example.com/toppings': string(variables.count)}}}"},
                }],
            }),
        ),
    );
    apply(
        admin,
        binding("extra-cheese-binding", "extra-cheese", on.clone()),
    );
    apply(
        admin,
        policy(
            "broken",
            json!({
                "matchConstraints": rules,
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "mutations": [{
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": "Object{spec: Object.spec{toppings: object.spec.nosuch}}"},
                }],
            }),
        ),
    );
    apply(
        admin,
        binding(
            "broken-binding",
            "broken",
            json!({"objectSelector": {"matchLabels": {"break": "yes"}}}),
        ),
    );

    // Until the server's informers have the policies: the created pizza carries both mutations.
    let mut mutated = Value::Null;
    for attempt in 0..100 {
        let name = format!("mutated-{attempt}");
        let mut p = pizza_with(&name, 2);
        p["metadata"]["annotations"] = json!({"kept": "yes"});
        let (ok, text) = create(admin, "mutations-on", &p);
        assert!(ok, "{text}");
        let out = kubectl(
            admin,
            &["get", "pizza", &name, "-n", "mutations-on", "-o", "json"],
        );
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        if got["metadata"]["labels"]["example.com/baked-by"] == "policy"
            && got["metadata"]["annotations"]["example.com/cheese"] == "extra"
            && got["metadata"]["annotations"]["example.com/labels"].is_string()
            && seen.count("record", &name) > 0
        {
            mutated = got;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        mutated["metadata"]["annotations"],
        json!({"kept": "yes", "example.com/cheese": "extra", "example.com/toppings": "2", "example.com/labels": "1"}),
        "the apply configuration merges into the annotations there were, and the IfNeeded policy ran again after the label was added: {mutated}"
    );
    assert_eq!(
        mutated["spec"]["toppings"].as_array().map(Vec::len),
        Some(2)
    );
    let name = mutated["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        seen.count("record", name),
        2,
        "the IfNeeded webhook runs again after the second pass's policy changed the object"
    );
    let last = seen.last("record", name).unwrap();
    // Called with the credentials of --admission-control-config-file's kubeConfigFile.
    assert_eq!(last["authorization"], "Bearer webhook-secret");
    assert_eq!(
        last["object"]["metadata"]["annotations"]["example.com/labels"],
        "1"
    );
    // Outside the bound namespaces nothing changes.
    let (ok, text) = create(admin, "webhooks-off", &pizza_with("unmutated", 1));
    assert!(ok, "{text}");
    let out = kubectl(
        admin,
        &[
            "get",
            "pizza",
            "unmutated",
            "-n",
            "webhooks-off",
            "-o",
            "json",
        ],
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        got["metadata"]["annotations"]["example.com/cheese"].is_null(),
        "{got}"
    );
    // A mutation that fails refuses the request.
    let mut p = pizza_with("broken", 1);
    p["metadata"]["labels"] = json!({"break": "yes"});
    let (ok, text) = create(admin, "webhooks-off", &p);
    assert!(!ok, "{text}");
    assert!(
        text.contains("policy 'broken' with binding 'broken-binding' denied request: expression 'Object{spec: Object.spec{toppings: object.spec.nosuch}}' resulted in error: no such key: nosuch"),
        "{text}"
    );

    let metrics = Metrics::scrape(cluster, direct).await;
    assert!(
        metrics.sample(r#"apiserver_mutating_admission_policy_check_total{error_type="no_error",policy="baked-by",policy_binding="baked-by-binding"}"#) >= 1.0,
        "{}",
        metrics.0
    );
    assert!(
        metrics.sample(r#"apiserver_mutating_admission_policy_check_total{error_type="invalid_error",policy="broken",policy_binding="broken-binding"}"#) >= 1.0
    );

    for (kind, name) in [
        ("mutatingadmissionpolicybindings", "baked-by-binding"),
        ("mutatingadmissionpolicybindings", "extra-cheese-binding"),
        ("mutatingadmissionpolicybindings", "broken-binding"),
        ("mutatingadmissionpolicybindings", "a-label-count-binding"),
        ("mutatingadmissionpolicies", "label-count"),
        ("mutatingadmissionpolicies", "baked-by"),
        ("mutatingadmissionpolicies", "extra-cheese"),
        ("mutatingadmissionpolicies", "broken"),
        ("mutatingwebhookconfigurations", "pizza-record"),
    ] {
        kubectl_ok(admin, &["delete", kind, name]);
    }
}
