//! The CEL `authorizer` of ValidatingAdmissionPolicies, answered by the cluster's RBAC through the pizza server's
//! SubjectAccessReviews.

use std::path::Path;
use std::time::Duration;

use apiserver::envtest::Cluster;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use super::super::{GROUP, kubectl, kubectl_ok, pizza};
use super::{create, webhook_rule};

const NAMESPACE: &str = "authz-policies";
const NEEDS_DELETE: &str = "only those who may delete pizzas here may make them";
const NEEDS_PATCH: &str = "only those who may patch this very pizza may make it";
const OVEN_CLOSED: &str = "the oven service account may not read configmaps";

/// Creates `name` as `user` until the outcome is `want` (the policy's informer, and the server's cache of
/// SubjectAccessReviews, 30 s for denials, take a moment to see changes); kubectl's output.
async fn create_until(user: &Path, name: &str, want: bool) -> String {
    let mut last = String::new();
    for attempt in 0..150 {
        let (ok, text) = create(user, NAMESPACE, &pizza(&format!("{name}-{attempt}")));
        if ok == want {
            return text;
        }
        last = text;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("creating {name} never gave {want}: {last}");
}

/// A policy whose validations ask the authorizer three ways: `authorizer.group(...)...check('delete')` for the
/// request's user, `authorizer.requestResource.check('patch')` (the request's own pizza, by name), and
/// `authorizer.serviceAccount(...)` (a service account's permission, not the user's). Carol may delete pizzas in the
/// namespace and patch the one named `carols-pizza-0`; Dave may only create them.
pub async fn authorizer_policies(cluster: &Cluster, admin: &Path) {
    let client = cluster.admin_client();
    kubectl_ok(admin, &["create", "namespace", NAMESPACE]);
    kubectl_ok(admin, &["label", "namespace", NAMESPACE, "authz=on"]);
    let resource = format!("--resource=pizzas.{GROUP}");
    for (role, verbs) in [
        ("pizza-maker", "--verb=create,get,list"),
        ("pizza-remover", "--verb=delete"),
    ] {
        kubectl_ok(
            admin,
            &["create", "role", role, "-n", NAMESPACE, verbs, &resource],
        );
    }
    kubectl_ok(
        admin,
        &[
            "create",
            "role",
            "carols-pizza-patcher",
            "-n",
            NAMESPACE,
            "--verb=patch",
            &resource,
            "--resource-name=carols-pizza-0",
        ],
    );
    for (binding, role, user) in [
        ("carol-makes", "pizza-maker", "carol"),
        ("carol-removes", "pizza-remover", "carol"),
        ("carol-patches", "carols-pizza-patcher", "carol"),
        ("dave-makes", "pizza-maker", "dave"),
    ] {
        kubectl_ok(
            admin,
            &[
                "create",
                "rolebinding",
                binding,
                "-n",
                NAMESPACE,
                &format!("--role={role}"),
                &format!("--user={user}"),
            ],
        );
    }
    let kubeconfig = |user: &str| {
        let (cert, key) = cluster.sign_client_cert(user, &[]).unwrap();
        cluster.kubeconfig_for_cert(&cert, &key).unwrap()
    };
    let (carol, dave) = (kubeconfig("carol"), kubeconfig("dave"));

    let policies = Api::<ValidatingAdmissionPolicy>::all(client.clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone());
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": "authorized-makers"},
        "spec": {
            "matchConstraints": {"resourceRules": [webhook_rule(&["v1beta1"])]},
            "variables": [{
                "name": "removal",
                "expression": format!("authorizer.group('{GROUP}').resource('pizzas').namespace(object.metadata.namespace).check('delete')"),
            }],
            "validations": [
                {
                    "expression": format!("authorizer.group('{GROUP}').resource('pizzas').namespace(object.metadata.namespace).check('delete').allowed()"),
                    "message": NEEDS_DELETE,
                },
                {
                    // a decision kept in a variable answers like one made in place
                    "expression": "variables.removal.allowed() && !variables.removal.errored() && variables.removal.error() == ''",
                    "message": NEEDS_DELETE,
                },
                {"expression": "authorizer.requestResource.check('patch').allowed()", "message": NEEDS_PATCH},
                {
                    "expression": format!("authorizer.serviceAccount('{NAMESPACE}', 'oven').group('').resource('configmaps').namespace('{NAMESPACE}').check('get').allowed()"),
                    "message": OVEN_CLOSED,
                },
            ],
            "failurePolicy": "Fail",
        },
    }))
    .unwrap();
    policies
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": "authorized-makers-binding"},
        "spec": {
            "policyName": "authorized-makers",
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"authz": "on"}}},
        },
    }))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let denied = |text: &str, why: &str| {
        assert!(
            text.contains(&format!(
                "ValidatingAdmissionPolicy 'authorized-makers' with binding 'authorized-makers-binding' denied request: {why}"
            )),
            "{text}"
        );
    };
    // Dave may create pizzas but not delete them: the first check says no, in his name.
    let text = create_until(&dave, "daves-pizza", false).await;
    denied(&text, NEEDS_DELETE);
    // Carol passes the user's checks; the service account may not read configmaps yet.
    let (ok, text) = create(&carol, NAMESPACE, &pizza("carols-pizza-0"));
    assert!(!ok, "{text}");
    denied(&text, OVEN_CLOSED);

    // Letting the service account (not Carol) read configmaps lets Carol's pizza in.
    kubectl_ok(
        admin,
        &[
            "create",
            "role",
            "configmap-reader",
            "-n",
            NAMESPACE,
            "--verb=get",
            "--resource=configmaps",
        ],
    );
    kubectl_ok(
        admin,
        &[
            "create",
            "rolebinding",
            "oven-reads",
            "-n",
            NAMESPACE,
            "--role=configmap-reader",
            &format!("--serviceaccount={NAMESPACE}:oven"),
        ],
    );
    let mut admitted = (false, String::new());
    for _ in 0..300 {
        admitted = create(&carol, NAMESPACE, &pizza("carols-pizza-0"));
        if admitted.0 {
            break;
        }
        denied(&admitted.1, OVEN_CLOSED);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(admitted.0, "{}", admitted.1);
    let can_i = kubectl(
        admin,
        &[
            "auth",
            "can-i",
            "get",
            "configmaps",
            "-n",
            NAMESPACE,
            "--as=carol",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&can_i.stdout).trim(),
        "no",
        "the service account's permission, not Carol's, let her in"
    );
    // The request's own resource is the pizza by name: Carol may patch only `carols-pizza-0`.
    let (ok, text) = create(&carol, NAMESPACE, &pizza("another-pizza"));
    assert!(!ok, "{text}");
    denied(&text, NEEDS_PATCH);
    // Dave still may not delete.
    let (ok, text) = create(&dave, NAMESPACE, &pizza("daves-pizza"));
    assert!(!ok, "{text}");
    denied(&text, NEEDS_DELETE);

    bindings
        .delete("authorized-makers-binding", &DeleteParams::default())
        .await
        .unwrap();
    policies
        .delete("authorized-makers", &DeleteParams::default())
        .await
        .unwrap();
    // Without the policy Dave's pizzas are made again.
    let text = create_until(&dave, "daves-pizza-free", true).await;
    assert!(text.contains("created"), "{text}");
}
