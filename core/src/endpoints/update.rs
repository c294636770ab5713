//! PUT: replace an object, with optimistic concurrency on `metadata.resourceVersion`. Mutating admission runs
//! inside the store's update loop, so it sees whether the object exists. 200, or 201 when PUT created it.

use async_trait::async_trait;
use axum::body::Body;
use axum::response::Response;
use http::StatusCode;

use super::api::Endpoint;
use super::context::{Context, WriteOptions};
use super::create::decode_body;
use super::get::render_object;
use super::managed_fields::Tracking;
use super::output::finish;
use std::sync::Arc;

use crate::admission::{AnyObject, Attributes, Chain, Operation};
use crate::registry::{ApiError, OPTIMISTIC_LOCK_ERROR_MSG, UpdatedObject};
use crate::runtime::{Resource, ResourceCodec};

pub(super) async fn update<T: Resource>(
    endpoint: &Endpoint<T>,
    context: Context,
    body: Body,
) -> Response {
    let result = async {
        let WriteOptions {
            output,
            dry_run,
            validation,
        } = WriteOptions::parse(&context, "UpdateOptions")?;
        let media_type = context.input_media_type()?;
        let body = context.read_body(body).await?;
        let object = decode_body(endpoint, &context, &body, media_type, validation)?;
        let attributes = attributes(endpoint.store.codec(), &context, Operation::Update, dry_run);
        let updated = Admitted {
            object,
            admission: &endpoint.admission,
            attributes: &attributes,
            tracking: Tracking::new(endpoint.store.codec(), &context, endpoint.store.is_status()),
        };
        let written = endpoint
            .store
            .update(
                context.namespace(),
                context.name(),
                &updated,
                crate::registry::WriteOptions {
                    admission: &endpoint.admission.validating(&attributes),
                    dry_run,
                    ..Default::default()
                },
            )
            .await?;
        context.warn_all(&written.warnings);
        let code = if written.created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        render_object(
            endpoint.store.codec(),
            &context,
            output,
            code,
            &written.object,
        )
    }
    .await;
    finish(&context, result)
}

/// The admission attributes of a write to the object named in the path: what plugins see of the request, with
/// its `Warning` headers, audit event and the resource's codec.
pub(super) fn attributes<T: Resource>(
    codec: &ResourceCodec<T>,
    context: &Context,
    operation: Operation,
    dry_run: bool,
) -> Attributes {
    let mut attributes = Attributes::new::<T>(
        operation,
        context.version(),
        context.namespace().unwrap_or_default(),
        context.name(),
        dry_run,
        context.user.clone(),
    );
    // The group the request named: a kind served in two groups is two resources to plugins, as upstream.
    attributes.kind = codec.group_version(context.version()).with_kind(T::KIND);
    attributes.resource = codec.group_resource();
    attributes.subresource = context.info.subresource.clone();
    attributes.audit = context.audit.clone();
    attributes.warnings = Some(context.warnings.clone());
    attributes.wire = Some(Arc::new(codec.clone()));
    attributes.field_manager = context.params.get("fieldManager").unwrap_or("").to_string();
    attributes
}

/// Runs mutating admission on an object as it is about to replace `current` (a create when there is none).
pub(super) async fn admit<T: Resource>(
    admission: &Chain,
    attributes: &Attributes,
    mut object: T,
    current: Option<&T>,
) -> Result<T, ApiError> {
    let mut attributes = attributes.clone();
    attributes.operation = if current.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    admission
        .admit(&attributes, &mut object, current.map(|c| c as &AnyObject))
        .await?;
    Ok(object)
}

/// A PUT body, with its managed fields and admitted against whatever is stored when the update is tried.
struct Admitted<'a, T: Resource> {
    object: T,
    admission: &'a Chain,
    attributes: &'a Attributes,
    tracking: Tracking<'a, T>,
}

#[async_trait]
impl<T: Resource> UpdatedObject<T> for Admitted<'_, T> {
    async fn updated(&self, current: Option<&T>) -> Result<T, ApiError> {
        // A stale resourceVersion fails in the store anyway: fail before the field manager's work.
        let requested = &self.object.metadata().resource_version;
        if let Some(current) = current
            && !requested.is_empty()
            && *requested != current.metadata().resource_version
        {
            return Err(ApiError::conflict(
                &self.attributes.resource,
                &current.metadata().name,
                OPTIMISTIC_LOCK_ERROR_MSG,
            ));
        }
        let mut object = self.object.clone();
        self.tracking.update(current, &mut object)?;
        admit(self.admission, self.attributes, object, current).await
    }
}
