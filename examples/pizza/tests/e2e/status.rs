//! The `status` subresource of pizzas over real HTTPS and with the installed kubectl: only `/status` writes status,
//! it writes nothing else, `metadata.generation` follows the spec, and discovery and OpenAPI list it.

use crate::support;

use serde_json::{Value, json};
use support::{MARGHERITA, NO_COST_CONTROLLER, TOPPINGS, TestServer, call, parse};

const GROUP: &str = "/apis/restaurant.programming-kubernetes.info";
const JSON: (&str, &str) = ("content-type", "application/json");
const MERGE: (&str, &str) = ("content-type", "application/merge-patch+json");
const JSON_PATCH: (&str, &str) = ("content-type", "application/json-patch+json");

fn pizza(version: &str, name: &str) -> String {
    format!("{GROUP}/{version}/namespaces/default/pizzas/{name}")
}

async fn setup(server: &TestServer) {
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    server.kubectl_stdin_ok(&["create", "-f", "-"], MARGHERITA);
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_reads_and_patches_status() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    setup(&server).await;
    let out = server.kubectl_ok(&[
        "patch",
        "pizza",
        "margherita",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"cost":2}}"#,
    ]);
    assert!(
        out.contains("pizza.restaurant.programming-kubernetes.info/margherita patched"),
        "{out}"
    );
    let out = server.kubectl_ok(&[
        "get",
        "pizza",
        "margherita",
        "--subresource=status",
        "-o",
        "json",
    ]);
    let object = parse(out.as_bytes());
    assert_eq!(object["status"]["cost"], 2.0, "{object}");
    assert_eq!(object["metadata"]["generation"], 1, "{object}");
    // The table view of the subresource shows the cost column.
    let out = server.kubectl_ok(&["get", "pizza", "margherita", "--subresource=status"]);
    let row = out
        .lines()
        .find(|l| l.starts_with("margherita"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.split_whitespace().any(|c| c == "2"), "{out}");

    // A merge patch of status through the main resource is accepted but changes nothing (as upstream).
    let out = server.kubectl_ok(&[
        "patch",
        "pizza",
        "margherita",
        "--type=merge",
        "-p",
        r#"{"status":{"cost":9}}"#,
    ]);
    assert!(out.contains("patched (no change)"), "{out}");
    let cost = server.kubectl_ok(&[
        "get",
        "pizza",
        "margherita",
        "-o",
        "jsonpath={.status.cost}",
    ]);
    assert_eq!(cost, "2");
}

#[tokio::test(flavor = "multi_thread")]
async fn main_resource_ignores_status_and_status_ignores_the_rest() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    setup(&server).await;
    for version in ["v1alpha1", "v1beta1"] {
        let name = format!("p-{version}");
        let collection = format!("{GROUP}/{version}/namespaces/default/pizzas");
        let toppings = if version == "v1alpha1" {
            json!(["mozzarella"])
        } else {
            json!([{"name": "mozzarella", "quantity": 1}])
        };
        // Create clears status and starts generation at 1.
        let (code, created) = call(
            &server,
            "POST",
            &collection,
            Some(JSON),
            json!({
                "apiVersion": format!("restaurant.programming-kubernetes.info/{version}"),
                "kind": "Pizza",
                "metadata": {"name": name},
                "spec": {"toppings": toppings},
                "status": {"cost": 5}
            }),
        )
        .await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(created["metadata"]["generation"], 1);
        assert!(
            created["status"].get("cost").is_none_or(|c| c == 0.0),
            "{created}"
        );

        // PUT of the main resource with a new status: status kept, nothing to bump.
        let mut put = created.clone();
        put["status"] = json!({"cost": 7});
        let (code, updated) = call(&server, "PUT", &pizza(version, &name), Some(JSON), put).await;
        assert_eq!(code, 200, "{updated}");
        assert!(
            updated["status"].get("cost").is_none_or(|c| c == 0.0),
            "{updated}"
        );
        assert_eq!(updated["metadata"]["generation"], 1);

        // PUT of /status with a new spec and labels: only status is written, generation unchanged.
        let mut put = updated.clone();
        put["status"] = json!({"cost": 3.5});
        put["spec"]["toppings"] = if version == "v1alpha1" {
            json!(["tomato"])
        } else {
            json!([{"name": "tomato", "quantity": 4}])
        };
        put["metadata"]["labels"] = json!({"sneaky": "yes"});
        let (code, status) = call(
            &server,
            "PUT",
            &format!("{}/status", pizza(version, &name)),
            Some(JSON),
            put,
        )
        .await;
        assert_eq!(code, 200, "{status}");
        assert_eq!(status["status"]["cost"], 3.5, "{status}");
        assert_eq!(status["spec"], updated["spec"], "{status}");
        assert!(status["metadata"].get("labels").is_none(), "{status}");
        assert_eq!(status["metadata"]["generation"], 1);
        assert_ne!(
            status["metadata"]["resourceVersion"],
            updated["metadata"]["resourceVersion"]
        );

        // A spec change through the main resource bumps generation and keeps the status.
        let (code, patched) = call(
            &server,
            "PATCH",
            &pizza(version, &name),
            Some(JSON_PATCH),
            json!([{"op": "replace", "path": "/spec/toppings/0", "value": toppings[0].clone()},
                   {"op": "add", "path": "/spec/toppings/-", "value": if version == "v1alpha1" { json!("tomato") } else { json!({"name": "tomato", "quantity": 1}) }}]),
        )
        .await;
        assert_eq!(code, 200, "{patched}");
        assert_eq!(patched["metadata"]["generation"], 2, "{patched}");
        assert_eq!(patched["status"]["cost"], 3.5, "{patched}");

        // A JSON patch of /status.
        let (code, patched) = call(
            &server,
            "PATCH",
            &format!("{}/status", pizza(version, &name)),
            Some(JSON_PATCH),
            json!([{"op": "replace", "path": "/status/cost", "value": 4}]),
        )
        .await;
        assert_eq!(code, 200, "{patched}");
        assert_eq!(patched["status"]["cost"], 4.0);
        assert_eq!(patched["metadata"]["generation"], 2);

        // GET of /status is the whole object.
        let (code, got) = call(
            &server,
            "GET",
            &format!("{}/status", pizza(version, &name)),
            None,
            Value::Null,
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(got["kind"], "Pizza");
        assert_eq!(got["status"]["cost"], 4.0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn status_routes_errors_and_admission() {
    let server = TestServer::start(&[]).await;
    setup(&server).await;
    let status = format!("{}/status", pizza("v1beta1", "margherita"));

    // The subresource never creates: 404 as upstream.
    let (code, body) = call(
        &server,
        "PATCH",
        &format!("{}/status", pizza("v1beta1", "missing")),
        Some(MERGE),
        json!({"status": {"cost": 1}}),
    )
    .await;
    assert_eq!(code, 404, "{body}");
    assert_eq!(
        body["message"],
        "pizzas.restaurant.programming-kubernetes.info \"missing\" not found"
    );
    // Only get, update and patch.
    for method in ["POST", "DELETE"] {
        let (code, body) = call(&server, method, &status, Some(JSON), Value::Null).await;
        assert_eq!(code, 405, "{method}: {body}");
    }
    // No other subresource, and none on toppings.
    let (code, _) = call(
        &server,
        "GET",
        &format!("{}/scale", pizza("v1beta1", "margherita")),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 404);
    let (code, _) = call(
        &server,
        "GET",
        &format!("{GROUP}/v1alpha1/toppings/tomato/status"),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 404);
    let (code, _) = call(
        &server,
        "GET",
        &format!("{status}/extra"),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 404);

    // A stale resourceVersion conflicts on /status as on the main resource.
    let (_, current) = call(&server, "GET", &status, None, Value::Null).await;
    let (code, body) = call(
        &server,
        "PATCH",
        &status,
        Some(MERGE),
        json!({"metadata": {"resourceVersion": "1"}, "status": {"cost": 1}}),
    )
    .await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(
        body["message"],
        "Operation cannot be fulfilled on pizzas.restaurant.programming-kubernetes.info \"margherita\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // Admission sees the subresource: with a topping gone, the main resource refuses writes (PizzaToppings),
    // the status still takes the cost.
    server.kubectl_ok(&["delete", "topping", "tomato"]);
    let (code, body) = call(
        &server,
        "PATCH",
        &pizza("v1beta1", "margherita"),
        Some(MERGE),
        json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "pizzas.restaurant.programming-kubernetes.info \"margherita\" is forbidden: unknown topping: tomato"
    );
    let (code, body) = call(
        &server,
        "PATCH",
        &status,
        Some(MERGE),
        json!({"status": {"cost": 1.25}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"]["cost"], 1.25);
    assert!(body["metadata"]["resourceVersion"].as_str().is_some());
    assert_ne!(
        body["metadata"]["resourceVersion"],
        current["metadata"]["resourceVersion"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_and_openapi_list_pizzas_status() {
    let server = TestServer::start(&[]).await;
    for version in ["v1alpha1", "v1beta1"] {
        let (code, list) = call(
            &server,
            "GET",
            &format!("{GROUP}/{version}"),
            None,
            Value::Null,
        )
        .await;
        assert_eq!(code, 200);
        let resources = list["resources"].as_array().unwrap();
        let status = resources
            .iter()
            .find(|r| r["name"] == "pizzas/status")
            .unwrap_or_else(|| panic!("{list}"));
        assert_eq!(
            status,
            &json!({"name": "pizzas/status", "singularName": "", "namespaced": true, "kind": "Pizza",
                    "verbs": ["get", "patch", "update"]})
        );
        assert!(
            !resources.iter().any(|r| r["name"] == "toppings/status"),
            "{list}"
        );
    }

    let (code, _, body) = server
        .raw(
            "GET",
            "/apis",
            &[(
                "accept",
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            )],
            vec![],
        )
        .await;
    assert_eq!(code, 200);
    let aggregated = parse(&body);
    let group = aggregated["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "restaurant.programming-kubernetes.info")
        .unwrap();
    for version in group["versions"].as_array().unwrap() {
        let pizzas = version["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pizzas")
            .unwrap();
        assert_eq!(
            pizzas["subresources"][0],
            json!({"subresource": "status",
                    "responseKind": {"group": "restaurant.programming-kubernetes.info",
                                     "version": version["version"], "kind": "Pizza"},
                    "verbs": ["get", "patch", "update"]})
        );
        // Then the kitchen's own subresources (`kitchen.rs`).
        let names: Vec<&str> = pizzas["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["subresource"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["status", "bake", "log"]);
    }

    let (code, openapi) = call(
        &server,
        "GET",
        "/openapi/v3/apis/restaurant.programming-kubernetes.info/v1beta1",
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    let path = &openapi["paths"]["/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/{namespace}/pizzas/{name}/status"];
    assert_eq!(
        path["patch"]["operationId"],
        "patchRestaurantProgrammingKubernetesInfoV1beta1NamespacedPizzaStatus",
        "{path}"
    );
    assert_eq!(path["get"]["x-kubernetes-action"], "get");
    assert_eq!(path["put"]["x-kubernetes-action"], "put");
    assert!(path.get("delete").is_none());
    let (_, v2) = call(&server, "GET", "/openapi/v2", None, Value::Null).await;
    assert!(
        v2["paths"]
            .get("/apis/restaurant.programming-kubernetes.info/v1alpha1/namespaces/{namespace}/pizzas/{name}/status")
            .is_some()
    );

    // kubectl lists the subresource too.
    let out = server.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/restaurant.programming-kubernetes.info/v1beta1",
    ]);
    assert!(out.contains("pizzas/status"), "{out}");
}
