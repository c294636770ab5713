//! JSON ↔ CEL conversion, with and without a schema.

use apiserver_cel::{
    Activation, EvalError, Program, Value, json_to_value, json_to_value_with_schema, value_to_json,
    value_to_json_with_schema,
};
use serde_json::json;

fn eval_with(expr: &str, activation: &Activation) -> Result<Value, EvalError> {
    Program::compile(expr)
        .expect("compiles")
        .evaluate(activation)
}

#[test]
fn json_maps_structurally_without_a_schema() {
    let object = json!({
        "int": 3, "big": 18446744073709551615u64, "double": 1.5, "whole_double": 2.0,
        "s": "x", "b": true, "n": null, "list": [1, "a"], "map": {"k": {"deep": [true]}}
    });
    let act = Activation::new().bind_json("self", &object);
    for (expr, want) in [
        ("type(self.int) == int", true),
        ("type(self.big) == uint", true),
        ("type(self.double) == double", true),
        ("type(self.whole_double) == double", true),
        ("self.s == 'x' && self.b && self.n == null", true),
        ("self.list[1] == 'a' && size(self.list) == 2", true),
        ("self.map.k.deep[0]", true),
        ("has(self.map.k) && !has(self.map.z)", true),
    ] {
        assert_eq!(eval_with(expr, &act), Ok(Value::Bool(want)), "{expr}");
    }
    assert_eq!(
        eval_with("self.missing", &act).unwrap_err().to_string(),
        "no such key: missing"
    );
}

#[test]
fn round_trips_without_a_schema() {
    let object =
        json!({"a": [1, -2, 1.5, "s", true, null, {"b": {}}], "c": 18446744073709551615u64});
    assert_eq!(value_to_json(&json_to_value(&object)), Ok(object));
}

fn schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "created": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "timeout": {"type": "string", "format": "duration"},
            "data": {"type": "string", "format": "byte"},
            "ratio": {"type": "number"},
            "count": {"type": "integer"},
            "port": {"x-kubernetes-int-or-string": true},
            "namespace": {"type": "string"},
            "foo-bar": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "items": {"type": "array", "items": {"type": "string", "format": "duration"}},
            "opt": {"type": "string", "nullable": true}
        }
    })
}

#[test]
fn schema_formats_become_cel_types() {
    let object = json!({
        "created": "2024-01-02T03:04:05Z", "day": "2024-01-02", "timeout": "1m30s", "data": "aGVsbG8=",
        "ratio": 2, "count": 3, "port": "http", "namespace": "default", "foo-bar": "x",
        "labels": {"app": "web", "a.b/c": "v"}, "items": ["1s", "2h"], "opt": null
    });
    let act = Activation::new()
        .bind_json_with_schema("self", &object, &schema())
        .expect("fits its schema");
    for expr in [
        "self.created == timestamp('2024-01-02T03:04:05Z')",
        "self.created.getFullYear() == 2024",
        "self.day == timestamp('2024-01-02T00:00:00Z')",
        "self.timeout == duration('90s')",
        "self.data == b'hello'",
        "type(self.ratio) == double && self.ratio == 2.0",
        "type(self.count) == int",
        "self.port == 'http'",
        "self.__namespace__ == 'default'",
        "self.foo__dash__bar == 'x'",
        "self.labels['a.b/c'] == 'v'",
        "self.items[1] == duration('2h')",
        "self.opt == null",
    ] {
        assert_eq!(eval_with(expr, &act), Ok(Value::Bool(true)), "{expr}");
    }
    let int_port = Activation::new()
        .bind_json_with_schema("self", &json!({"port": 8080}), &schema())
        .expect("fits");
    assert_eq!(
        eval_with("self.port == 8080", &int_port),
        Ok(Value::Bool(true))
    );
}

#[test]
fn data_that_does_not_fit_the_schema_is_refused_with_upstreams_texts() {
    let cases = [
        (
            json!({"count": "x"}),
            "invalid data, expected int, got string",
        ),
        (
            json!({"created": "yesterday"}),
            "Invalid date-time formatted string yesterday",
        ),
        (
            json!({"port": 1.5}),
            "invalid data, expected XIntOrString value to be either a string or integer",
        ),
        (
            json!({"labels": []}),
            "invalid data, expected a map for the provided schema with type=object",
        ),
        (
            json!({"items": {}}),
            "invalid data, expected an array for the provided schema with type=array",
        ),
        (
            json!({"namespace": null}),
            "invalid data, got null for schema with nullable=false",
        ),
    ];
    for (data, want) in cases {
        let err = json_to_value_with_schema(&data, &schema()).expect_err(want);
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn round_trips_with_a_schema() {
    let object = json!({
        "created": "2024-01-02T03:04:05Z", "day": "2024-01-02", "timeout": "1m30s", "data": "aGVsbG8=",
        "ratio": 2.5, "count": 3, "port": 80, "namespace": "default", "foo-bar": "x",
        "labels": {"a.b/c": "v"}, "items": ["1s", "2h0m0s"]
    });
    let value = json_to_value_with_schema(&object, &schema()).expect("fits");
    assert_eq!(value_to_json_with_schema(&value, &schema()), Ok(object));
}

#[test]
fn results_convert_back_to_json() {
    let act = Activation::new().bind_json("self", &json!({"spec": {"replicas": 1}}));
    let result = eval_with(
        "{'replicas': self.spec.replicas + 1, 'ts': timestamp('2024-01-01T00:00:00Z'), 'd': duration('61s'), \
         'o': optional.of('x'), 'none': optional.none(), 'l': [1.5, b'hi']}",
        &act,
    )
    .expect("evaluates");
    assert_eq!(
        value_to_json(&result),
        Ok(json!({
            "replicas": 2, "ts": "2024-01-01T00:00:00Z", "d": "1m1s", "o": "x", "none": null, "l": [1.5, "aGk="]
        }))
    );
    let opaque = eval_with("quantity('1')", &act).expect("evaluates");
    assert_eq!(
        value_to_json(&opaque).unwrap_err().to_string(),
        "a value of type kubernetes.Quantity has no JSON representation"
    );
}
