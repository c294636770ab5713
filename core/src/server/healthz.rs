//! `/healthz`, `/livez` and `/readyz`: named checks in upstream's exact text format (`pkg/server/healthz`), so
//! kubelet probes, the aggregator and scripts that read `?verbose` see what they expect.
//!
//! `ok` when all checks pass; with `?verbose` one `[+]name ok` line per check and `<path> check passed`;
//! on failure 500 with `[-]name failed: reason withheld` lines and `<path> check failed` (the reason goes to the
//! log only). `?exclude=name` skips a check. Each check also answers alone at `/<path>/<name>`.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};

use super::ShutdownSignal;
use super::status::not_found;
use crate::metrics::HealthMetrics;
use crate::storage::Storage;

/// How long a storage check waits for the backend.
const STORAGE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The future a check returns: `Ok(())` when healthy, `Err(reason)` otherwise.
pub type CheckFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// One named health check. Cheap to clone.
#[derive(Clone)]
pub struct HealthCheck {
    name: String,
    check: Arc<dyn Fn() -> CheckFuture + Send + Sync>,
}

impl std::fmt::Debug for HealthCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthCheck")
            .field("name", &self.name)
            .finish()
    }
}

impl HealthCheck {
    /// A check named `name` (it is served at `/healthz/<name>` etc.) that runs `check` on every probe.
    ///
    /// ```
    /// use apiserver::server::HealthCheck;
    /// let storage = HealthCheck::new("etcd", || async { Ok(()) });
    /// assert_eq!(storage.name(), "etcd");
    /// ```
    pub fn new<F, Fut>(name: impl Into<String>, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        HealthCheck {
            name: name.into(),
            check: Arc::new(move || Box::pin(check())),
        }
    }

    /// `ping`: always healthy; proves the server answers.
    pub fn ping() -> Self {
        Self::new("ping", || async { Ok(()) })
    }

    /// `log`: upstream checks that logging is not blocked. Our logging (tracing) never blocks the caller,
    /// so this is always healthy; it exists so probes and scripts find the same names.
    pub fn log() -> Self {
        Self::new("log", || async { Ok(()) })
    }

    /// `shutdown` (readyz only): fails once shutdown has been initiated, so load balancers stop sending
    /// traffic during `--shutdown-delay-duration`.
    pub fn shutdown(signal: ShutdownSignal) -> Self {
        Self::new("shutdown", move || {
            let initiated = signal.is_initiated();
            async move {
                if initiated {
                    Err("process is shutting down".to_string())
                } else {
                    Ok(())
                }
            }
        })
    }

    /// `name` (upstream: `etcd`, `etcd-readiness`): the backend answers within two seconds, upstream's
    /// `--etcd-healthcheck-timeout` and `--etcd-readycheck-timeout` defaults.
    pub fn storage(name: impl Into<String>, storage: Arc<dyn Storage>) -> Self {
        Self::new(name, move || {
            let storage = storage.clone();
            async move {
                match tokio::time::timeout(STORAGE_CHECK_TIMEOUT, storage.readiness()).await {
                    Ok(result) => result.map_err(|e| e.to_string()),
                    Err(_) => Err(format!(
                        "the backend did not answer within {STORAGE_CHECK_TIMEOUT:?}"
                    )),
                }
            }
        })
    }

    /// The check's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs the check.
    pub async fn check(&self) -> Result<(), String> {
        (self.check)().await
    }
}

/// Tracks one post-start hook for its `poststarthook/<name>` check: failing until the hook has finished.
#[derive(Clone, Debug, Default)]
pub(crate) struct HookStatus(Arc<Mutex<Option<Result<(), String>>>>);

impl HookStatus {
    pub(crate) fn finish(&self, result: Result<(), String>) {
        if let Ok(mut state) = self.0.lock() {
            *state = Some(result);
        }
    }

    pub(crate) fn check(&self, name: &str) -> HealthCheck {
        let status = self.clone();
        HealthCheck::new(format!("poststarthook/{name}"), move || {
            let result = match status.0.lock() {
                Ok(state) => match &*state {
                    Some(Ok(())) => Ok(()),
                    Some(Err(e)) => Err(format!("hook failed: {e}")),
                    None => Err("not finished".to_string()),
                },
                Err(_) => Err("hook state poisoned".to_string()),
            };
            async move { result }
        })
    }
}

/// The checks behind one of the three paths, in the order they are listed.
#[derive(Clone, Debug)]
pub struct HealthEndpoint {
    /// `healthz`, `livez` or `readyz`: the path and the word in `... check passed`.
    pub name: &'static str,
    /// The checks, in order.
    pub checks: Vec<HealthCheck>,
    /// Where each check's result is recorded (`kubernetes_healthcheck`, served at `/metrics/slis`).
    metrics: Option<HealthMetrics>,
}

impl HealthEndpoint {
    /// The endpoint with only the built-in `ping` and `log` checks.
    pub fn new(name: &'static str) -> Self {
        HealthEndpoint {
            name,
            checks: vec![HealthCheck::ping(), HealthCheck::log()],
            metrics: None,
        }
    }

    /// Records each check's result in `metrics` whenever the endpoint runs it.
    pub fn with_metrics(mut self, metrics: HealthMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The router for `/<name>` and `/<name>/<check>`.
    pub fn router(self) -> Router {
        let root = format!("/{}", self.name);
        let single = format!("/{}/{{*check}}", self.name);
        let endpoint = Arc::new(self);
        Router::new()
            .route(&root, get(root_handler))
            .route(&single, get(single_handler))
            .with_state(endpoint)
    }

    /// Runs the checks and renders upstream's body. `query` is the raw query string.
    pub async fn render(&self, query: Option<&str>) -> (StatusCode, String) {
        let mut excluded = BTreeSet::new();
        let mut verbose = false;
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match &*key {
                "exclude" => {
                    excluded.insert(value.into_owned());
                }
                "verbose" => verbose = true,
                _ => {}
            }
        }

        let mut output = String::new();
        let mut failed = Vec::new();
        for check in &self.checks {
            if excluded.remove(check.name()) {
                output.push_str(&format!("[+]{} excluded: ok\n", check.name()));
                continue;
            }
            let result = check.check().await;
            if let Some(metrics) = &self.metrics {
                metrics.checked(self.name, check.name(), result.is_ok());
            }
            match result {
                Ok(()) => output.push_str(&format!("[+]{} ok\n", check.name())),
                Err(reason) => {
                    // The endpoint is public: the reason goes to the log only.
                    output.push_str(&format!("[-]{} failed: reason withheld\n", check.name()));
                    tracing::info!(
                        check = check.name(),
                        endpoint = self.name,
                        "health check failed: {reason}"
                    );
                    failed.push(check.name().to_string());
                }
            }
        }
        if !excluded.is_empty() {
            let quoted: Vec<String> = excluded
                .iter()
                .map(|n| apiserver_gotext::quote(n))
                .collect();
            output.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for {}\n",
                quoted.join(",")
            ));
        }
        if !failed.is_empty() {
            // Upstream writes this with http.Error, which ends the body with a newline.
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{output}{} check failed\n", self.name),
            );
        }
        if verbose {
            (
                StatusCode::OK,
                format!("{output}{} check passed\n", self.name),
            )
        } else {
            (StatusCode::OK, "ok".to_string())
        }
    }
}

fn text(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
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

async fn root_handler(
    State(endpoint): State<Arc<HealthEndpoint>>,
    RawQuery(query): RawQuery,
) -> Response {
    let (status, body) = endpoint.render(query.as_deref()).await;
    text(status, body)
}

async fn single_handler(
    State(endpoint): State<Arc<HealthEndpoint>>,
    Path(name): Path<String>,
) -> Response {
    let Some(check) = endpoint.checks.iter().find(|c| c.name() == name) else {
        return not_found();
    };
    match check.check().await {
        Ok(()) => text(StatusCode::OK, "ok".to_string()),
        Err(reason) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(fail: bool) -> HealthEndpoint {
        let mut e = HealthEndpoint::new("healthz");
        e.checks.push(HealthCheck::new("etcd", move || async move {
            if fail {
                Err("connection refused".into())
            } else {
                Ok(())
            }
        }));
        e
    }

    #[tokio::test]
    async fn formats() {
        assert_eq!(
            endpoint(false).render(None).await,
            (StatusCode::OK, "ok".into())
        );
        assert_eq!(
            endpoint(false).render(Some("verbose")).await,
            (
                StatusCode::OK,
                "[+]ping ok\n[+]log ok\n[+]etcd ok\nhealthz check passed\n".into()
            )
        );
        assert_eq!(
            endpoint(true).render(None).await,
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\nhealthz check failed\n"
                    .into()
            )
        );
        assert_eq!(
            endpoint(true).render(Some("verbose&exclude=etcd&exclude=nope")).await,
            (
                StatusCode::OK,
                "[+]ping ok\n[+]log ok\n[+]etcd excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n".into()
            )
        );
    }

    #[tokio::test]
    async fn hooks_and_shutdown() {
        let hook = HookStatus::default();
        let check = hook.check("start-informers");
        assert_eq!(check.name(), "poststarthook/start-informers");
        assert_eq!(check.check().await, Err("not finished".into()));
        hook.finish(Ok(()));
        assert_eq!(check.check().await, Ok(()));

        let signal = ShutdownSignal::new();
        let shutdown = HealthCheck::shutdown(signal.clone());
        assert_eq!(shutdown.check().await, Ok(()));
        signal.initiate();
        assert_eq!(
            shutdown.check().await,
            Err("process is shutting down".into())
        );
    }
}
