//! The `scale` subresource (`autoscaling/v1` `Scale`), as upstream serves it for a CRD that declares one: the
//! replicas read from and written to the object at the type's declared JSON paths, in the request's version, so
//! that `kubectl scale` and autoscalers work on it. GET, PUT (with the Scale's `resourceVersion` as precondition)
//! and PATCH (JSON, merge and strategic merge patches of the Scale).

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::response::Response;
use http::{StatusCode, header};
use serde_json::{Value, json};

use super::api::{ResourceEndpoint, Verb};
use super::context::{Context, WriteOptions, codec_error};
use super::output::{finish, respond};
use super::table::json_path;
use super::update::{admit, attributes};
use crate::admission::{Chain, Operation};
use crate::codec::{self, MediaType, parse_content_type};
use crate::registry::{ApiError, Store, UpdatedObject};
use crate::runtime::GroupKind;
use crate::runtime::json_patch::JsonPatch;
use crate::runtime::{KindDescription, Resource, ScalePaths};
use crate::server::status::method_not_allowed;
use crate::validation::{FieldError, Path};

/// The `scale` subresource of one resource.
pub(crate) struct ScaleEndpoint<T: Resource> {
    pub store: Store<T>,
    pub admission: Arc<Chain>,
    pub paths: ScalePaths,
}

/// Sets the value at a JSON path, making the objects on the way.
fn write_path(value: &mut Value, path: &str, new: Value) {
    let keys: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut at = value;
    for key in &keys[..keys.len() - 1] {
        if !at.get(*key).is_some_and(Value::is_object) {
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
    at[keys[keys.len() - 1]] = new;
}

impl<T: Resource> ScaleEndpoint<T> {
    fn to_value(&self, object: &T, version: &str) -> Result<Value, ApiError> {
        self.store
            .codec()
            .encode_value(object, version)
            .map_err(ApiError::internal)
    }

    /// The object's Scale.
    fn scale(&self, object: &T, version: &str) -> Result<Value, ApiError> {
        let value = self.to_value(object, version)?;
        let replicas = |path: &str| json_path(&value, path).and_then(Value::as_i64).unwrap_or(0);
        let meta = object.metadata();
        let mut metadata = json!({
            "name": meta.name,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
            "creationTimestamp": meta.creation_timestamp,
        });
        if !meta.namespace.is_empty() {
            metadata["namespace"] = json!(meta.namespace);
        }
        let mut spec = json!({});
        let desired = replicas(self.paths.spec_replicas);
        if desired != 0 {
            spec["replicas"] = json!(desired);
        }
        let mut status = json!({ "replicas": replicas(self.paths.status_replicas) });
        if !self.paths.label_selector.is_empty()
            && let Some(selector) =
                json_path(&value, self.paths.label_selector).and_then(Value::as_str)
            && !selector.is_empty()
        {
            status["selector"] = json!(selector);
        }
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": metadata,
            "spec": spec,
            "status": status,
        }))
    }

    fn answer(&self, code: StatusCode, scale: &Value) -> Result<Response, ApiError> {
        Ok(respond(
            code,
            MediaType::Json,
            serde_json::to_vec(scale).map_err(ApiError::internal)?,
        ))
    }

    async fn get(&self, context: &Context) -> Result<Response, ApiError> {
        let object = self
            .store
            .get(
                context.namespace(),
                context.name(),
                context.params.resource_version()?,
            )
            .await?;
        self.answer(StatusCode::OK, &self.scale(&object, context.version())?)
    }

    async fn write(
        &self,
        context: &Context,
        change: ScaleChange,
        body: Body,
    ) -> Result<Response, ApiError> {
        let options = if change == ScaleChange::Replace {
            "UpdateOptions"
        } else {
            "PatchOptions"
        };
        let WriteOptions { dry_run, .. } = WriteOptions::parse(context, options)?;
        let body = context.read_body(body).await?;
        let change = match change {
            // A CBOR Scale (what a client that prefers CBOR sends) is read as its JSON; the answer stays JSON.
            ScaleChange::Replace if context.input_media_type().ok() == Some(MediaType::Cbor) => {
                let json = codec::cbor_to_json(&body).map_err(codec_error)?;
                let scale = serde_json::from_slice(&json)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                check_replacement(&scale, context)?;
                Change::Replace(scale)
            }
            ScaleChange::Replace => {
                let scale = serde_json::from_slice(&body)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                check_replacement(&scale, context)?;
                Change::Replace(scale)
            }
            ScaleChange::Patch => Change::Patch(
                patch_kind(context.header(header::CONTENT_TYPE))?,
                body.to_vec(),
            ),
        };
        let attributes = attributes(self.store.codec(), context, Operation::Update, dry_run);
        let scaled = Scaled {
            endpoint: self,
            version: context.version(),
            name: context.name(),
            change,
            admission: &self.admission,
            attributes: &attributes,
        };
        let written = self
            .store
            .update(
                context.namespace(),
                context.name(),
                &scaled,
                crate::registry::WriteOptions {
                    admission: &self.admission.validating(&attributes),
                    dry_run,
                    ..Default::default()
                },
            )
            .await?;
        self.answer(
            StatusCode::OK,
            &self.scale(&written.object, context.version())?,
        )
    }
}

/// What upstream checks of a PUT's Scale before the update, with kube-apiserver 1.36's answers for a CRD's scale:
/// it decodes as an `autoscaling/v1` `Scale` (or as nothing declared), names the object of the URL (another name,
/// or none, is 400), and is in the URL's namespace or none.
fn check_replacement(scale: &Value, context: &Context) -> Result<(), ApiError> {
    let text = |field: &str| scale.get(field).and_then(Value::as_str).unwrap_or_default();
    let (kind, api_version) = (text("kind"), text("apiVersion"));
    if !(kind.is_empty() || kind == "Scale")
        || !(api_version.is_empty() || api_version == "autoscaling/v1")
    {
        return Err(ApiError::bad_request(
            "no kind is registered for the type v1.Scale in scheme \"pkg/apiserver/customresource_handler.go:781\"",
        ));
    }
    let meta = |field: &str| {
        scale
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let (name, url_name) = (meta("name"), context.name());
    if name.is_empty() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({url_name} based on URL) was undeterminable: name must be provided"
        )));
    }
    if name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({url_name})"
        )));
    }
    let namespace = meta("namespace");
    if !namespace.is_empty() && Some(namespace) != context.namespace() {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ScaleChange {
    Replace,
    Patch,
}

#[derive(Clone, Copy)]
enum PatchKind {
    Json,
    Merge,
}

/// The patch types a Scale takes; a strategic merge patch of a Scale is a merge patch (it has no lists).
fn patch_kind(content_type: Option<&str>) -> Result<PatchKind, ApiError> {
    match content_type
        .and_then(parse_content_type)
        .map(|(e, _)| e)
        .unwrap_or_default()
        .as_str()
    {
        "application/json-patch+json" => Ok(PatchKind::Json),
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            Ok(PatchKind::Merge)
        }
        _ => Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json",
        )),
    }
}

enum Change {
    Replace(Value),
    Patch(PatchKind, Vec<u8>),
}

/// A write of the Scale, turned into a write of the object each time the update is tried.
struct Scaled<'a, T: Resource> {
    endpoint: &'a ScaleEndpoint<T>,
    version: &'a str,
    name: &'a str,
    change: Change,
    admission: &'a Chain,
    attributes: &'a crate::admission::Attributes,
}

impl<T: Resource> Scaled<'_, T> {
    /// The Scale the request asks for, given the object as stored.
    fn wanted(&self, current: &T) -> Result<Value, ApiError> {
        match &self.change {
            Change::Replace(scale) => Ok(scale.clone()),
            Change::Patch(kind, patch) => {
                let mut scale = self.endpoint.scale(current, self.version)?;
                match kind {
                    PatchKind::Json => JsonPatch::decode(patch)
                        .map_err(ApiError::bad_request)?
                        .apply(&mut scale)
                        .map_err(|_| {
                            ApiError::new(
                                422,
                                "Invalid",
                                "the server rejected our request due to an error in our request",
                            )
                        })?,
                    PatchKind::Merge => {
                        let patch: Value = serde_json::from_slice(patch)
                            .map_err(|e| ApiError::bad_request(e.to_string()))?;
                        ::json_patch::merge(&mut scale, &patch);
                    }
                }
                Ok(scale)
            }
        }
    }
}

#[async_trait]
impl<T: Resource> UpdatedObject<T> for Scaled<'_, T> {
    async fn updated(&self, current: Option<&T>) -> Result<T, ApiError> {
        let current =
            current.ok_or_else(|| ApiError::not_found(&self.attributes.resource, self.name))?;
        let scale = self.wanted(current)?;
        // A UID in a PUT's Scale is a precondition on the object's (upstream's `DefaultUpdatedObjectInfo`; a
        // patch has none).
        let uid = matches!(self.change, Change::Replace(_))
            .then(|| scale.get("metadata"))
            .flatten()
            .and_then(|m| m.get("uid"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !uid.is_empty() && uid != current.metadata().uid {
            let failed = crate::storage::StorageError::InvalidObj {
                key: self
                    .endpoint
                    .store
                    .key(Some(&current.metadata().namespace), self.name)?,
                revision: 0,
                message: format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    current.metadata().uid
                ),
            };
            return Err(ApiError::conflict(
                &self.attributes.resource,
                self.name,
                &failed.to_string(),
            ));
        }
        let replicas = match scale.get("spec").and_then(|s| s.get("replicas")) {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_i64()
                .filter(|n| i32::try_from(*n).is_ok())
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "spec.replicas: expected a 32-bit integer, got {v}"
                    ))
                })?,
        };
        if replicas < 0 {
            let error = FieldError::invalid(
                Path::new("spec").child("replicas"),
                &replicas,
                "must be greater than or equal to 0",
            );
            let kind = GroupKind {
                group: "autoscaling".into(),
                kind: "Scale".into(),
            };
            return Err(ApiError::invalid(&kind, self.name, &vec![error].into()));
        }
        let mut value = self.endpoint.to_value(current, self.version)?;
        write_path(
            &mut value,
            self.endpoint.paths.spec_replicas,
            json!(replicas),
        );
        let mut object = self
            .endpoint
            .store
            .codec()
            .decode_value(&value, self.version)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        // The Scale's resourceVersion is the precondition, as for any update; none means unconditional.
        let requested = scale
            .get("metadata")
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        object.metadata_mut().resource_version = if requested.is_empty() {
            current.metadata().resource_version.clone()
        } else {
            requested.to_string()
        };
        admit(self.admission, self.attributes, object, Some(current)).await
    }
}

#[async_trait]
impl<T: Resource> ResourceEndpoint for ScaleEndpoint<T> {
    fn description(&self) -> KindDescription {
        self.store.codec().describe()
    }

    fn namespaced(&self) -> bool {
        T::namespaced()
    }

    fn serves(&self, version: &str) -> bool {
        self.store.codec().serves(version)
    }

    async fn serve(&self, context: Context, verb: Verb, body: Body) -> Response {
        let result = match verb {
            Verb::Get => self.get(&context).await,
            Verb::Update => self.write(&context, ScaleChange::Replace, body).await,
            Verb::Patch => self.write(&context, ScaleChange::Patch, body).await,
            _ => return method_not_allowed(),
        };
        finish(&context, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_read_and_write() {
        let mut value = json!({"spec": {"replicas": 2}});
        assert_eq!(json_path(&value, ".spec.replicas"), Some(&json!(2)));
        assert_eq!(json_path(&value, ".status.replicas"), None);
        write_path(&mut value, ".status.replicas", json!(3));
        write_path(&mut value, ".spec.replicas", json!(5));
        assert_eq!(
            value,
            json!({"spec": {"replicas": 5}, "status": {"replicas": 3}})
        );
    }
}
