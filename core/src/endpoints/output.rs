//! Output negotiation and encoding: objects, lists, `Table` and `PartialObjectMetadata` transforms, and errors as
//! `Status` in the negotiated media type.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

use super::context::{Context, codec_error};
use crate::codec::{
    self, ConvertTarget, DefaultRestrictions, MediaType, Negotiated, ResourceRestrictions,
    negotiate_output, negotiate_output_stream,
};
use crate::meta::{PartialObjectMetadata, Status};
use crate::registry::ApiError;

/// What the client asked a response to be turned into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Transform {
    None,
    Table,
    PartialObjectMetadata,
    PartialObjectMetadataList,
}

/// The `apiVersion` of `meta.k8s.io` answers unless the client asks for `v=v1beta1`.
const META_V1: &str = "meta.k8s.io/v1";

/// The negotiated form of a response.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Output {
    pub media_type: MediaType,
    pub pretty: bool,
    pub transform: Transform,
    /// The `apiVersion` a transformed answer is written in: `meta.k8s.io/v1`, or `meta.k8s.io/v1beta1` when asked
    /// for (`g=meta.k8s.io;v=v1beta1`, still served upstream).
    pub meta_api_version: &'static str,
}

impl Output {
    /// Plain JSON: what errors use when negotiation itself failed.
    pub const JSON: Output = Output {
        media_type: MediaType::Json,
        pretty: false,
        transform: Transform::None,
        meta_api_version: META_V1,
    };

    /// Negotiates a response body (or a watch stream when `stream`).
    pub fn negotiate(context: &Context, stream: bool) -> Result<Output, ApiError> {
        let accept = context.header(header::ACCEPT);
        let restrictions = ResourceRestrictions { table: true };
        let negotiated = if stream {
            negotiate_output_stream(accept, &MediaType::ALL, &restrictions)
        } else {
            negotiate_output(accept, &MediaType::ALL, &restrictions)
        }
        .map_err(codec_error)?;
        Ok(Self::from_negotiated(&negotiated, context.params.pretty()))
    }

    fn from_negotiated(negotiated: &Negotiated, pretty: bool) -> Output {
        let transform = match negotiated
            .convert
            .as_ref()
            .map(|c: &ConvertTarget| c.kind.as_str())
        {
            Some("Table") => Transform::Table,
            Some("PartialObjectMetadata") => Transform::PartialObjectMetadata,
            Some("PartialObjectMetadataList") => Transform::PartialObjectMetadataList,
            _ => Transform::None,
        };
        let v1beta1 = negotiated
            .convert
            .as_ref()
            .is_some_and(|c| c.version == "v1beta1");
        Output {
            media_type: negotiated.media_type,
            pretty: pretty || negotiated.pretty,
            transform,
            meta_api_version: if v1beta1 {
                "meta.k8s.io/v1beta1"
            } else {
                META_V1
            },
        }
    }

    /// The output of an error response: negotiated without transformations, or JSON if nothing is left (upstream's
    /// `ErrorNegotiated` with `DefaultEndpointRestrictions`). A `Status` is never a `Table` or metadata, so an
    /// `Accept` of client-go's metadata client (`protobuf;as=PartialObjectMetadata..., application/json`) gets its
    /// errors in JSON, as from kube-apiserver.
    pub fn or_json(context: &Context) -> Output {
        negotiate_output(
            context.header(header::ACCEPT),
            &MediaType::ALL,
            &DefaultRestrictions,
        )
        .map(|negotiated| Self::from_negotiated(&negotiated, context.params.pretty()))
        .unwrap_or(Self::JSON)
    }

    /// The media type of an answer made of kept encoded objects ([`EncodedObjects`](super::encoded::EncodedObjects)):
    /// plain JSON, protobuf or CBOR objects, not transformed or indented.
    pub fn encoded_media_type(&self) -> Option<MediaType> {
        let plain = self.transform == Transform::None && !self.pretty;
        match self.media_type {
            MediaType::Json | MediaType::Protobuf | MediaType::Cbor if plain => {
                Some(self.media_type)
            }
            _ => None,
        }
    }

    /// Refuses a transform that does not fit the shape of the answer (upstream's 406 texts).
    pub fn check_transform(&self, is_list: bool, type_name: &str) -> Result<(), ApiError> {
        let refuse = |message: String| Err(ApiError::new(406, "NotAcceptable", message));
        match self.transform {
            Transform::PartialObjectMetadata if is_list => refuse(format!(
                "you requested PartialObjectMetadata, but the requested object is a list ({type_name})"
            )),
            Transform::PartialObjectMetadataList if !is_list => refuse(format!(
                "you requested PartialObjectMetadataList, but the requested object is not a list ({type_name})"
            )),
            _ => Ok(()),
        }
    }
}

/// A response body with its content type.
pub(crate) fn respond(code: StatusCode, media_type: MediaType, body: Vec<u8>) -> Response {
    respond_bytes(code, media_type, body.into())
}

/// A response body kept as bytes (shared, not copied) with its content type.
pub(crate) fn respond_bytes(
    code: StatusCode,
    media_type: MediaType,
    body: bytes::Bytes,
) -> Response {
    let mut response = (code, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(media_type.content_type()),
    );
    response
}

/// Re-indents a JSON body for `pretty=true`.
pub(crate) fn prettify(media_type: MediaType, pretty: bool, body: Vec<u8>) -> Vec<u8> {
    if !pretty || media_type != MediaType::Json {
        return body;
    }
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(value) => serde_json::to_vec_pretty(&value).unwrap_or(body),
        Err(_) => body,
    }
}

/// Encodes a self-describing document (one that writes its own `kind` and `apiVersion`: Status, Table,
/// PartialObjectMetadata...). Protobuf needs the kind and version for its envelope.
pub(crate) fn encode_document<T: Serialize + prost::Message>(
    value: &T,
    api_version: &str,
    kind: &str,
    media_type: MediaType,
    pretty: bool,
) -> Result<Vec<u8>, ApiError> {
    let encoded = match media_type {
        MediaType::Json if pretty => serde_json::to_vec_pretty(value).map_err(ApiError::internal),
        MediaType::Json => serde_json::to_vec(value).map_err(ApiError::internal),
        MediaType::Yaml => serde_saphyr::to_string(value)
            .map(String::into_bytes)
            .map_err(ApiError::internal),
        MediaType::Protobuf => {
            codec::encode_protobuf(api_version, kind, value).map_err(codec_error)
        }
        MediaType::Cbor => codec::encode_cbor_document(value).map_err(codec_error),
    }?;
    Ok(encoded)
}

/// Encodes a `meta.k8s.io` answer with a protobuf form (`PartialObjectMetadata` and its list) in the version the
/// client asked for.
pub(crate) fn encode_meta_document<T: Serialize + prost::Message>(
    value: &T,
    kind: &str,
    output: &Output,
) -> Result<Vec<u8>, ApiError> {
    match output.media_type {
        MediaType::Protobuf => encode_document(
            value,
            output.meta_api_version,
            kind,
            output.media_type,
            output.pretty,
        ),
        _ => encode_meta_json_document(value, output),
    }
}

/// Encodes a `meta.k8s.io` answer as [`encode_json_document`] does, in the version the client asked for: the
/// types write `meta.k8s.io/v1`, rewritten (in the answer and its items) for `v1beta1`.
pub(crate) fn encode_meta_json_document<T: Serialize>(
    value: &T,
    output: &Output,
) -> Result<Vec<u8>, ApiError> {
    let version = output.meta_api_version;
    if version == META_V1 {
        return encode_json_document(value, output.media_type, output.pretty);
    }
    let mut value = serde_json::to_value(value).map_err(ApiError::internal)?;
    let rewrite = |v: &mut serde_json::Value| {
        if v["apiVersion"] == META_V1 {
            v["apiVersion"] = version.into();
        }
    };
    rewrite(&mut value);
    if let Some(items) = value.get_mut("items").and_then(|i| i.as_array_mut()) {
        items.iter_mut().for_each(rewrite);
    }
    encode_json_document(&value, output.media_type, output.pretty)
}

/// Encodes a document without a protobuf form (Table has none upstream); CBOR carries it as it
/// carries JSON.
pub(crate) fn encode_json_document<T: Serialize>(
    value: &T,
    media_type: MediaType,
    pretty: bool,
) -> Result<Vec<u8>, ApiError> {
    match media_type {
        MediaType::Json if pretty => serde_json::to_vec_pretty(value).map_err(ApiError::internal),
        MediaType::Json => serde_json::to_vec(value).map_err(ApiError::internal),
        MediaType::Yaml => serde_saphyr::to_string(value)
            .map(String::into_bytes)
            .map_err(ApiError::internal),
        MediaType::Cbor => codec::encode_cbor_document(value).map_err(codec_error),
        MediaType::Protobuf => Err(ApiError::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml, application/cbor",
        )),
    }
}

/// The metadata-only view of an object.
pub(crate) fn partial_metadata(meta: &crate::meta::ObjectMeta) -> PartialObjectMetadata {
    PartialObjectMetadata {
        metadata: meta.clone(),
    }
}

/// An error as a `Status` in the negotiated media type (JSON if that cannot carry it).
pub(crate) fn error_response(err: &ApiError, output: Output) -> Response {
    let status = Status::from(err);
    let code = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let media_type = output.media_type;
    match encode_document(&status, "v1", "Status", media_type, output.pretty) {
        Ok(body) => respond(code, media_type, body),
        Err(_) => respond(
            code,
            MediaType::Json,
            serde_json::to_vec(&status).unwrap_or_default(),
        ),
    }
}

/// Answers a handler's result: its response, or its error as a `Status`.
pub(crate) fn finish(context: &Context, result: Result<Response, ApiError>) -> Response {
    match result {
        Ok(response) => response,
        Err(err) => error_response(&err, Output::or_json(context)),
    }
}
