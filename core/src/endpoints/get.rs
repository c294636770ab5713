//! GET of one object, and the rendering of one object that every verb's answer shares.

use axum::response::Response;
use http::StatusCode;

use super::api::Endpoint;
use super::context::Context;
use super::encoded::Form;
use super::output::{
    Output, Transform, encode_meta_document, encode_meta_json_document, finish, partial_metadata,
    prettify, respond, respond_bytes,
};
use super::table::{IncludeObject, table};
use crate::meta::ListMeta;
use crate::registry::ApiError;
use crate::runtime::{Resource, ResourceCodec};

pub(super) async fn get<T: Resource>(endpoint: &Endpoint<T>, context: Context) -> Response {
    let result = async {
        let output = Output::negotiate(&context, false)?;
        let resource_version = context.params.resource_version()?;
        if let Some(media_type) = output.encoded_media_type() {
            let stored = endpoint
                .store
                .get_stored(context.namespace(), context.name(), resource_version)
                .await?;
            let _span = crate::telemetry::step_span("SerializeObject").entered();
            let store = &endpoint.store;
            let version = context.version();
            let api_version = store.codec().group_version(version).api_version();
            let body = endpoint.encoded.encoded(
                std::slice::from_ref(&stored),
                &api_version,
                media_type,
                Form::Object,
                |stored| {
                    store
                        .codec()
                        .encode(&store.decode(stored)?, version, media_type)
                        .map_err(ApiError::internal)
                },
            )?;
            let body = body.into_iter().next().unwrap_or_default();
            return Ok(respond_bytes(StatusCode::OK, media_type, body));
        }
        let object = endpoint
            .store
            .get(context.namespace(), context.name(), resource_version)
            .await?;
        render_object(
            endpoint.store.codec(),
            &context,
            output,
            StatusCode::OK,
            &object,
        )
    }
    .await;
    finish(&context, result)
}

/// Encodes one object in the request's version and negotiated form.
pub(super) fn render_object<T: Resource>(
    codec: &ResourceCodec<T>,
    context: &Context,
    output: Output,
    code: StatusCode,
    object: &T,
) -> Result<Response, ApiError> {
    // upstream's span for encoding a response (conversion from the hub included).
    let _span = crate::telemetry::step_span("SerializeObject").entered();
    output.check_transform(false, &format!("*{}.{}", context.version(), T::KIND))?;
    let media_type = output.media_type;
    let body = match output.transform {
        Transform::None | Transform::PartialObjectMetadataList => {
            let body = codec
                .encode(object, context.version(), media_type)
                .map_err(ApiError::internal)?;
            prettify(media_type, output.pretty, body)
        }
        Transform::PartialObjectMetadata => encode_meta_document(
            &partial_metadata(object.metadata()),
            "PartialObjectMetadata",
            &output,
        )?,
        Transform::Table => {
            let include = IncludeObject::parse(&context.params)?;
            let metadata = ListMeta {
                resource_version: object.metadata().resource_version.clone(),
                ..ListMeta::default()
            };
            let table = table(
                codec,
                context.version(),
                std::slice::from_ref(object),
                metadata,
                include,
            )?;
            encode_meta_json_document(&table, &output)?
        }
    };
    Ok(respond(code, media_type, body))
}
