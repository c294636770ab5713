//! Protobuf compatibility with upstream: what we encode, the `k8s-pb` crate (generated from upstream's
//! `generated.proto`) decodes to the same values, and the reverse.

use apiserver::meta::{
    FieldsV1, ListMeta, ManagedFieldsEntry, ObjectMeta, OwnerReference, RawExtension, Status,
    StatusCause, StatusDetails, Time, WatchEvent,
};
use chrono::TimeZone;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb;
use k8s_pb::apimachinery::pkg::runtime as pb_runtime;
use prost::Message;

fn time(seconds: i64) -> Time {
    Time(chrono::Utc.timestamp_opt(seconds, 0).unwrap())
}

fn pb_time(t: &Time) -> pb::Time {
    pb::Time {
        seconds: Some(t.0.timestamp()),
        nanos: Some(0),
    }
}

fn from_pb_time(t: &pb::Time) -> Time {
    time(t.seconds.unwrap_or_default())
}

fn object_meta() -> ObjectMeta {
    ObjectMeta {
        name: "margherita".into(),
        generate_name: "pizza-".into(),
        namespace: "default".into(),
        self_link: "/apis/x".into(),
        uid: "0d6e4a2c-1111-2222-3333-444455556666".into(),
        resource_version: "42".into(),
        generation: 3,
        creation_timestamp: Some(time(1_700_000_000)),
        deletion_timestamp: Some(time(1_700_000_100)),
        deletion_grace_period_seconds: Some(30),
        labels: [
            ("app".to_string(), "pizza".to_string()),
            ("tier".to_string(), "".to_string()),
        ]
        .into(),
        annotations: [("note".to_string(), "hot".to_string())].into(),
        owner_references: vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "menu".into(),
            uid: "u-1".into(),
            controller: Some(true),
            block_owner_deletion: Some(false),
        }],
        finalizers: vec!["example.com/cleanup".into()],
        managed_fields: vec![ManagedFieldsEntry {
            manager: "kubectl".into(),
            operation: "Update".into(),
            api_version: "restaurant.programming-kubernetes.info/v1beta1".into(),
            time: Some(time(1_700_000_050)),
            fields_type: "FieldsV1".into(),
            fields_v1: Some(FieldsV1 {
                raw: br#"{"f:spec":{}}"#.to_vec(),
            }),
            subresource: "status".into(),
        }],
    }
}

fn some(s: &str) -> Option<String> {
    Some(s.to_string())
}

fn to_pb(m: &ObjectMeta) -> pb::ObjectMeta {
    pb::ObjectMeta {
        name: some(&m.name),
        generate_name: some(&m.generate_name),
        namespace: some(&m.namespace),
        self_link: some(&m.self_link),
        uid: some(&m.uid),
        resource_version: some(&m.resource_version),
        generation: Some(m.generation),
        creation_timestamp: m.creation_timestamp.as_ref().map(pb_time),
        deletion_timestamp: m.deletion_timestamp.as_ref().map(pb_time),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: m.labels.clone(),
        annotations: m.annotations.clone(),
        owner_references: m
            .owner_references
            .iter()
            .map(|o| pb::OwnerReference {
                api_version: some(&o.api_version),
                kind: some(&o.kind),
                name: some(&o.name),
                uid: some(&o.uid),
                controller: o.controller,
                block_owner_deletion: o.block_owner_deletion,
            })
            .collect(),
        finalizers: m.finalizers.clone(),
        managed_fields: m
            .managed_fields
            .iter()
            .map(|e| pb::ManagedFieldsEntry {
                manager: some(&e.manager),
                operation: some(&e.operation),
                api_version: some(&e.api_version),
                time: e.time.as_ref().map(pb_time),
                fields_type: some(&e.fields_type),
                fields_v1: e.fields_v1.as_ref().map(|f| pb::FieldsV1 {
                    raw: Some(f.raw.clone()),
                }),
                subresource: some(&e.subresource),
            })
            .collect(),
    }
}

fn from_pb(m: &pb::ObjectMeta) -> ObjectMeta {
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    ObjectMeta {
        name: s(&m.name),
        generate_name: s(&m.generate_name),
        namespace: s(&m.namespace),
        self_link: s(&m.self_link),
        uid: s(&m.uid),
        resource_version: s(&m.resource_version),
        generation: m.generation.unwrap_or_default(),
        creation_timestamp: m.creation_timestamp.as_ref().map(from_pb_time),
        deletion_timestamp: m.deletion_timestamp.as_ref().map(from_pb_time),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: m.labels.clone(),
        annotations: m.annotations.clone(),
        owner_references: m
            .owner_references
            .iter()
            .map(|o| OwnerReference {
                api_version: s(&o.api_version),
                kind: s(&o.kind),
                name: s(&o.name),
                uid: s(&o.uid),
                controller: o.controller,
                block_owner_deletion: o.block_owner_deletion,
            })
            .collect(),
        finalizers: m.finalizers.clone(),
        managed_fields: m
            .managed_fields
            .iter()
            .map(|e| ManagedFieldsEntry {
                manager: s(&e.manager),
                operation: s(&e.operation),
                api_version: s(&e.api_version),
                time: e.time.as_ref().map(from_pb_time),
                fields_type: s(&e.fields_type),
                fields_v1: e.fields_v1.as_ref().map(|f| FieldsV1 {
                    raw: f.raw.clone().unwrap_or_default(),
                }),
                subresource: s(&e.subresource),
            })
            .collect(),
    }
}

#[test]
fn object_meta_both_ways() {
    let ours = object_meta();
    let theirs = pb::ObjectMeta::decode(ours.encode_to_vec().as_slice()).unwrap();
    assert_eq!(from_pb(&theirs), ours);
    let back = ObjectMeta::decode(to_pb(&ours).encode_to_vec().as_slice()).unwrap();
    assert_eq!(back, ours);
}

#[test]
fn list_meta_both_ways() {
    let ours = ListMeta {
        self_link: String::new(),
        resource_version: "17".into(),
        continue_: "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ".into(),
        remaining_item_count: Some(5),
    };
    let theirs = pb::ListMeta::decode(ours.encode_to_vec().as_slice()).unwrap();
    assert_eq!(theirs.resource_version.as_deref(), Some("17"));
    assert_eq!(theirs.r#continue.as_deref(), Some(ours.continue_.as_str()));
    assert_eq!(theirs.remaining_item_count, Some(5));
    assert_eq!(
        ListMeta::decode(theirs.encode_to_vec().as_slice()).unwrap(),
        ours
    );
}

#[test]
fn status_both_ways() {
    let ours = Status {
        details: Some(StatusDetails {
            name: "x".into(),
            group: "restaurant.programming-kubernetes.info".into(),
            kind: "Pizza".into(),
            uid: "u".into(),
            causes: vec![StatusCause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: 0: cannot be negative or zero".into(),
                field: "spec.toppings[0].quantity".into(),
            }],
            retry_after_seconds: 2,
        }),
        ..Status::failure(
            422,
            "Invalid",
            "Pizza.restaurant.programming-kubernetes.info \"x\" is invalid",
        )
    };
    let theirs = pb::Status::decode(ours.encode_to_vec().as_slice()).unwrap();
    assert_eq!(theirs.code, Some(422));
    assert_eq!(theirs.reason.as_deref(), Some("Invalid"));
    assert_eq!(theirs.status.as_deref(), Some("Failure"));
    let details = theirs.details.clone().unwrap();
    assert_eq!(details.kind.as_deref(), Some("Pizza"));
    assert_eq!(details.retry_after_seconds, Some(2));
    assert_eq!(
        details.causes[0].field.as_deref(),
        Some("spec.toppings[0].quantity")
    );
    assert_eq!(
        Status::decode(theirs.encode_to_vec().as_slice()).unwrap(),
        ours
    );
}

#[test]
fn watch_event_both_ways() {
    let ours = WatchEvent {
        type_: "ADDED".into(),
        object: RawExtension {
            raw: b"k8s\0\x0a\x00".to_vec(),
        },
    };
    let theirs = pb::WatchEvent::decode(ours.encode_to_vec().as_slice()).unwrap();
    assert_eq!(theirs.r#type.as_deref(), Some("ADDED"));
    assert_eq!(
        theirs.object.as_ref().and_then(|o| o.raw.clone()),
        Some(ours.object.raw.clone())
    );
    let back = pb::WatchEvent {
        r#type: Some("DELETED".into()),
        object: Some(pb_runtime::RawExtension {
            raw: Some(b"raw".to_vec()),
        }),
    };
    let ours = WatchEvent::decode(back.encode_to_vec().as_slice()).unwrap();
    assert_eq!(
        (ours.type_.as_str(), ours.object.raw.as_slice()),
        ("DELETED", &b"raw"[..])
    );
}

#[test]
fn status_json_is_upstreams() {
    let status = Status {
        details: Some(StatusDetails {
            name: "x".into(),
            group: "restaurant.programming-kubernetes.info".into(),
            kind: "pizzas".into(),
            ..StatusDetails::default()
        }),
        ..Status::failure(
            404,
            "NotFound",
            "pizzas.restaurant.programming-kubernetes.info \"x\" not found",
        )
    };
    let json = apiserver::codec::encode_json(Status::API_VERSION, Status::KIND, &status).unwrap();
    assert_eq!(
        String::from_utf8(json).unwrap(),
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pizzas.restaurant.programming-kubernetes.info \"x\" not found","reason":"NotFound","details":{"name":"x","group":"restaurant.programming-kubernetes.info","kind":"pizzas"},"code":404}"#
    );
}

#[test]
fn truncated_or_random_bytes_are_errors_not_panics() {
    let bytes = object_meta().encode_to_vec();
    for end in 0..bytes.len() {
        let _ = ObjectMeta::decode(&bytes[..end]);
    }
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        let len = (seed % 64) as usize;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let _ = ObjectMeta::decode(data.as_slice());
        let _ = Status::decode(data.as_slice());
        let _ = WatchEvent::decode(data.as_slice());
        let _ = serde_json::from_slice::<ObjectMeta>(&data);
    }
}
