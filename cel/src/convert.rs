//! JSON ↔ CEL values, as Kubernetes binds objects to CEL (`UnstructuredToVal`) and reads mutation results back.
//!
//! Without a schema, JSON maps to CEL structurally: objects → maps, arrays → lists, integers → `int` (or `uint`
//! above `i64::MAX`), other numbers → `double`, strings, bools and `null`. With an OpenAPI v3 schema the conversion
//! follows the schema where Kubernetes does: `format: date-time` and `date` → `timestamp`, `duration` → `duration`,
//! `byte` → `bytes`, `type: number` → `double` even for whole numbers, `x-kubernetes-int-or-string` → `int` or
//! `string`, and property names that are not CEL identifiers are escaped (`foo-bar` → `foo__dash__bar`,
//! `namespace` → `__namespace__`).

use crate::{EvalError, escaping};
use cel::Value;
use cel::objects::{Key, Map, OptionalValue};
use chrono::{DateTime, FixedOffset, NaiveDate, NaiveTime};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::Arc;

/// Converts JSON to a CEL value without a schema.
pub fn json_to_value(json: &Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => number(n),
        Json::String(s) => Value::String(Arc::new(s.clone())),
        Json::Array(items) => Value::List(Arc::new(items.iter().map(json_to_value).collect())),
        Json::Object(fields) => Value::Map(Map {
            map: Arc::new(
                fields
                    .iter()
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), json_to_value(v)))
                    .collect(),
            ),
        }),
    }
}

fn number(n: &serde_json::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::Int(i)
    } else if let Some(u) = n.as_u64() {
        Value::UInt(u)
    } else {
        Value::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Converts JSON to a CEL value as Kubernetes does for data described by `schema` (an OpenAPI v3 schema object).
///
/// Fails, with upstream's texts, where the data does not fit the schema (`invalid data, expected a map for the
/// provided schema with type=object`, `Invalid date-time formatted string ...`).
pub fn json_to_value_with_schema(json: &Json, schema: &Json) -> Result<Value, EvalError> {
    let invalid = |m: String| EvalError::InvalidData(m);
    if json.is_null() {
        return if schema.get("nullable").and_then(Json::as_bool) == Some(true) {
            Ok(Value::Null)
        } else {
            Err(invalid(
                "invalid data, got null for schema with nullable=false".into(),
            ))
        };
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        return match json {
            Json::String(s) => Ok(Value::String(Arc::new(s.clone()))),
            Json::Number(n) if n.is_i64() => Ok(number(n)),
            _ => Err(invalid(
                "invalid data, expected XIntOrString value to be either a string or integer".into(),
            )),
        };
    }
    match schema_type(schema) {
        Some("object") => {
            let Json::Object(fields) = json else {
                return Err(invalid(
                    "invalid data, expected a map for the provided schema with type=object".into(),
                ));
            };
            let properties = schema.get("properties").and_then(Json::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let mut map = HashMap::with_capacity(fields.len());
            for (name, value) in fields {
                let (key, value) = if let Some(properties) = properties {
                    let converted = match properties.get(name) {
                        Some(prop) => json_to_value_with_schema(value, prop)?,
                        None => json_to_value(value),
                    };
                    // Properties are fields: named by their escaped form, as upstream's object types do.
                    let key = escaping::escape(name).unwrap_or_else(|| name.clone());
                    (key, converted)
                } else if let Some(items) = additional {
                    (name.clone(), json_to_value_with_schema(value, items)?)
                } else {
                    (name.clone(), json_to_value(value))
                };
                map.insert(Key::String(Arc::new(key)), value);
            }
            Ok(Value::Map(Map { map: Arc::new(map) }))
        }
        Some("array") => {
            let Json::Array(items) = json else {
                return Err(invalid(
                    "invalid data, expected an array for the provided schema with type=array"
                        .into(),
                ));
            };
            let values = match schema.get("items") {
                Some(item_schema) if item_schema.is_object() => items
                    .iter()
                    .map(|i| json_to_value_with_schema(i, item_schema))
                    .collect::<Result<Vec<_>, _>>()?,
                _ => items.iter().map(json_to_value).collect(),
            };
            Ok(Value::List(Arc::new(values)))
        }
        Some("string") => {
            let Json::String(s) = json else {
                return Err(invalid(format!(
                    "invalid data, expected string, got {}",
                    json_kind(json)
                )));
            };
            string_with_format(s, schema.get("format").and_then(Json::as_str))
        }
        Some("number") => match json {
            Json::Number(n) => Ok(Value::Float(n.as_f64().unwrap_or(f64::NAN))),
            _ => Err(invalid(format!(
                "invalid data, expected float, got {}",
                json_kind(json)
            ))),
        },
        Some("integer") => match json {
            Json::Number(n) if n.is_i64() => Ok(number(n)),
            _ => Err(invalid(format!(
                "invalid data, expected int, got {}",
                json_kind(json)
            ))),
        },
        Some("boolean") => match json {
            Json::Bool(b) => Ok(Value::Bool(*b)),
            _ => Err(invalid(format!(
                "invalid data, expected bool, got {}",
                json_kind(json)
            ))),
        },
        _ => Ok(json_to_value(json)),
    }
}

fn string_with_format(s: &str, format: Option<&str>) -> Result<Value, EvalError> {
    let invalid = |m: String| Err(EvalError::InvalidData(m));
    match format {
        Some("duration") => match crate::library::parse_duration(s) {
            Some(d) => Ok(Value::Duration(d)),
            None => invalid(format!(
                "Invalid duration {s}: time: invalid duration \"{s}\""
            )),
        },
        Some("date") => match NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            Ok(d) => Ok(Value::Timestamp(
                d.and_time(NaiveTime::MIN).and_utc().fixed_offset(),
            )),
            Err(e) => invalid(format!("Invalid date formatted string {s}: {e}")),
        },
        Some("date-time") => match parse_date_time(s) {
            Some(t) => Ok(Value::Timestamp(t)),
            None => invalid(format!("Invalid date-time formatted string {s}")),
        },
        Some("byte") => {
            use base64::Engine as _;
            match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(b) => Ok(Value::Bytes(Arc::new(b))),
                Err(e) => invalid(format!("Invalid byte formatted string {s}: {e}")),
            }
        }
        _ => Ok(Value::String(Arc::new(s.to_owned()))),
    }
}

/// RFC 3339 date-times, also with a space for the `T` and without a zone (read as UTC), as strfmt accepts them.
pub(crate) fn parse_date_time(s: &str) -> Option<DateTime<FixedOffset>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t);
    }
    let s2 = s.replacen(' ', "T", 1);
    if let Ok(t) = DateTime::parse_from_rfc3339(&s2) {
        return Some(t);
    }
    chrono::NaiveDateTime::parse_from_str(&s2, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc().fixed_offset())
}

fn flag(schema: &Json, name: &str) -> bool {
    schema.get(name).and_then(Json::as_bool) == Some(true)
}

fn schema_type(schema: &Json) -> Option<&str> {
    schema.get("type").and_then(Json::as_str)
}

fn json_kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "bool",
        Json::Number(n) if n.is_f64() => "float64",
        Json::Number(_) => "int64",
        Json::String(_) => "string",
        Json::Array(_) => "[]interface {}",
        Json::Object(_) => "map[string]interface {}",
    }
}

/// Converts a CEL value back to JSON: what a mutation's result becomes. Timestamps are written in RFC 3339,
/// durations as Go writes them (`1h2m3s`), bytes in base64; a present optional is its value, an absent one `null`.
/// Values with no JSON form (types, functions, the libraries' opaque values) are an error.
pub fn value_to_json(value: &Value) -> Result<Json, EvalError> {
    Ok(match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::UInt(u) => Json::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .ok_or_else(|| EvalError::Conversion(format!("{f} has no JSON representation")))?,
        Value::String(s) => Json::String(s.to_string()),
        Value::Bytes(b) => {
            use base64::Engine as _;
            Json::String(base64::engine::general_purpose::STANDARD.encode(b.as_slice()))
        }
        Value::List(items) => {
            Json::Array(items.iter().map(value_to_json).collect::<Result<_, _>>()?)
        }
        Value::Map(map) => {
            let mut object = serde_json::Map::new();
            for (k, v) in map.map.iter() {
                let key = match k {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                object.insert(key, value_to_json(v)?);
            }
            Json::Object(object)
        }
        Value::Timestamp(t) => Json::String(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
        Value::Duration(d) => Json::String(crate::library::format_duration(d)),
        Value::Opaque(o) => match o.downcast_ref::<OptionalValue>() {
            Some(opt) => match opt.value() {
                Some(v) => value_to_json(v)?,
                None => Json::Null,
            },
            None => {
                return Err(EvalError::Conversion(format!(
                    "a value of type {} has no JSON representation",
                    o.runtime_type_name()
                )));
            }
        },
        Value::Function(name, _) => {
            return Err(EvalError::Conversion(format!(
                "function {name} has no JSON representation"
            )));
        }
        Value::Struct(s) => {
            return Err(EvalError::Conversion(format!(
                "a {} has no JSON representation",
                s.name()
            )));
        }
    })
}

/// Converts a CEL value back to JSON for data described by `schema`: as [`value_to_json`], with the escaped
/// property names of objects turned back into the schema's names.
pub fn value_to_json_with_schema(value: &Value, schema: &Json) -> Result<Json, EvalError> {
    match (value, schema_type(schema)) {
        (Value::Map(map), Some("object")) => {
            let properties = schema.get("properties").and_then(Json::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let mut object = serde_json::Map::new();
            for (k, v) in map.map.iter() {
                let Key::String(key) = k else {
                    return Err(EvalError::Conversion(format!(
                        "object key {k:?} is not a string"
                    )));
                };
                let (name, field_schema) = match properties {
                    Some(props) => {
                        let name = escaping::unescape(key).unwrap_or_else(|| key.to_string());
                        let field_schema = props.get(&name);
                        (name, field_schema)
                    }
                    None => (key.to_string(), additional),
                };
                let json = match field_schema {
                    Some(s) => value_to_json_with_schema(v, s)?,
                    None => value_to_json(v)?,
                };
                object.insert(name, json);
            }
            Ok(Json::Object(object))
        }
        (Value::List(items), Some("array")) => {
            match schema.get("items").filter(|i| i.is_object()) {
                Some(item_schema) => Ok(Json::Array(
                    items
                        .iter()
                        .map(|i| value_to_json_with_schema(i, item_schema))
                        .collect::<Result<_, _>>()?,
                )),
                None => value_to_json(value),
            }
        }
        (Value::Timestamp(t), Some("string"))
            if schema.get("format").and_then(Json::as_str) == Some("date") =>
        {
            Ok(Json::String(t.format("%Y-%m-%d").to_string()))
        }
        _ => value_to_json(value),
    }
}
