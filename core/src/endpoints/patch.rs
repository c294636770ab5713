//! PATCH with a JSON patch (RFC 6902), a JSON merge patch (RFC 7386), a strategic merge patch or an apply patch
//! (server-side apply, `application/apply-patch+yaml` or `application/apply-patch+cbor`), applied to the object in the request's version inside the
//! store's update loop, so a conflicting write retries the patch on the new state. An apply creates the object
//! when it does not exist; every patch keeps `metadata.managedFields`.

use std::sync::Mutex;

use async_trait::async_trait;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{StatusCode, header};
use serde_json::Value;

use super::api::Endpoint;
use super::context::{Context, WriteOptions};
use super::create::{LARGE_BODY_BYTES, cpu_heavy, decode_error};
use super::get::render_object;
use super::managed_fields::Tracking;
use super::output::finish;
use super::params::options_invalid;
use super::strategic_merge::{self, PatchSchema, StrategicMergeError};
use super::update::{admit, attributes};
use crate::admission::{Attributes, Chain, Operation};
use crate::codec::json::replace_invalid_unicode;
use crate::codec::{self, FieldValidation, MediaType, parse_content_type, yaml_to_json};
use crate::registry::{ApiError, Cause, Details, UpdatedObject};
use crate::runtime::json_patch::JsonPatch;
use crate::runtime::{Resource, ResourceCodec};
use crate::validation::{ErrorList, FieldError, Path};

const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
const APPLY_PATCH: &str = "application/apply-patch+yaml";
/// Upstream's `ApplyCBORPatchType` (behind `CBORServingAndStorage` there; always on here).
const APPLY_CBOR_PATCH: &str = "application/apply-patch+cbor";
/// Upstream's `maxJSONPatchOperations`.
const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PatchType {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}

pub(super) async fn patch<T: Resource>(
    endpoint: &Endpoint<T>,
    context: Context,
    body: Body,
) -> Response {
    let result = async {
        let WriteOptions {
            output,
            dry_run,
            validation,
        } = WriteOptions::parse(&context, "PatchOptions")?;
        let (patch_type, cbor) = patch_type(context.header(header::CONTENT_TYPE))?;
        let force = check_apply_options(&context, patch_type)?;
        let mut patch = context.read_body(body).await?;
        if cbor {
            // As upstream's `validateAndTranscodePatch`: a CBOR apply configuration is checked and
            // turned into JSON up front, then applied as a YAML (JSON) one.
            patch = codec::cbor_to_json(&patch)
                .map_err(|e| match e {
                    codec::CodecError::Cbor(detail) => {
                        ApiError::bad_request(format!("error decoding patch: cbor: {detail}"))
                    }
                    other => ApiError::bad_request(format!("error decoding patch: {other}")),
                })?
                .into();
        }
        let attributes = attributes(endpoint.store.codec(), &context, Operation::Update, dry_run);
        let patched = Patched {
            codec: endpoint.store.codec(),
            version: context.version(),
            name: context.name(),
            patch_type,
            patch,
            validation,
            admission: &endpoint.admission,
            attributes: &attributes,
            warnings: Mutex::new(Vec::new()),
            tracking: Tracking::new(endpoint.store.codec(), &context, endpoint.store.is_status()),
            force,
        };
        let written = endpoint
            .store
            .update(
                context.namespace(),
                context.name(),
                &patched,
                crate::registry::WriteOptions {
                    admission: &endpoint.admission.validating(&attributes),
                    dry_run,
                    // Server-side apply creates what it does not find.
                    allow_create: patch_type == PatchType::Apply,
                },
            )
            .await?;
        context.warn_all(&patched.warnings.into_inner().unwrap_or_default());
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

/// The patch type of a `Content-Type`, and whether the body is CBOR (`apply-patch+cbor`).
fn patch_type(content_type: Option<&str>) -> Result<(PatchType, bool), ApiError> {
    let essence = content_type
        .and_then(parse_content_type)
        .map(|(essence, _)| essence)
        .unwrap_or_default();
    match essence.as_str() {
        JSON_PATCH => Ok((PatchType::Json, false)),
        MERGE_PATCH => Ok((PatchType::Merge, false)),
        STRATEGIC_MERGE_PATCH => Ok((PatchType::StrategicMerge, false)),
        APPLY_PATCH => Ok((PatchType::Apply, false)),
        APPLY_CBOR_PATCH => Ok((PatchType::Apply, true)),
        _ => Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_MERGE_PATCH}, {APPLY_PATCH}, {APPLY_CBOR_PATCH}"
            ),
        )),
    }
}

/// `fieldManager` is required for an apply, `force` is for applies only (upstream `ValidatePatchOptions`).
fn check_apply_options(context: &Context, patch_type: PatchType) -> Result<bool, ApiError> {
    let force = context.params.bool("force")?;
    let mut errors = ErrorList::default();
    if patch_type == PatchType::Apply {
        if context
            .params
            .get("fieldManager")
            .unwrap_or_default()
            .is_empty()
        {
            errors.push(FieldError::required(
                Path::new("fieldManager"),
                "is required for apply patch",
            ));
        }
    } else if force.is_some() {
        errors.push(FieldError::forbidden(
            Path::new("force"),
            "may not be specified for non-apply patch",
        ));
    }
    if !errors.is_empty() {
        return Err(options_invalid("PatchOptions", &errors));
    }
    Ok(force.unwrap_or(false))
}

/// Upstream answers every failed JSON patch operation with this one text (`NewGenericServerResponse(422, ...)`
/// drops the patch library's message), whatever the operation and the reason.
fn patch_failed() -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )
}

/// A strategic merge patch that cannot be applied. Malformed directives are 400 with upstream's text; the rest is
/// upstream's 422 (`NewGenericServerResponse`: a fixed message, the merge's text as the cause). Upstream answers most
/// of the latter (unknown `$patch` values, missing merge keys, mixed element types) with a 500.
fn strategic_merge_failed(error: StrategicMergeError) -> ApiError {
    match error {
        StrategicMergeError::BadRequest(message) => ApiError::bad_request(message),
        StrategicMergeError::Invalid(message) => {
            let mut error = patch_failed();
            error.details = Some(Box::new(Details {
                causes: vec![Cause {
                    reason: "UnexpectedServerResponse".into(),
                    message,
                    field: String::new(),
                }],
                ..Details::default()
            }));
            error
        }
    }
}

/// The body of a strategic merge patch: a JSON object (`null` is an empty patch, as for Go's decoder).
fn decode_strategic_merge_patch(patch: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(&replace_invalid_unicode(patch))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let go_type = match &value {
        Value::Object(_) => return Ok(value),
        Value::Null => return Ok(Value::Object(Default::default())),
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
    };
    Err(ApiError::bad_request(format!(
        "json: cannot unmarshal {go_type} into Go value of type map[string]interface {{}}"
    )))
}

/// A patch, applied to the current object each time the update is tried.
struct Patched<'a, T: Resource> {
    codec: &'a ResourceCodec<T>,
    version: &'a str,
    name: &'a str,
    patch_type: PatchType,
    patch: Bytes,
    validation: FieldValidation,
    admission: &'a Chain,
    attributes: &'a Attributes,
    /// Field validation warnings of the last try.
    warnings: Mutex<Vec<String>>,
    tracking: Tracking<'a, T>,
    /// `force=true`: an apply takes over conflicting fields.
    force: bool,
}

impl<T: Resource> Patched<'_, T> {
    fn apply(&self, current: &T) -> Result<Vec<u8>, ApiError> {
        let mut document = self
            .codec
            .encode_value(current, self.version)
            .map_err(ApiError::internal)?;
        match self.patch_type {
            PatchType::Json => {
                let patch = JsonPatch::decode(&self.patch).map_err(ApiError::bad_request)?;
                if patch.len() > MAX_JSON_PATCH_OPERATIONS {
                    return Err(ApiError::request_entity_too_large(&format!(
                        "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                        patch.len()
                    )));
                }
                patch.apply(&mut document).map_err(|e| {
                    tracing::debug!(error = %e, "JSON patch not applied");
                    patch_failed()
                })?;
            }
            PatchType::Merge => {
                let patch: Value = serde_json::from_slice(&replace_invalid_unicode(&self.patch))
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                ::json_patch::merge(&mut document, &patch);
            }
            PatchType::Apply => unreachable!("an apply patch is not applied to a document"),
            PatchType::StrategicMerge => {
                let patch = decode_strategic_merge_patch(&self.patch)?;
                let schema = self
                    .codec
                    .patch_schema(self.version)
                    .map(PatchSchema::new)
                    .unwrap_or_else(PatchSchema::none);
                document = strategic_merge::apply(document, patch, schema)
                    .map_err(strategic_merge_failed)?;
            }
        }
        serde_json::to_vec(&document).map_err(ApiError::internal)
    }

    /// Server-side apply: the configuration (YAML or JSON) checked as a body of the endpoint's type would be, then
    /// merged into the current object by the field manager.
    fn server_side_apply(&self, current: Option<&T>) -> Result<T, ApiError> {
        let (json, duplicates) = yaml_to_json(&self.patch).map_err(|e| {
            ApiError::bad_request(format!(
                "error decoding YAML: error converting YAML to JSON: {e}"
            ))
        })?;
        let config: Value = serde_json::from_slice(&json)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        if !config.is_object() {
            return Err(ApiError::bad_request(
                "error decoding YAML: json: cannot unmarshal into Go value of type map[string]interface {}",
            ));
        }
        self.tracking.check_type(&config)?;
        let object = self.tracking.apply(current, &config, self.force)?;
        // As upstream, field validation comes after the apply: unknown fields already failed it; what is left is
        // repeated keys and the type's own decoding.
        if self.validation == FieldValidation::Strict && !duplicates.is_empty() {
            return Err(ApiError::bad_request(format!(
                "error strict decoding YAML: {}",
                duplicates.join(", ")
            )));
        }
        let decoded = self
            .codec
            .decode(&json, MediaType::Json, self.version, self.validation)
            .map_err(decode_error)?;
        if let Ok(mut warnings) = self.warnings.lock() {
            *warnings = if self.validation == FieldValidation::Ignore {
                Vec::new()
            } else {
                duplicates.into_iter().chain(decoded.warnings).collect()
            };
        }
        Ok(object)
    }
}

#[async_trait]
impl<T: Resource> UpdatedObject<T> for Patched<'_, T> {
    async fn updated(&self, current: Option<&T>) -> Result<T, ApiError> {
        if self.patch_type == PatchType::Apply {
            let object = cpu_heavy(|| self.server_side_apply(current))?;
            return admit(self.admission, self.attributes, object, current).await;
        }
        let current =
            current.ok_or_else(|| ApiError::not_found(&self.codec.group_resource(), self.name))?;
        let patched = cpu_heavy(|| self.apply(current))?;
        let decode = || {
            self.codec
                .decode(&patched, MediaType::Json, self.version, self.validation)
        };
        let decoded = if patched.len() > LARGE_BODY_BYTES {
            cpu_heavy(decode)
        } else {
            decode()
        }
        .map_err(decode_error)?;
        if let Ok(mut warnings) = self.warnings.lock() {
            *warnings = decoded.warnings;
        }
        let mut object = decoded.object;
        self.tracking.update(Some(current), &mut object)?;
        admit(self.admission, self.attributes, object, Some(current)).await
    }
}
