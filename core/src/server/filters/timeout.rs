//! The request timeout (upstream's `WithTimeoutForNonLongRunningRequests`, `--request-timeout`): a request that is
//! not long-running gets a 504 `Timeout` `Status` when its handler has not answered in time, so that a client
//! that never finishes sending its body (or a stuck backend, or a body whose decoding, patching or validation
//! takes long) cannot hold a request open forever. Watches and other long-running requests are exempt: they end on
//! their own `timeoutSeconds`.

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

/// Upstream's message (the request's context deadline as `pkg/endpoints/handlers/finisher` reports it, behind
/// `NewTimeoutError`'s `Timeout: ` prefix).
pub const TIMEOUT_MESSAGE: &str =
    "Timeout: request did not complete within requested timeout - context deadline exceeded";

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

/// Runs the rest of the chain with `timeout`, answering 504 when it runs out. The chain runs as a task of its own,
/// so that the 504 goes out on time even while the handler holds its thread in CPU-bound work (decoding a large
/// body with `block_in_place`); the task is aborted then, and so stops at its next await point (upstream lets the
/// handler run on in the background).
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
    let mut handler = AbortOnDrop(tokio::spawn(tracing::Instrument::in_current_span(
        next.run(request),
    )));
    match tokio::time::timeout(timeout, &mut handler.0).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => match e.try_into_panic() {
            // The panic filter around this one answers it.
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => {
                let status = Status::failure(500, reason::INTERNAL_ERROR, e.to_string());
                status_response(&status)
            }
        },
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

/// A task aborted when its handle is dropped: a request whose client went away or that timed out leaves
/// nothing running.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
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
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
        );
    }

    /// A handler that holds its thread (CPU-bound work in `block_in_place`) still gets its 504 on time, and what
    /// it would do after that work never happens.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cpu_bound_handlers_get_504_on_time_and_stop() {
        let after = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reached = after.clone();
        let app = Router::new()
            .route(
                "/busy",
                get(move || async move {
                    tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(500)));
                    tokio::task::yield_now().await;
                    reached.store(true, std::sync::atomic::Ordering::SeqCst);
                    "done"
                }),
            )
            .layer(from_fn_with_state(Duration::from_millis(50), with_timeout));
        let start = std::time::Instant::now();
        let response = app
            .oneshot(Request::get("/busy").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), 504);
        assert!(
            start.elapsed() < Duration::from_millis(400),
            "{:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(!after.load(std::sync::atomic::Ordering::SeqCst));
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
