//! The filter chain every request passes before its handler, as tower layers (upstream's
//! `DefaultBuildHandlerChain`, the parts this server has so far). From the outside in:
//!
//! 0. [`transfer_encoding`]: 501 for a transfer coding other than `chunked` (what Go's HTTP server does first);
//! 1. [`audit_id`]: the `Audit-ID` response header (the request's own, or a new UUID);
//! 2. [`panic`](mod@panic): a panic in anything below becomes a 500 `Status`, and the server keeps serving;
//! 3. [`request_info`]: parses [`RequestInfo`](crate::request::RequestInfo) once into the extensions;
//!    [`httplog`] then writes the access log line of every request (at `-v=3`);
//!    [`compression`] gzips large API responses for clients that accept it;
//! 4. [`warning`]: a [`Warnings`] recorder in the extensions, written out as `Warning` headers;
//! 5. [`timeout`]: 504 for a request that is not long-running and has not been answered in time;
//! 6. [`authentication`]: the [`User`](crate::auth::User) into the extensions, or 401;
//!    [`traces`] then opens the request span (when spans are exported);
//! 7. [`audit`]: the request's audit events, when an audit policy is configured;
//! 8. [`impersonation`]: `Impersonate-*` headers switch the user, if the authorizer allows it, or 403;
//! 9. [`max_in_flight`]: 429 when too many requests are being served;
//! 10. [`authorization`]: allow, or 403 with upstream's message.
//!
//! `Audit-ID` sits outside panic recovery, as upstream's `WithAuditInit` does, so that even the 500 of a
//! panic carries the ID that the log line names.

pub mod audit;
pub mod audit_id;
pub mod authentication;
pub mod authorization;
pub mod compression;
pub mod httplog;
pub mod impersonation;
pub mod max_in_flight;
pub mod panic;
pub mod request_info;
pub mod timeout;
pub mod traces;
pub mod transfer_encoding;
pub mod warning;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::middleware::{from_fn, from_fn_with_state};
use tower::ServiceBuilder;

use crate::audit::Auditor;
use crate::auth::{Authenticator, Authorizer};
use crate::metrics::Metrics;
use crate::request::RequestInfoFactory;

pub use crate::warning::{WarningRecorder, Warnings};
pub use audit_id::AuditId;
pub use max_in_flight::{ConnectionWatches, InFlightLimits};
pub use timeout::DEFAULT_REQUEST_TIMEOUT;

/// A header's value as text; empty when it is missing or not visible ASCII.
fn header_str(headers: &http::HeaderMap, name: impl http::header::AsHeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// Counts a request the chain cut short (a timeout, too many requests) in `apiserver_request_terminations_total`.
fn terminated(metrics: &Metrics, info: &crate::request::RequestInfo, code: u16) {
    let labels = crate::metrics::RequestLabels::new(
        &info.verb,
        false,
        &[],
        [
            &info.api_group,
            &info.api_version,
            &info.resource,
            &info.subresource,
        ],
        &info.namespace,
        &info.name,
    );
    metrics.terminated(&labels, code);
}

/// What the filters need: how to parse request info, who authenticates and who authorizes.
#[derive(Clone)]
pub struct FilterChain {
    /// Request-info parsing rules.
    pub request_info: Arc<RequestInfoFactory>,
    /// The authenticator (a union; anonymous last for now).
    pub authenticator: Arc<dyn Authenticator>,
    /// The authorizer (a union: always-allow paths, `system:masters`, then the configured one).
    pub authorizer: Arc<dyn Authorizer>,
    /// How many requests may be served at once.
    pub limits: InFlightLimits,
    /// How long a request that is not long-running may take (upstream's `--request-timeout`; zero: no limit).
    pub request_timeout: Duration,
    /// Where the REST handlers record requests (an extension of every request).
    pub metrics: Arc<Metrics>,
    /// The audit policy and backends, if auditing is on.
    pub auditor: Option<Arc<Auditor>>,
}

impl FilterChain {
    /// Wraps every route of `router` (and its fallbacks) in the chain.
    pub fn apply(self, router: Router) -> Router {
        // The chain is one layer, outermost filter first. A filter clones the service below it for every request
        // (axum's `from_fn`, as tower's readiness rules ask), and `Router::layer` boxes what it wraps: one
        // `Router::layer` per filter made every request allocate a copy of every filter below every filter. As one
        // stack, a request copies a few `Arc`s per filter and allocates once per filter.
        let audit = self
            .auditor
            .clone()
            .map(|auditor| from_fn_with_state(auditor, audit::audit));
        let chain = ServiceBuilder::new()
            .layer(axum::Extension(self.metrics))
            .layer(from_fn(
                transfer_encoding::refuse_unsupported_transfer_encoding,
            ))
            .layer(from_fn(audit_id::with_audit_id))
            .layer(from_fn(panic::recover))
            .layer(from_fn_with_state(
                self.request_info,
                request_info::with_request_info,
            ))
            .layer(from_fn(httplog::log_request))
            .layer(from_fn(compression::compress))
            .layer(from_fn(warning::record_warnings))
            .layer(from_fn_with_state(
                self.request_timeout,
                timeout::with_timeout,
            ))
            .layer(from_fn_with_state(
                authentication::Authentication {
                    authenticator: self.authenticator,
                    auditor: self.auditor,
                },
                authentication::authenticate,
            ))
            .layer(from_fn(traces::trace))
            .option_layer(audit)
            .layer(from_fn_with_state(
                self.authorizer.clone(),
                impersonation::impersonate,
            ))
            .layer(from_fn_with_state(self.limits, max_in_flight::limit))
            .layer(from_fn_with_state(
                self.authorizer,
                authorization::authorize,
            ));
        router.layer(chain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{AlwaysAllow, Anonymous};
    use axum::body::{Body, Bytes};
    use axum::extract::Request;
    use axum::routing::{get, post};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    fn chain(router: Router) -> Router {
        FilterChain {
            request_info: Arc::new(RequestInfoFactory::default()),
            authenticator: Arc::new(Anonymous),
            authorizer: Arc::new(AlwaysAllow),
            request_timeout: Duration::from_millis(100),
            limits: InFlightLimits::new(0, 0),
            metrics: Arc::default(),
            auditor: None,
        }
        .apply(router)
    }

    /// Probe finding C3: a body that never completes held its request open; the chain now answers 504.
    #[tokio::test]
    async fn a_body_that_never_completes_times_out() {
        let app = chain(Router::new().route(
            "/apis/g/v/namespaces/ns/things",
            post(|body: Bytes| async move { format!("{} bytes", body.len()) }),
        ));
        let ten_bytes =
            futures::stream::once(async { Ok::<_, std::io::Error>(Bytes::from("0123456789")) });
        let body = Body::from_stream(futures::StreamExt::chain(
            ten_bytes,
            futures::stream::pending(),
        ));
        let request = Request::post("/apis/g/v/namespaces/ns/things")
            .header("content-length", "1000")
            .body(body)
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 504);
        assert!(response.headers().contains_key("audit-id"));
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["reason"], "Timeout");
        assert_eq!(status["message"], timeout::TIMEOUT_MESSAGE);
    }

    #[tokio::test]
    async fn watches_outlast_the_request_timeout() {
        let app = chain(Router::new().route(
            "/apis/g/v/things",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                "events"
            }),
        ));
        let request = Request::get("/apis/g/v/things?watch=1")
            .body(Body::empty())
            .unwrap();
        assert_eq!(app.oneshot(request).await.unwrap().status(), 200);
    }
}
