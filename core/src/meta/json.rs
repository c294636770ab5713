//! JSON helpers shared by the wire types: Go's `null`-as-empty decoding, omit-zero predicates,
//! `kind`/`apiVersion` on whole responses, and raw JSON values kept as bytes.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess};
use serde::ser::{self, SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// Reads `null` as the empty value, as Go's decoder does for slices, maps, strings and numbers.
pub fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Whether a value is its type's zero value: Go's `omitempty` (what `#[apiserver::served]` uses for fields marked
/// `#[served(omitempty)]`).
pub fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

pub(crate) fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

pub(crate) fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

pub(crate) fn is_false(v: &bool) -> bool {
    !*v
}

/// Serializes a type's own fields (the serde derive with `remote = "Self"`), so that
/// [`typed_json!`] can put `kind` and `apiVersion` in front of them.
pub(crate) trait SerializeFields {
    fn serialize_fields<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
}

struct Fields<'a, T>(&'a T);

impl<T: SerializeFields> Serialize for Fields<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize_fields(s)
    }
}

/// `{"kind": .., "apiVersion": .., <fields>}`, the order Go writes an embedded `TypeMeta` in.
#[derive(Serialize)]
pub(crate) struct Typed<'a, T: SerializeFields> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    #[serde(flatten)]
    fields: Fields<'a, T>,
}

impl<'a, T: SerializeFields> Typed<'a, T> {
    pub(crate) fn new(kind: &'static str, api_version: &'static str, object: &'a T) -> Self {
        Typed {
            kind,
            api_version,
            fields: Fields(object),
        }
    }
}

/// Gives a type whose serde derive has `#[serde(remote = "Self")]` its `Serialize` (with the given
/// `kind` and `apiVersion` first) and `Deserialize` (which ignores `kind` and `apiVersion`).
macro_rules! typed_json {
    ($ty:ident, $kind:expr, $api_version:expr) => {
        impl $crate::meta::json::SerializeFields for $ty {
            fn serialize_fields<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $ty::serialize(self, s)
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(
                    &$crate::meta::json::Typed::new($kind, $api_version, self),
                    s,
                )
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $ty::deserialize(d)
            }
        }
    };
}
pub(crate) use typed_json;

/// Writes raw JSON bytes as a JSON value: verbatim into serde_json, re-encoded into any other
/// format (YAML). Empty bytes are `null`.
pub(crate) fn serialize_raw_json<S: Serializer>(raw: &[u8], s: S) -> Result<S::Ok, S::Error> {
    if raw.is_empty() {
        return s.serialize_unit();
    }
    let name = std::any::type_name::<S>();
    if name.starts_with("&mut serde_json::ser::Serializer<") {
        let text = std::str::from_utf8(raw).map_err(ser::Error::custom)?;
        let value: &serde_json::value::RawValue =
            serde_json::from_str(text).map_err(ser::Error::custom)?;
        return value.serialize(s);
    }
    let mut de = serde_json::Deserializer::from_slice(raw);
    let out = Transcoder::new(&mut de).serialize(s)?;
    de.end().map_err(ser::Error::custom)?;
    Ok(out)
}

/// Reads any JSON value (from any self-describing format) into compact JSON bytes, keeping the
/// order of object keys. `null` gives empty bytes.
pub(crate) fn deserialize_raw_json<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::new(&mut out);
    d.deserialize_any(Visitor(&mut ser))?;
    if out == b"null" {
        out.clear();
    }
    Ok(out)
}

/// Feeds one value of a deserializer into a serializer, without building it in memory.
struct Transcoder<D>(RefCell<Option<D>>);

impl<D> Transcoder<D> {
    fn new(d: D) -> Self {
        Transcoder(RefCell::new(Some(d)))
    }
}

impl<'de, D: Deserializer<'de>> Serialize for Transcoder<D> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let d = self
            .0
            .borrow_mut()
            .take()
            .ok_or_else(|| ser::Error::custom("value already transcoded"))?;
        d.deserialize_any(Visitor(s)).map_err(ser::Error::custom)
    }
}

struct Visitor<S>(S);

impl<'de, S: Serializer> de::Visitor<'de> for Visitor<S> {
    type Value = S::Ok;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<S::Ok, E> {
        self.0.serialize_bool(v).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<S::Ok, E> {
        self.0.serialize_i64(v).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<S::Ok, E> {
        self.0.serialize_u64(v).map_err(E::custom)
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<S::Ok, E> {
        self.0.serialize_i128(v).map_err(E::custom)
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<S::Ok, E> {
        self.0.serialize_u128(v).map_err(E::custom)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<S::Ok, E> {
        self.0.serialize_f64(v).map_err(E::custom)
    }
    fn visit_char<E: de::Error>(self, v: char) -> Result<S::Ok, E> {
        self.0.serialize_char(v).map_err(E::custom)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<S::Ok, E> {
        self.0.serialize_str(v).map_err(E::custom)
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<S::Ok, E> {
        self.0.serialize_bytes(v).map_err(E::custom)
    }
    fn visit_none<E: de::Error>(self) -> Result<S::Ok, E> {
        self.0.serialize_none().map_err(E::custom)
    }
    fn visit_unit<E: de::Error>(self) -> Result<S::Ok, E> {
        self.0.serialize_unit().map_err(E::custom)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<S::Ok, D::Error> {
        self.0
            .serialize_some(&Transcoder::new(d))
            .map_err(de::Error::custom)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<S::Ok, D::Error> {
        Transcoder::new(d)
            .serialize(self.0)
            .map_err(de::Error::custom)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<S::Ok, A::Error> {
        let mut out = self
            .0
            .serialize_seq(seq.size_hint())
            .map_err(de::Error::custom)?;
        while seq.next_element_seed(Element(&mut out))?.is_some() {}
        out.end().map_err(de::Error::custom)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<S::Ok, A::Error> {
        let mut out = self
            .0
            .serialize_map(map.size_hint())
            .map_err(de::Error::custom)?;
        while map.next_key_seed(Key(&mut out))?.is_some() {
            map.next_value_seed(Value(&mut out))?;
        }
        out.end().map_err(de::Error::custom)
    }
}

struct Element<'a, S>(&'a mut S);

impl<'de, S: SerializeSeq> DeserializeSeed<'de> for Element<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.0
            .serialize_element(&Transcoder::new(d))
            .map_err(de::Error::custom)
    }
}

struct Key<'a, S>(&'a mut S);

impl<'de, S: SerializeMap> DeserializeSeed<'de> for Key<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.0
            .serialize_key(&Transcoder::new(d))
            .map_err(de::Error::custom)
    }
}

struct Value<'a, S>(&'a mut S);

impl<'de, S: SerializeMap> DeserializeSeed<'de> for Value<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.0
            .serialize_value(&Transcoder::new(d))
            .map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_json_keeps_key_order() {
        let mut de = serde_json::Deserializer::from_str(r#"{"b":1,"a":[true,null,"x",1.5]}"#);
        let raw = deserialize_raw_json(&mut de).unwrap();
        assert_eq!(raw, br#"{"b":1,"a":[true,null,"x",1.5]}"#);
        let mut de = serde_json::Deserializer::from_str("null");
        assert!(deserialize_raw_json(&mut de).unwrap().is_empty());
    }
}
