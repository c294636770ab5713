//! WATCH (`?watch=1`): a stream of events, one JSON object per line or one length-prefixed protobuf frame each,
//! flushed as they happen; it ends on `timeoutSeconds`, on an ERROR event, or when the server drains.

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};

use super::api::Endpoint;
use super::context::{Context, codec_error};
use super::list::list_request;
use super::output::{
    Output, Transform, encode_document, encode_json_document, finish, partial_metadata,
};
use super::params::ListParams;
use super::table::{IncludeObject, table};
use crate::codec::{self, MediaType};
use crate::meta::{ListMeta, Status};
use crate::registry::{ApiError, WatchItem};
use crate::runtime::Resource;
use crate::storage::{EventType, INITIAL_EVENTS_END_ANNOTATION};

/// Upstream's `MinRequestTimeout` (1800 s): a watch without `timeoutSeconds` lasts between it and twice it.
const MIN_REQUEST_TIMEOUT: u64 = 1800;

pub(super) async fn watch<T: Resource>(endpoint: &Endpoint<T>, context: Context) -> Response {
    let result = start(endpoint, &context).await;
    finish(&context, result)
}

async fn start<T: Resource>(
    endpoint: &Endpoint<T>,
    context: &Context,
) -> Result<Response, ApiError> {
    let output = Output::negotiate(context, true)?;
    output.check_transform(true, &format!("*{}.{}List", context.version(), T::KIND))?;
    let params = ListParams::parse(&context.params)?;
    let timeout = match params.timeout_seconds {
        Some(seconds) if seconds > 0 => Duration::from_secs(seconds as u64),
        _ => {
            let jitter = (uuid::Uuid::new_v4().as_u128() % MIN_REQUEST_TIMEOUT as u128) as u64;
            Duration::from_secs(MIN_REQUEST_TIMEOUT + jitter)
        }
    };
    let request = list_request::<T>(params, context)?;
    let items = endpoint.store.watch(context.namespace(), &request).await?;

    let encoder = EventEncoder {
        codec: endpoint.store.codec().clone(),
        version: context.version().to_string(),
        output,
        include: IncludeObject::parse(&context.params)?,
    };
    // The stream stops after an ERROR event, as upstream's watch server does.
    let frames = items
        .scan(false, |ended, item| {
            let out = if *ended {
                None
            } else {
                *ended = matches!(item, WatchItem::Error(_));
                Some(item)
            };
            futures::future::ready(out)
        })
        .map(move |item| encoder.frame(item))
        .take_until(tokio::time::sleep(timeout));
    let body = match &context.shutdown {
        Some(shutdown) => Body::from_stream(shutdown.end_with_drain(frames)),
        None => Body::from_stream(frames),
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(output.media_type.watch_response_content_type()),
    );
    Ok(response)
}

/// Turns typed watch items into wire frames in one version and media type.
struct EventEncoder<T: Resource> {
    codec: crate::runtime::ResourceCodec<T>,
    version: String,
    output: Output,
    include: IncludeObject,
}

impl<T: Resource> EventEncoder<T> {
    fn frame(&self, item: WatchItem<T>) -> Result<Bytes, std::io::Error> {
        let (event_type, object) = match item {
            WatchItem::Object(kind, object) => (event_name(kind), self.object(&object)),
            WatchItem::Bookmark {
                resource_version,
                initial_events_end,
            } => {
                let mut object = T::default();
                let meta = object.metadata_mut();
                meta.resource_version = resource_version.to_string();
                if initial_events_end {
                    meta.annotations.insert(
                        INITIAL_EVENTS_END_ANNOTATION.to_string(),
                        "true".to_string(),
                    );
                }
                ("BOOKMARK", self.object(&object))
            }
            WatchItem::Error(err) => ("ERROR", self.status(&err)),
        };
        let object = object
            .or_else(|err| self.status(&err))
            .map_err(std::io::Error::other)?;
        let frame = match self.output.media_type {
            MediaType::Protobuf => codec::encode_protobuf_watch_frame(event_type, &object)
                .map_err(|e| std::io::Error::other(codec_error(e)))?,
            _ => codec::encode_json_watch_event(event_type, &object),
        };
        Ok(Bytes::from(frame))
    }

    fn object(&self, object: &T) -> Result<Vec<u8>, ApiError> {
        let media_type = self.output.media_type;
        match self.output.transform {
            Transform::Table => {
                let metadata = ListMeta {
                    resource_version: object.metadata().resource_version.clone(),
                    ..ListMeta::default()
                };
                let rows = if object.metadata().name.is_empty() {
                    &[][..]
                } else {
                    std::slice::from_ref(object)
                };
                let table = table(&self.codec, &self.version, rows, metadata, self.include)?;
                encode_json_document(&table, media_type, false)
            }
            Transform::PartialObjectMetadata | Transform::PartialObjectMetadataList => {
                encode_document(
                    &partial_metadata(object.metadata()),
                    "meta.k8s.io/v1",
                    "PartialObjectMetadata",
                    media_type,
                    false,
                )
            }
            Transform::None => self
                .codec
                .encode(object, &self.version, media_type)
                .map_err(ApiError::internal),
        }
    }

    fn status(&self, err: &ApiError) -> Result<Vec<u8>, ApiError> {
        encode_document(
            &Status::from(err),
            "v1",
            "Status",
            self.output.media_type,
            false,
        )
    }
}

fn event_name(kind: EventType) -> &'static str {
    match kind {
        EventType::Added => "ADDED",
        EventType::Modified => "MODIFIED",
        EventType::Deleted => "DELETED",
        EventType::Bookmark => "BOOKMARK",
        EventType::Error => "ERROR",
    }
}
