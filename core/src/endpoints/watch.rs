//! WATCH (`?watch=1`): a stream of events, one JSON object per line or one length-prefixed protobuf frame each,
//! flushed as they happen; it ends on `timeoutSeconds`, on an ERROR event, or when the server drains.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::{HeaderValue, StatusCode, header};

use super::api::Endpoint;
use super::context::{Context, codec_error};
use super::list::list_request;
use super::output::{
    Output, Transform, encode_document, encode_meta_document, encode_meta_json_document, finish,
    partial_metadata,
};
use super::params::ListParams;
use super::table::{IncludeObject, table};
use crate::codec::{self, MediaType};
use crate::meta::{ListMeta, Status};
use crate::registry::{ApiError, ListRequest, Store, WatchItem};
use crate::runtime::{Resource, ResourceCodec};
use crate::storage::{EventType, INITIAL_EVENTS_END_ANNOTATION, WatchEvent};

/// Upstream's `MinRequestTimeout` (1800 s): a watch without `timeoutSeconds` lasts between it and twice it.
const MIN_REQUEST_TIMEOUT: u64 = 1800;

/// How long a watch lasts: `timeoutSeconds`; when absent or zero, random in [MinRequestTimeout,
/// 2×MinRequestTimeout] (upstream `ListResource`); when negative, not at all (upstream's
/// `context.WithTimeout` with a negative duration is done at once).
fn watch_timeout(timeout_seconds: Option<i64>) -> Duration {
    match timeout_seconds {
        Some(seconds) if seconds > 0 => Duration::from_secs(seconds as u64),
        Some(seconds) if seconds < 0 => Duration::ZERO,
        _ => {
            let jitter = (uuid::Uuid::new_v4().as_u128() % MIN_REQUEST_TIMEOUT as u128) as u64;
            Duration::from_secs(MIN_REQUEST_TIMEOUT + jitter)
        }
    }
}

pub(super) async fn watch<T: Resource>(endpoint: &Endpoint<T>, context: Context) -> Response {
    let result = start(endpoint, &context).await;
    finish(&context, result)
}

/// What a watch asks for, parsed the same way for stored and provided resources.
pub(super) struct WatchRequest {
    pub output: Output,
    pub include: IncludeObject,
    pub timeout: Duration,
    pub request: ListRequest,
}

impl WatchRequest {
    pub fn parse<T: Resource>(context: &Context) -> Result<Self, ApiError> {
        // A watch's objects are single objects: `as=PartialObjectMetadata` turns each event's object into one
        // (what client-go's metadata informers ask for), and `as=PartialObjectMetadataList` is not refused but
        // ends the stream at its first object (see `EventEncoder::ends_before`), both as upstream.
        let output = Output::negotiate(context, true)?;
        let params = ListParams::parse(&context.params)?;
        let timeout = watch_timeout(params.timeout_seconds);
        let include = IncludeObject::parse(&context.params)?;
        Ok(WatchRequest {
            output,
            include,
            timeout,
            request: list_request::<T>(params, context)?,
        })
    }

    /// Which events end the stream before they are sent. Upstream turns each event's object into the form asked
    /// for, and an object cannot become a `PartialObjectMetadataList`: its watch server then fails to encode the
    /// event and ends the stream, having sent nothing more (kube-apiserver 1.36: `200`, an empty body that ends at
    /// the first object or bookmark; ERROR events carry a `Status`, which is never transformed).
    fn ends_before(&self) -> impl Fn(EventType) -> bool + Send + Sync + 'static {
        let untransformable = self.output.transform == Transform::PartialObjectMetadataList;
        let bookmarks = self.request.allow_watch_bookmarks;
        move |event| {
            untransformable
                && match event {
                    EventType::Error => false,
                    EventType::Bookmark => bookmarks,
                    EventType::Added | EventType::Modified | EventType::Deleted => true,
                }
        }
    }

    fn encoder<T: Resource>(&self, codec: &ResourceCodec<T>, context: &Context) -> EventEncoder<T> {
        EventEncoder {
            codec: codec.clone(),
            version: context.version().to_string(),
            output: self.output,
            include: self.include,
            allow_bookmarks: self.request.allow_watch_bookmarks,
            table_headers_sent: AtomicBool::new(false),
        }
    }
}

async fn start<T: Resource>(
    endpoint: &Endpoint<T>,
    context: &Context,
) -> Result<Response, ApiError> {
    let watch = WatchRequest::parse::<T>(context)?;
    let events = endpoint
        .store
        .watch_events(context.namespace(), &watch.request)
        .await?;
    let ends_before = watch.ends_before();
    let stored = StoredFrames {
        store: endpoint.store.clone(),
        frames: endpoint.frames.clone(),
        encoder: watch.encoder(endpoint.store.codec(), context),
    };
    let frames = until_error(events, |event| event.event_type == EventType::Error)
        .take_while(move |event| futures::future::ready(!ends_before(event.event_type)))
        .filter_map(move |event| futures::future::ready(stored.frame(event)));
    Ok(stream::<T>(
        context,
        &watch,
        endpoint.store.codec().group(),
        frames,
    ))
}

/// Answers a watch with events from code (a provided resource): encoded, framed, timed and counted as a stored
/// resource's.
pub(super) fn respond_items<T: Resource>(
    context: &Context,
    watch: &WatchRequest,
    codec: &ResourceCodec<T>,
    items: impl Stream<Item = WatchItem<T>> + Send + 'static,
) -> Response {
    let encoder = watch.encoder(codec, context);
    let ends_before = watch.ends_before();
    let frames = until_error(items, |item| matches!(item, WatchItem::Error(_)))
        .take_while(move |item| futures::future::ready(!ends_before(item.event_type())))
        .filter_map(move |item| futures::future::ready(encoder.frame(item)));
    stream::<T>(context, watch, codec.group(), frames)
}

/// Ends a stream after its first error event, as upstream's watch server stops after an ERROR.
fn until_error<S: Stream>(
    events: S,
    is_error: impl Fn(&S::Item) -> bool,
) -> impl Stream<Item = S::Item> {
    events.scan(false, move |ended, event| {
        let out = if *ended {
            None
        } else {
            *ended = is_error(&event);
            Some(event)
        };
        futures::future::ready(out)
    })
}

/// The streamed response: frames until the timeout, the end of the events or the server's drain.
fn stream<T: Resource>(
    context: &Context,
    watch: &WatchRequest,
    group: &str,
    frames: impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
) -> Response {
    let timeout = watch.timeout;
    let counted = context
        .metrics
        .as_ref()
        .map(|m| m.watch_opened(group, context.version(), T::KIND));
    let frames = frames
        .inspect(move |frame| {
            if let (Some(series), Ok(frame)) = (&counted, frame) {
                series.sent(frame.len());
            }
        })
        .take_until(tokio::time::sleep(timeout));
    // A timeout already over (negative `timeoutSeconds`): upstream's watch context is done before the first
    // event, so the stream ends at once.
    let frames = frames.take_while(move |_| futures::future::ready(!timeout.is_zero()));
    let body = match &context.shutdown {
        Some(shutdown) => Body::from_stream(shutdown.end_with_drain(frames)),
        None => Body::from_stream(frames),
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(watch.output.media_type.watch_response_content_type()),
    );
    response
}

/// Stored events as frames: an object event's frame is encoded once and shared through the endpoint's
/// [`FrameCache`] by every watcher that receives it in the same form.
struct StoredFrames<T: Resource> {
    store: Store<T>,
    frames: Arc<FrameCache>,
    encoder: EventEncoder<T>,
}

impl<T: Resource> StoredFrames<T> {
    fn frame(&self, event: WatchEvent) -> Option<Result<Bytes, std::io::Error>> {
        let encoder = &self.encoder;
        let key = match event.event_type {
            EventType::Added | EventType::Modified | EventType::Deleted => Some(FrameKey {
                revision: event.revision,
                key: event.key.clone(),
                event: event.event_type,
                version: encoder.version.clone(),
                media_type: encoder.output.media_type,
                transform: encoder.output.transform,
                include: encoder.include,
                table_headers: encoder.next_table_headers(),
            }),
            _ => None,
        };
        if let Some(frame) = key.as_ref().and_then(|k| self.frames.get(k)) {
            if encoder.output.transform == Transform::Table {
                encoder.table_headers();
            }
            return Some(Ok(frame));
        }
        let frame = encoder.frame(self.store.watch_item(event, encoder.allow_bookmarks)?)?;
        if let (Some(key), Ok(frame)) = (key, &frame) {
            self.frames.insert(key, frame.clone());
        }
        Some(frame)
    }
}

/// Turns typed watch events into wire frames in one version and form.
struct EventEncoder<T: Resource> {
    codec: ResourceCodec<T>,
    version: String,
    output: Output,
    include: IncludeObject,
    allow_bookmarks: bool,
    /// Whether a `Table` with the column definitions went out: upstream sends them in a watcher's first event
    /// only, and `"columnDefinitions": null` after that.
    table_headers_sent: AtomicBool,
}

impl<T: Resource> EventEncoder<T> {
    /// Whether the next `Table` carries the column definitions (only the first does); the next one will not.
    fn table_headers(&self) -> bool {
        !self.table_headers_sent.swap(true, Ordering::Relaxed)
    }

    /// Whether the next object event would carry the column definitions, without deciding it.
    fn next_table_headers(&self) -> bool {
        self.output.transform == Transform::Table
            && !self.table_headers_sent.load(Ordering::Relaxed)
    }

    /// The frame of one event; `None` for a bookmark the watcher did not ask for.
    fn frame(&self, item: WatchItem<T>) -> Option<Result<Bytes, std::io::Error>> {
        Some(match item {
            WatchItem::Object(kind, object) => self.encode(event_name(kind), self.object(&object)),
            WatchItem::Bookmark { .. } if !self.allow_bookmarks => return None,
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
                self.encode("BOOKMARK", self.object(&object))
            }
            WatchItem::Error(err) => self.encode("ERROR", self.status(&err)),
        })
    }

    fn encode(
        &self,
        event_type: &str,
        object: Result<Vec<u8>, ApiError>,
    ) -> Result<Bytes, std::io::Error> {
        let object = object
            .or_else(|err| self.status(&err))
            .map_err(std::io::Error::other)?;
        let frame = match self.output.media_type {
            MediaType::Protobuf => codec::encode_protobuf_watch_frame(event_type, &object)
                .map_err(|e| std::io::Error::other(codec_error(e)))?,
            MediaType::Cbor => codec::encode_cbor_watch_event(event_type, &object),
            MediaType::Json | MediaType::Yaml => {
                codec::encode_json_watch_event(event_type, &object)
            }
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
                // A bookmark's object becomes a row too (an empty name), as upstream's.
                let rows = std::slice::from_ref(object);
                let table = table(&self.codec, &self.version, rows, metadata, self.include)?;
                let mut table = serde_json::to_value(&table).map_err(ApiError::internal)?;
                if !self.table_headers() {
                    table["columnDefinitions"] = serde_json::Value::Null;
                }
                encode_meta_json_document(&table, &self.output)
            }
            // A `PartialObjectMetadataList` watch ends before its first object (`WatchRequest::ends_before`).
            Transform::PartialObjectMetadata | Transform::PartialObjectMetadataList => {
                encode_meta_document(
                    &partial_metadata(object.metadata()),
                    "PartialObjectMetadata",
                    &self.output,
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

/// What identifies one encoded event frame: the change (revision, key, type) and the form it is written in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FrameKey {
    revision: u64,
    key: String,
    event: EventType,
    version: String,
    media_type: MediaType,
    transform: Transform,
    include: IncludeObject,
    /// A `Table` with its column definitions (a watcher's first event) or without.
    table_headers: bool,
}

/// The most recent encoded frames of one resource, so that a change fanned out to many watchers is decoded and
/// encoded once per form rather than once per watcher.
#[derive(Default)]
pub(crate) struct FrameCache {
    entries: Mutex<(HashMap<FrameKey, Bytes>, VecDeque<FrameKey>)>,
}

/// Frames kept: enough for every watcher to find the frames of the latest changes while they are being sent.
const FRAME_CACHE_ENTRIES: usize = 1024;

impl FrameCache {
    fn get(&self, key: &FrameKey) -> Option<Bytes> {
        self.entries.lock().ok()?.0.get(key).cloned()
    }

    fn insert(&self, key: FrameKey, frame: Bytes) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        let (map, order) = &mut *entries;
        if map.insert(key.clone(), frame).is_none() {
            order.push_back(key);
        }
        while order.len() > FRAME_CACHE_ENTRIES {
            if let Some(oldest) = order.pop_front() {
                map.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Probe finding D6: `timeoutSeconds=-1` kept a watch open forever; upstream's ends at once.
    #[test]
    fn watch_timeouts() {
        assert_eq!(watch_timeout(Some(-1)), Duration::ZERO);
        assert_eq!(watch_timeout(Some(5)), Duration::from_secs(5));
        for default in [watch_timeout(None), watch_timeout(Some(0))] {
            assert!(
                (MIN_REQUEST_TIMEOUT..2 * MIN_REQUEST_TIMEOUT).contains(&default.as_secs()),
                "{default:?}"
            );
        }
    }

    fn key(revision: u64) -> FrameKey {
        FrameKey {
            revision,
            key: "/registry/widgets/a".into(),
            event: EventType::Added,
            version: "v1".into(),
            media_type: MediaType::Json,
            transform: Transform::None,
            include: IncludeObject::Metadata,
            table_headers: false,
        }
    }

    #[test]
    fn frame_cache_keeps_the_latest_frames() {
        let cache = FrameCache::default();
        for revision in 0..(FRAME_CACHE_ENTRIES as u64 + 10) {
            cache.insert(key(revision), Bytes::from(revision.to_string()));
        }
        assert!(
            cache.get(&key(0)).is_none(),
            "the oldest frames are evicted"
        );
        let last = FRAME_CACHE_ENTRIES as u64 + 9;
        assert_eq!(cache.get(&key(last)), Some(Bytes::from(last.to_string())));
        let mut other_form = key(last);
        other_form.media_type = MediaType::Protobuf;
        assert!(
            cache.get(&other_form).is_none(),
            "each form has its own frame"
        );
    }
}
