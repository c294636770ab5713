//! `Audit-ID`: one ID per request, echoed in the response and available to handlers and logs, so a client's
//! report can be matched with the server's records (upstream's `WithAuditInit`).

use axum::extract::{FromRequestParts, Request};
use axum::middleware::Next;
use axum::response::Response;
use http::HeaderValue;
use http::request::Parts;

/// The request and response header.
pub const AUDIT_ID_HEADER: &str = "Audit-ID";

pub use crate::audit::AuditId;

/// Takes the request's `Audit-ID` if it sent one, else makes a UUID; stores it and sets the response header.
pub async fn with_audit_id(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(AUDIT_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    request.extensions_mut().insert(AuditId(id.clone()));
    let mut response = next.run(request).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(AUDIT_ID_HEADER, value);
    }
    response
}

impl<S: Send + Sync> FromRequestParts<S> for AuditId {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<AuditId>()
            .cloned()
            .ok_or_else(|| super::super::status::internal_error("no audit ID found for request"))
    }
}
