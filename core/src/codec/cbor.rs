//! CBOR (`application/cbor`, RFC 8949), as upstream's KEP-4222 serializer
//! (`apimachinery/pkg/runtime/serializer/cbor`).
//!
//! **Encoding** goes through `ciborium` (serde): every top-level item is enclosed in the
//! self-described CBOR tag 55799 (bytes `d9 d9 f7`, upstream's magic number), maps and arrays have
//! definite lengths, integers and floats take their shortest form (floats the shortest width that
//! keeps the value, as upstream's `ShortestFloat16`), and the object's fields come in the order
//! JSON writes them: `kind`, `apiVersion`, then the object's own. One deliberate difference:
//! upstream writes Go strings (and field names) as CBOR *byte* strings, because a Go string may
//! hold invalid UTF-8; a Rust string cannot, so ours are text strings. Upstream's decoder accepts
//! both, as ours does.
//!
//! **Decoding** transcodes the CBOR item to JSON ([`cbor_to_json`]) while enforcing upstream's
//! decode options (`internal/modes/decode.go`), then decodes the JSON as [`decode_json`] does, so
//! field validation (`Strict`/`Warn`/`Ignore`, unknown fields named by path) is exactly JSON's.
//! The options enforced: duplicate map keys are rejected outright whatever the field validation
//! (`DupMapKeyEnforcedAPF`), text strings must be valid UTF-8, byte strings read as strings (with
//! the base64/base64url/base16 "expected later encoding" tags 22/21/23 applied), NaN and infinities
//! are refused, only the simple values `false`, `true` and `null` are accepted, bignum tags (2, 3)
//! are refused, other tags stand for their content, indefinite lengths are accepted, extraneous
//! bytes after the item are refused. Nesting is capped at the JSON decoder's depth (128) so that
//! hostile input cannot exhaust the stack.

use std::collections::HashSet;

use base64::Engine;
use ciborium_ll::{Decoder, Header};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::CodecError;
use super::json::{ApiVersionKind, Decoded, TypedObject, decode_json, peek_json_type_meta};
use super::validation::FieldValidation;

/// The head of tag 55799, "self-described CBOR": upstream encloses every encoded object in it and
/// recognises CBOR by it.
pub const CBOR_SELF_DESCRIBED: [u8; 3] = [0xd9, 0xd9, 0xf7];

/// Deepest nesting accepted, the same as the JSON decoder's (serde_json's recursion limit).
const MAX_DEPTH: usize = 128;

/// The most arrays and maps inside one another: what the JSON decoder takes (its limit of 128 counts the one it
/// refuses), so that whatever transcodes also decodes.
const MAX_CONTAINERS: usize = MAX_DEPTH - 1;

/// Whether `data` starts with the self-described CBOR tag (upstream's `RecognizesData`).
pub fn is_cbor(data: &[u8]) -> bool {
    data.starts_with(&CBOR_SELF_DESCRIBED)
}

/// Encodes an object as CBOR with `kind` and `apiVersion` first (see [`TypedObject`]), enclosed in
/// the self-described tag.
pub fn encode_cbor<T: Serialize + ?Sized>(
    api_version: &str,
    kind: &str,
    object: &T,
) -> Result<Vec<u8>, CodecError> {
    encode_cbor_document(&TypedObject::new(api_version, kind, object))
}

/// Encodes a value that writes its own `kind` and `apiVersion` (Status, Table, ...) or none, enclosed
/// in the self-described tag.
pub fn encode_cbor_document<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CodecError> {
    let mut buf = CBOR_SELF_DESCRIBED.to_vec();
    write_cbor(&mut buf, value)?;
    Ok(buf)
}

/// Appends `value` as one CBOR item, without the self-described tag (an item nested in a list).
///
/// The value goes through [`ciborium::Value`] first so that every map has a definite length (a
/// serde map of unknown length, such as [`TypedObject`]'s, would otherwise be written with an
/// indefinite one, which upstream never produces).
pub fn write_cbor<T: Serialize + ?Sized>(buf: &mut Vec<u8>, value: &T) -> Result<(), CodecError> {
    let value =
        ciborium::Value::serialized(value).map_err(|e| CodecError::Encode(e.to_string()))?;
    check_encodable(&value, 0)?;
    ciborium::into_writer(&value, buf).map_err(|e| CodecError::Encode(e.to_string()))
}

/// Refuses what upstream's encoder refuses (NaN and infinities: JSON cannot carry them either).
fn check_encodable(value: &ciborium::Value, depth: usize) -> Result<(), CodecError> {
    use ciborium::Value;
    if depth > MAX_DEPTH {
        return Err(CodecError::Encode(format!(
            "cbor: exceeded max nested level {MAX_DEPTH}"
        )));
    }
    match value {
        Value::Float(f) if !f.is_finite() => {
            Err(CodecError::Encode(format!("cbor: unsupported value: {f}")))
        }
        Value::Array(items) => items.iter().try_for_each(|v| check_encodable(v, depth + 1)),
        Value::Map(entries) => entries
            .iter()
            .try_for_each(|(_, v)| check_encodable(v, depth + 1)),
        Value::Tag(_, v) => check_encodable(v, depth + 1),
        _ => Ok(()),
    }
}

/// Appends the head of a definite-length map of `len` entries.
pub(crate) fn write_map_header(buf: &mut Vec<u8>, len: usize) {
    write_header(buf, Header::Map(Some(len)));
}

/// Appends the head of a definite-length array of `len` items.
pub(crate) fn write_array_header(buf: &mut Vec<u8>, len: usize) {
    write_header(buf, Header::Array(Some(len)));
}

/// Appends a text string.
pub(crate) fn write_text(buf: &mut Vec<u8>, text: &str) {
    write_header(buf, Header::Text(Some(text.len())));
    buf.extend_from_slice(text.as_bytes());
}

fn write_header(buf: &mut Vec<u8>, header: Header) {
    // Writing into a Vec cannot fail.
    let _ = ciborium_ll::Encoder::from(buf).push(header);
}

/// Reads only `apiVersion` and `kind` from a CBOR item (to pick the type to decode into).
pub fn peek_cbor_type_meta(data: &[u8]) -> Result<ApiVersionKind, CodecError> {
    peek_json_type_meta(&cbor_to_json(data)?)
}

/// Decodes a CBOR object into `T` with the given field validation: the item is checked and
/// transcoded by [`cbor_to_json`], then decoded as [`decode_json`] decodes (same unknown-field
/// messages, same warnings).
pub fn decode_cbor<T: DeserializeOwned>(
    data: &[u8],
    validation: FieldValidation,
) -> Result<Decoded<T>, CodecError> {
    decode_json(&cbor_to_json(data)?, validation)
}

/// Transcodes exactly one CBOR data item (optionally enclosed in tag 55799) to JSON text, applying
/// upstream's decode options (see the module documentation). Errors are [`CodecError::Cbor`]
/// (400).
pub fn cbor_to_json(data: &[u8]) -> Result<Vec<u8>, CodecError> {
    if data.is_empty() {
        return Err(CodecError::Cbor("EOF".into()));
    }
    let mut t = Transcoder {
        decoder: Decoder::from(data),
        len: data.len(),
        out: Vec::with_capacity(data.len() + data.len() / 2),
        containers: 0,
    };
    t.item(0)?;
    let end = t.decoder.offset();
    if end < data.len() {
        return Err(CodecError::Cbor(format!(
            "{} bytes of extraneous data starting at index {end}",
            data.len() - end
        )));
    }
    Ok(t.out)
}

struct Transcoder<'a> {
    decoder: Decoder<&'a [u8]>,
    len: usize,
    out: Vec<u8>,
    /// Arrays and maps open around the current item.
    containers: usize,
}

fn cbor_error(message: impl Into<String>) -> CodecError {
    CodecError::Cbor(message.into())
}

/// Which string major type is being read.
#[derive(Clone, Copy, PartialEq)]
enum StringKind {
    Bytes,
    Text,
}

impl Transcoder<'_> {
    fn pull(&mut self) -> Result<Header, CodecError> {
        self.decoder.pull().map_err(|e| match e {
            ciborium_ll::Error::Io(_) => cbor_error("unexpected EOF"),
            ciborium_ll::Error::Syntax(at) => {
                cbor_error(format!("invalid additional information at index {at}"))
            }
        })
    }

    fn remaining(&mut self) -> usize {
        self.len - self.decoder.offset()
    }

    /// Reads one item and writes it as JSON.
    fn item(&mut self, depth: usize) -> Result<(), CodecError> {
        if depth > MAX_DEPTH {
            return Err(cbor_error(format!("exceeded max nested level {MAX_DEPTH}")));
        }
        let header = self.pull()?;
        self.item_with(header, depth)
    }

    fn item_with(&mut self, header: Header, depth: usize) -> Result<(), CodecError> {
        match header {
            Header::Positive(n) => self.write_json(&n),
            Header::Negative(n) => match i64::try_from(n) {
                // The value is -1 - n.
                Ok(n) => self.write_json(&(-1 - n)),
                Err(_) => Err(cbor_error(format!(
                    "-1-{n} overflows a signed 64-bit integer"
                ))),
            },
            Header::Float(f) if f.is_nan() => Err(cbor_error("floating-point NaN is not accepted")),
            Header::Float(f) if f.is_infinite() => {
                Err(cbor_error("floating-point infinity is not accepted"))
            }
            Header::Float(f) => self.write_json(&f),
            Header::Simple(20) => self.literal(b"false"),
            Header::Simple(21) => self.literal(b"true"),
            Header::Simple(22) => self.literal(b"null"),
            Header::Simple(n) => Err(cbor_error(format!("simple value {n} is not recognized"))),
            Header::Break => Err(cbor_error("unexpected \"break\" code")),
            Header::Bytes(len) => {
                let bytes = self.string(StringKind::Bytes, len)?;
                self.write_json(&String::from_utf8_lossy(&bytes))
            }
            Header::Text(len) => {
                let bytes = self.string(StringKind::Text, len)?;
                let text =
                    String::from_utf8(bytes).map_err(|_| cbor_error("invalid UTF-8 string"))?;
                self.write_json(&text)
            }
            Header::Tag(tag) => self.tagged(tag, depth),
            Header::Array(_) | Header::Map(_) if self.containers >= MAX_CONTAINERS => {
                Err(cbor_error(format!("exceeded max nested level {MAX_DEPTH}")))
            }
            Header::Array(len) => {
                self.containers += 1;
                self.out.push(b'[');
                match len {
                    Some(n) => {
                        self.check_count(n)?;
                        for i in 0..n {
                            if i > 0 {
                                self.out.push(b',');
                            }
                            self.item(depth + 1)?;
                        }
                    }
                    None => {
                        let mut index = 0usize;
                        loop {
                            let header = self.pull()?;
                            if header == Header::Break {
                                break;
                            }
                            if index > 0 {
                                self.out.push(b',');
                            }
                            index += 1;
                            self.nested(header, depth + 1)?;
                        }
                    }
                }
                self.out.push(b']');
                self.containers -= 1;
                Ok(())
            }
            Header::Map(len) => {
                self.containers += 1;
                self.out.push(b'{');
                let mut seen = HashSet::new();
                let mut index = 0usize;
                let mut entry = |this: &mut Self, key: Header| -> Result<(), CodecError> {
                    let key = this.key(key)?;
                    if !seen.insert(key.clone()) {
                        return Err(cbor_error(format!(
                            "found duplicate map key {key:?} at map element index {index}"
                        )));
                    }
                    if index > 0 {
                        this.out.push(b',');
                    }
                    index += 1;
                    this.write_json(&key)?;
                    this.out.push(b':');
                    this.item(depth + 1)
                };
                match len {
                    Some(n) => {
                        self.check_count(n.saturating_mul(2))?;
                        for _ in 0..n {
                            let key = self.pull()?;
                            entry(self, key)?;
                        }
                    }
                    None => loop {
                        let key = self.pull()?;
                        if key == Header::Break {
                            break;
                        }
                        entry(self, key)?;
                    },
                }
                self.out.push(b'}');
                self.containers -= 1;
                Ok(())
            }
        }
    }

    /// An item whose header is already read, one level deeper.
    fn nested(&mut self, header: Header, depth: usize) -> Result<(), CodecError> {
        if depth > MAX_DEPTH {
            return Err(cbor_error(format!("exceeded max nested level {MAX_DEPTH}")));
        }
        self.item_with(header, depth)
    }

    /// Each item takes at least one byte: a count beyond what is left is truncated input, found
    /// before looping over it.
    fn check_count(&mut self, items: usize) -> Result<(), CodecError> {
        if items > self.remaining() {
            return Err(cbor_error("unexpected EOF"));
        }
        Ok(())
    }

    /// A map key: a text or byte string (upstream matches both to field names).
    fn key(&mut self, mut header: Header) -> Result<String, CodecError> {
        // Tag 55799 adds nothing; a chain of them is skipped without recursing.
        while header == Header::Tag(55799) {
            header = self.pull()?;
        }
        match header {
            Header::Text(len) => String::from_utf8(self.string(StringKind::Text, len)?)
                .map_err(|_| cbor_error("invalid UTF-8 string")),
            Header::Bytes(len) => {
                Ok(String::from_utf8_lossy(&self.string(StringKind::Bytes, len)?).into_owned())
            }
            _ => Err(cbor_error(
                "map keys must be text or byte strings to decode into an object",
            )),
        }
    }

    /// The content of a byte or text string, definite or made of definite chunks.
    fn string(&mut self, kind: StringKind, len: Option<usize>) -> Result<Vec<u8>, CodecError> {
        let Some(len) = len else {
            let mut all = Vec::new();
            loop {
                match (kind, self.pull()?) {
                    (_, Header::Break) => return Ok(all),
                    (StringKind::Bytes, Header::Bytes(Some(n)))
                    | (StringKind::Text, Header::Text(Some(n))) => {
                        all.extend_from_slice(&self.string(kind, Some(n))?);
                    }
                    _ => {
                        return Err(cbor_error(
                            "wrong element type in an indefinite-length string",
                        ));
                    }
                }
            }
        };
        if len > self.remaining() {
            return Err(cbor_error("unexpected EOF"));
        }
        let mut bytes = vec![0; len];
        ciborium_io::Read::read_exact(&mut self.decoder, &mut bytes)
            .map_err(|_| cbor_error("unexpected EOF"))?;
        Ok(bytes)
    }

    fn tagged(&mut self, tag: u64, depth: usize) -> Result<(), CodecError> {
        match tag {
            // Positive and negative bignums: no faithful JSON number (BignumTagForbidden).
            2 | 3 => Err(cbor_error(format!("bignum tag {tag} is not accepted"))),
            // Expected later encoding (RFC 8949 §3.4.5.2): a byte string becomes that text.
            21..=23 => {
                let header = self.pull()?;
                let Header::Bytes(len) = header else {
                    // The tag applies to byte strings only; on anything else it is just a tag.
                    return self.nested(header, depth + 1);
                };
                let bytes = self.string(StringKind::Bytes, len)?;
                let text = match tag {
                    21 => base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes),
                    22 => base64::engine::general_purpose::STANDARD.encode(&bytes),
                    _ => bytes.iter().map(|b| format!("{b:02x}")).collect(),
                };
                self.write_json(&text)
            }
            // Epoch-based date/time: upstream turns it into an RFC 3339 string.
            1 => {
                let header = self.pull()?;
                let seconds = match header {
                    Header::Positive(n) => i64::try_from(n).ok().map(|s| (s, 0)),
                    Header::Negative(n) => i64::try_from(n).ok().map(|n| (-1 - n, 0)),
                    Header::Float(f) if f.is_finite() => {
                        let whole = f.floor();
                        Some((whole as i64, ((f - whole) * 1e9).round() as u32))
                    }
                    _ => None,
                };
                let time = seconds
                    .and_then(|(s, n)| chrono::DateTime::from_timestamp(s, n.min(999_999_999)))
                    .ok_or_else(|| cbor_error("tag 1 must enclose a number of seconds in range"))?;
                self.write_json(&time.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
            }
            // Self-described CBOR, a text date/time (tag 0) and unrecognised tags: the content.
            _ => self.item(depth + 1),
        }
    }

    fn literal(&mut self, text: &[u8]) -> Result<(), CodecError> {
        self.out.extend_from_slice(text);
        Ok(())
    }

    fn write_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CodecError> {
        serde_json::to_writer(&mut self.out, value).map_err(|e| CodecError::Decode(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(cbor: &[u8]) -> Result<String, CodecError> {
        cbor_to_json(cbor).map(|j| String::from_utf8(j).unwrap())
    }

    #[test]
    fn transcodes_the_json_data_model() {
        // {"a": [1, -2, 1.5, true, null], h'6b': "x"} in the self-described tag, with a text and
        // a byte string key.
        let item = [
            0xd9, 0xd9, 0xf7, 0xa2, 0x61, b'a', 0x85, 0x01, 0x21, 0xf9, 0x3e, 0x00, 0xf5, 0xf6,
            0x41, b'k', 0x61, b'x',
        ];
        assert_eq!(
            json(&item).unwrap(),
            r#"{"a":[1,-2,1.5,true,null],"k":"x"}"#
        );
        // Indefinite-length map, array and chunked text.
        let item = [
            0xbf, 0x61, b'a', 0x9f, 0x01, 0xff, 0x61, b'b', 0x7f, 0x61, b'x', 0x61, b'y', 0xff,
            0xff,
        ];
        assert_eq!(json(&item).unwrap(), r#"{"a":[1],"b":"xy"}"#);
        // Tag 22 around a byte string: base64; tag 23: hex.
        assert_eq!(json(&[0xd6, 0x42, 0x01, 0x02]).unwrap(), r#""AQI=""#);
        assert_eq!(json(&[0xd7, 0x42, 0x01, 0xff]).unwrap(), r#""01ff""#);
        // Tag 1: seconds since the epoch, as RFC 3339.
        assert_eq!(json(&[0xc1, 0x00]).unwrap(), r#""1970-01-01T00:00:00Z""#);
    }

    #[test]
    fn refuses_what_upstream_refuses() {
        let cases: &[(&[u8], &str)] = &[
            (
                &[0xa2, 0x61, b'a', 0x01, 0x61, b'a', 0x02],
                "duplicate map key \"a\"",
            ),
            (&[0xf9, 0x7e, 0x00], "NaN"),
            (&[0xf9, 0x7c, 0x00], "infinity"),
            (&[0xf7], "simple value 23"),
            (&[0xc2, 0x41, 0x01], "bignum"),
            (&[0x62, 0xff, 0xfe], "invalid UTF-8"),
            (
                &[0x01, 0x02],
                "1 bytes of extraneous data starting at index 1",
            ),
            (&[0x82, 0x01], "unexpected EOF"),
            (&[0x7a, 0xff, 0xff, 0xff, 0xff], "unexpected EOF"),
            (&[0xa1, 0x01, 0x02], "map keys must be text or byte strings"),
            (&[0xff], "break"),
            (
                &[0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                "overflows",
            ),
            (&[0x1c], "invalid additional information"),
            (&[], "EOF"),
        ];
        for (input, needle) in cases {
            let err = cbor_to_json(input).unwrap_err();
            assert_eq!(err.code(), 400, "{input:02x?}");
            assert!(err.to_string().contains(needle), "{input:02x?}: {err}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        for opener in [0x81u8, 0x9f, 0xd9] {
            let mut input = vec![opener; 1_000_000];
            if opener == 0xd9 {
                // Tag 55799 repeated.
                input = CBOR_SELF_DESCRIBED.repeat(300_000);
            }
            input.push(0x01);
            let err = cbor_to_json(&input).unwrap_err();
            assert!(err.to_string().contains("max nested level"), "{err}");
        }
        // 128 levels are fine, as in JSON.
        let mut input = vec![0x81u8; 127];
        input.push(0x01);
        assert!(cbor_to_json(&input).is_ok());
    }

    /// Found by fuzzing: 128 arrays one inside another transcoded, and the JSON decoder then refused them.
    #[test]
    fn what_transcodes_decodes_as_json() {
        for (opener, depth) in [
            (0x81u8, 126),
            (0x81, 127),
            (0x81, 128),
            (0xa1, 127),
            (0xa1, 128),
        ] {
            let mut input = Vec::new();
            for _ in 0..depth {
                input.push(opener);
                if opener == 0xa1 {
                    input.extend_from_slice(&[0x61, b'k']);
                }
            }
            input.push(0x01);
            let transcoded = cbor_to_json(&input);
            let decodes = transcoded
                .as_ref()
                .is_ok_and(|json| serde_json::from_slice::<serde_json::Value>(json).is_ok());
            assert_eq!(transcoded.is_ok(), decodes, "{depth} × {opener:#x}");
            assert_eq!(transcoded.is_ok(), depth < 128, "{depth} × {opener:#x}");
        }
    }

    #[test]
    fn encodes_with_the_tag_definite_lengths_and_shortest_forms() {
        #[derive(Serialize)]
        struct Spec {
            size: u32,
            ratio: f64,
            toppings: Vec<String>,
        }
        let bytes = encode_cbor(
            "example.com/v1",
            "Pizza",
            &Spec {
                size: 3,
                ratio: 0.5,
                toppings: vec!["x".into()],
            },
        )
        .unwrap();
        let mut expected = CBOR_SELF_DESCRIBED.to_vec();
        expected.push(0xa5);
        for (k, v) in [("kind", "Pizza"), ("apiVersion", "example.com/v1")] {
            write_text(&mut expected, k);
            write_text(&mut expected, v);
        }
        write_text(&mut expected, "size");
        expected.push(0x03);
        write_text(&mut expected, "ratio");
        expected.extend_from_slice(&[0xf9, 0x38, 0x00]);
        write_text(&mut expected, "toppings");
        expected.extend_from_slice(&[0x81, 0x61, b'x']);
        assert_eq!(bytes, expected);
        assert!(is_cbor(&bytes));
        assert_eq!(
            String::from_utf8(cbor_to_json(&bytes).unwrap()).unwrap(),
            r#"{"kind":"Pizza","apiVersion":"example.com/v1","size":3,"ratio":0.5,"toppings":["x"]}"#
        );
        assert!(encode_cbor_document(&f64::NAN).is_err());
    }

    #[test]
    fn field_validation_is_jsons() {
        #[derive(serde::Deserialize, Debug)]
        struct Spec {
            #[allow(dead_code)]
            size: u32,
        }
        #[derive(serde::Deserialize, Debug)]
        struct Pizza {
            #[allow(dead_code)]
            spec: Spec,
        }
        #[derive(Serialize)]
        struct Body {
            spec: serde_json::Value,
        }
        let body = encode_cbor(
            "example.com/v1",
            "Pizza",
            &Body {
                spec: serde_json::json!({"size": 3, "crust": 1}),
            },
        )
        .unwrap();
        let err = decode_cbor::<Pizza>(&body, FieldValidation::Strict).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"strict decoding error: unknown field "spec.crust""#
        );
        let ok = decode_cbor::<Pizza>(&body, FieldValidation::Warn).unwrap();
        assert_eq!(
            ok.warnings,
            vec![r#"unknown field "spec.crust""#.to_string()]
        );
        assert_eq!(ok.type_meta, ApiVersionKind::new("example.com/v1", "Pizza"));
        assert!(
            decode_cbor::<Pizza>(&body, FieldValidation::Ignore)
                .unwrap()
                .warnings
                .is_empty()
        );
    }
}
