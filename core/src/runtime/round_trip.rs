//! The round-trip property every served type must have (the seed's fuzzer test): an object made in the preferred
//! version, converted to the hub, then written and read back in every served version and media type, comes back
//! equal. Objects are generated from the preferred version's OpenAPI schema, so a type needs no generator of its
//! own: [`round_trip_test!`](crate::round_trip_test) makes the test in one line. A version that silently drops
//! what the hub holds fails it (declare it `#[versioned(lossless)]`, or convert the field).
//!
//! Only with the `testing` feature.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value};

use super::{Resource, ResourceCodec, Scope};
use crate::codec::{FieldValidation, MediaType};

/// Writes a test that checks [`check`] for a codec, optionally only for objects a predicate accepts (the type's
/// validation: an invalid object need not survive conversion). Needs the `testing` feature.
///
/// ```ignore
/// apiserver::round_trip_test!(pizzas_round_trip, pizza_apiserver::restaurant::Pizza::codec(), |p| validate_pizza(p).is_empty());
/// ```
#[macro_export]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
macro_rules! round_trip_test {
    ($name:ident, $codec:expr) => {
        $crate::round_trip_test!($name, $codec, |_| true);
    };
    ($name:ident, $codec:expr, $valid:expr) => {
        #[test]
        fn $name() {
            $crate::runtime::round_trip::check(&$codec, $valid);
        }
    };
}

/// Panics with the first object (shrunk) that does not survive every served version and media type.
pub fn check<H: Resource>(codec: &ResourceCodec<H>, valid: impl Fn(&H) -> bool) {
    let preferred = codec
        .versions()
        .next()
        .expect("a codec serves at least one version");
    let schema = codec
        .openapi_schema(preferred)
        .expect("the preferred version has a schema");
    let mut fields = Map::new();
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, property) in properties {
            if !matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                fields.insert(name.clone(), property.clone());
            }
        }
    }
    let objects = object_of(fields, 0).prop_map(move |mut object| {
        object.insert(
            "apiVersion".into(),
            H::group_version(preferred).api_version().into(),
        );
        object.insert("kind".into(), H::KIND.into());
        let mut metadata =
            serde_json::json!({ "name": "sample", "uid": "u-1", "resourceVersion": "7" });
        if H::SCOPE == Scope::Namespaced {
            metadata["namespace"] = "default".into();
        }
        object.insert("metadata".into(), metadata);
        Value::Object(object)
    });
    let accepted = std::cell::Cell::new(0u32);
    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&objects, |json| {
        let bytes = serde_json::to_vec(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let Ok(decoded) = codec.decode(&bytes, MediaType::Json, preferred, FieldValidation::Ignore) else {
            return Ok(());
        };
        let hub = decoded.object;
        if !valid(&hub) {
            return Ok(());
        }
        accepted.set(accepted.get() + 1);
        for version in codec.versions() {
            for format in MediaType::ALL {
                let encoded = codec
                    .encode(&hub, version, format)
                    .map_err(|e| TestCaseError::fail(format!("encoding in {version} {format:?}: {e}")))?;
                let back = codec
                    .decode(&encoded, format, version, FieldValidation::Strict)
                    .map_err(|e| TestCaseError::fail(format!("decoding {version} {format:?}: {e}")))?
                    .object;
                if back != hub {
                    return Err(TestCaseError::fail(format!(
                        "{} {version} ({format:?}) does not round-trip:\n  sent {json}\n  hub  {hub:?}\n  back {back:?}",
                        H::KIND
                    )));
                }
                // CBOR carries exactly what JSON carries: the same document, field for field.
                if format == MediaType::Cbor {
                    let as_json = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).map_err(|e| TestCaseError::fail(e.to_string()));
                    let transcoded = crate::codec::cbor_to_json(&encoded)
                        .map_err(|e| TestCaseError::fail(format!("transcoding {version} CBOR: {e}")))?;
                    let json_encoded = codec
                        .encode(&hub, version, MediaType::Json)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    if as_json(&transcoded)? != as_json(&json_encoded)? {
                        return Err(TestCaseError::fail(format!(
                            "{} {version}: CBOR and JSON differ:\n  cbor {}\n  json {}",
                            H::KIND,
                            String::from_utf8_lossy(&transcoded),
                            String::from_utf8_lossy(&json_encoded)
                        )));
                    }
                }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        accepted.get() > 0,
        "no generated {} was valid: the round trip was not tested",
        H::KIND
    );
}

/// Values for a schema, nested at most a few levels (deeper objects are empty).
fn value_of(schema: &Value, depth: u32) -> BoxedStrategy<Value> {
    if let Some(Value::Array(choices)) = schema
        .get("enum")
        .filter(|c| c.as_array().is_some_and(|c| !c.is_empty()))
    {
        return proptest::sample::select(choices.clone()).boxed();
    }
    for combinator in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema.get(combinator).and_then(|c| c.get(0)) {
            return value_of(first, depth);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        // `["string", "null"]`: the first that is not null.
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")
            .unwrap_or("object"),
        _ if schema.get("x-kubernetes-int-or-string").is_some() => "integer",
        _ => "object",
    };
    match kind {
        "string" if schema.get("format").and_then(Value::as_str) == Some("date-time") => {
            // Whole seconds from 1970 to 2100: what a `metav1.Time` carries.
            (0i64..4_102_444_800)
                .prop_map(|s| {
                    let t = chrono::DateTime::from_timestamp(s, 0).unwrap_or_default();
                    Value::from(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                })
                .boxed()
        }
        "string" => "[a-z0-9]{0,8}".prop_map(Value::from).boxed(),
        "boolean" => any::<bool>().prop_map(Value::from).boxed(),
        "integer" => match schema.get("format").and_then(Value::as_str) {
            Some("int64") => any::<i64>().prop_map(Value::from).boxed(),
            _ => any::<i32>().prop_map(Value::from).boxed(),
        },
        // Values JSON carries exactly.
        "number" => prop_oneof![
            Just(0.0),
            (-1_000_000i32..1_000_000).prop_map(f64::from),
            (0u32..100_000).prop_map(|c| f64::from(c) / 100.0),
        ]
        .prop_map(Value::from)
        .boxed(),
        "array" => {
            let items = schema.get("items").cloned().unwrap_or(Value::Null);
            if depth > 4 {
                return Just(Value::Array(Vec::new())).boxed();
            }
            proptest::collection::vec(value_of(&items, depth + 1), 0..4)
                .prop_map(Value::Array)
                .boxed()
        }
        _ => {
            if depth > 4 {
                return Just(Value::Object(Map::new())).boxed();
            }
            let properties = match schema.get("properties") {
                Some(Value::Object(properties)) => properties.clone(),
                _ => Map::new(),
            };
            match schema.get("additionalProperties") {
                Some(values @ Value::Object(_)) if properties.is_empty() => {
                    proptest::collection::btree_map("[a-z]{1,6}", value_of(values, depth + 1), 0..3)
                        .prop_map(|map| Value::Object(map.into_iter().collect()))
                        .boxed()
                }
                _ => object_of(properties, depth).prop_map(Value::Object).boxed(),
            }
        }
    }
}

/// An object with each property present or absent.
fn object_of(properties: Map<String, Value>, depth: u32) -> BoxedStrategy<Map<String, Value>> {
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = properties
        .into_iter()
        .map(|(name, schema)| {
            proptest::option::of(value_of(&schema, depth + 1).prop_map(move |v| (name.clone(), v)))
                .boxed()
        })
        .collect();
    fields
        .prop_map(|fields| fields.into_iter().flatten().collect())
        .boxed()
}
