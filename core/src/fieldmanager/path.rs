//! Field paths as structured-merge-diff names them: a struct field or map key (`f:`), an item of a map list by its
//! keys (`k:`), an item of a set by its value (`v:`), an item of an atomic list by index (`i:`). The order, the
//! display form (conflict messages) and the `FieldsV1` key form are upstream's, byte for byte.

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

/// One step of a path.
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A struct field or map key (`f:name`).
    Field(String),
    /// The key fields of a map list's item, sorted by name.
    Key(Vec<(String, Value)>),
    /// An item of a set, by its value (`v:"a"`).
    Value(Value),
    /// An item of an atomic list, by position (`i:0`).
    Index(usize),
}

/// A field path from the object's root, one step per element.
pub type Path = Vec<PathElement>;

impl PathElement {
    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The `FieldsV1` form: `f:name`, `k:{"name":"salami"}`, `v:"a"`, `i:0`.
    pub fn to_fields_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let body: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| {
                        format!(
                            "{}:{}",
                            go_json(&Value::from(name.as_str())),
                            go_json(value)
                        )
                    })
                    .collect();
                format!("k:{{{}}}", body.join(","))
            }
            PathElement::Value(value) => format!("v:{}", go_json(value)),
            PathElement::Index(index) => format!("i:{index}"),
        }
    }

    /// Reads the `FieldsV1` form back.
    pub fn from_fields_key(key: &str) -> Result<PathElement, String> {
        let unknown = || format!("unknown prefix in path element {key:?}");
        let (prefix, rest) = key.split_once(':').ok_or_else(unknown)?;
        match prefix {
            "f" => Ok(PathElement::Field(rest.to_string())),
            "k" => match serde_json::from_str::<Value>(rest) {
                Ok(Value::Object(map)) => {
                    let mut fields: Vec<(String, Value)> = map.into_iter().collect();
                    fields.sort_by(|a, b| a.0.cmp(&b.0));
                    Ok(PathElement::Key(fields))
                }
                _ => Err(format!("invalid key in path element {key:?}")),
            },
            "v" => serde_json::from_str(rest)
                .map(PathElement::Value)
                .map_err(|e| format!("invalid value in path element {key:?}: {e}")),
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|_| format!("invalid index in path element {key:?}")),
            _ => Err(unknown()),
        }
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for (x, y) in a.iter().zip(b) {
                    let order = x.0.cmp(&y.0).then_with(|| compare_values(&x.1, &y.1));
                    if order != Ordering::Equal {
                        return order;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| format!("{name}={}", value_to_string(value)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(value) => write!(f, "[={}]", value_to_string(value)),
            PathElement::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// A path as upstream prints it in conflicts: `.spec.toppings[name="salami"].quantity`.
pub fn display(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// structured-merge-diff's `value.ToString`.
fn value_to_string(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::String(s) => go_json(&Value::from(s.as_str())),
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(value_to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{k}={}", value_to_string(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// structured-merge-diff's total order of values: numbers (compared numerically), then strings, booleans, lists,
/// maps, null.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => {
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            }
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let order = compare_values(p, q);
                if order != Ordering::Equal {
                    return order;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            for ((kx, vx), (ky, vy)) in x.iter().zip(y) {
                let order = kx.cmp(ky).then_with(|| compare_values(vx, vy));
                if order != Ordering::Equal {
                    return order;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => rank(a).cmp(&rank(b)),
    }
}

/// JSON as Go's encoder writes it: compact, with `<`, `>`, `&`, U+2028 and U+2029 escaped.
pub fn go_json(value: &Value) -> String {
    let text = value.to_string();
    if !text.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_keys_round_trip_and_order() {
        let key = PathElement::Key(vec![("name".into(), json!("salami"))]);
        assert_eq!(key.to_fields_key(), r#"k:{"name":"salami"}"#);
        assert_eq!(
            PathElement::from_fields_key(&key.to_fields_key()).unwrap(),
            key
        );
        assert_eq!(
            PathElement::Value(json!("a<b")).to_fields_key(),
            r#"v:"a\u003cb""#
        );
        assert_eq!(key.to_string(), r#"[name="salami"]"#);
        assert!(PathElement::Field("z".into()) < key);
        assert!(key < PathElement::Value(json!(1)));
        assert!(PathElement::Value(json!(1)) < PathElement::Value(json!("a")));
        assert!(PathElement::Value(json!(1)) < PathElement::Index(0));
        assert!(PathElement::from_fields_key("x:1").is_err());
    }
}
