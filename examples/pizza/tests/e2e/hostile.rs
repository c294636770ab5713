//! Hostile requests from the robustness probe of the release binary: each gets a Kubernetes `Status` with
//! upstream's code and text, and changes nothing.

use crate::support;

use serde_json::{Value, json};
use support::TestServer;

const GROUP: &str = "/apis/restaurant.programming-kubernetes.info";
const JSON: (&str, &str) = ("content-type", "application/json");
const JSON_PATCH: (&str, &str) = ("content-type", "application/json-patch+json");
const MERGE_PATCH: (&str, &str) = ("content-type", "application/merge-patch+json");

fn toppings() -> String {
    format!("{GROUP}/v1alpha1/toppings")
}

fn pizzas(namespace: &str) -> String {
    format!("{GROUP}/v1beta1/namespaces/{namespace}/pizzas")
}

fn topping(metadata: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1alpha1",
        "kind": "Topping",
        "metadata": metadata,
        "spec": {"cost": 1.0}
    }))
    .unwrap()
}

fn parse(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

/// Asserts a failure `Status` with this code and reason; returns its message.
fn failure(code: u16, body: &[u8], want_code: u16, reason: &str) -> String {
    let status = parse(body);
    assert_eq!(code, want_code, "{status}");
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["code"], want_code, "{status}");
    assert_eq!(status["reason"], reason, "{status}");
    status["message"].as_str().unwrap_or_default().to_string()
}

async fn server() -> TestServer {
    TestServer::start(&["--storage-backend", "memory"]).await
}

async fn get(server: &TestServer, path: &str) -> (u16, Vec<u8>) {
    let (code, _, body) = server.raw("GET", path, &[], vec![]).await;
    (code, body)
}

async fn send(
    server: &TestServer,
    method: &str,
    path: &str,
    header: (&str, &str),
    body: Vec<u8>,
) -> (u16, Vec<u8>) {
    let (code, _, body) = server.raw(method, path, &[header], body).await;
    (code, body)
}

fn names(list: &[u8]) -> Vec<String> {
    parse(list)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Findings B1 and B2, and the operation limit that held.
#[tokio::test(flavor = "multi_thread")]
async fn hostile_json_patches_change_nothing() {
    let server = server().await;
    let metadata =
        json!({"name": "salami", "labels": {"a": "b"}, "annotations": {"x": "y".repeat(1000)}});
    let (code, body) = send(&server, "POST", &toppings(), JSON, topping(metadata)).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let path = format!("{}/salami", toppings());
    let (_, before) = get(&server, &path).await;
    let rejected = "the server rejected our request due to an error in our request";

    // B1: each copy doubles the annotations; 30 of them took the server's memory.
    let copies: Vec<Value> = (0..30)
        .map(|i| json!({"op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/k{i}")}))
        .collect();
    let (code, body) = send(
        &server,
        "PATCH",
        &path,
        JSON_PATCH,
        serde_json::to_vec(&copies).unwrap(),
    )
    .await;
    assert_eq!(failure(code, &body, 422, "Invalid"), rejected);

    // B2: a move of a child onto its parent, then a failing op, made the patch library panic.
    let ops = json!([
        {"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels"},
        {"op": "test", "path": "/metadata/name", "value": "no"}
    ]);
    let (code, body) = send(
        &server,
        "PATCH",
        &path,
        JSON_PATCH,
        serde_json::to_vec(&ops).unwrap(),
    )
    .await;
    assert_eq!(failure(code, &body, 422, "Invalid"), rejected);

    let many: Vec<Value> = (0..10_001)
        .map(|_| json!({"op": "test", "path": "/metadata/name", "value": "salami"}))
        .collect();
    let (code, body) = send(
        &server,
        "PATCH",
        &path,
        JSON_PATCH,
        serde_json::to_vec(&many).unwrap(),
    )
    .await;
    assert_eq!(
        failure(code, &body, 413, "RequestEntityTooLarge"),
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );

    let (_, after) = get(&server, &path).await;
    assert_eq!(parse(&after), parse(&before));

    // A valid patch still applies.
    let ops = json!([{"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/c"}]);
    let (code, body) = send(
        &server,
        "PATCH",
        &path,
        JSON_PATCH,
        serde_json::to_vec(&ops).unwrap(),
    )
    .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        parse(&body)["metadata"]["labels"],
        json!({"a": "b", "c": "b"})
    );
}

/// Finding C1: 100,000 duplicate toppings cost seconds of CPU each and a 19 MB answer.
#[tokio::test(flavor = "multi_thread")]
async fn many_invalid_fields_get_a_bounded_answer() {
    let server = server().await;
    let toppings: Vec<Value> = (0..100_000).map(|_| json!({"name": "a"})).collect();
    let pizza = serde_json::to_vec(&json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
        "kind": "Pizza",
        "metadata": {"name": "big"},
        "spec": {"toppings": toppings}
    }))
    .unwrap();
    let path = pizzas("default");
    let requests = (0..4).map(|_| send(&server, "POST", &path, JSON, pizza.clone()));
    for (code, body) in futures::future::join_all(requests).await {
        assert!(body.len() < 64 * 1024, "{} bytes", body.len());
        let message = failure(code, &body, 422, "Invalid");
        assert!(
            message.starts_with("Pizza.restaurant.programming-kubernetes.info \"big\" is invalid: [spec.toppings[1].name: Invalid value: \"a\": must be unique, "),
            "{message}"
        );
        // 99,999 duplicates and the CEL rule's "at most 10 distinct toppings", 100 of them listed.
        assert!(message.ends_with(" (and 99900 more errors)"), "{message}");
        assert_eq!(
            parse(&body)["details"]["causes"].as_array().unwrap().len(),
            100
        );
    }
    let (code, list) = get(&server, &path).await;
    assert_eq!(code, 200);
    assert!(names(&list).is_empty());
}

/// Finding C6: a 2.9 MB generateName was stored (and kept 10,000 times by the watch cache); objects are now
/// limited to what etcd stores.
#[tokio::test(flavor = "multi_thread")]
async fn oversized_names_and_objects_are_refused() {
    let server = server().await;
    let (code, _) = send(
        &server,
        "POST",
        &toppings(),
        JSON,
        topping(json!({"name": "salami"})),
    )
    .await;
    assert_eq!(code, 201);
    let path = format!("{}/salami", toppings());
    let (_, before) = get(&server, &path).await;

    let patch =
        serde_json::to_vec(&json!({"metadata": {"generateName": "a".repeat(2_900_000)}})).unwrap();
    let (code, body) = send(&server, "PATCH", &path, MERGE_PATCH, patch).await;
    let message = failure(code, &body, 422, "Invalid");
    assert!(
        message.contains("metadata.generateName: Invalid value: \"aaaa"),
        "{}",
        &message[..200]
    );
    assert!(
        message.contains(": must be no more than 253 characters"),
        "{}",
        &message[..200]
    );
    let (_, after) = get(&server, &path).await;
    assert_eq!(parse(&after), parse(&before));

    // Valid, but larger than etcd's 1.5 MiB request limit once stored.
    let labels: serde_json::Map<String, Value> = (0..30_000)
        .map(|i| (format!("k{i:05}"), Value::String("v".repeat(50))))
        .collect();
    let (code, body) = send(
        &server,
        "POST",
        &toppings(),
        JSON,
        topping(json!({"name": "huge", "labels": labels})),
    )
    .await;
    let message = failure(code, &body, 413, "RequestEntityTooLarge");
    assert!(
        message.starts_with("Request entity too large: the object is "),
        "{message}"
    );
    assert!(
        message.ends_with(" bytes in storage, limit is 1572864"),
        "{message}"
    );
    let (code, _) = get(&server, &format!("{}/huge", toppings())).await;
    assert_eq!(code, 404);
}

/// Findings D1 (namespaces), D2 (finalizers, owner references, managed fields), D3 (fieldManager), D4 (NUL in
/// a name), D5 (lone surrogates).
#[tokio::test(flavor = "multi_thread")]
async fn object_meta_and_options_are_validated_as_upstream() {
    let server = server().await;
    let pizza = serde_json::to_vec(&json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
        "kind": "Pizza",
        "metadata": {"name": "margherita"},
        "spec": {"toppings": [{"name": "salami", "quantity": 1}]}
    }))
    .unwrap();
    let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    let long = "n".repeat(64);
    for (namespace, why) in [
        ("UPPER", label.to_string()),
        ("a_b", label.to_string()),
        (
            long.as_str(),
            "must be no more than 63 characters".to_string(),
        ),
    ] {
        let (code, body) = send(&server, "POST", &pizzas(namespace), JSON, pizza.clone()).await;
        assert_eq!(
            failure(code, &body, 422, "Invalid"),
            format!(
                "Pizza.restaurant.programming-kubernetes.info \"margherita\" is invalid: metadata.namespace: Invalid value: \"{namespace}\": {why}"
            )
        );
    }

    let kind = "Topping.restaurant.programming-kubernetes.info";
    let (code, body) = send(
        &server,
        "POST",
        &toppings(),
        JSON,
        topping(json!({"name": "t", "finalizers": ["Bad Name!"]})),
    )
    .await;
    let message = failure(code, &body, 422, "Invalid");
    assert!(
        message.starts_with(&format!("{kind} \"t\" is invalid: metadata.finalizers: Invalid value: \"Bad Name!\": name part must consist of")),
        "{message}"
    );
    let (code, body) = send(
        &server,
        "POST",
        &toppings(),
        JSON,
        topping(json!({"name": "t", "ownerReferences": [{}]})),
    )
    .await;
    assert_eq!(
        failure(code, &body, 422, "Invalid"),
        format!(
            "{kind} \"t\" is invalid: [metadata.ownerReferences[0].apiVersion: Required value: must not be empty, metadata.ownerReferences[0].kind: Required value: must not be empty, metadata.ownerReferences[0].name: Required value: must not be empty, metadata.ownerReferences[0].uid: Required value: must not be empty]"
        )
    );
    // Managed fields that do not decode are replaced by the server's own, as upstream's field manager does
    // (it falls back to the live object's, here none): the write succeeds and what is stored is valid.
    let junk = json!({"name": "junk", "managedFields": [{"manager": "m", "operation": "Junk", "fieldsType": "X"}]});
    let (code, body) = send(&server, "POST", &toppings(), JSON, topping(junk)).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let managed = parse(&body)["metadata"]["managedFields"].clone();
    assert_eq!(managed.as_array().map(Vec::len), Some(1), "{managed}");
    assert_eq!(managed[0]["operation"], "Update", "{managed}");
    assert_eq!(managed[0]["fieldsType"], "FieldsV1", "{managed}");
    assert_eq!(
        managed[0]["fieldsV1"],
        json!({"f:spec": {".": {}, "f:cost": {}}}),
        "{managed}"
    );
    let (code, _) = send(
        &server,
        "DELETE",
        &format!("{}/junk", toppings()),
        JSON,
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200);

    let path = format!("{}?fieldManager={}", toppings(), "f".repeat(200));
    let (code, body) = send(&server, "POST", &path, JSON, topping(json!({"name": "t"}))).await;
    assert_eq!(
        failure(code, &body, 422, "Invalid"),
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
    );
    let path = format!("{}?fieldManager=a%07b", toppings());
    let (code, body) = send(&server, "POST", &path, JSON, topping(json!({"name": "t"}))).await;
    assert_eq!(
        failure(code, &body, 422, "Invalid"),
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Invalid value: \"a\\ab\": invalid character U+0007 (at position 1)"
    );

    let (code, body) = send(
        &server,
        "POST",
        &toppings(),
        JSON,
        topping(json!({"name": "a\u{0}"})),
    )
    .await;
    let message = failure(code, &body, 422, "Invalid");
    assert!(
        message.starts_with(&format!("{kind} \"a\\x00\" is invalid: metadata.name: Invalid value: \"a\\x00\": a lowercase RFC 1123 subdomain")),
        "{message}"
    );
    assert!(!String::from_utf8_lossy(&body).contains("/registry"));
    let (code, body) = get(&server, &format!("{}/a%00", toppings())).await;
    assert_eq!(
        failure(code, &body, 404, "NotFound"),
        "toppings.restaurant.programming-kubernetes.info \"a\\x00\" not found"
    );

    // Nothing above was stored.
    let (_, list) = get(&server, &toppings()).await;
    assert!(names(&list).is_empty());
    let (_, list) = get(&server, &format!("{GROUP}/v1beta1/pizzas")).await;
    assert!(names(&list).is_empty());

    // D5: Go's decoder reads a lone surrogate as U+FFFD.
    let body = br#"{"apiVersion":"restaurant.programming-kubernetes.info/v1alpha1","kind":"Topping","metadata":{"name":"s","annotations":{"note":"a\ud800b"}},"spec":{"cost":1}}"#;
    let (code, body) = send(&server, "POST", &toppings(), JSON, body.to_vec()).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        parse(&body)["metadata"]["annotations"]["note"],
        "a\u{FFFD}b"
    );

    // Issue 36: a DELETE whose body is not `DeleteOptions` (a Pizza) was taken as options and deleted; it is 400
    // with kube-apiserver 1.36's text, and nothing is deleted. `DeleteOptions` of any group version still is.
    for (body, version) in [
        (
            json!({"apiVersion": "restaurant.programming-kubernetes.info/v1alpha1", "kind": "Topping"}),
            "restaurant.programming-kubernetes.info/v1alpha1",
        ),
        (json!({"kind": "Pizza"}), "meta.k8s.io/v1"),
    ] {
        let (code, answer) = send(
            &server,
            "DELETE",
            &format!("{}/s", toppings()),
            JSON,
            serde_json::to_vec(&body).unwrap(),
        )
        .await;
        let kind = body["kind"].as_str().unwrap();
        assert_eq!(
            failure(code, &answer, 400, "BadRequest"),
            format!(
                "no kind \"{kind}\" is registered for version \"{version}\" in scheme \"pkg/apis/meta/internalversion/scheme/register.go:27\""
            )
        );
    }
    let (code, _) = get(&server, &format!("{}/s", toppings())).await;
    assert_eq!(code, 200, "the topping was deleted");
    let (code, answer) = send(
        &server,
        "DELETE",
        &format!("{}/s", toppings()),
        JSON,
        br#"{"apiVersion":"apps/v1","kind":"DeleteOptions","gracePeriodSeconds":0}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
}

/// Finding D6: `timeoutSeconds=-1` kept a watch open forever; upstream's ends at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_negative_watch_timeout_ends_the_watch() {
    let server = server().await;
    let (code, _, stream) = server
        .stream(
            &format!("{}?watch=1&timeoutSeconds=-1", toppings()),
            "application/json",
        )
        .await;
    assert_eq!(code, 200);
    stream
        .end(std::time::Duration::from_secs(20))
        .await
        .unwrap();
}

/// Finding D8 (selectors), and hostile documents that held: deep nesting and YAML alias bombs are fast 400s.
#[tokio::test(flavor = "multi_thread")]
async fn malformed_selectors_and_documents_are_bad_requests() {
    let server = server().await;
    let (code, body) = get(&server, &format!("{}?labelSelector=x%3Da%00b", toppings())).await;
    let message = failure(code, &body, 400, "BadRequest");
    assert!(
        message.contains("found 'b', expected: ',' or 'end of string'"),
        "{message}"
    );

    let deep = "[".repeat(100_000).into_bytes();
    let (code, body) = send(&server, "POST", &toppings(), JSON, deep).await;
    failure(code, &body, 400, "BadRequest");

    let mut bomb = String::from(
        "apiVersion: restaurant.programming-kubernetes.info/v1alpha1\nkind: Topping\nmetadata:\n  name: lol\n",
    );
    bomb.push_str(
        "a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for i in 1..10 {
        let p = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
        ));
    }
    let (code, body) = send(
        &server,
        "POST",
        &toppings(),
        ("content-type", "application/yaml"),
        bomb.into_bytes(),
    )
    .await;
    failure(code, &body, 400, "BadRequest");

    let (_, list) = get(&server, &toppings()).await;
    assert!(names(&list).is_empty());
}
