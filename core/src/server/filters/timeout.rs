//! The request timeout (upstream's `WithTimeoutForNonLongRunningRequests`, `--request-timeout`): a request that is
//! not long-running gets a 504 `Timeout` `Status` when its handler has not answered in time, so that a client
//! that never finishes sending its body (or a stuck backend) cannot hold a request open forever. Watches and
//! other long-running requests are exempt: they end on their own `timeoutSeconds`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::meta::{Status, StatusDetails, reason};
use crate::metrics::Metrics;
use crate::request::RequestInfo;
use crate::server::status::status_response;

/// Upstream's default `--request-timeout`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Upstream's message (pkg/server/filters/timeout.go), behind `NewTimeoutError`'s `Timeout: ` prefix.
pub const TIMEOUT_MESSAGE: &str = "Timeout: request did not complete within the allotted timeout";

/// Verbs and subresources that may run as long as they like (upstream's `BasicLongRunningRequestCheck` as
/// kube-apiserver configures it).
const LONG_RUNNING_VERBS: &[&str] = &["watch", "proxy"];
const LONG_RUNNING_SUBRESOURCES: &[&str] = &["attach", "exec", "proxy", "log", "portforward"];

/// Whether a request is exempt from the timeout.
pub fn is_long_running(info: &RequestInfo) -> bool {
    LONG_RUNNING_VERBS.contains(&info.verb.as_str())
        || (info.is_resource_request
            && LONG_RUNNING_SUBRESOURCES.contains(&info.subresource.as_str()))
}

/// Runs the rest of the chain with `timeout`, answering 504 when it runs out. The handler is dropped at that
/// point (upstream lets it run on in the background; here nothing is left running).
pub async fn with_timeout(
    State(timeout): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    let long_running = request
        .extensions()
        .get::<RequestInfo>()
        .is_some_and(is_long_running);
    if long_running || timeout.is_zero() {
        return next.run(request).await;
    }
    // What the request was, for the metric if it times out (the request itself is gone by then).
    let metrics = request.extensions().get::<Arc<Metrics>>().cloned();
    let info = metrics
        .as_ref()
        .and_then(|_| request.extensions().get::<RequestInfo>().cloned());
    match tokio::time::timeout(timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            if let (Some(metrics), Some(info)) = (metrics, info) {
                super::terminated(&metrics, &info, 504);
            }
            let mut status = Status::failure(504, reason::TIMEOUT, TIMEOUT_MESSAGE);
            status.details = Some(StatusDetails::default());
            status_response(&status)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::middleware::from_fn_with_state;
    use axum::routing::get;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    /// A handler that takes an hour, behind a 50 ms timeout.
    fn app(info: RequestInfo) -> Router {
        Router::new()
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    "done"
                }),
            )
            .route(
                "/watch",
                get(|| async {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    "done"
                }),
            )
            .layer(from_fn_with_state(Duration::from_millis(50), with_timeout))
            .layer(axum::middleware::from_fn(
                move |mut request: Request, next: Next| {
                    let info = info.clone();
                    async move {
                        request.extensions_mut().insert(info);
                        next.run(request).await
                    }
                },
            ))
    }

    fn info(verb: &str) -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            verb: verb.to_string(),
            ..RequestInfo::default()
        }
    }

    #[tokio::test]
    async fn slow_requests_get_504() {
        let response = app(info("get"))
            .oneshot(Request::get("/slow").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), 504);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["reason"], "Timeout");
        assert_eq!(status["code"], 504);
        assert_eq!(
            status["message"],
            "Timeout: request did not complete within the allotted timeout"
        );
    }

    #[tokio::test]
    async fn watches_are_exempt() {
        // The handler outlasts the timeout; exempt, it still answers.
        let response = app(info("watch"))
            .oneshot(Request::get("/watch").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(is_long_running(&RequestInfo {
            is_resource_request: true,
            verb: "get".into(),
            subresource: "log".into(),
            ..RequestInfo::default()
        }));
    }
}
