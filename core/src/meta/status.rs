//! `Status`: the body of every error response (and of some successes, such as a delete).

use serde::{Deserialize, Serialize};

use super::ListMeta;
use super::object_meta::null_as_default;

/// The outcome of an API call that returns no object: `status: Failure` with a code, a machine-readable reason
/// and a message, or `status: Success` (e.g. a delete).
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
pub struct Status {
    /// Always emitted, as `{}` when empty (upstream's `metadata` has no `omitempty`).
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, required, tag = "1")]
    pub metadata: ListMeta,
    /// `Success` or `Failure`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, tag = "2")]
    pub status: String,
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, tag = "3")]
    pub message: String,
    /// E.g. `NotFound`, `Conflict`, `Invalid`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, tag = "4")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(message, optional, tag = "5")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[prost(int32, tag = "6")]
    pub code: i32,
}

/// Which object a `Status` is about, and why in detail.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, tag = "1")]
    pub name: String,
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, tag = "2")]
    pub group: String,
    /// The kind for Invalid errors, the resource for the others (as upstream).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, tag = "3")]
    pub kind: String,
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, tag = "6")]
    pub uid: String,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "4")]
    pub causes: Vec<StatusCause>,
    #[serde(default, skip_serializing_if = "is_zero")]
    #[prost(int32, tag = "5")]
    pub retry_after_seconds: i32,
}

/// One cause of a failure, e.g. an invalid field.
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
pub struct StatusCause {
    /// E.g. `FieldValueInvalid`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, tag = "1")]
    pub reason: String,
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, tag = "2")]
    pub message: String,
    /// E.g. `spec.toppings[0].quantity`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, tag = "3")]
    pub field: String,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

impl Status {
    /// The `apiVersion` and `kind` a Status is written with.
    pub const API_VERSION: &'static str = "v1";
    pub const KIND: &'static str = "Status";

    /// A failure with a code, reason and message.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Status {
            status: "Failure".into(),
            message: message.into(),
            reason: reason.into(),
            code: i32::from(code),
            ..Status::default()
        }
    }

    /// A success (e.g. the answer to a delete), optionally about one object.
    pub fn success(details: Option<StatusDetails>) -> Self {
        Status {
            status: "Success".into(),
            details,
            ..Status::default()
        }
    }
}

/// The upstream `StatusReason` values.
pub mod reason {
    pub const NOT_FOUND: &str = "NotFound";
    pub const ALREADY_EXISTS: &str = "AlreadyExists";
    pub const CONFLICT: &str = "Conflict";
    pub const INVALID: &str = "Invalid";
    pub const BAD_REQUEST: &str = "BadRequest";
    pub const FORBIDDEN: &str = "Forbidden";
    pub const UNAUTHORIZED: &str = "Unauthorized";
    pub const METHOD_NOT_ALLOWED: &str = "MethodNotAllowed";
    pub const GONE: &str = "Gone";
    pub const EXPIRED: &str = "Expired";
    pub const TIMEOUT: &str = "Timeout";
    pub const SERVER_TIMEOUT: &str = "ServerTimeout";
    pub const TOO_MANY_REQUESTS: &str = "TooManyRequests";
    pub const INTERNAL_ERROR: &str = "InternalError";
    pub const NOT_ACCEPTABLE: &str = "NotAcceptable";
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "UnsupportedMediaType";
    pub const REQUEST_ENTITY_TOO_LARGE: &str = "RequestEntityTooLarge";
    pub const SERVICE_UNAVAILABLE: &str = "ServiceUnavailable";
}
