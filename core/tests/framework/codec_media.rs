//! Accept / Content-Type parsing and negotiation, with upstream's 406/415 texts.

use apiserver::codec::{
    CodecError, ConvertTarget, DefaultRestrictions, MediaType, ResourceRestrictions,
    negotiate_input, negotiate_output, negotiate_output_stream, parse_accept,
};

// CBOR comes last, as upstream lists it with `CBORServingAndStorage` on.
const NOT_ACCEPTABLE: &str = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor";
const UNSUPPORTED: &str = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor";
const STREAMS: &str = "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch, application/cbor-seq";

fn out(accept: &str) -> Result<apiserver::codec::Negotiated, CodecError> {
    negotiate_output(
        Some(accept),
        &MediaType::ALL,
        &ResourceRestrictions { table: true },
    )
}

#[test]
fn empty_or_absent_accept_means_json() {
    for accept in [None, Some("")] {
        let n = negotiate_output(accept, &MediaType::ALL, &DefaultRestrictions).unwrap();
        assert_eq!(n.media_type, MediaType::Json);
        assert!(n.convert.is_none());
    }
}

#[test]
fn plain_types_and_wildcards() {
    assert_eq!(out("application/yaml").unwrap().media_type, MediaType::Yaml);
    assert_eq!(
        out("application/vnd.kubernetes.protobuf")
            .unwrap()
            .media_type,
        MediaType::Protobuf
    );
    assert_eq!(out("*/*").unwrap().media_type, MediaType::Json);
    assert_eq!(out("*").unwrap().media_type, MediaType::Json);
    assert_eq!(out("application/*").unwrap().media_type, MediaType::Json);
    // kubectl's default: protobuf first, JSON as fallback.
    assert_eq!(
        out("application/vnd.kubernetes.protobuf, */*")
            .unwrap()
            .media_type,
        MediaType::Protobuf
    );
    assert_eq!(
        out("Application/JSON; charset=utf-8").unwrap().media_type,
        MediaType::Json
    );
    assert_eq!(
        out("application/json; charset=utf-8").unwrap().unrecognized,
        vec!["charset".to_string()]
    );
}

#[test]
fn quality_values_order_clauses() {
    assert_eq!(
        out("application/json;q=0.5, application/yaml")
            .unwrap()
            .media_type,
        MediaType::Yaml
    );
    assert_eq!(
        out("application/yaml;q=0.1, application/vnd.kubernetes.protobuf;q=0.9")
            .unwrap()
            .media_type,
        MediaType::Protobuf
    );
    // Concrete before wildcard at equal q.
    assert_eq!(
        out("*/*, application/yaml").unwrap().media_type,
        MediaType::Yaml
    );
    // q=0 means "not acceptable".
    assert_eq!(
        out("application/json;q=0, application/yaml;q=0.2")
            .unwrap()
            .media_type,
        MediaType::Yaml
    );
    assert_eq!(
        out("application/json;q=0").unwrap_err().to_string(),
        NOT_ACCEPTABLE
    );
    let clauses = parse_accept("text/html;q=0.2, application/json;as=Table;v=v1;g=meta.k8s.io");
    assert_eq!(clauses[0].subtype, "json");
    assert_eq!(clauses[0].param("as"), Some("Table"));
    assert_eq!(clauses[1].q, 0.2);
}

#[test]
fn table_transform_with_fallback() {
    let n = out("application/json;as=Table;v=v1;g=meta.k8s.io, application/json").unwrap();
    assert_eq!(n.media_type, MediaType::Json);
    assert_eq!(
        n.convert,
        Some(ConvertTarget {
            group: "meta.k8s.io".into(),
            version: "v1".into(),
            kind: "Table".into()
        })
    );
    // Without a table convertor the first clause is skipped and the fallback wins.
    let n = negotiate_output(
        Some("application/json;as=Table;v=v1;g=meta.k8s.io, application/json"),
        &MediaType::ALL,
        &ResourceRestrictions { table: false },
    )
    .unwrap();
    assert_eq!(n.media_type, MediaType::Json);
    assert!(n.convert.is_none());
    // Table is not offered as protobuf: falls through to JSON.
    let n = out(
        "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json;as=Table;v=v1beta1;g=meta.k8s.io",
    )
    .unwrap();
    assert_eq!(n.media_type, MediaType::Json);
    assert_eq!(n.convert.unwrap().version, "v1beta1");
    // Table without a fallback, not renderable: 406.
    let err = negotiate_output(
        Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
        &MediaType::ALL,
        &DefaultRestrictions,
    )
    .unwrap_err();
    assert_eq!(err.code(), 406);
    assert_eq!(err.reason(), "NotAcceptable");
    assert_eq!(err.to_string(), NOT_ACCEPTABLE);
    // Wrong group: refused.
    assert!(out("application/json;as=Table;v=v1;g=example.com").is_err());
}

#[test]
fn partial_object_metadata_in_any_media_type() {
    let n =
        out("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
            .unwrap();
    assert_eq!(n.media_type, MediaType::Protobuf);
    assert_eq!(n.convert.unwrap().kind, "PartialObjectMetadataList");
    let n = out("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1;pretty=1").unwrap();
    assert_eq!(n.convert.unwrap().kind, "PartialObjectMetadata");
    assert!(n.pretty);
    assert!(out("application/json;as=Pod;g=meta.k8s.io;v=v1").is_err());
}

#[test]
fn unknown_and_garbage_headers_are_406() {
    for accept in [
        "text/html",
        "garbage",
        "application",
        "a/b/c",
        ",,;;",
        " ",
        "image/*",
    ] {
        let err = out(accept).unwrap_err();
        assert_eq!(err.code(), 406, "{accept}");
        assert_eq!(err.to_string(), NOT_ACCEPTABLE, "{accept}");
    }
    // Offering fewer types lists fewer.
    let err =
        negotiate_output(Some("text/html"), &[MediaType::Json], &DefaultRestrictions).unwrap_err();
    assert_eq!(
        err.to_string(),
        "only the following media types are accepted: application/json"
    );
}

#[test]
fn watch_streams() {
    let n = negotiate_output_stream(
        Some("application/vnd.kubernetes.protobuf;stream=watch"),
        &MediaType::ALL,
        &DefaultRestrictions,
    )
    .unwrap();
    assert_eq!(n.media_type, MediaType::Protobuf);
    assert_eq!(n.stream.as_deref(), Some("watch"));
    assert_eq!(
        n.media_type.watch_response_content_type(),
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let n = negotiate_output_stream(None, &MediaType::ALL, &DefaultRestrictions).unwrap();
    assert_eq!(
        n.media_type.watch_response_content_type(),
        "application/json"
    );
    let err = negotiate_output_stream(
        Some("application/yaml"),
        &MediaType::ALL,
        &DefaultRestrictions,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("only the following media types are accepted: {STREAMS}")
    );
    // An unknown stream schema skips the clause.
    assert!(
        negotiate_output_stream(
            Some("application/json;stream=other"),
            &MediaType::ALL,
            &DefaultRestrictions
        )
        .is_err()
    );
    assert!(
        negotiate_output(
            Some("application/yaml;stream=watch"),
            &MediaType::ALL,
            &DefaultRestrictions
        )
        .is_err()
    );
}

#[test]
fn content_type_negotiation() {
    let offered = MediaType::ALL;
    assert_eq!(
        negotiate_input(None, &offered, false).unwrap(),
        MediaType::Json
    );
    assert_eq!(
        negotiate_input(Some(""), &offered, false).unwrap(),
        MediaType::Json
    );
    assert_eq!(
        negotiate_input(Some("application/json; charset=utf-8"), &offered, false).unwrap(),
        MediaType::Json
    );
    assert_eq!(
        negotiate_input(Some("APPLICATION/YAML"), &offered, false).unwrap(),
        MediaType::Yaml
    );
    assert_eq!(
        negotiate_input(Some("application/vnd.kubernetes.protobuf"), &offered, false).unwrap(),
        MediaType::Protobuf
    );
    for bad in [
        "text/plain",
        "application/merge-patch+json",
        "garbage",
        "application/json;;=",
        "application/",
    ] {
        let err = negotiate_input(Some(bad), &offered, false).unwrap_err();
        assert_eq!(err.code(), 415, "{bad}");
        assert_eq!(err.reason(), "UnsupportedMediaType");
        assert_eq!(err.to_string(), UNSUPPORTED, "{bad}");
    }
    let err = negotiate_input(Some("text/plain"), &offered, true).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the body of the request was in an unknown format - accepted media types include: {STREAMS}"
        )
    );
    // A type the endpoint does not offer is unsupported there.
    assert!(negotiate_input(Some("application/yaml"), &[MediaType::Json], false).is_err());
}

#[test]
fn cbor_is_negotiated_like_json() {
    // Objects, with q values, parameters and the transforms.
    assert_eq!(out("application/cbor").unwrap().media_type, MediaType::Cbor);
    assert_eq!(
        out("application/json;q=0.5, application/cbor")
            .unwrap()
            .media_type,
        MediaType::Cbor
    );
    assert_eq!(
        out("APPLICATION/CBOR;q=1").unwrap().media_type,
        MediaType::Cbor
    );
    // `*/*` keeps JSON first: CBOR is only served to a client that names it.
    assert_eq!(out("*/*").unwrap().media_type, MediaType::Json);
    let n = out("application/cbor;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").unwrap();
    assert_eq!(n.media_type, MediaType::Cbor);
    assert_eq!(n.convert.unwrap().kind, "PartialObjectMetadataList");
    // A Table in CBOR is served (upstream: JSON and YAML only); without a convertor it falls back.
    let n = out("application/cbor;as=Table;g=meta.k8s.io;v=v1, application/json").unwrap();
    assert_eq!(n.media_type, MediaType::Cbor);
    assert_eq!(n.convert.unwrap().kind, "Table");
    let n = negotiate_output(
        Some("application/cbor;as=Table;g=meta.k8s.io;v=v1, application/json"),
        &MediaType::ALL,
        &ResourceRestrictions { table: false },
    )
    .unwrap();
    assert_eq!(n.media_type, MediaType::Json);
    // `cbor-seq` is a stream type only: for a plain object it is not acceptable.
    assert_eq!(out("application/cbor-seq").unwrap_err().code(), 406);
    // Bodies.
    assert_eq!(
        negotiate_input(Some("application/cbor"), &MediaType::ALL, false).unwrap(),
        MediaType::Cbor
    );
    assert_eq!(
        negotiate_input(Some("application/cbor-seq"), &MediaType::ALL, false)
            .unwrap_err()
            .code(),
        415
    );
}

#[test]
fn cbor_watches_answer_as_a_cbor_sequence() {
    // What client-go sends (`application/cbor`), the `stream=watch` form, and `cbor-seq` itself.
    for accept in [
        "application/cbor",
        "application/cbor;stream=watch",
        "application/cbor-seq",
        "application/json;q=0.9, application/cbor-seq",
    ] {
        let n =
            negotiate_output_stream(Some(accept), &MediaType::ALL, &DefaultRestrictions).unwrap();
        assert_eq!(n.media_type, MediaType::Cbor, "{accept}");
        assert_eq!(
            n.media_type.watch_response_content_type(),
            "application/cbor-seq"
        );
    }
    assert!(!MediaType::Cbor.is_text());
    assert!(MediaType::Cbor.has_stream());
}
