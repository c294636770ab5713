//! Panic recovery: a panicking handler answers 500 with a `Status` and the connection and server carry on
//! (upstream's `WithPanicRecovery`; the message is upstream's).

use std::panic::AssertUnwindSafe;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures::FutureExt;

use super::AuditId;
use crate::server::status::internal_error;

/// The message of the 500 a panic produces; details go to the log only.
pub const PANIC_MESSAGE: &str =
    "This request caused apiserver to panic. Look in the logs for details.";

/// Runs the rest of the chain, turning a panic into a 500 `InternalError` `Status`.
pub async fn recover(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let audit_id = request.extensions().get::<AuditId>().cloned();
    match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let message = panic_message(&*panic).unwrap_or_else(|| "unknown panic".to_string());
            tracing::error!(
                %method,
                %uri,
                audit_id = audit_id.map(|a| a.0).unwrap_or_default(),
                "apiserver panicked: {message}"
            );
            internal_error(PANIC_MESSAGE)
        }
    }
}

/// What a panic said, when it said it with a string (as `panic!` does).
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> Option<String> {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
}
