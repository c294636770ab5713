//! LIST of a collection (one namespace or all), as a list, a `Table` or a `PartialObjectMetadataList`.

use axum::response::Response;
use http::StatusCode;

use super::api::Endpoint;
use super::context::Context;
use super::encoded::Form;
use super::output::{
    Output, Transform, encode_document, encode_json_document, finish, partial_metadata, prettify,
    respond,
};
use super::params::ListParams;
use super::table::{IncludeObject, table};
use crate::codec::MediaType;
use crate::meta::PartialObjectMetadataList;
use crate::registry::{ApiError, ListRequest, ObjectList, Store};
use crate::runtime::{Resource, ResourceCodec};
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
            return render_encoded_list(endpoint, &context, media_type, &list);
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
/// ([`EncodedObjects`](super::encoded::EncodedObjects)): the bytes [`render_list`] makes, without decoding again.
fn render_encoded_list<T: Resource>(
    endpoint: &Endpoint<T>,
    context: &Context,
    media_type: MediaType,
    list: &ObjectList<StoredObject>,
) -> Result<Response, ApiError> {
    let store = &endpoint.store;
    let version = context.version();
    let api_version = store.codec().group_version(version).api_version();
    let items = endpoint.encoded.encoded(
        &list.items,
        &api_version,
        media_type,
        Form::ListItem,
        |stored| {
            store
                .codec()
                .encode_list_item(&store.decode(stored)?, version, media_type)
                .map_err(ApiError::internal)
        },
    )?;
    let body = store
        .codec()
        .encode_list_of_items(&list.metadata, &items, version, media_type)
        .map_err(ApiError::internal)?;
    Ok(respond(StatusCode::OK, media_type, body))
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
            encode_document(
                &partial,
                "meta.k8s.io/v1",
                "PartialObjectMetadataList",
                media_type,
                output.pretty,
            )?
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
            encode_json_document(&table, media_type, output.pretty)?
        }
    };
    Ok(respond(code, media_type, body))
}
