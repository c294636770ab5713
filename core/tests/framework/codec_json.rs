//! JSON encoding and field validation (Strict / Warn / Ignore) against upstream's texts.

use std::collections::BTreeMap;

use apiserver::codec::{
    ApiVersionKind, CodecError, FieldValidation, decode_json, encode_json, encode_json_pretty,
    peek_json_type_meta,
};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    toppings: Vec<Topping>,
    #[serde(default)]
    paused: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    extra: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Pizza {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: PizzaSpec,
}

const AV: &str = "restaurant.example.com/v1";

fn strict(body: &str) -> String {
    decode_json::<Pizza>(body.as_bytes(), FieldValidation::Strict)
        .unwrap_err()
        .to_string()
}

fn warnings(body: &str) -> Vec<String> {
    decode_json::<Pizza>(body.as_bytes(), FieldValidation::Warn)
        .unwrap()
        .warnings
}

fn ignore(body: &str) -> Pizza {
    let d = decode_json::<Pizza>(body.as_bytes(), FieldValidation::Ignore).unwrap();
    assert!(d.warnings.is_empty());
    d.object
}

/// Upstream's integration test body (test/integration/apiserver/field_validation_test.go),
/// adapted to our test type.
const INVALID: &str = r#"{
    "apiVersion": "restaurant.example.com/v1",
    "kind": "Pizza",
    "metadata": {
        "name": "dupename",
        "name": "real",
        "labels": {"app": "nginx"},
        "unknownMeta": "metaVal"
    },
    "spec": {
        "unknown1": "val1",
        "unknownDupe": "valDupe",
        "unknownDupe": "valDupe2",
        "paused": true,
        "paused": false,
        "toppings": [{
            "name": "salami",
            "unknownNested": "val1",
            "quantity": 1,
            "quantity": 2
        }]
    }
}"#;

#[test]
fn strict_reports_unknown_and_duplicate_fields_in_document_order() {
    assert_eq!(
        strict(INVALID),
        "strict decoding error: duplicate field \"metadata.name\", unknown field \"metadata.unknownMeta\", \
         unknown field \"spec.unknown1\", unknown field \"spec.unknownDupe\", duplicate field \"spec.paused\", \
         unknown field \"spec.toppings[0].unknownNested\", duplicate field \"spec.toppings[0].quantity\""
    );
    let err = decode_json::<Pizza>(INVALID.as_bytes(), FieldValidation::Strict).unwrap_err();
    assert!(err.is_strict_decoding());
    assert_eq!(err.code(), 400);
    assert_eq!(err.reason(), "BadRequest");
}

#[test]
fn warn_returns_one_warning_per_field() {
    assert_eq!(
        warnings(INVALID),
        vec![
            r#"duplicate field "metadata.name""#,
            r#"unknown field "metadata.unknownMeta""#,
            r#"unknown field "spec.unknown1""#,
            r#"unknown field "spec.unknownDupe""#,
            r#"duplicate field "spec.paused""#,
            r#"unknown field "spec.toppings[0].unknownNested""#,
            r#"duplicate field "spec.toppings[0].quantity""#,
        ]
    );
    let d = decode_json::<Pizza>(INVALID.as_bytes(), FieldValidation::Warn).unwrap();
    assert_eq!(d.object.metadata.name, "real");
    assert_eq!(d.type_meta, ApiVersionKind::new(AV, "Pizza"));
}

#[test]
fn ignore_keeps_the_last_duplicate() {
    let p = ignore(INVALID);
    assert_eq!(p.metadata.name, "real");
    assert!(!p.spec.paused);
    assert_eq!(p.spec.toppings[0].quantity, 2);
    assert_eq!(p.metadata.labels["app"], "nginx");
}

#[test]
fn unknown_nested_and_array_paths_on_the_fast_path() {
    let body = r#"{"kind":"Pizza","apiVersion":"v1","spec":{"foo":1,"toppings":[{"name":"a"},{"name":"b","foo":{"x":1}}]}}"#;
    assert_eq!(
        strict(body),
        r#"strict decoding error: unknown field "spec.foo", unknown field "spec.toppings[1].foo""#
    );
    assert_eq!(
        warnings(body),
        vec![
            r#"unknown field "spec.foo""#,
            r#"unknown field "spec.toppings[1].foo""#
        ]
    );
    assert_eq!(ignore(body).spec.toppings.len(), 2);
}

#[test]
fn json_is_case_sensitive() {
    let body = r#"{"kind":"Pizza","apiVersion":"v1","Spec":{"paused":true}}"#;
    assert_eq!(
        strict(body),
        r#"strict decoding error: unknown field "Spec""#
    );
    assert!(!ignore(body).spec.paused);
    let body = r#"{"kind":"Pizza","apiVersion":"v1","spec":{"Paused":true}}"#;
    assert_eq!(
        strict(body),
        r#"strict decoding error: unknown field "spec.Paused""#
    );
}

#[test]
fn kind_and_api_version_are_not_unknown() {
    let body = r#"{"kind":"Pizza","apiVersion":"restaurant.example.com/v1","spec":{}}"#;
    let d = decode_json::<Pizza>(body.as_bytes(), FieldValidation::Strict).unwrap();
    assert!(d.warnings.is_empty());
    assert_eq!(d.type_meta, ApiVersionKind::new(AV, "Pizza"));
    assert_eq!(
        d.type_meta.group_version().unwrap(),
        ("restaurant.example.com", "v1")
    );
    // Nested kind/apiVersion are ordinary fields.
    let body = r#"{"kind":"Pizza","spec":{"kind":"x"}}"#;
    assert_eq!(
        strict(body),
        r#"strict decoding error: unknown field "spec.kind""#
    );
}

#[test]
fn duplicate_kind_is_a_duplicate_field() {
    let body = r#"{"kind":"Pizza","kind":"Topping","apiVersion":"v1"}"#;
    assert_eq!(
        strict(body),
        r#"strict decoding error: duplicate field "kind""#
    );
    let d = decode_json::<Pizza>(body.as_bytes(), FieldValidation::Ignore).unwrap();
    assert_eq!(d.type_meta.kind, "Topping");
}

#[test]
fn duplicate_map_keys() {
    let body = r#"{"metadata":{"labels":{"a":"1","b":"2","a":"3"}}}"#;
    assert_eq!(
        strict(body),
        r#"strict decoding error: duplicate field "metadata.labels.a""#
    );
    assert_eq!(ignore(body).metadata.labels["a"], "3");
}

#[test]
fn duplicate_objects_merge_as_go_does() {
    let body = r#"{"spec":{"paused":true},"spec":{"toppings":[{"name":"x"}]}}"#;
    assert_eq!(
        strict(body),
        r#"strict decoding error: duplicate field "spec""#
    );
    let p = ignore(body);
    assert!(p.spec.paused);
    assert_eq!(p.spec.toppings[0].name, "x");
}

#[test]
fn duplicates_inside_free_form_values_are_not_reported() {
    // Go decodes interface{} values without duplicate checks.
    let body = r#"{"spec":{"extra":{"a":1,"a":2},"paused":true,"paused":true}}"#;
    assert_eq!(
        strict(body),
        r#"strict decoding error: duplicate field "spec.paused""#
    );
    let body = r#"{"spec":{"extra":{"a":1,"a":2}}}"#;
    assert!(warnings(body).is_empty());
}

#[test]
fn unknown_under_duplicated_unknown_is_reported_once() {
    let body = r#"{"spec":{"foo":{"a":1},"foo":{"a":2}}}"#;
    assert_eq!(
        strict(body),
        r#"strict decoding error: unknown field "spec.foo""#
    );
}

#[test]
fn many_violations_are_capped_at_100() {
    let mut body = String::from("{");
    for i in 0..250 {
        body.push_str(&format!("\"u{i}\":1,"));
    }
    body.push_str("\"spec\":{}}");
    let d = decode_json::<Pizza>(body.as_bytes(), FieldValidation::Warn).unwrap();
    assert_eq!(d.warnings.len(), 100);
}

#[test]
fn syntax_errors_read_like_upstream() {
    let err = decode_json::<Pizza>(b"{", FieldValidation::Strict).unwrap_err();
    assert!(matches!(err, CodecError::JsonSyntax(_)));
    assert!(
        err.to_string()
            .starts_with("couldn't get version/kind; json parse error: "),
        "{err}"
    );
    let err = decode_json::<Pizza>(b"", FieldValidation::Warn).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("couldn't get version/kind; json parse error: ")
    );
    let err = decode_json::<Pizza>(b"{} x", FieldValidation::Warn).unwrap_err();
    assert!(err.to_string().contains("trailing characters"), "{err}");
    // A duplicate on the slow path with a syntax error afterwards.
    let err = decode_json::<Pizza>(br#"{"spec":{},"spec":{}"#, FieldValidation::Warn).unwrap_err();
    assert!(matches!(err, CodecError::JsonSyntax(_)), "{err}");
}

#[test]
fn type_errors_keep_serde_text() {
    let err =
        decode_json::<Pizza>(br#"{"spec":{"paused":"yes"}}"#, FieldValidation::Strict).unwrap_err();
    assert!(matches!(err, CodecError::Decode(_)));
    assert!(err.to_string().contains("invalid type"), "{err}");
    assert_eq!(err.code(), 400);
}

#[test]
fn group_version_and_missing_kind_texts() {
    let err =
        decode_json::<Pizza>(br#"{"apiVersion":"a/b/c"}"#, FieldValidation::Warn).unwrap_err();
    assert_eq!(err.to_string(), "unexpected GroupVersion string: a/b/c");
    let body = br#"{"apiVersion":"v1"}"#;
    let d = decode_json::<Pizza>(body, FieldValidation::Warn).unwrap();
    assert_eq!(
        d.type_meta.require_complete(body).unwrap_err().to_string(),
        r#"Object 'Kind' is missing in '{"apiVersion":"v1"}'"#
    );
    let body = br#"{"kind":"Pizza"}"#;
    let tm = peek_json_type_meta(body).unwrap();
    assert_eq!(
        tm.require_complete(body).unwrap_err().to_string(),
        r#"Object 'apiVersion' is missing in '{"kind":"Pizza"}'"#
    );
}

#[test]
fn peek_reads_type_meta_only() {
    let tm = peek_json_type_meta(
        br#"{"spec":{"kind":"no"},"kind":"A","kind":"Pizza","apiVersion":"g/v","x":[1,{}]}"#,
    )
    .unwrap();
    assert_eq!(tm, ApiVersionKind::new("g/v", "Pizza"));
    let err = peek_json_type_meta(b"[1").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("couldn't get version/kind; json parse error: ")
    );
}

fn sample() -> Pizza {
    Pizza {
        metadata: Meta {
            name: "margherita".into(),
            labels: [("a".to_string(), "b".to_string())].into(),
        },
        spec: PizzaSpec {
            toppings: vec![Topping {
                name: "mozzarella".into(),
                quantity: 2,
            }],
            paused: false,
            extra: Some(serde_json::json!({"z": 1, "a": [true, null]})),
        },
    }
}

#[test]
fn encode_puts_kind_and_api_version_first_and_round_trips() {
    let p = sample();
    let bytes = encode_json(AV, "Pizza", &p).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(
        text.starts_with(
            r#"{"kind":"Pizza","apiVersion":"restaurant.example.com/v1","metadata":{"#
        ),
        "{text}"
    );
    let back = decode_json::<Pizza>(&bytes, FieldValidation::Strict).unwrap();
    assert_eq!(back.object, p);
    assert_eq!(back.type_meta, ApiVersionKind::new(AV, "Pizza"));

    let pretty = String::from_utf8(encode_json_pretty(AV, "Pizza", &p).unwrap()).unwrap();
    assert!(
        pretty.starts_with("{\n  \"kind\": \"Pizza\",\n  \"apiVersion\": "),
        "{pretty}"
    );
    assert_eq!(
        decode_json::<Pizza>(pretty.as_bytes(), FieldValidation::Strict)
            .unwrap()
            .object,
        p
    );
}

#[test]
fn encode_omits_empty_type_fields_and_replaces_the_objects_own() {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct WithOwn {
        kind: &'static str,
        api_version: &'static str,
        x: u8,
    }
    let o = WithOwn {
        kind: "Old",
        api_version: "old/v0",
        x: 1,
    };
    assert_eq!(
        encode_json("v1", "New", &o).unwrap(),
        br#"{"kind":"New","apiVersion":"v1","x":1}"#
    );
    assert_eq!(encode_json("", "", &o).unwrap(), br#"{"x":1}"#);
    let map: BTreeMap<&str, u8> = [("b", 1), ("a", 2)].into();
    assert_eq!(
        encode_json("v1", "M", &map).unwrap(),
        br#"{"kind":"M","apiVersion":"v1","a":2,"b":1}"#
    );
    let err = encode_json("v1", "X", &5u32).unwrap_err();
    assert_eq!(err.code(), 500);
}
