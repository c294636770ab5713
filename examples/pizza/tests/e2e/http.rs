//! The REST endpoints over real HTTPS (kube-rs's client sending raw requests): media types, errors as `Status`,
//! admission, validation, concurrency and watch framing.

use crate::support;

use apiserver::codec::{decode_protobuf, decode_protobuf_watch_event};
use std::time::Duration;

use serde_json::{Value, json};
// The cost controller writes pizzas' status on its own: these tests compare resource versions and events.
use support::{NO_COST_CONTROLLER, TestServer};

const GROUP: &str = "/apis/restaurant.programming-kubernetes.info";
const JSON: (&str, &str) = ("content-type", "application/json");

fn toppings(version: &str) -> String {
    format!("{GROUP}/{version}/toppings")
}

fn pizzas(version: &str) -> String {
    format!("{GROUP}/{version}/namespaces/default/pizzas")
}

fn topping(name: &str, cost: f64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1alpha1",
        "kind": "Topping",
        "metadata": {"name": name},
        "spec": {"cost": cost}
    }))
    .unwrap()
}

fn pizza_v1beta1(name: &str, toppings: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
        "kind": "Pizza",
        "metadata": {"name": name},
        "spec": {"toppings": toppings}
    }))
    .unwrap()
}

fn parse(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

/// Asserts a `Status` failure with this code, reason and message.
fn assert_status(code: u16, body: &[u8], want_code: u16, reason: &str, message: &str) {
    let status = parse(body);
    assert_eq!(code, want_code, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["code"], want_code);
    assert_eq!(status["reason"], reason, "{status}");
    assert_eq!(status["message"], message, "{status}");
}

/// POSTs a JSON body.
async fn post(server: &TestServer, path: &str, body: Vec<u8>) -> (u16, http::HeaderMap, Vec<u8>) {
    server.raw("POST", path, &[JSON], body).await
}

/// GETs with the default Accept.
async fn get(server: &TestServer, path: &str) -> (u16, http::HeaderMap, Vec<u8>) {
    server.raw("GET", path, &[], vec![]).await
}

async fn names(server: &TestServer, path: &str) -> Vec<String> {
    let (code, _, body) = get(server, path).await;
    assert_eq!(code, 200);
    parse(&body)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn media_types_json_yaml_protobuf() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    let (code, headers, body) = post(&server, &toppings("v1alpha1"), topping("salami", 0.2)).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["content-type"], "application/json");
    let created = parse(&body);
    assert_eq!(created["metadata"]["generation"], 1);
    assert!(
        created["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36)
    );

    let path = format!("{}/salami", toppings("v1beta1"));
    let (code, headers, body) = server
        .raw("GET", &path, &[("accept", "application/yaml")], vec![])
        .await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "application/yaml");
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.contains("kind: Topping")
            && text.contains("apiVersion: restaurant.programming-kubernetes.info/v1beta1"),
        "{text}"
    );

    let accept = ("accept", "application/vnd.kubernetes.protobuf");
    let (code, headers, body) = server.raw("GET", &path, &[accept], vec![]).await;
    assert_eq!(code, 200);
    assert_eq!(
        headers["content-type"],
        "application/vnd.kubernetes.protobuf"
    );
    let (type_meta, _) = decode_protobuf(&body).unwrap();
    assert_eq!(type_meta.kind, "Topping");
    assert_eq!(
        type_meta.api_version,
        "restaurant.programming-kubernetes.info/v1beta1"
    );

    let (code, _, body) = server
        .raw("GET", &toppings("v1alpha1"), &[accept], vec![])
        .await;
    assert_eq!(code, 200);
    assert_eq!(decode_protobuf(&body).unwrap().0.kind, "ToppingList");

    // Protobuf in: the object as the server sent it creates a copy under another name.
    let (_, _, body) = server
        .raw(
            "GET",
            &format!("{}/salami", toppings("v1alpha1")),
            &[accept],
            vec![],
        )
        .await;
    let mut pb = body.clone();
    let position = pb.windows(6).position(|w| w == b"salami").unwrap();
    pb[position..position + 6].copy_from_slice(b"tomato");
    // The copy still carries uid and resourceVersion: creation wipes them.
    let (code, _, body) = server
        .raw(
            "POST",
            &toppings("v1alpha1"),
            &[
                ("content-type", "application/vnd.kubernetes.protobuf"),
                accept,
            ],
            pb,
        )
        .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        names(&server, &toppings("v1alpha1")).await,
        ["salami", "tomato"]
    );

    // YAML in.
    let yaml = b"apiVersion: restaurant.programming-kubernetes.info/v1alpha1\nkind: Topping\nmetadata:\n  name: ham\nspec:\n  cost: 2\n".to_vec();
    let (code, _, _) = server
        .raw(
            "POST",
            &toppings("v1alpha1"),
            &[("content-type", "application/yaml")],
            yaml,
        )
        .await;
    assert_eq!(code, 201);

    // Nothing acceptable: 406; unknown body type: 415; both as Status.
    let (code, _, body) = server
        .raw("GET", &path, &[("accept", "text/plain")], vec![])
        .await;
    assert_status(
        code,
        &body,
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor",
    );
    let (code, _, body) = server
        .raw(
            "POST",
            &toppings("v1alpha1"),
            &[("content-type", "text/plain")],
            topping("x", 1.0),
        )
        .await;
    assert_eq!(code, 415, "{}", String::from_utf8_lossy(&body));
    assert_eq!(parse(&body)["reason"], "UnsupportedMediaType");

    // A Table asks for the printer column and the defaults.
    let (code, _, body) = server
        .raw(
            "GET",
            &toppings("v1alpha1"),
            &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
            vec![],
        )
        .await;
    assert_eq!(code, 200);
    let table = parse(&body);
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Cost", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "ham");
    assert_eq!(table["rows"][0]["cells"][1], 2.0);
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    // Table is JSON or YAML only.
    let (code, _, _) = server
        .raw(
            "GET",
            &toppings("v1alpha1"),
            &[(
                "accept",
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
            )],
            vec![],
        )
        .await;
    assert_eq!(code, 406);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_changes_nothing() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    let list = toppings("v1alpha1");

    let (code, _, body) = post(&server, &list, b"{\"apiVersion\": ".to_vec()).await;
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    assert_eq!(parse(&body)["reason"], "BadRequest");

    let wrong_kind = br#"{"apiVersion":"restaurant.programming-kubernetes.info/v1alpha1","kind":"Pizza","metadata":{"name":"x"}}"#;
    let (code, _, body) = post(&server, &list, wrong_kind.to_vec()).await;
    assert_eq!(code, 400);
    let message = parse(&body)["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("Pizza in version \"v1alpha1\" cannot be handled as a Topping"),
        "{message}"
    );

    let wrong_version = br#"{"apiVersion":"restaurant.programming-kubernetes.info/v1beta1","kind":"Topping","metadata":{"name":"x"}}"#;
    let (code, _, body) = post(&server, &list, wrong_version.to_vec()).await;
    assert_status(
        code,
        &body,
        400,
        "BadRequest",
        "the API version in the data (restaurant.programming-kubernetes.info/v1beta1) does not match the expected API version (restaurant.programming-kubernetes.info/v1alpha1)",
    );

    let mut huge = topping("big", 1.0);
    huge.truncate(huge.len() - 1);
    huge.extend_from_slice(format!(",\"pad\":\"{}\"}}", "x".repeat(3 * 1024 * 1024)).as_bytes());
    let (code, _, body) = post(&server, &list, huge).await;
    assert_status(
        code,
        &body,
        413,
        "RequestEntityTooLarge",
        "Request entity too large: limit is 3145728",
    );

    let unknown = br#"{"apiVersion":"restaurant.programming-kubernetes.info/v1alpha1","kind":"Topping","metadata":{"name":"x"},"spec":{"cost":1,"crust":"thin"}}"#;
    let (code, _, body) = post(
        &server,
        &format!("{list}?fieldValidation=Strict"),
        unknown.to_vec(),
    )
    .await;
    assert_status(
        code,
        &body,
        400,
        "BadRequest",
        "strict decoding error: unknown field \"spec.crust\"",
    );

    let bad_name = br#"{"apiVersion":"restaurant.programming-kubernetes.info/v1alpha1","kind":"Topping","metadata":{"name":"../x"}}"#;
    let (code, _, body) = post(&server, &list, bad_name.to_vec()).await;
    assert_eq!(code, 422, "{}", String::from_utf8_lossy(&body));

    let (code, _, body) = server
        .raw(
            "GET",
            &format!("{list}?labelSelector=a%20in%20(b"),
            &[],
            vec![],
        )
        .await;
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    let (code, _, body) = get(&server, &format!("{list}?fieldSelector=spec.cost%3D1")).await;
    assert_status(
        code,
        &body,
        400,
        "BadRequest",
        "field label not supported: spec.cost",
    );
    let (code, _, _) = get(&server, &format!("{list}?continue=garbage")).await;
    assert_eq!(code, 400);

    assert!(names(&server, &list).await.is_empty());

    // Warn (the default) stores, with a Warning header.
    let (code, headers, _) = post(&server, &list, unknown.to_vec()).await;
    assert_eq!(code, 201);
    assert_eq!(
        headers["warning"],
        "299 - \"unknown field \\\"spec.crust\\\"\""
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn admission_validation_and_concurrency() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    post(&server, &toppings("v1alpha1"), topping("salami", 0.2)).await;

    let (code, _, body) = post(
        &server,
        &pizzas("v1beta1"),
        pizza_v1beta1("hawaii", json!([{"name": "pineapple", "quantity": 1}])),
    )
    .await;
    assert_status(
        code,
        &body,
        403,
        "Forbidden",
        "pizzas.restaurant.programming-kubernetes.info \"hawaii\" is forbidden: unknown topping: pineapple",
    );

    let (code, _, body) = post(
        &server,
        &pizzas("v1beta1"),
        pizza_v1beta1("bad", json!([{"name": "salami", "quantity": -1}])),
    )
    .await;
    assert_status(
        code,
        &body,
        422,
        "Invalid",
        "Pizza.restaurant.programming-kubernetes.info \"bad\" is invalid: spec.toppings[0].quantity: Invalid value: -1: cannot be negative or zero",
    );
    assert_eq!(
        parse(&body)["details"]["causes"][0]["field"],
        "spec.toppings[0].quantity"
    );

    // dryRun runs everything but the write.
    let (code, _, _) = post(
        &server,
        &format!("{}?dryRun=All", pizzas("v1beta1")),
        pizza_v1beta1("dry", json!([{"name": "salami", "quantity": 1}])),
    )
    .await;
    assert_eq!(code, 201);
    assert!(names(&server, &pizzas("v1beta1")).await.is_empty());

    let (code, _, body) = post(
        &server,
        &pizzas("v1beta1"),
        pizza_v1beta1("salami", json!([{"name": "salami", "quantity": 2}])),
    )
    .await;
    assert_eq!(code, 201);
    let created = parse(&body);
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    // The same object in v1alpha1: quantity 2 is the name twice.
    let path = format!("{}/salami", pizzas("v1alpha1"));
    let (_, _, body) = get(&server, &path).await;
    assert_eq!(
        parse(&body)["spec"]["toppings"],
        json!(["salami", "salami"])
    );

    // A label change keeps the generation; a spec change bumps it.
    let path = format!("{}/salami", pizzas("v1beta1"));
    let merge = ("content-type", "application/merge-patch+json");
    let (code, _, body) = server
        .raw(
            "PATCH",
            &path,
            &[merge],
            br#"{"metadata":{"labels":{"a":"b"}}}"#.to_vec(),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(parse(&body)["metadata"]["generation"], 1);
    let (code, _, body) = server
        .raw(
            "PATCH",
            &path,
            &[("content-type", "application/json-patch+json")],
            br#"[{"op":"replace","path":"/spec/toppings/0/quantity","value":3}]"#.to_vec(),
        )
        .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(parse(&body)["metadata"]["generation"], 2);

    // An update from the stale version conflicts.
    let mut stale = created.clone();
    stale["metadata"]["resourceVersion"] = Value::String(rv);
    let (code, _, body) = server
        .raw("PUT", &path, &[JSON], serde_json::to_vec(&stale).unwrap())
        .await;
    assert_status(
        code,
        &body,
        409,
        "Conflict",
        "Operation cannot be fulfilled on pizzas.restaurant.programming-kubernetes.info \"salami\": the object has been modified; please apply your changes to the latest version and try again",
    );

    // A patch naming an unknown topping is refused by admission too.
    let (code, _, _) = server
        .raw(
            "PATCH",
            &path,
            &[merge],
            br#"{"spec":{"toppings":[{"name":"ham","quantity":1}]}}"#.to_vec(),
        )
        .await;
    assert_eq!(code, 403);
    // Server-side apply needs a field manager.
    let (code, _, body) = server
        .raw(
            "PATCH",
            &path,
            &[("content-type", "application/apply-patch+yaml")],
            b"{}".to_vec(),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&body).unwrap()["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );

    // Delete by label selector returns what it deleted.
    let (code, _, body) = server
        .raw(
            "DELETE",
            &format!("{}?labelSelector=a%3Db", pizzas("v1beta1")),
            &[],
            vec![],
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(parse(&body)["items"][0]["metadata"]["name"], "salami");
    assert!(names(&server, &pizzas("v1beta1")).await.is_empty());
    let (code, _, body) = server.raw("DELETE", &path, &[], vec![]).await;
    assert_status(
        code,
        &body,
        404,
        "NotFound",
        "pizzas.restaurant.programming-kubernetes.info \"salami\" not found",
    );
}

const STRATEGIC: (&str, &str) = ("content-type", "application/strategic-merge-patch+json");

#[tokio::test(flavor = "multi_thread")]
async fn strategic_merge_patch() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    for name in ["salami", "tomato", "mozzarella"] {
        post(&server, &toppings("v1alpha1"), topping(name, 0.5)).await;
    }
    let (code, _, _) = post(
        &server,
        &pizzas("v1beta1"),
        pizza_v1beta1(
            "smp",
            json!([{"name": "salami", "quantity": 1}, {"name": "tomato", "quantity": 1}]),
        ),
    )
    .await;
    assert_eq!(code, 201);
    let path = format!("{}/smp", pizzas("v1beta1"));
    let patch = |body: &'static str| {
        let server = &server;
        let path = &path;
        async move {
            server
                .raw("PATCH", path, &[STRATEGIC], body.as_bytes().to_vec())
                .await
        }
    };

    // v1beta1 toppings merge by name: one changes, one is added, the other stays (the patch's elements in the
    // patch's order, the server's others after them, as upstream orders a merged list).
    let (code, _, body) =
        patch(r#"{"spec":{"toppings":[{"name":"salami","quantity":3},{"name":"mozzarella"}]}}"#)
            .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        parse(&body)["spec"]["toppings"],
        json!([{"name": "salami", "quantity": 3}, {"name": "mozzarella", "quantity": 1}, {"name": "tomato", "quantity": 1}])
    );
    // Deleting one by name, and ordering with $setElementOrder.
    let (code, _, body) = patch(
        r#"{"spec":{"$setElementOrder/toppings":[{"name":"mozzarella"},{"name":"salami"}],"toppings":[{"$patch":"delete","name":"tomato"}]}}"#,
    )
    .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let patched = parse(&body);
    assert_eq!(
        patched["spec"]["toppings"],
        json!([{"name": "mozzarella", "quantity": 1}, {"name": "salami", "quantity": 3}])
    );
    // Labels merge, null deletes.
    let (code, _, body) = patch(r#"{"metadata":{"labels":{"a":"1","b":"2"}}}"#).await;
    assert_eq!(code, 200);
    assert_eq!(
        parse(&body)["metadata"]["labels"],
        json!({"a": "1", "b": "2"})
    );
    let (code, _, body) = patch(r#"{"metadata":{"labels":{"a":null}}}"#).await;
    assert_eq!(code, 200);
    assert_eq!(parse(&body)["metadata"]["labels"], json!({"b": "2"}));
    let rv = parse(&body)["metadata"]["resourceVersion"].clone();

    // v1alpha1's list of names (duplicates are portions) is replaced whole.
    let alpha = format!("{}/smp", pizzas("v1alpha1"));
    let (code, _, body) = server
        .raw(
            "PATCH",
            &alpha,
            &[STRATEGIC],
            br#"{"spec":{"toppings":["tomato","tomato"]}}"#.to_vec(),
        )
        .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        parse(&body)["spec"]["toppings"],
        json!(["tomato", "tomato"])
    );
    let (_, _, body) = get(&server, &path).await;
    assert_eq!(
        parse(&body)["spec"]["toppings"],
        json!([{"name": "tomato", "quantity": 2}])
    );
    let rv_after = parse(&body)["metadata"]["resourceVersion"].clone();
    assert_ne!(rv, rv_after);

    // Malformed patches: a Status, nothing written.
    let (code, _, body) = patch("{not json").await;
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    assert_eq!(parse(&body)["reason"], "BadRequest");
    let (code, _, body) = patch("[1]").await;
    assert_status(
        code,
        &body,
        400,
        "BadRequest",
        "json: cannot unmarshal array into Go value of type map[string]interface {}",
    );
    let (code, _, body) = patch(r#"{"spec":{"$retainKeys":"toppings"}}"#).await;
    assert_status(
        code,
        &body,
        400,
        "BadRequest",
        "invalid patch format of retainKeys",
    );
    let (code, _, body) = patch(r#"{"metadata":{"$deleteFromPrimitiveList":["x"]}}"#).await;
    assert_status(
        code,
        &body,
        400,
        "BadRequest",
        "invalid patch format of primitive list",
    );
    let (code, _, body) = patch(r#"{"spec":{"toppings":[{"quantity":2}]}}"#).await;
    assert_status(
        code,
        &body,
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    );
    assert_eq!(
        parse(&body)["details"]["causes"][0]["message"],
        "map: map[quantity:2] does not contain declared merge key: name"
    );
    let (code, _, body) = patch(r#"{"spec":{"$patch":"merge"}}"#).await;
    assert_eq!(code, 422);
    assert_eq!(
        parse(&body)["details"]["causes"][0]["message"],
        "unknown patch type: merge in map: map[$patch:merge]"
    );
    let (code, _, body) =
        patch(r#"{"spec":{"toppings":[{"name":"tomato","$patch":"bogus"}]}}"#).await;
    assert_eq!(code, 422);
    assert_eq!(
        parse(&body)["details"]["causes"][0]["message"],
        "unknown patch type: bogus in map: map[$patch:bogus name:tomato]"
    );
    // An unknown field is refused in Strict (and only warned about by default).
    let (code, _, body) = server
        .raw(
            "PATCH",
            &format!("{path}?fieldValidation=Strict"),
            &[STRATEGIC],
            br#"{"spec":{"crust":"thin"}}"#.to_vec(),
        )
        .await;
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    let (_, _, body) = get(&server, &path).await;
    assert_eq!(parse(&body)["metadata"]["resourceVersion"], rv_after);
}

#[tokio::test(flavor = "multi_thread")]
async fn protobuf_watch_frames() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    let path = format!("{}?watch=1&timeoutSeconds=5", toppings("v1alpha1"));
    let (code, headers, mut stream) = server
        .stream(&path, "application/vnd.kubernetes.protobuf;stream=watch")
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        headers["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    post(&server, &toppings("v1alpha1"), topping("salami", 0.2)).await;

    let frame_len = |buf: &[u8]| {
        buf.get(..4)
            .map(|b| u32::from_be_bytes(b.try_into().unwrap()) as usize)
    };
    stream
        .read_until(Duration::from_secs(5), "a whole frame", |buf| {
            frame_len(buf).is_some_and(|len| buf.len() >= 4 + len)
        })
        .await;
    let len = frame_len(&stream.buf).unwrap();
    let (event_type, object) = decode_protobuf_watch_event(&stream.buf[4..4 + len]).unwrap();
    assert_eq!(event_type, "ADDED");
    let (type_meta, _) = decode_protobuf(&object).unwrap();
    assert_eq!(type_meta.kind, "Topping");
}

#[tokio::test(flavor = "multi_thread")]
async fn routes_scopes_and_metadata_views() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    post(&server, &toppings("v1alpha1"), topping("salami", 0.2)).await;

    // Paths a scope has no route for: 404; methods a path does not take: 405.
    let not_found = [
        format!("{GROUP}/v1alpha1/namespaces/default/toppings/salami"),
        format!("{GROUP}/v1beta1/pizzas/x"),
        format!("{GROUP}/v1/toppings"),
        format!("{GROUP}/v1alpha1/sauces"),
        format!("{GROUP}/v1alpha1/toppings/salami/status"),
    ];
    for path in not_found {
        let (code, _, body) = get(&server, &path).await;
        assert_status(
            code,
            &body,
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    for (method, path) in [
        ("POST", format!("{}/salami", toppings("v1alpha1"))),
        ("PUT", toppings("v1alpha1")),
        ("POST", format!("{GROUP}/v1beta1/pizzas")),
    ] {
        let (code, _, _) = server.raw(method, &path, &[JSON], topping("x", 1.0)).await;
        assert_eq!(code, 405, "{method} {path}");
    }

    let partial = (
        "accept",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    );
    let (code, _, body) = server
        .raw("GET", &toppings("v1alpha1"), &[partial], vec![])
        .await;
    assert_eq!(code, 200);
    let list = parse(&body);
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["items"][0]["metadata"]["name"], "salami");
    assert!(list["items"][0].get("spec").is_none());
    // The metadata of one object, in protobuf as the garbage collector's metadata client asks for it.
    let partial_pb = (
        "accept",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    );
    let (code, _, body) = server
        .raw(
            "GET",
            &format!("{}/salami", toppings("v1alpha1")),
            &[partial_pb],
            vec![],
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        decode_protobuf(&body).unwrap().0.kind,
        "PartialObjectMetadata"
    );
    // A list where one object was asked for, and the reverse: 406.
    let (code, _, body) = server
        .raw(
            "GET",
            &format!("{}/salami", toppings("v1alpha1")),
            &[partial],
            vec![],
        )
        .await;
    assert_eq!(code, 406, "{}", String::from_utf8_lossy(&body));

    // Paging: one item per page, a continue token, all items once.
    post(&server, &toppings("v1alpha1"), topping("tomato", 0.1)).await;
    let (_, _, body) = get(&server, &format!("{}?limit=1", toppings("v1alpha1"))).await;
    let page = parse(&body);
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["metadata"]["remainingItemCount"], 1);
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    let (_, _, body) = get(
        &server,
        &format!("{}?limit=1&continue={token}", toppings("v1alpha1")),
    )
    .await;
    let page = parse(&body);
    assert_eq!(page["items"][0]["metadata"]["name"], "tomato");
    assert!(page["metadata"].get("continue").is_none());

    // Options are validated with upstream's texts.
    let (code, _, body) = post(
        &server,
        &format!("{}?dryRun=Yes", toppings("v1alpha1")),
        topping("x", 1.0),
    )
    .await;
    assert_status(
        code,
        &body,
        422,
        "Invalid",
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: \"Yes\": supported values: \"All\"",
    );
    let (code, _, _) = get(
        &server,
        &format!("{}?resourceVersionMatch=Exact", toppings("v1alpha1")),
    )
    .await;
    assert_eq!(code, 422);
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_ends_watches_cleanly() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    let path = format!("{}?watch=1", toppings("v1alpha1"));
    let (code, _, stream) = server.stream(&path, "application/json").await;
    assert_eq!(code, 200);
    let stop = tokio::spawn(server.stop());
    let end = stream.end(Duration::from_secs(20)).await;
    assert_eq!(end, Ok(()), "the stream ends cleanly, not with an error");
    stop.await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_list_initial_events_end_with_a_bookmark() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    post(&server, &toppings("v1alpha1"), topping("salami", 0.2)).await;
    post(&server, &toppings("v1alpha1"), topping("tomato", 0.1)).await;
    let path = format!(
        "{}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5",
        toppings("v1alpha1")
    );
    let (code, _, mut stream) = server.stream(&path, "application/json").await;
    assert_eq!(code, 200);
    stream
        .read_until(
            Duration::from_secs(5),
            "the initial events and their bookmark",
            |buf| String::from_utf8_lossy(buf).contains("BOOKMARK"),
        )
        .await;
    let events: Vec<Value> = String::from_utf8_lossy(&stream.buf)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "ADDED", "BOOKMARK"]);
    let bookmark = &events[2]["object"];
    assert_eq!(bookmark["kind"], "Topping");
    assert_eq!(
        bookmark["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(bookmark["metadata"]["resourceVersion"], "2");

    // sendInitialEvents needs resourceVersionMatch=NotOlderThan, as upstream.
    let bad = format!("{}?watch=1&sendInitialEvents=true", toppings("v1alpha1"));
    let (code, _, body) = get(&server, &bad).await;
    assert_status(
        code,
        &body,
        422,
        "Invalid",
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
    );
}

/// A list sent in pieces as its items are encoded (or found already encoded) is byte for byte the list encoded
/// whole, in JSON, protobuf and CBOR, in both versions, cold and from the kept encodings, whole and by pages: lists
/// large enough to take several pieces, checked against `encode_list` of the objects they carry.
#[tokio::test(flavor = "multi_thread")]
async fn streamed_lists_are_the_lists_encoded_whole() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    // Pieces of at most 64 KiB: 300 toppings of 2.5 KB take a dozen.
    let note = "n".repeat(2000);
    for i in 0..300 {
        let body = json!({
            "apiVersion": "restaurant.programming-kubernetes.info/v1alpha1",
            "kind": "Topping",
            "metadata": {"name": format!("topping-{i:04}"), "annotations": {"note": note}},
            "spec": {"cost": 0.25}
        });
        let (code, _, body) = post(
            &server,
            &toppings("v1alpha1"),
            serde_json::to_vec(&body).unwrap(),
        )
        .await;
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    }
    let codec = pizza_apiserver::restaurant::Topping::codec();
    let protobuf = ("accept", "application/vnd.kubernetes.protobuf");
    for version in ["v1alpha1", "v1beta1"] {
        for query in ["", "?limit=150", "?resourceVersion=0"] {
            for round in ["cold", "kept"] {
                let path = format!("{}{query}", toppings(version));
                let (code, headers, json) = get(&server, &path).await;
                assert_eq!(code, 200);
                assert_eq!(headers["content-type"], "application/json");
                let list = parse(&json);
                let items: Vec<_> = list["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|item| {
                        let mut item = item.clone();
                        item["kind"] = "Topping".into();
                        item["apiVersion"] =
                            format!("restaurant.programming-kubernetes.info/{version}").into();
                        codec
                            .decode(
                                &serde_json::to_vec(&item).unwrap(),
                                apiserver::codec::MediaType::Json,
                                version,
                                apiserver::codec::FieldValidation::Strict,
                            )
                            .unwrap()
                            .object
                    })
                    .collect();
                let want = if query == "?limit=150" { 150 } else { 300 };
                assert_eq!(items.len(), want, "{version}{query} {round}");
                let meta: apiserver::meta::ListMeta =
                    serde_json::from_value(list["metadata"].clone()).unwrap();
                if want == 150 {
                    assert!(!meta.continue_.is_empty() && meta.remaining_item_count == Some(150));
                }
                let whole = codec
                    .encode_list(&meta, &items, version, apiserver::codec::MediaType::Json)
                    .unwrap();
                if want == 300 {
                    assert!(
                        json.len() > 10 * 64 * 1024,
                        "several pieces: {}",
                        json.len()
                    );
                }
                assert!(
                    json == whole,
                    "{version}{query} {round}: JSON differs from the list encoded whole"
                );
                let (code, _, body) = server.raw("GET", &path, &[protobuf], vec![]).await;
                assert_eq!(code, 200);
                let whole = codec
                    .encode_list(
                        &meta,
                        &items,
                        version,
                        apiserver::codec::MediaType::Protobuf,
                    )
                    .unwrap();
                assert!(
                    body == whole,
                    "{version}{query} {round}: protobuf differs from the list encoded whole"
                );
                let cbor = ("accept", "application/cbor");
                let (code, headers, body) = server.raw("GET", &path, &[cbor], vec![]).await;
                assert_eq!(code, 200);
                assert_eq!(headers["content-type"], "application/cbor");
                let whole = codec
                    .encode_list(&meta, &items, version, apiserver::codec::MediaType::Cbor)
                    .unwrap();
                assert!(
                    body == whole,
                    "{version}{query} {round}: CBOR differs from the list encoded whole"
                );
            }
        }
    }
    server.stop().await;
}

/// A raw watch of the provided menu with a label selector, from the list's resourceVersion: a topping labelled into
/// the selection is ADDED, its price change MODIFIED, and labelled out DELETED (its last matching state, the
/// previous object the toppings' storage gives), as a stored resource's watch sends them.
#[tokio::test(flavor = "multi_thread")]
async fn the_provided_menu_is_watched_with_selectors() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    post(&server, &toppings("v1alpha1"), topping("salami", 0.2)).await;
    let menu = format!("{GROUP}/v1beta1/menuitems");
    let (code, _, body) = get(&server, &menu).await;
    assert_eq!(code, 200);
    let rv = parse(&body)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!(
        "{menu}?watch=1&labelSelector=special%3Dyes&resourceVersion={rv}&timeoutSeconds=10"
    );
    let (code, headers, mut stream) = server.stream(&path, "application/json").await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "application/json");
    let salami = format!("{}/salami", toppings("v1alpha1"));
    let merge = ("content-type", "application/merge-patch+json");
    for patch in [
        r#"{"metadata":{"labels":{"special":"yes"}}}"#,
        r#"{"spec":{"cost":0.3}}"#,
        r#"{"metadata":{"labels":{"special":null}}}"#,
    ] {
        let (code, _, body) = server
            .raw("PATCH", &salami, &[merge], patch.as_bytes().to_vec())
            .await;
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }
    stream
        .read_until(Duration::from_secs(5), "three events", |buf| {
            buf.iter().filter(|b| **b == b'\n').count() >= 3
        })
        .await;
    let events: Vec<Value> = String::from_utf8_lossy(&stream.buf)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let seen: Vec<(&str, f64)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["object"]["price"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("ADDED", 0.2), ("MODIFIED", 0.3), ("DELETED", 0.3)],
        "{events:?}"
    );
    assert_eq!(events[0]["object"]["kind"], "MenuItem");
    assert_eq!(events[2]["object"]["metadata"]["labels"]["special"], "yes");
}

/// Upstream 1.38's small behaviours that clients start to rely on: a DELETE answers the resourceVersion of the
/// deletion; an invalid resourceVersion is 400 on every read (kube-apiserver 1.36 answered GET and WATCH with a
/// 500, `tests/fixtures/metadata/misc/0[5-7]`); a request may carry 16,384 values of one header (a front proxy's
/// `X-Remote-Group` lines).
#[tokio::test(flavor = "multi_thread")]
async fn deletes_answer_their_resource_version_and_bad_versions_are_400() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    let (code, _, body) = post(&server, &toppings("v1alpha1"), topping("salami", 0.2)).await;
    assert_eq!(code, 201);
    let created: u64 = parse(&body)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let (code, _, body) = server
        .raw(
            "DELETE",
            &format!("{}/salami", toppings("v1alpha1")),
            &[],
            vec![],
        )
        .await;
    assert_eq!(code, 200);
    let status = parse(&body);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Success");
    let deleted: u64 = status["metadata"]["resourceVersion"]
        .as_str()
        .expect("the deletion's resourceVersion")
        .parse()
        .unwrap();
    assert!(
        deleted > created,
        "deleted at {deleted}, created at {created}"
    );
    // A list at that resourceVersion no longer has it; one just before still does.
    assert!(
        names(
            &server,
            &format!(
                "{}?resourceVersion={deleted}&resourceVersionMatch=Exact",
                toppings("v1alpha1")
            )
        )
        .await
        .is_empty()
    );
    assert_eq!(
        names(
            &server,
            &format!(
                "{}?resourceVersion={}&resourceVersionMatch=Exact",
                toppings("v1alpha1"),
                deleted - 1
            )
        )
        .await,
        ["salami"]
    );

    let parse_error = "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax";
    let (code, _, body) = get(
        &server,
        &format!("{}?resourceVersion=abc", toppings("v1alpha1")),
    )
    .await;
    assert_status(
        code,
        &body,
        400,
        "BadRequest",
        &format!("invalid resource version: {parse_error}"),
    );
    let (code, _, body) = get(
        &server,
        &format!("{}/salami?resourceVersion=abc", toppings("v1alpha1")),
    )
    .await;
    assert_status(code, &body, 400, "BadRequest", parse_error);
    let (code, _, body) = get(
        &server,
        &format!("{}?watch=1&resourceVersion=abc", toppings("v1alpha1")),
    )
    .await;
    assert_status(code, &body, 400, "BadRequest", parse_error);

    // An unknown group, version or resource: a JSON `Status` 404 (upstream 1.38; 1.36 answered plain text).
    for path in [
        "/apis/nope.example.com/v1/things",
        "/apis/restaurant.programming-kubernetes.info/v9/pizzas",
        "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/ns1/calzones",
    ] {
        let (code, headers, body) = get(&server, path).await;
        assert_eq!(headers["content-type"], "application/json", "{path}");
        assert_status(
            code,
            &body,
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }

    let groups: Vec<String> = (0..16_384).map(|i| format!("group-{i}")).collect();
    let mut headers: Vec<(&str, &str)> = groups
        .iter()
        .map(|g| ("x-remote-group", g.as_str()))
        .collect();
    headers.push(("accept", "application/json"));
    let (code, _, body) = server
        .raw("GET", &toppings("v1alpha1"), &headers, vec![])
        .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
}

/// Gzip as upstream's `APIResponseCompression`: a client that sends `Accept-Encoding: gzip` gets a body larger than
/// 128 KiB compressed (`Content-Encoding: gzip`, `Vary: Accept-Encoding`), decoding to the bytes it would have got
/// otherwise; a smaller body goes out as it is, without `Vary` (kube-apiserver 1.36,
/// `tests/fixtures/metadata/misc/2[0-4]`); a watch is never compressed.
#[tokio::test(flavor = "multi_thread")]
async fn large_responses_are_gzipped_for_clients_that_accept_it() {
    use std::io::Read;
    let server = TestServer::start(&[NO_COST_CONTROLLER, "--storage-backend=memory"]).await;
    for i in 0..400 {
        let (code, _, body) = post(
            &server,
            &toppings("v1alpha1"),
            topping(
                &format!("topping-{i:04}-with-a-long-name-to-fill-the-list"),
                0.5,
            ),
        )
        .await;
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    }
    let (_, _, body) = get(&server, &toppings("v1alpha1")).await;
    let rv = parse(&body)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let pinned = format!(
        "{}?resourceVersion={rv}&resourceVersionMatch=Exact",
        toppings("v1alpha1")
    );
    // Each form is compressed when it is larger than the threshold (the JSON list is; its protobuf, about
    // 100 KB, is not), and decodes to the bytes sent without compression.
    let mut compressed_forms = 0;
    for accept in [
        "application/json",
        "application/vnd.kubernetes.protobuf",
        "application/json;as=Table;g=meta.k8s.io;v=v1",
    ] {
        let (code, headers, plain) = server
            .raw(
                "GET",
                &pinned,
                &[("accept-encoding", "identity"), ("accept", accept)],
                vec![],
            )
            .await;
        assert_eq!(code, 200);
        assert!(headers.get("content-encoding").is_none());
        let (code, headers, sent) = server
            .raw(
                "GET",
                &pinned,
                &[("accept-encoding", "gzip"), ("accept", accept)],
                vec![],
            )
            .await;
        assert_eq!(code, 200);
        if plain.len() <= 128 * 1024 {
            assert!(
                headers.get("content-encoding").is_none(),
                "{accept}: {headers:?}"
            );
            assert!(headers.get("vary").is_none(), "{accept}: {headers:?}");
            assert_eq!(sent, plain);
            continue;
        }
        compressed_forms += 1;
        assert_eq!(headers["content-encoding"], "gzip", "{accept}");
        assert_eq!(headers["vary"], "Accept-Encoding");
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(&sent[..])
            .read_to_end(&mut decoded)
            .unwrap();
        if accept.contains("Table") {
            // A table's ages move on between two requests: compare all but the cells.
            let without_cells = |body: &[u8]| {
                let mut table = parse(body);
                for row in table["rows"].as_array_mut().unwrap() {
                    row["cells"] = Value::Null;
                }
                table
            };
            assert_eq!(without_cells(&decoded), without_cells(&plain), "{accept}");
        } else {
            assert_eq!(decoded, plain, "{accept}: the same bytes");
        }
        assert!(
            sent.len() * 5 < plain.len(),
            "{accept}: {} of {}",
            sent.len(),
            plain.len()
        );
    }
    assert!(
        compressed_forms >= 2,
        "the JSON list and its Table are over 128 KiB"
    );

    let (code, headers, _) = server
        .raw(
            "GET",
            &format!(
                "{}/topping-0001-with-a-long-name-to-fill-the-list",
                toppings("v1alpha1")
            ),
            &[("accept-encoding", "gzip")],
            vec![],
        )
        .await;
    assert_eq!(code, 200);
    assert!(headers.get("content-encoding").is_none() && headers.get("vary").is_none());

    let (code, headers, mut watch) = server
        .stream_with(
            &format!(
                "{}?watch=1&resourceVersion=0&timeoutSeconds=5",
                toppings("v1alpha1")
            ),
            &[("accept", "application/json"), ("accept-encoding", "gzip")],
        )
        .await;
    assert_eq!(code, 200);
    assert!(headers.get("content-encoding").is_none());
    watch
        .read_until(
            Duration::from_secs(10),
            "the initial events, uncompressed",
            |buf| String::from_utf8_lossy(buf).matches("\"ADDED\"").count() >= 400,
        )
        .await;
}
