//! The targets. Each takes the fuzzer's bytes; the first byte often selects a variant (format, version, kind,
//! verb), the rest is the input proper, sometimes split into fields at NUL bytes (see [`crate::fields`]).

use std::collections::BTreeMap;
use std::io::{BufReader, Cursor};
use std::sync::{Arc, OnceLock};

use apiserver::admission::{AdmissionOptions, Chain, Initializer, Plugins};
use apiserver::audit::Policy;
use apiserver::codec::{
    self, DefaultRestrictions, FieldValidation, JsonWatchReader, MediaType, ProtobufFrameReader,
    ResourceRestrictions,
};
use apiserver::endpoints::Api;
use apiserver::meta::ObjectMeta;
use apiserver::registry::{DefaultStrategy, Store};
use apiserver::request::RequestInfoFactory;
use apiserver::runtime::{Resource, ResourceCodec};
use apiserver::storage::{FieldSelector, LabelSelector, MemoryStorage, fields};
use apiserver::telemetry::TracingConfiguration;
use apiserver_cel::{Activation, Program};
use axum::body::Body;
use http::{Method, Request, Uri};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::restaurant::{Oven, Pizza, Topping};
use crate::{fields as split, text};

const GROUP: &str = "restaurant.programming-kubernetes.info";

fn codecs() -> &'static (
    ResourceCodec<Pizza>,
    ResourceCodec<Topping>,
    ResourceCodec<Oven>,
) {
    static CODECS: OnceLock<(
        ResourceCodec<Pizza>,
        ResourceCodec<Topping>,
        ResourceCodec<Oven>,
    )> = OnceLock::new();
    CODECS.get_or_init(|| (Pizza::codec(), Topping::codec(), Oven::codec()))
}

const FORMATS: [MediaType; 3] = [MediaType::Json, MediaType::Yaml, MediaType::Protobuf];
const VALIDATIONS: [FieldValidation; 3] = [
    FieldValidation::Strict,
    FieldValidation::Warn,
    FieldValidation::Ignore,
];

/// Decodes a body as the endpoint of one version would (format, field validation, type check, defaults,
/// conversion to the hub) and, when that succeeds, checks that encoding is a fixed point: the object encodes,
/// the encoding decodes strictly, and encodes again to the same bytes.
fn decode_round_trip<T: Resource>(
    codec: &ResourceCodec<T>,
    body: &[u8],
    format: MediaType,
    version: &str,
    validation: FieldValidation,
) {
    let Ok(decoded) = codec.decode(body, format, version, validation) else {
        return;
    };
    let encoded = codec
        .encode(&decoded.object, version, format)
        .expect("a decoded object encodes");
    let again = codec
        .decode(&encoded, format, version, FieldValidation::Strict)
        .unwrap_or_else(|e| panic!("the encoding of a decoded object decodes: {e}"));
    let encoded_again = codec
        .encode(&again.object, version, format)
        .expect("a decoded object encodes");
    assert_eq!(
        text(&encoded),
        text(&encoded_again),
        "decode(encode(x)) encodes as x"
    );
}

/// Request bodies of the served types: byte 0 selects the format (JSON, YAML, protobuf), the field validation,
/// the kind (Pizza, Topping, Oven) and the version; the rest is the body.
pub fn decode(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let format = FORMATS[(selector % 3) as usize];
    let validation = VALIDATIONS[((selector / 3) % 3) as usize];
    let alpha = (selector / 9) % 2 == 1;
    let version = if alpha { "v1alpha1" } else { "v1beta1" };
    let (pizzas, toppings, ovens) = codecs();
    match (selector / 18) % 3 {
        0 => decode_round_trip(pizzas, body, format, version, validation),
        1 => decode_round_trip(toppings, body, format, version, validation),
        _ => decode_round_trip(ovens, body, format, "v1beta1", validation),
    }
}

/// CBOR request bodies of the served types (`application/cbor`): byte 0 selects the field validation, the
/// version and the kind (Pizza, Topping, Oven), the rest is the body, decoded as the endpoint would and checked to
/// be a fixed point of encode/decode as [`decode`] does. The same bytes also go through the generic CBOR
/// functions: what transcodes to JSON is JSON, and that JSON encoded as CBOR transcodes back to the same value;
/// the type-meta peek and `ObjectMeta` decoding return rather than panic.
pub fn cbor(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let validation = VALIDATIONS[(selector % 3) as usize];
    let alpha = (selector / 3) % 2 == 1;
    let version = if alpha { "v1alpha1" } else { "v1beta1" };
    let (pizzas, toppings, ovens) = codecs();
    match (selector / 6) % 3 {
        0 => decode_round_trip(pizzas, body, MediaType::Cbor, version, validation),
        1 => decode_round_trip(toppings, body, MediaType::Cbor, version, validation),
        _ => decode_round_trip(ovens, body, MediaType::Cbor, "v1beta1", validation),
    }
    for input in [body, data] {
        if let Ok(json) = codec::cbor_to_json(input) {
            let value: Value = serde_json::from_slice(&json).expect("transcoded CBOR is JSON");
            let encoded =
                codec::encode_cbor_document(&value).expect("a JSON value encodes as CBOR");
            let again = codec::cbor_to_json(&encoded).expect("encoded CBOR transcodes");
            let again: Value = serde_json::from_slice(&again).expect("transcoded CBOR is JSON");
            assert_eq!(
                again, value,
                "CBOR of a JSON value transcodes to that value"
            );
        }
        let _ = codec::peek_cbor_type_meta(input);
        let _ = codec::decode_cbor::<ObjectMeta>(input, validation);
    }
}

/// The generic codec functions: JSON and YAML into `ObjectMeta` and into any JSON value under each field
/// validation, the type-meta peeks, and the protobuf envelope (which must re-encode to what it decoded).
pub fn codec(data: &[u8]) {
    for validation in VALIDATIONS {
        let _ = codec::decode_json::<ObjectMeta>(data, validation);
        let _ = codec::decode_yaml::<ObjectMeta>(data, validation);
        if let Ok(decoded) = codec::decode_json::<Value>(data, validation) {
            // What was decoded encodes, and decodes to the same value.
            let encoded = serde_json::to_vec(&decoded.object).expect("a JSON value encodes");
            let again = codec::decode_json::<Value>(&encoded, FieldValidation::Strict)
                .expect("an encoded JSON value decodes");
            assert_eq!(again.object, decoded.object);
        }
        if let Ok(decoded) = codec::decode_yaml::<Value>(data, validation) {
            let encoded = codec::encode_yaml("v1", "Any", &decoded.object);
            if let Ok(encoded) = encoded {
                let _ = codec::decode_yaml::<Value>(&encoded, FieldValidation::Ignore);
            }
        }
    }
    let _ = codec::peek_json_type_meta(data);
    let _ = codec::peek_yaml_type_meta(data);
    let _ = codec::yaml_to_json(data);
    let _ = codec::decode_unknown(data);
    if let Ok((type_meta, raw)) = codec::decode_protobuf(data) {
        let encoded = codec::encode_protobuf_raw(&type_meta.api_version, &type_meta.kind, &raw);
        let (type_meta_again, raw_again) =
            codec::decode_protobuf(&encoded).expect("a re-encoded envelope decodes");
        assert_eq!(type_meta, type_meta_again);
        assert_eq!(raw, raw_again);
    }
}

/// Watch streams as a client reads them: the JSON line reader and the protobuf frame reader (with a small frame
/// limit, so huge declared lengths are refused before allocating), and single protobuf events, which must
/// re-encode to what they decoded.
pub fn watch(data: &[u8]) {
    let mut json = JsonWatchReader::with_max_frame_size(BufReader::new(Cursor::new(data)), 4096);
    while let Ok(Some(event)) = json.next_event() {
        let object = serde_json::to_vec(&event.object).expect("a JSON value encodes");
        let line = codec::encode_json_watch_event(&event.event_type, &object);
        let mut reader = JsonWatchReader::new(line.as_slice());
        let again = reader
            .next_event()
            .expect("an encoded event decodes")
            .expect("an encoded event is an event");
        assert_eq!(again, event);
    }
    let mut frames = ProtobufFrameReader::with_max_frame_size(Cursor::new(data), 4096);
    while let Ok(Some(_)) = frames.next_event() {}
    if let Ok((event_type, object)) = codec::decode_protobuf_watch_event(data) {
        let encoded = codec::encode_protobuf_watch_event(&event_type, &object);
        let again = codec::decode_protobuf_watch_event(&encoded).expect("an encoded event decodes");
        assert_eq!(again, (event_type.clone(), object.clone()));
        let frame = codec::encode_protobuf_watch_frame(&event_type, &object).expect("a frame");
        let mut reader = ProtobufFrameReader::new(frame.as_slice());
        assert_eq!(
            reader.next_event().expect("a frame decodes"),
            Some((event_type, object))
        );
    }
}

/// Label and field selectors (`?labelSelector=`, `?fieldSelector=`): byte 0 selects which; a parsed selector
/// prints as text that parses to the same selector, and matching never fails.
pub fn selectors(data: &[u8]) {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    let input = text(input);
    let labels: BTreeMap<String, String> = [("app", "pizza"), ("tier", "2"), ("empty", "")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if selector % 2 == 0 {
        if let Ok(parsed) = LabelSelector::parse(&input) {
            let printed = parsed.to_string();
            let again = LabelSelector::parse(&printed)
                .unwrap_or_else(|e| panic!("{printed:?} (printed from {input:?}) parses: {e}"));
            assert_eq!(again.to_string(), printed);
            assert_eq!(again.matches(&labels), parsed.matches(&labels));
            let _ = parsed.requires_exact_match("app");
        }
    } else {
        if let Ok(parsed) = FieldSelector::parse(&input) {
            let printed = parsed.to_string();
            let again = FieldSelector::parse(&printed)
                .unwrap_or_else(|e| panic!("{printed:?} (printed from {input:?}) parses: {e}"));
            // The same terms; not necessarily in the same order: as upstream, parsing sorts the terms by their
            // text as written, and `==` prints as `=`.
            let terms = |s: &FieldSelector| {
                let mut terms: Vec<String> =
                    s.requirements().iter().map(|r| r.to_string()).collect();
                terms.sort();
                terms
            };
            assert_eq!(
                terms(&again),
                terms(&parsed),
                "{input:?} printed as {printed:?}"
            );
            assert_eq!(again.matches(&labels), parsed.matches(&labels));
            let _ = parsed.requires_exact_match("metadata.name");
        }
        if let Ok(value) = fields::unescape_value(&input) {
            assert_eq!(
                fields::unescape_value(&fields::escape_value(&value)).as_deref(),
                Ok(value.as_str())
            );
        }
    }
}

/// Continue tokens (`?continue=`): a token that decodes re-encodes to one that decodes the same.
pub fn continue_token(data: &[u8]) {
    const PREFIX: &str = "/registry/pizzas/";
    let token = text(data);
    if let Ok((key, rv)) = apiserver::storage::decode_continue(&token, PREFIX) {
        let encoded =
            apiserver::storage::encode_continue(&key, PREFIX, rv).expect("a decoded key encodes");
        let again =
            apiserver::storage::decode_continue(&encoded, PREFIX).expect("a token re-decodes");
        assert_eq!(again, (key, rv));
    }
}

const METHODS: [Method; 6] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
];

/// Request paths and queries into request info (the verb, namespace, resource, name, subresource and the
/// selectors of a query): byte 0 selects the method, the rest is the request target.
pub fn request_info(data: &[u8]) {
    let Some((&selector, target)) = data.split_first() else {
        return;
    };
    let method = &METHODS[selector as usize % METHODS.len()];
    let Ok(uri) = Uri::try_from(target) else {
        return;
    };
    let _ = RequestInfoFactory::default().parse(method, &uri);
}

/// `Accept` and `Content-Type` negotiation: the two headers are NUL-separated fields.
pub fn negotiate(data: &[u8]) {
    let parts = split(data, 2);
    let accept = text(parts[0]);
    let content_type = text(parts.get(1).copied().unwrap_or_default());
    let _ = codec::parse_accept(&accept);
    let _ = codec::parse_content_type(&content_type);
    for offered in [&MediaType::ALL[..], &FORMATS[..], &[MediaType::Json][..]] {
        let _ = codec::negotiate_output(Some(&accept), offered, &DefaultRestrictions);
        let _ = codec::negotiate_output(
            Some(&accept),
            offered,
            &ResourceRestrictions { table: true },
        );
        let _ = codec::negotiate_output_stream(Some(&accept), offered, &DefaultRestrictions);
        for streaming in [false, true] {
            let _ = codec::negotiate_input(Some(&content_type), offered, streaming);
        }
    }
}

/// An in-process server: pizzas, toppings and ovens over fresh memory storage, as the pizza server serves
/// them (without admission), answering one request at a time.
struct Server {
    runtime: tokio::runtime::Runtime,
}

impl Server {
    fn get() -> &'static Server {
        static SERVER: OnceLock<Server> = OnceLock::new();
        SERVER.get_or_init(|| Server {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime"),
        })
    }

    fn router(&self) -> axum::Router {
        let _guard = self.runtime.enter();
        let storage = Arc::new(MemoryStorage::new());
        let (pizzas, toppings, ovens) = codecs().clone();
        let store = || -> Arc<dyn apiserver::storage::Storage> { storage.clone() };
        Api::new(Chain::default())
            .resource(
                Store::new(
                    store(),
                    "/registry",
                    pizzas,
                    Arc::new(DefaultStrategy),
                    MediaType::Json,
                )
                .expect("a store"),
            )
            .resource(
                Store::new(
                    store(),
                    "/registry",
                    toppings,
                    Arc::new(DefaultStrategy),
                    MediaType::Protobuf,
                )
                .expect("a store"),
            )
            .resource(
                Store::new(
                    store(),
                    "/registry",
                    ovens,
                    Arc::new(DefaultStrategy),
                    MediaType::Json,
                )
                .expect("a store"),
            )
            .router()
    }

    /// Sends one request; the status code and the body. Watches are not sent (they wait for changes).
    fn send(&self, router: &axum::Router, request: Request<Body>) -> Option<(u16, Vec<u8>)> {
        let mut request = request;
        let info = RequestInfoFactory::default()
            .parse(request.method(), request.uri())
            .ok()?;
        if info.verb == "watch" {
            return None;
        }
        request.extensions_mut().insert(info);
        self.runtime.block_on(async {
            let response = router.clone().oneshot(request).await.ok()?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.ok()?.to_bytes();
            Some((status, body.to_vec()))
        })
    }
}

const PIZZAS: &str =
    "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/default/pizzas";
const BASE_PIZZA: &str = r#"{"apiVersion":"restaurant.programming-kubernetes.info/v1beta1","kind":"Pizza","metadata":{"name":"margherita","namespace":"default","labels":{"app":"pizza"},"annotations":{"a":"b"}},"spec":{"toppings":[{"name":"mozzarella","quantity":1},{"name":"tomato","quantity":2}]}}"#;

fn create_base(server: &Server, router: &axum::Router) {
    let request = Request::post(PIZZAS)
        .header("content-type", "application/json")
        .body(Body::from(BASE_PIZZA))
        .expect("a request");
    let (status, body) = server.send(router, request).expect("an answer");
    assert_eq!(status, 201, "{}", text(&body));
}

/// A server answers a client's mistakes with 4xx; a 5xx is a bug of ours, but for the ones upstream answers too
/// (recorded from kube-apiserver in examples/pizza/tests/fixtures/managed_fields): the 504 to a `resourceVersion`
/// newer than the storage's, and the 500 of an apply whose configuration does not fit the schema.
fn assert_not_server_error(what: &str, status: u16, body: &[u8]) {
    let upstream_500 = status == 500
        && String::from_utf8_lossy(body)
            .contains(r#""message":"failed to create typed patch object ("#);
    assert!(
        status < 500 || status == 504 || upstream_500,
        "{what}: {status} {}",
        String::from_utf8_lossy(body)
    );
}

/// Query parameters of get, list, delete, deletecollection, create and update (`resourceVersion`,
/// `resourceVersionMatch`, `limit`, `continue`, selectors, `timeoutSeconds`, `dryRun`, `fieldManager`,
/// `fieldValidation`, `propagationPolicy`, `gracePeriodSeconds`, ...): byte 0 selects the request, the rest
/// is the query string, sent to a server holding one pizza.
pub fn query(data: &[u8]) {
    let Some((&selector, query)) = data.split_first() else {
        return;
    };
    let Ok(query) = std::str::from_utf8(query) else {
        return;
    };
    let server = Server::get();
    let router = server.router();
    create_base(server, &router);
    let (method, path, body) = match selector % 6 {
        0 => (Method::GET, format!("{PIZZAS}/margherita"), ""),
        1 => (Method::GET, PIZZAS.to_string(), ""),
        2 => (Method::DELETE, format!("{PIZZAS}/margherita"), ""),
        3 => (Method::DELETE, PIZZAS.to_string(), ""),
        4 => (
            Method::POST,
            PIZZAS.to_string(),
            r#"{"metadata":{"name":"second"}}"#,
        ),
        _ => (Method::PUT, format!("{PIZZAS}/margherita"), BASE_PIZZA),
    };
    let Ok(uri) = Uri::try_from(format!("{path}?{query}")) else {
        return;
    };
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a request");
    if let Some((status, body)) = server.send(&router, request) {
        assert_not_server_error(query, status, &body);
    }
}

const PATCH_TYPES: [&str; 4] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// PATCH bodies: JSON patch, merge patch, strategic merge patch and server-side apply, applied to a fixed pizza.
/// Byte 0 selects the patch type, the version (v1beta1, v1alpha1), the status subresource, `force` and the field
/// validation; the rest is the patch.
pub fn patch(data: &[u8]) {
    let Some((&selector, patch)) = data.split_first() else {
        return;
    };
    let content_type = PATCH_TYPES[(selector % 4) as usize];
    let version = if (selector / 4) % 2 == 1 {
        "v1alpha1"
    } else {
        "v1beta1"
    };
    let subresource = if (selector / 8) % 2 == 1 {
        "/status"
    } else {
        ""
    };
    let force = if (selector / 16) % 2 == 1 && content_type.contains("apply") {
        "&force=true"
    } else {
        ""
    };
    let validation = VALIDATIONS[((selector / 32) % 3) as usize].as_str();
    let server = Server::get();
    let router = server.router();
    create_base(server, &router);
    let uri = format!(
        "/apis/{GROUP}/{version}/namespaces/default/pizzas/margherita{subresource}?fieldManager=fuzz&fieldValidation={validation}{force}"
    );
    let request = Request::patch(uri)
        .header("content-type", content_type)
        .body(Body::from(patch.to_vec()))
        .expect("a request");
    if let Some((status, body)) = server.send(&router, request) {
        assert_not_server_error(content_type, status, &body);
    }
}

/// Whole requests: byte 0 selects the method; then NUL-separated fields: the request target (path and query),
/// `Content-Type`, `Accept`, and the body (the rest), sent to a server holding one pizza.
pub fn request(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let parts = split(rest, 4);
    if parts.len() < 4 {
        return;
    }
    let method = METHODS[selector as usize % METHODS.len()].clone();
    let Ok(uri) = Uri::try_from(parts[0]) else {
        return;
    };
    let mut builder = Request::builder().method(method).uri(uri);
    if !parts[1].is_empty() {
        builder = builder.header("content-type", parts[1]);
    }
    if !parts[2].is_empty() {
        builder = builder.header("accept", parts[2]);
    }
    let Ok(request) = builder.body(Body::from(parts[3].to_vec())) else {
        return;
    };
    let server = Server::get();
    let router = server.router();
    create_base(server, &router);
    if let Some((status, body)) = server.send(&router, request) {
        assert_not_server_error("request", status, &body);
    }
}

/// CEL expressions (validation rules and admission policies): byte 0 selects a plain or a mutation expression;
/// the rest is the expression, compiled, cost-estimated and evaluated against a pizza with a small cost limit.
pub fn cel(data: &[u8]) {
    let Some((&selector, source)) = data.split_first() else {
        return;
    };
    let Ok(source) = std::str::from_utf8(source) else {
        return;
    };
    let program = if selector % 2 == 0 {
        Program::compile(source)
    } else {
        Program::compile_mutation(source)
    };
    let Ok(program) = program else {
        return;
    };
    let _ = program.estimate_cost(&[]);
    static ACTIVATION: OnceLock<Activation> = OnceLock::new();
    let activation = ACTIVATION.get_or_init(|| {
        let object: Value = serde_json::from_str(BASE_PIZZA).expect("the base pizza");
        let old = json!({"spec": {"toppings": [{"name": "salami", "quantity": 3}]}, "status": {"cost": 2.5}});
        Activation::new()
            .bind_json("object", &object)
            .bind_json("oldObject", &old)
            .bind_json("self", &object["spec"])
            .bind_json("oldSelf", &old["spec"])
            .bind_json("params", &json!({"max": 10, "names": ["a", "b"]}))
    });
    let _ = program.evaluate_with_limit(activation, 20_000);
}

/// Configuration files the server reads: byte 0 selects the audit policy, the tracing configuration, a
/// kubeconfig, or the admission control configuration; the rest is the file.
pub fn config(data: &[u8]) {
    let Some((&selector, file)) = data.split_first() else {
        return;
    };
    match selector % 4 {
        0 => {
            let _ = Policy::parse(file);
        }
        1 => {
            let _ = TracingConfiguration::parse(file);
        }
        2 => {
            if let Ok(text) = std::str::from_utf8(file) {
                let _ = kube::config::Kubeconfig::from_yaml(text);
            }
        }
        _ => {
            // The file is read from disk: one per process, rewritten for each input.
            let path = std::env::temp_dir().join(format!(
                "apiserver-fuzz-admission-{}.yaml",
                std::process::id()
            ));
            if std::fs::write(&path, file).is_ok() {
                let options = AdmissionOptions {
                    config_file: Some(path.clone()),
                    ..AdmissionOptions::default()
                };
                let _ = Plugins::new().build(&options, &Initializer::default());
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}
