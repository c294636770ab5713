//! The request's objects in their wire form: plugins that work on JSON in a served version rather than on hub
//! types (admission webhooks, admission policies) reach the resource's codec through [`Attributes::wire`].
//!
//! [`Attributes::wire`]: super::Attributes::wire

use crate::meta::ObjectMeta;
use crate::registry::ApiError;
use crate::runtime::{Resource, ResourceCodec};

use super::AnyObject;

/// A resource's codec without its type: converts the hub objects admission sees to and from JSON in any served
/// version (upstream's `VersionedAttributes` conversion, with this server's defaulting).
pub trait WireCodec: Send + Sync + std::fmt::Debug {
    /// The served versions, in the order they were added.
    fn versions(&self) -> Vec<&'static str>;

    /// The object's metadata (labels for selectors), when `object` is of this codec's type.
    fn metadata<'a>(&self, object: &'a AnyObject) -> Option<&'a ObjectMeta>;

    /// `object` as `version` writes it, `apiVersion` and `kind` included.
    fn encode(&self, object: &AnyObject, version: &str) -> Result<serde_json::Value, ApiError>;

    /// The OpenAPI schema of `version` (what apply configurations merge under).
    fn schema(&self, version: &str) -> Option<&serde_json::Value>;

    /// Replaces `object` with the hub form of `value`, a whole object of `version` (defaults applied, unknown
    /// fields dropped, as a decoder into a typed object does).
    fn decode_into(
        &self,
        value: &serde_json::Value,
        version: &str,
        object: &mut AnyObject,
    ) -> Result<(), ApiError>;
}

fn wrong_type<H: Resource>() -> ApiError {
    ApiError::internal(format!("admission: the object is not a {}", H::KIND))
}

impl<H: Resource> WireCodec for ResourceCodec<H> {
    fn versions(&self) -> Vec<&'static str> {
        ResourceCodec::versions(self).collect()
    }

    fn metadata<'a>(&self, object: &'a AnyObject) -> Option<&'a ObjectMeta> {
        object.downcast_ref::<H>().map(Resource::metadata)
    }

    fn schema(&self, version: &str) -> Option<&serde_json::Value> {
        self.patch_schema(version)
    }

    fn encode(&self, object: &AnyObject, version: &str) -> Result<serde_json::Value, ApiError> {
        let object = object.downcast_ref::<H>().ok_or_else(wrong_type::<H>)?;
        self.encode_value(object, version)
            .map_err(ApiError::internal)
    }

    fn decode_into(
        &self,
        value: &serde_json::Value,
        version: &str,
        object: &mut AnyObject,
    ) -> Result<(), ApiError> {
        let object = object.downcast_mut::<H>().ok_or_else(wrong_type::<H>)?;
        *object = self
            .decode_value(value, version)
            .map_err(ApiError::internal)?;
        Ok(())
    }
}
