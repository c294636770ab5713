//! POST: decode the body into the hub (defaults, conversion, field validation), mutating admission, then the
//! store's create (strategy, validation, validating admission, write). 201 with the created object.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;

use super::api::Endpoint;
use super::context::{Context, WriteOptions, codec_error};
use super::get::render_object;
use super::output::finish;
use crate::admission::{Attributes, Operation};
use crate::codec::{FieldValidation, MediaType};
use crate::registry::ApiError;
use crate::runtime::{DecodeError, Resource};

pub(super) async fn create<T: Resource>(
    endpoint: &Endpoint<T>,
    context: Context,
    body: Body,
) -> Response {
    let result = async {
        let WriteOptions {
            output,
            dry_run,
            validation,
        } = WriteOptions::parse(&context, "CreateOptions")?;
        let media_type = context.input_media_type()?;
        let body = context.read_body(body).await?;
        let mut object = decode_body(endpoint, &context, &body, media_type, validation)?;
        let attributes = Attributes::new::<T>(
            Operation::Create,
            context.version(),
            context.namespace().unwrap_or_default(),
            &object.metadata().name,
            dry_run,
            context.user.clone(),
        );
        endpoint.admission.admit(&attributes, &mut object).await?;
        let written = endpoint
            .store
            .create(
                context.namespace(),
                object,
                &endpoint.admission.validating(&attributes),
                dry_run,
            )
            .await?;
        context.warn_all(&written.warnings);
        render_object(
            endpoint,
            &context,
            output,
            StatusCode::CREATED,
            &written.object,
        )
    }
    .await;
    finish(&context, result)
}

/// Decodes a request body of the endpoint's version into the hub; field validation warnings become `Warning`
/// headers.
pub(super) fn decode_body<T: Resource>(
    endpoint: &Endpoint<T>,
    context: &Context,
    body: &Bytes,
    media_type: MediaType,
    validation: FieldValidation,
) -> Result<T, ApiError> {
    let decoded = endpoint
        .store
        .codec()
        .decode(body, media_type, context.version(), validation)
        .map_err(decode_error)?;
    context.warn_all(&decoded.warnings);
    Ok(decoded.object)
}

/// A body that cannot become the endpoint's type: 400 with the codec's upstream text.
pub(super) fn decode_error(err: DecodeError) -> ApiError {
    match err {
        DecodeError::Codec(e) => codec_error(e),
        other => ApiError::bad_request(other.to_string()),
    }
}
