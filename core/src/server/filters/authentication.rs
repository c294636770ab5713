//! Authentication: runs the [`Authenticator`] and stores the [`User`], or answers 401 (upstream's
//! `WithAuthentication`). The `Authorization` header and the front-proxy identity headers are removed once
//! authentication is done, so handlers, admission and proxies never see credentials or take a header for an
//! identity.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::header;
use http::request::Parts;

use crate::auth::{Authenticator, User};
use crate::meta::Status;
use crate::server::status::{internal_error, status_response};

/// Authenticates the request; no user (or an authenticator error) is 401 `Unauthorized`.
pub async fn authenticate(
    State(authenticator): State<Arc<dyn Authenticator>>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    match authenticator.authenticate(&parts).await {
        Ok(Some(user)) => {
            parts.headers.remove(header::AUTHORIZATION);
            authenticator.clear_headers(&mut parts.headers);
            parts.extensions.insert(user);
            next.run(Request::from_parts(parts, body)).await
        }
        Ok(None) => unauthorized(),
        Err(e) => {
            tracing::info!(uri = %parts.uri, "unable to authenticate the request: {e}");
            unauthorized()
        }
    }
}

fn unauthorized() -> Response {
    status_response(&Status::unauthorized("Unauthorized"))
}

impl<S: Send + Sync> FromRequestParts<S> for User {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<User>()
            .cloned()
            .ok_or_else(|| internal_error("no user found for request"))
    }
}
