//! The one error type of the storage layer, with upstream's kinds and texts.
//!
//! Texts follow `k8s.io/apiserver/pkg/storage/errors.go` and the etcd3 store, so that the layers above can turn
//! them into the same `metav1.Status` a Go server would send. [`StorageError::status`] gives the HTTP code and
//! Status reason each kind maps to.

use std::sync::Arc;

/// Upstream's numeric storage error codes (`ErrCodeKeyNotFound` …), kept for the error text.
mod code {
    pub const KEY_NOT_FOUND: u8 = 1;
    pub const KEY_EXISTS: u8 = 2;
    pub const RESOURCE_VERSION_CONFLICTS: u8 = 3;
    pub const INVALID_OBJ: u8 = 4;
    pub const UNREACHABLE: u8 = 5;
    pub const TIMEOUT: u8 = 6;
    pub const CORRUPT_OBJ: u8 = 7;
}

/// The message of a 410 for a list whose resourceVersion was compacted away.
pub const LIST_EXPIRED_MESSAGE: &str = "The resourceVersion for the provided list is too old.";
/// The message of a 410 for a watch whose start revision was compacted away.
pub const WATCH_EXPIRED_MESSAGE: &str = "The resourceVersion for the provided watch is too old.";
/// The message of a 410 for a continue token whose revision was compacted away.
pub const CONTINUE_EXPIRED_MESSAGE: &str = "The provided continue parameter is too old to display a consistent list \
result. You can start a new list without the continue parameter, or use the continue token in this response to \
retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects \
that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// An error a caller-supplied callback (try-update, validate-deletion, attribute extraction) returned; the storage
/// passes it through untouched so the layer above can downcast it back to its own type.
pub type CallbackError = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in a storage call.
///
/// The storage-level kinds print upstream's `StorageError: <msg>, Code: <n>, Key: <key>, ResourceVersion: <rv>,
/// AdditionalErrorMsg: <msg>` text; the request-level kinds print the message upstream puts in the Status.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    /// The key does not exist (404 NotFound once the registry names the resource).
    #[error(
        "StorageError: key not found, Code: {}, Key: {key}, ResourceVersion: {revision}, AdditionalErrorMsg: ",
        code::KEY_NOT_FOUND
    )]
    KeyNotFound {
        /// The key asked for.
        key: String,
        /// The revision the store was at, or 0.
        revision: u64,
    },
    /// Create found the key already present (409 AlreadyExists).
    #[error(
        "StorageError: key exists, Code: {}, Key: {key}, ResourceVersion: {revision}, AdditionalErrorMsg: ",
        code::KEY_EXISTS
    )]
    KeyExists {
        /// The key.
        key: String,
        /// The revision of the existing object, or 0 when unknown.
        revision: u64,
    },
    /// An optimistic write lost a race (409 Conflict).
    #[error(
        "StorageError: resource version conflicts, Code: {}, Key: {key}, ResourceVersion: {revision}, AdditionalErrorMsg: {message}",
        code::RESOURCE_VERSION_CONFLICTS
    )]
    ResourceVersionConflicts {
        /// The key.
        key: String,
        /// The revision found.
        revision: u64,
        /// Detail.
        message: String,
    },
    /// A precondition (UID or resourceVersion) failed (409 Conflict on update and delete).
    #[error(
        "StorageError: invalid object, Code: {}, Key: {key}, ResourceVersion: {revision}, AdditionalErrorMsg: {message}",
        code::INVALID_OBJ
    )]
    InvalidObj {
        /// The key.
        key: String,
        /// The revision of the object checked.
        revision: u64,
        /// E.g. `Precondition failed: UID in precondition: a, UID in object meta: b`.
        message: String,
    },
    /// The backend cannot be reached (500 ServerTimeout, as upstream's `InterpretGetError`).
    #[error(
        "StorageError: server unreachable, Code: {}, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {message}",
        code::UNREACHABLE
    )]
    Unreachable {
        /// The key, or empty.
        key: String,
        /// What failed.
        message: String,
    },
    /// The backend did not answer in time (504 Timeout).
    #[error(
        "StorageError: request timeout, Code: {}, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {message}",
        code::TIMEOUT
    )]
    Timeout {
        /// The key, or empty.
        key: String,
        /// What timed out.
        message: String,
    },
    /// Stored bytes could not be read back (500 InternalError).
    #[error(
        "StorageError: corrupt object, Code: {}, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {message}",
        code::CORRUPT_OBJ
    )]
    CorruptObj {
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A read asked for a revision the store has not reached (504 Timeout with cause `ResourceVersionTooLarge`;
    /// clients retry after a second).
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The revision asked for.
        requested: u64,
        /// The store's current revision.
        current: u64,
    },
    /// The revision a read or watch needs was compacted away (410 Expired). For a list continued from a compacted
    /// revision, `continue_token` holds a fresh token for the rest of the list at the latest revision.
    #[error("{message}")]
    Expired {
        /// Upstream's text, e.g. [`WATCH_EXPIRED_MESSAGE`].
        message: String,
        /// A token to continue the list inconsistently, when one applies.
        continue_token: Option<String>,
    },
    /// The request is malformed: a bad continue token, a resourceVersion together with continue, a bad
    /// resourceVersionMatch (400 BadRequest).
    #[error("{0}")]
    BadRequest(String),
    /// A key or name is not acceptable (400 BadRequest): `.`/`..` segments, escaping the prefix, empty names.
    #[error("{0}")]
    InvalidKey(String),
    /// The request is well formed but not valid (422 Invalid).
    #[error("{0}")]
    Invalid(String),
    /// A callback supplied by the layer above failed; passed through unchanged.
    #[error(transparent)]
    Callback(CallbackError),
    /// Anything else the backend reports (500 InternalError).
    #[error("{0}")]
    Internal(String),
}

impl StorageError {
    /// The HTTP status code and `metav1.Status` reason this error maps to (upstream `pkg/storage/errors` and
    /// `apimachinery/pkg/api/errors`). A [`StorageError::Callback`] is the caller's own error and maps to 500 here;
    /// the caller is expected to downcast it first.
    pub fn status(&self) -> (u16, &'static str) {
        match self {
            StorageError::KeyNotFound { .. } => (404, "NotFound"),
            StorageError::KeyExists { .. } => (409, "AlreadyExists"),
            StorageError::ResourceVersionConflicts { .. } | StorageError::InvalidObj { .. } => {
                (409, "Conflict")
            }
            StorageError::Unreachable { .. } => (500, "ServerTimeout"),
            StorageError::Timeout { .. } | StorageError::TooLargeResourceVersion { .. } => {
                (504, "Timeout")
            }
            StorageError::Expired { .. } => (410, "Expired"),
            StorageError::BadRequest(_) | StorageError::InvalidKey(_) => (400, "BadRequest"),
            StorageError::Invalid(_) => (422, "Invalid"),
            StorageError::CorruptObj { .. }
            | StorageError::Callback(_)
            | StorageError::Internal(_) => (500, "InternalError"),
        }
    }

    /// The HTTP status code alone.
    pub fn code(&self) -> u16 {
        self.status().0
    }

    /// Wraps a caller's error so it passes through storage unchanged.
    pub fn callback(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        StorageError::Callback(Arc::new(err))
    }

    /// The 410 for a watch that starts before the compacted revision.
    pub fn watch_expired() -> Self {
        StorageError::Expired {
            message: WATCH_EXPIRED_MESSAGE.to_string(),
            continue_token: None,
        }
    }

    /// The 410 for a list at a compacted revision.
    pub fn list_expired() -> Self {
        StorageError::Expired {
            message: LIST_EXPIRED_MESSAGE.to_string(),
            continue_token: None,
        }
    }

    /// The 410 for a continue token at a compacted revision, carrying a token for the rest of the list.
    pub fn continue_expired(continue_token: Option<String>) -> Self {
        StorageError::Expired {
            message: CONTINUE_EXPIRED_MESSAGE.to_string(),
            continue_token,
        }
    }

    /// True for [`StorageError::KeyNotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, StorageError::KeyNotFound { .. })
    }

    /// True for [`StorageError::KeyExists`].
    pub fn is_exists(&self) -> bool {
        matches!(self, StorageError::KeyExists { .. })
    }

    /// True for a lost optimistic race or failed precondition (the kinds upstream maps to 409 Conflict).
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            StorageError::ResourceVersionConflicts { .. } | StorageError::InvalidObj { .. }
        )
    }

    /// True for [`StorageError::InvalidObj`] (failed precondition).
    pub fn is_invalid_obj(&self) -> bool {
        matches!(self, StorageError::InvalidObj { .. })
    }

    /// True for the 410 kinds.
    pub fn is_expired(&self) -> bool {
        matches!(self, StorageError::Expired { .. })
    }

    /// True for [`StorageError::TooLargeResourceVersion`].
    pub fn is_too_large_resource_version(&self) -> bool {
        matches!(self, StorageError::TooLargeResourceVersion { .. })
    }

    /// True for the 400 kinds.
    pub fn is_bad_request(&self) -> bool {
        matches!(
            self,
            StorageError::BadRequest(_) | StorageError::InvalidKey(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_match_upstream() {
        let e = StorageError::KeyNotFound {
            key: "/a/b".into(),
            revision: 5,
        };
        assert_eq!(
            e.to_string(),
            "StorageError: key not found, Code: 1, Key: /a/b, ResourceVersion: 5, AdditionalErrorMsg: "
        );
        assert_eq!(e.status(), (404, "NotFound"));
        let e = StorageError::TooLargeResourceVersion {
            requested: 10,
            current: 3,
        };
        assert_eq!(e.to_string(), "Too large resource version: 10, current: 3");
        assert_eq!(e.status(), (504, "Timeout"));
        assert_eq!(StorageError::watch_expired().status(), (410, "Expired"));
    }
}
