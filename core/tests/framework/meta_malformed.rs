//! Malformed input never panics: truncated, mutated and random bytes into every meta type's
//! protobuf and JSON decoders give an error (or, for protobuf, a value), never a crash.

use apiserver::meta::*;
use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use prost::Message;

fn sample_meta() -> ObjectMeta {
    ObjectMeta {
        name: "x".into(),
        namespace: "ns".into(),
        uid: "u".into(),
        resource_version: "1".into(),
        generation: 2,
        creation_timestamp: Some(Time::from(Utc.timestamp_opt(1_700_000_000, 0).unwrap())),
        deletion_grace_period_seconds: Some(3),
        labels: [("a".to_string(), "b".to_string())].into(),
        owner_references: vec![OwnerReference {
            kind: "K".into(),
            controller: Some(true),
            ..Default::default()
        }],
        finalizers: vec!["f".into()],
        managed_fields: vec![ManagedFieldsEntry {
            manager: "m".into(),
            fields_v1: Some(FieldsV1 {
                raw: br#"{"f:a":{}}"#.to_vec(),
            }),
            time: Some(Time::now()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Checks every strict prefix and single-byte mutations of a valid encoding (protobuf and JSON).
fn check_type<T>(value: &T)
where
    T: Message + Default + serde::Serialize + serde::de::DeserializeOwned,
{
    let bytes = value.encode_to_vec();
    T::decode(bytes.as_slice()).expect("valid encoding decodes");
    for n in 0..bytes.len() {
        let _ = T::decode(&bytes[..n]);
        let mut mutated = bytes.clone();
        mutated[n] ^= 0xff;
        let _ = T::decode(mutated.as_slice());
        let mut mutated = bytes.clone();
        mutated[n] = 0x80;
        let _ = T::decode(mutated.as_slice());
    }
    let text = serde_json::to_vec(value).unwrap();
    serde_json::from_slice::<T>(&text).expect("valid JSON decodes");
    for n in 0..text.len() {
        assert!(
            serde_json::from_slice::<T>(&text[..n]).is_err(),
            "prefix of {} bytes accepted",
            n
        );
        let mut mutated = text.clone();
        mutated[n] = b'\xff';
        // Usually an error; inside an ignored `kind`/`apiVersion` serde_json skips UTF-8 checks.
        let _ = serde_json::from_slice::<T>(&mutated);
        let mut mutated = text.clone();
        mutated[n] = b'[';
        let _ = serde_json::from_slice::<T>(&mutated);
    }
}

#[test]
fn truncated_and_mutated_encodings() {
    let meta = sample_meta();
    check_type(&meta);
    check_type(&TypeMeta {
        kind: "K".into(),
        api_version: "v1".into(),
    });
    check_type(&ListMeta {
        continue_: "c".into(),
        remaining_item_count: Some(1),
        shard_info: Some(ShardInfo {
            selector: "s".into(),
        }),
        ..Default::default()
    });
    check_type(&Time::now());
    check_type(&MicroTime::now());
    check_type(&meta.owner_references[0]);
    check_type(&meta.managed_fields[0]);
    check_type(&FieldsV1 {
        raw: br#"{"f:a":{"f:b":{}}}"#.to_vec(),
    });
    let mut status = Status::invalid("g", "K", "x", vec![StatusCause::new("r", "f", "m")]);
    status.details.as_mut().unwrap().retry_after_seconds = 3;
    check_type(&status);
    check_type(status.details.as_ref().unwrap());
    check_type(&StatusCause::new("r", "f", "m"));
    check_type(&LabelSelector {
        match_labels: [("a".to_string(), "b".to_string())].into(),
        match_expressions: vec![LabelSelectorRequirement {
            key: "k".into(),
            operator: "In".into(),
            values: vec!["v".into()],
        }],
    });
    check_type(&DeleteOptions {
        grace_period_seconds: Some(1),
        preconditions: Some(Preconditions {
            uid: Some("u".into()),
            resource_version: Some("1".into()),
        }),
        dry_run: vec!["All".into()],
        ..Default::default()
    });
    check_type(&CreateOptions {
        field_manager: "m".into(),
        ..Default::default()
    });
    check_type(&UpdateOptions {
        field_validation: "Strict".into(),
        ..Default::default()
    });
    check_type(&PatchOptions {
        force: Some(true),
        ..Default::default()
    });
    check_type(&GetOptions {
        resource_version: "0".into(),
    });
    check_type(&ListOptions {
        limit: 5,
        watch: true,
        timeout_seconds: Some(9),
        ..Default::default()
    });
    check_type(&TableOptions {
        include_object: "None".into(),
    });
    check_type(&WatchEvent::new("ADDED", br#"{"a":1}"#.to_vec()));
    check_type(&PartialObjectMetadata {
        metadata: meta.clone(),
    });
    check_type(&PartialObjectMetadataList {
        metadata: ListMeta::default(),
        items: vec![PartialObjectMetadata { metadata: meta }],
    });
    let gvd = GroupVersionForDiscovery {
        group_version: "g/v".into(),
        version: "v".into(),
    };
    check_type(&APIGroupList {
        groups: vec![APIGroup {
            name: "g".into(),
            versions: vec![gvd.clone()],
            preferred_version: gvd,
            server_address_by_client_cidrs: vec![ServerAddressByClientCIDR {
                client_cidr: "0.0.0.0/0".into(),
                server_address: "a:1".into(),
            }],
        }],
    });
    check_type(&APIVersions {
        versions: vec!["v1".into()],
        server_address_by_client_cidrs: vec![],
    });
    check_type(&APIResourceList {
        group_version: "g/v".into(),
        resources: vec![APIResource {
            name: "pizzas".into(),
            namespaced: true,
            verbs: Verbs::from(["get"]),
            short_names: vec!["pz".into()],
            ..Default::default()
        }],
    });
    let gvk = GroupVersionKind {
        group: "g".into(),
        version: "v".into(),
        kind: "K".into(),
    };
    check_type(&APIGroupDiscoveryList {
        metadata: ListMeta::default(),
        items: vec![APIGroupDiscovery {
            metadata: ObjectMeta {
                name: "g".into(),
                ..Default::default()
            },
            versions: vec![APIVersionDiscovery {
                version: "v".into(),
                resources: vec![APIResourceDiscovery {
                    resource: "r".into(),
                    response_kind: Some(gvk.clone()),
                    verbs: vec!["get".into()],
                    subresources: vec![APISubresourceDiscovery {
                        subresource: "status".into(),
                        accepted_types: vec![gvk],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                freshness: "Current".into(),
            }],
        }],
    });
}

#[test]
fn table_json_truncations() {
    let t = Table {
        column_definitions: vec![TableColumnDefinition {
            name: "Name".into(),
            ..Default::default()
        }],
        rows: vec![TableRow {
            cells: vec!["x".into()],
            object: RawExtension {
                raw: br#"{"a":1}"#.to_vec(),
            },
            ..Default::default()
        }],
        ..Default::default()
    };
    let text = serde_json::to_vec(&t).unwrap();
    serde_json::from_slice::<Table>(&text).unwrap();
    for n in 0..text.len() {
        assert!(serde_json::from_slice::<Table>(&text[..n]).is_err());
    }
}

#[test]
fn deep_nesting_is_an_error() {
    let deep = format!(
        r#"{{"type":"ADDED","object":{}1{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(serde_json::from_str::<WatchEvent>(&deep).is_err());
    let deep = format!(
        r#"{{"managedFields":[{{"fieldsV1":{}1{}}}]}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(serde_json::from_str::<ObjectMeta>(&deep).is_err());
    // Deeply nested protobuf (PartialObjectMetadataList > items > metadata > ...): prost's
    // recursion limit turns it into an error.
    let mut nested = Vec::new();
    for _ in 0..200 {
        let mut outer = vec![0x12];
        prost::encoding::encode_varint(nested.len() as u64, &mut outer);
        outer.extend_from_slice(&nested);
        nested = outer;
    }
    let _ = APIGroupDiscoveryList::decode(nested.as_slice());
}

macro_rules! decode_all {
    ($bytes:expr, $($ty:ty),+) => {
        $(
            let _ = <$ty as Message>::decode($bytes);
            let _ = serde_json::from_slice::<$ty>($bytes);
        )+
    };
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let b = bytes.as_slice();
        decode_all!(
            b, TypeMeta, ObjectMeta, ListMeta, ShardInfo, Time, MicroTime, OwnerReference,
            ManagedFieldsEntry, FieldsV1, Status, StatusDetails, StatusCause, LabelSelector,
            LabelSelectorRequirement, DeleteOptions, Preconditions, CreateOptions, UpdateOptions,
            PatchOptions, GetOptions, ListOptions, TableOptions, WatchEvent, RawExtension,
            PartialObjectMetadata, PartialObjectMetadataList, APIGroupList, APIGroup,
            GroupVersionForDiscovery, ServerAddressByClientCIDR, APIResourceList, APIResource,
            Verbs, APIVersions, APIGroupDiscoveryList, APIGroupDiscovery, APIVersionDiscovery,
            APIResourceDiscovery, APISubresourceDiscovery, GroupVersionKind
        );
        let _ = serde_json::from_slice::<Table>(b);
        let _ = serde_json::from_slice::<TableRow>(b);
    }

    #[test]
    fn random_json_values_never_panic(s in "[\\[\\]{}\":,a-z0-9 .-]{0,64}") {
        let b = s.as_bytes();
        decode_all!(b, ObjectMeta, Status, WatchEvent, APIResourceList, ListOptions, Time, MicroTime);
        let _ = serde_json::from_slice::<Table>(b);
    }
}
