//! DELETE of one object and of a collection (upstream `handlers/delete.go`). A removed object is answered with a
//! `Status` of success; one left in place (finalizers pending, a graceful deletion under way) with the object
//! itself, 200, or 202 when the request set `orphanDependents: false`, as upstream.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;

use super::api::Endpoint;
use super::context::{Context, codec_error};
use super::get::render_object;
use super::list::{list_request, render_list};
use super::output::{Output, encode_document, finish, respond};
use super::params::{ListParams, options_invalid};
use super::update::attributes;
use crate::admission::Operation;
use crate::codec::{self, MediaType};
use crate::meta::{DRY_RUN_ALL, DeleteOptions, ListMeta, Status, StatusDetails};
use crate::registry::{ApiError, DeletePreconditions, DeleteRequest, Deletion, ObjectList};
use crate::runtime::Resource;
use crate::validation::{ErrorList, FieldError, Path};

pub(super) async fn delete<T: Resource>(
    endpoint: &Endpoint<T>,
    context: Context,
    body: Body,
) -> Response {
    let result = async {
        let output = Output::negotiate(&context, false)?;
        let request = delete_options(&context, body).await?;
        let attributes = attributes(
            endpoint.store.codec(),
            &context,
            Operation::Delete,
            request.dry_run,
        );
        let deletion = endpoint
            .store
            .delete(
                context.namespace(),
                context.name(),
                &request,
                &endpoint.admission.validating(&attributes),
            )
            .await?;
        // Upstream: 202 only when the object stays and the client asked for cascading with orphanDependents=false.
        let code = if !deletion.deleted() && request.orphan_dependents == Some(false) {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        };
        // Upstream 1.38 (k/k#138724): a delete answers the resourceVersion at which the object was deleted, so
        // that a client can wait until its cache has seen the deletion.
        let deleted_at = match &deletion {
            Deletion::Deleted(object) => object.metadata().resource_version.clone(),
            _ => String::new(),
        };
        match deletion {
            Deletion::Pending(object) => {
                render_object(endpoint.store.codec(), &context, output, code, &object)
            }
            Deletion::Deleted(object) | Deletion::AlreadyPending(object) => {
                let status = Status {
                    metadata: ListMeta {
                        resource_version: deleted_at,
                        ..ListMeta::default()
                    },
                    details: Some(StatusDetails {
                        name: object.metadata().name.clone(),
                        group: endpoint.store.codec().group().to_string(),
                        kind: T::PLURAL.to_string(),
                        uid: object.metadata().uid.clone(),
                        ..StatusDetails::default()
                    }),
                    ..Status::success()
                };
                let body =
                    encode_document(&status, "v1", "Status", output.media_type, output.pretty)?;
                Ok(respond(code, output.media_type, body))
            }
        }
    }
    .await;
    finish(&context, result)
}

/// Deletes every object the selectors match, one by one with the same options (not atomic, as upstream), and
/// answers the list of objects as each delete left them.
pub(super) async fn delete_collection<T: Resource>(
    endpoint: &Endpoint<T>,
    context: Context,
    body: Body,
) -> Response {
    let result = async {
        let output = Output::negotiate(&context, false)?;
        let request = delete_options(&context, body).await?;
        let mut params = ListParams::parse(&context.params)?;
        params.limit = 0;
        params.continue_token = None;
        let list_options = list_request::<T>(params, &context)?;
        let list = endpoint
            .store
            .list(context.namespace(), &list_options)
            .await?;
        let mut deleted = ObjectList {
            metadata: list.metadata.clone(),
            items: Vec::new(),
        };
        for object in list.items {
            let meta = object.metadata();
            let mut attributes = attributes(
                endpoint.store.codec(),
                &context,
                Operation::Delete,
                request.dry_run,
            );
            attributes.name = meta.name.clone();
            let namespace = Some(meta.namespace.as_str()).filter(|ns| !ns.is_empty());
            match endpoint
                .store
                .delete(
                    namespace,
                    &meta.name,
                    &request,
                    &endpoint.admission.validating(&attributes),
                )
                .await
            {
                Ok(deletion) => deleted.items.push(deletion.object().clone()),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        render_list(
            endpoint.store.codec(),
            &context,
            output,
            StatusCode::OK,
            &deleted,
        )
    }
    .await;
    finish(&context, result)
}

/// What a delete request asks: the body's `DeleteOptions` with the query's parameters over it.
async fn delete_options(context: &Context, body: Body) -> Result<DeleteRequest, ApiError> {
    let body = context.read_body(body).await?;
    let mut options = decode_delete_options(context, &body)?;
    if let Some(grace) = context.params.int("gracePeriodSeconds")? {
        options.grace_period_seconds = Some(grace);
    }
    if let Some(policy) = context.params.get("propagationPolicy") {
        options.propagation_policy = Some(policy.to_string());
    }
    if let Some(orphan) = context.params.bool("orphanDependents")? {
        options.orphan_dependents = Some(orphan);
    }
    let query_dry_run = context.params.dry_run("DeleteOptions")?;
    let mut errors = ErrorList::new();
    for value in &options.dry_run {
        if value != DRY_RUN_ALL {
            errors.push(FieldError::not_supported(
                Path::new("dryRun"),
                value.as_str(),
                &[DRY_RUN_ALL],
            ));
        }
    }
    if let Some(policy) = &options.propagation_policy
        && !matches!(
            policy.as_str(),
            DeleteOptions::PROPAGATION_FOREGROUND
                | DeleteOptions::PROPAGATION_BACKGROUND
                | DeleteOptions::PROPAGATION_ORPHAN
        )
    {
        errors.push(FieldError::not_supported(
            Path::new("propagationPolicy"),
            policy.as_str(),
            &["Foreground", "Background", "Orphan"],
        ));
    }
    if options.orphan_dependents.is_some() && options.propagation_policy.is_some() {
        errors.push(FieldError::invalid(
            Path::new("propagationPolicy"),
            options.propagation_policy.as_deref().unwrap_or_default(),
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if !errors.is_empty() {
        return Err(options_invalid("DeleteOptions", &errors));
    }
    let preconditions = options.preconditions.unwrap_or_default();
    Ok(DeleteRequest {
        preconditions: DeletePreconditions {
            uid: preconditions.uid,
            resource_version: preconditions.resource_version,
        },
        grace_period_seconds: options.grace_period_seconds,
        orphan_dependents: options.orphan_dependents,
        propagation_policy: options.propagation_policy,
        dry_run: query_dry_run || !options.dry_run.is_empty(),
    })
}

/// The optional `DeleteOptions` body, in JSON, YAML, protobuf or CBOR.
fn decode_delete_options(context: &Context, body: &Bytes) -> Result<DeleteOptions, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(DeleteOptions::default());
    }
    let bad = |e: String| ApiError::bad_request(e);
    let json = match context.input_media_type()? {
        MediaType::Protobuf => {
            let (type_meta, raw) = codec::decode_protobuf(body).map_err(codec_error)?;
            check_options_kind(&type_meta.api_version, &type_meta.kind)?;
            return <DeleteOptions as prost::Message>::decode(raw.as_slice())
                .map_err(|e| bad(e.to_string()));
        }
        MediaType::Yaml => codec::yaml_to_json(body).map_err(codec_error)?.0,
        MediaType::Cbor => codec::cbor_to_json(body).map_err(codec_error)?,
        MediaType::Json => body.to_vec(),
    };
    let value: serde_json::Value = serde_json::from_slice(&json).map_err(|e| bad(e.to_string()))?;
    let text = |field: &str| {
        value
            .get(field)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
    };
    check_options_kind(text("apiVersion"), text("kind"))?;
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

/// A body of another kind is not options (kube-apiserver 1.36 refuses a `Pizza` sent as the body of a DELETE with
/// this text; `DeleteOptions` of any group version, or of none, is taken).
fn check_options_kind(api_version: &str, kind: &str) -> Result<(), ApiError> {
    if kind.is_empty() || kind == "DeleteOptions" {
        return Ok(());
    }
    let version = if api_version.is_empty() {
        "meta.k8s.io/v1"
    } else {
        api_version
    };
    Err(ApiError::bad_request(format!(
        "no kind \"{kind}\" is registered for version \"{version}\" in scheme \"pkg/apis/meta/internalversion/scheme/register.go:27\""
    )))
}
