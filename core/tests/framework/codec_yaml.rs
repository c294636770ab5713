//! YAML: round trip, strictness (through JSON, as upstream), duplicate keys with line numbers.

use apiserver::codec::{
    ApiVersionKind, CodecError, FieldValidation, decode_yaml, encode_yaml, peek_yaml_type_meta,
    yaml_to_json,
};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Topping {
    name: String,
    #[serde(default)]
    quantity: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PizzaSpec {
    #[serde(default)]
    toppings: Vec<Topping>,
    #[serde(default)]
    paused: bool,
    #[serde(default)]
    note: String,
    #[serde(default)]
    price: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Pizza {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: PizzaSpec,
}

/// Upstream's invalidBodyYAML (field_validation_test.go), adapted to our test type.
const INVALID: &str = "apiVersion: restaurant.example.com/v1
kind: Pizza
metadata:
  name: dupename
  name: real
  unknownMeta: metaVal
spec:
  unknown1: val1
  unknownDupe: valDupe
  unknownDupe: valDupe2
  paused: true
  paused: false
  toppings:
  - name: salami
    unknownNested: val1
    quantity: 1
    quantity: 2";

#[test]
fn strict_lists_yaml_duplicates_then_unknown_fields_sorted() {
    let err = decode_yaml::<Pizza>(INVALID.as_bytes(), FieldValidation::Strict).unwrap_err();
    assert!(err.is_strict_decoding());
    assert_eq!(
        err.to_string(),
        "strict decoding error: yaml: unmarshal errors:\n  line 5: key \"name\" already set in map\n  \
         line 10: key \"unknownDupe\" already set in map\n  line 12: key \"paused\" already set in map\n  \
         line 17: key \"quantity\" already set in map, unknown field \"metadata.unknownMeta\", \
         unknown field \"spec.toppings[0].unknownNested\", unknown field \"spec.unknown1\", \
         unknown field \"spec.unknownDupe\""
    );
}

#[test]
fn warn_splits_yaml_duplicates_into_warnings() {
    let d = decode_yaml::<Pizza>(INVALID.as_bytes(), FieldValidation::Warn).unwrap();
    assert_eq!(
        d.warnings,
        vec![
            r#"line 5: key "name" already set in map"#,
            r#"line 10: key "unknownDupe" already set in map"#,
            r#"line 12: key "paused" already set in map"#,
            r#"line 17: key "quantity" already set in map"#,
            r#"unknown field "metadata.unknownMeta""#,
            r#"unknown field "spec.toppings[0].unknownNested""#,
            r#"unknown field "spec.unknown1""#,
            r#"unknown field "spec.unknownDupe""#,
        ]
    );
    assert_eq!(d.object.metadata.name, "real");
    assert_eq!(d.object.spec.toppings[0].quantity, 2);
    assert_eq!(
        d.type_meta,
        ApiVersionKind::new("restaurant.example.com/v1", "Pizza")
    );
}

#[test]
fn ignore_is_lenient() {
    let d = decode_yaml::<Pizza>(INVALID.as_bytes(), FieldValidation::Ignore).unwrap();
    assert!(d.warnings.is_empty());
    assert!(!d.object.spec.paused);
}

#[test]
fn strict_with_only_duplicates() {
    let body = "kind: Pizza\nspec:\n  paused: true\n  paused: true\n";
    let err = decode_yaml::<Pizza>(body.as_bytes(), FieldValidation::Strict).unwrap_err();
    assert_eq!(
        err.to_string(),
        "strict decoding error: yaml: unmarshal errors:\n  line 4: key \"paused\" already set in map"
    );
}

#[test]
fn yaml_is_case_sensitive() {
    let body = "kind: Pizza\nSpec:\n  paused: true\n";
    let err = decode_yaml::<Pizza>(body.as_bytes(), FieldValidation::Strict).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"strict decoding error: unknown field "Spec""#
    );
}

#[test]
fn round_trip_keeps_kind_and_api_version_first() {
    let p = Pizza {
        metadata: Meta { name: "m".into() },
        spec: PizzaSpec {
            toppings: vec![
                Topping {
                    name: "yes".into(), // must stay a string
                    quantity: 1,
                },
                Topping {
                    name: "0x10".into(),
                    quantity: 2,
                },
            ],
            paused: true,
            note: "multi\nline: with colon".into(),
            price: 10.5,
        },
    };
    let yaml =
        String::from_utf8(encode_yaml("restaurant.example.com/v1", "Pizza", &p).unwrap()).unwrap();
    assert!(
        yaml.starts_with("kind: Pizza\napiVersion: restaurant.example.com/v1\n"),
        "{yaml}"
    );
    let d = decode_yaml::<Pizza>(yaml.as_bytes(), FieldValidation::Strict).unwrap();
    assert_eq!(d.object, p);
    assert_eq!(d.type_meta.kind, "Pizza");
    assert_eq!(peek_yaml_type_meta(yaml.as_bytes()).unwrap().kind, "Pizza");
}

#[test]
fn integral_floats_decode_into_integers_as_in_go() {
    let d = decode_yaml::<Pizza>(
        b"spec:\n  toppings:\n  - name: a\n    quantity: 3.0\n  price: 2\n",
        FieldValidation::Strict,
    )
    .unwrap();
    assert_eq!(d.object.spec.toppings[0].quantity, 3);
    assert_eq!(d.object.spec.price, 2.0);
}

#[test]
fn conversion_sorts_keys_and_keeps_last_value() {
    let (json, dups) = yaml_to_json(b"b: 1\na: [x, {d: 1, c: null}]\nb: 2\n1: one\n").unwrap();
    assert_eq!(
        String::from_utf8(json).unwrap(),
        r#"{"1":"one","a":["x",{"c":null,"d":1}],"b":2}"#
    );
    assert_eq!(dups, vec![r#"line 3: key "b" already set in map"#]);
}

#[test]
fn multiple_documents_are_an_error() {
    let err =
        decode_yaml::<Pizza>(b"kind: A\n---\nkind: B\n", FieldValidation::Ignore).unwrap_err();
    assert!(matches!(err, CodecError::YamlSyntax(_)));
    assert_eq!(
        err.to_string(),
        "error converting YAML to JSON: yaml: expected a single document in the stream"
    );
    // A leading document marker is one document.
    assert!(decode_yaml::<Pizza>(b"---\nkind: A\n", FieldValidation::Strict).is_ok());
}

#[test]
fn syntax_errors_are_bad_requests() {
    let err = decode_yaml::<Pizza>(b"a: b: c\n", FieldValidation::Strict).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("error converting YAML to JSON: yaml: "),
        "{err}"
    );
    assert_eq!(err.code(), 400);
    let err = decode_yaml::<Pizza>(b"spec: [1, 2\n", FieldValidation::Strict).unwrap_err();
    assert_eq!(err.code(), 400);
    let err = decode_yaml::<Pizza>(b"spec:\n  price: .nan\n", FieldValidation::Strict).unwrap_err();
    assert_eq!(err.code(), 400, "{err}");
}
