//! CBOR (`application/cbor`, watches `application/cbor-seq`) against the real server over HTTPS: bodies in,
//! objects, lists, `Table`, `PartialObjectMetadataList`, `Status` errors and watch events out.
//!
//! Responses are read with `ciborium`'s own decoder (not the server's transcoder) into JSON values and compared
//! with what the same requests answer in JSON; `tests/python/cbor_client.py` does the same with Python's `cbor2`.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{NO_COST_CONTROLLER, TestServer};

const GROUP: &str = "/apis/restaurant.programming-kubernetes.info";
const CBOR: (&str, &str) = ("content-type", "application/cbor");
const ACCEPT_CBOR: (&str, &str) = ("accept", "application/cbor");
const TAG: [u8; 3] = [0xd9, 0xd9, 0xf7];

fn toppings(version: &str) -> String {
    format!("{GROUP}/{version}/toppings")
}

fn cbor(value: &Value) -> Vec<u8> {
    let mut buf = TAG.to_vec();
    ciborium::into_writer(value, &mut buf).unwrap();
    buf
}

/// A CBOR data item as ciborium reads it, as JSON: tags stand for their content (the self-described tag
/// encloses every object), text is text, and only what JSON can hold is expected.
fn json_of(value: ciborium::Value) -> Value {
    use ciborium::Value as C;
    match value {
        C::Tag(_, inner) => json_of(*inner),
        C::Integer(i) => {
            let i = i128::from(i);
            match u64::try_from(i) {
                Ok(u) => json!(u),
                Err(_) => json!(i64::try_from(i).expect("an integer JSON can hold")),
            }
        }
        C::Float(f) => json!(f),
        C::Text(t) => Value::String(t),
        C::Bool(b) => Value::Bool(b),
        C::Null => Value::Null,
        C::Array(items) => Value::Array(items.into_iter().map(json_of).collect()),
        C::Map(entries) => Value::Object(
            entries
                .into_iter()
                .map(|(k, v)| match k {
                    C::Text(k) => (k, json_of(v)),
                    other => panic!("a map key that is not text: {other:?}"),
                })
                .collect(),
        ),
        other => panic!("not a JSON value: {other:?}"),
    }
}

/// One CBOR item, decoded by ciborium (not the server's decoder) into JSON.
fn decode(body: &[u8]) -> Value {
    let mut rest = body;
    let value: ciborium::Value =
        ciborium::from_reader(&mut rest).unwrap_or_else(|e| panic!("not CBOR ({e}): {body:02x?}"));
    assert!(rest.is_empty(), "{} bytes after the item", rest.len());
    json_of(value)
}

/// Every complete item at the start of a CBOR sequence (a partly received one is left out).
fn decode_sequence(mut data: &[u8]) -> Vec<Value> {
    let mut items = Vec::new();
    while !data.is_empty() {
        let mut attempt = data;
        match ciborium::from_reader::<ciborium::Value, _>(&mut attempt) {
            Ok(item) => {
                items.push(json_of(item));
                data = attempt;
            }
            Err(_) => break,
        }
    }
    items
}

fn topping(name: &str, cost: f64) -> Value {
    json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1alpha1",
        "kind": "Topping",
        "metadata": {"name": name},
        "spec": {"cost": cost}
    })
}

/// Asserts a CBOR `Status` failure.
fn assert_cbor_status(
    code: u16,
    headers: &http::HeaderMap,
    body: &[u8],
    want: u16,
    reason: &str,
) -> Value {
    assert_eq!(code, want, "{}", String::from_utf8_lossy(body));
    assert_eq!(headers["content-type"], "application/cbor");
    assert!(body.starts_with(&TAG), "the Status is self-described CBOR");
    let status = decode(body);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["apiVersion"], "v1");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["code"], want);
    assert_eq!(status["reason"], reason, "{status}");
    status
}

#[tokio::test(flavor = "multi_thread")]
async fn cbor_bodies_objects_lists_tables_and_errors() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    let list = toppings("v1alpha1");

    // Create with a CBOR body, answered in CBOR.
    let (code, headers, body) = server
        .raw(
            "POST",
            &list,
            &[CBOR, ACCEPT_CBOR],
            cbor(&topping("salami", 0.25)),
        )
        .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["content-type"], "application/cbor");
    assert!(body.starts_with(&TAG));
    let created = decode(&body);
    assert_eq!(created["kind"], "Topping");
    assert_eq!(created["metadata"]["name"], "salami");
    assert_eq!(created["spec"]["cost"], 0.25);
    assert!(
        created["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );

    // GET in CBOR is the JSON answer, field for field, in both versions (and from the kept encodings).
    for version in ["v1alpha1", "v1beta1", "v1beta1"] {
        let path = format!("{}/salami", toppings(version));
        let (code, headers, body) = server.raw("GET", &path, &[ACCEPT_CBOR], vec![]).await;
        assert_eq!(code, 200);
        assert_eq!(headers["content-type"], "application/cbor");
        let (_, _, json) = server.raw("GET", &path, &[], vec![]).await;
        assert_eq!(decode(&body), support::parse(&json), "{version}");
    }

    // A body with strings and keys as CBOR byte strings (as upstream's encoder writes them) and indefinite
    // lengths is read the same.
    let byte_string = |buf: &mut Vec<u8>, s: &str| {
        match s.len() {
            n @ 0..=23 => buf.push(0x40 | n as u8),
            n => buf.extend_from_slice(&[0x58, n as u8]),
        }
        buf.extend_from_slice(s.as_bytes());
    };
    let mut upstream_style = TAG.to_vec();
    upstream_style.push(0xbf);
    for s in [
        "apiVersion",
        "restaurant.programming-kubernetes.info/v1alpha1",
        "kind",
        "Topping",
        "metadata",
    ] {
        byte_string(&mut upstream_style, s);
    }
    upstream_style.push(0xa1);
    byte_string(&mut upstream_style, "name");
    byte_string(&mut upstream_style, "tomato");
    byte_string(&mut upstream_style, "spec");
    upstream_style.push(0xa1);
    byte_string(&mut upstream_style, "cost");
    // 0.5 as a half-precision float, then the end of the indefinite-length map.
    upstream_style.extend_from_slice(&[0xf9, 0x38, 0x00, 0xff]);
    let (code, _, body) = server.raw("POST", &list, &[CBOR], upstream_style).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let created = support::parse(&body);
    assert_eq!(created["metadata"]["name"], "tomato");
    assert_eq!(created["spec"]["cost"], 0.5);

    // Update with a CBOR body.
    let mut salami = decode(
        &server
            .raw("GET", &format!("{list}/salami"), &[ACCEPT_CBOR], vec![])
            .await
            .2,
    );
    salami["spec"]["cost"] = json!(0.375);
    let (code, _, body) = server
        .raw(
            "PUT",
            &format!("{list}/salami"),
            &[CBOR, ACCEPT_CBOR],
            cbor(&salami),
        )
        .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(decode(&body)["spec"]["cost"], 0.375);

    // Server-side apply with `application/apply-patch+cbor` creates.
    let apply = ("content-type", "application/apply-patch+cbor");
    let (code, _, body) = server
        .raw(
            "PATCH",
            &format!("{list}/ham?fieldManager=cbor-test"),
            &[apply, ACCEPT_CBOR],
            cbor(&topping("ham", 1.5)),
        )
        .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let ham = decode(&body);
    assert_eq!(ham["spec"]["cost"], 1.5);
    assert_eq!(ham["metadata"]["managedFields"][0]["manager"], "cbor-test");
    assert_eq!(ham["metadata"]["managedFields"][0]["operation"], "Apply");

    // The list in CBOR is the JSON list.
    let (code, headers, body) = server.raw("GET", &list, &[ACCEPT_CBOR], vec![]).await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "application/cbor");
    let (_, _, json) = server.raw("GET", &list, &[], vec![]).await;
    let listed = decode(&body);
    assert_eq!(listed, support::parse(&json));
    assert_eq!(listed["kind"], "ToppingList");
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ham", "salami", "tomato"]);

    // Table and PartialObjectMetadataList in CBOR.
    let table = ("accept", "application/cbor;as=Table;g=meta.k8s.io;v=v1");
    let (code, headers, body) = server.raw("GET", &list, &[table], vec![]).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["content-type"], "application/cbor");
    let table = decode(&body);
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(table["columnDefinitions"][0]["name"], "Name");
    assert_eq!(table["rows"].as_array().unwrap().len(), 3);
    assert_eq!(table["rows"][0]["cells"][0], "ham");
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    let partial = (
        "accept",
        "application/cbor;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    );
    let (code, _, body) = server.raw("GET", &list, &[partial], vec![]).await;
    assert_eq!(code, 200);
    let partial = decode(&body);
    assert_eq!(partial["kind"], "PartialObjectMetadataList");
    assert_eq!(partial["items"][1]["metadata"]["name"], "salami");
    assert!(partial["items"][1].get("spec").is_none());

    // The scale subresource reads a CBOR `Scale` (it answers JSON only).
    let ovens = format!("{GROUP}/v1beta1/namespaces/default/ovens");
    let oven = json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
        "kind": "Oven",
        "metadata": {"name": "main"},
        "spec": {"replicas": 1}
    });
    let (code, _, body) = server.raw("POST", &ovens, &[CBOR], cbor(&oven)).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let scale = json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": "main", "namespace": "default"},
        "spec": {"replicas": 3}
    });
    let (code, _, body) = server
        .raw("PUT", &format!("{ovens}/main/scale"), &[CBOR], cbor(&scale))
        .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(support::parse(&body)["spec"]["replicas"], 3);

    // Errors are `Status` objects in CBOR.
    let (code, headers, body) = server
        .raw("GET", &format!("{list}/nope"), &[ACCEPT_CBOR], vec![])
        .await;
    let status = assert_cbor_status(code, &headers, &body, 404, "NotFound");
    assert_eq!(
        status["message"],
        "toppings.restaurant.programming-kubernetes.info \"nope\" not found"
    );
    let (code, headers, body) = server
        .raw(
            "POST",
            &list,
            &[CBOR, ACCEPT_CBOR],
            cbor(&topping("salami", 1.0)),
        )
        .await;
    assert_cbor_status(code, &headers, &body, 409, "AlreadyExists");

    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_cbor_is_a_400_and_changes_nothing() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    let list = toppings("v1alpha1");
    let mut truncated = cbor(&topping("cut", 1.0));
    truncated.truncate(truncated.len() - 3);
    let mut trailing = cbor(&topping("trail", 1.0));
    trailing.push(0x00);
    // {"kind": "Topping", "kind": "Topping"}: duplicate keys are refused whatever the field validation.
    let duplicate = [
        &TAG[..],
        &[0xa2, 0x64],
        b"kind",
        &[0x67],
        b"Topping",
        &[0x64],
        b"kind",
        &[0x67],
        b"Topping",
    ]
    .concat();
    // 100,000 nested arrays: refused at the JSON decoder's depth, not a stack overflow.
    let deep = [vec![0x81u8; 100_000], vec![0x01]].concat();
    let cases: [(&str, Vec<u8>, &str); 6] = [
        ("truncated", truncated, "unexpected EOF"),
        ("trailing", trailing, "extraneous data"),
        ("duplicate", duplicate, "duplicate map key \"kind\""),
        ("deep", deep, "exceeded max nested level"),
        (
            "not cbor",
            b"{\"kind\":\"Topping\"}".to_vec(),
            "unable to determine group/version/kind: cbor",
        ),
        (
            "nan",
            [&TAG[..], &[0xa1, 0x61, b'x', 0xf9, 0x7e, 0x00]].concat(),
            "NaN",
        ),
    ];
    for (what, body, needle) in cases {
        for accept in [ACCEPT_CBOR, ("accept", "application/json")] {
            let (code, headers, answer) = server
                .raw("POST", &list, &[CBOR, accept], body.clone())
                .await;
            let status = if accept.1 == "application/cbor" {
                assert_cbor_status(code, &headers, &answer, 400, "BadRequest")
            } else {
                support::parse(&answer)
            };
            assert_eq!(code, 400, "{what}: {status}");
            assert!(
                status["message"].as_str().unwrap().contains(needle),
                "{what}: {status}"
            );
        }
    }

    // Field validation is JSON's: Strict refuses an unknown field, Warn (the default) stores and warns.
    let mut unknown = topping("crusty", 1.0);
    unknown["spec"]["crust"] = json!("thin");
    let (code, headers, body) = server
        .raw(
            "POST",
            &format!("{list}?fieldValidation=Strict"),
            &[CBOR, ACCEPT_CBOR],
            cbor(&unknown),
        )
        .await;
    let status = assert_cbor_status(code, &headers, &body, 400, "BadRequest");
    assert_eq!(
        status["message"],
        "strict decoding error: unknown field \"spec.crust\""
    );
    // A body over 3 MiB is refused before it is decoded.
    let mut huge = topping("huge", 1.0);
    huge["metadata"]["annotations"] = json!({"pad": "x".repeat(3 * 1024 * 1024)});
    let (code, headers, body) = server
        .raw("POST", &list, &[CBOR, ACCEPT_CBOR], cbor(&huge))
        .await;
    assert_cbor_status(code, &headers, &body, 413, "RequestEntityTooLarge");

    // Nothing was stored; then the warned create goes through.
    let (_, _, body) = server.raw("GET", &list, &[], vec![]).await;
    assert_eq!(support::parse(&body)["items"], json!([]));
    let (code, headers, _) = server.raw("POST", &list, &[CBOR], cbor(&unknown)).await;
    assert_eq!(code, 201);
    assert_eq!(
        headers["warning"],
        "299 - \"unknown field \\\"spec.crust\\\"\""
    );

    // A CBOR apply patch that is not CBOR is a 400 too.
    let apply = ("content-type", "application/apply-patch+cbor");
    let (code, _, body) = server
        .raw(
            "PATCH",
            &format!("{list}/x?fieldManager=m"),
            &[apply],
            vec![0xa1],
        )
        .await;
    let status = support::parse(&body);
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"], "error decoding patch: cbor: unexpected EOF",
        "{status}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cbor_watches_are_cbor_sequences() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    let list = toppings("v1alpha1");
    server
        .raw("POST", &list, &[CBOR], cbor(&topping("salami", 0.25)))
        .await;
    // What client-go sends (`application/cbor`) and the sequence type itself both answer `application/cbor-seq`.
    for accept in ["application/cbor", "application/cbor-seq"] {
        let path = format!("{list}?watch=1&resourceVersion=0&timeoutSeconds=5");
        let (code, headers, mut stream) = server.stream(&path, accept).await;
        assert_eq!(code, 200);
        assert_eq!(headers["content-type"], "application/cbor-seq");
        let name = format!("ham-{}", accept.len());
        server
            .raw("POST", &list, &[CBOR], cbor(&topping(&name, 1.0)))
            .await;
        stream
            .read_until(Duration::from_secs(5), "the new topping's event", |buf| {
                decode_sequence(buf)
                    .iter()
                    .any(|e| e["object"]["metadata"]["name"] == name.as_str())
            })
            .await;
        // Each event is a self-described item; its object is the object's own self-described encoding.
        assert!(stream.buf.starts_with(&TAG));
        let object_at = stream
            .buf
            .windows(8)
            .position(|w| w == b"fobject\xd9")
            .unwrap();
        assert_eq!(&stream.buf[object_at + 7..object_at + 10], &TAG);
        let events = decode_sequence(&stream.buf);
        let seen: Vec<(&str, &str)> = events
            .iter()
            .map(|e| {
                assert_eq!(e["object"]["kind"], "Topping");
                (
                    e["type"].as_str().unwrap(),
                    e["object"]["metadata"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert!(seen.contains(&("ADDED", "salami")), "{seen:?}");
        assert_eq!(seen.last(), Some(&("ADDED", name.as_str())));
        stream.end(Duration::from_secs(10)).await.unwrap();
    }
    // Table watches carry Table objects.
    let path = format!("{list}?watch=1&resourceVersion=0&timeoutSeconds=2");
    let (code, _, mut stream) = server
        .stream(&path, "application/cbor;as=Table;g=meta.k8s.io;v=v1")
        .await;
    assert_eq!(code, 200);
    stream
        .read_until(Duration::from_secs(5), "a Table event", |buf| {
            !decode_sequence(buf).is_empty()
        })
        .await;
    let event = &decode_sequence(&stream.buf)[0];
    assert_eq!(event["object"]["kind"], "Table");
    assert_eq!(event["object"]["rows"][0]["cells"][0], "ham-16");
    server.stop().await;
}

/// Python's `cbor2` (a decoder and encoder that is not ours) against the server: `tests/python/cbor_client.py`.
/// The interpreter is `$PIZZA_TEST_PYTHON` (scripts/test.sh installs `kubernetes` and `cbor2` there), else
/// `python3`.
#[tokio::test(flavor = "multi_thread")]
async fn python_cbor2_round_trips() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    let output = support::run_python("cbor_client.py", &server.kubeconfig).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("cbor2 client: ok"),
        "the cbor2 client failed ({}); it needs `pip install kubernetes cbor2` (./scripts/test.sh sets that up)\n\
         stdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    server.stop().await;
}
