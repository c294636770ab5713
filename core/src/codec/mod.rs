//! Wire encodings of objects: JSON, YAML, protobuf and CBOR, content negotiation, field validation and
//! watch framing.
//!
//! Everything here is generic over serde (JSON, YAML) and prost (protobuf) types and knows nothing
//! of a scheme: the caller supplies `apiVersion` and `kind` when encoding, and gets them back
//! (as [`ApiVersionKind`]) when decoding. Errors are one [`CodecError`] type that carries the HTTP
//! status, reason and upstream message text.
//!
//! ```
//! use apiserver::codec::{decode_json, encode_json, FieldValidation};
//! #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
//! struct Spec { size: u32 }
//! #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
//! struct Pizza { spec: Spec }
//!
//! let bytes = encode_json("example.com/v1", "Pizza", &Pizza { spec: Spec { size: 3 } }).unwrap();
//! assert_eq!(bytes, br#"{"kind":"Pizza","apiVersion":"example.com/v1","spec":{"size":3}}"#);
//!
//! let body = br#"{"kind":"Pizza","apiVersion":"example.com/v1","spec":{"size":3,"crust":1}}"#;
//! let err = decode_json::<Pizza>(body, FieldValidation::Strict).unwrap_err();
//! assert_eq!(err.to_string(), r#"strict decoding error: unknown field "spec.crust""#);
//! let ok = decode_json::<Pizza>(body, FieldValidation::Warn).unwrap();
//! assert_eq!(ok.warnings, vec![r#"unknown field "spec.crust""#.to_string()]);
//! assert_eq!(ok.type_meta.kind, "Pizza");
//! ```

mod cbor;
mod error;
pub(crate) mod json;
mod media;
mod protobuf;
mod validation;
mod watch;
mod yaml;

pub use cbor::{
    CBOR_SELF_DESCRIBED, cbor_to_json, decode_cbor, encode_cbor, encode_cbor_document, is_cbor,
    peek_cbor_type_meta, write_cbor,
};
pub(crate) use cbor::{write_array_header, write_map_header, write_text};
pub use error::CodecError;
pub use json::{
    ApiVersionKind, Decoded, TypedObject, decode_json, encode_json, encode_json_pretty,
    peek_json_type_meta, write_json,
};
pub use media::{
    AcceptClause, CONTENT_TYPE_CBOR, CONTENT_TYPE_CBOR_SEQ, CONTENT_TYPE_JSON,
    CONTENT_TYPE_PROTOBUF, CONTENT_TYPE_YAML, ConvertTarget, DefaultRestrictions,
    EndpointRestrictions, MediaType, Negotiated, ResourceRestrictions, negotiate_input,
    negotiate_output, negotiate_output_stream, parse_accept, parse_content_type,
};
pub(crate) use protobuf::{ENVELOPE_TRAILER, write_envelope_header};
pub use protobuf::{
    PROTOBUF_MAGIC, RawExtension, Unknown, UnknownTypeMeta, decode_protobuf, decode_protobuf_as,
    decode_unknown, encode_protobuf, encode_protobuf_into, encode_protobuf_raw, is_protobuf,
};
pub use validation::FieldValidation;
pub use watch::{
    DEFAULT_MAX_FRAME_SIZE, JsonWatchEvent, JsonWatchReader, ProtobufFrameReader,
    decode_protobuf_watch_event, encode_cbor_watch_event, encode_json_watch_event,
    encode_protobuf_watch_event, encode_protobuf_watch_frame, write_cbor_watch_event,
    write_json_watch_event, write_protobuf_watch_frame,
};
pub use yaml::{decode_yaml, encode_yaml, peek_yaml_type_meta, yaml_to_json};
