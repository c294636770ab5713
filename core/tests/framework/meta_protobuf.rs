//! Our protobuf encoding of the meta types against upstream's, as generated in `k8s-pb`: what we
//! encode, k8s-pb decodes to the expected value field by field, and the reverse.
//!
//! The `*_to_pb` functions spell out, field by field, the upstream value each of ours stands for
//! (Go writes every non-pointer scalar, so those are `Some`, even when empty).

use std::collections::BTreeMap;

use apiserver::meta::*;
use chrono::{TimeZone, Utc};
use k8s_pb::api::apidiscovery::v2 as pbd;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb;
use k8s_pb::apimachinery::pkg::runtime as pbr;
use prost::Message;

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn time_to_pb(t: &Time) -> pb::Time {
    pb::Time {
        seconds: Some(t.0.timestamp()),
        nanos: Some(0),
    }
}

fn owner_to_pb(o: &OwnerReference) -> pb::OwnerReference {
    pb::OwnerReference {
        api_version: s(&o.api_version),
        kind: s(&o.kind),
        name: s(&o.name),
        uid: s(&o.uid),
        controller: o.controller,
        block_owner_deletion: o.block_owner_deletion,
    }
}

fn managed_to_pb(m: &ManagedFieldsEntry) -> pb::ManagedFieldsEntry {
    pb::ManagedFieldsEntry {
        manager: s(&m.manager),
        operation: s(&m.operation),
        api_version: s(&m.api_version),
        time: m.time.as_ref().map(time_to_pb),
        fields_type: s(&m.fields_type),
        fields_v1: m.fields_v1.as_ref().map(|f| pb::FieldsV1 {
            raw: Some(f.raw.clone()),
        }),
        subresource: s(&m.subresource),
    }
}

fn object_meta_to_pb(m: &ObjectMeta) -> pb::ObjectMeta {
    pb::ObjectMeta {
        name: s(&m.name),
        generate_name: s(&m.generate_name),
        namespace: s(&m.namespace),
        self_link: s(&m.self_link),
        uid: s(&m.uid),
        resource_version: s(&m.resource_version),
        generation: Some(m.generation),
        creation_timestamp: m.creation_timestamp.as_ref().map(time_to_pb),
        deletion_timestamp: m.deletion_timestamp.as_ref().map(time_to_pb),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: m.labels.clone(),
        annotations: m.annotations.clone(),
        owner_references: m.owner_references.iter().map(owner_to_pb).collect(),
        finalizers: m.finalizers.clone(),
        managed_fields: m.managed_fields.iter().map(managed_to_pb).collect(),
    }
}

fn list_meta_to_pb(m: &ListMeta) -> pb::ListMeta {
    pb::ListMeta {
        self_link: s(&m.self_link),
        resource_version: s(&m.resource_version),
        r#continue: s(&m.continue_),
        remaining_item_count: m.remaining_item_count,
    }
}

fn status_to_pb(st: &Status) -> pb::Status {
    pb::Status {
        metadata: Some(list_meta_to_pb(&st.metadata)),
        status: s(&st.status),
        message: s(&st.message),
        reason: s(&st.reason),
        details: st.details.as_ref().map(|d| pb::StatusDetails {
            name: s(&d.name),
            group: s(&d.group),
            kind: s(&d.kind),
            uid: s(&d.uid),
            causes: d
                .causes
                .iter()
                .map(|c| pb::StatusCause {
                    reason: s(&c.reason),
                    message: s(&c.message),
                    field: s(&c.field),
                })
                .collect(),
            retry_after_seconds: Some(d.retry_after_seconds),
        }),
        code: Some(st.code),
    }
}

fn api_resource_list_to_pb(l: &APIResourceList) -> pb::APIResourceList {
    pb::APIResourceList {
        group_version: s(&l.group_version),
        resources: l
            .resources
            .iter()
            .map(|r| pb::APIResource {
                name: s(&r.name),
                singular_name: s(&r.singular_name),
                namespaced: Some(r.namespaced),
                group: s(&r.group),
                version: s(&r.version),
                kind: s(&r.kind),
                verbs: Some(pb::Verbs {
                    items: r.verbs.items.clone(),
                }),
                short_names: r.short_names.clone(),
                categories: r.categories.clone(),
                storage_version_hash: s(&r.storage_version_hash),
            })
            .collect(),
    }
}

fn gvk_to_pb(g: &GroupVersionKind) -> pb::GroupVersionKind {
    pb::GroupVersionKind {
        group: s(&g.group),
        version: s(&g.version),
        kind: s(&g.kind),
    }
}

fn discovery_to_pb(l: &APIGroupDiscoveryList) -> pbd::APIGroupDiscoveryList {
    pbd::APIGroupDiscoveryList {
        metadata: Some(list_meta_to_pb(&l.metadata)),
        items: l
            .items
            .iter()
            .map(|g| pbd::APIGroupDiscovery {
                metadata: Some(object_meta_to_pb(&g.metadata)),
                versions: g
                    .versions
                    .iter()
                    .map(|v| pbd::APIVersionDiscovery {
                        version: s(&v.version),
                        freshness: s(&v.freshness),
                        resources: v
                            .resources
                            .iter()
                            .map(|r| pbd::APIResourceDiscovery {
                                resource: s(&r.resource),
                                response_kind: r.response_kind.as_ref().map(gvk_to_pb),
                                scope: s(&r.scope),
                                singular_resource: s(&r.singular_resource),
                                verbs: r.verbs.clone(),
                                short_names: r.short_names.clone(),
                                categories: r.categories.clone(),
                                subresources: r
                                    .subresources
                                    .iter()
                                    .map(|sr| pbd::APISubresourceDiscovery {
                                        subresource: s(&sr.subresource),
                                        response_kind: sr.response_kind.as_ref().map(gvk_to_pb),
                                        accepted_types: sr
                                            .accepted_types
                                            .iter()
                                            .map(gvk_to_pb)
                                            .collect(),
                                        verbs: sr.verbs.clone(),
                                    })
                                    .collect(),
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn ts(secs: i64) -> Time {
    Time::from(Utc.timestamp_opt(secs, 0).unwrap())
}

fn full_object_meta() -> ObjectMeta {
    ObjectMeta {
        name: "margherita".into(),
        generate_name: "margherita-".into(),
        namespace: "default".into(),
        self_link: "/apis/restaurant.programming-kubernetes.info/v1alpha1/namespaces/default/pizzas/margherita".into(),
        uid: "6f1c5e5a-0b9e-4c47-9d7c-1d2c3b4a5f60".into(),
        resource_version: "12345".into(),
        generation: 3,
        creation_timestamp: Some(ts(1_700_000_000)),
        deletion_timestamp: Some(ts(1_700_000_600)),
        deletion_grace_period_seconds: Some(30),
        labels: BTreeMap::from([
            ("app".to_string(), "pizza".to_string()),
            ("empty".to_string(), String::new()),
        ]),
        annotations: BTreeMap::from([("note".to_string(), "extra cheese".to_string())]),
        owner_references: vec![
            OwnerReference {
                api_version: "restaurant.programming-kubernetes.info/v1beta1".into(),
                kind: "Topping".into(),
                name: "mozzarella".into(),
                uid: "aaaa-bbbb".into(),
                controller: Some(true),
                block_owner_deletion: Some(false),
            },
            OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "menu".into(),
                uid: "cccc".into(),
                controller: None,
                block_owner_deletion: None,
            },
        ],
        finalizers: vec!["restaurant/cleanup".into(), "other".into()],
        managed_fields: vec![
            ManagedFieldsEntry {
                manager: "kubectl-client-side-apply".into(),
                operation: "Update".into(),
                api_version: "restaurant.programming-kubernetes.info/v1alpha1".into(),
                time: Some(ts(1_700_000_001)),
                fields_type: "FieldsV1".into(),
                fields_v1: Some(FieldsV1 {
                    raw: br#"{"f:spec":{"f:toppings":{}}}"#.to_vec(),
                }),
                subresource: String::new(),
            },
            ManagedFieldsEntry {
                manager: "controller".into(),
                operation: "Apply".into(),
                subresource: "status".into(),
                ..Default::default()
            },
        ],
    }
}

fn full_status() -> Status {
    let mut st = Status::invalid(
        "restaurant.programming-kubernetes.info",
        "Pizza",
        "x",
        vec![
            StatusCause::new("FieldValueRequired", "spec.toppings", "Required value"),
            StatusCause::new("FieldValueInvalid", "metadata.name", "bad"),
        ],
    );
    st.metadata.resource_version = "9".into();
    if let Some(d) = st.details.as_mut() {
        d.uid = "u-1".into();
        d.retry_after_seconds = 5;
    }
    st
}

fn full_api_resource_list() -> APIResourceList {
    APIResourceList {
        group_version: "restaurant.programming-kubernetes.info/v1beta1".into(),
        resources: vec![
            APIResource {
                name: "pizzas".into(),
                singular_name: "pizza".into(),
                namespaced: true,
                kind: "Pizza".into(),
                verbs: Verbs::from([
                    "create",
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "update",
                    "watch",
                ]),
                short_names: vec!["pz".into()],
                categories: vec!["all".into()],
                storage_version_hash: "abc=".into(),
                ..Default::default()
            },
            APIResource {
                name: "pizzas/status".into(),
                namespaced: true,
                kind: "Pizza".into(),
                group: "g".into(),
                version: "v".into(),
                verbs: Verbs::from(["get", "patch", "update"]),
                ..Default::default()
            },
        ],
    }
}

fn full_discovery() -> APIGroupDiscoveryList {
    let gvk = |k: &str| GroupVersionKind {
        group: "restaurant.programming-kubernetes.info".into(),
        version: "v1beta1".into(),
        kind: k.into(),
    };
    APIGroupDiscoveryList {
        metadata: ListMeta::default(),
        items: vec![APIGroupDiscovery {
            metadata: ObjectMeta {
                name: "restaurant.programming-kubernetes.info".into(),
                ..Default::default()
            },
            versions: vec![APIVersionDiscovery {
                version: "v1beta1".into(),
                freshness: DISCOVERY_FRESHNESS_CURRENT.into(),
                resources: vec![APIResourceDiscovery {
                    resource: "pizzas".into(),
                    response_kind: Some(gvk("Pizza")),
                    scope: SCOPE_NAMESPACE.into(),
                    singular_resource: "pizza".into(),
                    verbs: vec!["get".into(), "list".into()],
                    short_names: vec!["pz".into()],
                    categories: vec!["all".into()],
                    subresources: vec![APISubresourceDiscovery {
                        subresource: "status".into(),
                        response_kind: Some(gvk("Pizza")),
                        accepted_types: vec![gvk("Pizza"), gvk("Other")],
                        verbs: vec!["get".into()],
                    }],
                }],
            }],
        }],
    }
}

/// Ours → bytes → k8s-pb equals the expected upstream value; that value → bytes → ours equals ours.
fn check<O, P>(ours: &O, expected: P)
where
    O: Message + Default + PartialEq + std::fmt::Debug,
    P: Message + Default + PartialEq + std::fmt::Debug,
{
    let decoded = P::decode(ours.encode_to_vec().as_slice()).expect("k8s-pb decodes ours");
    assert_eq!(decoded, expected);
    let back = O::decode(expected.encode_to_vec().as_slice()).expect("we decode k8s-pb's");
    assert_eq!(&back, ours);
}

#[test]
fn object_meta_matches_upstream() {
    let m = full_object_meta();
    check(&m, object_meta_to_pb(&m));
    check(
        &ObjectMeta::default(),
        object_meta_to_pb(&ObjectMeta::default()),
    );
}

#[test]
fn object_meta_from_sparse_upstream() {
    // An encoder that leaves out empty scalars (not Go, but valid proto2) still decodes.
    let p = pb::ObjectMeta {
        name: s("x"),
        creation_timestamp: Some(pb::Time {
            seconds: Some(1_700_000_000),
            nanos: None,
        }),
        ..Default::default()
    };
    let ours = ObjectMeta::decode(p.encode_to_vec().as_slice()).unwrap();
    assert_eq!(ours.name, "x");
    assert_eq!(ours.creation_timestamp, Some(ts(1_700_000_000)));
    assert_eq!(ours.namespace, "");
    // Go ignores nanos of a metav1.Time; so do we.
    let p = pb::Time {
        seconds: Some(10),
        nanos: Some(500),
    };
    assert_eq!(Time::decode(p.encode_to_vec().as_slice()).unwrap(), ts(10));
}

#[test]
fn list_meta_matches_upstream() {
    let m = ListMeta {
        self_link: "/x".into(),
        resource_version: "42".into(),
        continue_: "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ".into(),
        remaining_item_count: Some(7),
        shard_info: None,
    };
    check(&m, list_meta_to_pb(&m));
    check(&ListMeta::default(), list_meta_to_pb(&ListMeta::default()));
}

#[test]
fn status_matches_upstream() {
    let st = full_status();
    check(&st, status_to_pb(&st));
    let nf = Status::not_found("restaurant.programming-kubernetes.info", "pizzas", "x");
    check(&nf, status_to_pb(&nf));
    check(&Status::success(), status_to_pb(&Status::success()));
}

#[test]
fn watch_event_matches_upstream() {
    let object = Status::resource_expired("too old resource version: 1 (5)");
    // The object as upstream embeds it: its protobuf with the `k8s\0` envelope.
    let mut raw = b"k8s\0".to_vec();
    raw.extend(
        pbr::Unknown {
            type_meta: Some(pbr::TypeMeta {
                api_version: s("v1"),
                kind: s("Status"),
            }),
            raw: Some(object.encode_to_vec()),
            content_encoding: s(""),
            content_type: s(""),
        }
        .encode_to_vec(),
    );
    let ev = WatchEvent::new(event_type::ERROR, raw.clone());
    let expected = pb::WatchEvent {
        r#type: s("ERROR"),
        object: Some(pbr::RawExtension { raw: Some(raw) }),
    };
    check(&ev, expected);

    // The embedded object survives the trip.
    let pbev = pb::WatchEvent::decode(ev.encode_to_vec().as_slice()).unwrap();
    let inner = pbev.object.unwrap().raw.unwrap();
    let unknown = pbr::Unknown::decode(&inner[4..]).unwrap();
    let st = pb::Status::decode(unknown.raw.unwrap().as_slice()).unwrap();
    assert_eq!(st.reason.as_deref(), Some("Expired"));
    assert_eq!(st.code, Some(410));

    // An empty object: upstream leaves `raw` out.
    let empty = WatchEvent::new(event_type::BOOKMARK, Vec::new());
    check(
        &empty,
        pb::WatchEvent {
            r#type: s("BOOKMARK"),
            object: Some(pbr::RawExtension { raw: None }),
        },
    );
}

#[test]
fn api_resource_list_matches_upstream() {
    let l = full_api_resource_list();
    check(&l, api_resource_list_to_pb(&l));
}

#[test]
fn aggregated_discovery_matches_upstream() {
    let l = full_discovery();
    check(&l, discovery_to_pb(&l));
}

#[test]
fn options_match_upstream() {
    let d = DeleteOptions {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: s("u"),
            resource_version: s("5"),
        }),
        orphan_dependents: Some(false),
        propagation_policy: s(DeleteOptions::PROPAGATION_FOREGROUND),
        dry_run: vec![DRY_RUN_ALL.into()],
        ignore_store_read_error_with_cluster_breaking_potential: Some(true),
    };
    check(
        &d,
        pb::DeleteOptions {
            grace_period_seconds: Some(0),
            preconditions: Some(pb::Preconditions {
                uid: s("u"),
                resource_version: s("5"),
            }),
            orphan_dependents: Some(false),
            propagation_policy: s("Foreground"),
            dry_run: vec!["All".into()],
            ignore_store_read_error_with_cluster_breaking_potential: Some(true),
        },
    );
    let l = ListOptions {
        label_selector: "a=b".into(),
        field_selector: "metadata.name=x".into(),
        watch: true,
        allow_watch_bookmarks: true,
        resource_version: "10".into(),
        resource_version_match: ListOptions::MATCH_NOT_OLDER_THAN.into(),
        timeout_seconds: Some(30),
        limit: 500,
        continue_: "tok".into(),
        send_initial_events: Some(true),
        shard_selector: String::new(),
    };
    let pl = pb::ListOptions::decode(l.encode_to_vec().as_slice()).unwrap();
    assert_eq!(pl.label_selector.as_deref(), Some("a=b"));
    assert_eq!(pl.field_selector.as_deref(), Some("metadata.name=x"));
    assert_eq!(pl.watch, Some(true));
    assert_eq!(pl.allow_watch_bookmarks, Some(true));
    assert_eq!(pl.resource_version.as_deref(), Some("10"));
    assert_eq!(pl.resource_version_match.as_deref(), Some("NotOlderThan"));
    assert_eq!(pl.timeout_seconds, Some(30));
    assert_eq!(pl.limit, Some(500));
    assert_eq!(pl.r#continue.as_deref(), Some("tok"));
    assert_eq!(pl.send_initial_events, Some(true));
    assert_eq!(
        ListOptions::decode(pl.encode_to_vec().as_slice()).unwrap(),
        l
    );

    let c = CreateOptions {
        dry_run: vec!["All".into()],
        field_manager: "m".into(),
        field_validation: "Strict".into(),
    };
    check(
        &c,
        pb::CreateOptions {
            dry_run: vec!["All".into()],
            field_manager: s("m"),
            field_validation: s("Strict"),
        },
    );
    let u = UpdateOptions {
        dry_run: vec![],
        field_manager: "m".into(),
        field_validation: "Warn".into(),
    };
    check(
        &u,
        pb::UpdateOptions {
            dry_run: vec![],
            field_manager: s("m"),
            field_validation: s("Warn"),
        },
    );
    let p = PatchOptions {
        dry_run: vec![],
        force: Some(true),
        field_manager: "m".into(),
        field_validation: "Ignore".into(),
    };
    check(
        &p,
        pb::PatchOptions {
            dry_run: vec![],
            force: Some(true),
            field_manager: s("m"),
            field_validation: s("Ignore"),
        },
    );
    check(
        &GetOptions {
            resource_version: "0".into(),
        },
        pb::GetOptions {
            resource_version: s("0"),
        },
    );
    check(
        &TableOptions {
            include_object: TableOptions::INCLUDE_NONE.into(),
        },
        pb::TableOptions {
            include_object: s("None"),
        },
    );
}

#[test]
fn label_selector_and_partial_metadata_match_upstream() {
    let sel = LabelSelector {
        match_labels: BTreeMap::from([("a".to_string(), "b".to_string())]),
        match_expressions: vec![LabelSelectorRequirement {
            key: "tier".into(),
            operator: LabelSelectorRequirement::IN.into(),
            values: vec!["x".into(), "y".into()],
        }],
    };
    check(
        &sel,
        pb::LabelSelector {
            match_labels: BTreeMap::from([("a".to_string(), "b".to_string())]),
            match_expressions: vec![pb::LabelSelectorRequirement {
                key: s("tier"),
                operator: s("In"),
                values: vec!["x".into(), "y".into()],
            }],
        },
    );
    let list = PartialObjectMetadataList {
        metadata: ListMeta {
            resource_version: "3".into(),
            ..Default::default()
        },
        items: vec![PartialObjectMetadata {
            metadata: full_object_meta(),
        }],
    };
    check(
        &list,
        pb::PartialObjectMetadataList {
            metadata: Some(list_meta_to_pb(&list.metadata)),
            items: vec![pb::PartialObjectMetadata {
                metadata: Some(object_meta_to_pb(&list.items[0].metadata)),
            }],
        },
    );
}

#[test]
fn legacy_discovery_matches_upstream() {
    let g = APIGroupList {
        groups: vec![APIGroup {
            name: "restaurant.programming-kubernetes.info".into(),
            versions: vec![
                GroupVersionForDiscovery {
                    group_version: "restaurant.programming-kubernetes.info/v1beta1".into(),
                    version: "v1beta1".into(),
                },
                GroupVersionForDiscovery {
                    group_version: "restaurant.programming-kubernetes.info/v1alpha1".into(),
                    version: "v1alpha1".into(),
                },
            ],
            preferred_version: GroupVersionForDiscovery {
                group_version: "restaurant.programming-kubernetes.info/v1beta1".into(),
                version: "v1beta1".into(),
            },
            server_address_by_client_cidrs: vec![ServerAddressByClientCIDR {
                client_cidr: "0.0.0.0/0".into(),
                server_address: "10.0.0.1:443".into(),
            }],
        }],
    };
    let gvd = |v: &GroupVersionForDiscovery| pb::GroupVersionForDiscovery {
        group_version: s(&v.group_version),
        version: s(&v.version),
    };
    check(
        &g,
        pb::APIGroupList {
            groups: g
                .groups
                .iter()
                .map(|x| pb::APIGroup {
                    name: s(&x.name),
                    versions: x.versions.iter().map(gvd).collect(),
                    preferred_version: Some(gvd(&x.preferred_version)),
                    server_address_by_client_cid_rs: vec![pb::ServerAddressByClientCIDR {
                        client_cidr: s("0.0.0.0/0"),
                        server_address: s("10.0.0.1:443"),
                    }],
                })
                .collect(),
        },
    );
    check(
        &APIVersions {
            versions: vec!["v1".into()],
            server_address_by_client_cidrs: vec![],
        },
        pb::APIVersions {
            versions: vec!["v1".into()],
            server_address_by_client_cid_rs: vec![],
        },
    );
}
