//! Field validation (`?fieldValidation=Strict|Warn|Ignore`): unknown and duplicate fields.
//!
//! Upstream decodes with `sigs.k8s.io/json`, which records, in document order, every
//! `unknown field "a.b[0].c"` (a key no struct field matches, case-sensitively) and every
//! `duplicate field "a.b"` (a struct field or map key seen twice in one object literal).
//!
//! We get the same in one parse in the common case: [`Tracked`] wraps any serde `Deserializer`
//! and follows the path as the target type walks the input. A derived struct asks for
//! `deserialize_ignored_any` exactly when a key matches no field, so that is where unknown fields
//! are recorded (the path is only formatted then). Duplicates are rare, so the fast path only
//! *notices* them (serde's derive fails with `duplicate field`, and map keys are hashed); then the
//! input is parsed once more into a small tree that merges duplicates the way Go does (the last
//! value wins, objects merge) and records each duplicate's path and position, the merged tree is
//! decoded through [`Tracked`] again, and the two lists are merged in document order.

use apiserver_gotext::quote as go_quote;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// How a request wants unknown and duplicate fields handled (`fieldValidation` query parameter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FieldValidation {
    /// Unknown or duplicate fields fail the request with 400 and a `strict decoding error`.
    Strict,
    /// Decoding succeeds; each unknown or duplicate field becomes a warning. Upstream's default.
    #[default]
    Warn,
    /// Unknown fields are dropped and duplicates keep the last value, silently.
    Ignore,
}

impl FieldValidation {
    /// Parses the query value; the empty string means the default, `Warn`, as upstream.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "" | "Warn" => Some(Self::Warn),
            "Strict" => Some(Self::Strict),
            "Ignore" => Some(Self::Ignore),
            _ => None,
        }
    }

    /// The query value, as upstream spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Strict => "Strict",
            Self::Warn => "Warn",
            Self::Ignore => "Ignore",
        }
    }
}

/// Upstream stops collecting after this many violations.
const MAX_STRICT_ERRORS: usize = 100;

/// What a tracked decode observed.
#[derive(Default)]
pub(crate) struct Tracker {
    /// Formatted paths of unknown fields, in document order, without repeats.
    pub unknown: Vec<String>,
    /// Something looked like a duplicate key: run the exact (slow) path.
    pub dup_suspect: bool,
    /// Slow path only: paths of every key that addressed a struct field or map entry.
    pub visited: Option<HashSet<String>>,
    /// Root `apiVersion`, if present.
    pub api_version: Option<String>,
    /// Root `kind`, if present.
    pub kind: Option<String>,
}

impl Tracker {
    fn add_unknown(&mut self, path: &Path<'_>) {
        if self.unknown.len() >= MAX_STRICT_ERRORS {
            return;
        }
        let p = path.to_string();
        if !self.unknown.contains(&p) {
            self.unknown.push(p);
        }
    }

    fn capture(&mut self, which: Capture, value: &str) {
        let slot = match which {
            Capture::Kind => &mut self.kind,
            Capture::ApiVersion => &mut self.api_version,
            Capture::None => return,
        };
        if slot.is_some() {
            self.dup_suspect = true;
        }
        *slot = Some(value.to_string());
    }
}

/// A position in the document, as a linked list on the stack (no allocation until formatted).
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn is_root(&self) -> bool {
        matches!(self, Path::Root)
    }
}

impl fmt::Display for Path<'_> {
    /// Upstream's format: `a.b[0].c`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(parent, key) => {
                if parent.is_root() {
                    f.write_str(key)
                } else {
                    write!(f, "{parent}.{key}")
                }
            }
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// Which root string value to remember while decoding.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Capture {
    None,
    Kind,
    ApiVersion,
}

/// How a map-shaped value was asked for: a struct (fields), a map (keys), or anything.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Struct,
    Map,
    Any,
}

/// A `Deserializer` that reports unknown fields and suspected duplicates to a [`Tracker`].
pub(crate) struct Tracked<'a, D> {
    de: D,
    path: &'a Path<'a>,
    st: &'a RefCell<Tracker>,
    capture: Capture,
}

impl<'a, D> Tracked<'a, D> {
    /// Wraps the deserializer of a whole document.
    pub(crate) fn root(de: D, st: &'a RefCell<Tracker>) -> Self {
        Tracked {
            de,
            path: &Path::Root,
            st,
            capture: Capture::None,
        }
    }

    fn wrap<V>(&self, v: V, mode: Mode) -> Wrap<'a, V> {
        Wrap {
            v,
            path: self.path,
            st: self.st,
            mode,
            capture: self.capture,
        }
    }
}

macro_rules! forward_wrapped {
    ($($method:ident),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            let w = self.wrap(visitor, Mode::Any);
            self.de.$method(w)
        }
    )*};
}

impl<'a, 'de, D: Deserializer<'de>> Deserializer<'de> for Tracked<'a, D> {
    type Error = D::Error;

    forward_wrapped!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_identifier
    );

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let w = self.wrap(visitor, Mode::Map);
        self.de.deserialize_map(w)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let w = self.wrap(visitor, Mode::Struct);
        self.de.deserialize_struct(name, fields, w)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let w = self.wrap(visitor, Mode::Any);
        self.de.deserialize_unit_struct(name, w)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let w = self.wrap(visitor, Mode::Any);
        self.de.deserialize_newtype_struct(name, w)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let w = self.wrap(visitor, Mode::Any);
        self.de.deserialize_tuple(len, w)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let w = self.wrap(visitor, Mode::Any);
        self.de.deserialize_tuple_struct(name, len, w)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let w = self.wrap(visitor, Mode::Any);
        self.de.deserialize_enum(name, variants, w)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        if self.capture != Capture::None {
            // Root kind/apiVersion that the type has no field for: keep the value, it is the
            // object's TypeMeta, not an unknown field.
            let value = Option::<String>::deserialize(self.de)?;
            if let Some(value) = value {
                self.st.borrow_mut().capture(self.capture, &value);
            }
            return visitor.visit_unit();
        }
        self.st.borrow_mut().add_unknown(self.path);
        self.de.deserialize_ignored_any(visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

use serde::Deserialize;

/// A visitor wrapper that keeps tracking inside sequences, maps, options and enums.
struct Wrap<'a, V> {
    v: V,
    path: &'a Path<'a>,
    st: &'a RefCell<Tracker>,
    mode: Mode,
    capture: Capture,
}

macro_rules! forward_visit {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.v.$method(v)
        }
    )*};
}

impl<'a, 'de, V: Visitor<'de>> Visitor<'de> for Wrap<'a, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.v.expecting(f)
    }

    forward_visit!(
        visit_bool: bool,
        visit_i8: i8,
        visit_i16: i16,
        visit_i32: i32,
        visit_i64: i64,
        visit_i128: i128,
        visit_u8: u8,
        visit_u16: u16,
        visit_u32: u32,
        visit_u64: u64,
        visit_u128: u128,
        visit_f32: f32,
        visit_f64: f64,
        visit_char: char,
        visit_bytes: &[u8],
        visit_borrowed_bytes: &'de [u8],
        visit_byte_buf: Vec<u8>
    );

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if self.capture != Capture::None {
            self.st.borrow_mut().capture(self.capture, v);
        }
        self.v.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        if self.capture != Capture::None {
            self.st.borrow_mut().capture(self.capture, v);
        }
        self.v.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        if self.capture != Capture::None {
            self.st.borrow_mut().capture(self.capture, &v);
        }
        self.v.visit_string(v)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.v.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.v.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.v.visit_some(Tracked {
            de: d,
            path: self.path,
            st: self.st,
            capture: self.capture,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.v.visit_newtype_struct(Tracked {
            de: d,
            path: self.path,
            st: self.st,
            capture: self.capture,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.v.visit_seq(TrackedSeq {
            seq,
            path: self.path,
            st: self.st,
            index: 0,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.v.visit_map(TrackedMap {
            map,
            path: self.path,
            st: self.st,
            mode: self.mode,
            key: None,
            seen: SeenKeys::default(),
            record: self.mode != Mode::Any && self.st.borrow().visited.is_some(),
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.v.visit_enum(TrackedEnum {
            data,
            path: self.path,
            st: self.st,
        })
    }
}

struct TrackedSeed<'a, S> {
    seed: S,
    path: &'a Path<'a>,
    st: &'a RefCell<Tracker>,
    capture: Capture,
}

impl<'a, 'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for TrackedSeed<'a, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Tracked {
            de: d,
            path: self.path,
            st: self.st,
            capture: self.capture,
        })
    }
}

struct TrackedSeq<'a, A> {
    seq: A,
    path: &'a Path<'a>,
    st: &'a RefCell<Tracker>,
    index: usize,
}

impl<'a, 'de, A: SeqAccess<'de>> SeqAccess<'de> for TrackedSeq<'a, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        let path = Path::Index(self.path, self.index);
        self.index += 1;
        self.seq.next_element_seed(TrackedSeed {
            seed,
            path: &path,
            st: self.st,
            capture: Capture::None,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

struct TrackedMap<'a, 'de, A> {
    map: A,
    path: &'a Path<'a>,
    st: &'a RefCell<Tracker>,
    mode: Mode,
    key: Option<Cow<'de, str>>,
    /// Hashes of the keys seen so far (true maps only; derived structs catch their own).
    seen: SeenKeys,
    /// Slow path: record the paths of keys (see [`Tracker::visited`]).
    record: bool,
}

impl<'a, 'de, A: MapAccess<'de>> MapAccess<'de> for TrackedMap<'a, 'de, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.key = None;
        let out = self.map.next_key_seed(CaptureKey {
            seed,
            out: &mut self.key,
        })?;
        if out.is_some() && self.mode != Mode::Any {
            let key = self.key.as_deref().unwrap_or("");
            if self.mode == Mode::Map && !self.seen.insert(hash_key(key)) {
                self.st.borrow_mut().dup_suspect = true;
            }
            if self.record {
                let mut st = self.st.borrow_mut();
                if let Some(visited) = st.visited.as_mut() {
                    visited.insert(Path::Key(self.path, key).to_string());
                }
            }
        }
        Ok(out)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        let key = self.key.as_deref().unwrap_or("");
        let capture = if self.path.is_root() {
            match key {
                "kind" => Capture::Kind,
                "apiVersion" => Capture::ApiVersion,
                _ => Capture::None,
            }
        } else {
            Capture::None
        };
        let path = Path::Key(self.path, key);
        self.map.next_value_seed(TrackedSeed {
            seed,
            path: &path,
            st: self.st,
            capture,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// FNV-1a: keys are short, and a collision only costs a slow-path run, never a wrong answer.
fn hash_key(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Key hashes of one map: inline for the usual handful of keys, a hash set beyond.
#[derive(Default)]
struct SeenKeys {
    small: [u64; 16],
    len: usize,
    large: Option<HashSet<u64>>,
}

impl SeenKeys {
    /// False when `hash` was already there.
    fn insert(&mut self, hash: u64) -> bool {
        if let Some(large) = self.large.as_mut() {
            return large.insert(hash);
        }
        if self.small[..self.len].contains(&hash) {
            return false;
        }
        if self.len < self.small.len() {
            self.small[self.len] = hash;
            self.len += 1;
        } else {
            let mut large: HashSet<u64> = self.small.iter().copied().collect();
            large.insert(hash);
            self.large = Some(large);
        }
        true
    }
}

struct TrackedEnum<'a, A> {
    data: A,
    path: &'a Path<'a>,
    st: &'a RefCell<Tracker>,
}

impl<'a, 'de, A: EnumAccess<'de>> EnumAccess<'de> for TrackedEnum<'a, A> {
    type Error = A::Error;
    type Variant = TrackedEnum<'a, A::Variant>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self::Variant), A::Error> {
        let (value, variant) = self.data.variant_seed(seed)?;
        Ok((
            value,
            TrackedEnum {
                data: variant,
                path: self.path,
                st: self.st,
            },
        ))
    }
}

impl<'a, 'de, A: VariantAccess<'de>> VariantAccess<'de> for TrackedEnum<'a, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.data.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.data.newtype_variant_seed(TrackedSeed {
            seed,
            path: self.path,
            st: self.st,
            capture: Capture::None,
        })
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, A::Error> {
        self.data.tuple_variant(
            len,
            Wrap {
                v,
                path: self.path,
                st: self.st,
                mode: Mode::Any,
                capture: Capture::None,
            },
        )
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, A::Error> {
        self.data.struct_variant(
            fields,
            Wrap {
                v,
                path: self.path,
                st: self.st,
                mode: Mode::Struct,
                capture: Capture::None,
            },
        )
    }
}

/// Passes a map key through to the real key seed while remembering its text.
struct CaptureKey<'o, 'de, S> {
    seed: S,
    out: &'o mut Option<Cow<'de, str>>,
}

impl<'o, 'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for CaptureKey<'o, 'de, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(KeyDe {
            de: d,
            out: self.out,
        })
    }
}

struct KeyDe<'o, 'de, D> {
    de: D,
    out: &'o mut Option<Cow<'de, str>>,
}

macro_rules! forward_key {
    ($($method:ident),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.de.$method(KeyVisitor { v: visitor, out: self.out })
        }
    )*};
}

impl<'o, 'de, D: Deserializer<'de>> Deserializer<'de> for KeyDe<'o, 'de, D> {
    type Error = D::Error;

    forward_key!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_unit_struct(
            name,
            KeyVisitor {
                v: visitor,
                out: self.out,
            },
        )
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_newtype_struct(
            name,
            KeyVisitor {
                v: visitor,
                out: self.out,
            },
        )
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_tuple(
            len,
            KeyVisitor {
                v: visitor,
                out: self.out,
            },
        )
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_tuple_struct(
            name,
            len,
            KeyVisitor {
                v: visitor,
                out: self.out,
            },
        )
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_struct(
            name,
            fields,
            KeyVisitor {
                v: visitor,
                out: self.out,
            },
        )
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_enum(
            name,
            variants,
            KeyVisitor {
                v: visitor,
                out: self.out,
            },
        )
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

struct KeyVisitor<'o, 'de, V> {
    v: V,
    out: &'o mut Option<Cow<'de, str>>,
}

macro_rules! capture_display {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            *self.out = Some(Cow::Owned(v.to_string()));
            self.v.$method(v)
        }
    )*};
}

impl<'o, 'de, V: Visitor<'de>> Visitor<'de> for KeyVisitor<'o, 'de, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.v.expecting(f)
    }

    capture_display!(
        visit_bool: bool,
        visit_i8: i8,
        visit_i16: i16,
        visit_i32: i32,
        visit_i64: i64,
        visit_i128: i128,
        visit_u8: u8,
        visit_u16: u16,
        visit_u32: u32,
        visit_u64: u64,
        visit_u128: u128,
        visit_f32: f32,
        visit_f64: f64,
        visit_char: char
    );

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        *self.out = Some(Cow::Owned(v.to_owned()));
        self.v.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        *self.out = Some(Cow::Borrowed(v));
        self.v.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        *self.out = Some(Cow::Owned(v.clone()));
        self.v.visit_string(v)
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
        *self.out = Some(Cow::Owned(String::from_utf8_lossy(v).into_owned()));
        self.v.visit_bytes(v)
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Self::Value, E> {
        *self.out = Some(String::from_utf8_lossy(v));
        self.v.visit_borrowed_bytes(v)
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Self::Value, E> {
        *self.out = Some(Cow::Owned(String::from_utf8_lossy(&v).into_owned()));
        self.v.visit_byte_buf(v)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.v.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.v.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.v.visit_some(d)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.v.visit_newtype_struct(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.v.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.v.visit_map(map)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.v.visit_enum(data)
    }
}

// ---------------------------------------------------------------------------------------------
// Slow path: exact duplicates.

/// A JSON document with duplicate keys merged the way Go's decoder merges them into a typed
/// value: the later value wins, and two objects under the same key merge key by key.
pub(crate) enum Node {
    Scalar(serde_json::Value),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

impl Node {
    fn merge_from(&mut self, other: Node) {
        match (self, other) {
            (Node::Object(mine), Node::Object(theirs)) => {
                let mut index: HashMap<String, usize> = mine
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (k.clone(), i))
                    .collect();
                for (k, v) in theirs {
                    match index.get(&k) {
                        Some(&i) => mine[i].1.merge_from(v),
                        None => {
                            index.insert(k.clone(), mine.len());
                            mine.push((k, v));
                        }
                    }
                }
            }
            (me, other) => *me = other,
        }
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Scalar(v) => v.serialize(s),
            Node::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Object(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// Where each key first appears and which keys repeat, in document order.
#[derive(Default)]
pub(crate) struct KeyPositions {
    next: u32,
    /// Position of the first occurrence of each key path.
    pub first: HashMap<String, u32>,
    /// (path, position of the repeated occurrence).
    pub duplicates: Vec<(String, u32)>,
}

/// Parses into a [`Node`], recording key positions.
pub(crate) struct NodeSeed<'r> {
    pub path: String,
    pub positions: &'r RefCell<KeyPositions>,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = Node;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Scalar(v.into()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Scalar(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Scalar(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Scalar(v.into()))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Scalar(v.into()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Scalar(v.into()))
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Scalar(serde_json::Value::Null))
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Scalar(serde_json::Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        loop {
            let seed = NodeSeed {
                path: format!("{}[{}]", self.path, items.len()),
                positions: self.positions,
            };
            match seq.next_element_seed(seed)? {
                Some(node) => items.push(node),
                None => break,
            }
        }
        Ok(Node::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries: Vec<(String, Node)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let path = if self.path.is_empty() {
                key.to_string()
            } else {
                format!("{}.{}", self.path, key)
            };
            {
                let mut pos = self.positions.borrow_mut();
                let n = pos.next;
                pos.next += 1;
                if index.contains_key(key.as_ref()) {
                    pos.duplicates.push((path.clone(), n));
                } else {
                    pos.first.entry(path.clone()).or_insert(n);
                }
            }
            let value = map.next_value_seed(NodeSeed {
                path,
                positions: self.positions,
            })?;
            match index.get(key.as_ref()) {
                Some(&i) => entries[i].1.merge_from(value),
                None => {
                    index.insert(key.to_string(), entries.len());
                    entries.push((key.into_owned(), value));
                }
            }
        }
        Ok(Node::Object(entries))
    }
}

/// Builds the upstream violation texts, in document order, without repeats, at most 100.
pub(crate) fn violations(
    mut entries: Vec<(u32, bool, String)>, // (position, is_duplicate, path)
) -> Vec<String> {
    entries.sort_by_key(|e| e.0);
    let mut out: Vec<String> = Vec::new();
    for (_, dup, path) in entries {
        let msg = format!(
            "{} {}",
            if dup {
                "duplicate field"
            } else {
                "unknown field"
            },
            go_quote(&path)
        );
        if !out.contains(&msg) {
            out.push(msg);
        }
        if out.len() >= MAX_STRICT_ERRORS {
            break;
        }
    }
    out
}

/// True when `path` is `prefix` or lies under it.
pub(crate) fn is_under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_format() {
        let root = Path::Root;
        let spec = Path::Key(&root, "spec");
        let list = Path::Key(&spec, "toppings");
        let item = Path::Index(&list, 0);
        let foo = Path::Key(&item, "foo");
        assert_eq!(foo.to_string(), "spec.toppings[0].foo");
        let top = Path::Index(&root, 2);
        assert_eq!(Path::Key(&top, "a").to_string(), "[2].a");
    }

    #[test]
    fn quote() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
    }

    #[test]
    fn under() {
        assert!(is_under("spec.foo.bar", "spec.foo"));
        assert!(is_under("spec.foo[0]", "spec.foo"));
        assert!(is_under("spec.foo", "spec.foo"));
        assert!(!is_under("spec.foobar", "spec.foo"));
    }
}
