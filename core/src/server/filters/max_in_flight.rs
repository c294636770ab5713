//! Max in flight (upstream's `WithMaxInFlightLimit`): at most `--max-requests-inflight` read-only and
//! `--max-mutating-requests-inflight` mutating requests are served at once; more get 429 with `Retry-After: 1`.
//! Long-running requests (watches) and `system:masters` are never limited; 0 turns a limit off.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use tokio::sync::Semaphore;

use crate::auth::{SYSTEM_PRIVILEGED_GROUP, User};
use crate::metrics::Metrics;
use crate::request::RequestInfo;

/// The two pools of request slots.
#[derive(Clone, Debug)]
pub struct InFlightLimits {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
}

impl InFlightLimits {
    /// Limits of `read_only` and `mutating` requests at once; 0 is no limit.
    pub fn new(read_only: u32, mutating: u32) -> Self {
        let pool = |n: u32| (n > 0).then(|| Arc::new(Semaphore::new(n as usize)));
        InFlightLimits {
            read_only: pool(read_only),
            mutating: pool(mutating),
        }
    }
}

/// Verbs that change state.
fn is_mutating(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

/// Serves the request if a slot is free; the slot is held until the response is complete.
pub async fn limit(State(limits): State<InFlightLimits>, request: Request, next: Next) -> Response {
    let exempt = request
        .extensions()
        .get::<User>()
        .is_some_and(|u| u.in_group(SYSTEM_PRIVILEGED_GROUP));
    let info = request.extensions().get::<RequestInfo>();
    let long_running = info.is_some_and(|i| i.verb == "watch" || i.verb == "proxy");
    if exempt || long_running {
        return next.run(request).await;
    }
    let mutating = match info {
        Some(i) if i.is_resource_request => is_mutating(&i.verb),
        _ => !matches!(
            *request.method(),
            http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
        ),
    };
    let pool = if mutating {
        &limits.mutating
    } else {
        &limits.read_only
    };
    let Some(pool) = pool else {
        return next.run(request).await;
    };
    let Ok(permit) = pool.clone().try_acquire_owned() else {
        if let (Some(metrics), Some(info)) = (
            request.extensions().get::<Arc<Metrics>>(),
            request.extensions().get::<RequestInfo>(),
        ) {
            super::terminated(metrics, info, 429);
        }
        return too_many_requests();
    };
    let response = next.run(request).await;
    // Hold the slot until the body has been sent, not only until the handler returned.
    let (parts, body) = response.into_parts();
    let body = axum::body::Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
        let _held = &permit;
        frame
    }));
    Response::from_parts(parts, body)
}

/// Upstream's answer: a plain-text 429 (`http.Error`), not a `Status`.
fn too_many_requests() -> Response {
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        "Too many requests, please try again later.\n",
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
