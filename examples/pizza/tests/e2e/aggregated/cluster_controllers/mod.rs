//! kube-controller-manager's controllers acting on pizzas through the real kube-apiserver. `../shared/envtest` has no
//! kube-controller-manager, so each test plays a controller's side with the requests a real kube-controller-manager
//! 1.36 sent to this server (method, path, query, `Accept`, `Content-Type` and bodies as recorded in
//! `reference/kcm-requests/`), and asserts what the controller relies on:
//!
//! - the metadata informers (garbage collector, quota controller): a protobuf WATCH as `PartialObjectMetadata`
//!   sees every change;
//! - the namespace controller: deletecollection, then metadata LISTs until the namespace is empty (finalizers
//!   honoured), then the namespace goes;
//! - the garbage collector: background deletion of a pizza whose owner (a ConfigMap) is gone, with preconditions;
//!   foreground deletion of a pizza owner (its `foregroundDeletion` finalizer removed by a merge patch answered as
//!   `PartialObjectMetadata`) once its blocking dependent is gone; orphaning;
//! - the quota controller and this server's `ResourceQuota` admission: `count/pizzas...` is enforced with
//!   upstream's `exceeded quota` refusal.

use std::time::Duration;

use apiserver::codec::{decode_protobuf, decode_protobuf_watch_event};
use apiserver::envtest::Cluster;
use apiserver::prost::Message;
use http_body_util::BodyExt;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb;
use serde_json::{Value, json};

use super::GROUP;

/// What client-go's metadata client asks for one object and for a watch (the informers' Accept).
const METADATA: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
/// What client-go's metadata client asks for a list.
const METADATA_LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// What kube-controller-manager's typed and dynamic clients ask for.
const PROTOBUF_OR_JSON: &str = "application/vnd.kubernetes.protobuf,application/json";

fn pizzas(namespace: &str) -> String {
    format!("/apis/{GROUP}/v1beta1/namespaces/{namespace}/pizzas")
}

/// A request through kube-apiserver as the cluster admin (kube-controller-manager runs as one in the recording).
async fn raw(
    cluster: &Cluster,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, http::HeaderMap, Vec<u8>) {
    let mut request = http::Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = body
        .map(|b| serde_json::to_vec(&b).unwrap())
        .unwrap_or_default();
    let response = cluster
        .admin_client()
        .send(request.body(kube::client::Body::from(body)).unwrap())
        .await
        .expect("request sent");
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

/// A JSON request that must succeed; its answer as JSON.
async fn ok(cluster: &Cluster, method: &str, path: &str, content_type: &str, body: Value) -> Value {
    let (code, _, answer) = raw(
        cluster,
        method,
        path,
        &[
            ("content-type", content_type),
            ("accept", "application/json"),
        ],
        Some(body),
    )
    .await;
    assert!(
        code < 300,
        "{method} {path}: {code} {}",
        String::from_utf8_lossy(&answer)
    );
    serde_json::from_slice(&answer).unwrap()
}

fn pizza(name: &str, metadata: Value) -> Value {
    let mut metadata = metadata;
    metadata["name"] = json!(name);
    json!({
        "apiVersion": format!("{GROUP}/v1beta1"), "kind": "Pizza",
        "metadata": metadata,
        "spec": {"toppings": [{"name": "salami", "quantity": 1}]}
    })
}

/// A create that may be refused: its status and answer.
async fn try_create_pizza(cluster: &Cluster, namespace: &str, name: &str) -> (u16, Value) {
    let (code, _, answer) = raw(
        cluster,
        "POST",
        &pizzas(namespace),
        &[
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ],
        Some(pizza(name, json!({}))),
    )
    .await;
    (code, serde_json::from_slice(&answer).unwrap())
}

async fn create_pizza(cluster: &Cluster, namespace: &str, name: &str, metadata: Value) -> Value {
    ok(
        cluster,
        "POST",
        &pizzas(namespace),
        "application/json",
        pizza(name, metadata),
    )
    .await
}

async fn namespace(cluster: &Cluster, name: &str) {
    ok(
        cluster,
        "POST",
        "/api/v1/namespaces",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await;
}

/// The metadata of one pizza as the garbage collector reads it (protobuf `PartialObjectMetadata`); `None` on 404.
async fn metadata(cluster: &Cluster, namespace: &str, name: &str) -> Option<pb::ObjectMeta> {
    let path = format!("{}/{name}", pizzas(namespace));
    let (code, headers, body) = raw(cluster, "GET", &path, &[("accept", METADATA)], None).await;
    if code == 404 {
        return None;
    }
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        headers["content-type"],
        "application/vnd.kubernetes.protobuf"
    );
    let (kind, raw) = decode_protobuf(&body).unwrap();
    assert_eq!(kind.kind, "PartialObjectMetadata");
    pb::PartialObjectMetadata::decode(&raw[..])
        .unwrap()
        .metadata
}

/// The names of a namespace's pizzas as the namespace and quota controllers list them (protobuf
/// `PartialObjectMetadataList`).
async fn metadata_list(cluster: &Cluster, namespace: &str) -> Vec<pb::ObjectMeta> {
    let (code, _, body) = raw(
        cluster,
        "GET",
        &pizzas(namespace),
        &[("accept", METADATA_LIST)],
        None,
    )
    .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let (kind, raw) = decode_protobuf(&body).unwrap();
    assert_eq!(kind.kind, "PartialObjectMetadataList");
    pb::PartialObjectMetadataList::decode(&raw[..])
        .unwrap()
        .items
        .into_iter()
        .filter_map(|i| i.metadata)
        .collect()
}

/// A metadata informer's watch: protobuf frames of `PartialObjectMetadata` events, read as they arrive.
struct MetadataWatch {
    body: kube::client::Body,
    buf: Vec<u8>,
}

impl MetadataWatch {
    /// Opens the informers' streaming list (`sendInitialEvents`) of a namespace's pizzas, as recorded.
    async fn open(cluster: &Cluster, namespace: &str) -> MetadataWatch {
        let path = format!(
            "{}?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=120&watch=true",
            pizzas(namespace)
        );
        let request = http::Request::get(path)
            .header("accept", METADATA)
            .body(kube::client::Body::from(Vec::new()))
            .unwrap();
        let response = cluster.admin_client().send(request).await.expect("watch");
        assert_eq!(
            response.status(),
            200,
            "the metadata informers' watch is served"
        );
        assert_eq!(
            response.headers()["content-type"],
            "application/vnd.kubernetes.protobuf;stream=watch"
        );
        MetadataWatch {
            body: response.into_body(),
            buf: Vec::new(),
        }
    }

    /// The next event: its type and the object's metadata.
    async fn next(&mut self) -> (String, pb::ObjectMeta) {
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_be_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if self.buf.len() >= 4 + len {
                    let frame: Vec<u8> = self.buf.drain(..4 + len).skip(4).collect();
                    let (event_type, object) = decode_protobuf_watch_event(&frame).unwrap();
                    let (kind, raw) = decode_protobuf(&object).unwrap();
                    assert_eq!(kind.kind, "PartialObjectMetadata", "{event_type}");
                    let object = pb::PartialObjectMetadata::decode(&raw[..]).unwrap();
                    return (event_type, object.metadata.unwrap_or_default());
                }
            }
            let frame = tokio::time::timeout(Duration::from_secs(20), self.body.frame())
                .await
                .expect("a watch event within 20 s")
                .expect("the watch is open")
                .expect("the watch is readable");
            if let Ok(data) = frame.into_data() {
                self.buf.extend_from_slice(&data);
            }
        }
    }

    /// Skips events until one of type `event_type` about `name` (bookmarks and other objects pass by).
    async fn until(&mut self, event_type: &str, name: &str) -> pb::ObjectMeta {
        loop {
            let (t, meta) = self.next().await;
            if t == event_type && meta.name.as_deref() == Some(name) {
                return meta;
            }
        }
    }
}

fn uid(meta: &pb::ObjectMeta) -> String {
    meta.uid.clone().unwrap_or_default()
}

fn rv(meta: &pb::ObjectMeta) -> String {
    meta.resource_version.clone().unwrap_or_default()
}

/// The garbage collector's delete of a dependent: preconditions on what it saw, background propagation; answered
/// with a `Status` (protobuf, as the recording shows).
async fn gc_delete(cluster: &Cluster, namespace: &str, seen: &pb::ObjectMeta) {
    let path = format!("{}/{}", pizzas(namespace), seen.name.as_deref().unwrap());
    let body = json!({
        "kind": "DeleteOptions", "apiVersion": "v1",
        "preconditions": {"uid": uid(seen), "resourceVersion": rv(seen)},
        "propagationPolicy": "Background"
    });
    let (code, _, answer) = raw(
        cluster,
        "DELETE",
        &path,
        &[
            ("accept", PROTOBUF_OR_JSON),
            ("content-type", "application/json"),
        ],
        Some(body),
    )
    .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(decode_protobuf(&answer).unwrap().0.kind, "Status");
}

/// The namespace controller empties a terminating namespace: deletecollection (answered with the list, in
/// protobuf), then metadata lists until nothing is left; a pizza with a finalizer keeps the namespace waiting
/// until the finalizer goes; then the namespace is finalized and goes away.
pub async fn namespace_deletion(cluster: &Cluster) {
    let ns = "kcm-namespace";
    namespace(cluster, ns).await;
    create_pizza(cluster, ns, "plain", json!({})).await;
    create_pizza(
        cluster,
        ns,
        "held",
        json!({"finalizers": ["example.com/hold"]}),
    )
    .await;
    let (code, _, _) = raw(
        cluster,
        "DELETE",
        &format!("/api/v1/namespaces/{ns}"),
        &[],
        None,
    )
    .await;
    assert_eq!(code, 200);

    let (code, _, answer) = raw(
        cluster,
        "DELETE",
        &pizzas(ns),
        &[
            ("accept", PROTOBUF_OR_JSON),
            ("content-type", "application/json"),
        ],
        Some(
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}),
        ),
    )
    .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(decode_protobuf(&answer).unwrap().0.kind, "PizzaList");

    let left = metadata_list(cluster, ns).await;
    let names: Vec<&str> = left.iter().filter_map(|m| m.name.as_deref()).collect();
    assert_eq!(
        names,
        ["held"],
        "the pizza with a finalizer stays, being deleted"
    );
    assert!(left[0].deletion_timestamp.is_some());

    // Whoever owns the finalizer removes it; the pizza goes, and the namespace is empty.
    ok(
        cluster,
        "PATCH",
        &format!("{}/held", pizzas(ns)),
        "application/merge-patch+json",
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    assert!(metadata_list(cluster, ns).await.is_empty());
    ok(
        cluster,
        "PUT",
        &format!("/api/v1/namespaces/{ns}/finalize"),
        "application/json",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "spec": {"finalizers": []}}),
    )
    .await;
    let mut gone = false;
    for _ in 0..50 {
        let (code, _, _) = raw(
            cluster,
            "GET",
            &format!("/api/v1/namespaces/{ns}"),
            &[],
            None,
        )
        .await;
        if code == 404 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the namespace goes once its content is gone");
}

/// The garbage collector, through its metadata informer: a pizza whose ConfigMap owner is deleted is deleted in
/// the background; a pizza owner deleted in the foreground waits for its blocking dependent and then loses its
/// `foregroundDeletion` finalizer by a merge patch; an owner deleted with `Orphan` leaves its dependent behind.
pub async fn garbage_collection(cluster: &Cluster) {
    let ns = "kcm-gc";
    namespace(cluster, ns).await;
    let mut watch = MetadataWatch::open(cluster, ns).await;
    // The initial events end with the bookmark of the streaming list.
    loop {
        let (t, meta) = watch.next().await;
        if t == "BOOKMARK" && meta.annotations.contains_key("k8s.io/initial-events-end") {
            break;
        }
    }

    // Background: the ConfigMap owner goes, the dependent pizza follows.
    let owner = ok(
        cluster,
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        "application/json",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-owner"}}),
    )
    .await;
    let reference = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "cm-owner",
        "uid": owner["metadata"]["uid"], "blockOwnerDeletion": true
    }]);
    create_pizza(
        cluster,
        ns,
        "cm-dependent",
        json!({"ownerReferences": reference}),
    )
    .await;
    let seen = watch.until("ADDED", "cm-dependent").await;
    assert_eq!(
        seen.owner_references.len(),
        1,
        "the informer sees the owner reference"
    );
    assert_eq!(seen.owner_references[0].name.as_deref(), Some("cm-owner"));
    let (code, _, _) = raw(
        cluster,
        "DELETE",
        &format!("/api/v1/namespaces/{ns}/configmaps/cm-owner"),
        &[],
        None,
    )
    .await;
    assert_eq!(code, 200);
    let current = metadata(cluster, ns, "cm-dependent")
        .await
        .expect("still there");
    gc_delete(cluster, ns, &current).await;
    watch.until("DELETED", "cm-dependent").await;
    assert!(metadata(cluster, ns, "cm-dependent").await.is_none());

    // Foreground: a pizza owner with a blocking pizza dependent.
    let parent = create_pizza(cluster, ns, "parent", json!({})).await;
    let reference = json!([{
        "apiVersion": format!("{GROUP}/v1beta1"), "kind": "Pizza", "name": "parent",
        "uid": parent["metadata"]["uid"], "blockOwnerDeletion": true
    }]);
    create_pizza(cluster, ns, "child", json!({"ownerReferences": reference})).await;
    watch.until("ADDED", "child").await;
    let deleting = ok(
        cluster,
        "DELETE",
        &format!("{}/parent", pizzas(ns)),
        "application/json",
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(
        deleting["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    let parent_seen = watch.until("MODIFIED", "parent").await;
    assert!(parent_seen.deletion_timestamp.is_some());
    assert_eq!(parent_seen.finalizers, ["foregroundDeletion"]);
    // The owner stays while its blocking dependent exists.
    assert!(metadata(cluster, ns, "parent").await.is_some());
    let child = metadata(cluster, ns, "child").await.expect("child");
    gc_delete(cluster, ns, &child).await;
    watch.until("DELETED", "child").await;
    // Then the collector removes the owner's finalizer, asking for metadata back, as recorded.
    let parent_now = metadata(cluster, ns, "parent")
        .await
        .expect("parent waits for the collector");
    let (code, headers, answer) = raw(
        cluster,
        "PATCH",
        &format!("{}/parent", pizzas(ns)),
        &[
            ("accept", METADATA),
            ("content-type", "application/merge-patch+json"),
        ],
        Some(json!({"metadata": {"resourceVersion": rv(&parent_now), "finalizers": null}})),
    )
    .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(
        headers["content-type"],
        "application/vnd.kubernetes.protobuf"
    );
    assert_eq!(
        decode_protobuf(&answer).unwrap().0.kind,
        "PartialObjectMetadata"
    );
    watch.until("DELETED", "parent").await;

    // Orphan: the owner gets the `orphan` finalizer; the collector drops the reference from the dependent and then
    // the finalizer from the owner; the dependent stays.
    let parent = create_pizza(cluster, ns, "orphaner", json!({})).await;
    let reference = json!([{
        "apiVersion": format!("{GROUP}/v1beta1"), "kind": "Pizza", "name": "orphaner",
        "uid": parent["metadata"]["uid"]
    }]);
    create_pizza(cluster, ns, "orphan", json!({"ownerReferences": reference})).await;
    let deleting = ok(
        cluster,
        "DELETE",
        &format!("{}/orphaner", pizzas(ns)),
        "application/json",
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"}),
    )
    .await;
    assert_eq!(deleting["metadata"]["finalizers"], json!(["orphan"]));
    let orphan = metadata(cluster, ns, "orphan").await.expect("orphan");
    ok(
        cluster,
        "PATCH",
        &format!("{}/orphan", pizzas(ns)),
        "application/merge-patch+json",
        json!({"metadata": {"ownerReferences": [], "uid": uid(&orphan)}}),
    )
    .await;
    ok(
        cluster,
        "PATCH",
        &format!("{}/orphaner", pizzas(ns)),
        "application/merge-patch+json",
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    watch.until("DELETED", "orphaner").await;
    let orphan = metadata(cluster, ns, "orphan")
        .await
        .expect("the dependent stays");
    assert!(orphan.owner_references.is_empty());
}

/// Object-count quotas: the quota controller's recount (a metadata list) fills the quota's status; this server's
/// `ResourceQuota` admission charges each create and refuses the one past the limit with upstream's text.
pub async fn resource_quota(cluster: &Cluster) {
    let ns = "kcm-quota";
    let counted = format!("count/pizzas.{GROUP}");
    namespace(cluster, ns).await;
    let quotas = format!("/api/v1/namespaces/{ns}/resourcequotas");
    ok(
        cluster,
        "POST",
        &quotas,
        "application/json",
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pizza-count"},
               "spec": {"hard": {&counted: "2"}}}),
    )
    .await;
    // The quota controller's sync: status.hard from spec.hard, status.used from a metadata list.
    let recount = async |cluster: &Cluster| {
        let used = metadata_list(cluster, ns).await.len();
        let quota = ok(
            cluster,
            "GET",
            &format!("{quotas}/pizza-count"),
            "application/json",
            Value::Null,
        )
        .await;
        let mut synced = quota.clone();
        synced["status"] =
            json!({"hard": quota["spec"]["hard"], "used": {&counted: used.to_string()}});
        ok(
            cluster,
            "PUT",
            &format!("{quotas}/pizza-count/status"),
            "application/json",
            synced,
        )
        .await;
    };
    recount(cluster).await;

    for name in ["first", "second"] {
        create_pizza(cluster, ns, name, json!({})).await;
    }
    let quota = ok(
        cluster,
        "GET",
        &format!("{quotas}/pizza-count"),
        "application/json",
        Value::Null,
    )
    .await;
    assert_eq!(
        quota["status"]["used"][&counted], "2",
        "each create is charged: {quota}"
    );

    let (code, status) = try_create_pizza(cluster, ns, "third").await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        format!(
            "pizzas.{GROUP} \"third\" is forbidden: exceeded quota: pizza-count, requested: {counted}=1, used: {counted}=2, limited: {counted}=2"
        )
    );
    assert!(
        metadata(cluster, ns, "third").await.is_none(),
        "nothing was created"
    );

    // A delete frees a unit once the controller recounts.
    let (code, _, _) = raw(
        cluster,
        "DELETE",
        &format!("{}/first", pizzas(ns)),
        &[],
        None,
    )
    .await;
    assert_eq!(code, 200);
    recount(cluster).await;
    create_pizza(cluster, ns, "third", json!({})).await;

    // A quota the controller has not counted yet refuses, as upstream.
    let (code, _, _) = raw(
        cluster,
        "DELETE",
        &format!("{quotas}/pizza-count"),
        &[],
        None,
    )
    .await;
    assert_eq!(code, 200);
    ok(
        cluster,
        "POST",
        &quotas,
        "application/json",
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "uncounted"},
               "spec": {"hard": {&counted: "10"}}}),
    )
    .await;
    let uncounted = ok(
        cluster,
        "GET",
        &format!("{quotas}/uncounted"),
        "application/json",
        Value::Null,
    )
    .await;
    let mut half = uncounted.clone();
    half["status"] = json!({"hard": {&counted: "10"}});
    ok(
        cluster,
        "PUT",
        &format!("{quotas}/uncounted/status"),
        "application/json",
        half,
    )
    .await;
    let mut refused = String::new();
    for _ in 0..50 {
        let (code, answer) = try_create_pizza(cluster, ns, "fourth").await;
        if code == 403 {
            refused = answer["message"].to_string();
            break;
        }
        // The informer had not seen the new quota yet: undo and try again.
        let _ = raw(
            cluster,
            "DELETE",
            &format!("{}/fourth", pizzas(ns)),
            &[],
            None,
        )
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        refused.contains(&format!(
            "status unknown for quota: uncounted, resources: {counted}"
        )),
        "{refused}"
    );
}
