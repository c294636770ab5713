//! Discovery and OpenAPI documents for hand-described kinds, through their routers: the shapes kubectl and
//! client-go rely on.

use std::collections::BTreeMap;

use apiserver::discovery::Discovery;
use apiserver::openapi::OpenApi;
use apiserver::runtime::KindDescription;
use axum::Router;
use axum::body::Body;
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

fn kinds() -> Vec<KindDescription> {
    let schema = |version: &str, kind: &str| {
        json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "nullable": true}}}},
            "x-kubernetes-group-version-kind": [{"group": "example.com", "version": version, "kind": kind}]
        })
    };
    vec![
        KindDescription {
            group: "example.com",
            kind: "Widget",
            plural: "widgets",
            singular: "widget",
            namespaced: true,
            short_names: &["wd"],
            categories: &["all"],
            subresources: &[],
            custom_subresources: Vec::new(),
            read_only: false,
            watch: true,
            versions: vec!["v1alpha1", "v1", "v1beta1"],
            storage_version_hash: apiserver::runtime::storage_version_hash(
                "example.com",
                "v1",
                "Widget",
            ),
            schemas: BTreeMap::from([
                ("v1alpha1", schema("v1alpha1", "Widget")),
                ("v1", schema("v1", "Widget")),
                ("v1beta1", schema("v1beta1", "Widget")),
            ]),
        },
        KindDescription {
            group: "example.com",
            kind: "Gadget",
            plural: "gadgets",
            singular: "gadget",
            namespaced: false,
            short_names: &[],
            categories: &[],
            subresources: &[],
            custom_subresources: Vec::new(),
            read_only: false,
            watch: true,
            versions: vec!["v1"],
            storage_version_hash: String::new(),
            schemas: BTreeMap::from([("v1", schema("v1", "Gadget"))]),
        },
    ]
}

async fn get(
    router: &Router,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, http::HeaderMap, Vec<u8>) {
    let mut request = Request::get(path);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = router
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, headers, body)
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap()
}

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

#[tokio::test]
async fn legacy_discovery() {
    let router = Discovery::new(&kinds()).router();
    let (code, _, body) = get(&router, "/apis", &[]).await;
    assert_eq!(code, 200);
    let list = json_of(&body);
    assert_eq!(list["kind"], "APIGroupList");
    let group = &list["groups"][0];
    assert_eq!(group["name"], "example.com");
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(
        versions,
        ["v1", "v1beta1", "v1alpha1"],
        "Kubernetes version priority"
    );
    assert_eq!(group["preferredVersion"]["groupVersion"], "example.com/v1");

    let (code, _, body) = get(&router, "/apis/example.com/v1", &[]).await;
    assert_eq!(code, 200);
    let resources = json_of(&body);
    assert_eq!(resources["kind"], "APIResourceList");
    assert_eq!(resources["groupVersion"], "example.com/v1");
    let widgets = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "widgets")
        .unwrap();
    assert_eq!(widgets["namespaced"], true);
    assert_eq!(widgets["singularName"], "widget");
    assert_eq!(widgets["shortNames"], json!(["wd"]));
    assert_eq!(widgets["categories"], json!(["all"]));
    assert_eq!(
        widgets["verbs"],
        json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ])
    );
    let (_, _, body) = get(&router, "/apis/example.com/v1beta1", &[]).await;
    assert_eq!(
        json_of(&body)["resources"].as_array().unwrap().len(),
        1,
        "gadgets are v1 only"
    );

    assert_eq!(get(&router, "/apis/example.com", &[]).await.0, 200);
    assert_eq!(get(&router, "/apis/other.com", &[]).await.0, 404);
    assert_eq!(get(&router, "/apis/example.com/v2", &[]).await.0, 404);
    let (code, _, body) = get(&router, "/api", &[]).await;
    assert_eq!(code, 200);
    assert_eq!(json_of(&body)["versions"], json!([]));
}

#[tokio::test]
async fn aggregated_discovery_with_etag() {
    let router = Discovery::new(&kinds()).router();
    let (code, headers, body) = get(&router, "/apis", &[("accept", AGGREGATED)]).await;
    assert_eq!(code, 200);
    assert_eq!(
        headers["content-type"],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(headers["vary"], "Accept");
    let list = json_of(&body);
    assert_eq!(list["kind"], "APIGroupDiscoveryList");
    assert_eq!(list["apiVersion"], "apidiscovery.k8s.io/v2");
    let group = &list["items"][0];
    assert_eq!(group["metadata"]["name"], "example.com");
    assert_eq!(group["versions"][0]["version"], "v1");
    let gadget = group["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "gadgets")
        .unwrap();
    assert_eq!(gadget["scope"], "Cluster");
    assert_eq!(
        gadget["responseKind"],
        json!({"group": "example.com", "version": "v1", "kind": "Gadget"})
    );

    let etag = headers["etag"].to_str().unwrap().to_string();
    let (code, _, body) = get(
        &router,
        "/apis",
        &[("accept", AGGREGATED), ("if-none-match", &etag)],
    )
    .await;
    assert_eq!(code, 304);
    assert!(body.is_empty());

    let v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
    let (_, headers, body) = get(&router, "/apis", &[("accept", v2beta1)]).await;
    assert_eq!(headers["content-type"], v2beta1);
    assert_eq!(json_of(&body)["apiVersion"], "apidiscovery.k8s.io/v2beta1");

    let (_, _, body) = get(&router, "/api", &[("accept", AGGREGATED)]).await;
    assert_eq!(json_of(&body)["kind"], "APIGroupDiscoveryList");
}

/// Every `$ref` in `document` names a schema that exists under `prefix`.
fn assert_refs_resolve(document: &Value, prefix: &str, schemas: &Value) {
    fn walk(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r.clone());
                }
                map.values().for_each(|v| walk(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut refs = Vec::new();
    walk(document, &mut refs);
    assert!(!refs.is_empty());
    for r in refs {
        let name = r
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{r} is not under {prefix}"));
        assert!(schemas.get(name).is_some(), "{r} does not resolve");
    }
}

#[tokio::test]
async fn openapi_v3_documents() {
    let router = OpenApi::new(&kinds(), "test", "0.1.0").router();
    let (code, _, body) = get(&router, "/openapi/v3", &[]).await;
    assert_eq!(code, 200);
    let root = json_of(&body);
    let url = root["paths"]["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        url.starts_with("/openapi/v3/apis/example.com/v1?hash="),
        "{url}"
    );

    let (code, headers, body) = get(&router, &url, &[]).await;
    assert_eq!(code, 200);
    assert!(
        headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    let doc = json_of(&body);
    assert_eq!(doc["openapi"], "3.0.0");
    let schemas = &doc["components"]["schemas"];
    assert!(schemas.get("com.example.v1.Widget").is_some());
    assert!(schemas.get("com.example.v1.WidgetList").is_some());
    assert_refs_resolve(&doc, "#/components/schemas/", schemas);

    let item = &doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"];
    let patch = &item["patch"];
    assert_eq!(patch["operationId"], "patchExampleComV1NamespacedWidget");
    assert_eq!(patch["x-kubernetes-action"], "patch");
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "example.com", "version": "v1", "kind": "Widget"})
    );
    let patch_types: Vec<&String> = patch["requestBody"]["content"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        patch_types,
        [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json"
        ]
    );
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"),
        "kubectl looks for fieldValidation on the PATCH operation"
    );
    assert_eq!(
        item["get"]["operationId"],
        "readExampleComV1NamespacedWidget"
    );
    let collection = &doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets"];
    assert_eq!(
        collection["delete"]["operationId"],
        "deleteExampleComV1CollectionNamespacedWidget"
    );
    assert_eq!(collection["get"]["x-kubernetes-action"], "list");
    assert_eq!(
        doc["paths"]["/apis/example.com/v1/widgets"]["get"]["operationId"],
        "listExampleComV1WidgetForAllNamespaces"
    );
    assert_eq!(
        doc["paths"]["/apis/example.com/v1/gadgets/{name}"]["get"]["operationId"],
        "readExampleComV1Gadget"
    );

    let (code, _, _) = get(&router, "/openapi/v3/apis/example.com/v9", &[]).await;
    assert_eq!(code, 404);
    let etag = headers["etag"].to_str().unwrap().to_string();
    let (code, _, _) = get(&router, &url, &[("if-none-match", &etag)]).await;
    assert_eq!(code, 304);
}

#[tokio::test]
async fn openapi_v2_document() {
    let router = OpenApi::new(&kinds(), "test", "0.1.0").router();
    let (code, _, body) = get(&router, "/openapi/v2", &[("accept", "application/json")]).await;
    assert_eq!(code, 200);
    let doc = json_of(&body);
    assert_eq!(doc["swagger"], "2.0");
    assert_refs_resolve(&doc, "#/definitions/", &doc["definitions"]);
    assert!(
        !String::from_utf8_lossy(&body).contains("nullable"),
        "Swagger 2.0 has no nullable"
    );
    let patch = &doc["paths"]["/apis/example.com/v1/gadgets/{name}"]["patch"];
    assert_eq!(
        patch["consumes"],
        json!([
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json"
        ])
    );
    // A client that takes only the protobuf form is told so, and falls back.
    let (code, _, _) = get(
        &router,
        "/openapi/v2",
        &[(
            "accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )],
    )
    .await;
    assert_eq!(code, 406);
}

/// A kind provided by code lists `watch` in discovery, and says "watch" in OpenAPI, only when its code watches.
#[tokio::test]
async fn provided_kinds_list_watch_only_when_they_watch() {
    let provided = |kind: &'static str, plural: &'static str, watch: bool| KindDescription {
        kind,
        plural,
        singular: "",
        read_only: true,
        watch,
        versions: vec!["v1"],
        schemas: BTreeMap::from([("v1", json!({"type": "object"}))]),
        ..kinds().remove(1)
    };
    let kinds = [
        provided("Gauge", "gauges", false),
        provided("Meter", "meters", true),
    ];
    let router = Discovery::new(&kinds).router();
    let (_, _, body) = get(&router, "/apis/example.com/v1", &[]).await;
    let resources = json_of(&body);
    let verbs = |name: &str| {
        resources["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()["verbs"]
            .clone()
    };
    assert_eq!(verbs("gauges"), json!(["get", "list"]));
    assert_eq!(verbs("meters"), json!(["get", "list", "watch"]));

    let router = OpenApi::new(&kinds, "test", "0.1.0").router();
    let (_, _, body) = get(&router, "/openapi/v3/apis/example.com/v1", &[]).await;
    let paths = &json_of(&body)["paths"];
    let list = |plural: &str| {
        let path = &paths[format!("/apis/example.com/v1/{plural}")];
        assert!(path.get("post").is_none(), "{path}");
        path["get"]["description"].clone()
    };
    assert_eq!(list("gauges"), "list objects of kind Gauge");
    assert_eq!(list("meters"), "list or watch objects of kind Meter");
}
