//! Authorization: asks the [`Authorizer`] about the request's user and [`RequestInfo`]; anything but an
//! allow is 403 with upstream's message (`responsewriters.Forbidden` + `apierrors.NewForbidden`).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::StatusCode;

use super::request_info::request_uri;
use crate::auth::{Attributes, Authorizer, Decision, User, go_quote};
use crate::endpoints::RequestInfo;
use crate::server::status::{internal_error, status_response};

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
    let attributes = Attributes::new(user, info);
    match authorizer.authorize(&attributes).await {
        Ok((Decision::Allow, _)) => next.run(request).await,
        Ok((_, reason)) => forbidden(&attributes, &reason),
        Err(e) => {
            tracing::error!(uri = %request.uri(), "authorization error: {e}");
            internal_error(&format!(
                "Internal Server Error: {}: {e}",
                go_quote(&request_uri(request.uri()))
            ))
        }
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
    // apierrors.NewForbidden(GroupResource{group, resource}, name, err)
    let group_resource = if attributes.is_resource_request && !attributes.resource.is_empty() {
        if attributes.api_group.is_empty() {
            attributes.resource.clone()
        } else {
            format!("{}.{}", attributes.resource, attributes.api_group)
        }
    } else {
        String::new()
    };
    let message = match (group_resource.is_empty(), attributes.name.is_empty()) {
        (true, _) => format!("forbidden: {message}"),
        (false, true) => format!("{group_resource} is forbidden: {message}"),
        (false, false) => format!(
            "{group_resource} {} is forbidden: {message}",
            go_quote(&attributes.name)
        ),
    };
    let mut details = serde_json::Map::new();
    if attributes.is_resource_request {
        for (key, value) in [
            ("name", &attributes.name),
            ("group", &attributes.api_group),
            ("kind", &attributes.resource),
        ] {
            if !value.is_empty() {
                details.insert(key.to_string(), value.clone().into());
            }
        }
    }
    status_response(
        StatusCode::FORBIDDEN,
        "Forbidden",
        &message,
        Some(serde_json::Value::Object(details)),
    )
}
