//! Authorization: asks the [`Authorizer`] about the request's user and [`RequestInfo`]; anything but an
//! allow is 403 with upstream's message (`responsewriters.Forbidden` + `apierrors.NewForbidden`).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::request_info::request_uri;
use crate::audit::{AuditContext, DECISION_ANNOTATION, REASON_ANNOTATION};
use crate::auth::{Attributes, Authorizer, Decision, User};
use crate::meta::Status;
use crate::metrics::Metrics;
use crate::request::RequestInfo;
use crate::server::status::{internal_error, status_response};
use apiserver_gotext::quote as go_quote;

/// Lets allowed requests through; the rest get 403 `Forbidden`, or 500 if the authorizer failed.
pub async fn authorize(
    State(authorizer): State<Arc<dyn Authorizer>>,
    request: Request,
    next: Next,
) -> Response {
    let (Some(info), Some(user)) = (
        request.extensions().get::<RequestInfo>(),
        request.extensions().get::<User>(),
    ) else {
        return internal_error("no RequestInfo or user found in the context");
    };
    let attributes = attributes(user, info);
    let audit = request.extensions().get::<AuditContext>().cloned();
    let annotate = |decision: Option<&str>, reason: &str| {
        if let Some(audit) = &audit {
            if let Some(decision) = decision {
                audit.annotate(DECISION_ANNOTATION, decision);
            }
            audit.annotate(REASON_ANNOTATION, reason);
        }
    };
    let started = Instant::now();
    let decision = authorizer.authorize(&attributes).await;
    if let Some(metrics) = request.extensions().get::<Arc<Metrics>>() {
        let result = match &decision {
            Ok((Decision::Allow, _)) => "allowed",
            Ok((Decision::Deny, _)) => "denied",
            Ok((Decision::NoOpinion, _)) => "no-opinion",
            Err(_) => "error",
        };
        metrics.authorized(result, started.elapsed());
    }
    match decision {
        Ok((Decision::Allow, reason)) => {
            annotate(Some("allow"), &reason);
            next.run(request).await
        }
        Ok((_, reason)) => {
            annotate(Some("forbid"), &reason);
            forbidden(&attributes, &reason)
        }
        Err(e) => {
            annotate(None, "internal error");
            tracing::error!(uri = %request.uri(), "authorization error: {e}");
            internal_error(&format!(
                "Internal Server Error: {}: {e}",
                go_quote(&request_uri(request.uri()))
            ))
        }
    }
}

/// What the authorizer is asked about a request made by `user` (upstream's `GetAuthorizerAttributes`).
pub fn attributes(user: &User, info: &RequestInfo) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: info.verb.clone(),
        is_resource_request: info.is_resource_request,
        namespace: info.namespace.clone(),
        api_group: info.api_group.clone(),
        api_version: info.api_version.clone(),
        resource: info.resource.clone(),
        subresource: info.subresource.clone(),
        name: info.name.clone(),
        path: info.path.clone(),
        ..Attributes::default()
    }
}

/// The 403 `Status` for a refused request:
/// `pizzas.g is forbidden: User "x" cannot get resource "pizzas" in API group "g" in the namespace "ns"`,
/// or `forbidden: User "x" cannot get path "/metrics"` for non-resource requests.
pub fn forbidden(attributes: &Attributes, reason: &str) -> Response {
    // Upstream escapes what could look like HTML; quotes stay.
    let mut message = attributes
        .forbidden_message()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    // apierrors.NewForbidden(GroupResource{group, resource}, name, err): empty for non-resource requests.
    let status = if attributes.is_resource_request {
        Status::forbidden(
            &attributes.api_group,
            &attributes.resource,
            &attributes.name,
            &message,
        )
    } else {
        Status::forbidden("", "", "", &message)
    };
    status_response(&status)
}
