//! The access log (upstream's `httplog`): one `"HTTP"` line per request at verbosity 3 (`debug`), with the
//! verb, URI, latency, user agent, content type, audit ID, client address and response code. Nothing is
//! measured unless the line would be written.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::header::{CONTENT_TYPE, USER_AGENT};

use super::{AuditId, header_str};
use crate::request::RequestInfo;
use crate::server::ConnectionInfo;

/// The target of access log lines (filter on it to keep or drop them alone).
pub const TARGET: &str = "apiserver::httplog";

/// Logs the request once its response is ready.
pub async fn log_request(request: Request, next: Next) -> Response {
    if !tracing::enabled!(target: TARGET, tracing::Level::DEBUG) {
        return next.run(request).await;
    }
    let started = Instant::now();
    let user_agent = header_str(request.headers(), USER_AGENT).to_string();
    let content_type = header_str(request.headers(), CONTENT_TYPE).to_string();
    let verb = match request.extensions().get::<RequestInfo>() {
        Some(info) if !info.verb.is_empty() => info.verb.to_ascii_uppercase(),
        _ => request.method().as_str().to_string(),
    };
    let uri = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let audit_id = request
        .extensions()
        .get::<AuditId>()
        .map(|a| a.0.clone())
        .unwrap_or_default();
    let source = request
        .extensions()
        .get::<ConnectionInfo>()
        .map(|c| c.remote_addr.to_string())
        .unwrap_or_default();
    let response = next.run(request).await;
    tracing::debug!(
        target: TARGET,
        verb,
        URI = uri,
        latency = ?started.elapsed(),
        userAgent = user_agent,
        contentType = content_type,
        "audit-ID" = audit_id,
        srcIP = source,
        resp = response.status().as_u16(),
        "HTTP"
    );
    response
}
