//! The request span (upstream's `WithTracing`, right after authentication so that who the client is decides
//! whether its `traceparent` is followed): named as upstream names it (`GET /apis/g/v/namespaces/{:namespace}/
//! pizzas/{:name}`, or the method for non-resource paths), with OpenTelemetry's HTTP server attributes and the
//! audit ID. A parent from `system:masters` or `system:monitoring` is followed; anyone else's becomes a link.
//! Authentication, which ran before the span existed, is recorded as its first child.

use std::time::SystemTime;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::header::USER_AGENT;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::AuditId;
use crate::auth::User;
use crate::endpoints::RequestInfo;
use crate::server::ConnectionInfo;
use crate::telemetry::{SPAN_TARGET, record_past_span, remote_parent, trusts_parent_of};

/// When authentication started and ended, for its span.
#[derive(Clone, Copy, Debug)]
pub struct AuthenticationTime {
    /// Before the authenticator was asked.
    pub start: SystemTime,
    /// When it answered.
    pub end: SystemTime,
}

/// Runs the rest of the chain inside the request span, when spans are exported.
pub async fn trace(request: Request, next: Next) -> Response {
    if !tracing::span_enabled!(target: SPAN_TARGET, tracing::Level::TRACE) {
        return next.run(request).await;
    }
    let span = request_span(&request);
    if let Some(parent) = remote_parent(request.headers()) {
        let trusted = request
            .extensions()
            .get::<User>()
            .is_some_and(|u| trusts_parent_of(&u.groups));
        if trusted {
            let _ = span.set_parent(parent);
        } else {
            use opentelemetry::trace::TraceContextExt;
            span.add_link(parent.span().span_context().clone());
        }
    }
    if let Some(time) = request.extensions().get::<AuthenticationTime>() {
        record_past_span(&span.context(), "authentication", time.start, time.end);
    }
    let response = next.run(request).instrument(span.clone()).await;
    let code = response.status().as_u16();
    span.record("http.response.status_code", i64::from(code));
    if code >= 500 {
        span.record("otel.status_code", "ERROR");
    }
    response
}

/// The span with what is known before the response.
fn request_span(request: &Request) -> tracing::Span {
    let name = span_name(request);
    let header = |name| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let connection = request.extensions().get::<ConnectionInfo>();
    let peer = connection.map(|c| c.remote_addr);
    let local = connection.map(|c| c.local_addr);
    let client = header("x-forwarded-for")
        .split(',')
        .next()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or_else(|| peer.map(|p| p.ip().to_string()))
        .unwrap_or_default();
    tracing::trace_span!(
        target: SPAN_TARGET,
        "KubernetesAPI",
        otel.name = %name,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        "http.request.method" = %request.method(),
        "url.scheme" = "https",
        "url.path" = request.uri().path(),
        "http.target" = request.uri().path_and_query().map(|p| p.as_str()).unwrap_or_default(),
        "server.address" = local.map(|a| a.ip().to_string()).unwrap_or_default(),
        "server.port" = local.map(|a| i64::from(a.port())).unwrap_or_default(),
        "network.peer.address" = peer.map(|a| a.ip().to_string()).unwrap_or_default(),
        "network.peer.port" = peer.map(|a| i64::from(a.port())).unwrap_or_default(),
        "network.protocol.version" = protocol_version(request.version()),
        "user_agent.original" = header(USER_AGENT.as_str()),
        "client.address" = client,
        "audit-id" = request.extensions().get::<AuditId>().map(|a| a.0.as_str()).unwrap_or_default(),
        "http.response.status_code" = tracing::field::Empty,
    )
}

fn protocol_version(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => "1.1",
    }
}

/// upstream's `getSpanNameFromRequestInfo`.
fn span_name(request: &Request) -> String {
    let method = request.method().as_str();
    let Some(info) = request
        .extensions()
        .get::<RequestInfo>()
        .filter(|i| i.is_resource_request)
    else {
        return method.to_string();
    };
    let mut name = format!("{method} /{}", info.api_prefix);
    if !info.api_group.is_empty() {
        name.push('/');
        name.push_str(&info.api_group);
    }
    name.push('/');
    name.push_str(&info.api_version);
    if !info.namespace.is_empty() {
        name.push_str("/namespaces/{:namespace}");
    }
    name.push('/');
    name.push_str(&info.resource);
    if !info.name.is_empty() {
        name.push_str("/{:name}");
    }
    if !info.subresource.is_empty() {
        name.push('/');
        name.push_str(&info.subresource);
    }
    name
}
