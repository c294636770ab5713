//! Protobuf (`application/vnd.kubernetes.protobuf`): the `k8s\0` envelope.
//!
//! An encoded object is the 4 magic bytes `6b 38 73 00` followed by a proto2
//! `k8s.io.apimachinery.pkg.runtime.Unknown` whose `raw` holds the object's own message (objects do
//! not encode their `TypeMeta`; the envelope carries it). [`encode_protobuf`] writes the envelope
//! byte for byte as Go's gogo-generated marshaller does (including the empty `contentEncoding` and
//! `contentType` fields), in one allocation, without copying the object's bytes twice.

use prost::Message;
use prost::encoding::{encode_varint, encoded_len_varint};

use super::CodecError;
use super::json::ApiVersionKind;

/// The magic prefix of every protobuf-encoded object: `k8s` and the encoding style `0`.
pub const PROTOBUF_MAGIC: [u8; 4] = [0x6b, 0x38, 0x73, 0x00];

/// `runtime.Unknown`: an object of some kind, still encoded.
#[derive(Clone, PartialEq, Message)]
pub struct Unknown {
    /// The object's `apiVersion` and `kind`.
    #[prost(message, optional, tag = "1")]
    pub type_meta: Option<UnknownTypeMeta>,
    /// The object's own encoding.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub raw: Option<Vec<u8>>,
    /// Compression of `raw`; empty (none) in practice.
    #[prost(string, optional, tag = "3")]
    pub content_encoding: Option<String>,
    /// Media type of `raw`; empty means protobuf.
    #[prost(string, optional, tag = "4")]
    pub content_type: Option<String>,
}

/// `runtime.TypeMeta`, the proto form used inside [`Unknown`] (not `meta::TypeMeta`).
#[derive(Clone, PartialEq, Message)]
pub struct UnknownTypeMeta {
    /// `group/version`.
    #[prost(string, optional, tag = "1")]
    pub api_version: Option<String>,
    /// Kind.
    #[prost(string, optional, tag = "2")]
    pub kind: Option<String>,
}

/// `runtime.RawExtension`: an embedded object as bytes (in protobuf: its full `k8s\0` envelope).
#[derive(Clone, PartialEq, Message)]
pub struct RawExtension {
    /// The embedded object's encoding.
    #[prost(bytes = "vec", optional, tag = "1")]
    pub raw: Option<Vec<u8>>,
}

fn len_delimited_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

fn put_len_delimited(buf: &mut Vec<u8>, tag_byte: u8, bytes: &[u8]) {
    buf.push(tag_byte);
    encode_varint(bytes.len() as u64, buf);
    buf.extend_from_slice(bytes);
}

/// Encodes an object in the envelope.
pub fn encode_protobuf<M: Message>(
    api_version: &str,
    kind: &str,
    object: &M,
) -> Result<Vec<u8>, CodecError> {
    let mut buf = Vec::new();
    encode_protobuf_into(&mut buf, api_version, kind, object)?;
    Ok(buf)
}

/// Appends an object in the envelope to `buf` (reserving the exact size first).
pub fn encode_protobuf_into<M: Message>(
    buf: &mut Vec<u8>,
    api_version: &str,
    kind: &str,
    object: &M,
) -> Result<(), CodecError> {
    let raw_len = object.encoded_len();
    write_envelope_header(buf, api_version, kind, raw_len);
    object
        .encode(buf)
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    buf.extend_from_slice(&ENVELOPE_TRAILER);
    Ok(())
}

/// Wraps bytes that already are an object's protobuf message (e.g. from storage) in the envelope.
pub fn encode_protobuf_raw(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    write_envelope_header(&mut buf, api_version, kind, raw.len());
    buf.extend_from_slice(raw);
    buf.extend_from_slice(&ENVELOPE_TRAILER);
    buf
}

/// Writes magic, `typeMeta` and the `raw` tag and length; the caller writes `raw_len` bytes and
/// then the two empty string fields ([`ENVELOPE_TRAILER`]).
/// The envelope's empty `contentEncoding` and `contentType` fields, after the object.
pub(crate) const ENVELOPE_TRAILER: [u8; 4] = [0x1a, 0x00, 0x22, 0x00];

pub(crate) fn write_envelope_header(
    buf: &mut Vec<u8>,
    api_version: &str,
    kind: &str,
    raw_len: usize,
) {
    let tm_len = len_delimited_len(api_version.len()) + len_delimited_len(kind.len());
    let total = PROTOBUF_MAGIC.len() + len_delimited_len(tm_len) + len_delimited_len(raw_len) + 4;
    buf.reserve(total);
    buf.extend_from_slice(&PROTOBUF_MAGIC);
    buf.push(0x0a);
    encode_varint(tm_len as u64, buf);
    put_len_delimited(buf, 0x0a, api_version.as_bytes());
    put_len_delimited(buf, 0x12, kind.as_bytes());
    buf.push(0x12);
    encode_varint(raw_len as u64, buf);
}

/// Whether `data` starts with the protobuf magic (upstream's `RecognizesData`).
pub fn is_protobuf(data: &[u8]) -> bool {
    data.starts_with(&PROTOBUF_MAGIC)
}

/// Opens the envelope: the declared `apiVersion`/`kind` and the object's raw message.
/// Errors as upstream: `empty data`, `provided data does not appear to be a protobuf message,
/// expected prefix [107 56 115 0]`, `empty body`, or the protobuf decode error.
pub fn decode_protobuf(data: &[u8]) -> Result<(ApiVersionKind, Vec<u8>), CodecError> {
    let unknown = decode_unknown(data)?;
    let tm = unknown.type_meta.unwrap_or_default();
    Ok((
        ApiVersionKind {
            api_version: tm.api_version.unwrap_or_default(),
            kind: tm.kind.unwrap_or_default(),
        },
        unknown.raw.unwrap_or_default(),
    ))
}

/// Opens the envelope into the whole [`Unknown`] message.
pub fn decode_unknown(data: &[u8]) -> Result<Unknown, CodecError> {
    match data.len() {
        0 => return Err(CodecError::EmptyData),
        n if n < PROTOBUF_MAGIC.len() || !is_protobuf(data) => return Err(CodecError::NotProtobuf),
        4 => return Err(CodecError::EmptyBody),
        _ => {}
    }
    Unknown::decode(&data[PROTOBUF_MAGIC.len()..]).map_err(|e| CodecError::Protobuf(e.to_string()))
}

/// Opens the envelope and decodes the object as `M`.
pub fn decode_protobuf_as<M: Message + Default>(
    data: &[u8],
) -> Result<(ApiVersionKind, M), CodecError> {
    let (tm, raw) = decode_protobuf(data)?;
    let object = M::decode(raw.as_slice()).map_err(|e| CodecError::Protobuf(e.to_string()))?;
    Ok((tm, object))
}

impl ApiVersionKind {
    /// How Go prints a `runtime.TypeMeta` with `%#v`, which upstream's protobuf decoder puts in
    /// its `Object 'Kind' is missing in '...'` errors.
    pub fn go_repr(&self) -> String {
        format!(
            "runtime.TypeMeta{{APIVersion:{}, Kind:{}}}",
            apiserver_gotext::quote(&self.api_version),
            apiserver_gotext::quote(&self.kind)
        )
    }
}
