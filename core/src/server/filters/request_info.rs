//! Parses [`RequestInfo`] once per request into the extensions (upstream's `WithRequestInfo`).

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::request::Parts;

use crate::request::{RequestInfo, RequestInfoFactory};
use crate::server::status::internal_error;

/// Stores the request's [`RequestInfo`]; a URL that cannot be parsed (a `/watch/` with nothing after it)
/// gets upstream's 500.
pub async fn with_request_info(
    State(factory): State<Arc<RequestInfoFactory>>,
    mut request: Request,
    next: Next,
) -> Response {
    match factory.parse(request.method(), request.uri()) {
        Ok(info) => {
            request.extensions_mut().insert(info);
            next.run(request).await
        }
        Err(e) => internal_error(&format!(
            "Internal Server Error: {}: failed to create RequestInfo: {e}",
            apiserver_gotext::quote(&request_uri(request.uri()))
        )),
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestInfo {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<RequestInfo>()
            .cloned()
            .ok_or_else(|| internal_error("no RequestInfo found in the context"))
    }
}

/// Go's `RequestURI` as servers see it: path and query.
pub(crate) fn request_uri(uri: &http::Uri) -> String {
    uri.path_and_query()
        .map_or_else(|| uri.path().to_string(), |pq| pq.to_string())
}
