//! Protobuf envelope and watch framing, checked against k8s-pb's upstream message definitions.

use apiserver::codec::{
    ApiVersionKind, CodecError, JsonWatchReader, PROTOBUF_MAGIC, ProtobufFrameReader,
    decode_protobuf, decode_protobuf_as, decode_protobuf_watch_event, decode_unknown, encode_json,
    encode_json_watch_event, encode_protobuf, encode_protobuf_raw, encode_protobuf_watch_event,
    encode_protobuf_watch_frame, write_protobuf_watch_frame,
};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use k8s_pb::apimachinery::pkg::runtime as pbrt;
use prost::Message;

#[derive(Clone, PartialEq, Message)]
struct PizzaPb {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(uint32, tag = "2")]
    size: u32,
    #[prost(string, repeated, tag = "3")]
    toppings: Vec<String>,
}

fn pizza() -> PizzaPb {
    PizzaPb {
        name: "margherita".into(),
        size: 3,
        toppings: vec!["tomato".into(), "mozzarella".into()],
    }
}

const AV: &str = "restaurant.example.com/v1";

#[test]
fn envelope_round_trip() {
    let bytes = encode_protobuf(AV, "Pizza", &pizza()).unwrap();
    assert_eq!(&bytes[..4], b"k8s\0");
    let (tm, p): (_, PizzaPb) = decode_protobuf_as(&bytes).unwrap();
    assert_eq!(tm, ApiVersionKind::new(AV, "Pizza"));
    assert_eq!(p, pizza());
    let (tm, raw) = decode_protobuf(&bytes).unwrap();
    assert_eq!(tm.kind, "Pizza");
    assert_eq!(raw, pizza().encode_to_vec());
    assert_eq!(encode_protobuf_raw(AV, "Pizza", &raw), bytes);
}

#[test]
fn envelope_matches_upstream_unknown_byte_for_byte() {
    let bytes = encode_protobuf(AV, "Pizza", &pizza()).unwrap();
    let unknown = pbrt::Unknown::decode(&bytes[4..]).unwrap();
    assert_eq!(
        unknown,
        pbrt::Unknown {
            type_meta: Some(pbrt::TypeMeta {
                api_version: Some(AV.into()),
                kind: Some("Pizza".into()),
            }),
            raw: Some(pizza().encode_to_vec()),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        }
    );
    // Go's gogo marshaller writes the empty contentEncoding/contentType fields; so do we.
    let mut expected = PROTOBUF_MAGIC.to_vec();
    expected.extend(unknown.encode_to_vec());
    assert_eq!(bytes, expected);
    // And our Unknown type reads upstream's bytes the same way.
    let ours = decode_unknown(&bytes).unwrap();
    assert_eq!(ours.encode_to_vec(), unknown.encode_to_vec());
}

#[test]
fn envelope_errors_read_like_upstream() {
    assert_eq!(decode_protobuf(b"").unwrap_err().to_string(), "empty data");
    assert_eq!(
        decode_protobuf(b"{}").unwrap_err().to_string(),
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    );
    assert_eq!(
        decode_protobuf(b"k8s\x01abc").unwrap_err().to_string(),
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    );
    assert_eq!(
        decode_protobuf(b"k8s\0").unwrap_err().to_string(),
        "empty body"
    );
    let bytes = encode_protobuf(AV, "Pizza", &pizza()).unwrap();
    let err = decode_protobuf(&bytes[..bytes.len() - 7]).unwrap_err();
    assert!(matches!(err, CodecError::Protobuf(_)), "{err}");
    assert_eq!(err.code(), 400);
    let tm = ApiVersionKind::new("v1", "");
    assert_eq!(
        tm.require_complete(tm.go_repr().as_bytes())
            .unwrap_err()
            .to_string(),
        r#"Object 'Kind' is missing in 'runtime.TypeMeta{APIVersion:"v1", Kind:""}'"#
    );
}

#[test]
fn protobuf_watch_frames_round_trip_and_match_upstream() {
    let object = encode_protobuf(AV, "Pizza", &pizza()).unwrap();
    let mut stream = Vec::new();
    write_protobuf_watch_frame(&mut stream, "ADDED", &object).unwrap();
    write_protobuf_watch_frame(&mut stream, "DELETED", &object).unwrap();
    stream.extend(encode_protobuf_watch_frame("BOOKMARK", b"").unwrap());

    // Frame = 4-byte big-endian length + raw WatchEvent (no k8s\0 envelope around the event).
    let len = u32::from_be_bytes(stream[..4].try_into().unwrap()) as usize;
    let event = pbmeta::WatchEvent::decode(&stream[4..4 + len]).unwrap();
    assert_eq!(event.r#type.as_deref(), Some("ADDED"));
    assert_eq!(event.object.unwrap().raw.unwrap(), object);
    assert_eq!(
        &stream[4..4 + len],
        encode_protobuf_watch_event("ADDED", &object).as_slice()
    );
    assert_eq!(
        pbmeta::WatchEvent {
            r#type: Some("ADDED".into()),
            object: Some(pbrt::RawExtension {
                raw: Some(object.clone())
            }),
        }
        .encode_to_vec(),
        stream[4..4 + len]
    );

    let mut reader = ProtobufFrameReader::new(stream.as_slice());
    let (t, obj) = reader.next_event().unwrap().unwrap();
    assert_eq!(t, "ADDED");
    let (_, p): (_, PizzaPb) = decode_protobuf_as(&obj).unwrap();
    assert_eq!(p, pizza());
    assert_eq!(reader.next_event().unwrap().unwrap().0, "DELETED");
    assert_eq!(
        reader.next_event().unwrap().unwrap(),
        ("BOOKMARK".to_string(), vec![])
    );
    assert!(reader.next_event().unwrap().is_none());
}

#[test]
fn frame_reader_rejects_truncated_and_oversize_frames() {
    let frame = encode_protobuf_watch_frame("ADDED", b"k8s\0xyz").unwrap();
    for cut in 1..frame.len() {
        let mut r = ProtobufFrameReader::new(&frame[..cut]);
        let err = r.next_frame().unwrap_err();
        assert!(matches!(err, CodecError::UnexpectedEof), "{cut}: {err}");
    }
    let huge = [0xff, 0xff, 0xff, 0xff, 1, 2, 3];
    let err = ProtobufFrameReader::new(&huge[..])
        .next_frame()
        .unwrap_err();
    assert!(matches!(err, CodecError::ObjectTooLarge));
    assert_eq!(
        err.to_string(),
        "object to decode was longer than maximum allowed size"
    );
    let mut small = ProtobufFrameReader::with_max_frame_size(frame.as_slice(), 3);
    assert!(matches!(
        small.next_frame().unwrap_err(),
        CodecError::ObjectTooLarge
    ));
    assert!(decode_protobuf_watch_event(&[0x0a, 0x05, b'A']).is_err());
}

#[test]
fn json_watch_events_are_lines() {
    #[derive(serde::Serialize)]
    struct Spec {
        size: u32,
    }
    let object = encode_json(AV, "Pizza", &Spec { size: 1 }).unwrap();
    let mut stream = encode_json_watch_event("ADDED", &object);
    assert_eq!(
        stream,
        br#"{"type":"ADDED","object":{"kind":"Pizza","apiVersion":"restaurant.example.com/v1","size":1}}
"#
    );
    stream.extend(encode_json_watch_event("MODIFIED", b"{\"a\":1}\n"));
    stream.extend(b"\n");
    let mut reader = JsonWatchReader::new(stream.as_slice());
    let e = reader.next_event().unwrap().unwrap();
    assert_eq!(e.event_type, "ADDED");
    assert_eq!(e.object["size"], 1);
    assert_eq!(reader.next_event().unwrap().unwrap().event_type, "MODIFIED");
    assert!(reader.next_event().unwrap().is_none());

    let err = JsonWatchReader::new(&b"{\"type\":\"ADDED\",\"obj"[..])
        .next_event()
        .unwrap_err();
    assert_eq!(err.code(), 400);
    let err = JsonWatchReader::with_max_frame_size(stream.as_slice(), 10)
        .next_event()
        .unwrap_err();
    assert!(matches!(err, CodecError::ObjectTooLarge));
}
