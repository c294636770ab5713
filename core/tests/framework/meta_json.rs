//! JSON of the meta types, byte for byte as a Go apiserver writes it (and their CBOR, the same documents).

use std::collections::BTreeMap;

use apiserver::meta::*;
use chrono::{TimeZone, Utc};

fn ts(secs: i64) -> Time {
    Time::from(Utc.timestamp_opt(secs, 0).unwrap())
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap()
}

/// Serializes, compares with `golden`, and reads `golden` back to the same value. The CBOR encoding carries the
/// same document: transcoded to JSON it is `golden`'s value, and reads back to the same value too.
fn golden<T>(v: &T, golden: &str)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    assert_eq!(json(v), golden);
    let back: T = serde_json::from_str(golden).unwrap();
    assert_eq!(&back, v);
    let cbor = apiserver::codec::encode_cbor_document(v).unwrap();
    assert!(apiserver::codec::is_cbor(&cbor));
    let transcoded = apiserver::codec::cbor_to_json(&cbor).unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&transcoded).unwrap(),
        serde_json::from_str::<serde_json::Value>(golden).unwrap(),
        "CBOR of {golden}"
    );
    let back: T = serde_json::from_slice(&transcoded).unwrap();
    assert_eq!(&back, v);
}

#[test]
fn empty_object_meta_is_empty_object() {
    golden(&ObjectMeta::default(), "{}");
    golden(&ListMeta::default(), "{}");
    golden(&TypeMeta::default(), "{}");
}

#[test]
fn full_object_meta() {
    let m = ObjectMeta {
        name: "margherita".into(),
        generate_name: "margherita-".into(),
        namespace: "default".into(),
        self_link: "/x".into(),
        uid: "6f1c5e5a".into(),
        resource_version: "12345".into(),
        generation: 3,
        creation_timestamp: Some(ts(1_700_000_000)),
        deletion_timestamp: Some(ts(1_700_000_600)),
        deletion_grace_period_seconds: Some(0),
        labels: BTreeMap::from([("app".into(), "pizza".into()), ("b".into(), "".into())]),
        annotations: BTreeMap::from([("note".into(), "extra \"cheese\"".into())]),
        owner_references: vec![OwnerReference {
            api_version: "restaurant.programming-kubernetes.info/v1beta1".into(),
            kind: "Topping".into(),
            name: "mozzarella".into(),
            uid: "aaaa".into(),
            controller: Some(true),
            block_owner_deletion: Some(false),
        }],
        finalizers: vec!["restaurant/cleanup".into()],
        managed_fields: vec![ManagedFieldsEntry {
            manager: "kubectl".into(),
            operation: "Update".into(),
            api_version: "restaurant.programming-kubernetes.info/v1alpha1".into(),
            time: Some(ts(1_700_000_001)),
            fields_type: "FieldsV1".into(),
            fields_v1: Some(FieldsV1 {
                raw: br#"{"f:spec":{"f:toppings":{},"f:a":{}}}"#.to_vec(),
            }),
            subresource: "status".into(),
        }],
    };
    golden(
        &m,
        concat!(
            r#"{"name":"margherita","generateName":"margherita-","namespace":"default","selfLink":"/x","#,
            r#""uid":"6f1c5e5a","resourceVersion":"12345","generation":3,"#,
            r#""creationTimestamp":"2023-11-14T22:13:20Z","deletionTimestamp":"2023-11-14T22:23:20Z","#,
            r#""deletionGracePeriodSeconds":0,"labels":{"app":"pizza","b":""},"#,
            r#""annotations":{"note":"extra \"cheese\""},"#,
            r#""ownerReferences":[{"apiVersion":"restaurant.programming-kubernetes.info/v1beta1","kind":"Topping","name":"mozzarella","uid":"aaaa","controller":true,"blockOwnerDeletion":false}],"#,
            r#""finalizers":["restaurant/cleanup"],"#,
            r#""managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"restaurant.programming-kubernetes.info/v1alpha1","time":"2023-11-14T22:13:21Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:toppings":{},"f:a":{}}},"subresource":"status"}]}"#
        ),
    );
}

#[test]
fn owner_reference_always_has_its_names() {
    golden(
        &OwnerReference::default(),
        r#"{"apiVersion":"","kind":"","name":"","uid":""}"#,
    );
}

#[test]
fn nulls_read_as_empty() {
    let m: ObjectMeta = serde_json::from_str(
        r#"{"name":null,"generation":null,"creationTimestamp":null,"deletionTimestamp":null,
            "labels":null,"annotations":null,"ownerReferences":null,"finalizers":null,"managedFields":null}"#,
    )
    .unwrap();
    assert_eq!(m, ObjectMeta::default());
    let s: Status =
        serde_json::from_str(r#"{"metadata":null,"status":null,"details":null,"code":null}"#)
            .unwrap();
    assert_eq!(s, Status::default());
    let l: APIResourceList =
        serde_json::from_str(r#"{"groupVersion":"v1","resources":null}"#).unwrap();
    assert!(l.resources.is_empty());
    let r: APIResource = serde_json::from_str(r#"{"name":"x","verbs":null}"#).unwrap();
    assert!(r.verbs.is_empty());
}

#[test]
fn status_not_found_is_upstreams_body() {
    let st = Status::not_found("restaurant.programming-kubernetes.info", "pizzas", "x");
    golden(
        &st,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pizzas.restaurant.programming-kubernetes.info \"x\" not found","reason":"NotFound","details":{"name":"x","group":"restaurant.programming-kubernetes.info","kind":"pizzas"},"code":404}"#,
    );
}

#[test]
fn status_with_causes_and_success() {
    let st = Status::invalid(
        "restaurant.programming-kubernetes.info",
        "Pizza",
        "x",
        vec![StatusCause::new(
            cause_type::FIELD_VALUE_REQUIRED,
            "spec.toppings",
            "Required value",
        )],
    );
    golden(
        &st,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Pizza.restaurant.programming-kubernetes.info \"x\" is invalid: spec.toppings: Required value","reason":"Invalid","details":{"name":"x","group":"restaurant.programming-kubernetes.info","kind":"Pizza","causes":[{"reason":"FieldValueRequired","message":"Required value","field":"spec.toppings"}]},"code":422}"#,
    );
    golden(
        &Status::success(),
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"}"#,
    );
    golden(
        &Status::too_many_requests("slow down", 1),
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"slow down","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}"#,
    );
    assert_eq!(
        Status::conflict("g", "pizzas", "x", "the object has been modified").message,
        "Operation cannot be fulfilled on pizzas.g \"x\": the object has been modified"
    );
    assert_eq!(
        Status::not_found("", "pods", "p").message,
        "pods \"p\" not found"
    );
}

#[test]
fn reason_strings_are_upstreams() {
    let all = [
        (reason::NOT_FOUND, "NotFound"),
        (reason::ALREADY_EXISTS, "AlreadyExists"),
        (reason::CONFLICT, "Conflict"),
        (reason::INVALID, "Invalid"),
        (reason::BAD_REQUEST, "BadRequest"),
        (reason::FORBIDDEN, "Forbidden"),
        (reason::METHOD_NOT_ALLOWED, "MethodNotAllowed"),
        (reason::GONE, "Gone"),
        (reason::EXPIRED, "Expired"),
        (reason::TIMEOUT, "Timeout"),
        (reason::TOO_MANY_REQUESTS, "TooManyRequests"),
        (reason::INTERNAL_ERROR, "InternalError"),
        (reason::NOT_ACCEPTABLE, "NotAcceptable"),
        (reason::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType"),
        (reason::REQUEST_ENTITY_TOO_LARGE, "RequestEntityTooLarge"),
        (reason::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
        (reason::UNAUTHORIZED, "Unauthorized"),
    ];
    for (ours, upstream) in all {
        assert_eq!(ours, upstream);
    }
}

#[test]
fn time_formats() {
    let t = Utc.with_ymd_and_hms(2006, 1, 2, 15, 4, 5).unwrap()
        + chrono::Duration::nanoseconds(123_456_789);
    assert_eq!(json(&Time::from(t)), r#""2006-01-02T15:04:05Z""#);
    assert_eq!(
        json(&MicroTime::from(t)),
        r#""2006-01-02T15:04:05.123456Z""#
    );
    assert_eq!(
        json(&MicroTime::from(
            Utc.with_ymd_and_hms(2006, 1, 2, 15, 4, 5).unwrap()
        )),
        r#""2006-01-02T15:04:05.000000Z""#
    );
    // Offsets are converted to UTC; fractions of a Time are dropped.
    let back: Time = serde_json::from_str(r#""2006-01-02T16:04:05.9+01:00""#).unwrap();
    assert_eq!(json(&back), r#""2006-01-02T15:04:05Z""#);
    let none: Option<Time> = serde_json::from_str("null").unwrap();
    assert_eq!(none, None);
    assert!(serde_json::from_str::<Time>(r#""2006-01-02""#).is_err());
    assert!(serde_json::from_str::<Time>("12").is_err());
    let now = Time::now();
    assert_eq!(now.0.timestamp_subsec_nanos(), 0);
}

#[test]
fn api_resource_list_is_upstreams() {
    let l = APIResourceList {
        group_version: "restaurant.programming-kubernetes.info/v1alpha1".into(),
        resources: vec![
            APIResource {
                name: "pizzas".into(),
                singular_name: "pizza".into(),
                namespaced: true,
                kind: "Pizza".into(),
                verbs: Verbs::from(["create", "delete", "get", "list", "watch"]),
                short_names: vec!["pz".into()],
                categories: vec!["all".into()],
                storage_version_hash: "9Nk5FGr+6Bw=".into(),
                ..Default::default()
            },
            APIResource {
                name: "toppings".into(),
                singular_name: "topping".into(),
                namespaced: false,
                kind: "Topping".into(),
                verbs: Verbs::default(),
                ..Default::default()
            },
        ],
    };
    golden(
        &l,
        concat!(
            r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"restaurant.programming-kubernetes.info/v1alpha1","resources":["#,
            r#"{"name":"pizzas","singularName":"pizza","namespaced":true,"kind":"Pizza","verbs":["create","delete","get","list","watch"],"shortNames":["pz"],"categories":["all"],"storageVersionHash":"9Nk5FGr+6Bw="},"#,
            r#"{"name":"toppings","singularName":"topping","namespaced":false,"kind":"Topping","verbs":[]}]}"#
        ),
    );
}

#[test]
fn group_list_and_versions() {
    let v = GroupVersionForDiscovery {
        group_version: "g/v1".into(),
        version: "v1".into(),
    };
    golden(
        &APIGroupList {
            groups: vec![APIGroup {
                name: "g".into(),
                versions: vec![v.clone()],
                preferred_version: v,
                server_address_by_client_cidrs: vec![],
            }],
        },
        r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"g","versions":[{"groupVersion":"g/v1","version":"v1"}],"preferredVersion":{"groupVersion":"g/v1","version":"v1"}}]}"#,
    );
    golden(
        &APIVersions {
            versions: vec!["v1".into()],
            server_address_by_client_cidrs: vec![ServerAddressByClientCIDR {
                client_cidr: "0.0.0.0/0".into(),
                server_address: "10.0.0.1:6443".into(),
            }],
        },
        r#"{"kind":"APIVersions","apiVersion":"v1","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"10.0.0.1:6443"}]}"#,
    );
}

#[test]
fn aggregated_discovery_is_upstreams() {
    let l = APIGroupDiscoveryList {
        metadata: ListMeta::default(),
        items: vec![APIGroupDiscovery {
            metadata: ObjectMeta {
                name: "g".into(),
                ..Default::default()
            },
            versions: vec![APIVersionDiscovery {
                version: "v1".into(),
                resources: vec![APIResourceDiscovery {
                    resource: "pizzas".into(),
                    response_kind: Some(GroupVersionKind {
                        group: "g".into(),
                        version: "v1".into(),
                        kind: "Pizza".into(),
                    }),
                    scope: SCOPE_NAMESPACE.into(),
                    singular_resource: "pizza".into(),
                    verbs: vec!["get".into()],
                    subresources: vec![APISubresourceDiscovery {
                        subresource: "status".into(),
                        response_kind: None,
                        accepted_types: vec![],
                        verbs: vec!["get".into()],
                    }],
                    ..Default::default()
                }],
                freshness: DISCOVERY_FRESHNESS_CURRENT.into(),
            }],
        }],
    };
    golden(
        &l,
        concat!(
            r#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":"g"},"versions":[{"version":"v1","resources":["#,
            r#"{"resource":"pizzas","responseKind":{"group":"g","version":"v1","kind":"Pizza"},"scope":"Namespaced","singularResource":"pizza","verbs":["get"],"#,
            r#""subresources":[{"subresource":"status","verbs":["get"]}]}],"freshness":"Current"}]}]}"#
        ),
    );
}

#[test]
fn watch_event_embeds_object_verbatim() {
    let ev = WatchEvent::new(
        event_type::ADDED,
        br#"{"kind":"Pizza","b":1,"a":[1.5,null]}"#.to_vec(),
    );
    assert_eq!(
        json(&ev),
        r#"{"type":"ADDED","object":{"kind":"Pizza","b":1,"a":[1.5,null]}}"#
    );
    let back: WatchEvent =
        serde_json::from_str(r#"{"type":"DELETED","object":{"z":{"y":"x"},"a":true}}"#).unwrap();
    assert_eq!(back.type_, "DELETED");
    assert_eq!(back.object.raw, br#"{"z":{"y":"x"},"a":true}"#);
    let empty: WatchEvent = serde_json::from_str(r#"{"type":"BOOKMARK","object":null}"#).unwrap();
    assert!(empty.object.is_empty());
    assert_eq!(json(&empty), r#"{"type":"BOOKMARK","object":null}"#);
    // Bytes that are not JSON cannot be written as JSON: an error, not a panic.
    assert!(
        serde_json::to_string(&WatchEvent::new(event_type::ADDED, b"k8s\0\x01".to_vec())).is_err()
    );
}

#[test]
fn table_is_upstreams() {
    let t = Table {
        metadata: ListMeta {
            resource_version: "5".into(),
            ..Default::default()
        },
        column_definitions: vec![TableColumnDefinition {
            name: "Name".into(),
            type_: "string".into(),
            format: "name".into(),
            description: "Name must be unique".into(),
            priority: 0,
        }],
        rows: vec![
            TableRow {
                cells: vec!["margherita".into(), 3.into()],
                conditions: vec![],
                object: RawExtension {
                    raw: br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"margherita"}}"#.to_vec(),
                },
            },
            TableRow {
                cells: vec![serde_json::Value::Null],
                conditions: vec![TableRowCondition {
                    type_: "Completed".into(),
                    status: "True".into(),
                    ..Default::default()
                }],
                object: RawExtension::default(),
            },
        ],
    };
    golden(
        &t,
        concat!(
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"5"},"#,
            r#""columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"Name must be unique","priority":0}],"#,
            r#""rows":[{"cells":["margherita",3],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"margherita"}}},"#,
            r#"{"cells":[null],"conditions":[{"type":"Completed","status":"True"}],"object":null}]}"#
        ),
    );
}

#[test]
fn partial_object_metadata_carries_its_kind() {
    let p = PartialObjectMetadata {
        metadata: ObjectMeta {
            name: "x".into(),
            ..Default::default()
        },
    };
    golden(
        &p,
        r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"x"}}"#,
    );
    golden(
        &PartialObjectMetadataList {
            metadata: ListMeta::default(),
            items: vec![p],
        },
        r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{},"items":[{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"x"}}]}"#,
    );
}

#[test]
fn options_and_selectors() {
    // Clients send kind/apiVersion in bodies; they are accepted.
    let d: DeleteOptions = serde_json::from_str(
        r#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground","preconditions":{"resourceVersion":"5"},"dryRun":["All"]}"#,
    )
    .unwrap();
    assert_eq!(d.propagation_policy.as_deref(), Some("Foreground"));
    assert_eq!(d.dry_run, vec!["All".to_string()]);
    golden(
        &d,
        r#"{"preconditions":{"resourceVersion":"5"},"propagationPolicy":"Foreground","dryRun":["All"]}"#,
    );
    golden(&DeleteOptions::default(), "{}");
    golden(
        &ListOptions {
            limit: 10,
            continue_: "t".into(),
            send_initial_events: Some(false),
            ..Default::default()
        },
        r#"{"limit":10,"continue":"t","sendInitialEvents":false}"#,
    );
    golden(
        &PatchOptions {
            force: Some(true),
            field_manager: "m".into(),
            ..Default::default()
        },
        r#"{"force":true,"fieldManager":"m"}"#,
    );
    golden(
        &LabelSelector {
            match_labels: BTreeMap::from([("a".into(), "b".into())]),
            match_expressions: vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: LabelSelectorRequirement::EXISTS.into(),
                values: vec![],
            }],
        },
        r#"{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"k","operator":"Exists"}]}"#,
    );
    golden(&LabelSelector::default(), "{}");
}

#[test]
fn yaml_output_works_for_raw_fields() {
    // Raw JSON fields are re-encoded for non-JSON serializers rather than written as a blob.
    let m = ObjectMeta {
        name: "x".into(),
        managed_fields: vec![ManagedFieldsEntry {
            fields_type: "FieldsV1".into(),
            fields_v1: Some(FieldsV1 {
                raw: br#"{"f:spec":{"f:b":{},"f:a":{}}}"#.to_vec(),
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    let yaml = serde_saphyr::to_string(&m).unwrap();
    assert!(yaml.contains("f:spec"), "{yaml}");
    assert!(!yaml.contains("RawValue"), "{yaml}");
    assert!(
        yaml.find("f:b").unwrap() < yaml.find("f:a").unwrap(),
        "{yaml}"
    );
    let value = serde_json::to_value(&m).unwrap();
    assert_eq!(
        value["managedFields"][0]["fieldsV1"]["f:spec"]["f:a"],
        serde_json::json!({})
    );
}

#[test]
fn cbor_watch_events_embed_the_self_described_object() {
    let object =
        apiserver::codec::encode_cbor("v1", "Pod", &serde_json::json!({"a": [1.5, null]})).unwrap();
    let event = apiserver::codec::encode_cbor_watch_event(event_type::MODIFIED, &object);
    // d9d9f7 {"type": "MODIFIED", "object": d9d9f7 {...}}: the object is its own encoding, tag included.
    let mut head = vec![0xd9, 0xd9, 0xf7, 0xa2, 0x64];
    head.extend_from_slice(b"type");
    head.push(0x68);
    head.extend_from_slice(b"MODIFIED");
    head.push(0x66);
    head.extend_from_slice(b"object");
    assert_eq!(event, [head, object].concat());
    let json = apiserver::codec::cbor_to_json(&event).unwrap();
    assert_eq!(
        String::from_utf8(json).unwrap(),
        r#"{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","a":[1.5,null]}}"#
    );
}
