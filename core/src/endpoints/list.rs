//! LIST of a collection (one namespace or all), as a list, a `Table` or a `PartialObjectMetadataList`.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};

use super::api::Endpoint;
use super::context::Context;
use super::encoded::{EncodedObjects, Form};
use super::output::{
    Output, Transform, encode_meta_document, encode_meta_json_document, finish, partial_metadata,
    prettify, respond,
};
use super::params::ListParams;
use super::table::{IncludeObject, table};
use crate::codec::MediaType;
use crate::meta::PartialObjectMetadataList;
use crate::registry::{ApiError, ListRequest, ObjectList, Store};
use crate::runtime::{ListWriter, Resource, ResourceCodec};
use crate::storage::StoredObject;

pub(super) async fn list<T: Resource>(endpoint: &Endpoint<T>, context: Context) -> Response {
    let result = async {
        let output = Output::negotiate(&context, false)?;
        let params = ListParams::parse(&context.params)?;
        let request = list_request::<T>(params, &context)?;
        if let Some(media_type) = output.encoded_media_type() {
            let list = endpoint
                .store
                .list_stored(context.namespace(), &request)
                .await?;
            return render_encoded_list(endpoint, &context, media_type, list);
        }
        let list = endpoint.store.list(context.namespace(), &request).await?;
        render_list(
            endpoint.store.codec(),
            &context,
            output,
            StatusCode::OK,
            &list,
        )
    }
    .await;
    finish(&context, result)
}

/// A list in the request's version, each item encoded once per stored revision and form and kept
/// ([`EncodedObjects`]): the bytes [`render_list`] makes, without decoding again, sent in pieces of at most
/// [`PIECE_BYTES`] as the items are encoded (as upstream 1.34's streaming encoders) so that no large list is ever
/// whole in memory. JSON items are encoded as
/// the socket takes them; protobuf's envelope states its length first, so its items are encoded (or found) before the
/// first piece, and only the copying is spread out.
fn render_encoded_list<T: Resource>(
    endpoint: &Endpoint<T>,
    context: &Context,
    media_type: MediaType,
    list: ObjectList<StoredObject>,
) -> Result<Response, ApiError> {
    let mut pieces = ListPieces {
        store: endpoint.store.clone(),
        encoded: endpoint.encoded.clone(),
        version: context.version().to_string(),
        api_version: endpoint
            .store
            .codec()
            .group_version(context.version())
            .api_version(),
        media_type,
        stored: list.items.into_iter(),
        ready: Vec::new().into_iter(),
        head: Vec::new(),
        writer: None,
    };
    // Protobuf's envelope states the list's length and CBOR's items array its count first: both are made of
    // every item encoded up front.
    let items = match media_type {
        MediaType::Protobuf | MediaType::Cbor => {
            let all: Vec<StoredObject> = pieces.stored.by_ref().collect();
            pieces.ready = pieces.encode(&all)?.into_iter();
            Some(pieces.ready.as_slice())
        }
        _ => None,
    };
    let writer = endpoint
        .store
        .codec()
        .start_list(
            &list.metadata,
            context.version(),
            media_type,
            items,
            &mut pieces.head,
        )
        .map_err(ApiError::internal)?;
    pieces.writer = Some(writer);
    // The first piece is made before answering, so that an item that cannot be encoded is still a `Status`;
    // later failures can only cut the stream, as upstream's.
    let first = pieces.next().transpose()?;
    let rest = futures::stream::iter(first.map(Ok).into_iter().chain(pieces))
        .map(|piece| piece.map_err(|err| std::io::Error::other(err.message)));
    let mut response = Response::new(Body::from_stream(rest));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(media_type.content_type()),
    );
    Ok(response)
}

/// What one piece of a streamed list holds at most (unless one item is larger), each allocated at its exact size.
/// Small enough for the allocator's reused size classes: with pieces of up to 1 MiB (a list of 2,000 pizzas in one),
/// the freed pieces of a thousand LISTs lingered in the allocator and the server's peak RSS rose 11-25 MiB more
/// (`apiserver-bench --lists 1000`), at the same CPU per LIST. A piece is one HTTP/2 frame to clients that read frames
/// of 64 KiB or more (Go's, 1 MiB since Go 1.24), and 16 KiB frames to those that keep the protocol's minimum.
const PIECE_BYTES: usize = 64 * 1024;
/// Items looked up or encoded together (one lock of the kept encodings each time).
const ITEMS_PER_STEP: usize = 256;
/// Room for what the list adds around an item (a protobuf tag and length, a JSON comma) and for its tail.
const FRAMING_BYTES: usize = 16;

/// The pieces of a streamed list: the head, then items as they are found or encoded, then the tail.
struct ListPieces<T: Resource> {
    store: Store<T>,
    encoded: Arc<EncodedObjects>,
    version: String,
    /// The served group and version: what kept encodings are looked up by (a resource may be served in two
    /// groups).
    api_version: String,
    media_type: MediaType,
    /// Items not encoded yet.
    stored: std::vec::IntoIter<StoredObject>,
    /// Items encoded, not written yet.
    ready: std::vec::IntoIter<Bytes>,
    /// The list's head, written into the first piece.
    head: Vec<u8>,
    /// `None` once the tail is written.
    writer: Option<ListWriter>,
}

impl<T: Resource> ListPieces<T> {
    fn encode(&self, items: &[StoredObject]) -> Result<Vec<Bytes>, ApiError> {
        let (store, version, media_type) = (&self.store, self.version.as_str(), self.media_type);
        self.encoded.encoded(
            items,
            &self.api_version,
            media_type,
            Form::ListItem,
            |stored| {
                store
                    .codec()
                    .encode_list_item(&store.decode(stored)?, version, media_type)
                    .map_err(ApiError::internal)
            },
        )
    }
}

impl<T: Resource> Iterator for ListPieces<T> {
    type Item = Result<Bytes, ApiError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut writer = self.writer.take()?;
        // The items of this piece, then the piece made at its exact size.
        let mut size = self.head.len() + FRAMING_BYTES;
        let mut items = Vec::new();
        while size < PIECE_BYTES {
            if self.ready.as_slice().is_empty() {
                let step: Vec<StoredObject> = self.stored.by_ref().take(ITEMS_PER_STEP).collect();
                if step.is_empty() {
                    break;
                }
                match self.encode(&step) {
                    Ok(encoded) => self.ready = encoded.into_iter(),
                    Err(err) => return Some(Err(err)),
                }
            }
            let Some(item) = self.ready.next() else { break };
            size += item.len() + FRAMING_BYTES;
            items.push(item);
        }
        let mut piece = Vec::with_capacity(size);
        piece.append(&mut self.head);
        for item in &items {
            writer.item(&mut piece, item);
        }
        if self.ready.as_slice().is_empty() && self.stored.as_slice().is_empty() {
            writer.finish(&mut piece);
        } else {
            self.writer = Some(writer);
        }
        Some(Ok(piece.into()))
    }
}

/// The registry's view of list options; a name in the path (watch of one object) becomes a field selector.
pub(super) fn list_request<T: Resource>(
    params: ListParams,
    context: &Context,
) -> Result<ListRequest, ApiError> {
    let mut field_selector = params.field_selector;
    if !context.name().is_empty() {
        field_selector = field_selector.and_equal("metadata.name", context.name());
    }
    Store::<T>::check_field_selector(&field_selector)?;
    Ok(ListRequest {
        label_selector: params.label_selector,
        field_selector,
        limit: params.limit,
        continue_token: params.continue_token,
        resource_version: params.resource_version,
        resource_version_match: params.resource_version_match,
        send_initial_events: params.send_initial_events,
        allow_watch_bookmarks: params.allow_watch_bookmarks,
    })
}

/// Encodes a list in the request's version and negotiated form.
pub(super) fn render_list<T: Resource>(
    codec: &ResourceCodec<T>,
    context: &Context,
    output: Output,
    code: StatusCode,
    list: &ObjectList<T>,
) -> Result<Response, ApiError> {
    output.check_transform(true, &format!("*{}.{}List", context.version(), T::KIND))?;
    let media_type = output.media_type;
    let body = match output.transform {
        Transform::None | Transform::PartialObjectMetadata => {
            let body = codec
                .encode_list(&list.metadata, &list.items, context.version(), media_type)
                .map_err(ApiError::internal)?;
            prettify(media_type, output.pretty, body)
        }
        Transform::PartialObjectMetadataList => {
            let partial = PartialObjectMetadataList {
                metadata: list.metadata.clone(),
                items: list
                    .items
                    .iter()
                    .map(|o| partial_metadata(o.metadata()))
                    .collect(),
            };
            encode_meta_document(&partial, "PartialObjectMetadataList", &output)?
        }
        Transform::Table => {
            let include = IncludeObject::parse(&context.params)?;
            let table = table(
                codec,
                context.version(),
                &list.items,
                list.metadata.clone(),
                include,
            )?;
            encode_meta_json_document(&table, &output)?
        }
    };
    Ok(respond(code, media_type, body))
}
