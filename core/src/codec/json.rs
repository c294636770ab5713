//! JSON: Kubernetes objects on the wire (`application/json`).
//!
//! Versioned structs do not carry `kind`/`apiVersion`; [`encode_json`] writes them first (`kind`,
//! then `apiVersion`, as Go's embedded `TypeMeta`) and then the object's own fields, streaming, with
//! no intermediate `serde_json::Value`. [`decode_json`] decodes a type and reads the root
//! `kind`/`apiVersion` in the same pass, applying [`FieldValidation`].

use std::borrow::Cow;
use std::cell::RefCell;
use std::io;

use serde::de::{DeserializeOwned, DeserializeSeed};
use serde::ser::{Impossible, Serialize, SerializeMap, SerializeStruct, Serializer};

use super::CodecError;
use super::validation::{
    FieldValidation, KeyPositions, NodeSeed, Tracked, Tracker, is_under, violations,
};

/// The `apiVersion` and `kind` an input declares (empty strings when absent, as Go's `TypeMeta`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ApiVersionKind {
    /// `group/version`, or `version` for the legacy core group.
    pub api_version: String,
    /// The object's kind, e.g. `Pizza`.
    pub kind: String,
}

impl ApiVersionKind {
    /// Builds one from its parts.
    pub fn new(api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        ApiVersionKind {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }

    /// Splits `apiVersion` into (group, version) as upstream's `schema.ParseGroupVersion`:
    /// `""` and `"/"` are empty, `v1` is the core group, more than one `/` is an error.
    pub fn group_version(&self) -> Result<(&str, &str), CodecError> {
        split_group_version(&self.api_version)
    }

    /// Fails with upstream's `Object 'Kind' is missing in '...'` / `Object 'apiVersion' is
    /// missing in '...'` when either is empty; `original` is the input, quoted in the message.
    pub fn require_complete(&self, original: &[u8]) -> Result<(), CodecError> {
        if self.kind.is_empty() {
            return Err(CodecError::MissingKind(
                String::from_utf8_lossy(original).into_owned(),
            ));
        }
        if self.group_version()?.1.is_empty() {
            return Err(CodecError::MissingVersion(
                String::from_utf8_lossy(original).into_owned(),
            ));
        }
        Ok(())
    }
}

pub(crate) fn split_group_version(gv: &str) -> Result<(&str, &str), CodecError> {
    if gv.is_empty() || gv == "/" {
        return Ok(("", ""));
    }
    match gv.split_once('/') {
        None => Ok(("", gv)),
        Some((g, v)) if !v.contains('/') => Ok((g, v)),
        Some(_) => Err(CodecError::InvalidGroupVersion(gv.to_string())),
    }
}

/// A decoded object with what the input said about its type, and the field-validation warnings
/// (`fieldValidation=Warn`) for the response's `Warning` headers.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded<T> {
    /// The object.
    pub object: T,
    /// The input's root `apiVersion` and `kind`.
    pub type_meta: ApiVersionKind,
    /// One message per unknown or duplicate field, e.g. `unknown field "spec.foo"`.
    pub warnings: Vec<String>,
}

/// Reads only `apiVersion` and `kind` from a JSON document (to pick the type to decode into).
/// Like upstream, repeated keys keep the last value and malformed JSON fails with
/// `couldn't get version/kind; json parse error: ...`.
pub fn peek_json_type_meta(data: &[u8]) -> Result<ApiVersionKind, CodecError> {
    let data = replace_invalid_unicode(data);
    let peek: Peek =
        serde_json::from_slice(&data).map_err(|e| CodecError::JsonSyntax(e.to_string()))?;
    let tm = ApiVersionKind {
        api_version: peek.api_version.unwrap_or_default(),
        kind: peek.kind.unwrap_or_default(),
    };
    tm.group_version()?;
    Ok(tm)
}

#[derive(Default)]
struct Peek {
    api_version: Option<String>,
    kind: Option<String>,
}

impl<'de> serde::Deserialize<'de> for Peek {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Peek;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Peek, A::Error> {
                let mut p = Peek::default();
                while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                    match k.as_ref() {
                        "apiVersion" => p.api_version = m.next_value()?,
                        "kind" => p.kind = m.next_value()?,
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(p)
            }
        }
        d.deserialize_map(V)
    }
}

/// Decodes a JSON object into `T` with the given field validation.
///
/// - `Strict`: unknown or duplicate fields fail with [`CodecError::StrictDecoding`]
///   (`strict decoding error: unknown field "spec.foo", duplicate field "metadata.name"`).
/// - `Warn`: succeeds; [`Decoded::warnings`] holds the same messages, one per field.
/// - `Ignore`: succeeds silently; for duplicates the last value wins (objects merge), as Go.
///
/// Root `kind` and `apiVersion` are read into [`Decoded::type_meta`] and are never unknown.
/// Matching is case-sensitive. Malformed JSON fails with `couldn't get version/kind; json parse
/// error: ...`; a well-formed value of the wrong shape with serde's message.
pub fn decode_json<T: DeserializeOwned>(
    data: &[u8],
    validation: FieldValidation,
) -> Result<Decoded<T>, CodecError> {
    let data: &[u8] = &replace_invalid_unicode(data);
    let tracker = RefCell::new(Tracker::default());
    let result = run::<T>(data, &tracker);
    let t = tracker.into_inner();
    match result {
        Ok(object) if !t.dup_suspect => {
            let type_meta = type_meta_of(&t)?;
            let entries = t
                .unknown
                .into_iter()
                .enumerate()
                .map(|(i, p)| (i as u32, false, p))
                .collect();
            finish(object, type_meta, violations(entries), validation)
        }
        Err(e) if !t.dup_suspect && !is_duplicate_error(&e) => Err(json_error(e)),
        _ => decode_with_duplicates(data, validation),
    }
}

/// Makes JSON text acceptable to serde_json the way Go's `encoding/json` reads it: invalid UTF-8 bytes and lone
/// UTF-16 surrogate escapes (`"\ud800"`) become U+FFFD instead of failing the decode. Borrows when there is
/// nothing to replace.
pub(crate) fn replace_invalid_unicode(data: &[u8]) -> Cow<'_, [u8]> {
    let data = match std::str::from_utf8(data) {
        Ok(_) => Cow::Borrowed(data),
        Err(_) => Cow::Owned(replace_invalid_utf8(data)),
    };
    match replace_lone_surrogates(&data) {
        Some(fixed) => Cow::Owned(fixed),
        None => data,
    }
}

/// Each byte that does not start a valid UTF-8 sequence becomes U+FFFD (Go's `utf8.DecodeRune` consumes one
/// byte per error).
fn replace_invalid_utf8(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 16);
    loop {
        match std::str::from_utf8(data) {
            Ok(_) => {
                out.extend_from_slice(data);
                return out;
            }
            Err(e) => {
                let valid = e.valid_up_to();
                out.extend_from_slice(&data[..valid]);
                out.extend_from_slice("\u{FFFD}".as_bytes());
                data = &data[valid + 1..];
            }
        }
    }
}

/// Rewrites `\uXXXX` escapes of surrogates that are not a high-low pair to `\ufffd`; `None` when there are none.
fn replace_lone_surrogates(data: &[u8]) -> Option<Vec<u8>> {
    fn escape_at(data: &[u8], i: usize) -> Option<u32> {
        if data.get(i) != Some(&b'\\') || data.get(i + 1) != Some(&b'u') {
            return None;
        }
        let hex = std::str::from_utf8(data.get(i + 2..i + 6)?).ok()?;
        u32::from_str_radix(hex, 16).ok()
    }
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < data.len() {
        if data[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = escape_at(data, i) else {
            // Any other escape: skip the escaped character too, so that `\\ud800` stays text.
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => match escape_at(data, i + 6) {
                Some(0xDC00..=0xDFFF) => {
                    i += 12;
                    continue;
                }
                _ => true,
            },
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let buf = out.get_or_insert_with(|| Vec::with_capacity(data.len()));
            buf.extend_from_slice(&data[copied..i]);
            buf.extend_from_slice(b"\\ufffd");
            copied = i + 6;
        }
        i += 6;
    }
    out.map(|mut buf| {
        buf.extend_from_slice(&data[copied..]);
        buf
    })
}

fn run<T: DeserializeOwned>(data: &[u8], st: &RefCell<Tracker>) -> Result<T, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(data);
    let value = T::deserialize(Tracked::root(&mut de, st))?;
    de.end()?;
    Ok(value)
}

/// The exact path for inputs with repeated keys: merge them, decode the merged document, and
/// report duplicates of known fields and unknown fields in document order.
fn decode_with_duplicates<T: DeserializeOwned>(
    data: &[u8],
    validation: FieldValidation,
) -> Result<Decoded<T>, CodecError> {
    let positions = RefCell::new(KeyPositions::default());
    let mut de = serde_json::Deserializer::from_slice(data);
    let node = NodeSeed {
        path: String::new(),
        positions: &positions,
    }
    .deserialize(&mut de)
    .map_err(json_error)?;
    de.end().map_err(json_error)?;
    let merged = serde_json::to_vec(&node).map_err(|e| CodecError::Encode(e.to_string()))?;
    drop(node);
    let positions = positions.into_inner();

    let tracker = RefCell::new(Tracker {
        visited: Some(Default::default()),
        ..Default::default()
    });
    let object = run::<T>(&merged, &tracker).map_err(json_error)?;
    let t = tracker.into_inner();
    let type_meta = type_meta_of(&t)?;
    let visited = t.visited.unwrap_or_default();

    let mut entries = Vec::new();
    for (path, pos) in positions.duplicates {
        // Go reports repeats only for keys that address a struct field or a map entry; a repeated
        // unknown key (or anything below one) is reported as unknown only.
        let known = visited.contains(&path) || path == "kind" || path == "apiVersion";
        if known && !t.unknown.iter().any(|u| is_under(&path, u)) {
            entries.push((pos, true, path));
        }
    }
    for path in t.unknown {
        let pos = positions.first.get(&path).copied().unwrap_or(u32::MAX);
        entries.push((pos, false, path));
    }
    finish(object, type_meta, violations(entries), validation)
}

fn finish<T>(
    object: T,
    type_meta: ApiVersionKind,
    violations: Vec<String>,
    validation: FieldValidation,
) -> Result<Decoded<T>, CodecError> {
    match validation {
        FieldValidation::Strict if !violations.is_empty() => {
            Err(CodecError::StrictDecoding(violations))
        }
        FieldValidation::Warn => Ok(Decoded {
            object,
            type_meta,
            warnings: violations,
        }),
        _ => Ok(Decoded {
            object,
            type_meta,
            warnings: Vec::new(),
        }),
    }
}

fn type_meta_of(t: &Tracker) -> Result<ApiVersionKind, CodecError> {
    let tm = ApiVersionKind {
        api_version: t.api_version.clone().unwrap_or_default(),
        kind: t.kind.clone().unwrap_or_default(),
    };
    tm.group_version()?;
    Ok(tm)
}

fn is_duplicate_error(e: &serde_json::Error) -> bool {
    e.classify() == serde_json::error::Category::Data
        && e.to_string().starts_with("duplicate field `")
}

/// Syntax errors read as upstream's (which fails while reading apiVersion/kind); shape errors keep
/// serde's text.
pub(crate) fn json_error(e: serde_json::Error) -> CodecError {
    match e.classify() {
        serde_json::error::Category::Data => CodecError::Decode(e.to_string()),
        _ => CodecError::JsonSyntax(e.to_string()),
    }
}

/// An object with its `kind` and `apiVersion`, serializing as a Kubernetes object: `kind`, then
/// `apiVersion` (each omitted when empty, as Go's `omitempty`), then the object's fields. The
/// object must serialize as a struct or a map; its own top-level `kind`/`apiVersion` fields, if
/// any, are dropped in favour of these.
#[derive(Clone, Copy, Debug)]
pub struct TypedObject<'a, T: ?Sized> {
    /// `group/version` to write.
    pub api_version: &'a str,
    /// Kind to write.
    pub kind: &'a str,
    /// The object itself.
    pub object: &'a T,
}

impl<'a, T: ?Sized> TypedObject<'a, T> {
    /// Pairs an object with its type.
    pub fn new(api_version: &'a str, kind: &'a str, object: &'a T) -> Self {
        TypedObject {
            api_version,
            kind,
            object,
        }
    }
}

impl<T: Serialize + ?Sized> Serialize for TypedObject<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if !self.kind.is_empty() {
            map.serialize_entry("kind", self.kind)?;
        }
        if !self.api_version.is_empty() {
            map.serialize_entry("apiVersion", self.api_version)?;
        }
        self.object.serialize(Flatten(&mut map))?;
        map.end()
    }
}

/// Serializes a struct's (or map's) entries into an already open map.
struct Flatten<'m, M>(&'m mut M);

fn not_an_object<E: serde::ser::Error>() -> E {
    E::custom("a Kubernetes object must serialize as a struct or a map")
}

impl<'m, M: SerializeMap> Serializer for Flatten<'m, M> {
    type Ok = ();
    type Error = M::Error;
    type SerializeSeq = Impossible<(), M::Error>;
    type SerializeTuple = Impossible<(), M::Error>;
    type SerializeTupleStruct = Impossible<(), M::Error>;
    type SerializeTupleVariant = Impossible<(), M::Error>;
    type SerializeMap = FlattenMap<'m, M>;
    type SerializeStruct = FlattenStruct<'m, M>;
    type SerializeStructVariant = Impossible<(), M::Error>;

    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, M::Error> {
        Ok(FlattenStruct(self.0))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, M::Error> {
        Ok(FlattenMap(self.0))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), M::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), M::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), M::Error> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), M::Error> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), M::Error> {
        Ok(())
    }

    fn serialize_bool(self, _: bool) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_i8(self, _: i8) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_i16(self, _: i16) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_i32(self, _: i32) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_i64(self, _: i64) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_u8(self, _: u8) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_u16(self, _: u16) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_u32(self, _: u32) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_u64(self, _: u64) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_f32(self, _: f32) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_f64(self, _: f64) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_char(self, _: char) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_str(self, _: &str) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, M::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, M::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, M::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, M::Error> {
        Err(not_an_object())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, M::Error> {
        Err(not_an_object())
    }
}

struct FlattenStruct<'m, M>(&'m mut M);

impl<M: SerializeMap> SerializeStruct for FlattenStruct<'_, M> {
    type Ok = ();
    type Error = M::Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), M::Error> {
        if key == "kind" || key == "apiVersion" {
            return Ok(());
        }
        self.0.serialize_entry(key, value)
    }

    fn end(self) -> Result<(), M::Error> {
        Ok(())
    }
}

struct FlattenMap<'m, M>(&'m mut M);

impl<M: SerializeMap> SerializeMap for FlattenMap<'_, M> {
    type Ok = ();
    type Error = M::Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), M::Error> {
        self.0.serialize_key(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), M::Error> {
        self.0.serialize_value(value)
    }
    fn end(self) -> Result<(), M::Error> {
        Ok(())
    }
}

/// Encodes an object as compact JSON with `kind` and `apiVersion` first. No trailing newline
/// (upstream's stream encoder adds one; the watch framer here adds its own).
pub fn encode_json<T: Serialize + ?Sized>(
    api_version: &str,
    kind: &str,
    object: &T,
) -> Result<Vec<u8>, CodecError> {
    let mut buf = Vec::with_capacity(256);
    write_json(&mut buf, api_version, kind, object, false)?;
    Ok(buf)
}

/// Like [`encode_json`], indented with two spaces as upstream's pretty serializer.
pub fn encode_json_pretty<T: Serialize + ?Sized>(
    api_version: &str,
    kind: &str,
    object: &T,
) -> Result<Vec<u8>, CodecError> {
    let mut buf = Vec::with_capacity(512);
    write_json(&mut buf, api_version, kind, object, true)?;
    Ok(buf)
}

/// Writes an object as JSON to `writer` (compact or pretty), `kind` and `apiVersion` first.
pub fn write_json<W: io::Write, T: Serialize + ?Sized>(
    writer: W,
    api_version: &str,
    kind: &str,
    object: &T,
    pretty: bool,
) -> Result<(), CodecError> {
    let typed = TypedObject::new(api_version, kind, object);
    let result = if pretty {
        serde_json::to_writer_pretty(writer, &typed)
    } else {
        serde_json::to_writer(writer, &typed)
    };
    result.map_err(|e| match e.classify() {
        serde_json::error::Category::Io => CodecError::Io(e.into()),
        _ => CodecError::Encode(e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }

    fn name_of(json: &[u8]) -> String {
        decode_json::<Named>(json, FieldValidation::Strict)
            .unwrap()
            .object
            .name
    }

    /// Probe finding D5: Go's decoder reads lone surrogates and invalid UTF-8 as U+FFFD; so does this one.
    #[test]
    fn invalid_unicode_becomes_the_replacement_character() {
        assert_eq!(name_of(br#"{"name":"a\ud800b"}"#), "a\u{FFFD}b");
        assert_eq!(name_of(br#"{"name":"\udc00"}"#), "\u{FFFD}");
        assert_eq!(name_of(br#"{"name":"\ud800\u0041"}"#), "\u{FFFD}A");
        assert_eq!(name_of(br#"{"name":"\ud83d\ude00"}"#), "\u{1F600}");
        assert_eq!(name_of(br#"{"name":"\\ud800"}"#), "\\ud800");
        assert_eq!(
            name_of(b"{\"name\":\"a\xffb\xf0\x9f\x98\"}"),
            "a\u{FFFD}b\u{FFFD}\u{FFFD}\u{FFFD}"
        );
        let peeked = peek_json_type_meta(br#"{"kind":"K\udfff","apiVersion":"v1"}"#).unwrap();
        assert_eq!(peeked.kind, "K\u{FFFD}");
        // Outside strings an invalid byte is still a syntax error.
        assert!(decode_json::<Named>(b"{\"name\":\"a\"\xff}", FieldValidation::Strict).is_err());
        // Nothing to replace: no copy.
        assert!(matches!(
            replace_invalid_unicode(br#"{"a":"\n\u00e9"}"#),
            Cow::Borrowed(_)
        ));
    }
}
