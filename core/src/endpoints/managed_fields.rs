//! The field manager of a write: which manager the request is (`fieldManager`, else the user agent's first word),
//! the objects in the request's version as JSON, and the result back into the hub. Every create, update and
//! patch keeps `metadata.managedFields`; apply patches go through [`Tracking::apply`].

use serde_json::Value;

use super::context::Context;
use crate::fieldmanager::{Applied, ApplyError, FieldManager, ResetFields, Versions};
use crate::registry::{ApiError, Cause, Details};
use crate::runtime::{Resource, ResourceCodec};

/// The longest manager name (upstream's `FieldManagerMaxLength`).
const MAX_MANAGER_LENGTH: usize = 128;

/// The versions of a resource as the field manager sees them: schemas and conversion through the hub.
struct CodecVersions<'a, T: Resource>(&'a ResourceCodec<T>);

fn version_of(api_version: &str) -> &str {
    api_version.rsplit('/').next().unwrap_or(api_version)
}

impl<T: Resource> Versions for CodecVersions<'_, T> {
    fn schema(&self, api_version: &str) -> Option<&Value> {
        self.0.patch_schema(version_of(api_version))
    }

    fn convert(&self, value: &Value, from: &str, to: &str) -> Result<Value, String> {
        let hub = self
            .0
            .decode_value(value, version_of(from))
            .map_err(|e| e.to_string())?;
        self.0
            .encode_value(&hub, version_of(to))
            .map_err(|e| e.to_string())
    }
}

/// Field management for one write request.
pub(super) struct Tracking<'a, T: Resource> {
    codec: &'a ResourceCodec<T>,
    version: &'a str,
    api_version: String,
    subresource: String,
    reset: ResetFields,
    /// The manager: `fieldManager`, else from the user agent.
    pub manager: String,
}

/// Upstream's `prefixFromUserAgent`: the text before the first `/`, printable characters only, at most 128 bytes.
fn manager_from_user_agent(user_agent: &str) -> String {
    let mut out = String::new();
    for c in user_agent.split('/').next().unwrap_or_default().chars() {
        if c.is_control() {
            continue;
        }
        if out.len() + c.len_utf8() > MAX_MANAGER_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

impl<'a, T: Resource> Tracking<'a, T> {
    pub fn new(codec: &'a ResourceCodec<T>, context: &'a Context, is_status: bool) -> Self {
        let manager = match context.params.get("fieldManager") {
            Some(manager) if !manager.is_empty() => manager.to_string(),
            _ => manager_from_user_agent(
                context.header(http::header::USER_AGENT).unwrap_or_default(),
            ),
        };
        Tracking {
            codec,
            version: context.version(),
            api_version: codec.group_version(context.version()).api_version(),
            subresource: context.info.subresource.clone(),
            reset: ResetFields::for_endpoint(T::has_status_subresource(), is_status),
            manager,
        }
    }

    /// The object as the field manager compares it: its JSON in the request's version without empty maps, empty
    /// lists and nulls. A typed object cannot tell an empty field from an absent one; a custom resource keeps what
    /// was sent, and upstream's managed fields for it are what this server matches (a first write of `status` owns
    /// `status` itself, as for a custom resource).
    fn to_value(&self, object: &T) -> Result<Value, ApiError> {
        let mut value = self
            .codec
            .encode_value(object, self.version)
            .map_err(ApiError::internal)?;
        drop_empty(&mut value);
        Ok(value)
    }

    fn with<R>(&self, f: impl FnOnce(&FieldManager<'_>) -> R) -> R {
        let versions = CodecVersions(self.codec);
        f(&FieldManager {
            versions: &versions,
            api_version: &self.api_version,
            kind: T::KIND,
            subresource: &self.subresource,
            reset: &self.reset,
        })
    }

    /// Sets the managed fields of `new`, about to replace `live` (`None`: a create).
    pub fn update(&self, live: Option<&T>, new: &mut T) -> Result<(), ApiError> {
        let live_value = live.map(|l| self.to_value(l)).transpose()?;
        let new_value = self.to_value(new)?;
        let managed = self.with(|manager| {
            manager.update(
                live.zip(live_value.as_ref())
                    .map(|(l, v)| (v, l.metadata().managed_fields.as_slice())),
                &new_value,
                &new.metadata().managed_fields,
                &self.manager,
            )
        });
        new.metadata_mut().managed_fields = managed;
        Ok(())
    }

    /// Checks an apply configuration's `apiVersion` and `kind` against the endpoint (upstream's first check).
    pub fn check_type(&self, config: &Value) -> Result<(), ApiError> {
        self.with(|manager| manager.check_type(config))
            .map_err(apply_error)
    }

    /// Applies `config` to `live` (`None`: the object does not exist yet): the new object with its managed fields.
    pub fn apply(&self, live: Option<&T>, config: &Value, force: bool) -> Result<T, ApiError> {
        let live_value = live.map(|l| self.to_value(l)).transpose()?;
        let Applied {
            object,
            managed_fields,
        } = self
            .with(|manager| {
                manager.apply(
                    live.zip(live_value.as_ref())
                        .map(|(l, v)| (v, l.metadata().managed_fields.as_slice())),
                    config,
                    &self.manager,
                    force,
                )
            })
            .map_err(apply_error)?;
        let mut result = match (object, live) {
            (Some(value), _) => self
                .codec
                .decode_value(&value, self.version)
                .map_err(super::create::decode_error)?,
            (None, Some(live)) => live.clone(),
            (None, None) => T::default(),
        };
        result.metadata_mut().managed_fields = managed_fields;
        Ok(result)
    }
}

/// Removes empty maps, empty lists and nulls below `value`, innermost first.
fn drop_empty(value: &mut Value) {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    };
    match value {
        Value::Object(map) => {
            map.values_mut().for_each(drop_empty);
            map.retain(|_, v| !empty(v));
        }
        Value::Array(items) => items.iter_mut().for_each(drop_empty),
        _ => {}
    }
}

fn apply_error(error: ApplyError) -> ApiError {
    match error {
        ApplyError::BadRequest(message) => ApiError::bad_request(message),
        // Upstream answers these with a bare Status (no reason): errors its handler did not expect.
        ApplyError::Internal(message) => ApiError::new(500, "", message),
        ApplyError::Conflicts { message, causes } => {
            let mut error = ApiError::new(409, "Conflict", message);
            error.details = Some(Box::new(Details {
                causes: causes
                    .into_iter()
                    .map(|(message, field)| Cause {
                        reason: "FieldManagerConflict".into(),
                        message,
                        field,
                    })
                    .collect(),
                ..Details::default()
            }));
            error
        }
    }
}

#[cfg(test)]
mod tests {
    use super::manager_from_user_agent;

    #[test]
    fn manager_from_user_agent_as_upstream() {
        assert_eq!(
            manager_from_user_agent("kubectl/v1.32.4 (linux/amd64)"),
            "kubectl"
        );
        assert_eq!(manager_from_user_agent("my tool\u{1}/1.0"), "my tool");
        assert_eq!(manager_from_user_agent(""), "");
        assert_eq!(manager_from_user_agent(&"x".repeat(300)).len(), 128);
    }
}
