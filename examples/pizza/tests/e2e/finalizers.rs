//! Finalizers and deletion over real HTTPS and with the installed kubectl: a pizza with finalizers is marked as
//! being deleted and stays until an update removes them (MODIFIED, then DELETED on a watch), no finalizer can be
//! added meanwhile, propagation policies add the garbage collector's finalizers, preconditions conflict with
//! upstream's texts, and a dry run changes nothing.

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::{MARGHERITA, NO_COST_CONTROLLER, TOPPINGS, TestServer, call, parse};

const GROUP: &str = "/apis/restaurant.programming-kubernetes.info";
const PIZZAS: &str =
    "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/default/pizzas";
const JSON: (&str, &str) = ("content-type", "application/json");
const MERGE: (&str, &str) = ("content-type", "application/merge-patch+json");
const OVEN: &str = "restaurant.programming-kubernetes.info/oven";

/// Creates a v1beta1 pizza with these finalizers and returns it.
async fn pizza(server: &TestServer, name: &str, finalizers: &[&str]) -> Value {
    let (code, created) = call(
        server,
        "POST",
        PIZZAS,
        Some(JSON),
        json!({
            "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
            "kind": "Pizza",
            "metadata": {"name": name, "finalizers": finalizers},
            "spec": {"toppings": [{"name": "mozzarella", "quantity": 1}]}
        }),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    created
}

async fn get(server: &TestServer, name: &str) -> (u16, Value) {
    call(
        server,
        "GET",
        &format!("{PIZZAS}/{name}"),
        None,
        Value::Null,
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_delete_waits_for_finalizers() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    server.kubectl_stdin_ok(&["create", "-f", "-"], MARGHERITA);
    let out = server.kubectl_ok(&[
        "patch",
        "pizza",
        "margherita",
        "--type=merge",
        "-p",
        &json!({"metadata": {"finalizers": [OVEN]}}).to_string(),
    ]);
    assert!(out.contains("patched"), "{out}");
    let (_, before) = get(&server, "margherita").await;
    let rv = before["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(before["metadata"]["generation"], 1);

    let (code, _, mut watch) = server
        .stream(
            &format!(
                "{PIZZAS}?watch=true&fieldSelector=metadata.name%3Dmargherita&resourceVersion={rv}"
            ),
            "application/json",
        )
        .await;
    assert_eq!(code, 200);

    let out = server.kubectl_ok(&["delete", "pizza", "margherita", "--wait=false"]);
    assert!(
        out.contains("pizza.restaurant.programming-kubernetes.info \"margherita\" deleted")
            || out.contains("pizza.restaurant.programming-kubernetes.info/margherita deleted"),
        "{out}"
    );
    let (code, pending) = get(&server, "margherita").await;
    assert_eq!(code, 200, "the pizza stays while it has finalizers");
    assert!(
        pending["metadata"]["deletionTimestamp"].is_string(),
        "{pending}"
    );
    assert_eq!(pending["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(pending["metadata"]["generation"], 2);
    assert_eq!(pending["metadata"]["finalizers"], json!([OVEN]));

    // kubectl wait --for=delete blocks until the finalizer is gone.
    let wait = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(["wait", "--for=delete", "pizza/margherita", "--timeout=30s"])
        .env("HOME", server.dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");

    // No finalizer may be added now (upstream's text), through kubectl or the API.
    let refused = server.kubectl(&[
        "patch",
        "pizza",
        "margherita",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/late"}]"#,
    ]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(
            r#"metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/late"}"#
        ),
        "{stderr}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    let out = server.kubectl_ok(&[
        "patch",
        "pizza",
        "margherita",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    assert!(out.contains("patched"), "{out}");
    let (code, _) = get(&server, "margherita").await;
    assert_eq!(code, 404);

    let waited = tokio::task::spawn_blocking(move || wait.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        waited.status.success(),
        "kubectl wait: {}",
        String::from_utf8_lossy(&waited.stderr)
    );

    watch
        .read_until(Duration::from_secs(10), "a DELETED event", |buf| {
            String::from_utf8_lossy(buf).contains("\"DELETED\"")
        })
        .await;
    let events: Vec<Value> = String::from_utf8_lossy(&watch.buf)
        .lines()
        .map(|l| parse(l.as_bytes()))
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["MODIFIED", "DELETED"], "{events:?}");
    assert!(events[0]["object"]["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        events[1]["object"]["metadata"]["uid"],
        before["metadata"]["uid"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_answers_as_upstream() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);

    // No finalizers: gone at once, a Status of success.
    pizza(&server, "plain", &[]).await;
    let (code, status) = call(
        &server,
        "DELETE",
        &format!("{PIZZAS}/plain"),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Success");
    assert_eq!(status["details"]["kind"], "pizzas");
    assert_eq!(get(&server, "plain").await.0, 404);

    // Pizzas have no graceful deletion: a grace period changes nothing, the delete is immediate.
    pizza(&server, "graceful", &[]).await;
    let (code, status) = call(
        &server,
        "DELETE",
        &format!("{PIZZAS}/graceful?gracePeriodSeconds=30"),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(
        (code, &status["status"]),
        (200, &json!("Success")),
        "{status}"
    );
    assert_eq!(get(&server, "graceful").await.0, 404);

    // Finalizers: the object itself, marked; a second delete answers it unchanged.
    let created = pizza(&server, "kept", &[OVEN]).await;
    let (code, first) = call(
        &server,
        "DELETE",
        &format!("{PIZZAS}/kept"),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{first}");
    assert_eq!(first["kind"], "Pizza");
    assert!(first["metadata"]["deletionTimestamp"].is_string());
    assert_ne!(
        first["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let (code, second) = call(
        &server,
        "DELETE",
        &format!("{PIZZAS}/kept"),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{second}");
    assert_eq!(second, first);
    // Status updates cannot remove finalizers; a main-resource update can, and that deletes.
    let (code, body) = call(
        &server,
        "PATCH",
        &format!("{PIZZAS}/kept/status"),
        Some(MERGE),
        json!({"metadata": {"finalizers": null}, "status": {"cost": 1}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"]["finalizers"], json!([OVEN]));
    let mut put = body.clone();
    put["metadata"]["finalizers"] = json!([]);
    let (code, body) = call(&server, "PUT", &format!("{PIZZAS}/kept"), Some(JSON), put).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "Pizza");
    assert_eq!(get(&server, "kept").await.0, 404);

    // 202 when the object stays and the request set orphanDependents=false.
    pizza(&server, "accepted", &[OVEN]).await;
    let (code, body) = call(
        &server,
        "DELETE",
        &format!("{PIZZAS}/accepted"),
        Some(JSON),
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "orphanDependents": false}),
    )
    .await;
    assert_eq!(code, 202, "{body}");
    assert_eq!(body["kind"], "Pizza");

    // Propagation policies: Orphan and Foreground add the garbage collector's finalizers, Background does not.
    for (name, policy, finalizer) in [
        ("orphan", "Orphan", Some("orphan")),
        ("foreground", "Foreground", Some("foregroundDeletion")),
        ("background", "Background", None),
    ] {
        pizza(&server, name, &[]).await;
        let (code, body) = call(
            &server,
            "DELETE",
            &format!("{PIZZAS}/{name}?propagationPolicy={policy}"),
            None,
            Value::Null,
        )
        .await;
        assert_eq!(code, 200, "{body}");
        match finalizer {
            Some(f) => {
                assert_eq!(body["metadata"]["finalizers"], json!([f]), "{body}");
                assert!(body["metadata"]["deletionTimestamp"].is_string());
                assert_eq!(get(&server, name).await.0, 200);
            }
            None => {
                assert_eq!(body["kind"], "Status", "{body}");
                assert_eq!(get(&server, name).await.0, 404);
            }
        }
    }
    let out = server.kubectl_ok(&[
        "delete",
        "pizza",
        "cascade",
        "--cascade=orphan",
        "--wait=false",
        "--ignore-not-found",
    ]);
    assert!(out.is_empty(), "{out}");
    pizza(&server, "cascade", &[]).await;
    server.kubectl_ok(&[
        "delete",
        "pizza",
        "cascade",
        "--cascade=orphan",
        "--wait=false",
    ]);
    let (_, cascade) = get(&server, "cascade").await;
    assert_eq!(
        cascade["metadata"]["finalizers"],
        json!(["orphan"]),
        "{cascade}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn preconditions_dry_run_and_collections() {
    // Exact resource versions and a dry-run answer equal to the stored object: no controller writes meanwhile.
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    let created = pizza(&server, "p", &[]).await;
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();

    let (code, body) = call(
        &server,
        "DELETE",
        &format!("{PIZZAS}/p"),
        Some(JSON),
        json!({"preconditions": {"uid": "not-the-uid"}}),
    )
    .await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["reason"], "Conflict");
    assert_eq!(
        body["message"],
        format!(
            "Operation cannot be fulfilled on Pizza.restaurant.programming-kubernetes.info \"p\": the UID in the precondition (not-the-uid) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    let (code, body) = call(
        &server,
        "DELETE",
        &format!("{PIZZAS}/p"),
        Some(JSON),
        json!({"preconditions": {"resourceVersion": "1"}}),
    )
    .await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "Operation cannot be fulfilled on Pizza.restaurant.programming-kubernetes.info \"p\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    );

    // Dry runs change nothing, with or without finalizers.
    let (code, body) = call(
        &server,
        "DELETE",
        &format!("{PIZZAS}/p?dryRun=All"),
        None,
        Value::Null,
    )
    .await;
    assert_eq!((code, &body["kind"]), (200, &json!("Status")), "{body}");
    let (code, still) = get(&server, "p").await;
    assert_eq!(code, 200);
    assert_eq!(still, created);
    let kept = pizza(&server, "kept", &[OVEN]).await;
    let (code, body) = call(
        &server,
        "DELETE",
        &format!("{PIZZAS}/kept?dryRun=All&propagationPolicy=Foreground"),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(body["metadata"]["deletionTimestamp"].is_string(), "{body}");
    assert_eq!(
        body["metadata"]["finalizers"],
        json!([OVEN, "foregroundDeletion"])
    );
    assert_eq!(get(&server, "kept").await.1, kept);

    // With the right preconditions the delete goes through.
    let (code, body) = call(
        &server,
        "DELETE",
        &format!("{PIZZAS}/p"),
        Some(JSON),
        json!({"preconditions": {"uid": uid, "resourceVersion": rv}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(get(&server, "p").await.0, 404);

    // A collection delete treats each object alike: the one with a finalizer stays, marked.
    pizza(&server, "gone", &[]).await;
    let (code, list) = call(&server, "DELETE", PIZZAS, None, Value::Null).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["items"].as_array().unwrap().len(), 2, "{list}");
    assert_eq!(get(&server, "gone").await.0, 404);
    let (code, kept) = get(&server, "kept").await;
    assert_eq!(code, 200);
    assert!(kept["metadata"]["deletionTimestamp"].is_string(), "{kept}");
    let (_, listed) = call(
        &server,
        "GET",
        &format!("{GROUP}/v1alpha1/namespaces/default/pizzas"),
        None,
        Value::Null,
    )
    .await;
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kept"]);
}
