//! Max in flight (upstream's `WithMaxInFlightLimit`): at most `--max-requests-inflight` read-only and
//! `--max-mutating-requests-inflight` mutating requests are served at once; more get 429 with `Retry-After: 1`.
//! Long-running requests (watches) and `system:masters` are not limited by those; 0 turns a limit off.
//!
//! Watches have limits of their own, which upstream does not have: at most `--max-watches` open at once on the
//! server and `--max-watches-per-connection` on one connection (each watch holds memory for as long as it is
//! open), for every user, `system:masters` included; more get the same 429. Within the server's limit each user
//! has a share, `--max-watches-per-user` (a tenth by default; `system:masters` exempt), so that one user holding
//! watches cannot lock the others out: upstream has no such cap, but API Priority and Fairness isolates one
//! user's flow from the others' (see `docs/divergences.md`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use tokio::sync::Semaphore;

use crate::auth::{SYSTEM_PRIVILEGED_GROUP, User};
use crate::metrics::Metrics;
use crate::request::RequestInfo;

/// The pools of request slots.
#[derive(Clone, Debug)]
pub struct InFlightLimits {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
    watches: Option<Arc<Semaphore>>,
    watches_per_connection: usize,
    watches_per_user: Option<UserWatches>,
}

impl InFlightLimits {
    /// Limits of `read_only` and `mutating` requests at once; 0 is no limit. Watches are not limited.
    pub fn new(read_only: u32, mutating: u32) -> Self {
        InFlightLimits {
            read_only: pool(read_only),
            mutating: pool(mutating),
            watches: None,
            watches_per_connection: 0,
            watches_per_user: None,
        }
    }

    /// At most `total` watches open on the server and `per_connection` on one connection; 0 is no limit.
    pub fn with_watches(mut self, total: u32, per_connection: u32) -> Self {
        self.watches = pool(total);
        self.watches_per_connection = per_connection as usize;
        self
    }

    /// At most `limit` watches open at once for one user (`system:masters` exempt); 0 is no limit.
    pub fn with_watches_per_user(mut self, limit: u32) -> Self {
        self.watches_per_user = (limit > 0).then(|| UserWatches {
            limit: limit as usize,
            open: Arc::default(),
        });
        self
    }
}

/// The watches each user has open, by user name (as API Priority and Fairness tells flows apart `ByUser`).
#[derive(Clone, Debug)]
struct UserWatches {
    limit: usize,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

impl UserWatches {
    /// A slot if `user` has fewer than the limit open.
    fn take(&self, user: &str) -> Option<UserWatchSlot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(user.to_string()).or_default();
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(UserWatchSlot {
            open: self.open.clone(),
            user: user.to_string(),
        })
    }
}

/// One open watch of a user, given back when dropped (the user's entry goes once it has none).
struct UserWatchSlot {
    open: Arc<Mutex<HashMap<String, usize>>>,
    user: String,
}

impl Drop for UserWatchSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.user);
            }
        }
    }
}

fn pool(n: u32) -> Option<Arc<Semaphore>> {
    (n > 0).then(|| Arc::new(Semaphore::new(n as usize)))
}

/// The watches open on one connection: the server puts one in the extensions of every request of a connection.
#[derive(Clone, Debug, Default)]
pub struct ConnectionWatches(Arc<AtomicUsize>);

impl ConnectionWatches {
    /// A slot if fewer than `limit` watches are open on the connection.
    fn take(&self, limit: usize) -> Option<ConnectionWatchSlot> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < limit).then_some(open + 1)
            })
            .ok()
            .map(|_| ConnectionWatchSlot(self.0.clone()))
    }
}

/// One open watch of a connection, given back when dropped.
struct ConnectionWatchSlot(Arc<AtomicUsize>);

impl Drop for ConnectionWatchSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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
    if info.is_some_and(|i| i.verb == "watch") {
        return watch(&limits, exempt, request, next).await;
    }
    let long_running = info.is_some_and(|i| i.verb == "proxy");
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
        return rejected(&request);
    };
    hold(next.run(request).await, permit)
}

/// Serves a watch if its user's share, the server and the connection have room for one more.
async fn watch(limits: &InFlightLimits, exempt: bool, request: Request, next: Next) -> Response {
    let user = match (&limits.watches_per_user, request.extensions().get::<User>()) {
        (Some(users), Some(user)) if !exempt => match users.take(&user.name) {
            Some(slot) => Some(slot),
            None => return rejected(&request),
        },
        _ => None,
    };
    let total = match &limits.watches {
        Some(pool) => match pool.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => return rejected(&request),
        },
        None => None,
    };
    let connection = match request.extensions().get::<ConnectionWatches>() {
        Some(open) if limits.watches_per_connection > 0 => {
            match open.take(limits.watches_per_connection) {
                Some(slot) => Some(slot),
                None => return rejected(&request),
            }
        }
        _ => None,
    };
    hold(next.run(request).await, (user, total, connection))
}

/// Holds `slot` until the response's body has been sent (or dropped), not only until the handler returned.
fn hold<T: Send + Sync + 'static>(response: Response, slot: T) -> Response {
    let (parts, body) = response.into_parts();
    let body = axum::body::Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
        let _held = &slot;
        frame
    }));
    Response::from_parts(parts, body)
}

/// The 429, counted as a terminated request.
fn rejected(request: &Request) -> Response {
    if let (Some(metrics), Some(info)) = (
        request.extensions().get::<Arc<Metrics>>(),
        request.extensions().get::<RequestInfo>(),
    ) {
        super::terminated(metrics, info, 429);
    }
    too_many_requests()
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
