//! Metadata-only responses (`PartialObjectMetadata`), the form in which kube-controller-manager's garbage collector,
//! quota controller and namespace controller see every resource of a cluster (client-go's metadata client), compared
//! with what kube-apiserver 1.36 answers for a CRD of the same shape. The fixtures and how they were made are in
//! `tests/fixtures/metadata` (`record.sh`, `README.md`); this test makes the same objects and the same requests and
//! compares the answers after the same normalization (uids, resourceVersions, times, continue tokens, ages).

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use apiserver::codec::{decode_protobuf, decode_protobuf_watch_event};
use apiserver::prost::Message;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb;
use serde_json::{Value, json};
use support::{NO_COST_CONTROLLER, TestServer, parse};

const P: &str = "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/ns1/pizzas";
const J_POM: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

const J_POML: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
/// What client-go's metadata informers send for a watch (the first clause wins: protobuf).
const INFORMER_WATCH: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
/// The manager of every write, as `record.sh`'s curl user agent made it upstream.
const MANAGER: &str = "fieldManager=record.sh";

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/metadata")
}

/// A recorded exchange, normalized (`NAME.normalized.json`).
fn fixture(name: &str) -> Value {
    let path = fixtures().join(format!("{name}.normalized.json"));
    parse(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// A recorded protobuf body, as sent.
fn fixture_bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).expect("fixture")
}

/// `record.sh`'s normalization (its README): uids, resourceVersions, continue tokens, times and ages become
/// placeholders; what stays must be equal.
fn normalize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match (key.as_str(), &*value) {
                    ("uid", Value::String(s)) if !s.is_empty() => *value = json!("UID"),
                    ("resourceVersion", Value::String(s)) if !s.is_empty() => *value = json!("RV"),
                    ("continue", Value::String(s)) if !s.is_empty() => *value = json!("CONTINUE"),
                    ("creationTimestamp" | "deletionTimestamp" | "time", Value::String(_)) => {
                        *value = json!("TIME")
                    }
                    ("fieldsV1", _) => normalize_fields(value),
                    _ => normalize(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// A fieldsV1 set: the owner's uid inside `k:{"uid":...}` keys.
fn normalize_fields(value: &mut Value) {
    if let Value::Object(map) = value {
        let entries = std::mem::take(map);
        for (key, mut inner) in entries {
            normalize_fields(&mut inner);
            let key = match key.find("\"uid\":\"") {
                Some(at) if key.starts_with("k:{") => {
                    let end = key[at + 7..]
                        .find('"')
                        .map(|e| at + 7 + e)
                        .unwrap_or(key.len());
                    format!("{}UID{}", &key[..at + 7], &key[end..])
                }
                _ => key,
            };
            map.insert(key, inner);
        }
    }
}

/// Table ages (`"41s"`) in rows' cells.
fn normalize_ages(table: &mut Value) {
    if let Some(rows) = table["rows"].as_array_mut() {
        for row in rows {
            if let Some(age) = row["cells"].as_array_mut().and_then(|c| c.last_mut())
                && age.is_string()
                && !age.as_str().unwrap_or_default().is_empty()
            {
                *age = json!("AGE");
            }
        }
    }
}

/// The server with the fixtures' objects: toppings for their pizzas, then margherita and hawaii as `record.sh`
/// made them (the request bodies of `setup/01` and `setup/02`).
async fn server_with_pizzas() -> TestServer {
    let server = TestServer::start(&[NO_COST_CONTROLLER, "--storage-backend=memory"]).await;
    let topping = json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1alpha1", "kind": "Topping",
        "metadata": {"name": "tomato"}, "spec": {"cost": 0.5}
    });
    let (code, _) = support::call(
        &server,
        "POST",
        "/apis/restaurant.programming-kubernetes.info/v1alpha1/toppings",
        None,
        topping,
    )
    .await;
    assert_eq!(code, 201);
    for setup in ["setup/01-create-margherita", "setup/02-create-hawaii"] {
        let body = fixture(setup)["request"]["body"].clone();
        create(&server, body).await;
    }
    server
}

async fn create(server: &TestServer, body: Value) -> Value {
    let (code, created) =
        support::call(server, "POST", &format!("{P}?{MANAGER}"), None, body).await;
    assert_eq!(code, 201, "{created}");
    created
}

async fn write(server: &TestServer, method: &str, path: &str, body: Value) {
    let headers: Vec<(&str, &str)> = match method {
        "PATCH" => vec![("content-type", "application/merge-patch+json")],
        _ => vec![("content-type", "application/json")],
    };
    let body = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(&body).unwrap()
    };
    let (code, _, answer) = server
        .raw(method, &format!("{path}?{MANAGER}"), &headers, body)
        .await;
    assert!(
        code < 300,
        "{method} {path}: {code} {}",
        String::from_utf8_lossy(&answer)
    );
}

fn pizza(name: &str) -> Value {
    json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1beta1", "kind": "Pizza",
        "metadata": {"name": name},
        "spec": {"toppings": [{"name": "tomato", "quantity": 1}]}
    })
}

/// The owner reference of `setup/02` names a ConfigMap whose uid differs in every recording; ours is the
/// normalized one, so the comparison does not depend on it.
async fn get(server: &TestServer, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let (code, headers, body) = server.raw("GET", path, &[("accept", accept)], vec![]).await;
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (code, content_type, body)
}

/// JSON GETs and LISTs as PartialObjectMetadata(List): status, content type and body as kube-apiserver's.
#[tokio::test(flavor = "multi_thread")]
async fn json_gets_and_lists_as_upstream() {
    let server = server_with_pizzas().await;
    for name in [
        "get/01-margherita-json-v1",
        "get/03-margherita-json-v1beta1",
        "get/06-hawaii-json-v1",
        "list/01-json",
        "list/03-json-limit1",
        "list/06-json-rv0",
        "list/08-json-v1beta1",
        "not-acceptable/01-list-as-pom-json",
        "not-acceptable/02-list-as-pom-protobuf",
        "not-acceptable/12-list-as-pom-then-json",
        "not-acceptable/10-get-as-pom-v2-then-json",
        "not-acceptable/11-get-as-pom-no-gv-then-json",
    ] {
        let recorded = fixture(name);
        let request = &recorded["request"];
        // The normalization turned `resourceVersion=0` into `resourceVersion=RV` (list/06).
        let path = request["path"]
            .as_str()
            .unwrap()
            .replace("resourceVersion=RV", "resourceVersion=0");
        let path = path.as_str();
        let (code, content_type, body) =
            get(&server, path, request["accept"].as_str().unwrap()).await;
        assert_eq!(
            code,
            recorded["status"],
            "{name}: {}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(content_type, recorded["contentType"], "{name}");
        let mut ours = parse(&body);
        normalize(&mut ours);
        // Only the metadata views are ours to match byte for byte; a full object is the pizza type's own.
        let mut expected = recorded["body"].clone();
        // The message names the Go type of the refused object: a CRD's is unstructured, a compiled server's (and
        // ours) the versioned list type.
        if let Some(message) = expected["message"].as_str() {
            expected["message"] =
                json!(message.replace("*unstructured.UnstructuredList", "*v1beta1.PizzaList"));
        }
        let expected = &expected;
        if name.contains("-then-json") {
            assert_eq!(ours["kind"], expected["kind"], "{name}");
            continue;
        }
        assert_eq!(
            serde_json::to_string_pretty(&ours).unwrap(),
            serde_json::to_string_pretty(expected).unwrap(),
            "{name}"
        );
    }

    // The second page of a one-item list, through our own continue token.
    let (_, _, body) = get(&server, &format!("{P}?limit=1"), J_POML).await;
    let token = parse(&body)["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _, body) = get(&server, &format!("{P}?limit=1&continue={token}"), J_POML).await;
    assert_eq!(code, 200);
    let mut page = parse(&body);
    normalize(&mut page);
    assert_eq!(page, fixture("list/04-json-limit1-page2")["body"]);
}

/// The same in protobuf: the envelope's kind and version, and the decoded message equal after normalization.
#[tokio::test(flavor = "multi_thread")]
async fn protobuf_gets_and_lists_as_upstream() {
    let server = server_with_pizzas().await;
    for (name, list) in [
        ("get/02-margherita-protobuf-v1", false),
        ("get/04-margherita-protobuf-v1beta1", false),
        ("get/05-margherita-informer-accept", false),
        ("get/07-hawaii-protobuf-v1", false),
        ("list/02-protobuf", true),
        ("list/05-protobuf-limit1", true),
        ("list/07-informer-accept", true),
    ] {
        let recorded = fixture(name);
        let request = &recorded["request"];
        let (code, content_type, body) = get(
            &server,
            request["path"].as_str().unwrap(),
            request["accept"].as_str().unwrap(),
        )
        .await;
        assert_eq!(code, recorded["status"], "{name}");
        assert_eq!(content_type, recorded["contentType"], "{name}");
        let theirs = fixture_bytes(&format!("{name}.pb"));
        let (their_kind, their_raw) = decode_protobuf(&theirs).unwrap();
        let (our_kind, our_raw) = decode_protobuf(&body).unwrap();
        assert_eq!(our_kind, their_kind, "{name}");
        if list {
            let mut ours = pb::PartialObjectMetadataList::decode(&our_raw[..]).unwrap();
            let mut theirs = pb::PartialObjectMetadataList::decode(&their_raw[..]).unwrap();
            for l in [&mut ours, &mut theirs] {
                normalize_list_meta(l.metadata.get_or_insert_default());
                l.items.iter_mut().for_each(normalize_pb);
            }
            assert_eq!(ours, theirs, "{name}");
        } else {
            let mut ours = pb::PartialObjectMetadata::decode(&our_raw[..]).unwrap();
            let mut theirs = pb::PartialObjectMetadata::decode(&their_raw[..]).unwrap();
            normalize_pb(&mut ours);
            normalize_pb(&mut theirs);
            assert_eq!(ours, theirs, "{name}");
        }
    }
}

fn normalize_list_meta(meta: &mut pb::ListMeta) {
    if meta
        .resource_version
        .as_deref()
        .is_some_and(|s| !s.is_empty())
    {
        meta.resource_version = Some("RV".into());
    }
    if meta.r#continue.as_deref().is_some_and(|s| !s.is_empty()) {
        meta.r#continue = Some("CONTINUE".into());
    }
}

fn normalize_pb(object: &mut pb::PartialObjectMetadata) {
    let Some(meta) = object.metadata.as_mut() else {
        return;
    };
    meta.uid = meta.uid.as_ref().map(|_| "UID".into());
    meta.resource_version = meta.resource_version.as_ref().map(|_| "RV".into());
    meta.creation_timestamp = meta
        .creation_timestamp
        .as_ref()
        .map(|_| pb::Time::default());
    for owner in &mut meta.owner_references {
        owner.uid = Some("UID".into());
    }
    for entry in &mut meta.managed_fields {
        entry.time = entry.time.as_ref().map(|_| pb::Time::default());
        if let Some(raw) = entry.fields_v1.as_mut().and_then(|f| f.raw.as_mut()) {
            let mut fields: Value = serde_json::from_slice(raw).unwrap();
            normalize_fields(&mut fields);
            *raw = serde_json::to_vec(&fields).unwrap();
        }
    }
}

/// JSON watch lines: the events of a stream, normalized.
fn json_events(buf: &[u8]) -> Vec<Value> {
    buf.split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            let mut event = parse(line);
            normalize(&mut event);
            event
        })
        .collect()
}

/// Reads a JSON watch until it has `count` object events (bookmarks aside) and returns them, normalized.
async fn read_object_events(watch: &mut support::Stream, count: usize, what: &str) -> Vec<Value> {
    let objects = |buf: &[u8]| -> Vec<Value> {
        json_events(buf)
            .into_iter()
            .filter(|e| e["type"] != "BOOKMARK")
            .collect()
    };
    watch
        .read_until(Duration::from_secs(10), what, |buf| {
            objects(buf).len() >= count
        })
        .await;
    objects(&watch.buf)
}

/// The events of a recorded watch, without plain bookmarks (their number depends on timing; the recording drops
/// them too).
fn recorded_events(name: &str) -> Vec<Value> {
    fixture(name)["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn without_plain_bookmarks(events: Vec<Value>) -> Vec<Value> {
    events
        .into_iter()
        .filter(|e| {
            e["type"] != "BOOKMARK"
                || !e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"].is_null()
        })
        .collect()
}

/// WATCH as PartialObjectMetadata, the request of client-go's metadata informers (kube-controller-manager's garbage
/// collector and quota controller): from a resourceVersion with a change, a create and a delete; and as a
/// streaming list (`sendInitialEvents`) ending with the `initial-events-end` bookmark. JSON events equal
/// kube-apiserver's; the protobuf stream (chosen by the informers' Accept) carries the same events.
#[tokio::test(flavor = "multi_thread")]
async fn metadata_watches_as_upstream() {
    let server = server_with_pizzas().await;
    let (_, _, body) = get(&server, P, J_POML).await;
    let rv = parse(&body)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    let query = format!("watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=4");
    let (code, headers, mut json_watch) = server.stream(&format!("{P}?{query}"), J_POM).await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "application/json");
    let (code, headers, mut pb_watch) =
        server.stream(&format!("{P}?{query}"), INFORMER_WATCH).await;
    assert_eq!(code, 200);
    assert_eq!(
        headers["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );

    write(
        &server,
        "PATCH",
        &format!("{P}/margherita"),
        json!({"metadata": {"labels": {"a": "2"}}}),
    )
    .await;
    create(&server, pizza("funghi")).await;
    write(&server, "DELETE", &format!("{P}/funghi"), Value::Null).await;

    let ours = read_object_events(&mut json_watch, 3, "three JSON events").await;
    assert_eq!(ours, recorded_events("watch/01-from-rv-json"));

    pb_watch
        .read_until(Duration::from_secs(10), "three protobuf events", |buf| {
            pb_frames(buf)
                .iter()
                .filter(|(t, _)| t != "BOOKMARK")
                .count()
                >= 3
        })
        .await;
    let ours: Vec<(String, pb::PartialObjectMetadata)> = pb_frames(&pb_watch.buf)
        .into_iter()
        .filter(|(t, _)| t != "BOOKMARK")
        .collect();
    let theirs = pb_frames(&fixture_bytes("watch/02-from-rv-protobuf.pb"));
    let theirs: Vec<_> = theirs
        .into_iter()
        .filter(|(t, _)| t != "BOOKMARK")
        .collect();
    assert_eq!(ours, theirs);

    // A streaming list: the objects, then the bookmark that ends them; JSON as recorded, with or without a
    // resourceVersion.
    for (name, extra) in [
        ("watch/03-watchlist-json", String::new()),
        (
            "watch/05-watchlist-rv0-json",
            "&resourceVersion=0".to_string(),
        ),
    ] {
        let query = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=3";
        let (code, _, mut watch) = server.stream(&format!("{P}?{query}{extra}"), J_POM).await;
        assert_eq!(code, 200);
        watch
            .read_until(Duration::from_secs(10), "the initial events' end", |buf| {
                String::from_utf8_lossy(buf).contains("initial-events-end")
            })
            .await;
        assert_eq!(
            without_plain_bookmarks(json_events(&watch.buf)),
            recorded_events(name),
            "{name}"
        );
    }
}

/// The protobuf frames of a watch (4-byte length, a bare WatchEvent whose object is enveloped), each object
/// decoded as PartialObjectMetadata and normalized.
fn pb_frames(mut buf: &[u8]) -> Vec<(String, pb::PartialObjectMetadata)> {
    let mut frames = Vec::new();
    while buf.len() >= 4 {
        let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
        if buf.len() < 4 + len {
            break;
        }
        let (event_type, object) = decode_protobuf_watch_event(&buf[4..4 + len]).unwrap();
        let (kind, raw) = decode_protobuf(&object).unwrap();
        assert_eq!(kind.kind, "PartialObjectMetadata");
        let mut object = pb::PartialObjectMetadata::decode(&raw[..]).unwrap();
        normalize_pb(&mut object);
        frames.push((event_type, object));
        buf = &buf[4 + len..];
    }
    frames
}

/// A watch with `as=PartialObjectMetadataList` is not refused: kube-apiserver answers 200 and ends the stream,
/// having sent nothing, at the first object (an object cannot become a list); an idle one stays open.
#[tokio::test(flavor = "multi_thread")]
async fn a_metadata_list_watch_ends_at_its_first_object() {
    let server = server_with_pizzas().await;
    assert_eq!(
        fixture("watch/13-as-list-from-rv-with-write-json")["status"],
        200
    );
    let (_, _, body) = get(&server, P, J_POML).await;
    let rv = parse(&body)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    // From a resourceVersion: open until a change, then over with an empty body.
    let (code, headers, mut watch) = server
        .stream(
            &format!("{P}?watch=1&resourceVersion={rv}&timeoutSeconds=20"),
            J_POML,
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "application/json");
    let idle = tokio::time::timeout(
        Duration::from_millis(500),
        watch.read_until(Duration::from_secs(1), "nothing", |buf| !buf.is_empty()),
    )
    .await;
    assert!(idle.is_err(), "an idle watch stays open and silent");
    write(
        &server,
        "PATCH",
        &format!("{P}/margherita"),
        json!({"metadata": {"labels": {"a": "4"}}}),
    )
    .await;
    assert!(watch.buf.is_empty());
    watch
        .end(Duration::from_secs(5))
        .await
        .expect("a clean end");

    // With initial events: over at once.
    let query = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=20";
    let (code, _, watch) = server.stream(&format!("{P}?{query}"), J_POML).await;
    assert_eq!(code, 200);
    watch
        .end(Duration::from_secs(2))
        .await
        .expect("a clean end");
}

/// A Table watch (`kubectl get -w`): each event a Table of one row, the column definitions in the first event only
/// (`null` after), bookmarks a row with an empty name; as kube-apiserver.
#[tokio::test(flavor = "multi_thread")]
async fn table_watches_send_their_columns_once() {
    let server = server_with_pizzas().await;
    let recorded = recorded_events("watch/19-table-from-rv-bookmarks-json");
    assert!(recorded[0]["object"]["columnDefinitions"].is_array());
    assert!(
        recorded[1..]
            .iter()
            .all(|e| e["object"]["columnDefinitions"].is_null())
    );

    let (_, _, body) = get(&server, P, J_POML).await;
    let rv = parse(&body)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let accept = "application/json;as=Table;g=meta.k8s.io;v=v1";
    let path =
        format!("{P}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=10");
    // Two watchers at once share encoded events; each still gets the columns in its own first event only.
    let (_, _, mut first) = server.stream(&path, accept).await;
    let (_, _, mut second) = server.stream(&path, accept).await;
    write(
        &server,
        "PATCH",
        &format!("{P}/margherita"),
        json!({"metadata": {"labels": {"a": "6"}}}),
    )
    .await;
    create(&server, pizza("calzone")).await;
    write(&server, "DELETE", &format!("{P}/calzone"), Value::Null).await;
    for watch in [&mut first, &mut second] {
        let events = read_object_events(watch, 3, "three Table events").await;
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["MODIFIED", "ADDED", "DELETED"]);
        assert!(events[0]["object"]["columnDefinitions"].is_array());
        for event in &events[1..] {
            assert!(
                event["object"]
                    .as_object()
                    .unwrap()
                    .contains_key("columnDefinitions")
            );
            assert!(event["object"]["columnDefinitions"].is_null(), "{event}");
        }
        for event in &events {
            let mut table = event["object"].clone();
            normalize_ages(&mut table);
            assert_eq!(table["rows"].as_array().unwrap().len(), 1);
            assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        }
    }
}
