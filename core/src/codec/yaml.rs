//! YAML (`application/yaml`), via `serde-saphyr`.
//!
//! Upstream converts YAML to JSON (`sigs.k8s.io/yaml.YAMLToJSON`) and decodes the JSON, so field
//! validation is the JSON one; in strict mode it converts once more to find repeated keys, which
//! it reports with line numbers (`line 5: key "name" already set in map`). We do the same in one
//! YAML parse: [`yaml_to_json`] yields JSON (keys sorted, as Go's map-based conversion does, so
//! unknown fields come out in upstream's order) plus the repeated-key messages.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_saphyr::Spanned;

use super::CodecError;
use super::json::{ApiVersionKind, Decoded, TypedObject, decode_json, peek_json_type_meta};
use super::validation::FieldValidation;
use apiserver_gotext::quote as go_quote;

/// Deepest nesting accepted, the same as the JSON decoder's.
const MAX_DEPTH: usize = 128;

/// Converts one YAML document to JSON bytes. Repeated keys keep the last value; each repeat is
/// returned as upstream's message (`line 5: key "name" already set in map`), in line order.
/// More than one document is an error.
pub fn yaml_to_json(data: &[u8]) -> Result<(Vec<u8>, Vec<String>), CodecError> {
    let mut options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::PassThrough,
        with_snippet: false,
    };
    options.emit_comments = false;
    if let Some(budget) = options.budget.as_mut() {
        budget.max_depth = MAX_DEPTH;
    }
    let node: YNode = serde_saphyr::from_slice_with_options(data, options).map_err(|e| {
        let msg = e.to_string();
        if msg.starts_with("multiple YAML documents") {
            CodecError::YamlSyntax("expected a single document in the stream".to_string())
        } else {
            CodecError::YamlSyntax(msg)
        }
    })?;
    let mut dups = Vec::new();
    node.collect_duplicates(&mut dups);
    dups.sort_by_key(|(line, _)| *line);
    let json = serde_json::to_vec(&node)
        .map_err(|e| CodecError::Decode(format!("error converting YAML to JSON: json: {e}")))?;
    Ok((json, dups.into_iter().map(|(_, m)| m).collect()))
}

/// Reads `apiVersion` and `kind` from a YAML document.
pub fn peek_yaml_type_meta(data: &[u8]) -> Result<ApiVersionKind, CodecError> {
    let (json, _) = yaml_to_json(data)?;
    peek_json_type_meta(&json)
}

/// Decodes a YAML object into `T` with the given field validation, as [`decode_json`] does on
/// the converted JSON. Repeated YAML keys are one more violation, listed first as upstream:
/// `strict decoding error: yaml: unmarshal errors:\n  line 5: key "name" already set in map,
/// unknown field "spec.foo"`; under `Warn` each repeated key is its own warning.
pub fn decode_yaml<T: DeserializeOwned>(
    data: &[u8],
    validation: FieldValidation,
) -> Result<Decoded<T>, CodecError> {
    let (json, dups) = yaml_to_json(data)?;
    let result = decode_json::<T>(&json, validation);
    if dups.is_empty() {
        return result;
    }
    match (validation, result) {
        (FieldValidation::Strict, Err(CodecError::StrictDecoding(mut v))) => {
            v.insert(0, yaml_duplicates_error(&dups));
            Err(CodecError::StrictDecoding(v))
        }
        (FieldValidation::Strict, Ok(_)) => {
            Err(CodecError::StrictDecoding(vec![yaml_duplicates_error(
                &dups,
            )]))
        }
        (FieldValidation::Warn, Ok(mut d)) => {
            let mut warnings = dups;
            warnings.append(&mut d.warnings);
            d.warnings = warnings;
            Ok(d)
        }
        (_, other) => other,
    }
}

fn yaml_duplicates_error(dups: &[String]) -> String {
    format!("yaml: unmarshal errors:\n  {}", dups.join("\n  "))
}

/// Encodes an object as YAML with `kind` and `apiVersion` first, then its fields in the order it
/// serializes them (upstream sorts keys alphabetically; order does not change meaning).
pub fn encode_yaml<T: Serialize + ?Sized>(
    api_version: &str,
    kind: &str,
    object: &T,
) -> Result<Vec<u8>, CodecError> {
    serde_saphyr::to_string(&TypedObject::new(api_version, kind, object))
        .map(String::into_bytes)
        .map_err(|e| CodecError::Encode(e.to_string()))
}

/// A YAML document as JSON-compatible data, with the repeated keys seen in each mapping.
enum YNode {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<YNode>),
    Map(BTreeMap<String, YNode>, Vec<(u64, String)>),
}

impl YNode {
    fn collect_duplicates(&self, out: &mut Vec<(u64, String)>) {
        match self {
            YNode::Seq(items) => items.iter().for_each(|i| i.collect_duplicates(out)),
            YNode::Map(entries, dups) => {
                out.extend(dups.iter().cloned());
                entries.values().for_each(|v| v.collect_duplicates(out));
            }
            _ => {}
        }
    }
}

impl Serialize for YNode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            YNode::Null => s.serialize_unit(),
            YNode::Bool(b) => s.serialize_bool(*b),
            YNode::Int(i) => s.serialize_i64(*i),
            YNode::UInt(u) => s.serialize_u64(*u),
            YNode::Float(f) => {
                if !f.is_finite() {
                    return Err(serde::ser::Error::custom(format!(
                        "unsupported value: {}",
                        if f.is_nan() {
                            "NaN"
                        } else if *f > 0.0 {
                            "+Inf"
                        } else {
                            "-Inf"
                        }
                    )));
                }
                // Go writes integral floats without a fraction (`1.0` → `1`), so integer
                // fields accept them.
                if f.fract() == 0.0 && f.abs() < 9.0e15 {
                    s.serialize_i64(*f as i64)
                } else {
                    s.serialize_f64(*f)
                }
            }
            YNode::Str(v) => s.serialize_str(v),
            YNode::Seq(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for i in items {
                    seq.serialize_element(i)?;
                }
                seq.end()
            }
            YNode::Map(entries, _) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for YNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(YNodeVisitor)
    }
}

struct YNodeVisitor;

impl<'de> Visitor<'de> for YNodeVisitor {
    type Value = YNode;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<YNode, E> {
        Ok(YNode::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<YNode, E> {
        Ok(YNode::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<YNode, E> {
        Ok(YNode::UInt(v))
    }
    fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<YNode, E> {
        i64::try_from(v)
            .map(YNode::Int)
            .map_err(|_| E::custom(format!("integer {v} out of range")))
    }
    fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<YNode, E> {
        u64::try_from(v)
            .map(YNode::UInt)
            .map_err(|_| E::custom(format!("integer {v} out of range")))
    }
    fn visit_f64<E>(self, v: f64) -> Result<YNode, E> {
        Ok(YNode::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<YNode, E> {
        Ok(YNode::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<YNode, E> {
        Ok(YNode::Str(v))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<YNode, E> {
        Ok(YNode::Str(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_unit<E>(self) -> Result<YNode, E> {
        Ok(YNode::Null)
    }
    fn visit_none<E>(self) -> Result<YNode, E> {
        Ok(YNode::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<YNode, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<YNode, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(YNode::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<YNode, A::Error> {
        let mut entries = BTreeMap::new();
        let mut dups = Vec::new();
        while let Some(key) = map.next_key::<Spanned<YKey>>()? {
            let value: YNode = map.next_value()?;
            let YKey { text, go_repr } = key.value;
            if entries.insert(text, value).is_some() {
                let line = key.referenced.line();
                dups.push((
                    line,
                    format!("line {line}: key {go_repr} already set in map"),
                ));
            }
        }
        Ok(YNode::Map(entries, dups))
    }
}

/// A mapping key: its JSON text and how Go's `%#v` prints it in messages.
struct YKey {
    text: String,
    go_repr: String,
}

impl<'de> serde::Deserialize<'de> for YKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(YKeyVisitor)
    }
}

struct YKeyVisitor;

impl YKeyVisitor {
    fn bare(text: String) -> YKey {
        YKey {
            go_repr: text.clone(),
            text,
        }
    }
}

impl<'de> Visitor<'de> for YKeyVisitor {
    type Value = YKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scalar mapping key")
    }
    fn visit_str<E>(self, v: &str) -> Result<YKey, E> {
        Ok(YKey {
            text: v.to_string(),
            go_repr: go_quote(v),
        })
    }
    fn visit_bool<E>(self, v: bool) -> Result<YKey, E> {
        Ok(Self::bare(v.to_string()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<YKey, E> {
        Ok(Self::bare(v.to_string()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<YKey, E> {
        Ok(Self::bare(v.to_string()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<YKey, E> {
        Ok(Self::bare(v.to_string()))
    }
    fn visit_u128<E>(self, v: u128) -> Result<YKey, E> {
        Ok(Self::bare(v.to_string()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<YKey, E> {
        Ok(Self::bare(v.to_string()))
    }
    fn visit_unit<E>(self) -> Result<YKey, E> {
        Ok(Self::bare("null".to_string()))
    }
    fn visit_none<E>(self) -> Result<YKey, E> {
        Ok(Self::bare("null".to_string()))
    }
}
