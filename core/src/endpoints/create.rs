//! POST: decode the body into the hub (defaults, conversion, field validation), mutating admission, then the
//! store's create (strategy, validation, validating admission, write). 201 with the created object.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;

use super::api::Endpoint;
use super::context::{Context, WriteOptions, codec_error};
use super::get::render_object;
use super::managed_fields::Tracking;
use super::output::finish;
use super::update::attributes;
use crate::admission::Operation;
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
        Tracking::new(endpoint.store.codec(), &context, false).update(None, &mut object)?;
        let mut attributes =
            attributes(endpoint.store.codec(), &context, Operation::Create, dry_run);
        attributes.name = object.metadata().name.clone();
        endpoint
            .admission
            .admit(&attributes, &mut object, None)
            .await?;
        let written = endpoint
            .store
            .create(
                context.namespace(),
                object,
                crate::registry::WriteOptions {
                    admission: &endpoint.admission.validating(&attributes),
                    dry_run,
                    ..Default::default()
                },
            )
            .await?;
        context.warn_all(&written.warnings);
        render_object(
            endpoint.store.codec(),
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
    // Decoding includes defaulting and conversion to the hub.
    let _span = crate::telemetry::step_span("Decode").entered();
    let decode = || {
        endpoint
            .store
            .codec()
            .decode(body, media_type, context.version(), validation)
    };
    let decoded = if body.len() > LARGE_BODY_BYTES {
        cpu_heavy(decode)
    } else {
        decode()
    }
    .map_err(decode_error)?;
    context.warn_all(&decoded.warnings);
    Ok(decoded.object)
}

/// Bodies from this size on are decoded with [`cpu_heavy`]: a body of several megabytes takes long enough to
/// hold up the other requests of its worker thread.
pub(super) const LARGE_BODY_BYTES: usize = 256 * 1024;

/// Runs CPU-heavy work so that the other tasks of this worker thread move to another worker meanwhile
/// (`block_in_place` on a multi-threaded runtime; inline on a current-thread one, which has no other worker).
pub(super) fn cpu_heavy<R>(work: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// A body that cannot become the endpoint's type: 400 with the codec's upstream text; fields its version's
/// defaults or conversion refused: 422 naming them.
pub(super) fn decode_error(err: DecodeError) -> ApiError {
    match err {
        DecodeError::Codec(e) => codec_error(e),
        DecodeError::Invalid { kind, name, errors } => ApiError::invalid(&kind, &name, &errors),
        other => ApiError::bad_request(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::cpu_heavy;

    #[test]
    fn cpu_heavy_work_runs_on_any_runtime() {
        assert_eq!(cpu_heavy(|| 1), 1);
        let current = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(current.block_on(async { cpu_heavy(|| 2) }), 2);
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        assert_eq!(
            multi.block_on(async { tokio::spawn(async { cpu_heavy(|| 3) }).await.unwrap() }),
            3
        );
    }
}
