//! `Status`: the body of every error response (and of some successful deletes), with the
//! constructors upstream's `k8s.io/apimachinery/pkg/api/errors` offers and its reason strings.

use serde::{Deserialize, Serialize};

use super::ListMeta;
use super::json::{is_zero_i32, null_as_default, typed_json};
use apiserver_gotext::quote as go_quote;

/// Upstream's `StatusReason` values: why a request failed, in machine-readable form.
pub mod reason {
    /// The server needs the client to authenticate (401).
    pub const UNAUTHORIZED: &str = "Unauthorized";
    /// The client may not do this (403).
    pub const FORBIDDEN: &str = "Forbidden";
    /// The object does not exist (404).
    pub const NOT_FOUND: &str = "NotFound";
    /// An object with this name already exists (409).
    pub const ALREADY_EXISTS: &str = "AlreadyExists";
    /// The write raced with another one (resource version precondition) (409).
    pub const CONFLICT: &str = "Conflict";
    /// The resource is gone and will not come back (410).
    pub const GONE: &str = "Gone";
    /// The object failed validation; `details.causes` lists the fields (422).
    pub const INVALID: &str = "Invalid";
    /// The server could not finish in time but may succeed on retry (500 with Retry-After).
    pub const SERVER_TIMEOUT: &str = "ServerTimeout";
    /// Reading the object from storage failed in a way a retry will not fix (500).
    pub const STORE_READ_ERROR: &str = "StorageReadError";
    /// The request did not finish within its timeout (504).
    pub const TIMEOUT: &str = "Timeout";
    /// The client is being throttled (429).
    pub const TOO_MANY_REQUESTS: &str = "TooManyRequests";
    /// The request is malformed (400).
    pub const BAD_REQUEST: &str = "BadRequest";
    /// The verb is not supported on this resource (405).
    pub const METHOD_NOT_ALLOWED: &str = "MethodNotAllowed";
    /// No acceptable media type can be served (406).
    pub const NOT_ACCEPTABLE: &str = "NotAcceptable";
    /// The body is larger than the server accepts (413).
    pub const REQUEST_ENTITY_TOO_LARGE: &str = "RequestEntityTooLarge";
    /// The body's media type is not supported (415).
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "UnsupportedMediaType";
    /// Something went wrong inside the server (500).
    pub const INTERNAL_ERROR: &str = "InternalError";
    /// The requested resource version is no longer available (410).
    pub const EXPIRED: &str = "Expired";
    /// The server is temporarily unable to serve (503).
    pub const SERVICE_UNAVAILABLE: &str = "ServiceUnavailable";
}

/// Upstream's `CauseType` values: what was wrong with one field, in [`StatusCause::reason`].
pub mod cause_type {
    /// A referenced value does not exist.
    pub const FIELD_VALUE_NOT_FOUND: &str = "FieldValueNotFound";
    /// A required value is missing.
    pub const FIELD_VALUE_REQUIRED: &str = "FieldValueRequired";
    /// A value that must be unique is repeated.
    pub const FIELD_VALUE_DUPLICATE: &str = "FieldValueDuplicate";
    /// A value is malformed or out of range.
    pub const FIELD_VALUE_INVALID: &str = "FieldValueInvalid";
    /// A value is not one of the supported ones.
    pub const FIELD_VALUE_NOT_SUPPORTED: &str = "FieldValueNotSupported";
    /// A value may not be set (now, by this client).
    pub const FORBIDDEN: &str = "FieldValueForbidden";
    /// A value is too long.
    pub const TOO_LONG: &str = "FieldValueTooLong";
    /// A list has too many items.
    pub const TOO_MANY: &str = "FieldValueTooMany";
    /// An internal error, reported per field.
    pub const INTERNAL: &str = "InternalError";
    /// A value has the wrong type.
    pub const TYPE_INVALID: &str = "FieldValueTypeInvalid";
    /// Another server answered in an unexpected way.
    pub const UNEXPECTED_SERVER_RESPONSE: &str = "UnexpectedServerResponse";
    /// Server-side apply found fields owned by another manager.
    pub const FIELD_MANAGER_CONFLICT: &str = "FieldManagerConflict";
    /// The requested resource version is newer than the server has seen.
    pub const RESOURCE_VERSION_TOO_LARGE: &str = "ResourceVersionTooLarge";
}

/// The outcome of a request that returns no object: every error, and some deletes.
///
/// JSON always starts with `"kind":"Status","apiVersion":"v1"` and always has `metadata` (as Go,
/// whose `omitempty` does not omit structs).
#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct Status {
    /// Always emitted, usually `{}`.
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(message, required, tag = "1")]
    pub metadata: ListMeta,
    /// [`Status::SUCCESS`] or [`Status::FAILURE`].
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "2")]
    pub status: String,
    /// For humans.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "3")]
    pub message: String,
    /// For machines: one of [`reason`], or empty.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "4")]
    pub reason: String,
    /// What the failure was about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[prost(message, optional, tag = "5")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    #[serde(
        default,
        skip_serializing_if = "is_zero_i32",
        deserialize_with = "null_as_default"
    )]
    #[prost(int32, required, tag = "6")]
    pub code: i32,
}

typed_json!(Status, "Status", "v1");

/// Which object a [`Status`] is about, why it failed field by field, and when to retry.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The object's name, when there is one.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "1")]
    pub name: String,
    /// The object's API group.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "2")]
    pub group: String,
    /// The object's kind, or (for most errors) its resource, e.g. `pizzas`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "3")]
    pub kind: String,
    /// The object's UID.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "6")]
    pub uid: String,
    /// One entry per problem, e.g. per invalid field.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(message, repeated, tag = "4")]
    pub causes: Vec<StatusCause>,
    /// Seconds the client should wait before retrying (0: not said).
    #[serde(
        default,
        skip_serializing_if = "is_zero_i32",
        deserialize_with = "null_as_default"
    )]
    #[prost(int32, required, tag = "5")]
    pub retry_after_seconds: i32,
}

/// One problem behind a [`Status`], usually one field.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, prost::Message)]
pub struct StatusCause {
    /// One of [`cause_type`] (upstream's Go field is `Type`; its JSON name is `reason`).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "1")]
    pub reason: String,
    /// For humans.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "2")]
    pub message: String,
    /// The field path, e.g. `spec.toppings[0]`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[prost(string, required, tag = "3")]
    pub field: String,
}

impl StatusCause {
    /// A cause of the given type on a field.
    pub fn new(
        reason: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        StatusCause {
            reason: reason.into(),
            message: message.into(),
            field: field.into(),
        }
    }
}

/// `resource.group`, or `resource` for the core group (Go's `GroupResource.String()`).
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl Status {
    /// `status` of a request that succeeded.
    pub const SUCCESS: &'static str = "Success";
    /// `status` of a request that failed.
    pub const FAILURE: &'static str = "Failure";

    /// A plain success.
    pub fn success() -> Self {
        Status {
            status: Self::SUCCESS.to_string(),
            ..Default::default()
        }
    }

    /// A failure with a code, a [`reason`] and a message, without details.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Status {
            status: Self::FAILURE.to_string(),
            message: message.into(),
            reason: reason.to_string(),
            code: i32::from(code),
            ..Default::default()
        }
    }

    fn about(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details = Some(StatusDetails {
            name: name.to_string(),
            group: group.to_string(),
            kind: kind.to_string(),
            ..Default::default()
        });
        self
    }

    fn retry_after(mut self, seconds: i32) -> Self {
        self.details
            .get_or_insert_with(Default::default)
            .retry_after_seconds = seconds;
        self
    }

    /// 404: `pizzas.restaurant.programming-kubernetes.info "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let message = format!(
            "{} {} not found",
            qualified(group, resource),
            go_quote(name)
        );
        Self::failure(404, reason::NOT_FOUND, message).about(group, resource, name)
    }

    /// 409: `... "x" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let message = format!(
            "{} {} already exists",
            qualified(group, resource),
            go_quote(name)
        );
        Self::failure(409, reason::ALREADY_EXISTS, message).about(group, resource, name)
    }

    /// 409 when `generateName` produced a name that was taken; the client should retry.
    pub fn generate_name_conflict(
        group: &str,
        resource: &str,
        name: &str,
        retry_after_seconds: i32,
    ) -> Self {
        let message = format!(
            "{} {} already exists, the server was not able to generate a unique name for the object",
            qualified(group, resource),
            go_quote(name)
        );
        Self::failure(409, reason::ALREADY_EXISTS, message)
            .about(group, resource, name)
            .retry_after(retry_after_seconds)
    }

    /// 409: `Operation cannot be fulfilled on <resource> "x": <err>`.
    pub fn conflict(group: &str, resource: &str, name: &str, err: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} {}: {err}",
            qualified(group, resource),
            go_quote(name)
        );
        Self::failure(409, reason::CONFLICT, message).about(group, resource, name)
    }

    /// 422 with one cause per field; the message lists them as upstream's `NewInvalid`
    /// (`<kind>.<group> "x" is invalid: [field: msg, ...]`). Each cause's `message` is the
    /// error without the field path, as upstream's `ErrorBody()`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<StatusCause>) -> Self {
        let subject = format!("{} {}", qualified(group, kind), go_quote(name));
        let mut errors: Vec<String> = Vec::new();
        for c in &causes {
            let e = format!("{}: {}", c.field, c.message);
            if !errors.contains(&e) {
                errors.push(e);
            }
        }
        let message = match errors.len() {
            0 => format!("{subject} is invalid"),
            1 => format!("{subject} is invalid: {}", errors[0]),
            _ => format!("{subject} is invalid: [{}]", errors.join(", ")),
        };
        let mut status = Self::failure(422, reason::INVALID, message).about(group, kind, name);
        if let Some(d) = status.details.as_mut() {
            d.causes = causes;
        }
        status
    }

    /// 403: `<resource> "x" is forbidden: <err>` (or without the name, or without the resource).
    pub fn forbidden(group: &str, resource: &str, name: &str, err: &str) -> Self {
        let message = if group.is_empty() && resource.is_empty() {
            format!("forbidden: {err}")
        } else if name.is_empty() {
            format!("{} is forbidden: {err}", qualified(group, resource))
        } else {
            format!(
                "{} {} is forbidden: {err}",
                qualified(group, resource),
                go_quote(name)
            )
        };
        Self::failure(403, reason::FORBIDDEN, message).about(group, resource, name)
    }

    /// 401; an empty message becomes `not authorized`.
    pub fn unauthorized(message: &str) -> Self {
        let message = if message.is_empty() {
            "not authorized"
        } else {
            message
        };
        Self::failure(401, reason::UNAUTHORIZED, message)
    }

    /// 400 with the given message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::failure(400, reason::BAD_REQUEST, message)
    }

    /// 405: `<verb> is not supported on resources of kind "<resource>"`.
    pub fn method_not_supported(group: &str, resource: &str, action: &str) -> Self {
        let message = format!(
            "{action} is not supported on resources of kind {}",
            go_quote(&qualified(group, resource))
        );
        Self::failure(405, reason::METHOD_NOT_ALLOWED, message).about(group, resource, "")
    }

    /// 410 `Gone`.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::failure(410, reason::GONE, message)
    }

    /// 410 `Expired`: the resource version asked for was compacted away.
    pub fn resource_expired(message: impl Into<String>) -> Self {
        Self::failure(410, reason::EXPIRED, message)
    }

    /// 504: `Timeout: <message>`.
    pub fn timeout(message: &str, retry_after_seconds: i32) -> Self {
        Self::failure(504, reason::TIMEOUT, format!("Timeout: {message}"))
            .retry_after(retry_after_seconds)
    }

    /// 500 `ServerTimeout`: `The <op> operation against <resource> could not be completed at
    /// this time, please try again.`
    pub fn server_timeout(
        group: &str,
        resource: &str,
        operation: &str,
        retry_after_seconds: i32,
    ) -> Self {
        let message = format!(
            "The {operation} operation against {} could not be completed at this time, please try again.",
            qualified(group, resource)
        );
        Self::failure(500, reason::SERVER_TIMEOUT, message)
            .about(group, resource, operation)
            .retry_after(retry_after_seconds)
    }

    /// 429 with `details.retryAfterSeconds`.
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: i32) -> Self {
        Self::failure(429, reason::TOO_MANY_REQUESTS, message).retry_after(retry_after_seconds)
    }

    /// 500: `Internal error occurred: <err>`, with the error as the one cause.
    pub fn internal_error(err: &str) -> Self {
        let mut status = Self::failure(
            500,
            reason::INTERNAL_ERROR,
            format!("Internal error occurred: {err}"),
        );
        status.details = Some(StatusDetails {
            causes: vec![StatusCause {
                message: err.to_string(),
                ..Default::default()
            }],
            ..Default::default()
        });
        status
    }

    /// 503 with the given message.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::failure(503, reason::SERVICE_UNAVAILABLE, message)
    }

    /// 406: `only the following media types are accepted: a, b`.
    pub fn not_acceptable(accepted: &[&str]) -> Self {
        let message = format!(
            "only the following media types are accepted: {}",
            accepted.join(", ")
        );
        Self::failure(406, reason::NOT_ACCEPTABLE, message)
    }

    /// 415: `the body of the request was in an unknown format - accepted media types include: a, b`.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        let message = format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        );
        Self::failure(415, reason::UNSUPPORTED_MEDIA_TYPE, message)
    }

    /// 413: `Request entity too large: <message>`.
    pub fn request_entity_too_large(message: &str) -> Self {
        Self::failure(
            413,
            reason::REQUEST_ENTITY_TOO_LARGE,
            format!("Request entity too large: {message}"),
        )
    }

    /// Whether this is a success.
    pub fn is_success(&self) -> bool {
        self.status == Self::SUCCESS
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Status {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_message_as_upstream() {
        let s = Status::invalid(
            "restaurant.programming-kubernetes.info",
            "Pizza",
            "x",
            vec![
                StatusCause::new(
                    cause_type::FIELD_VALUE_REQUIRED,
                    "spec.toppings",
                    "Required value",
                ),
                StatusCause::new(
                    cause_type::FIELD_VALUE_INVALID,
                    "metadata.name",
                    "Invalid value: \"X\"",
                ),
            ],
        );
        assert_eq!(
            s.message,
            "Pizza.restaurant.programming-kubernetes.info \"x\" is invalid: [spec.toppings: Required value, metadata.name: Invalid value: \"X\"]"
        );
        assert_eq!(s.code, 422);
        assert_eq!(s.details.unwrap().causes.len(), 2);
    }
}
