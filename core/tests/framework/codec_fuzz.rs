//! Hostile input: random bytes, truncations, deep nesting, huge frame lengths. Every case must
//! end in `Ok` or `Err`, never a panic or a stack overflow.

use std::collections::BTreeMap;

use apiserver::codec::{
    FieldValidation, JsonWatchReader, MediaType, ProtobufFrameReader, ResourceRestrictions,
    cbor_to_json, decode_cbor, decode_json, decode_protobuf, decode_protobuf_as,
    decode_protobuf_watch_event, decode_yaml, encode_cbor, encode_cbor_watch_event, encode_json,
    encode_protobuf, encode_protobuf_watch_frame, encode_yaml, negotiate_input, negotiate_output,
    peek_cbor_type_meta, peek_json_type_meta, peek_yaml_type_meta,
};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Item {
    #[serde(default)]
    name: String,
    #[serde(default)]
    n: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Obj {
    #[serde(default)]
    items: Vec<Item>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    free: Option<serde_json::Value>,
    #[serde(default)]
    flag: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ObjPb {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(int64, repeated, tag = "2")]
    values: Vec<i64>,
}

fn all_decoders(data: &[u8]) {
    for v in [
        FieldValidation::Strict,
        FieldValidation::Warn,
        FieldValidation::Ignore,
    ] {
        let _ = decode_json::<Obj>(data, v);
        let _ = decode_json::<serde_json::Value>(data, v);
        let _ = decode_yaml::<Obj>(data, v);
        let _ = decode_cbor::<Obj>(data, v);
        let _ = decode_cbor::<serde_json::Value>(data, v);
    }
    // What the CBOR transcoder accepts is JSON.
    if let Ok(json) = cbor_to_json(data) {
        serde_json::from_slice::<serde_json::Value>(&json).expect("transcoded CBOR is JSON");
    }
    let _ = peek_cbor_type_meta(data);
    let _ = peek_json_type_meta(data);
    let _ = peek_yaml_type_meta(data);
    let _ = decode_protobuf(data);
    let _ = decode_protobuf_as::<ObjPb>(data);
    let _ = decode_protobuf_watch_event(data);
    let mut r = ProtobufFrameReader::new(data);
    while let Ok(Some(_)) = r.next_frame() {}
    let mut r = JsonWatchReader::new(data);
    while let Ok(Some(_)) = r.next_event() {}
}

/// Run in a thread with a small stack so that unbounded recursion fails here, not in production.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(4 * 1024 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .expect("decoder panicked");
}

#[test]
fn deeply_nested_json_and_yaml_are_errors() {
    on_small_stack(|| {
        for open in ["[", "{\"a\":", "{\"free\":"] {
            let deep = open.repeat(100_000);
            for v in [FieldValidation::Strict, FieldValidation::Ignore] {
                assert!(decode_json::<Obj>(deep.as_bytes(), v).is_err());
                assert!(decode_json::<serde_json::Value>(deep.as_bytes(), v).is_err());
                assert!(decode_yaml::<Obj>(deep.as_bytes(), v).is_err());
            }
            assert!(peek_json_type_meta(deep.as_bytes()).is_err());
        }
        // Balanced deep nesting inside a free-form field, with a duplicate to force the slow path.
        let deep = format!(
            "{{\"flag\":true,\"flag\":true,\"free\":{}1{}}}",
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert!(decode_json::<Obj>(deep.as_bytes(), FieldValidation::Warn).is_err());
        let yaml_block = "- ".repeat(100_000) + "x\n";
        assert!(decode_yaml::<Obj>(yaml_block.as_bytes(), FieldValidation::Warn).is_err());
        let yaml_map: String = (0..3000)
            .map(|i| format!("{}k:\n", " ".repeat(i)))
            .collect();
        assert!(decode_yaml::<Obj>(yaml_map.as_bytes(), FieldValidation::Warn).is_err());
        // Moderate nesting still works.
        let ok = format!("{{\"free\":{}1{}}}", "[".repeat(100), "]".repeat(100));
        assert!(decode_json::<Obj>(ok.as_bytes(), FieldValidation::Strict).is_ok());
        // CBOR: definite and indefinite arrays, maps and tags, 100,000 deep.
        for open in [&[0x81u8][..], &[0x9f], &[0xa1, 0x61, b'a'], &[0xd8, 0x30]] {
            let mut deep = open.repeat(100_000);
            deep.push(0x01);
            for v in [FieldValidation::Strict, FieldValidation::Ignore] {
                assert!(decode_cbor::<Obj>(&deep, v).is_err());
            }
            assert!(cbor_to_json(&deep).is_err());
        }
        // 100 levels inside a free-form field: as for JSON, fine.
        let mut ok = vec![0xa1, 0x64];
        ok.extend_from_slice(b"free");
        ok.extend(std::iter::repeat_n(0x81u8, 100));
        ok.push(0x01);
        assert!(decode_cbor::<Obj>(&ok, FieldValidation::Strict).is_ok());
    });
}

#[test]
fn huge_frame_lengths_do_not_allocate_or_panic() {
    for header in [
        [0xff; 4],
        [0x7f, 0xff, 0xff, 0xff],
        [0x01, 0x00, 0x00, 0x01],
    ] {
        let mut data = header.to_vec();
        data.extend_from_slice(b"short");
        assert!(
            ProtobufFrameReader::new(data.as_slice())
                .next_frame()
                .is_err()
        );
    }
    // Varint lengths inside the envelope that exceed the input.
    let mut data = b"k8s\0".to_vec();
    data.extend_from_slice(&[0x12, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2]);
    assert!(decode_protobuf(&data).is_err());
    assert!(decode_protobuf_watch_event(&data[4..]).is_err());
}

#[test]
fn truncations_of_valid_encodings_never_panic() {
    let obj = Obj {
        items: vec![
            Item {
                name: "a".into(),
                n: -1,
            },
            Item {
                name: "ü\"\\".into(),
                n: i64::MAX,
            },
        ],
        labels: [("k".to_string(), "v".to_string())].into(),
        free: Some(serde_json::json!({"x": [1.5, null, {"y": "z"}]})),
        flag: true,
    };
    let json = encode_json("g/v1", "Obj", &obj).unwrap();
    let yaml = encode_yaml("g/v1", "Obj", &obj).unwrap();
    let pb = encode_protobuf(
        "g/v1",
        "Obj",
        &ObjPb {
            name: "n".into(),
            values: vec![1, -2, 300],
        },
    )
    .unwrap();
    let frame = encode_protobuf_watch_frame("ADDED", &pb).unwrap();
    let cbor = encode_cbor("g/v1", "Obj", &obj).unwrap();
    let cbor_event = encode_cbor_watch_event("ADDED", &cbor);
    for data in [&json, &yaml, &pb, &frame, &cbor, &cbor_event] {
        for cut in 0..data.len() {
            all_decoders(&data[..cut]);
        }
    }
    assert_eq!(
        decode_json::<Obj>(&json, FieldValidation::Strict)
            .unwrap()
            .object,
        obj
    );
    assert_eq!(
        decode_yaml::<Obj>(&yaml, FieldValidation::Strict)
            .unwrap()
            .object,
        obj
    );
    assert_eq!(
        decode_cbor::<Obj>(&cbor, FieldValidation::Strict)
            .unwrap()
            .object,
        obj
    );
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "[a-z]{0,3}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::vec(
                (
                    prop_oneof![
                        "items|labels|free|flag|name|n|kind".prop_map(String::from),
                        "[a-z]{1,2}"
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(|kv| {
                // Written by hand below so that duplicate keys survive.
                serde_json::Value::Array(
                    kv.into_iter()
                        .map(|(k, v)| serde_json::json!({"__k": k, "__v": v}))
                        .collect(),
                )
            }),
        ]
    })
}

/// Renders a value as JSON text, turning the `__k`/`__v` marker arrays into objects that may
/// repeat keys.
fn render(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Array(items)
            if !items.is_empty() && items.iter().all(|i| i.get("__k").is_some()) =>
        {
            out.push('{');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(&item["__k"]).unwrap());
                out.push(':');
                render(&item["__v"], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..256)) {
        all_decoders(&data);
        let mut prefixed = b"k8s\0".to_vec();
        prefixed.extend_from_slice(&data);
        all_decoders(&prefixed);
        let mut tagged = vec![0xd9, 0xd9, 0xf7];
        tagged.extend_from_slice(&data);
        all_decoders(&tagged);
    }

    #[test]
    fn random_json_with_duplicates_never_panics(v in json_value()) {
        let mut text = String::new();
        render(&v, &mut text);
        all_decoders(text.as_bytes());
        // Ignore and Warn agree on the object; Strict fails exactly when Warn warns.
        let warn = decode_json::<Obj>(text.as_bytes(), FieldValidation::Warn);
        let ignore = decode_json::<Obj>(text.as_bytes(), FieldValidation::Ignore);
        let strict = decode_json::<Obj>(text.as_bytes(), FieldValidation::Strict);
        match (&warn, &ignore) {
            (Ok(w), Ok(i)) => {
                prop_assert_eq!(&w.object, &i.object);
                prop_assert_eq!(strict.is_ok(), w.warnings.is_empty());
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            _ => prop_assert!(false, "warn and ignore disagree on {}", text),
        }
    }

    #[test]
    fn random_headers_never_panic(s in "\\PC{0,64}") {
        let _ = negotiate_output(Some(&s), &MediaType::ALL, &ResourceRestrictions { table: true });
        let _ = negotiate_input(Some(&s), &MediaType::ALL, false);
    }

    #[test]
    fn json_round_trip(name in "\\PC{0,16}", n in any::<i64>(), flag in any::<bool>(),
                       labels in prop::collection::btree_map("[a-z./-]{1,8}", "\\PC{0,8}", 0..4)) {
        let obj = Obj { items: vec![Item { name, n }], labels, free: None, flag };
        let json = encode_json("g/v1", "Obj", &obj).unwrap();
        let back = decode_json::<Obj>(&json, FieldValidation::Strict).unwrap();
        prop_assert_eq!(&back.object, &obj);
        let yaml = encode_yaml("g/v1", "Obj", &obj).unwrap();
        let back = decode_yaml::<Obj>(&yaml, FieldValidation::Strict).unwrap();
        prop_assert_eq!(&back.object, &obj);
        let cbor = encode_cbor("g/v1", "Obj", &obj).unwrap();
        let back = decode_cbor::<Obj>(&cbor, FieldValidation::Strict).unwrap();
        prop_assert_eq!(&back.object, &obj);
        prop_assert_eq!(back.type_meta.kind, "Obj");
    }
}
