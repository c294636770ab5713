//! Hub → every served version → hub is the identity, through JSON, YAML and protobuf, for objects the reference
//! server's fuzzer would make (non-empty toppings, unique names, quantity 1..10).

use apiserver::codec::{FieldValidation, MediaType};
use apiserver::meta::{ObjectMeta, Time};
use apiserver::runtime::Resource;
use chrono::TimeZone;
use pizza_apiserver::restaurant::{
    Pizza, PizzaSpec, PizzaStatus, PizzaTopping, Topping, ToppingSpec,
};
use proptest::prelude::*;

fn meta(namespaced: bool) -> impl Strategy<Value = ObjectMeta> {
    (
        "[a-z][a-z0-9-]{0,20}",
        prop::collection::btree_map("[a-z]{1,8}", "[a-z0-9]{0,8}", 0..3),
        0i64..2_000_000_000,
        1i64..100,
    )
        .prop_map(move |(name, labels, created, generation)| ObjectMeta {
            namespace: if namespaced {
                "default".into()
            } else {
                String::new()
            },
            uid: format!("uid-{name}"),
            resource_version: generation.to_string(),
            generation,
            creation_timestamp: Some(Time(chrono::Utc.timestamp_opt(created, 0).unwrap())),
            labels,
            name,
            ..ObjectMeta::default()
        })
}

fn cost() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        -1.0e6f64..1.0e6,
        (0u32..10_000).prop_map(|c| f64::from(c) / 100.0)
    ]
}

fn pizza() -> impl Strategy<Value = Pizza> {
    (
        meta(true),
        prop::collection::btree_map("[a-z]{1,10}", 1i32..=10, 1..6),
        cost(),
    )
        .prop_map(|(metadata, toppings, cost)| Pizza {
            metadata,
            spec: PizzaSpec {
                toppings: toppings
                    .into_iter()
                    .map(|(name, quantity)| PizzaTopping { name, quantity })
                    .collect(),
            },
            status: PizzaStatus { cost },
        })
}

fn topping() -> impl Strategy<Value = Topping> {
    (meta(false), cost()).prop_map(|(metadata, cost)| Topping {
        metadata,
        spec: ToppingSpec { cost },
    })
}

proptest! {
    #[test]
    fn pizzas_round_trip_through_every_version_and_format(pizza in pizza()) {
        let codec = Pizza::codec();
        for version in codec.versions() {
            for format in MediaType::ALL {
                let bytes = codec.encode(&pizza, version, format).unwrap();
                let back = codec.decode(&bytes, format, version, FieldValidation::Strict).unwrap();
                prop_assert!(back.warnings.is_empty());
                prop_assert_eq!(&back.object, &pizza, "{} {:?}", version, format);
            }
        }
        let stored = codec.encode_stored(&pizza, MediaType::Json).unwrap();
        prop_assert_eq!(codec.decode_stored(&stored).unwrap(), pizza);
    }

    #[test]
    fn toppings_round_trip_through_every_version_and_format(topping in topping()) {
        let codec = Topping::codec();
        for version in codec.versions() {
            for format in MediaType::ALL {
                let bytes = codec.encode(&topping, version, format).unwrap();
                let back = codec.decode(&bytes, format, version, FieldValidation::Strict).unwrap();
                prop_assert_eq!(&back.object, &topping, "{} {:?}", version, format);
            }
        }
    }
}

#[test]
fn identity_of_the_hub_types() {
    assert_eq!(Pizza::PLURAL, "pizzas");
    assert_eq!(Pizza::SINGULAR, "pizza");
    assert!(Pizza::namespaced());
    assert_eq!(Topping::PLURAL, "toppings");
    assert!(!Topping::namespaced());
    assert_eq!(
        Pizza::group_resource().to_string(),
        "pizzas.restaurant.programming-kubernetes.info"
    );
    assert_eq!(Pizza::PRINTER_COLUMNS[0].json_path, ".status.cost");
    assert_eq!(
        Pizza::codec().versions().collect::<Vec<_>>(),
        ["v1beta1", "v1alpha1"]
    );
    assert_eq!(Pizza::codec().storage_version_name(), Some("v1alpha1"));
}

/// A hub pizza as its v1beta1 JSON document.
fn v1beta1_json(pizza: &Pizza) -> serde_json::Value {
    let bytes = Pizza::codec()
        .encode(pizza, "v1beta1", MediaType::Json)
        .expect("encodes");
    serde_json::from_slice(&bytes).expect("JSON")
}

fn strategic_merge(original: serde_json::Value, patch: serde_json::Value) -> serde_json::Value {
    use apiserver::endpoints::strategic_merge::{PatchSchema, apply};
    let codec = Pizza::codec();
    let schema = codec.patch_schema("v1beta1").expect("v1beta1 is served");
    apply(original, patch, PatchSchema::new(schema)).expect("patch applies")
}

proptest! {
    /// A strategic merge patch that is the whole new object (metadata and status with `$patch: replace`), plus a
    /// `$setElementOrder` of its toppings and a `$patch: delete` for each topping only the old one has, turns old
    /// into new, toppings in new's order.
    #[test]
    fn strategic_merge_of_the_whole_object_gives_it(old in pizza(), new in pizza()) {
        let old_json = v1beta1_json(&old);
        let mut patch = v1beta1_json(&new);
        let new_names: Vec<&str> = new.spec.toppings.iter().map(|t| t.name.as_str()).collect();
        let mut toppings = patch["spec"]["toppings"].as_array().cloned().unwrap_or_default();
        for gone in old.spec.toppings.iter().filter(|t| !new_names.contains(&t.name.as_str())) {
            toppings.push(serde_json::json!({ "$patch": "delete", "name": gone.name }));
        }
        patch["spec"]["toppings"] = serde_json::Value::Array(toppings);
        patch["spec"]["$setElementOrder/toppings"] = new_names
            .iter()
            .map(|n| serde_json::json!({ "name": n }))
            .collect();
        // Metadata and status are taken whole.
        patch["metadata"]["$patch"] = "replace".into();
        patch["status"]["$patch"] = "replace".into();
        let patched = strategic_merge(old_json, patch);
        let decoded = Pizza::codec()
            .decode(&serde_json::to_vec(&patched).unwrap(), MediaType::Json, "v1beta1", FieldValidation::Strict)
            .expect("decodes");
        prop_assert_eq!(decoded.object, new);
    }

    /// Patching one topping by name changes that topping only.
    #[test]
    fn strategic_merge_of_one_topping_changes_only_it(old in pizza(), index in 0usize..6, quantity in 1i32..=10) {
        let index = index % old.spec.toppings.len();
        let name = old.spec.toppings[index].name.clone();
        let patch = serde_json::json!({ "spec": { "toppings": [{ "name": name, "quantity": quantity }] } });
        let patched = strategic_merge(v1beta1_json(&old), patch);
        let decoded = Pizza::codec()
            .decode(&serde_json::to_vec(&patched).unwrap(), MediaType::Json, "v1beta1", FieldValidation::Strict)
            .expect("decodes");
        let mut want = old.clone();
        want.spec.toppings[index].quantity = quantity;
        prop_assert_eq!(decoded.object, want);
    }
}

proptest! {
    /// A list put together from items encoded one by one (what LIST serves from its kept encodings) is byte for
    /// byte the list encoded whole, in every served version, JSON, protobuf and CBOR, with and without a continue
    /// token.
    #[test]
    fn lists_of_encoded_items_are_the_lists_encoded_whole(
        pizzas in prop::collection::vec(pizza(), 0..5),
        continue_token in prop_oneof![Just(String::new()), "[a-zA-Z0-9]{1,20}"],
        remaining in prop::option::of(0i64..1000),
    ) {
        let codec = Pizza::codec();
        let meta = apiserver::meta::ListMeta {
            resource_version: "42".into(),
            continue_: continue_token,
            remaining_item_count: remaining,
            ..Default::default()
        };
        for version in ["v1alpha1", "v1beta1"] {
            for format in [MediaType::Json, MediaType::Protobuf, MediaType::Cbor] {
                let whole = codec.encode_list(&meta, &pizzas, version, format).unwrap();
                let items: Vec<bytes::Bytes> = pizzas
                    .iter()
                    .map(|p| codec.encode_list_item(p, version, format).unwrap().into())
                    .collect();
                let assembled = codec.encode_list_of_items(&meta, &items, version, format).unwrap();
                prop_assert_eq!(&assembled, &whole, "{} {:?}", version, format);
            }
        }
    }
}

// The framework's generated round trip: objects made from each preferred version's schema, valid by the type's
// own validation where it has one.
apiserver::round_trip_test!(generated_pizzas_round_trip, Pizza::codec(), |p: &Pizza| {
    pizza_apiserver::validation::validate_pizza(p).is_empty()
});
apiserver::round_trip_test!(generated_toppings_round_trip, Topping::codec());
apiserver::round_trip_test!(
    generated_ovens_round_trip,
    pizza_apiserver::restaurant::Oven::codec()
);

// Stored protobuf names fields by tag: each served version's tags are kept in a checked-in table.
apiserver::protobuf_tags_test!(
    pizza_protobuf_tags,
    Pizza::codec(),
    "tests/protobuf-tags/pizzas.txt"
);
apiserver::protobuf_tags_test!(
    topping_protobuf_tags,
    Topping::codec(),
    "tests/protobuf-tags/toppings.txt"
);
apiserver::protobuf_tags_test!(
    oven_protobuf_tags,
    pizza_apiserver::restaurant::Oven::codec(),
    "tests/protobuf-tags/ovens.txt"
);
apiserver::protobuf_tags_test!(
    menu_protobuf_tags,
    pizza_apiserver::restaurant::MenuItem::codec(),
    "tests/protobuf-tags/menuitems.txt"
);
