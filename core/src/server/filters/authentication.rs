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

use std::time::{Instant, SystemTime};

use super::audit::new_event;
use super::authorization::attributes;
use super::traces::AuthenticationTime;
use crate::audit::{AuditContext, Auditor, Level, ResponseStatus, Stage};
use crate::auth::{Authenticated, Authenticator, User};
use crate::meta::Status;
use crate::metrics::Metrics;
use crate::request::RequestInfo;
use crate::server::status::{internal_error, status_response};

/// What authentication needs: the authenticator, and the auditor that records failed attempts.
#[derive(Clone)]
pub struct Authentication {
    /// Who the request is from.
    pub authenticator: Arc<dyn Authenticator>,
    /// Records refused requests (a `ResponseStarted` event), when auditing is on.
    pub auditor: Option<Arc<Auditor>>,
}

/// Authenticates the request; no user (or an authenticator error) is 401 `Unauthorized`.
pub async fn authenticate(
    State(Authentication {
        authenticator,
        auditor,
    }): State<Authentication>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let start = SystemTime::now();
    let started = Instant::now();
    let metrics = parts.extensions.get::<Arc<Metrics>>().cloned();
    let record = |result: &str| {
        if let Some(metrics) = &metrics {
            metrics.authenticated(result, started.elapsed());
        }
    };
    let unauthorized = |parts: http::request::Parts| {
        if let Some(auditor) = &auditor {
            audit_failure(
                auditor,
                &Request::from_parts(parts, axum::body::Body::empty()),
            );
        }
        unauthorized()
    };
    match authenticator.authenticate_with_source(&parts).await {
        Ok(Some(Authenticated {
            user,
            via_front_proxy,
        })) => {
            record("success");
            parts.headers.remove(header::AUTHORIZATION);
            authenticator.clear_headers(&mut parts.headers);
            parts.extensions.insert(user);
            parts.extensions.insert(AuthenticationTime {
                start,
                end: SystemTime::now(),
                via_front_proxy,
            });
            next.run(Request::from_parts(parts, body)).await
        }
        Ok(None) => {
            record("failure");
            unauthorized(parts)
        }
        Err(e) => {
            record("error");
            tracing::info!(uri = %parts.uri, "unable to authenticate the request: {e}");
            unauthorized(parts)
        }
    }
}

/// upstream's `WithFailedAuthenticationAudit`: one `ResponseStarted` event with no user. The response status is
/// the 401 `Status` (upstream first writes which credentials were tried, then the response's `Status` replaces
/// it: kube-apiserver 1.36 logs `"message":"Unauthorized","reason":"Unauthorized"`).
fn audit_failure(auditor: &Arc<Auditor>, request: &Request) {
    let Some(info) = request.extensions().get::<RequestInfo>() else {
        return;
    };
    let attributes = attributes(&User::default(), info);
    let config = auditor.evaluate(&attributes);
    if config.level == Level::None {
        return;
    }
    let mut event = new_event(request, attributes);
    event.response_status = Some(ResponseStatus::from_status(&unauthorized_status(), 401));
    let _ = AuditContext::new(auditor.clone(), config, event).emit(Stage::ResponseStarted);
}

fn unauthorized_status() -> Status {
    Status::unauthorized("Unauthorized")
}

fn unauthorized() -> Response {
    status_response(&unauthorized_status())
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
