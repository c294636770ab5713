//! Impersonation: after authentication, a request carrying `Impersonate-*` headers continues as the user it
//! names if the authenticated user may impersonate every part of that identity; otherwise 403 (upstream's
//! `WithImpersonation`, which sits between authentication and max-in-flight).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::authorization::forbidden;
use crate::audit::AuditContext;
use crate::auth::{Authorizer, Decision, User, impersonation};
use crate::meta::Status;
use crate::server::status::{internal_error, status_response};

/// Switches the request's user to the impersonated one, or refuses.
pub async fn impersonate(
    State(authorizer): State<Arc<dyn Authorizer>>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let Some(requestor) = parts.extensions.get::<User>().cloned() else {
        return internal_error("no user found for request");
    };
    let asked = match impersonation::requested(&parts.headers, &requestor) {
        Ok(None) => return next.run(Request::from_parts(parts, body)).await,
        Ok(Some(asked)) => asked,
        Err(message) => return status_response(&Status::bad_request(message)),
    };
    for check in &asked.checks {
        match authorizer.authorize(check).await {
            Ok((Decision::Allow, _)) => {}
            Ok((_, reason)) => return forbidden(check, &reason),
            Err(e) => {
                tracing::info!("impersonation check failed: {e}");
                return forbidden(check, "");
            }
        }
    }
    tracing::debug!(user = %requestor.name, as_user = %asked.user.name, "impersonating");
    impersonation::clear_headers(&mut parts.headers);
    if let Some(audit) = parts.extensions.get::<AuditContext>() {
        audit.impersonated(&asked.user);
    }
    parts.extensions.insert(asked.user);
    next.run(Request::from_parts(parts, body)).await
}
