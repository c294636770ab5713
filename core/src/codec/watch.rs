//! Watch stream framing (upstream `endpoints/handlers/watch.go`, `runtime/serializer/streaming`,
//! `util/framer`).
//!
//! - JSON: one `{"type":"ADDED","object":{...}}` per line (`application/json`).
//! - Protobuf (`application/vnd.kubernetes.protobuf;stream=watch`): each frame is a 4-byte
//!   big-endian length followed by a **raw** `metav1.WatchEvent{type=1, object=2:
//!   RawExtension{raw=1}}` message: no `k8s\0` magic and no `Unknown` around the event (upstream's
//!   stream serializer is the raw protobuf serializer), while `object.raw` holds the object's full
//!   `k8s\0` envelope.
//!
//! - CBOR (`application/cbor-seq`, RFC 8742): the events one after another, each a self-described
//!   CBOR map `{"type": ..., "object": ...}` whose `object` is the object's own encoding, tag
//!   55799 included (upstream's `RawExtension.MarshalCBOR` writes CBOR raw bytes as they are).
//!
//! The functions take the event type and the already-encoded object, so the watch cache can
//! encode each object once and frame it for every watcher.

use std::io::{BufRead, Read};

use prost::Message;
use prost::encoding::{encode_varint, encoded_len_varint};

use super::CodecError;
use super::protobuf::RawExtension;

/// Largest frame a reader accepts by default (upstream's streaming decoder limit: 16 MiB).
pub const DEFAULT_MAX_FRAME_SIZE: usize = 16 * 1024 * 1024;

/// Appends one JSON watch event line: `{"type":<event_type>,"object":<object_json>}` and `\n`.
/// `object_json` is the object as [`super::encode_json`] produced it; trailing whitespace is dropped.
pub fn write_json_watch_event(buf: &mut Vec<u8>, event_type: &str, object_json: &[u8]) {
    let object = trim_ascii_end(object_json);
    buf.reserve(object.len() + event_type.len() + 24);
    buf.extend_from_slice(b"{\"type\":");
    write_json_string(buf, event_type);
    buf.extend_from_slice(b",\"object\":");
    buf.extend_from_slice(object);
    buf.extend_from_slice(b"}\n");
}

/// One JSON watch event line, newly allocated. See [`write_json_watch_event`].
pub fn encode_json_watch_event(event_type: &str, object_json: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    write_json_watch_event(&mut buf, event_type, object_json);
    buf
}

/// Appends one CBOR watch event (one item of an `application/cbor-seq` stream):
/// `55799({"type": <event_type>, "object": <object_cbor>})`, where `object_cbor` is the object as
/// [`super::encode_cbor`] produced it.
pub fn write_cbor_watch_event(buf: &mut Vec<u8>, event_type: &str, object_cbor: &[u8]) {
    buf.reserve(object_cbor.len() + event_type.len() + 20);
    buf.extend_from_slice(&super::CBOR_SELF_DESCRIBED);
    super::write_map_header(buf, 2);
    super::write_text(buf, "type");
    super::write_text(buf, event_type);
    super::write_text(buf, "object");
    buf.extend_from_slice(object_cbor);
}

/// One CBOR watch event, newly allocated. See [`write_cbor_watch_event`].
pub fn encode_cbor_watch_event(event_type: &str, object_cbor: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    write_cbor_watch_event(&mut buf, event_type, object_cbor);
    buf
}

fn trim_ascii_end(b: &[u8]) -> &[u8] {
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    &b[..end]
}

fn write_json_string(buf: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        buf.push(b'"');
        buf.extend_from_slice(s.as_bytes());
        buf.push(b'"');
    } else if serde_json::to_writer(&mut *buf, s).is_err() {
        // Writing a string into a Vec cannot fail.
        buf.extend_from_slice(b"\"\"");
    }
}

/// Appends one protobuf watch frame: 4-byte big-endian length, then the raw `WatchEvent` whose
/// `object.raw` is `object_envelope` (the object's `k8s\0...` encoding). Fails only for events
/// larger than 4 GiB.
pub fn write_protobuf_watch_frame(
    buf: &mut Vec<u8>,
    event_type: &str,
    object_envelope: &[u8],
) -> Result<(), CodecError> {
    let raw_ext_len = 1 + encoded_len_varint(object_envelope.len() as u64) + object_envelope.len();
    let event_len = 1
        + encoded_len_varint(event_type.len() as u64)
        + event_type.len()
        + 1
        + encoded_len_varint(raw_ext_len as u64)
        + raw_ext_len;
    let header = u32::try_from(event_len).map_err(|_| CodecError::ObjectTooLarge)?;
    buf.reserve(4 + event_len);
    buf.extend_from_slice(&header.to_be_bytes());
    write_watch_event(buf, event_type, object_envelope, raw_ext_len);
    Ok(())
}

/// One protobuf watch frame, newly allocated. See [`write_protobuf_watch_frame`].
pub fn encode_protobuf_watch_frame(
    event_type: &str,
    object_envelope: &[u8],
) -> Result<Vec<u8>, CodecError> {
    let mut buf = Vec::new();
    write_protobuf_watch_frame(&mut buf, event_type, object_envelope)?;
    Ok(buf)
}

/// The raw `WatchEvent` message alone (no length prefix), e.g. for websocket watches where the
/// websocket message is the frame.
pub fn encode_protobuf_watch_event(event_type: &str, object_envelope: &[u8]) -> Vec<u8> {
    let raw_ext_len = 1 + encoded_len_varint(object_envelope.len() as u64) + object_envelope.len();
    let mut buf = Vec::new();
    write_watch_event(&mut buf, event_type, object_envelope, raw_ext_len);
    buf
}

fn write_watch_event(buf: &mut Vec<u8>, event_type: &str, object: &[u8], raw_ext_len: usize) {
    buf.push(0x0a);
    encode_varint(event_type.len() as u64, buf);
    buf.extend_from_slice(event_type.as_bytes());
    buf.push(0x12);
    encode_varint(raw_ext_len as u64, buf);
    buf.push(0x0a);
    encode_varint(object.len() as u64, buf);
    buf.extend_from_slice(object);
}

/// `metav1.WatchEvent` as it travels in a protobuf frame.
#[derive(Clone, PartialEq, Message)]
struct WireWatchEvent {
    #[prost(string, optional, tag = "1")]
    r#type: Option<String>,
    #[prost(message, optional, tag = "2")]
    object: Option<RawExtension>,
}

/// Decodes a protobuf frame's `WatchEvent` into (event type, object envelope bytes).
pub fn decode_protobuf_watch_event(frame: &[u8]) -> Result<(String, Vec<u8>), CodecError> {
    let event = WireWatchEvent::decode(frame).map_err(|e| CodecError::Protobuf(e.to_string()))?;
    Ok((
        event.r#type.unwrap_or_default(),
        event.object.and_then(|o| o.raw).unwrap_or_default(),
    ))
}

/// Reads length-prefixed frames from a protobuf watch stream (for clients and tests).
#[derive(Debug)]
pub struct ProtobufFrameReader<R> {
    reader: R,
    max_frame_size: usize,
}

impl<R: Read> ProtobufFrameReader<R> {
    /// A reader with the default 16 MiB frame limit.
    pub fn new(reader: R) -> Self {
        Self::with_max_frame_size(reader, DEFAULT_MAX_FRAME_SIZE)
    }

    /// A reader refusing frames longer than `max_frame_size` bytes.
    pub fn with_max_frame_size(reader: R, max_frame_size: usize) -> Self {
        ProtobufFrameReader {
            reader,
            max_frame_size,
        }
    }

    /// The next frame's bytes; `Ok(None)` at a clean end of stream. A stream that ends inside a
    /// frame fails with [`CodecError::UnexpectedEof`], an oversize length with
    /// [`CodecError::ObjectTooLarge`] (before allocating).
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, CodecError> {
        let mut header = [0u8; 4];
        let mut got = 0;
        while got < header.len() {
            match self.reader.read(&mut header[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(CodecError::UnexpectedEof),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        let len = u32::from_be_bytes(header) as usize;
        if len > self.max_frame_size {
            return Err(CodecError::ObjectTooLarge);
        }
        let mut frame = vec![0u8; len];
        self.reader.read_exact(&mut frame).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                CodecError::UnexpectedEof
            } else {
                e.into()
            }
        })?;
        Ok(Some(frame))
    }

    /// The next event as (type, object envelope bytes); `Ok(None)` at the end of the stream.
    pub fn next_event(&mut self) -> Result<Option<(String, Vec<u8>)>, CodecError> {
        match self.next_frame()? {
            Some(frame) => decode_protobuf_watch_event(&frame).map(Some),
            None => Ok(None),
        }
    }
}

/// One event of a JSON watch stream.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct JsonWatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The object (a `Status` for `ERROR`).
    pub object: serde_json::Value,
}

/// Reads a JSON watch stream, one event per line (as our server writes it), for clients and tests.
#[derive(Debug)]
pub struct JsonWatchReader<R> {
    reader: R,
    max_frame_size: usize,
    line: Vec<u8>,
}

impl<R: BufRead> JsonWatchReader<R> {
    /// A reader with the default 16 MiB line limit.
    pub fn new(reader: R) -> Self {
        Self::with_max_frame_size(reader, DEFAULT_MAX_FRAME_SIZE)
    }

    /// A reader refusing lines longer than `max_frame_size` bytes.
    pub fn with_max_frame_size(reader: R, max_frame_size: usize) -> Self {
        JsonWatchReader {
            reader,
            max_frame_size,
            line: Vec::new(),
        }
    }

    /// The next event; `Ok(None)` at the end of the stream. Blank lines are skipped.
    pub fn next_event(&mut self) -> Result<Option<JsonWatchEvent>, CodecError> {
        loop {
            self.line.clear();
            let limit = self.max_frame_size as u64 + 1;
            let n = (&mut self.reader)
                .take(limit)
                .read_until(b'\n', &mut self.line)?;
            if n == 0 {
                return Ok(None);
            }
            if self.line.len() > self.max_frame_size {
                return Err(CodecError::ObjectTooLarge);
            }
            if self.line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return serde_json::from_slice(&self.line)
                .map(Some)
                .map_err(super::json::json_error);
        }
    }
}
