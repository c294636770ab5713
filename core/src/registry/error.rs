//! API errors: what a request failed with, as upstream's `k8s.io/apimachinery/pkg/api/errors` builds it, so that
//! clients see the same `Status` code, reason, message and details a Go server would send.

use crate::runtime::{GroupKind, GroupResource, Resource};
use crate::storage::StorageError;
use crate::validation::ErrorList;
use apiserver_gotext::quote as go_quote;

/// One cause in `Status.details.causes`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cause {
    /// E.g. `FieldValueInvalid`.
    pub reason: String,
    /// The field error's text without the field, e.g. `Invalid value: 0: cannot be negative or zero`.
    pub message: String,
    /// E.g. `spec.toppings[0].quantity`.
    pub field: String,
}

/// `Status.details`: which object the error is about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details {
    /// The object's name; empty when the request named none.
    pub name: String,
    /// The API group of the kind or resource; empty for the core group.
    pub group: String,
    /// A kind for Invalid errors, the resource (plural) for the others, as upstream.
    pub kind: String,
    /// The object's `metadata.uid`, when the error is about one object whose UID is known.
    pub uid: String,
    /// One cause per field error, for `Invalid` answers.
    pub causes: Vec<Cause>,
    /// `Status.details.retryAfterSeconds`: how long a client should wait before retrying; 0 for no advice.
    pub retry_after_seconds: i32,
}

/// A failed API request: becomes a `metav1.Status` with `status: Failure`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status code, also `Status.code`.
    pub code: u16,
    /// The `StatusReason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// The human-readable `Status.message`.
    pub message: String,
    /// Boxed: errors travel in `Result`s on hot paths and should stay small.
    pub details: Option<Box<Details>>,
}

/// The most field errors an `Invalid` answer lists; more are counted in its message.
pub const MAX_REPORTED_ERRORS: usize = 100;

/// Upstream's `OptimisticLockErrorMsg`.
pub const OPTIMISTIC_LOCK_ERROR_MSG: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

fn resource_details(resource: &GroupResource, name: &str) -> Option<Box<Details>> {
    Some(Box::new(Details {
        name: name.to_string(),
        group: resource.group.clone(),
        kind: resource.resource.clone(),
        ..Details::default()
    }))
}

impl ApiError {
    /// An error with a code, a reason and a message, and no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 404: `pizzas.restaurant.programming-kubernetes.info "x" not found`.
    pub fn not_found(resource: &GroupResource, name: &str) -> Self {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{resource} {} not found", go_quote(name)),
            details: resource_details(resource, name),
        }
    }

    /// 404 about an object of `T`, for code that has the type rather than its group-resource:
    /// `ApiError::not_found_for::<Pizza>("margherita")` is `ApiError::not_found(&Pizza::group_resource(), ...)`.
    pub fn not_found_for<T: Resource>(name: &str) -> Self {
        Self::not_found(&T::group_resource(), name)
    }

    /// 409: `... "x" already exists`.
    pub fn already_exists(resource: &GroupResource, name: &str) -> Self {
        ApiError {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{resource} {} already exists", go_quote(name)),
            details: resource_details(resource, name),
        }
    }

    /// 409: `Operation cannot be fulfilled on ... "x": <why>`.
    pub fn conflict(resource: &GroupResource, name: &str, why: &str) -> Self {
        ApiError {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {resource} {}: {why}",
                go_quote(name)
            ),
            details: resource_details(resource, name),
        }
    }

    /// 422: `Pizza.restaurant... "x" is invalid: <errors>`, with one cause per field error.
    pub fn invalid(kind: &GroupKind, name: &str, errors: &ErrorList) -> Self {
        let (errors, left_out) = errors.truncated(MAX_REPORTED_ERRORS);
        let causes = errors
            .iter()
            .map(|e| Cause {
                reason: e.kind.reason().to_string(),
                message: e.body(),
                field: e.field.clone(),
            })
            .collect();
        let mut message = format!(
            "{kind} {} is invalid: {}",
            go_quote(name),
            errors.aggregate()
        );
        if left_out > 0 {
            message.push_str(&format!(" (and {left_out} more errors)"));
        }
        ApiError {
            code: 422,
            reason: "Invalid",
            message,
            details: Some(Box::new(Details {
                name: name.to_string(),
                group: kind.group.clone(),
                kind: kind.kind.clone(),
                causes,
                ..Details::default()
            })),
        }
    }

    /// 400 `BadRequest` with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 403: `... "x" is forbidden: <why>`.
    pub fn forbidden(resource: &GroupResource, name: &str, why: &str) -> Self {
        let message = if name.is_empty() {
            format!("{resource} is forbidden: {why}")
        } else {
            format!("{resource} \"{name}\" is forbidden: {why}")
        };
        ApiError {
            code: 403,
            reason: "Forbidden",
            message,
            details: resource_details(resource, name),
        }
    }

    /// 405: `<verb> is not supported on resources of kind "pizzas..."`.
    pub fn method_not_supported(resource: &GroupResource, action: &str) -> Self {
        ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: format!("{action} is not supported on resources of kind \"{resource}\""),
            details: resource_details(resource, ""),
        }
    }

    /// 500: `Internal error occurred: <err>`.
    pub fn internal(err: impl std::fmt::Display) -> Self {
        let message = err.to_string();
        ApiError {
            code: 500,
            reason: "InternalError",
            message: format!("Internal error occurred: {message}"),
            details: Some(Box::new(Details {
                causes: vec![Cause {
                    message,
                    ..Cause::default()
                }],
                ..Details::default()
            })),
        }
    }

    /// 413: `Request entity too large: <why>`.
    pub fn request_entity_too_large(why: &str) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {why}"),
        )
    }

    /// Maps a storage error for the object `name` of `resource`, as upstream's `storage.Interpret*Error` and
    /// the store do.
    pub fn from_storage(err: StorageError, resource: &GroupResource, name: &str) -> Self {
        match err {
            StorageError::KeyNotFound { .. } => Self::not_found(resource, name),
            StorageError::KeyExists { .. } => Self::already_exists(resource, name),
            StorageError::ResourceVersionConflicts { .. } => {
                Self::conflict(resource, name, OPTIMISTIC_LOCK_ERROR_MSG)
            }
            StorageError::InvalidObj { ref message, .. } => Self::conflict(resource, name, message),
            StorageError::TooLargeResourceVersion { .. } => ApiError {
                code: 504,
                reason: "Timeout",
                message: err.to_string(),
                details: Some(Box::new(Details {
                    causes: vec![Cause {
                        reason: "ResourceVersionTooLarge".to_string(),
                        message: "Too large resource version".to_string(),
                        ..Cause::default()
                    }],
                    retry_after_seconds: 1,
                    ..Details::default()
                })),
            },
            StorageError::Expired { message, .. } => Self::new(410, "Expired", message),
            StorageError::BadRequest(message) => Self::bad_request(message),
            // The message names the storage key: not for clients.
            StorageError::InvalidKey(_) => {
                Self::bad_request("the name or namespace of the request is not valid")
            }
            StorageError::Invalid(message) => Self::new(422, "Invalid", message),
            StorageError::Unreachable { .. } | StorageError::Timeout { .. } => ApiError {
                code: 500,
                reason: "ServerTimeout",
                message: format!(
                    "The request against {resource} could not be completed at this time, please try again."
                ),
                details: Some(Box::new(Details {
                    retry_after_seconds: 2,
                    ..*resource_details(resource, name).unwrap_or_default()
                })),
            },
            StorageError::Callback(inner) => match inner.downcast_ref::<ApiError>() {
                Some(api) => api.clone(),
                None => Self::internal(inner),
            },
            other => Self::internal(other),
        }
    }

    /// Wraps this error so it passes through a storage callback and comes back out of [`ApiError::from_storage`].
    pub fn into_storage(self) -> StorageError {
        StorageError::callback(self)
    }
}

impl From<&ApiError> for crate::meta::Status {
    fn from(err: &ApiError) -> Self {
        let mut status = crate::meta::Status::failure(err.code, err.reason, err.message.clone());
        status.details = err.details.as_ref().map(|d| crate::meta::StatusDetails {
            name: d.name.clone(),
            group: d.group.clone(),
            kind: d.kind.clone(),
            uid: d.uid.clone(),
            causes: d
                .causes
                .iter()
                .map(|c| crate::meta::StatusCause {
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    field: c.field.clone(),
                })
                .collect(),
            retry_after_seconds: d.retry_after_seconds,
        });
        status
    }
}

/// The reasons upstream's predicates know (apimachinery's `knownReasons`): an error with one of them is judged by
/// its reason alone; any other (the empty reason too) is judged by its code.
const KNOWN_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// What an error is, as apimachinery's `errors.IsNotFound` and its siblings answer it: by `reason`, or by `code`
/// when the reason is one they do not know. Branch on these rather than on codes: a 409 may be a conflict or an
/// "already exists".
impl ApiError {
    fn is(&self, reason: &str, code: Option<u16>) -> bool {
        self.reason == reason
            || code.is_some_and(|c| self.code == c && !KNOWN_REASONS.contains(&self.reason))
    }

    /// The object does not exist (`NotFound`, 404).
    pub fn is_not_found(&self) -> bool {
        self.is("NotFound", Some(404))
    }

    /// A create found the name taken (`AlreadyExists`; a 409 without that reason is not one).
    pub fn is_already_exists(&self) -> bool {
        self.is("AlreadyExists", None)
    }

    /// A write lost an optimistic-concurrency race or broke a precondition (`Conflict`, 409): read again and retry.
    pub fn is_conflict(&self) -> bool {
        self.is("Conflict", Some(409))
    }

    /// The object failed validation (`Invalid`, 422); the causes name the fields.
    pub fn is_invalid(&self) -> bool {
        self.is("Invalid", Some(422))
    }

    /// Authorization or admission refused the request (`Forbidden`, 403).
    pub fn is_forbidden(&self) -> bool {
        self.is("Forbidden", Some(403))
    }

    /// The client is not authenticated (`Unauthorized`, 401).
    pub fn is_unauthorized(&self) -> bool {
        self.is("Unauthorized", Some(401))
    }

    /// The resource is gone for good (`Gone`, 410).
    pub fn is_gone(&self) -> bool {
        self.is("Gone", Some(410))
    }

    /// The requested resource version is too old, e.g. a watch from a compacted revision (`Expired`, reason only).
    pub fn is_resource_expired(&self) -> bool {
        self.is("Expired", None)
    }

    /// The request was malformed (`BadRequest`, 400).
    pub fn is_bad_request(&self) -> bool {
        self.is("BadRequest", Some(400))
    }

    /// The verb is not supported on this resource (`MethodNotAllowed`, 405).
    pub fn is_method_not_supported(&self) -> bool {
        self.is("MethodNotAllowed", Some(405))
    }

    /// None of the accepted media types can be served (`NotAcceptable`, 406).
    pub fn is_not_acceptable(&self) -> bool {
        self.is("NotAcceptable", Some(406))
    }

    /// The body's media type is not accepted (`UnsupportedMediaType`, 415).
    pub fn is_unsupported_media_type(&self) -> bool {
        self.is("UnsupportedMediaType", Some(415))
    }

    /// The body is too large (`RequestEntityTooLarge`, 413).
    pub fn is_request_entity_too_large(&self) -> bool {
        self.is("RequestEntityTooLarge", Some(413))
    }

    /// The request timed out before it was done (`Timeout`, 504); it may have happened.
    pub fn is_timeout(&self) -> bool {
        self.is("Timeout", Some(504))
    }

    /// The server could not answer in time, e.g. a resource version it has not seen yet (`ServerTimeout`, reason
    /// only).
    pub fn is_server_timeout(&self) -> bool {
        self.is("ServerTimeout", None)
    }

    /// The client should slow down (`TooManyRequests`, 429).
    pub fn is_too_many_requests(&self) -> bool {
        self.is("TooManyRequests", Some(429))
    }

    /// The server failed (`InternalError`, 500).
    pub fn is_internal_error(&self) -> bool {
        self.is("InternalError", Some(500))
    }

    /// The server cannot serve now (`ServiceUnavailable`, 503).
    pub fn is_service_unavailable(&self) -> bool {
        self.is("ServiceUnavailable", Some(503))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::{FieldError, Path};

    /// Probe finding C1: 100,000 invalid toppings made a 19 MB answer; it now lists at most 100.
    #[test]
    fn invalid_answers_are_bounded() {
        let errors: ErrorList = (0..100_000)
            .map(|i| {
                FieldError::invalid(
                    Path::new("spec").child("toppings").index(i).child("name"),
                    "salami",
                    "must be unique",
                )
            })
            .collect();
        let kind = GroupKind {
            group: "g".into(),
            kind: "Pizza".into(),
        };
        let err = ApiError::invalid(&kind, "x", &errors);
        let details = err.details.as_ref().unwrap();
        assert_eq!(details.causes.len(), MAX_REPORTED_ERRORS);
        assert!(
            err.message.ends_with("(and 99900 more errors)"),
            "{}",
            err.message
        );
        assert!(err.message.len() < 20_000, "{}", err.message.len());
        assert!(err.message.starts_with(
            "Pizza.g \"x\" is invalid: [spec.toppings[0].name: Invalid value: \"salami\": must be unique, "
        ));
    }

    /// As apimachinery's predicates: by reason, falling back on the code only for reasons they do not know.
    #[test]
    fn predicates_read_the_reason_then_the_code() {
        let pizzas = GroupResource {
            group: "g".into(),
            resource: "pizzas".into(),
        };
        let missing = ApiError::not_found(&pizzas, "x");
        assert!(missing.is_not_found() && !missing.is_conflict() && !missing.is_gone());
        let taken = ApiError::already_exists(&pizzas, "x");
        assert!(taken.is_already_exists() && !taken.is_conflict());
        let raced = ApiError::conflict(&pizzas, "x", OPTIMISTIC_LOCK_ERROR_MSG);
        assert!(raced.is_conflict() && !raced.is_already_exists());
        assert!(ApiError::forbidden(&pizzas, "x", "no").is_forbidden());
        assert!(ApiError::new(410, "Expired", "too old").is_resource_expired());
        assert!(!ApiError::new(410, "Expired", "too old").is_gone());
        assert!(ApiError::new(410, "Gone", "gone").is_gone());
        assert!(ApiError::new(504, "Timeout", "slow").is_timeout());
        assert!(ApiError::internal("boom").is_internal_error());
        assert!(ApiError::bad_request("bad").is_bad_request());
        // An unknown reason: the code decides; a known one that disagrees with the code: the reason does.
        assert!(ApiError::new(404, "SomethingElse", "?").is_not_found());
        assert!(ApiError::new(422, "", "?").is_invalid());
        assert!(!ApiError::new(404, "Conflict", "?").is_not_found());
        assert!(!ApiError::new(409, "SomethingElse", "?").is_already_exists());
    }

    #[test]
    fn invalid_keys_are_not_shown() {
        let resource = GroupResource {
            group: "g".into(),
            resource: "pizzas".into(),
        };
        let err = ApiError::from_storage(
            StorageError::InvalidKey("invalid key: \"/registry/g/pizzas/ns/a\\u{0}\"".into()),
            &resource,
            "a\0",
        );
        assert_eq!(err.code, 400);
        assert!(!err.message.contains("/registry"), "{}", err.message);
    }
}
