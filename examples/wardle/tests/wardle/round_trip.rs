//! Hub → every served version → hub is the identity, through JSON, YAML and protobuf, for the objects upstream's
//! fuzzer makes (at most one reference, with the type that names it); v1alpha1's defaulting and manual conversion
//! on decode; and upstream's validation messages.

use apiserver::codec::{FieldValidation, MediaType};
use apiserver::meta::{Condition, ObjectMeta, Time};
use apiserver::runtime::Resource;
use apiserver::validation::Path;
use chrono::DateTime;
use proptest::prelude::*;
use serde_json::json;
use wardle_apiserver::strategy::validate_flunder_spec;
use wardle_apiserver::wardle::{Fischer, Flunder, FlunderSpec, FlunderStatus};
use wardle_apiserver::{fischer_codec, flunder_codec};

fn meta(namespaced: bool) -> impl Strategy<Value = ObjectMeta> {
    (
        "[a-z][a-z0-9-]{0,20}",
        prop::collection::btree_map("[a-z]{1,8}", "[a-z0-9]{0,8}", 0..3),
        1i64..100,
    )
        .prop_map(move |(name, labels, generation)| ObjectMeta {
            namespace: if namespaced {
                "default".into()
            } else {
                String::new()
            },
            uid: format!("uid-{name}"),
            resource_version: generation.to_string(),
            generation,
            labels,
            name,
            ..ObjectMeta::default()
        })
}

/// Upstream's fuzzer: a flunder reference wins over a fischer reference, and the type follows the reference.
fn flunder_spec() -> impl Strategy<Value = FlunderSpec> {
    ("[a-z]{0,8}", "[a-z]{0,8}").prop_map(|(flunder, fischer)| {
        let fischer = if flunder.is_empty() {
            fischer
        } else {
            String::new()
        };
        let reference_type = match (flunder.is_empty(), fischer.is_empty()) {
            (false, _) => "Flunder",
            (true, false) => "Fischer",
            (true, true) => "",
        };
        FlunderSpec {
            flunder_reference: flunder,
            fischer_reference: fischer,
            reference_type: reference_type.to_string(),
        }
    })
}

/// Conditions as the controller and `validate_conditions` allow them: unique types, a status, a reason and a time.
fn conditions() -> impl Strategy<Value = Vec<Condition>> {
    let condition = (
        "[A-Z][a-z]{0,6}",
        prop::sample::select(vec!["True", "False", "Unknown"]),
        0i64..10,
        0i64..4_102_444_800,
        "[A-Z][A-Za-z]{0,8}",
        "[ -~]{0,16}",
    )
        .prop_map(
            |(type_, status, observed_generation, seconds, reason, message)| Condition {
                type_,
                status: status.into(),
                observed_generation,
                last_transition_time: DateTime::from_timestamp(seconds, 0).map(Time::from),
                reason,
                message,
            },
        );
    prop::collection::vec(condition, 0..3).prop_map(|mut conditions| {
        let mut seen = std::collections::HashSet::new();
        conditions.retain(|c| seen.insert(c.type_.clone()));
        conditions
    })
}

fn flunder() -> impl Strategy<Value = Flunder> {
    (meta(true), flunder_spec(), conditions()).prop_map(|(metadata, spec, conditions)| Flunder {
        metadata,
        spec,
        status: FlunderStatus { conditions },
    })
}

fn fischer() -> impl Strategy<Value = Fischer> {
    (meta(false), prop::collection::vec("[a-z]{1,8}", 0..4)).prop_map(
        |(metadata, disallowed_flunders)| Fischer {
            metadata,
            disallowed_flunders,
        },
    )
}

proptest! {
    #[test]
    fn flunders_round_trip_through_every_version_and_format(flunder in flunder()) {
        let codec = flunder_codec();
        for version in codec.versions() {
            for format in MediaType::ALL {
                let bytes = codec.encode(&flunder, version, format).unwrap();
                let back = codec.decode(&bytes, format, version, FieldValidation::Strict).unwrap();
                prop_assert!(back.warnings.is_empty());
                prop_assert_eq!(&back.object, &flunder, "{} {:?}", version, format);
            }
        }
        let stored = codec.encode_stored(&flunder, MediaType::Json).unwrap();
        prop_assert_eq!(codec.decode_stored(&stored).unwrap(), flunder);
    }

    #[test]
    fn fischers_round_trip_through_every_format(fischer in fischer()) {
        let codec = fischer_codec();
        for format in MediaType::ALL {
            let bytes = codec.encode(&fischer, "v1alpha1", format).unwrap();
            let back = codec.decode(&bytes, format, "v1alpha1", FieldValidation::Strict).unwrap();
            prop_assert_eq!(&back.object, &fischer, "{:?}", format);
        }
    }

    /// Every flunder the fuzzer makes is valid.
    #[test]
    fn fuzzed_flunders_are_valid(spec in flunder_spec()) {
        prop_assert!(validate_flunder_spec(&spec, &Path::new("spec")).is_empty());
    }
}

#[test]
fn identity_of_the_hub_types() {
    assert_eq!(Flunder::PLURAL, "flunders");
    assert!(Flunder::namespaced());
    assert_eq!(Fischer::PLURAL, "fischers");
    assert!(!Fischer::namespaced());
    assert_eq!(
        Flunder::group_resource().to_string(),
        "flunders.wardle.example.com"
    );
    assert_eq!(
        flunder_codec().versions().collect::<Vec<_>>(),
        ["v1beta1", "v1alpha1"]
    );
    assert_eq!(flunder_codec().storage_version_name(), Some("v1alpha1"));
    assert_eq!(fischer_codec().versions().collect::<Vec<_>>(), ["v1alpha1"]);
}

/// A v1alpha1 document's spec as the hub sees it, after defaulting and conversion.
fn v1alpha1_spec(spec: serde_json::Value) -> FlunderSpec {
    let document = json!({
        "apiVersion": "wardle.example.com/v1alpha1",
        "kind": "Flunder",
        "metadata": { "name": "f", "namespace": "default" },
        "spec": spec,
    });
    let bytes = serde_json::to_vec(&document).unwrap();
    flunder_codec()
        .decode(&bytes, MediaType::Json, "v1alpha1", FieldValidation::Strict)
        .expect("decodes")
        .object
        .spec
}

fn spec(flunder: &str, fischer: &str, reference_type: &str) -> FlunderSpec {
    FlunderSpec {
        flunder_reference: flunder.into(),
        fischer_reference: fischer.into(),
        reference_type: reference_type.into(),
    }
}

#[test]
fn v1alpha1_routes_the_reference_by_its_type_and_defaults_the_type() {
    assert_eq!(v1alpha1_spec(json!({})), spec("", "", ""));
    assert_eq!(
        v1alpha1_spec(json!({ "reference": "a" })),
        spec("a", "", "Flunder")
    );
    assert_eq!(
        v1alpha1_spec(json!({ "reference": "a", "referenceType": "" })),
        spec("a", "", "Flunder")
    );
    assert_eq!(
        v1alpha1_spec(json!({ "reference": "a", "referenceType": "Fischer" })),
        spec("", "a", "Fischer")
    );
    assert_eq!(
        v1alpha1_spec(json!({ "referenceType": "Fischer" })),
        spec("", "", "Fischer")
    );
    // Upstream drops an unknown type with its reference; we keep the type for validation to refuse.
    assert_eq!(
        v1alpha1_spec(json!({ "reference": "a", "referenceType": "Bogus" })),
        spec("", "", "Bogus")
    );
}

#[test]
fn v1alpha1_leaves_out_what_is_empty() {
    let mut flunder = Flunder::default();
    flunder.metadata.name = "f".into();
    let bytes = flunder_codec()
        .encode(&flunder, "v1alpha1", MediaType::Json)
        .unwrap();
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(value["spec"], json!({}));
    assert_eq!(value["status"], json!({}));
    flunder.spec = spec("", "b", "Fischer");
    let bytes = flunder_codec()
        .encode(&flunder, "v1alpha1", MediaType::Json)
        .unwrap();
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        value["spec"],
        json!({ "reference": "b", "referenceType": "Fischer" })
    );
}

#[test]
fn validation_has_upstreams_messages() {
    let errors = |s: FlunderSpec| -> Vec<String> {
        validate_flunder_spec(&s, &Path::new("spec"))
            .iter()
            .map(|e| e.to_string())
            .collect()
    };
    assert_eq!(
        errors(spec("a", "b", "Flunder")),
        [
            r#"spec.fischerReference: Invalid value: "b": cannot be set with flunderReference at the same time"#
        ]
    );
    assert_eq!(
        errors(spec("a", "", "Fischer")),
        [
            r#"spec.flunderReference: Invalid value: "a": cannot be set if referenceType is not Flunder"#
        ]
    );
    assert_eq!(
        errors(spec("", "b", "")),
        [
            r#"spec.fischerReference: Invalid value: "b": cannot be set if referenceType is not Fischer"#
        ]
    );
    assert_eq!(
        errors(spec("", "", "Fischer")),
        [
            r#"spec.fischerReference: Invalid value: "": cannot be empty if referenceType is Fischer"#
        ]
    );
    assert_eq!(
        errors(spec("", "", "Flunder")),
        [
            r#"spec.flunderReference: Invalid value: "": cannot be empty if referenceType is Flunder"#
        ]
    );
    assert_eq!(
        errors(spec("a", "", "Bogus")),
        [
            r#"spec.flunderReference: Invalid value: "a": cannot be set if referenceType is not Flunder"#,
            r#"spec.referenceType: Invalid value: "Bogus": must be Flunder or Fischer"#,
        ]
    );
    assert!(errors(spec("", "", "")).is_empty());
}

// The framework's generated round trip: objects made from each preferred version's schema, valid flunders only.
apiserver::round_trip_test!(
    generated_flunders_round_trip,
    flunder_codec(),
    |f: &Flunder| { validate_flunder_spec(&f.spec, &Path::new("spec")).is_empty() }
);
apiserver::round_trip_test!(generated_fischers_round_trip, fischer_codec());

// Stored protobuf names fields by tag: each served version's tags are kept in a checked-in table.
apiserver::protobuf_tags_test!(
    flunder_protobuf_tags,
    flunder_codec(),
    "tests/protobuf-tags/flunders.txt"
);
apiserver::protobuf_tags_test!(
    fischer_protobuf_tags,
    fischer_codec(),
    "tests/protobuf-tags/fischers.txt"
);
