//! The warning filter: puts the request's [`Warnings`] into its extensions and writes what handlers, strategies
//! and admission added as `Warning` headers of the response.

use axum::extract::{FromRequestParts, Request};
use axum::middleware::Next;
use axum::response::Response;
use http::HeaderValue;
use http::request::Parts;

use crate::server::status::internal_error;
use crate::warning::Warnings;

/// Puts a [`Warnings`] into the request and writes its headers onto the response.
pub async fn record_warnings(mut request: Request, next: Next) -> Response {
    let warnings = Warnings::new();
    request.extensions_mut().insert(warnings.clone());
    let mut response = next.run(request).await;
    for header in warnings.headers() {
        // Texts are checked for control characters, so only valid header bytes remain.
        if let Ok(value) = HeaderValue::from_bytes(header.as_bytes()) {
            response.headers_mut().append(http::header::WARNING, value);
        }
    }
    response
}

impl<S: Send + Sync> FromRequestParts<S> for Warnings {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Warnings>()
            .cloned()
            .ok_or_else(|| internal_error("no warning recorder found for request"))
    }
}
